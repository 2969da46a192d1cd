"""``python -m webgrad.browser`` and the pytest plugin, run as a user runs them: on the
example project in demos/browser_project/ (a model, a training script, two test files,
one failing on purpose), against the session's site (``--url``), in subprocesses."""
from __future__ import annotations

import json
import subprocess
import sys
import xml.etree.ElementTree as ElementTree

import pytest

from .conftest import REPO

PROJECT = REPO / "demos" / "browser_project"


def webgrad_browser(*args, cwd=PROJECT, timeout=300) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "webgrad.browser", *args], cwd=cwd, capture_output=True,
                          text=True, timeout=timeout)


def test_run_streams_output_and_copies_files_back(server_url, tmp_path):
    out = tmp_path / "out"
    done = webgrad_browser("run", "train.py", "--files", "model.py", "--device", "cpu", "--url", server_url,
                           "--out", str(out), "--", "--steps", "30")
    assert done.returncode == 0, done.stdout + done.stderr
    # The same numbers as a native run of the same script (same seed, same maths on numpy).
    for name in ("train.py", "model.py"):
        (tmp_path / name).write_bytes((PROJECT / name).read_bytes())
    native = subprocess.run([sys.executable, "train.py", "--steps", "30"], cwd=tmp_path, capture_output=True,
                            text=True, timeout=120)
    assert native.returncode == 0 and native.stdout.startswith("device cpu: loss "), native.stderr
    assert native.stdout.strip() in done.stdout, (native.stdout, done.stdout)
    assert "runtime ready on cpu" in done.stderr
    progress = [json.loads(line.split(": ", 1)[1]) for line in done.stderr.splitlines()
                if line.startswith("webgrad_progress: ")]
    assert [p["step"] for p in progress] == [0, 10, 20]
    assert sorted(p.name for p in out.iterdir()) == ["losses.json", "model.safetensors"]
    assert len(json.loads((out / "losses.json").read_text())) == 30
    import webgrad

    state = webgrad.load(str(out / "model.safetensors"))
    assert tuple(state["0.weight"].shape) == (16, 1)


def test_script_exception_exits_1_with_its_traceback(server_url, tmp_path):
    (tmp_path / "broken.py").write_text(
        "import webgrad\n\ndef f():\n    return webgrad.ones(2) @ webgrad.ones(3)\n\nf()\n")
    done = webgrad_browser("run", "broken.py", "--device", "cpu", "--url", server_url, cwd=tmp_path)
    assert done.returncode == 1, done.stdout + done.stderr
    assert 'broken.py", line 6, in <module>' in done.stderr and 'line 4, in f' in done.stderr, done.stderr
    assert "RuntimeError" in done.stderr or "OpError" in done.stderr or "Error" in done.stderr.splitlines()[-1]
    assert "runpy" not in done.stderr  # the traceback starts at the user's script


def test_exit_status_and_argv_reach_the_script(server_url, tmp_path):
    (tmp_path / "exits.py").write_text("import sys\nprint(sys.argv[1:])\nsys.exit(int(sys.argv[1]))\n")
    done = webgrad_browser("run", "exits.py", "--device", "cpu", "--url", server_url, "--", "3", "x", cwd=tmp_path)
    assert done.returncode == 3, done.stdout + done.stderr
    assert "['3', 'x']" in done.stdout


def test_timeout_interrupts_and_exits_124(server_url, tmp_path):
    (tmp_path / "forever.py").write_text("print('started', flush=True)\nwhile True:\n    pass\n")
    done = webgrad_browser("run", "forever.py", "--device", "cpu", "--url", server_url, "--timeout", "5",
                           cwd=tmp_path)
    assert done.returncode == 124, done.stdout + done.stderr
    assert "started" in done.stdout
    assert "ran past --timeout 5 s and was interrupted" in done.stderr


