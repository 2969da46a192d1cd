"""Backends by device name. ``cpu`` is the numpy backend; ``webgpu`` registers
itself when its module is imported and a device can be made. What a backend implements
(eager kernels, and its passes, fusion rules and replay for ``webgrad.compile``) is
written down in protocol.py."""
from __future__ import annotations

from ..device_api import as_device

_BACKENDS: dict = {}
_default_device: list[str] = [as_device("cpu")]


def default_device() -> str:
    return _default_device[0]


def set_default_device(device) -> None:
    """Make creation ops put new tensors on ``device`` ("cpu" or "webgpu")."""
    name = normalize_device(device)
    get_backend(name)  # fail now, not at the first tensor, if it cannot run
    _default_device[0] = name

_LAZY = {"webgpu": "webgrad.backend.webgpu"}


def register(device: str, backend) -> None:
    _BACKENDS[device] = backend


def get_backend(device: str):
    try:
        return _BACKENDS[device]
    except KeyError:
        pass
    if device in _LAZY:
        import importlib

        importlib.import_module(_LAZY[device])
        if device in _BACKENDS:
            return _BACKENDS[device]
    raise RuntimeError(f"unknown device {device!r}; expected one of "
                       f"{sorted(set(_BACKENDS) | set(_LAZY))}")


def normalize_device(device) -> str:
    """Accept 'cpu', 'webgpu', 'webgpu:0' or a device object with ``.type``; give the
    shared ``webgrad.device`` object that tensors hold (it equals the plain name)."""
    if device is None:
        return _default_device[0]
    name = getattr(device, "type", device)
    if not isinstance(name, str):
        raise TypeError(f"device must be a string like 'cpu' or 'webgpu', got {device!r}")
    name = name.split(":")[0]
    if name not in _BACKENDS and name not in _LAZY:
        if name in ("cuda", "mps", "xpu"):
            raise RuntimeError(f"device {str(device)!r} is not available: webgrad has no {name} backend "
                               f"(webgrad.{'cuda' if name == 'cuda' else 'accelerator'}.is_available() is False); "
                               f"use 'webgpu' (webgrad.accelerator.current_accelerator()) or 'cpu'")
        raise RuntimeError(f"unknown device {str(device)!r}; expected 'cpu' or 'webgpu'")
    return as_device(name)


from . import numpy_backend  # noqa: E402  (registers "cpu")

register("cpu", numpy_backend.NumpyBackend())
