"""webgrad.datasets: the digits and the text ship inside the package and load without network."""
from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

import webgrad

from conftest import to_numpy

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))


def test_digits_all_train_test(device):
    images, labels = webgrad.datasets.digits(device=device)
    assert images.shape == (1797, 64) and images.dtype == webgrad.float32 and images.device == device
    assert labels.shape == (1797,) and labels.dtype == webgrad.int64
    values = to_numpy(images)
    assert values.min() == 0.0 and values.max() == 1.0
    assert np.array_equal(np.bincount(to_numpy(labels)), [178, 182, 177, 183, 181, 182, 181, 179, 174, 180])

    x_train, y_train = webgrad.datasets.digits(split="train", device=device)
    x_test, y_test = webgrad.datasets.digits(split="test", flatten=False, device=device)
    assert x_train.shape == (1437, 64) and x_test.shape == (360, 1, 8, 8)
    # Train and test together are the whole set, each image once.
    together = np.concatenate([to_numpy(x_train), to_numpy(x_test).reshape(360, 64)])
    assert np.array_equal(np.sort(together.view(np.uint32).sum(1)), np.sort(values.view(np.uint32).sum(1)))
    assert len(np.unique(np.concatenate([to_numpy(y_train), to_numpy(y_test)]))) == 10


def test_digits_match_the_demos_split():
    from demos.data.digits import load_digits, train_test_split

    x_train, y_train, x_test, y_test = train_test_split(*load_digits())
    ours_x, ours_y = webgrad.datasets.digits(split="test")
    assert np.array_equal(to_numpy(ours_x), x_test) and np.array_equal(to_numpy(ours_y), y_test)
    ours_x, ours_y = webgrad.datasets.digits(split="train")
    assert np.array_equal(to_numpy(ours_x), x_train) and np.array_equal(to_numpy(ours_y), y_train)


def test_load_digits_like_scikit_learn():
    bunch = webgrad.datasets.load_digits()
    assert bunch.data.shape == (1797, 64) and bunch.data.dtype == np.float64 and bunch.data.max() == 16.0
    assert bunch.images.shape == (1797, 8, 8) and np.array_equal(bunch.images.reshape(1797, 64), bunch.data)
    assert list(bunch.target[:10]) == list(range(10)) and list(bunch.target_names) == list(range(10))
    data, target = webgrad.datasets.load_digits(n_class=3, return_X_y=True)
    assert set(target) == {0, 1, 2} and len(data) == len(target) == 178 + 182 + 177
    data[0, 0] = 99.0  # callers get copies: the cached arrays are never changed
    assert webgrad.datasets.load_digits().data[0, 0] == 0.0


def test_bad_arguments():
    with pytest.raises(ValueError, match="split must be"):
        webgrad.datasets.digits(split="validation")
    with pytest.raises(ValueError, match="n_class"):
        webgrad.datasets.load_digits(n_class=11)


def test_tiny_text():
    text = webgrad.datasets.tiny_text()
    assert 20_000 <= len(text.encode()) <= 50_000
    assert "Shall I compare thee to a summer's day?" in text
    assert set(text) <= set("\n !'(),-.:;?" + "0123456789" + "ABCDEFGHIJKLMNOPQRSTUVWXYZ"
                            + "abcdefghijklmnopqrstuvwxyz")


def test_data_files_are_package_data():
    import tomllib

    config = tomllib.loads((Path(__file__).resolve().parent.parent / "pyproject.toml").read_text())
    assert "webgrad.datasets" in config["tool"]["setuptools"]["packages"]
    patterns = config["tool"]["setuptools"]["package-data"]["webgrad.datasets"]
    assert "*.npz" in patterns and "*.txt" in patterns
