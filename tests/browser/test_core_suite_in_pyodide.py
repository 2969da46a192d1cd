"""The core test suite (nn, functional, autograd, optim, data, serialize, tensor, rnn,
transformer) run by pytest inside Pyodide in headless Chromium, once per device.

The files and tests/conftest.py are the ones the native run uses, copied into the
page's file system with tests/data/torch_reference/ (torch does not exist in Pyodide:
tests that compare against torch read the values recorded natively, see
tests/torch_reference.py). Each file runs in its own pytest.main call so one slow file
cannot use up another's time, and a small plugin counts outcomes and skip reasons.
"""
from __future__ import annotations

import json

import pytest

from .conftest import Runtime, install_files_code, project_files, require
from .test_in_pyodide import INSTALL_PYTEST

FILES = ["test_nn_modules.py", "test_nn_functional.py", "test_autograd.py", "test_autograd_function.py",
         "test_optim.py", "test_optim_more.py", "test_data.py", "test_serialize.py", "test_tensor.py",
         "test_rnn.py", "test_transformer.py", "test_opinfo.py"]

# Passing tests per file and device, at least: what passed in a real run (the test prints
# its report), so tests that start skipping in the page (a torch call left unrecorded) fail.
# Known differences of Pyodide, deselected in the page only (each is a finding for core/).
# linalg.eigh: eigenvectors are unique up to sign, and Pyodide's LAPACK picks other signs than
# the native numpy's for some OpInfo samples (eigenvalues agree); the test compares them as torch gives them.
DESELECT: list[str] = [f"test_opinfo.py::test_entry[linalg.eigh-{config}]"
                       for config in ("cpu-float64", "cpu-float32", "webgpu-float32")]

# test_opinfo.py: one test per recorded OpInfo entry and config (cpu: float64 and float32, webgpu:
# float32) plus its three status tests; the recording is replayed there (tests/data/opinfo).
OPINFO_CPU, OPINFO_WEBGPU = 1002, 509
_COMMON = {"test_nn_modules.py": 17, "test_autograd.py": 71, "test_autograd_function.py": 13, "test_optim.py": 118,
           "test_optim_more.py": 33, "test_data.py": 33, "test_serialize.py": 45, "test_tensor.py": 53,
           "test_rnn.py": 3, "test_transformer.py": 7}
FLOORS = {
    "cpu": {**_COMMON, "test_nn_functional.py": 269,  # float32 and float64
            "test_opinfo.py": OPINFO_CPU},
    "webgpu": {**_COMMON, "test_nn_functional.py": 147,  # float32 only (WGSL has no f64)
               "test_opinfo.py": OPINFO_WEBGPU},
}

RUN_FILE = """
import os, sys, collections
os.environ["WEBGRAD_TEST_DEVICES"] = {devices!r}
os.chdir("/home/pyodide/webgrad/tests")
for name in [m for m in sys.modules if m.startswith(("conftest", "test_", "op_cases", "torch_reference"))]:
    del sys.modules[name]  # a fresh conftest reads WEBGRAD_TEST_DEVICES again
import pytest, webgrad
webgrad.set_default_device("cpu")
webgrad.set_default_dtype(webgrad.float32)

class Count:
    def __init__(self):
        self.outcomes, self.skips, self.failures = collections.Counter(), collections.Counter(), []
    def pytest_runtest_logreport(self, report):
        if report.when == "call" or report.outcome != "passed":
            self.outcomes[report.outcome] += 1
            if report.skipped:
                reason = report.longrepr[2] if isinstance(report.longrepr, tuple) else str(report.longrepr)
                self.skips[reason[:160]] += 1
            elif report.failed:
                self.failures.append(report.nodeid + "\\n" + str(report.longrepr)[-1500:])
    def pytest_collectreport(self, report):
        if report.skipped:
            self.outcomes["module skipped"] += 1
            self.skips["(whole file) " + str(report.longrepr[2])[:160]] += 1
        elif report.failed:
            self.failures.append("collecting: " + str(report.longrepr)[-1500:])

count = Count()
deselect = [f"--deselect={{d}}" for d in {deselect!r}]
code = pytest.main([{file!r}, *deselect, "-q", "-p", "no:cacheprovider", "-p", "no:faulthandler", "--capture=sys",
                    "-W", "ignore::pytest.PytestUnraisableExceptionWarning"], plugins=[count])
{{"exit": int(code), "outcomes": dict(count.outcomes), "skips": dict(count.skips), "failures": count.failures[:5]}}
"""


@pytest.fixture(scope="module")
def core_runtime(browser, server_url):
    """A page of its own (the suite changes global defaults), pytest installed, tests/ copied in."""
    context = browser.new_context()
    runtime = Runtime(context.new_page())
    runtime.boot(server_url + "?device=webgpu")
    assert runtime.ok(INSTALL_PYTEST)["result"]
    files = project_files("tests/*.py", "tests/data/torch_reference/*.npz",
                          "tests/data/opinfo/*", "demos/*.py", "demos/data/*.py",
                          "demos/data/*.npz")
    runtime.ok(install_files_code(files))
    yield runtime
    context.close()


@pytest.mark.parametrize("devices", ["cpu", "webgpu"])
def test_core_suite_in_pyodide(core_runtime, devices):
    if devices == "webgpu":
        require(core_runtime.info()["device"] == "webgpu", "the page has no WebGPU device")
    report, problems = {}, []
    for file in FILES:
        out = core_runtime.run(RUN_FILE.format(devices=devices, file=file, deselect=DESELECT), timeout_s=600)
        assert "error" not in out, f"{file}: {out['error']['traceback'] or out['error']['message']}"
        result = out["result"]
        report[file] = {"outcomes": result["outcomes"], "skips": result["skips"]}
        # exit 5 = nothing collected ran (a whole file skipped); its floor decides
        if result["exit"] not in (0, 5) or result["failures"]:
            problems.append(f"{file}: pytest exited {result['exit']}\n" + "\n".join(result["failures"])
                            + "\n" + out["stdout"][-3000:])
        passed = result["outcomes"].get("passed", 0)
        floor = FLOORS[devices][file]
        if passed < floor:
            problems.append(f"{file}: {passed} passed in Pyodide ({devices}), expected at least {floor}: "
                            f"{json.dumps(result['skips'])}")
    print(f"Pyodide core suite ({devices}):", json.dumps(report, indent=1))
    assert not problems, "\n\n".join(problems)
