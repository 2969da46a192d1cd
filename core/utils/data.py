"""Same names as ``torch.utils.data``; everything lives in ``webgrad.data``.

Example:
    >>> from webgrad.utils.data import DataLoader, TensorDataset
"""
from ..data import (
    DataLoader,
    Dataset,
    Subset,
    TensorDataset,
    default_collate,
    random_split,
)

__all__ = ["DataLoader", "Dataset", "Subset", "TensorDataset", "default_collate", "random_split"]
