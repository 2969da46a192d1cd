"""PyTorch-compatible import paths, e.g. ``from webgrad.utils.data import DataLoader``."""
from . import data

__all__ = ["data"]
