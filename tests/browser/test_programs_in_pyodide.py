"""The program suite (tests/programs/) inside Pyodide: each script runs on "cpu" in the page (wasm numpy)
and its losses are compared with torch's run of the same script natively, with the tolerances of
tests/test_programs.py. The scripts and the files they read are copied into the page's file system.
"""
from __future__ import annotations

import numpy as np
import pytest

from .conftest import install_files_code, project_files

# Those that cover the most surface per second in Pyodide: DataLoader + CNN + Adadelta/StepLR, a
# transformer with AdamW groups and a checkpoint saved and loaded in the page, schedulers, and a
# custom autograd.Function compared point by point.
IN_PAGE = ["quickstart", "mnist_cnn", "tiny_gpt", "regression", "custom_function"]

RUN = """
import contextlib, io, runpy, sys
sys.argv = ["/home/pyodide/webgrad/tests/programs/{name}.py", "--no-accel"]
with contextlib.redirect_stdout(io.StringIO()):
    scope = runpy.run_path(sys.argv[0], run_name="__main__")
[float(v) for v in scope["losses"]]
"""


@pytest.fixture(scope="module")
def programs_runtime(webgpu_runtime):
    files = project_files("tests/programs/*.py", "demos/data/digits.npz", "core/datasets/tiny_text.txt")
    webgpu_runtime.ok(install_files_code(files))
    return webgpu_runtime


@pytest.mark.parametrize("name", IN_PAGE)
def test_program_in_pyodide_matches_torch(programs_runtime, name):
    import test_programs

    losses = np.array(programs_runtime.ok(RUN.format(name=name), timeout_s=600)["result"], float)
    theirs = np.array(test_programs.run_program(name, "torch", "cpu")["losses"], float)
    rtol, atol, first_rtol = test_programs.CASES[name]
    assert len(losses) == len(theirs) > 1 and np.isfinite(losses).all()
    assert losses[-1] < losses[0]
    test_programs._check_close(name, -1, losses, theirs, rtol, atol)
    if first_rtol is not None:
        test_programs._check_close(name, 0, losses, theirs, first_rtol, 0.0)
    if name in test_programs.STEPWISE:
        np.testing.assert_allclose(losses, theirs, rtol=rtol, atol=atol)
