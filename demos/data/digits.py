"""Load the 8x8 handwritten digits saved by ``make_digits.py`` (numpy only).

Example:
    >>> images, labels = load_digits()
    >>> images.shape, images.dtype, labels[:5]
    ((1797, 64), dtype('float32'), array([0, 1, 2, 3, 4]))
    >>> x_train, y_train, x_test, y_test = train_test_split(images, labels)
    >>> len(x_train), len(x_test)
    (1437, 360)
"""
from __future__ import annotations

import pathlib

import numpy as np

DEFAULT_PATH = pathlib.Path(__file__).with_name("digits.npz")
NUM_CLASSES = 10
TEST_SIZE = 360


def load_digits(path=None) -> tuple[np.ndarray, np.ndarray]:
    """Return ``(images, labels)``: float32 (N, 64) scaled to 0..1 and int64 (N,).

    Args:
        path: the ``.npz`` file; defaults to ``digits.npz`` next to this module.
    """
    path = DEFAULT_PATH if path is None else pathlib.Path(path)
    if not path.exists():
        raise FileNotFoundError(f"{path} not found; create it with `python demos/data/make_digits.py`")
    with np.load(path, allow_pickle=False) as file:
        images, labels = file["images"], file["labels"]
    if images.ndim != 3 or images.shape[1:] != (8, 8) or labels.shape != images.shape[:1]:
        raise ValueError(f"{path}: expected images (N, 8, 8) and labels (N,), "
                         f"got {images.shape} and {labels.shape}")
    images = images.reshape(len(images), 64).astype(np.float32) / np.float32(16.0)
    return images, labels.astype(np.int64)


def train_test_split(images: np.ndarray, labels: np.ndarray, test_size: int = TEST_SIZE,
                     seed: int = 0):
    """Shuffle with a fixed seed, then split off the last ``test_size`` items.

    The same arguments always give the same split, independent of
    ``webgrad.manual_seed``. Returns ``(x_train, y_train, x_test, y_test)``.
    """
    if len(images) != len(labels):
        raise ValueError(f"train_test_split: {len(images)} images but {len(labels)} labels")
    if not 0 < test_size < len(images):
        raise ValueError(f"train_test_split: test_size must be between 1 and {len(images) - 1}, "
                         f"got {test_size}")
    order = np.random.default_rng(seed).permutation(len(images))
    train, test = order[:-test_size], order[-test_size:]
    return images[train], labels[train], images[test], labels[test]
