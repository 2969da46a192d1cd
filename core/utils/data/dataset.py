"""Datasets, as ``torch.utils.data.dataset``: map-style, iterable, tensors, subsets, concatenation, splits."""
from __future__ import annotations

import bisect
import itertools
import math
import numbers

from ...tensor import Tensor
from .sampler import numpy_rng

__all__ = ["Dataset", "IterableDataset", "TensorDataset", "Subset", "ConcatDataset", "random_split"]


class Dataset:
    """A map-style dataset: subclasses define ``__getitem__(index)`` and ``__len__()``.

    Example:
        >>> class Squares(Dataset):
        ...     def __len__(self):
        ...         return 10
        ...     def __getitem__(self, index):
        ...         return index, index * index
        >>> next(iter(DataLoader(Squares(), batch_size=4)))[1].tolist()
        [0, 1, 4, 9]
    """

    def __getitem__(self, index):
        raise NotImplementedError(f"{type(self).__name__} must implement __getitem__")

    def __len__(self) -> int:
        raise NotImplementedError(f"{type(self).__name__} must implement __len__")

    def __add__(self, other):
        return ConcatDataset([self, other])


class IterableDataset(Dataset):
    """A stream-style dataset: subclasses define ``__iter__`` (DataLoader batches what it yields, in order).

    Example:
        >>> class Count(IterableDataset):
        ...     def __iter__(self):
        ...         return iter(range(5))
        >>> [b.tolist() for b in DataLoader(Count(), batch_size=2)]
        [[0, 1], [2, 3], [4]]
    """

    __len__ = None  # type: ignore[assignment]  # a stream has no length unless a subclass gives one

    def __iter__(self):
        raise NotImplementedError(f"{type(self).__name__} must implement __iter__")


class TensorDataset(Dataset):
    """Rows of several tensors that share their first dimension.

    Example:
        >>> dataset = TensorDataset(webgrad.zeros(5, 2), webgrad.arange(5))
        >>> len(dataset), dataset[1][1].item()
        (5, 1)
    """

    def __init__(self, *tensors):
        if not tensors:
            raise ValueError("TensorDataset: needs at least one tensor")
        for position, tensor in enumerate(tensors):
            if not isinstance(tensor, Tensor):
                raise TypeError(f"TensorDataset: argument {position} must be a Tensor, "
                                f"got {type(tensor).__name__}")
            if len(tensor.shape) == 0:
                raise ValueError(f"TensorDataset: argument {position} is a 0-d tensor; every "
                                 "tensor needs a first dimension to index rows by")
        sizes = [tensor.shape[0] for tensor in tensors]
        if len(set(sizes)) != 1:
            shapes = ", ".join(str(tuple(tensor.shape)) for tensor in tensors)
            raise ValueError(f"TensorDataset: all tensors must have the same size in dimension "
                             f"0, got sizes {sizes} (shapes {shapes})")
        self.tensors = tensors

    def __getitem__(self, index):
        return tuple(tensor[index] for tensor in self.tensors)

    def __len__(self) -> int:
        return self.tensors[0].shape[0]


class Subset(Dataset):
    """The items of ``dataset`` at ``indices``, in that order.

    Example:
        >>> subset = Subset(TensorDataset(webgrad.arange(10)), [2, 5])
        >>> [subset[i][0].item() for i in range(len(subset))]
        [2, 5]
    """

    def __init__(self, dataset, indices):
        self.dataset = dataset
        self.indices = [int(i) for i in indices]

    def __getitem__(self, index):
        return self.dataset[self.indices[index]]

    def __len__(self) -> int:
        return len(self.indices)


def random_split(dataset, lengths, generator=None):
    """Split ``dataset`` into non-overlapping random ``Subset``s of the given lengths.

    ``lengths`` are item counts summing to ``len(dataset)``, or fractions summing
    to 1 (remainders go one each to the first subsets, as PyTorch does). The
    permutation comes from ``generator`` or the global one (``webgrad.manual_seed``).

    Example:
        >>> train, test = random_split(TensorDataset(webgrad.arange(10)), [0.8, 0.2])
        >>> len(train), len(test)
        (8, 2)
    """
    total = len(dataset)
    lengths = list(lengths)
    if not lengths:
        raise ValueError("random_split: lengths is empty")
    # Any float means fractions. (PyTorch guesses from the sum, which turns
    # integer lengths [1, 0] into fractions; we never do.)
    if any(isinstance(x, numbers.Real) and not isinstance(x, numbers.Integral) for x in lengths):
        lengths = _fractions_to_lengths(lengths, total)
    for length in lengths:
        if not isinstance(length, numbers.Integral) or length < 0:
            raise ValueError(f"random_split: lengths must be non-negative integers or "
                             f"fractions summing to 1, got {lengths}")
    if sum(lengths) != total:
        raise ValueError(f"random_split: lengths {lengths} sum to {sum(lengths)}, but the "
                         f"dataset has {total} items")
    permutation = numpy_rng(generator).permutation(total).tolist()
    subsets, start = [], 0
    for length in lengths:
        subsets.append(Subset(dataset, permutation[start:start + length]))
        start += length
    return subsets


def _fractions_to_lengths(fractions, total: int) -> list[int]:
    if any(f < 0 or f > 1 for f in fractions) or not math.isclose(sum(fractions), 1):
        raise ValueError(f"random_split: fractions must lie in [0, 1] and sum to 1, got {fractions}")
    lengths = [int(math.floor(total * f)) for f in fractions]
    for i in range(total - sum(lengths)):
        lengths[i % len(lengths)] += 1
    return lengths


class ConcatDataset(Dataset):
    """Several map-style datasets one after another.

    Example:
        >>> both = ConcatDataset([TensorDataset(webgrad.zeros(3)), TensorDataset(webgrad.ones(2))])
        >>> len(both), both[3][0].item()
        (5, 1.0)
    """

    def __init__(self, datasets):
        self.datasets = list(datasets)
        if not self.datasets:
            raise ValueError("ConcatDataset: datasets should not be an empty iterable")
        for i, d in enumerate(self.datasets):
            if isinstance(d, IterableDataset):
                raise TypeError(f"ConcatDataset: dataset {i} is an IterableDataset; only map-style datasets "
                                f"can be concatenated (use itertools.chain for streams)")
        self.cumulative_sizes = list(itertools.accumulate(len(d) for d in self.datasets))

    def __len__(self) -> int:
        return self.cumulative_sizes[-1]

    def __getitem__(self, index):
        if index < 0:
            if -index > len(self):
                raise IndexError(f"ConcatDataset: index {index} is out of range for length {len(self)}")
            index += len(self)
        which = bisect.bisect_right(self.cumulative_sizes, index)
        if which == len(self.datasets):
            raise IndexError(f"ConcatDataset: index {index} is out of range for length {len(self)}")
        start = self.cumulative_sizes[which - 1] if which else 0
        return self.datasets[which][index - start]
