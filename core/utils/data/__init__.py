"""``webgrad.utils.data``: datasets, samplers and the DataLoader, with ``torch.utils.data``'s names and modules.

Submodules as in PyTorch: ``dataset``, ``sampler``, ``dataloader``. ``webgrad.data``
is the same set of names.

Example:
    >>> from webgrad.utils.data import DataLoader, TensorDataset, random_split
    >>> x, y = webgrad.randn(100, 3), webgrad.arange(100)
    >>> train, val = random_split(TensorDataset(x, y), [0.8, 0.2])
    >>> [tuple(xb.shape) for xb, yb in DataLoader(train, batch_size=32, shuffle=True)]
    [(32, 3), (32, 3), (16, 3)]
"""
from . import dataloader, dataset, distributed, sampler
from .dataloader import DataLoader, default_collate, default_convert, get_worker_info
from .distributed import DistributedSampler
from .dataset import ConcatDataset, Dataset, IterableDataset, Subset, TensorDataset, random_split
from .sampler import (
    BatchSampler, RandomSampler, Sampler, SequentialSampler, SubsetRandomSampler, WeightedRandomSampler,
)

__all__ = ["dataloader", "dataset", "distributed", "sampler", "DataLoader", "default_collate", "default_convert",
           "get_worker_info", "ConcatDataset", "Dataset", "IterableDataset", "Subset", "TensorDataset",
           "random_split", "BatchSampler", "DistributedSampler", "RandomSampler", "Sampler", "SequentialSampler",
           "SubsetRandomSampler", "WeightedRandomSampler"]
