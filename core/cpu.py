"""``webgrad.cpu``: torch.cpu's names, and memory counters for the cpu device with
``webgrad.webgpu``'s (torch.cuda's) names.

    >>> webgrad.cpu.reset_peak_memory_stats()
    >>> loss = model(x).sum(); loss.backward()
    >>> webgrad.cpu.max_memory_allocated()  # bytes of numpy arrays webgrad held at once

What is counted: every numpy array webgrad makes for a cpu tensor (op results, creation,
the arrays a compiled step plans once), each buffer once however many views share it,
until it is freed. Counting every result costs about 1.5 µs per op (a 16x16 add takes
6 µs), so it starts at the first call of one of these functions (or a profile with
``profile_memory=True``): the cpu tensors alive then are found with one walk of the heap,
and from then on each result is counted as it is made. Arrays a user hands in (``from_numpy``) are counted as
the tensor's, as they are its memory.
"""
from __future__ import annotations

import gc
import weakref

import numpy as np

from .backend.numpy import arrays
from .tensor import Tensor


class _Buffer(weakref.ref):
    """A weak reference to a counted buffer, with what to give back when it is freed."""

    __slots__ = ("key", "nbytes")
    key: int
    nbytes: int


class _Counter:
    """Bytes of the live numpy buffers behind cpu tensors, and the most held at once."""

    def __init__(self) -> None:
        self.in_use = 0
        self.peak = 0
        self.live: dict[int, _Buffer] = {}  # the counted buffers by id (removed as each is freed)

    def count(self, array) -> None:
        """Count the buffer under ``array`` (an op's result, maybe a view) unless it already is."""
        while isinstance(array.base, np.ndarray):  # the array that owns the memory
            array = array.base
        key = id(array)
        if key in self.live:
            return
        ref = self.live[key] = _Buffer(array, self._freed)
        ref.key, ref.nbytes = key, array.nbytes
        self.in_use += array.nbytes
        if self.in_use > self.peak:
            self.peak = self.in_use

    def _freed(self, ref: _Buffer) -> None:
        del self.live[ref.key]
        self.in_use -= ref.nbytes


_COUNTER: _Counter | None = None


def counter() -> _Counter:
    """The counter, started on first use: the cpu tensors alive now, then every new result."""
    global _COUNTER
    if _COUNTER is None:
        _COUNTER = _Counter()
        for obj in gc.get_objects():
            # (type(), not isinstance: that reads __class__, which some module proxies warn on)
            if issubclass(type(obj), Tensor) and isinstance(getattr(obj, "_data", None), np.ndarray):
                _COUNTER.count(obj._data)
        arrays.COUNT = _COUNTER.count
    return _COUNTER


def memory_allocated(device=None) -> int:
    """Bytes held by cpu tensors (and compiled steps' planned arrays) now."""
    return int(counter().in_use)


def max_memory_allocated(device=None) -> int:
    """The most bytes held at once since counting started or ``reset_peak_memory_stats()``."""
    return int(counter().peak)


def reset_peak_memory_stats(device=None) -> None:
    """Start ``max_memory_allocated`` over from what is held now."""
    c = counter()
    c.peak = c.in_use


def memory_stats(device=None) -> dict:
    """``bytes_in_use`` and ``peak_bytes``, as ``webgrad.webgpu.memory_stats()`` names them."""
    c = counter()
    return {"bytes_in_use": int(c.in_use), "peak_bytes": int(c.peak)}


def is_available() -> bool:
    """Always True, as ``torch.cpu.is_available``."""
    return True


def device_count() -> int:
    return 1


def current_device() -> str:
    return "cpu"


def synchronize(device=None) -> None:
    """Nothing to wait for: cpu ops finish when they return."""
