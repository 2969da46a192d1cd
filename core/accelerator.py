"""``webgrad.accelerator``: the device-agnostic accelerator API of PyTorch
(``torch.accelerator``), answered by WebGPU where a hardware adapter exists.

A software adapter (Mesa's llvmpipe, Chromium's SwiftShader, Windows' WARP) emulates
a GPU on the CPU, where numpy is faster: there ``is_available()`` is False, the same
rule as ``device="auto"``, and ``reason()`` says why. To count a software adapter
as an accelerator anyway (e.g. to test WebGPU code paths on a machine without a
GPU), set ``webgrad.accelerator.allow_software_adapter = True`` or the environment
variable ``WEBGRAD_ACCELERATOR_ALLOW_SOFTWARE=1``. ``device="webgpu"`` always works
where any adapter exists.

Example:
    >>> device = webgrad.accelerator.current_accelerator() if webgrad.accelerator.is_available() else "cpu"
    >>> webgrad.ones(3, device=device).device.type in ("webgpu", "cpu")
    True
"""
from __future__ import annotations

import os

from .backend.webgpu.geometry import is_cpu_adapter
from .device_api import device
from . import webgpu

ALLOW_SOFTWARE_ENV = "WEBGRAD_ACCELERATOR_ALLOW_SOFTWARE"
# True/False overrides the environment variable; None reads it.
allow_software_adapter: bool | None = None


def _software_allowed() -> bool:
    if allow_software_adapter is not None:
        return bool(allow_software_adapter)
    return os.environ.get(ALLOW_SOFTWARE_ENV, "").strip().lower() in ("1", "true", "yes", "on")


def reason() -> str:
    """Why ``is_available()`` answers as it does, in one sentence."""
    if not webgpu.is_available():
        return "no WebGPU adapter can be made here; tensors stay on 'cpu'"
    info = webgpu.adapter_info()
    name = " ".join(str(v) for v in (info.get("vendor"), info.get("device")) if v) or "unnamed"
    if not is_cpu_adapter(info):
        return f"the WebGPU adapter ({name}) is a real GPU"
    if _software_allowed():
        return (f"the WebGPU adapter ({name}) is a CPU emulation, counted as an accelerator because "
                f"webgrad.accelerator.allow_software_adapter or {ALLOW_SOFTWARE_ENV}=1 says so")
    return (f"the WebGPU adapter ({name}) is a CPU emulation, where numpy is faster; set "
            f"webgrad.accelerator.allow_software_adapter = True (or {ALLOW_SOFTWARE_ENV}=1) to use it, "
            f"or pass device='webgpu' explicitly")


def is_available() -> bool:
    """True when a hardware WebGPU adapter can be used here (a software one only when allowed;
    see the module docstring and ``reason()``)."""
    if not webgpu.is_available():
        return False
    return _software_allowed() or not is_cpu_adapter(webgpu.adapter_info())


def current_accelerator(check_available: bool = False) -> device | None:
    """``device("webgpu")`` where WebGPU works, else None (as PyTorch without an accelerator)."""
    return device("webgpu") if is_available() else None


def device_count() -> int:
    return 1 if is_available() else 0


def current_device_index() -> int:
    _require("current_device_index")
    return 0


current_device_idx = current_device_index


def set_device_index(index) -> None:
    _require("set_device_index")
    if int(index) != 0:
        raise RuntimeError(f"accelerator.set_device_index: webgrad has one WebGPU device (index 0), got {index}")


set_device_idx = set_device_index


def synchronize(device=None) -> None:
    """Wait until the GPU has finished all work recorded so far."""
    _require("synchronize")
    webgpu.synchronize()


def empty_cache() -> None:
    """Release pooled GPU buffers (nothing to do without an accelerator)."""
    if is_available():
        webgpu.empty_cache()


def memory_allocated(device=None) -> int:
    _require("memory_allocated")
    return webgpu.memory_allocated()


def max_memory_allocated(device=None) -> int:
    _require("max_memory_allocated")
    return webgpu.max_memory_allocated()


def memory_reserved(device=None) -> int:
    _require("memory_reserved")
    return webgpu.memory_reserved()


def reset_peak_memory_stats(device=None) -> None:
    _require("reset_peak_memory_stats")
    webgpu.reset_peak_memory_stats()


def _require(name) -> None:
    if not is_available():
        raise RuntimeError(f"webgrad.accelerator.{name}: cannot access an accelerator device when none is "
                           f"available ({reason()}); use device='cpu'")
