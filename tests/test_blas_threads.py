"""The numpy backend runs small matmuls on one BLAS thread and large ones on the
default count (core/backend/blas.py). Speed is measured in bench/blas_threads.py;
here we check the choice itself, by reading BLAS's thread count inside the kernel.
"""
from __future__ import annotations

import sys

import numpy as np
import pytest

import webgrad
from webgrad.backend.numpy import backend as numpy_backend
from webgrad.backend.numpy import blas
from conftest import need_module

threadpoolctl = need_module("threadpoolctl")


def numpy_blas_threads() -> list[int]:
    return [lib.num_threads for lib in blas.numpy_blas_controllers()]


@pytest.fixture()
def seen(monkeypatch):
    """Thread counts BLAS has as each matmul kernel is handed out (the backend calls it next),
    with a fresh chooser whose default is 2."""
    counts: list[list[int]] = []
    chooser = blas.BlasThreads()
    choose = chooser.choose

    def spy(size):
        choose(size)
        counts.append(numpy_blas_threads())

    monkeypatch.setattr(chooser, "choose", spy)
    with threadpoolctl.threadpool_limits(limits=2, user_api="blas"):
        monkeypatch.setattr(numpy_backend, "blas_threads", chooser)
        assert numpy_blas_threads() and set(numpy_blas_threads()) == {2}
        yield counts
        assert set(numpy_blas_threads()) <= {1, 2}


def test_small_matmul_runs_on_one_thread_and_large_on_the_default(seen):
    small = webgrad.ones(64, 64) @ webgrad.ones(64, 128)
    large = webgrad.ones(256, 256) @ webgrad.ones(256, 256)
    small_again = webgrad.ones(2, 3) @ webgrad.ones(3, 4)
    assert seen == [[1], [2], [1]]
    assert small.shape == (64, 128) and float(large[0, 0].item()) == 256.0 and small_again.shape == (2, 4)


def test_backward_products_choose_too(seen):
    w = webgrad.ones(64, 128, requires_grad=True)
    (webgrad.ones(64, 64) @ w).sum().backward()
    assert seen and all(counts == [1] for counts in seen)


def test_threshold_zero_leaves_the_default(seen, monkeypatch):
    monkeypatch.setattr(blas, "SINGLE_THREAD_BELOW", 0)
    webgrad.ones(8, 8) @ webgrad.ones(8, 8)
    assert seen == [[2]]


def test_matmul_size_counts_broadcast_batches():
    x, y = np.empty((2, 1, 3, 4)), np.empty((5, 4, 6))
    assert blas.matmul_size(x, y) == 2 * 5 * 3 * 4 * 6
    assert blas.matmul_size(np.empty((0, 4)), np.empty((4, 6))) == 0


def test_without_threadpoolctl_nothing_changes(monkeypatch):
    monkeypatch.setitem(sys.modules, "threadpoolctl", None)  # as in Pyodide: the import fails
    chooser = blas.BlasThreads()
    chooser.choose(10)
    chooser.choose(1 << 30)
    chooser.reset()
    assert chooser._libs == []
