"""The global random state behind every random op (``webgrad.manual_seed``).

One numpy Generator serves the CPU ops and data shuffling. Backends whose kernels
draw numbers on the device ask it for a fresh (seed, offset) pair per call, so a
seed reproduces every run on every backend.
"""
from __future__ import annotations

from typing import TypedDict

import numpy as np


class _State(TypedDict):
    generator: np.random.Generator
    seed: int


_state: _State = {"generator": np.random.default_rng(0), "seed": 0}


def manual_seed(seed: int) -> None:
    """Seed every random op and DataLoader shuffle, e.g. ``webgrad.manual_seed(0)``."""
    if not isinstance(seed, (int, np.integer)):
        raise TypeError(f"manual_seed: seed must be an int, got {type(seed).__name__}")
    _state["generator"] = np.random.default_rng(int(seed))
    _state["seed"] = int(seed)


def initial_seed() -> int:
    return _state["seed"]


def numpy_generator() -> np.random.Generator:
    return _state["generator"]


def next_device_seed() -> int:
    """A 32-bit key for a device-side counter-based generator."""
    return int(_state["generator"].integers(0, 2**32 - 1, dtype=np.uint64))
