# Two commands on a fresh machine: `make serve` and `make test` (see README.md).
PYTHON ?= python3
PORT ?= 8000

.PHONY: install serve test lint bench mutation

# Everything the two commands need on a fresh machine (apt, pip, npm, browser assets).
install:
	PYTHON=$(PYTHON) scripts/install-deps

# The site on http://127.0.0.1:$(PORT): the asset step (does nothing when all is in place), then the server.
serve: install
	$(PYTHON) -m server --port $(PORT)

lint:
	$(PYTHON) -m ruff check core tests demos bench server scripts
	$(PYTHON) -m mypy core
	node_modules/.bin/tsc -p web/jsconfig.json  # type-checks the page-side JavaScript (checkJs)

test: install lint
	$(PYTHON) -m pytest tests

# Planted bugs (scripts/mutants.py, run by scripts/mutation.py): each must make its test subset fail. Slow; not part of `make test`.
mutation:
	$(PYTHON) scripts/mutation.py

bench: install
	$(PYTHON) bench/mlp_step.py
