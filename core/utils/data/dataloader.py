"""DataLoader and collation, as ``torch.utils.data.dataloader``.

Batches are loaded in the calling process. ``num_workers > 0`` is accepted and
loads in the main process too, with a one-time warning: the batches are the same
(webgrad has no worker processes; in Pyodide there are none to have).
"""
from __future__ import annotations

import math
import numbers
import warnings
from collections.abc import Mapping, Sequence

import numpy as np

from ... import dtypes
from ...creation import tensor
from ...ops import stack, take
from ...tensor import Tensor
from .dataset import IterableDataset, Subset, TensorDataset
from .sampler import BatchSampler, RandomSampler, SequentialSampler

__all__ = ["DataLoader", "default_collate", "default_convert", "get_worker_info"]

_warned_workers = False


def get_worker_info():
    """None: batches are always loaded in the main process (as PyTorch answers there)."""
    return None


def default_convert(data):
    """Turn numpy arrays (also inside dicts, lists and tuples) into tensors, without batching."""
    if isinstance(data, np.ndarray) and data.dtype.kind in "biuf":
        return tensor(data)
    if isinstance(data, Mapping):
        return {key: default_convert(value) for key, value in data.items()}
    if isinstance(data, tuple) and hasattr(data, "_fields"):
        return type(data)(*(default_convert(v) for v in data))
    if isinstance(data, (list, tuple)):
        return type(data)(default_convert(v) for v in data)
    return data


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


