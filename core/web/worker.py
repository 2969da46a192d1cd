"""What the browser worker runs in Python: boot, one cell per run, files, input().

``web/runtime/worker.js`` calls, through Pyodide:

- ``boot(requested_device, hooks, base_url, adapter)`` once, after the wheel is installed:
  sets up ``webgrad_progress``, ``input()``, line-buffered output and the device,
  and returns what the page shows (device, reason, adapter, versions, timings).
  ``adapter`` is the WebGPU adapter the worker asked for while Pyodide started (or None).
- ``run_cell(code, filename)`` for each run: runs the code in ``__main__`` (top-level
  ``await`` allowed), its source registered in ``linecache`` so tracebacks show lines
  and ``inspect.getsource`` finds classes defined in it; returns
  ``{"ok": True, "result": <JSON-able>, "display": <mime bundle or None>}`` or
  ``{"ok": False, "type", "message", "traceback", "line"}`` with the traceback
  trimmed to the user's frames (Pyodide's own frames dropped, webgrad's kept).
- ``call(module, function, args)`` for each ``call`` message: calls a function of one of
  webgrad's own modules, or of a module the page imported from the working folder (see
  ``resolve``), with ``args`` (typed arrays arrive as memoryviews, no base64 and no
  Python source built in JS); returns ``{"ok": True, "result": <wire value>}`` or the same
  error record as ``run_cell``.
- ``list_files()``: the files the code wrote under the working directory.

``hooks`` is a JS object: ``post_progress(obj)``, ``ask_input(prompt) -> str | None``
(None: cancelled) and ``input_mode`` ("prompt" where the page can answer, else "none").
"""
from __future__ import annotations

import builtins
import importlib
import inspect
import json
import linecache
import os
import signal
import sys
import traceback
import types
from typing import Any

from ..autograd import grad_modes, restore_grad_modes
from ..ops import autocasting

CELL = "<playground>"
MAX_TEXT = 200_000  # characters of a result's repr/HTML sent to the page
# Frames from these files are Pyodide's machinery (or this module): not the user's business.
_MACHINERY = ("/_pyodide/", "/pyodide/", "/asyncio/")

_hooks: Any = None


def jsonable(value: Any, _depth: int = 0) -> Any:
    """``value`` as plain JSON-able Python (dict/list/str/float/int/bool/None); tensors become lists."""
    import numpy as np

    from ..tensor import Tensor

    if _depth > 50:
        return repr(value)
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if isinstance(value, Tensor):
        value = value.detach().cpu().numpy()
    if isinstance(value, np.ndarray):
        return value.tolist()
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, dict):
        return {str(k): jsonable(v, _depth + 1) for k, v in value.items()}
    if isinstance(value, (list, tuple, set, frozenset)):
        return [jsonable(v, _depth + 1) for v in value]
    if isinstance(value, (bytes, bytearray)):
        return list(value)
    return repr(value)


def progress(data: Any = None, /, **fields: Any) -> None:
    """Send a progress event to the page, e.g. ``webgrad_progress({"step": 3, "total": 10, "loss": loss})``.

    Values may be tensors or numpy values; the page receives plain JSON-able data.
    Natively (no page) it does nothing.
    """
    if isinstance(data, dict) or data is None:
        merged = dict(data or {}, **fields)
    else:
        merged = {"value": data, **fields}
    if _hooks is None:
        return
    from pyodide.ffi import to_js

    import js

    _hooks.post_progress(to_js(jsonable(merged), dict_converter=js.Object.fromEntries, create_pyproxies=False))


def _input(prompt: object = "") -> str:
    """``input()`` in the page: asks through the page's prompt box where the page can answer."""
    text = str(prompt)
    if _hooks is None or str(_hooks.input_mode) != "prompt":
        raise EOFError(f"input({text!r}): this page cannot answer input() (it needs a cross-origin isolated "
                       "page, one served with COOP/COEP headers as the webgrad server does, so the worker "
                       "can wait for the answer); set the value in the code instead, e.g. answer = '42'")
    sys.stdout.write(text)
    sys.stdout.flush()
    answer = _hooks.ask_input(text)
    if answer is None:
        sys.stdout.write("\n")
        raise EOFError(f"input({text!r}): the prompt was cancelled")
    sys.stdout.write(str(answer) + "\n")
    return str(answer)


def _describe_adapter(adapter: Any) -> dict:
    """The description ``webgrad.webgpu.adapter_info()`` gives, of an adapter the worker asked for in JS."""
    from ..backend.webgpu.browser import BrowserDevice

    return BrowserDevice._describe(adapter)


