"""``webgrad.data``: the names of ``webgrad.utils.data`` (datasets, samplers, DataLoader), one import shorter.

Everything lives in the ``webgrad.utils.data`` package (submodules ``dataset``,
``sampler``, ``dataloader``, as ``torch.utils.data``).

Example:
    >>> from webgrad.data import TensorDataset, DataLoader
    >>> loader = DataLoader(TensorDataset(webgrad.randn(100, 3)), batch_size=32, shuffle=True)
"""
from .utils.data import (  # noqa: F401
    BatchSampler, ConcatDataset, DataLoader, Dataset, IterableDataset, RandomSampler, Sampler, SequentialSampler,
    Subset, SubsetRandomSampler, TensorDataset, WeightedRandomSampler, default_collate, default_convert,
    get_worker_info, random_split,
)
from .utils.data import __all__ as _names

__all__ = [name for name in _names if name not in ("dataloader", "dataset", "sampler")]