class DataLoader:
    """Iterate over ``dataset`` in mini-batches, with PyTorch's arguments.

    Args:
        dataset: a map-style dataset (``__getitem__`` and ``__len__``) or an ``IterableDataset``.
        batch_size: samples per batch (None: yield single samples, unbatched).
        shuffle: a new random order every epoch (a ``RandomSampler``), drawn from
            ``generator`` or the global generator, so ``webgrad.manual_seed`` reproduces it.
        sampler: the order of indices (excludes ``shuffle``). batch_sampler: yields lists
            of indices (excludes batch_size, shuffle, sampler and drop_last).
        drop_last: skip the final batch when it is smaller than ``batch_size``.
        collate_fn: turns a list of samples into a batch (default ``default_collate``).
        num_workers: accepted; loading stays in this process (one warning), same batches.
        pin_memory, timeout, prefetch_factor, persistent_workers, pin_memory_device:
            accepted for compatibility; they change nothing here.
        worker_init_fn: with num_workers > 0, called once with worker id 0 at the start of each epoch.

    Example:
        >>> loader = DataLoader(TensorDataset(webgrad.arange(10)), batch_size=4, drop_last=True)
        >>> len(loader), [b[0].tolist() for b in loader]
        (2, [[0, 1, 2, 3], [4, 5, 6, 7]])
    """

    def __init__(self, dataset, batch_size=1, shuffle=None, sampler=None, batch_sampler=None, num_workers=0,
                 collate_fn=None, pin_memory=False, drop_last=False, timeout=0, worker_init_fn=None,
                 multiprocessing_context=None, generator=None, *, prefetch_factor=None, persistent_workers=False,
                 pin_memory_device="", in_order=True):
        if batch_size is not None and (isinstance(batch_size, bool) or not isinstance(batch_size, numbers.Integral)
                                       or batch_size <= 0):
            raise ValueError(f"DataLoader: batch_size must be a positive integer (or None), got {batch_size!r}")
        if isinstance(num_workers, bool) or not isinstance(num_workers, numbers.Integral) or num_workers < 0:
            raise ValueError(f"DataLoader: num_workers option should be a non-negative integer, got {num_workers!r}")
        if num_workers == 0 and prefetch_factor is not None:
            raise ValueError("DataLoader: prefetch_factor option could only be specified in multiprocessing; "
                             "let num_workers > 0 to enable it")
        if persistent_workers and num_workers == 0:
            raise ValueError("DataLoader: persistent_workers option needs num_workers > 0")
        if timeout < 0:
            raise ValueError(f"DataLoader: timeout option should be non-negative, got {timeout}")
        self.dataset, self.num_workers, self.generator = dataset, int(num_workers), generator
        self.pin_memory, self.timeout, self.worker_init_fn = bool(pin_memory), timeout, worker_init_fn
        self.prefetch_factor, self.persistent_workers = prefetch_factor, persistent_workers
        self._iterable = isinstance(dataset, IterableDataset)
        if self._iterable:
            if shuffle:
                raise ValueError("DataLoader with IterableDataset: expected unspecified shuffle option, got "
                                 f"shuffle={shuffle}")
            if sampler is not None or batch_sampler is not None:
                raise ValueError("DataLoader with IterableDataset: expected unspecified sampler and batch_sampler "
                                 "options (the dataset decides its own order)")
        if sampler is not None and shuffle:
            raise ValueError("DataLoader: sampler option is mutually exclusive with shuffle")
        if batch_sampler is not None:
            if batch_size != 1 or shuffle or sampler is not None or drop_last:
                raise ValueError("DataLoader: batch_sampler option is mutually exclusive with batch_size, shuffle, "
                                 "sampler, and drop_last")
            batch_size, drop_last = None, False
        elif batch_size is None and drop_last:
            raise ValueError("DataLoader: batch_size=None option disables auto-batching and is mutually exclusive "
                             "with drop_last")
        if sampler is None and not self._iterable:
            sampler = RandomSampler(dataset, generator=generator) if shuffle else SequentialSampler(dataset)
        if batch_size is not None and batch_sampler is None and not self._iterable:
            batch_sampler = BatchSampler(sampler, int(batch_size), bool(drop_last))
        self.batch_size = None if batch_size is None else int(batch_size)
        self.drop_last = bool(drop_last)
        self.sampler = sampler
        self.batch_sampler = batch_sampler
        if collate_fn is None:
            collate_fn = default_collate if self.batch_size is not None or batch_sampler is not None \
                else default_convert
        self.collate_fn = collate_fn

    def __len__(self) -> int:
        if self._iterable:
            length = len(self.dataset)  # TypeError from the dataset if it has no length, as in PyTorch
            if self.batch_size is None:
                return length
            return length // self.batch_size if self.drop_last else math.ceil(length / self.batch_size)
        return len(self.batch_sampler) if self.batch_sampler is not None else len(self.sampler)

    def __iter__(self):
        global _warned_workers
        if self.num_workers > 0:
            if not _warned_workers:
                _warned_workers = True
                warnings.warn(f"DataLoader: num_workers={self.num_workers} is accepted, but webgrad loads every "
                              f"batch in the main process (no worker processes); the batches are the same",
                              stacklevel=2)
            if self.worker_init_fn is not None:
                self.worker_init_fn(0)
        if self._iterable:
            return self._iter_stream()
        if self.batch_sampler is None:
            return (self.collate_fn(self.dataset[i]) for i in self.sampler)
        return self._iter_batches()

    def _iter_stream(self):
        if self.batch_size is None:
            yield from (self.collate_fn(sample) for sample in self.dataset)
            return
        batch = []
        for sample in self.dataset:
            batch.append(sample)
            if len(batch) == self.batch_size:
                yield self.collate_fn(batch)
                batch = []
        if batch and not self.drop_last:
            yield self.collate_fn(batch)

    def _iter_batches(self):
        fast_tensors, fast_rows = self._fast_path()
        for indices in self.batch_sampler:
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
        indices = np.asarray(indices, dtype=np.int64)
        size = tensors[0].shape[0]
        if len(indices) and (indices.min() < -size or indices.max() >= size):
            raise IndexError(f"DataLoader: the sampler gave index {int(indices.max())} (or {int(indices.min())}) "
                             f"for a dataset of {size} items")
        indices = indices % size if len(indices) else indices
        if rows is not None:
            indices = rows[indices]
        by_device = {}  # one index tensor per device the data lives on
        for t in tensors:
            if t.device not in by_device:
                by_device[t.device] = tensor(indices, dtype=dtypes.int64, device=t.device)
        # Rows are checked above against the host index list: take() skips getitem's
        # bounds check (a readback on a GPU).
        return tuple(take(t, by_device[t.device]) for t in tensors)
