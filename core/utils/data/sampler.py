"""Samplers: which dataset indices a DataLoader visits, and in what order, as ``torch.utils.data.sampler``.

Random samplers draw from ``generator`` (a ``webgrad.Generator``) or, without
one, from webgrad's global generator, so ``webgrad.manual_seed`` reproduces
every epoch's order. (The orders differ from PyTorch's: the generators differ.)
"""
from __future__ import annotations

import numbers

import numpy as np

from ... import random as _random

__all__ = ["Sampler", "SequentialSampler", "RandomSampler", "SubsetRandomSampler", "WeightedRandomSampler",
           "BatchSampler"]


CHUNK = 4096  # indices drawn at a time by the samplers that draw with replacement


def numpy_rng(generator) -> np.random.Generator:
    """The numpy stream behind ``generator`` (None: webgrad's global one)."""
    if generator is None:
        return _random.numpy_generator()
    rng = getattr(generator, "_rng", None)
    if not isinstance(rng, np.random.Generator):
        raise TypeError(f"generator must be a webgrad.Generator (or None), got {type(generator).__name__}")
    return rng


def _positive_int(owner: str, name: str, value) -> int:
    if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value <= 0:
        raise ValueError(f"{owner}: {name} should be a positive integer value, but got {name}={value!r}")
    return int(value)


class Sampler:
    """Base class: subclasses define ``__iter__`` over indices (and usually ``__len__``)."""

    def __init__(self, data_source=None):
        pass

    def __iter__(self):
        raise NotImplementedError(f"{type(self).__name__} must implement __iter__")


class SequentialSampler(Sampler):
    """Indices 0, 1, ..., len(data_source) - 1.

    Example:
        >>> list(SequentialSampler(range(4)))
        [0, 1, 2, 3]
    """

    def __init__(self, data_source):
        self.data_source = data_source

    def __iter__(self):
        return iter(range(len(self.data_source)))

    def __len__(self) -> int:
        return len(self.data_source)


class RandomSampler(Sampler):
    """A new random permutation every epoch; or ``num_samples`` draws with ``replacement=True``.

    Example:
        >>> sorted(RandomSampler(range(5)))
        [0, 1, 2, 3, 4]
    """

    def __init__(self, data_source, replacement=False, num_samples=None, generator=None):
        if not isinstance(replacement, bool):
            raise TypeError(f"RandomSampler: replacement should be a boolean value, but got {replacement!r}")
        self.data_source, self.replacement, self.generator = data_source, replacement, generator
        self._num_samples = num_samples
        _positive_int("RandomSampler", "num_samples", self.num_samples)

    @property
    def num_samples(self) -> int:
        return len(self.data_source) if self._num_samples is None else self._num_samples

    def __iter__(self):
        # Lazily, a chunk at a time (as PyTorch): num_samples=int(1e10) must not allocate 10^10 indices.
        n, rng, left = len(self.data_source), numpy_rng(self.generator), self.num_samples
        while left > 0:
            if self.replacement:
                chunk = rng.integers(0, n, size=min(left, CHUNK))
            else:  # num_samples > n walks through several permutations, as PyTorch
                chunk = rng.permutation(n)[:left]
            left -= len(chunk)
            yield from chunk.tolist()

    def __len__(self) -> int:
        return self.num_samples


class SubsetRandomSampler(Sampler):
    """The given ``indices`` in a new random order every epoch.

    Example:
        >>> sorted(SubsetRandomSampler([3, 7, 9]))
        [3, 7, 9]
    """

    def __init__(self, indices, generator=None):
        self.indices, self.generator = list(indices), generator

    def __iter__(self):
        order = numpy_rng(self.generator).permutation(len(self.indices))
        return iter([self.indices[i] for i in order])

    def __len__(self) -> int:
        return len(self.indices)


class WeightedRandomSampler(Sampler):
    """``num_samples`` indices drawn with probability proportional to ``weights`` (e.g. to balance classes).

    Example:
        >>> sampler = WeightedRandomSampler([0.1, 0.9], num_samples=10)
        >>> len(list(sampler))
        10
    """

    def __init__(self, weights, num_samples, replacement=True, generator=None):
        self.num_samples = _positive_int("WeightedRandomSampler", "num_samples", num_samples)
        if not isinstance(replacement, bool):
            raise TypeError(f"WeightedRandomSampler: replacement should be a boolean value, got {replacement!r}")
        values = np.asarray(weights.tolist() if hasattr(weights, "tolist") else list(weights), dtype=np.float64)
        if values.ndim != 1 or not len(values) or (values < 0).any() or not np.isfinite(values).all() \
                or values.sum() <= 0:
            raise ValueError(f"WeightedRandomSampler: weights must be a 1-D sequence of non-negative finite "
                             f"numbers with a positive sum, got shape {values.shape}")
        if not replacement and num_samples > np.count_nonzero(values):
            raise ValueError(f"WeightedRandomSampler: cannot draw {num_samples} samples without replacement from "
                             f"{np.count_nonzero(values)} non-zero weights")
        self.weights, self.replacement, self.generator = values, replacement, generator

    def __iter__(self):
        p, rng = self.weights / self.weights.sum(), numpy_rng(self.generator)
        if not self.replacement:  # num_samples <= the number of non-zero weights: small
            yield from rng.choice(len(p), size=self.num_samples, replace=False, p=p).tolist()
            return
        left = self.num_samples
        while left > 0:  # lazily, a chunk at a time, so a huge num_samples does not allocate
            chunk = rng.choice(len(p), size=min(left, CHUNK), replace=True, p=p)
            left -= len(chunk)
            yield from chunk.tolist()

    def __len__(self) -> int:
        return self.num_samples


class BatchSampler(Sampler):
    """Group the indices of ``sampler`` into lists of ``batch_size`` (the last may be short unless ``drop_last``).

    Example:
        >>> list(BatchSampler(SequentialSampler(range(5)), batch_size=2, drop_last=False))
        [[0, 1], [2, 3], [4]]
    """

    def __init__(self, sampler, batch_size, drop_last):
        self.batch_size = _positive_int("BatchSampler", "batch_size", batch_size)
        if not isinstance(drop_last, bool):
            raise TypeError(f"BatchSampler: drop_last should be a boolean value, but got drop_last={drop_last!r}")
        self.sampler, self.drop_last = sampler, drop_last

    def __iter__(self):
        batch = []
        for index in self.sampler:
            batch.append(index)
            if len(batch) == self.batch_size:
                yield batch
                batch = []
        if batch and not self.drop_last:
            yield batch

    def __len__(self) -> int:
        if self.drop_last:
            return len(self.sampler) // self.batch_size
        return -(-len(self.sampler) // self.batch_size)
