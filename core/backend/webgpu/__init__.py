"""The WebGPU backend. Importing this module creates the device (natively via
wgpu-py, in Pyodide via ``js.navigator.gpu``) and registers device ``"webgpu"``.
Each kernel record names its launcher by import path (``backend.launcher_of``)."""
from __future__ import annotations

from typing import TypedDict

from .. import register
from .backend import WebGPUBackend
from .device import DeviceError


class _State(TypedDict):
    backend: WebGPUBackend | None
    error: DeviceError | None  # why the device could not be made, raised again on every later try


_state: _State = {"backend": None, "error": None}


def _make_device():
    import sys

    if sys.platform == "emscripten":
        from .browser import BrowserDevice

        return BrowserDevice()
    from .device import NativeDevice

    return NativeDevice()


def backend() -> WebGPUBackend:
    made = _state["backend"]
    if made is None:
        if _state["error"] is not None:
            raise _state["error"]
        try:
            made = _state["backend"] = WebGPUBackend(_make_device())
            register("webgpu", made)  # later lookups skip the lazy proxy
        except ImportError as err:
            import sys

            hint = ("this browser exposes no WebGPU" if sys.platform == "emscripten"
                    else "pip install wgpu==0.32.0")
            error = _state["error"] = DeviceError(f"webgpu: not available ({err}); {hint}, or use device='cpu'")
            raise error from err
        except DeviceError as err:
            _state["error"] = err
            raise
    return made


def reset() -> None:
    """Drop the device (webgrad.webgpu.reset); the lazy proxy makes a new one on next use."""
    old, _state["backend"], _state["error"] = _state["backend"], None, None
    register("webgpu", _LazyBackend())
    if old is not None:
        try:
            old.device.close()
        except Exception:  # a lost device may refuse to be destroyed again; it is gone either way
            pass


class _LazyBackend:
    """Registered under "webgpu"; creates the device on first use."""

    def __getattr__(self, name):
        return getattr(backend(), name)


register("webgpu", _LazyBackend())
