"""The page-side Python of the browser runtime, natively: ``webgrad.web.worker.call`` (the
``call`` message) and ``webgrad.web.runner`` (what ``python -m webgrad.browser`` calls in the page)."""
from __future__ import annotations

import base64
import io
import os
import sys
import zipfile

import numpy as np
import pytest

import webgrad
from conftest import run_async
from webgrad.web import runner, worker


def call(module, function, *args):
    return run_async(worker.call(module, function, args))


# ----------------------------------------------------------------------------- call

def test_call_runs_a_webgrad_function_and_awaits_coroutines():
    assert call("webgrad.web.worker", "jsonable", (1, 2)) == {"ok": True, "result": [1, 2]}
    out = call("webgrad.store", "info_async", "http://127.0.0.1:9/api/models/none")
    assert out["ok"] is False and out["traceback"]  # awaited: the coroutine's own failure comes back


def test_an_interrupted_call_leaves_grad_and_autocast_modes_as_it_found_them(monkeypatch):
    """A Stop's KeyboardInterrupt can land as a ``with no_grad()`` block's __enter__ starts, after
    the switch and before the undo is set up: later runs then had no gradients ("backward: tensor
    ... does not require grad" after a demo's Stop). An ordinary error keeps what code switched."""
    from webgrad.ops import autocasting

    def stopped_inside_blocks():
        webgrad.set_grad_enabled(False)  # a block switched, its undo never set up
        autocasting.push("cpu", webgrad.bfloat16, True)
        raise KeyboardInterrupt

    def switched_then_failed():
        webgrad.set_grad_enabled(False)
        raise ValueError("after the switch")
    monkeypatch.setattr(worker, "stopped_inside_blocks", stopped_inside_blocks, raising=False)
    monkeypatch.setattr(worker, "switched_then_failed", switched_then_failed, raising=False)

    async def calls():  # one thread throughout: the modes are per thread
        seen = {"stopped": await worker.call("webgrad.web.worker", "stopped_inside_blocks")}
        seen["after stop"] = (webgrad.is_grad_enabled(), list(autocasting.stack()), autocasting.ACTIVE[0])
        x = webgrad.ones(2, requires_grad=True)
        (x * 3).sum().backward()
        seen["grad"] = x.grad.tolist()
        seen["failed"] = await worker.call("webgrad.web.worker", "switched_then_failed")
        seen["after error"] = webgrad.is_grad_enabled()
        webgrad.set_grad_enabled(True)
        return seen
    seen = run_async(calls())
    assert seen["stopped"]["ok"] is False and "KeyboardInterrupt" in seen["stopped"]["traceback"]
    assert seen["after stop"] == (True, [], 0) and seen["grad"] == [3.0, 3.0]
    assert seen["failed"]["ok"] is False and seen["after error"] is False


def test_call_keeps_flat_arrays_and_bytes_as_buffers():
    values = np.array([1.5, -0.0, np.inf, np.nan], dtype="<f4")
    out = call("webgrad.web.worker", "wire", {"a": values, "raw": memoryview(values.tobytes()), "m": np.eye(2)})
    result = out["result"]
    assert isinstance(result["a"], np.ndarray) and result["a"].tobytes() == values.tobytes()
    assert bytes(result["raw"]) == values.tobytes()
    assert result["m"] == [[1.0, 0.0], [0.0, 1.0]]  # arrays of more dimensions: nested lists, as run() gives


@pytest.mark.parametrize("module, function, message", [
    ("os", "getcwd", "only webgrad's own modules (webgrad.*) can be called, not 'os'"),
    ("webgradx.evil", "f", "only webgrad's own modules"),
    ("webgrad.no_such_module", "f", "there is no module 'webgrad.no_such_module'"),
    ("webgrad.web.worker", "no_such_function", "webgrad.web.worker has no function 'no_such_function'"),
    ("webgrad.web.worker", "_trim", "'_trim' is not a public function name"),
    ("webgrad.web.worker", "CALLABLE", "webgrad.web.worker has no function 'CALLABLE'"),
])
def test_call_refuses_anything_but_public_webgrad_functions(module, function, message):
    out = call(module, function)
    assert out["ok"] is False and out["type"] == "ValueError"
    assert message in out["message"] and out["message"].startswith("ValueError: runtime.call: ")


