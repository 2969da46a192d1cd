"""Datasets and mini-batch loading, as in ``torch.utils.data``.

Shuffling and ``random_split`` draw from webgrad's global generator, so
``webgrad.manual_seed(s)`` makes every epoch's order reproducible.

Example:
    >>> import webgrad
    >>> from webgrad.data import TensorDataset, DataLoader
    >>> x, y = webgrad.randn(100, 3), webgrad.tensor(list(range(100)))
    >>> loader = DataLoader(TensorDataset(x, y), batch_size=32, shuffle=True)
    >>> [tuple(xb.shape) for xb, yb in loader]
    [(32, 3), (32, 3), (32, 3), (4, 3)]
"""
from __future__ import annotations

import math
import numbers
from collections.abc import Mapping, Sequence

import numpy as np

from . import random as _random

__all__ = ["Dataset", "TensorDataset", "Subset", "DataLoader", "default_collate", "random_split"]


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


class TensorDataset(Dataset):
    """Rows of several tensors that share their first dimension.

    Example:
        >>> dataset = TensorDataset(webgrad.zeros(5, 2), webgrad.arange(5))
        >>> len(dataset), dataset[1][1].item()
        (5, 1)
    """

    def __init__(self, *tensors):
        from . import Tensor

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


def random_split(dataset, lengths):
    """Split ``dataset`` into non-overlapping random ``Subset``s of the given lengths.

    ``lengths`` are item counts summing to ``len(dataset)``, or fractions summing
    to 1 (remainders go one each to the first subsets, as PyTorch does). The
    permutation comes from the global generator (``webgrad.manual_seed``).

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
    permutation = _random.numpy_generator().permutation(total).tolist()
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


# ----------------------------------------------------------------------------- collate

def default_collate(batch):
    """Stack a list of samples into one batch, keeping their structure.

    Tensors and numpy arrays are stacked along a new first dimension; Python
    ints become an int64 tensor, floats a float64 tensor and bools a bool
    tensor (as in PyTorch); strings stay a list; dicts, tuples and lists are
    collated field by field.

    Example:
        >>> default_collate([{"x": 1.0, "y": 2}, {"x": 3.0, "y": 4}])["y"].tolist()
        [2, 4]
    """
    from . import Tensor, dtypes, stack, tensor  # late: the package imports this module

    if not batch:
        raise ValueError("default_collate: the batch is empty")
    elem = batch[0]
    if isinstance(elem, Tensor):
        return stack(list(batch), dim=0)
    if isinstance(elem, np.ndarray):
        if elem.dtype.kind not in "biuf":
            raise TypeError(f"default_collate: cannot batch numpy arrays of dtype {elem.dtype}")
        return tensor(np.stack(batch))
    if isinstance(elem, np.generic) and elem.dtype.kind in "biuf":
        return tensor(np.array(batch))
    if isinstance(elem, bool):
        return tensor(list(batch), dtype=dtypes.bool_)
    if isinstance(elem, int):
        return tensor(list(batch), dtype=dtypes.int64)
    if isinstance(elem, float):
        return tensor(list(batch), dtype=dtypes.float64)
    if isinstance(elem, str):
        return list(batch)
    if isinstance(elem, Mapping):
        return {key: default_collate([sample[key] for sample in batch]) for key in elem}
    if isinstance(elem, tuple) and hasattr(elem, "_fields"):  # namedtuple
        return type(elem)(*(default_collate(list(field)) for field in zip(*batch)))
    if isinstance(elem, Sequence):
        size = len(elem)
        if any(len(sample) != size for sample in batch):
            raise ValueError(f"default_collate: samples in the batch have different lengths "
                             f"{sorted({len(sample) for sample in batch})}; each must have {size}")
        fields = [default_collate(list(field)) for field in zip(*batch)]
        return tuple(fields) if isinstance(elem, tuple) else fields
    raise TypeError(f"default_collate: batch must contain tensors, numpy arrays, numbers, "
                    f"strings, dicts or lists; found {type(elem).__name__}")


# ----------------------------------------------------------------------------- loader

class DataLoader:
    """Iterate over ``dataset`` in mini-batches.

    Args:
        dataset: a map-style dataset (``__getitem__`` and ``__len__``).
        batch_size: samples per batch.
        shuffle: draw a new random order every epoch from the global
            generator, so ``webgrad.manual_seed`` reproduces it.
        drop_last: skip the final batch when it is smaller than ``batch_size``.
        collate_fn: turns a list of samples into a batch (default ``default_collate``).

    Example:
        >>> loader = DataLoader(TensorDataset(webgrad.arange(10)), batch_size=4, drop_last=True)
        >>> len(loader), [b[0].tolist() for b in loader]
        (2, [[0, 1, 2, 3], [4, 5, 6, 7]])
    """

    # batch_size: int | Integral, as numpy integers pass the check below; with `int` alone mypy,
    # which does not count int as an Integral, takes the rest of __init__ for unreachable.
    def __init__(self, dataset, batch_size: int | numbers.Integral = 1, shuffle: bool = False,
                 drop_last: bool = False, collate_fn=None):
        if isinstance(batch_size, bool) or not isinstance(batch_size, numbers.Integral) \
                or batch_size <= 0:
            raise ValueError(f"DataLoader: batch_size must be a positive integer, got {batch_size!r}")
        self.dataset = dataset
        self.batch_size = int(batch_size)
        self.shuffle = bool(shuffle)
        self.drop_last = bool(drop_last)
        self.collate_fn = default_collate if collate_fn is None else collate_fn

    def __len__(self) -> int:
        if self.drop_last:
            return len(self.dataset) // self.batch_size
        return math.ceil(len(self.dataset) / self.batch_size)

    def __iter__(self):
        total = len(self.dataset)
        if self.shuffle:
            order = _random.numpy_generator().permutation(total)
        else:
            order = np.arange(total)
        fast_tensors, fast_rows = self._fast_path()
        for start in range(0, total, self.batch_size):
            indices = order[start:start + self.batch_size]
            if len(indices) < self.batch_size and self.drop_last:
                return
            if fast_tensors is not None:
                yield self._index_tensors(fast_tensors, fast_rows, indices)
            else:
                yield self.collate_fn([self.dataset[int(i)] for i in indices])

    def _fast_path(self):
        """For a TensorDataset (possibly inside Subsets) with default collate,
        return its tensors and the row map, so a batch is one gather per tensor
        instead of len(batch) slices and a stack."""
        if self.collate_fn is not default_collate:
            return None, None
        dataset, rows = self.dataset, None
        while isinstance(dataset, Subset):
            subset_rows = np.asarray(dataset.indices, dtype=np.int64)
            rows = subset_rows if rows is None else subset_rows[rows]
            dataset = dataset.dataset
        if type(dataset) is not TensorDataset:
            return None, None
        if rows is not None and len(rows):
            size = len(dataset)
            if rows.min() < -size or rows.max() >= size:
                return None, None  # let the slow path raise the usual IndexError
            rows = rows % size
        return dataset.tensors, rows

    @staticmethod
    def _index_tensors(tensors, rows, indices):
        from . import dtypes, tensor
        from .ops import take

        indices = np.asarray(indices, dtype=np.int64)
        if rows is not None:
            indices = rows[indices]
        by_device = {}  # one index tensor per device the data lives on
        for t in tensors:
            if t.device not in by_device:
                by_device[t.device] = tensor(indices, dtype=dtypes.int64, device=t.device)
        # Rows come from a permutation of range(len): in bounds by construction, so
        # take() skips getitem's bounds check (a readback on a GPU).
        return tuple(take(t, by_device[t.device]) for t in tensors)
