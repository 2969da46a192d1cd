"""``webgrad.accelerator``: the device-agnostic accelerator API of PyTorch
(``torch.accelerator``), answered by WebGPU where an adapter exists.

Example:
    >>> device = webgrad.accelerator.current_accelerator() if webgrad.accelerator.is_available() else "cpu"
    >>> webgrad.ones(3, device=device).device.type in ("webgpu", "cpu")
    True
"""
from __future__ import annotations

from .device_api import device
from . import webgpu


def is_available() -> bool:
    """True when a WebGPU adapter and device can be made here."""
    return webgpu.is_available()


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
    """Wait for (submit) all recorded GPU work."""
    _require("synchronize")
    webgpu.synchronize()


def empty_cache() -> None:
    """Release pooled GPU buffers (nothing to do without an accelerator)."""
    if is_available():
        webgpu.empty_cache()


def memory_allocated(device=None) -> int:
    _require("memory_allocated")
    return int(webgpu.memory_stats()["bytes_in_use"])


def _require(name) -> None:
    if not is_available():
        raise RuntimeError(f"webgrad.accelerator.{name}: cannot access an accelerator device when none is "
                           f"available (no WebGPU adapter here); use device='cpu'")
