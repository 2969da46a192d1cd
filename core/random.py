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
        from .backend import normalize_device

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


def multinomial(input, num_samples, replacement=False, *, generator=None):  # noqa: A002  (torch's name)
    """Draw ``num_samples`` category indices from each row of non-negative weights ``input``
    (1-D or 2-D; rows need not sum to 1), as ``torch.multinomial``.

    With replacement: invert the cumulative weights at uniform draws (cumsum and
    searchsorted). Without: the exponential race, ``topk`` of log(u) / w, which draws
    a weighted sample without replacement in one pass (Efraimidis and Spirakis).
    Both run on the input's device; draws come from ``generator`` when given,
    else from the global state (``webgrad.manual_seed``).

    Example:
        >>> probs = webgrad.softmax(logits[:, -1, :], dim=-1)
        >>> next_token = webgrad.multinomial(probs, num_samples=1)
    """
    from . import creation, ops
    from .tensor import Tensor

    if not isinstance(input, Tensor) or input.ndim not in (1, 2) or not input.dtype.is_floating_point:
        shown = f"shape {tuple(input.shape)} {input.dtype.name}" if isinstance(input, Tensor) else type(input).__name__
        raise ops.OpError(f"multinomial: expected a 1-D or 2-D float tensor of weights, got {shown}")
    weights = input.detach() if input.ndim == 2 else input.detach().unsqueeze(0)
    rows, n = weights.shape
    if not isinstance(num_samples, (int, np.integer)) or num_samples <= 0:
        raise ops.OpError(f"multinomial: num_samples must be a positive int, got {num_samples!r}")
    if not replacement and num_samples > n:
        raise ops.OpError(f"multinomial: cannot draw {num_samples} samples without replacement from {n} "
                          f"categories; pass replacement=True or fewer samples")
    # One readback to refuse bad weights, as PyTorch does (a sample is usually read right after).
    bad = ((weights < 0) | (weights != weights) | (weights == float("inf"))).any(-1) | (weights.sum(-1) <= 0)
    if bool(bad.any()):
        raise ops.OpError("multinomial: invalid weights: every row needs finite, non-negative weights with a "
                          "positive sum")
    shape = (rows, int(num_samples) if replacement else n)
    if generator is None:
        u = creation.rand(*shape, dtype=weights.dtype, device=weights.device)
    else:
        u = creation.tensor(numpy_generator_for(generator).random(shape), dtype=weights.dtype, device=weights.device)
    if replacement:
        cdf = ops.cumsum(weights, -1)
        picked = ops.searchsorted(cdf, u * cdf[:, -1:], right=True).clamp(max=n - 1)
    else:
        # The race's keys log(u) / w, ordered the same as log(w) - log(-log(u)), which stays
        # finite for tiny weights (a low sampling temperature) where the quotient overflows.
        # Zero weights get -inf keys: never chosen while any positive weight is left.
        positive = weights > 0
        keys = ops.where(positive, ops.log(ops.where(positive, weights, 1.0)) - ops.log(-ops.log(u)), float("-inf"))
        picked = ops.topk(keys, int(num_samples), dim=-1).indices
    return picked if input.ndim == 2 else picked.squeeze(0)
