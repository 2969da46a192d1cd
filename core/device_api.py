"""``webgrad.device``: a device name as an object, like ``torch.device``.

A device is a ``str`` subclass holding its name (``"cpu"``, ``"webgpu"``,
``"webgpu:0"``), so it is equal to that string, hashes like it and works as a
dict key everywhere webgrad used plain names before. On top it has torch's
``type`` and ``index`` and torch's repr. Every tensor's ``.device`` is one of
these, so ``t.device == webgrad.device("cpu")`` and ``t.device == "cpu"`` both hold.

Example:
    >>> device = webgrad.device("cuda" if webgrad.cuda.is_available() else "cpu")
    >>> webgrad.ones(2).to(device).device
    device(type='cpu')
"""
from __future__ import annotations

import importlib

from . import dtypes

# The device types a device object may name. Only cpu and webgpu can hold tensors;
# the others can be named (scripts build torch.device("cuda") before checking it),
# and moving a tensor there is an error that says what to use instead.
KNOWN_TYPES = ("cpu", "webgpu", "cuda", "mps", "meta", "xpu")


class device(str):  # noqa: N801  (torch's name)
    """A device: ``webgrad.device("cpu")``, ``device("webgpu", 0)``, ``device("webgpu:0")``.

    Args:
        type: the device type (``"cpu"``, ``"webgpu"``; ``"cuda"`` and ``"mps"`` can be
            named but hold no tensors here), optionally with ``":index"``.
        index: the device index, an int >= 0 (default: none).
    """

    __slots__ = ()

    def __new__(cls, type, index=None):  # noqa: A002  (torch's argument name)
        if isinstance(type, device) and index is None:
            return type
        if not isinstance(type, str):
            raise TypeError(f"device: expected a string like 'cpu' or 'webgpu', got {type!r}")
        name, _, suffix = type.partition(":")
        if name not in KNOWN_TYPES:
            raise RuntimeError(f"device: unknown device type {name!r} in {type!r}; expected one of "
                               f"{', '.join(KNOWN_TYPES)} (webgrad runs on 'cpu' and 'webgpu')")
        if suffix:
            if index is not None:
                raise RuntimeError(f"device: type {type!r} already has an index; pass index only with a bare type")
            if not suffix.isdigit():
                raise RuntimeError(f"device: invalid device string {type!r}; expected e.g. 'webgpu:0'")
            index = int(suffix)
        if index is not None and (not isinstance(index, int) or isinstance(index, bool) or index < 0):
            raise RuntimeError(f"device: index must be a non-negative int, got {index!r}")
        return str.__new__(cls, name if index is None else f"{name}:{index}")

    @property
    def type(self) -> str:
        return str.partition(self, ":")[0]

    # torch.device.index (a property), which hides str.index.
    @property
    def index(self) -> int | None:  # type: ignore[override]
        suffix = str.partition(self, ":")[2]
        return int(suffix) if suffix else None

    def __repr__(self) -> str:
        index = self.index
        if index is None:
            return f"device(type='{self.type}')"
        return f"device(type='{self.type}', index={index})"

    def __str__(self) -> str:
        return str.__str__(self)

    def __reduce__(self):
        return (device, (str.__str__(self),))

    def __enter__(self) -> "device":
        """``with webgrad.device("webgpu"):`` makes creation ops default to this device inside."""
        _previous.append(default_device())
        set_default_device(self)
        return self

    def __exit__(self, *exc) -> None:
        set_default_device(_previous.pop())


_previous: list = []  # default devices saved by ``with device(...)`` blocks


_INTERNED: dict = {}


def as_device(name) -> device:
    """The shared device object for a backend name (any registered name, no checks):
    what ``Tensor.device`` holds. Cached, as it runs for every new tensor."""
    found = _INTERNED.get(name)
    if found is None:
        found = _INTERNED[name] = str.__new__(device, str.__str__(name))
    return found


# -- the backends by device name (webgrad.backend re-exports these) ------------------------
# ``cpu`` is registered by webgrad.backend (the numpy backend); ``webgpu`` registers itself
# when its module is imported (by name, on first use) and a device can be made.
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


# -- Tensor.to's overloads -------------------------------------------------------------------
_TO_SIGNATURES = ("to(device=None, dtype=None, non_blocking=False, copy=False, *, memory_format=None), "
                  "to(dtype, non_blocking=False, copy=False, *, memory_format=None) or "
                  "to(other, non_blocking=False, copy=False)")


def parse_to_arguments(args: tuple, kwargs: dict):
    """``Tensor.to``'s arguments as torch reads them -> (device or None, dtype or None, copy).

    The three overloads: ``to(device=None, dtype=None, non_blocking=False, copy=False)``,
    ``to(dtype, non_blocking=False, copy=False)`` and ``to(other, non_blocking=False, copy=False)``,
    all with keywords too; ``memory_format`` is accepted (there is one layout here).
    """
    unknown = set(kwargs) - {"device", "dtype", "non_blocking", "copy", "memory_format"}
    if unknown:
        raise TypeError(f"to() got an unexpected keyword argument {sorted(unknown)[0]!r}; expected one of "
                        + _TO_SIGNATURES)
    rest = list(args)
    device = dtype = None
    if rest and hasattr(rest[0], "dtype") and hasattr(rest[0], "device") and not isinstance(rest[0], str):
        other = rest.pop(0)  # to(other, ...): its dtype and device
        device, dtype = other.device, other.dtype
        names = ["non_blocking", "copy"]
    elif rest and _is_dtype(rest[0]):
        dtype = rest.pop(0)
        names = ["non_blocking", "copy"]
    else:
        names = ["device", "dtype", "non_blocking", "copy"]
    if len(rest) > len(names):
        raise TypeError(f"to() takes at most 4 positional arguments, got {len(args)}; expected {_TO_SIGNATURES}")
    given = dict(zip(names, rest))
    for name, value in kwargs.items():
        if name in given:
            raise TypeError(f"to() got multiple values for argument {name!r}")
        given[name] = value
    device = given.get("device", device)
    dtype = given.get("dtype", dtype)
    if device is not None and not isinstance(device, str) and not hasattr(device, "type"):
        raise TypeError(f"to(): device must be a string or webgrad.device, got {device!r}; expected {_TO_SIGNATURES}")
    if dtype is not None and not _is_dtype(dtype):
        raise TypeError(f"to(): dtype must be a webgrad dtype, got {dtype!r}; expected {_TO_SIGNATURES}")
    for flag in ("non_blocking", "copy"):
        if not isinstance(given.get(flag, False), bool):
            raise TypeError(f"to(): {flag} must be a bool, got {given[flag]!r}")
    if dtype is float:  # torch reads the Python type float as float64 here
        dtype = dtypes.float64
    return device, (None if dtype is None else dtypes.to_dtype(dtype)), given.get("copy", False)


def _is_dtype(value) -> bool:
    return isinstance(value, dtypes.DType) or value in (float, int, bool)