def test_pytest_in_the_page_on_webgpu_reports_each_test_and_junit(server_url, tmp_path):
    junit = tmp_path / "junit.xml"
    done = webgrad_browser("pytest", "tests", "--files", "model.py", "--device", "webgpu", "--url", server_url,
                           "--junitxml", str(junit))
    assert done.returncode == 1, done.stdout + done.stderr  # one test fails on purpose
    assert "runtime ready on webgpu" in done.stderr
    assert "test_fails_on_purpose.py::test_wrong_parameter_count_fails_on_purpose FAILED" in done.stdout
    assert "test_model.py::test_runs_on_the_default_device PASSED" in done.stdout
    assert "1 failed, 4 passed" in done.stdout
    # pytest names the report where it lands here, not where the page wrote it first.
    assert f"generated xml file: {junit}" in done.stdout and "/home/pyodide/.webgrad" not in done.stdout
    cases = {case.get("name"): case for case in ElementTree.parse(junit).getroot().iter("testcase")}
    assert set(cases) == {"test_parameter_count", "test_wrong_parameter_count_fails_on_purpose",
                          "test_output_shape", "test_training_lowers_the_loss", "test_runs_on_the_default_device"}
    assert cases["test_wrong_parameter_count_fails_on_purpose"].find("failure") is not None
    assert cases["test_training_lowers_the_loss"].find("failure") is None


def test_pytest_k_selects_and_passes(server_url):
    done = webgrad_browser("pytest", "tests", "--files", "model.py", "--device", "cpu", "--url", server_url,
                           "-k", "output_shape or parameter_count and not wrong")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "2 passed" in done.stdout


def test_pytest_without_junitxml_writes_no_report(server_url):
    done = webgrad_browser("pytest", "tests/test_model.py", "--files", "model.py", "--device", "cpu", "--url",
                           server_url, "-k", "output_shape")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "generated xml file" not in done.stdout


@pytest.mark.parametrize("args, message", [
    (["run", "nonexistent.py"], "nonexistent.py: no such file or folder"),
    (["run", "train.py", "--files", "model.py", "missing/"], "missing/: no such file or folder"),
    (["run", "tests"], "tests: is a folder; `run` takes a Python script"),
    (["pytest", "tests", "missing_test.py"], "missing_test.py: no such file or folder"),
    (["pytest", "tests", "--files", "nope.py"], "nope.py: no such file or folder"),
])
def test_missing_files_are_named_before_chromium_starts(args, message):
    """No browser needed: a Chromium that does not exist is never looked for."""
    done = webgrad_browser(*args, "--chromium", "/nonexistent/chrome", "--url", "http://127.0.0.1:9/", timeout=60)
    assert done.returncode == 2, done.stdout + done.stderr
    assert message in done.stderr, done.stderr
    assert "Chromium" not in done.stderr and "runtime ready" not in done.stderr


def test_missing_chromium_says_what_to_install(server_url):
    done = webgrad_browser("run", "train.py", "--url", server_url, "--chromium", "/nonexistent/chrome")
    assert done.returncode == 2
    assert "no Chromium at /nonexistent/chrome" in done.stderr


PLUGIN_TESTS = '''
import pytest
import webgrad
from helper import double


@pytest.mark.in_browser
def test_runs_in_the_page():
    import sys
    assert sys.platform == "emscripten"
    assert double(webgrad.ones(2)).tolist() == [2.0, 2.0]


@pytest.mark.in_browser
def test_failure_in_the_page_fails_here():
    assert double(webgrad.ones(1)).item() == 3.0


def test_browser_runtime_fixture(browser_runtime):
    assert browser_runtime.device in ("cpu", "webgpu")
    assert browser_runtime.run("import sys\\nsys.platform") == "emscripten"


def test_native_tests_stay_native():
    import sys
    assert sys.platform != "emscripten"
'''


def test_pytest_plugin_marker_and_fixture(server_url, tmp_path):
    (tmp_path / "helper.py").write_text("def double(x):\n    return x * 2\n")
    (tmp_path / "test_plugin_example.py").write_text(PLUGIN_TESTS)
    done = subprocess.run([sys.executable, "-m", "pytest", "test_plugin_example.py", "-v", "-p", "no:cacheprovider",
                           "--webgrad-url", server_url, "--webgrad-device", "cpu", "-o", "addopts="],
                          cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert done.returncode == 1, done.stdout + done.stderr
    assert "test_runs_in_the_page PASSED" in done.stdout
    assert "test_failure_in_the_page_fails_here FAILED" in done.stdout
    assert "in the browser (cpu)" in done.stdout and "assert 2.0 == 3.0" in done.stdout
    assert "test_browser_runtime_fixture PASSED" in done.stdout
    assert "test_native_tests_stay_native PASSED" in done.stdout


def test_example_project_is_documented():
    text = (PROJECT / "README.md").read_text()
    assert "python -m webgrad.browser run" in text and "python -m webgrad.browser pytest" in text