def choose_device(requested: str, adapter: Any = None) -> tuple[str, str]:
    """The device for ``requested`` ("auto", "webgpu" or "cpu") and why.

    ``adapter``: the WebGPU adapter the worker already asked for in JS, or None. On "auto" a CPU
    emulation is then refused without making a device (and importing the WebGPU backend).
    """
    if requested == "cpu":
        return "cpu", "device='cpu' was requested"
    if requested == "auto" and adapter is not None:
        info = _describe_adapter(adapter)
        if info.get("adapter_type") == "CPU":
            return "cpu", _emulation_reason(info)
    from .. import webgpu

    if not webgpu.is_available():
        from ..backend.webgpu import _state

        why = _state["error"] or "unknown reason"
        if requested == "webgpu":
            return "cpu", f"device='webgpu' was requested but WebGPU is not available ({why}); using the CPU (numpy)"
        return "cpu", f"WebGPU is not available ({why}); using the CPU (numpy)"
    info = webgpu.adapter_info()
    if requested == "webgpu":
        return "webgpu", f"device='webgpu' was requested (adapter: {_adapter_name(info)})"
    if info.get("adapter_type") == "CPU":
        return "cpu", _emulation_reason(info)
    return "webgpu", f"WebGPU adapter {_adapter_name(info)} is a real GPU"


def _adapter_name(info: dict) -> str:
    return " ".join(v for v in (info.get("vendor"), info.get("architecture"), info.get("device")) if v) or "unnamed"


def _emulation_reason(info: dict) -> str:
    return (f"the WebGPU adapter ({_adapter_name(info)}) is a CPU emulation, where numpy in WebAssembly is "
            f"faster; pass device='webgpu' to use it anyway")


def boot(requested_device: str, hooks: Any, base_url: str, adapter: Any = None) -> dict:
    """Set the interpreter up for the page; returns {device, reason, adapter, versions, timings}.

    ``adapter``: the WebGPU adapter the worker asked for while Pyodide started, or None.
    ``timings``: milliseconds each step here took, for the boot's stage report.
    """
    global _hooks
    import time

    import __main__

    import numpy

    from .. import __version__, set_default_device

    started = time.perf_counter()
    timings: dict[str, int] = {}

    def mark(name: str) -> None:
        timings[name] = round((time.perf_counter() - started) * 1000)

    _hooks = hooks
    signal.signal(signal.SIGINT, _on_interrupt)
    for stream in (sys.stdout, sys.stderr):  # stream output line by line, as a terminal does
        try:
            stream.reconfigure(line_buffering=True)  # type: ignore[union-attr]
        except (AttributeError, ValueError, OSError):
            pass
    module = types.ModuleType("webgrad_runtime", "The browser runtime's hooks: progress(dict) reaches the page.")
    module.progress = progress  # type: ignore[attr-defined]
    sys.modules["webgrad_runtime"] = module
    builtins.input = _input
    requested_device = str(requested_device)
    device, reason = choose_device(requested_device, adapter)
    mark("choose")
    set_default_device(device)
    info = None
    if device == "webgpu":
        from .. import webgpu

        info = webgpu.adapter_info()
    elif requested_device != "cpu":  # described without making a device where JS found an adapter
        if adapter is not None:
            info = _describe_adapter(adapter)
        else:
            from .. import webgpu

            try:
                info = webgpu.adapter_info()
            except Exception:  # no adapter: the reason already says so
                info = None
    mark("adapter")
    __main__.__dict__.update(webgrad_progress=progress, WEBGRAD_DEVICE=device, WEBGRAD_BASE_URL=str(base_url))
    return {"device": device, "reason": reason, "adapter": info, "timings": timings,
            "versions": {"python": sys.version.split()[0], "webgrad": __version__,
                         "numpy": numpy.__version__}}


def _machinery(filename: str) -> bool:
    return filename == __file__ or any(part in filename for part in _MACHINERY)


def _trim(summary: traceback.TracebackException) -> None:
    """Drop the runtime's own frames from ``summary`` and every exception chained to it."""
    seen: set[int] = set()
    todo = [summary]
    while todo:
        current = todo.pop()
        if id(current) in seen:
            continue
        seen.add(id(current))
        frames = [frame for frame in current.stack if not _machinery(frame.filename)]
        current.stack = traceback.StackSummary.from_list(frames)
        todo += [e for e in (current.__cause__, current.__context__) if e is not None]
        todo += list(getattr(current, "exceptions", None) or [])


