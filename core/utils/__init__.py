"""PyTorch-compatible import paths, e.g. ``from webgrad.utils.data import DataLoader``."""
from . import checkpoint, data

__all__ = ["checkpoint", "data"]
