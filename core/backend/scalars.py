"""The cache of values made for Python numbers inside ops (``x * 2``, ``fill_(0)``): ops use
a few constants over and over, and making one per call dominated small ops. One class, two
users: ``creation.scalar_tensor`` (0-d tensors, per device) and the WebGPU backend's fills
(one-element device arrays)."""
from __future__ import annotations

import struct
from typing import Any, Callable

import numpy as np


class ScalarCache:
    """``get(value, dtype, device)`` gives ``make(value, dtype, device)``, made once per
    number, dtype and device while at most ``limit`` are kept (then it starts over)."""

    def __init__(self, make: Callable, limit: int = 512):
        self._make, self._limit = make, limit
        self._made: dict = {}

    def get(self, value, dtype, device=None) -> Any:
        # Floats by their bits: -0.0 == 0.0 (and NaN != NaN) would make a value-keyed cache
        # hand back the wrong zero, so ``x * -0.0`` followed by ``x * 0.0`` gave -0.0.
        bits = struct.pack("<d", value) if isinstance(value, (float, np.floating)) else value
        key = (type(value), bits, dtype.name, device)
        made = self._made.get(key)
        if made is None:
            if len(self._made) > self._limit:
                self._made.clear()
            made = self._made[key] = self._make(value, dtype, device)
        return made

    def values(self):
        return self._made.values()

    def clear(self) -> None:
        self._made.clear()

    def forget(self, device) -> None:
        """Drop what was made on ``device`` (its backend was replaced)."""
        for key in [key for key in self._made if key[-1] == device]:
            del self._made[key]