def describe_error(error: BaseException, filename: str = CELL) -> dict:
    """{ok: False, type, message, traceback, line}: the traceback trimmed to the user's frames,
    ``line`` the last line of ``filename`` it passed through (None if none)."""
    summary = traceback.TracebackException.from_exception(error)
    _trim(summary)
    line = None
    for frame in summary.stack:
        if frame.filename == filename:
            line = frame.lineno
    if isinstance(error, SyntaxError) and error.filename == filename:
        line = error.lineno
    text = "".join(summary.format())
    message = _short_type("".join(summary.format_exception_only()).strip(), type(error))
    return {"ok": False, "type": type(error).__name__, "message": message, "traceback": text, "line": line}


def _short_type(message: str, kind: type) -> str:
    """``message`` with the exception's module path dropped (``OpError: ...``, not
    ``webgrad.ops.registry.OpError: ...``): the status line has room for the class; the
    traceback keeps the full name."""
    qualified = f"{kind.__module__}.{kind.__qualname__}"
    if kind.__module__ in ("builtins", "__main__"):
        return message
    lines = message.split("\n")
    for index, line in enumerate(lines):
        if line == qualified or line.startswith(qualified + ":"):
            lines[index] = kind.__qualname__ + line[len(qualified):]
            break
    return "\n".join(lines)


def display(value: Any) -> dict:
    """The mime bundle the page shows for a cell's value: text/plain (repr) and maybe text/html."""
    bundle: dict = {}
    try:
        rich = importlib.import_module("webgrad.display")  # the rich display, where it exists

        bundle = dict(rich.rich_repr(value) or {})
    except (ImportError, AttributeError):
        html = getattr(value, "_repr_html_", None)
        if callable(html) and not isinstance(value, type):
            rendered = html()
            if isinstance(rendered, str):
                bundle["text/html"] = rendered
    if "text/plain" not in bundle:
        bundle["text/plain"] = repr(value)
    return {key: text[:MAX_TEXT] if isinstance(text, str) else text for key, text in bundle.items()}


def register_source(code: str, filename: str) -> None:
    """Make ``filename`` a source file as far as linecache and inspect know (tracebacks, getsource)."""
    import __main__

    lines = code.splitlines(keepends=True)
    if lines and not lines[-1].endswith("\n"):
        lines[-1] += "\n"
    linecache.cache[filename] = (len(code), None, lines, filename)
    __main__.__file__ = filename  # inspect.getfile(cls) of a class defined in the cell


async def run_cell(code: str, filename: str = CELL) -> dict:
    """Run ``code`` in ``__main__``; the value of its last expression comes back as result and display."""
    return await _answer(_run_cell(code, filename), str(filename))


async def _run_cell(code: str, filename: str) -> dict:
    import __main__

    from pyodide.code import eval_code_async

    from ..display import register_interactive_cell

    code = str(code)
    register_source(code, filename)
    register_interactive_cell(filename)  # its last value is displayed: webgrad.summary need not print it too
    value = await eval_code_async(code, __main__.__dict__, filename=filename)
    if value is None:
        return {"ok": True, "result": None, "display": None}
    return {"ok": True, "result": jsonable(value), "display": display(value)}


async def _answer(work: Any, where: str) -> dict:
    """A run's or call's answer: its own, or its error described (KeyboardInterrupt included).
    After an interrupt, webgrad's grad and autocast modes are put back as the run found them: the
    signal may land between a ``with no_grad()`` block's switch and its undo (a demo's Stop did)."""
    grad_state, autocast_state = grad_modes(), autocasting.thread_state()
    try:
        return await _stoppable(work)
    except BaseException as error:  # noqa: B036 (KeyboardInterrupt and SystemExit are reported too)
        if isinstance(error, KeyboardInterrupt):
            restore_grad_modes(grad_state)
            autocasting.restore_thread_state(autocast_state)
        return describe_error(error, where)
    finally:
        for stream in (sys.stdout, sys.stderr):
            stream.flush()


async def _stoppable(work: Any) -> Any:
    """Awaits ``work``: the one frame under which the page's interrupt may raise (``_on_interrupt``)."""
    return await work


