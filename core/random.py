"""The global random state behind every random op (``webgrad.manual_seed``).

One numpy Generator serves the CPU ops and data shuffling. Backends whose kernels
draw numbers on the device ask it for a fresh (seed, offset) pair per call, so a
seed reproduces every run on every backend.
"""
from __future__ import annotations

from typing import TypedDict

import numpy as np

from .device_api import normalize_device


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


def _fresh_seed() -> int:
    return int(np.random.default_rng().integers(2**63 - 1))


def seed() -> int:
    """Seed the global state from fresh entropy and return that seed (``torch.seed``)."""
    new = _fresh_seed()
    manual_seed(new)
    return new


def numpy_generator() -> np.random.Generator:
    return _state["generator"]


def next_device_seed() -> int:
    """A 32-bit key for a device-side counter-based generator."""
    return int(_state["generator"].integers(0, 2**32 - 1, dtype=np.uint64))


class Generator:
    """A random stream of its own, like ``torch.Generator``: ops that take
    ``generator=`` (``multinomial``, ``randperm``, ``DataLoader`` shuffles...) draw
    from it instead of the global state, so one seed reproduces one stream.

    Example:
        >>> g = webgrad.Generator().manual_seed(42)
        >>> webgrad.multinomial(webgrad.tensor([0.2, 0.8]), 4, replacement=True, generator=g)
    """

    def __init__(self, device="cpu"):
        self.device = normalize_device(device)
        self._seed = _fresh_seed()
        self._rng = np.random.default_rng(self._seed)

    def manual_seed(self, seed: int) -> "Generator":
        if not isinstance(seed, (int, np.integer)):
            raise TypeError(f"Generator.manual_seed: seed must be an int, got {type(seed).__name__}")
        self._seed = int(seed)
        self._rng = np.random.default_rng(self._seed)
        return self

    def seed(self) -> int:
        """Reseed from fresh entropy and return the new seed."""
        self.manual_seed(_fresh_seed())
        return self._seed

    def initial_seed(self) -> int:
        return self._seed

    def get_state(self) -> dict:
        return self._rng.bit_generator.state

    def set_state(self, state: dict) -> "Generator":
        self._rng.bit_generator.state = state
        return self


def numpy_generator_for(generator: Generator | None) -> np.random.Generator:
    """The numpy stream behind ``generator`` (None: the global one)."""
    if generator is None:
        return numpy_generator()
    if not isinstance(generator, Generator):
        raise TypeError(f"generator must be a webgrad.Generator, got {type(generator).__name__}")
    return generator._rng
