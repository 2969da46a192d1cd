"""``webgrad.datasets``: small datasets shipped inside the wheel, so the same line works
natively and in the browser page, offline.

- ``digits()``: the 8x8 handwritten digits (1797 images, 10 classes) as webgrad tensors.
- ``load_digits()``: the same data the way scikit-learn returns it (numpy arrays).
- ``tiny_text()``: a small public-domain English text for character-level language models.

Example:
    >>> images, labels = webgrad.datasets.digits()
    >>> images.shape, labels.shape
    (webgrad.Size([1797, 64]), webgrad.Size([1797]))
    >>> x_train, y_train = webgrad.datasets.digits(split="train")
"""
from __future__ import annotations

import functools
import io
from importlib import resources
from types import SimpleNamespace

import numpy as np
from ..creation import tensor

DIGITS_FILE = "digits.npz"
TEXT_FILE = "tiny_text.txt"
DIGITS_TEST_SIZE = 360  # the split the demos use: shuffled with seed 0, the last 360 for testing
SPLITS = (None, "train", "test")


def _read(name: str) -> bytes:
    return resources.files(__name__).joinpath(name).read_bytes()


@functools.lru_cache(maxsize=1)
def _digits_arrays() -> tuple[np.ndarray, np.ndarray]:
    with np.load(io.BytesIO(_read(DIGITS_FILE)), allow_pickle=False) as file:
        images, labels = file["images"], file["labels"]
    images.setflags(write=False)
    labels.setflags(write=False)
    return images, labels  # uint8 (1797, 8, 8) in 0..16 and uint8 (1797,)


def _split_indices(count: int, split: str | None, caller: str) -> np.ndarray:
    if split not in SPLITS:
        raise ValueError(f"{caller}: split must be None, 'train' or 'test', got {split!r}")
    order = np.random.default_rng(0).permutation(count)  # fixed: independent of webgrad.manual_seed
    if split == "train":
        return order[:-DIGITS_TEST_SIZE]
    if split == "test":
        return order[-DIGITS_TEST_SIZE:]
    return np.arange(count)


def digits(split: str | None = None, flatten: bool = True, device=None):
    """The 8x8 handwritten digits as ``(images, labels)`` webgrad tensors.

    Args:
        split: ``None`` for all 1797 images in their original order, ``"train"`` (1437) or
            ``"test"`` (360): a fixed shuffle with seed 0, the same on every machine.
        flatten: images as (N, 64) for an MLP (default), or (N, 1, 8, 8) for a CNN when False.
        device: where to put the tensors (default: ``webgrad.get_default_device()``).

    Returns:
        images: float32, pixel values scaled from 0..16 to 0..1. labels: int64 class 0..9.

    Example:
        >>> x, y = webgrad.datasets.digits(split="test", flatten=False)
        >>> x.shape, y[:5]
        (webgrad.Size([360, 1, 8, 8]), tensor([...]))
    """
    images, labels = _digits_arrays()
    index = _split_indices(len(labels), split, "webgrad.datasets.digits")
    pixels = images[index].astype(np.float32) / np.float32(16.0)
    pixels = pixels.reshape(len(index), 64) if flatten else pixels.reshape(len(index), 1, 8, 8)
    return tensor(pixels, device=device), tensor(labels[index].astype(np.int64), device=device)


def load_digits(n_class: int = 10, return_X_y: bool = False):
    """The digits as scikit-learn's ``load_digits`` gives them (numpy, pixel values 0..16).

    Returns ``(data, target)`` when ``return_X_y``, else a namespace with ``data`` (float64,
    (N, 64)), ``images`` (float64, (N, 8, 8)), ``target`` (int64), ``target_names`` and ``DESCR``.
    ``n_class`` keeps only the classes below it, as scikit-learn does.
    """
    if not isinstance(n_class, int) or not 1 <= n_class <= 10:
        raise ValueError(f"webgrad.datasets.load_digits: n_class must be an int from 1 to 10, got {n_class!r}")
    images, labels = _digits_arrays()
    keep = labels < n_class
    images, target = images[keep].astype(np.float64), labels[keep].astype(np.int64)
    data = images.reshape(len(target), 64)
    if return_X_y:
        return data, target
    return SimpleNamespace(data=data, images=images, target=target, target_names=np.arange(n_class),
                           feature_names=[f"pixel_{r}_{c}" for r in range(8) for c in range(8)],
                           DESCR="8x8 images of handwritten digits 0-9, pixel values 0..16 (the UCI "
                                 "optical recognition of handwritten digits test set, as in scikit-learn).")


def tiny_text() -> str:
    """A small public-domain English text (about 23 KB: Shakespeare's sonnets and songs) for char-level models.

    Example:
        >>> text = webgrad.datasets.tiny_text()
        >>> vocab = sorted(set(text))
    """
    return _read(TEXT_FILE).decode("utf-8")