def _on_interrupt(signum: int, frame: Any) -> None:
    """SIGINT, which Pyodide raises when the page writes its interrupt buffer. Python checks for it
    wherever it happens to be: a KeyboardInterrupt raised in Pyodide's code that sets a run up (or in
    a callback between runs) can leave every later run hanging. So it is raised only inside a run's
    or call's own work; elsewhere the worker arms the signal again, for as long as the run it is
    aimed at has not ended, and it lands once that run's code is running."""
    while frame is not None:
        if frame.f_code is _stoppable.__code__:
            raise KeyboardInterrupt
        frame = frame.f_back
    if _hooks is not None:
        _hooks.rearm_interrupt()


CALLABLE = "webgrad"  # the package whose modules a `call` message may name


def _in_working_folder(module: str) -> bool:
    """Whether ``module`` is already imported from a file under the working folder: a file the page
    wrote there (``runtime.files.write``) and imported once (``runtime.run("import NAME")``).
    Nothing is imported here, so a name can never run a module's import-time code; and the
    standard library and site-packages lie outside that folder, so ``os`` or ``subprocess`` stay out."""
    imported = sys.modules.get(module)
    path = getattr(imported, "__file__", None)
    if not isinstance(path, str):
        return False
    folder = os.path.realpath(os.getcwd())
    return os.path.commonpath([folder, os.path.realpath(path)]) == folder


def resolve(module: str, function: str) -> Any:
    """The function ``module.function`` a ``call`` message names; anything else is a ValueError
    saying what may be called. The rule: webgrad's own modules (``webgrad``, ``webgrad.*``, imported
    on demand), and modules already imported from the working folder (the page's own Python, e.g.
    a demo's file); only public names."""
    if module != CALLABLE and not module.startswith(CALLABLE + ".") and not _in_working_folder(module):
        raise ValueError(f"runtime.call: only webgrad's own modules (webgrad.*) can be called, not {module!r}, "
                         "besides modules imported from the working folder (write the file with "
                         "runtime.files.write(path, source), import it once with runtime.run('import NAME')); "
                         "run other Python with runtime.run(code)")
    if not function.isidentifier() or function.startswith("_"):
        raise ValueError(f"runtime.call: {function!r} is not a public function name of {module}")
    try:
        imported = importlib.import_module(module)
    except ModuleNotFoundError:
        raise ValueError(f"runtime.call: there is no module {module!r}") from None
    target = getattr(imported, function, None)
    if not callable(target):
        raise ValueError(f"runtime.call: {module} has no function {function!r}")
    return target


def from_js(value: Any) -> Any:
    """A call's arguments as Python: JS arrays and objects become lists and dicts, typed arrays
    and ArrayBuffers memoryviews (one copy out of the JS heap); native values pass unchanged."""
    to_py = getattr(value, "to_py", None)  # a JsProxy: only in the page
    return to_py() if to_py is not None else value


def wire(value: Any, _depth: int = 0) -> Any:
    """A call's result for the page: as ``jsonable``, except that one-dimensional numpy arrays
    and bytes-like values stay buffers, which reach the page as typed arrays (transferred)."""
    import numpy as np

    if isinstance(value, np.ndarray) and value.ndim == 1:
        return np.ascontiguousarray(value)
    if isinstance(value, (bytes, bytearray, memoryview)):
        return value
    if isinstance(value, dict) and _depth < 50:
        return {str(k): wire(v, _depth + 1) for k, v in value.items()}
    if isinstance(value, (list, tuple)) and _depth < 50:
        return [wire(v, _depth + 1) for v in value]
    return jsonable(value, _depth)


async def call(module: str, function: str, args: Any = ()) -> dict:
    """Call ``module.function(*args)`` (awaited when it is a coroutine) for a ``call`` message."""
    return await _answer(_call(str(module), str(function), args), f"<call {module}.{function}>")


async def _call(module: str, function: str, args: Any) -> dict:
    value = resolve(module, function)(*from_js(args))
    if inspect.isawaitable(value):
        value = await value
    return {"ok": True, "result": wire(value)}


def list_files(root: str | None = None) -> str:
    """JSON list of {path, size, mtime} for the files under ``root`` (default: the working directory)."""
    root = root or os.getcwd()
    found = []
    for directory, subdirs, files in os.walk(root):
        subdirs[:] = sorted(d for d in subdirs if not d.startswith(".") and d != "__pycache__")
        for name in sorted(files):
            if name.startswith("."):
                continue
            path = os.path.join(directory, name)
            info = os.stat(path)
            found.append({"path": os.path.relpath(path, root), "size": info.st_size, "mtime": info.st_mtime})
    return json.dumps(found)
