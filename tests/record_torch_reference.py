"""Record torch's answers for the tests that use the ``torch_ref`` fixture.

    python tests/record_torch_reference.py [test files...]

Runs the files (by default every tests/test_*.py that uses ``torch_ref``/``torch_value``) on the
cpu with WEBGRAD_TORCH_REFERENCE=record and writes tests/data/torch_reference/<file>.npz,
which the suite reads where torch is missing (inside Pyodide). Needs torch installed.
A native run afterwards compares every recorded value with torch again.
"""
from __future__ import annotations

import os
import pathlib
import sys

TESTS = pathlib.Path(__file__).resolve().parent


def main(argv: list[str]) -> int:
    os.environ["WEBGRAD_TORCH_REFERENCE"] = "record"
    os.environ["WEBGRAD_TEST_DEVICES"] = "cpu"  # torch runs on the cpu whatever device webgrad uses
    import pytest
    import torch  # noqa: F401  (fail here, not in every test, when torch is missing)

    files = argv or sorted(str(p) for p in TESTS.glob("test_*.py")
                           if any(name in p.read_text() for name in ("torch_ref", "torch_value")))
    code = pytest.main([*files, "-q", "-p", "no:cacheprovider"])
    if code != 0:
        print(f"pytest exited {code}: nothing written (fix the tests first)", file=sys.stderr)
        return int(code)
    import torch_reference  # the module pytest loaded from tests/

    for path in torch_reference.write_recorded():
        print(f"wrote {path.relative_to(TESTS.parent)}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
