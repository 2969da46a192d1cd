# Two commands on a fresh machine: `make serve` and `make test` (see README.md).
PYTHON ?= python3
PORT ?= 8000

.PHONY: install serve test lint bench

install:
	$(PYTHON) -m pip install -q -e ".[test]"

serve: install
	$(PYTHON) demos/digits_mlp.py

lint:
	$(PYTHON) -m ruff check core tests demos bench server

test: install lint
	$(PYTHON) -m pytest tests

bench: install
	$(PYTHON) bench/mlp_step.py