def test_call_admits_a_module_imported_from_the_working_folder_only(tmp_path, page_state):
    """The page's own Python (a demo's file written into the working folder and imported once) can
    be called; the same file not yet imported, or a module from outside the folder, cannot."""
    work, other = tmp_path / "work", tmp_path / "other"
    work.mkdir()
    other.mkdir()
    (work / "page_demo.py").write_text("def twice(values):\n    return [2 * v for v in values]\n")
    (work / "page_later.py").write_text("def f():\n    return 1\n")
    os.chdir(work)
    sys.path.insert(0, str(work))
    try:
        import page_demo  # noqa: F401 (what the page's one run does: import the file it wrote)

        assert call("page_demo", "twice", [1, 2.5]) == {"ok": True, "result": [2, 5.0]}
        for module in ("page_later", "json", "pytest"):  # not imported yet; the stdlib; site-packages
            assert module == "page_later" or module in sys.modules
            out = call(module, "f")
            assert out["ok"] is False and "besides modules imported from the working folder" in out["message"]
        assert "page_later" not in sys.modules  # a call never imports the page's files
        os.chdir(other)  # the same module, once the working folder is another one
        assert call("page_demo", "twice", [1])["ok"] is False
    finally:
        sys.modules.pop("page_demo", None)


def test_call_reports_the_functions_own_error_with_its_frames():
    out = call("webgrad.web.widget", "predict", "nothing-loaded", b"", [1, 0])
    assert out["ok"] is False and out["type"] == "WidgetError"
    assert "no model loaded under 'nothing-loaded'" in out["message"]
    assert "widget.py" in out["traceback"]


# ----------------------------------------------------------------------------- runner

def zipped(files: dict[str, bytes]) -> str:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        for name, data in files.items():
            archive.writestr(name, data)
    return base64.b64encode(buffer.getvalue()).decode()


def unzipped(encoded: str) -> dict[str, bytes]:
    with zipfile.ZipFile(io.BytesIO(base64.b64decode(encoded))) as archive:
        return {name: archive.read(name) for name in archive.namelist()}


@pytest.fixture
def page_state(monkeypatch):
    """sys.path, sys.argv and the working folder as they were, after a test that enters a folder."""
    monkeypatch.setattr(sys, "path", list(sys.path))
    monkeypatch.setattr(sys, "argv", list(sys.argv))
    monkeypatch.chdir(os.getcwd())


def test_put_snapshot_and_changed_give_back_only_what_was_written(tmp_path, page_state):
    target = str(tmp_path / "work")
    runner.put(zipped({"a.txt": b"a", "sub/b.txt": b"b"}), target)
    assert (tmp_path / "work" / "sub" / "b.txt").read_bytes() == b"b" and sys.path[0] == target
    runner.snapshot(target)
    (tmp_path / "work" / "new.txt").write_bytes(b"new")
    (tmp_path / "work" / "a.txt").write_bytes(b"changed")
    assert unzipped(runner.changed(target)) == {"new.txt": b"new", "a.txt": b"changed"}
    assert runner.read_text(str(tmp_path / "work" / "a.txt")) == "changed"


def test_run_script_gives_the_exit_status_argv_and_the_scripts_own_traceback(tmp_path, capsys, page_state):
    runner.enter(str(tmp_path), "cpu")
    assert os.getcwd() == str(tmp_path)
    (tmp_path / "ok.py").write_text("import sys\nprint(sys.argv[1:])\n")
    (tmp_path / "exits.py").write_text("raise SystemExit(3)\n")
    (tmp_path / "fails.py").write_text("def f():\n    raise ValueError('bad')\nf()\n")
    assert runner.run_script("ok.py", ["--x", "1"]) == 0
    assert runner.run_script("exits.py", []) == 3
    assert runner.run_script("fails.py", []) == 1
    out = capsys.readouterr()
    assert "['--x', '1']" in out.out
    assert "ValueError: bad" in out.err and "runpy" not in out.err and "fails.py" in out.err


def test_call_test_rewrites_asserts_and_reports_a_failure_or_none(tmp_path):
    (tmp_path / "test_page.py").write_text("def test_ok():\n    assert 1 + 1 == 2\n\n"
                                           "def test_bad():\n    x = 3\n    assert x == 4\n")
    path = str(tmp_path / "test_page.py")
    assert runner.call_test(path, "test_ok") is None
    failure = runner.call_test(path, "test_bad")
    assert "AssertionError" in failure and "assert 3 == 4" in failure  # pytest's rewritten message
