"""Planted-bug check: does the test suite catch small, realistic bugs?

Each mutant in ``scripts/mutants.py`` is one small patch (replace ``old`` by ``new``
in one file, ``old`` occurring exactly once) plus the test subsets that should fail
on it. This script copies the working tree into a scratch folder (so core/, server/
and wgsl_kernels/ can all be mutated; ``import webgrad`` finds the copy), checks that
each subset passes unmutated, then plants one mutant at a time and runs its subsets.
A mutant is *caught* when a subset fails. The working tree is never touched.

    python scripts/mutation.py                 # every mutant, prints the rate
    python scripts/mutation.py -k gather       # mutants whose id contains "gather"
    python scripts/mutation.py --min-rate 0.95 # exit 1 below that rate (default 0.95)

`make mutation` runs it; it is not part of `make test` (it runs the subsets ~50 times).
"""
from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "scripts"))

from mutants import MUTANTS, Mutant  # noqa: E402


def scratch_copy(target: Path) -> Path:
    """Copy the tracked and untracked-but-not-ignored files into ``target``, and make
    ``target/_import/webgrad`` the package (core/ with wgsl_kernels/ inside, as the wheel lays it out)."""
    listed = subprocess.run(["git", "ls-files", "-co", "--exclude-standard", "-z"], cwd=REPO,
                            capture_output=True, check=True).stdout.decode().split("\0")
    for name in filter(None, listed):
        source = REPO / name
        if source.is_file():
            (target / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, target / name)
    (target / "core" / "wgsl_kernels").symlink_to(target / "wgsl_kernels", target_is_directory=True)
    if (REPO / "node_modules").is_dir():  # the server's asset step runs Pyodide from it (read only)
        (target / "node_modules").symlink_to(REPO / "node_modules", target_is_directory=True)
    (target / "_import").mkdir()
    (target / "_import" / "webgrad").symlink_to(target / "core", target_is_directory=True)
    return target


def run_tests(root: Path, spec: str, timeout_s: float) -> tuple[int, str]:
    """pytest on one subset, ``"path[::node] [-k EXPR]"``, against the scratch copy."""
    path, _, keyword = spec.partition(" -k ")
    env = dict(os.environ, PYTHONPATH=str(root / "_import"), PYTHONDONTWRITEBYTECODE="1")
    command = [sys.executable, "-m", "pytest", "-x", "-q", "-p", "no:cacheprovider", "--timeout", "300", path,
               *(["-k", keyword] if keyword else [])]
    try:
        done = subprocess.run(command, cwd=root, env=env, capture_output=True, text=True, timeout=timeout_s)
    except subprocess.TimeoutExpired:
        return 124, "timed out"
    return done.returncode, (done.stdout + done.stderr)[-1500:]


def check_import(root: Path) -> None:
    env = dict(os.environ, PYTHONPATH=str(root / "_import"))
    found = subprocess.run([sys.executable, "-c", "import webgrad; print(webgrad.__file__)"], cwd=root, env=env,
                           capture_output=True, text=True, check=True).stdout.strip()
    if not found.startswith(str(root)):
        raise SystemExit(f"mutation: `import webgrad` in the scratch copy found {found}, not the copy")


def plant(root: Path, mutant: Mutant) -> str:
    path = root / mutant.file
    text = path.read_text()
    count = text.count(mutant.old)
    if count != 1:
        raise ValueError(f"{mutant.id}: `old` occurs {count} times in {mutant.file} (must be exactly once): "
                         f"the mutant is stale, update scripts/mutants.py")
    path.write_text(text.replace(mutant.old, mutant.new))
    return text


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("-k", default="", help="only mutants whose id contains this")
    parser.add_argument("--min-rate", type=float, default=0.95)
    parser.add_argument("--timeout", type=float, default=600, help="seconds per test run")
    args = parser.parse_args(argv)
    mutants = [m for m in MUTANTS if args.k in m.id]
    with tempfile.TemporaryDirectory(prefix="webgrad-mutation-") as tmp:
        root = scratch_copy(Path(tmp))
        check_import(root)
        caught, survived, stale = [], [], []
        baseline: dict[str, int] = {}  # each subset must pass unmutated, or a "catch" means nothing
        for mutant in mutants:
            started = time.monotonic()
            for spec in mutant.tests:
                if spec not in baseline:
                    baseline[spec], out = run_tests(root, spec, args.timeout)
                    if baseline[spec] != 0:
                        print(f"BASELINE FAILS  {spec}\n{out}", flush=True)
            if any(baseline[spec] != 0 for spec in mutant.tests):
                stale.append(mutant.id)
                continue
            try:
                original = plant(root, mutant)
            except ValueError as err:
                stale.append(mutant.id)
                print(f"STALE     {err}", flush=True)
                continue
            try:  # caught as soon as one subset fails
                failed = any(run_tests(root, spec, args.timeout)[0] != 0 for spec in mutant.tests)
            finally:
                (root / mutant.file).write_text(original)
            verdict = "caught" if failed else "SURVIVED"
            (caught if failed else survived).append(mutant.id)
            print(f"{verdict:9} {mutant.id}  ({time.monotonic() - started:.0f} s)", flush=True)
    tried = len(caught) + len(survived)
    rate = len(caught) / tried if tried else 0.0
    print(f"\n{len(caught)} of {tried} mutants caught ({rate:.0%}); survived: {survived or 'none'}; "
          f"stale or failing baseline: {stale or 'none'}")
    return 0 if rate >= args.min_rate and not stale else 1


if __name__ == "__main__":
    sys.exit(main())
