"""The numpy backend runs a small product on one BLAS thread, a mid-size one on BLAS's threads,
and splits a large product, or a convolution pass's blocks, over its own pool of threads with
BLAS on one thread (core/backend/numpy/blas.py). Speed is measured
in bench/blas_threads.py and bench/cnn_step.py; here we check what runs where, and that the
split gives numpy's results.
"""
from __future__ import annotations

import multiprocessing
import sys
import threading
import time

import numpy as np
import pytest

import webgrad
from webgrad.backend.numpy import blas
from webgrad.ops import conv
from webgrad.ops.elementwise import relu_backward
from conftest import need_module

threadpoolctl = need_module("threadpoolctl")


def numpy_blas_threads() -> list[int]:
    return [lib.num_threads for lib in blas.numpy_blas_controllers()]


@pytest.fixture()
def two_threads():
    """The backend's cpu threads as on a 2-core machine (whatever this one has), found afresh."""
    with threadpoolctl.threadpool_limits(limits=2, user_api="blas"):
        blas.cpu_threads.reset()
        assert blas.cpu_threads.count() == 2
        yield blas.cpu_threads
        blas.cpu_threads.reset()
    blas.cpu_threads.reset()


@pytest.fixture()
def products(monkeypatch):
    """(thread name, BLAS thread counts, rows, columns) of every np.matmul the backend calls."""
    calls: list = []
    real = np.matmul

    def spy(x, y, *args, **kwargs):
        calls.append((threading.current_thread().name, numpy_blas_threads(), x.shape[-2], y.shape[-1]))
        return real(x, y, *args, **kwargs)
    monkeypatch.setattr(np, "matmul", spy)
    return calls


def test_a_large_product_is_split_over_the_threads_with_blas_on_one(two_threads, products):
    rng = np.random.default_rng(0)
    x, y = rng.standard_normal((512, 512), dtype=np.float32), rng.standard_normal((512, 256), dtype=np.float32)
    out = webgrad.tensor(x) @ webgrad.tensor(y)
    np.testing.assert_allclose(out.numpy(), x.astype(np.float64) @ y, rtol=1e-4, atol=1e-4)
    assert sorted(name for name, *_ in products) == ["MainThread", "webgrad-cpu"]
    assert all(counts == [1] for _, counts, _, _ in products)
    assert sorted(rows for _, _, rows, _ in products) == [256, 256]  # x's rows, as m >= n


def test_a_mid_size_product_runs_whole_on_blas_threads(two_threads, products):
    webgrad.ones(256, 256) @ webgrad.ones(256, 256)
    assert products == [("MainThread", [2], 256, 256)]


def test_a_small_product_runs_whole_on_one_thread(two_threads, products):
    webgrad.ones(256, 256) @ webgrad.ones(256, 256)
    webgrad.ones(64, 64) @ webgrad.ones(64, 128)  # after a product on BLAS's threads
    assert products[-1] == ("MainThread", [1], 64, 128)


@pytest.mark.parametrize("x_shape, y_shape", [((3, 40, 400), (400, 900)),  # y's columns, x broadcast
                                              ((900, 300), (2, 300, 80)),  # x's rows, y broadcast
                                              ((1, 4000, 9000), (9000, 1))])
def test_split_products_give_numpys_result(two_threads, x_shape, y_shape):
    rng = np.random.default_rng(1)
    x, y = rng.standard_normal(x_shape), rng.standard_normal(y_shape)
    # BLAS's edge tiles fall elsewhere in a share than in the whole: equal to rounding, not bits
    np.testing.assert_allclose(blas.cpu_threads.matmul(x, y), np.matmul(x, y), rtol=1e-12, atol=1e-12)
    out = np.full(np.matmul(x, y).shape, np.nan)
    assert blas.cpu_threads.matmul(x, y, out=out) is out
    np.testing.assert_allclose(out, np.matmul(x, y), rtol=1e-12, atol=1e-12)


def test_compiled_steps_split_products_too(two_threads, products):
    w = webgrad.ones(512, 256)
    step = webgrad.compile(lambda x: (x @ w).relu())
    x = webgrad.ones(512, 512)
    np.testing.assert_array_equal(step(x).numpy(), np.full((512, 256), 512.0, np.float32))
    products.clear()
    step(x)
    assert sorted(name for name, *_ in products) == ["MainThread", "webgrad-cpu"]


def test_conv_passes_split_the_batch_and_match_one_thread(two_threads, products, monkeypatch):
    rng = np.random.default_rng(2)
    x = rng.standard_normal((8, 16, 18, 18), dtype=np.float32)
    w = rng.standard_normal((32, 16, 3, 3), dtype=np.float32)
    geometry = dict(stride=(1, 1), padding=(1, 0, 2, 1), dilation=(1, 1), groups=1)
    g = rng.standard_normal(conv._conv2d_numpy(x, w, **geometry).shape, dtype=np.float32)

    def passes():
        return (conv._conv2d_numpy(x, w, **geometry),
                conv._backward_input_numpy(g, w, input_hw=(18, 18), **geometry),
                conv._backward_weight_numpy(g, x, kernel_hw=(3, 3), **geometry))
    monkeypatch.setattr(conv, "BLOCK_ELEMENTS", 1)  # a block per image
    split = passes()
    names = {name for name, *_ in products}
    assert names == {"MainThread", "webgrad-cpu"} and all(counts == [1] for _, counts, _, _ in products)
    monkeypatch.setattr(conv, "PARALLEL_FROM", 1 << 62)
    products.clear()
    whole = passes()
    assert {name for name, *_ in products} == {"MainThread"}
    np.testing.assert_array_equal(split[0], whole[0])
    np.testing.assert_array_equal(split[1], whole[1])  # each image's gradient is its own thread's
    np.testing.assert_allclose(split[2], whole[2], rtol=1e-5, atol=1e-4)  # the threads' sums, added


@pytest.fixture()
def elementwise_shares(monkeypatch):
    """(thread name, rows) of every share of an elementwise kernel the cpu threads run."""
    calls: list = []
    real = blas.CpuThreads.map

    def spy(self, fn, shares):
        def traced(share):
            calls.append((threading.current_thread().name, share))
            return fn(share)
        return real(self, traced, shares)
    monkeypatch.setattr(blas.CpuThreads, "map", spy)
    return calls


@pytest.mark.parametrize("compiled", [False, True])
def test_a_large_elementwise_op_is_split_along_its_first_axis(two_threads, elementwise_shares, compiled):
    rng = np.random.default_rng(3)
    x = rng.standard_normal((64, 32, 24, 24), dtype=np.float32)
    b = rng.standard_normal((32, 1, 1), dtype=np.float32)
    g = rng.standard_normal(x.shape, dtype=np.float32)
    bias, grad = webgrad.tensor(b), webgrad.tensor(g)

    def step(t):
        y = webgrad.relu(t + bias)  # the bias broadcasts whole into every share
        return y, relu_backward(grad, y)
    fn = webgrad.compile(step) if compiled else step
    fn(webgrad.tensor(x))
    elementwise_shares.clear()
    y, gx = fn(webgrad.tensor(x))
    expected = np.maximum(x + b, 0)
    np.testing.assert_array_equal(y.numpy(), expected)
    np.testing.assert_array_equal(gx.numpy(), np.where(expected > 0, g, 0))
    assert {name for name, _ in elementwise_shares} == {"MainThread", "webgrad-cpu"}


def test_small_or_float16_elementwise_ops_run_whole(two_threads, elementwise_shares):
    webgrad.ones(64, 64).relu()
    x = webgrad.ones(64, 32, 24, 24, dtype=webgrad.float16)
    assert (x + x).dtype == webgrad.float16  # computed in float32 and rounded once: not split
    assert elementwise_shares == []


@pytest.mark.parametrize("kernel, stride, padding", [(2, 2, 0), (3, 2, 1)])
def test_max_pooling_splits_the_batch_and_matches_one_thread(two_threads, elementwise_shares, monkeypatch,
                                                             kernel, stride, padding):
    x = webgrad.tensor(np.random.default_rng(4).standard_normal((8, 16, 96, 97), dtype=np.float32),
                       requires_grad=True)

    def pooled():
        x.grad = None
        y = webgrad.nn.functional.max_pool2d(x, kernel, stride, padding)
        (y * y).sum().backward()
        return y.detach().numpy(), x.grad.numpy()
    split = pooled()
    assert {name for name, _ in elementwise_shares} == {"MainThread", "webgrad-cpu"}
    monkeypatch.setattr(blas, "ELEMENTWISE_SPLIT_FROM", 1 << 62)
    elementwise_shares.clear()
    whole = pooled()
    assert {name for name, _ in elementwise_shares} == {"MainThread"}
    np.testing.assert_array_equal(split[0], whole[0])
    np.testing.assert_array_equal(split[1], whole[1])


@pytest.mark.parametrize("make", [lambda p: webgrad.optim.Adam(p, lr=0.1, weight_decay=0.01),
                                  lambda p: webgrad.optim.Adadelta(p, maximize=True)])
def test_a_large_parameters_optimizer_step_is_split_and_matches_one_thread(two_threads, elementwise_shares,
                                                                         monkeypatch, make):
    rng = np.random.default_rng(5)
    start, grad = rng.standard_normal((2, 1200, 1000), dtype=np.float32)

    def stepped():
        w = webgrad.nn.Parameter(webgrad.tensor(start))
        optimizer = make([w])
        for _ in range(2):
            w.grad = webgrad.tensor(grad)
            optimizer.step()
        return w.detach().numpy()
    split = stepped()
    assert {name for name, _ in elementwise_shares} == {"MainThread", "webgrad-cpu"}
    monkeypatch.setattr(blas, "ELEMENTWISE_SPLIT_FROM", 1 << 62)
    elementwise_shares.clear()
    np.testing.assert_array_equal(split, stepped())
    assert elementwise_shares == []


def test_a_failing_share_raises_on_the_caller_and_the_pool_goes_on(two_threads):
    def share(k):
        if k == 1:
            raise ValueError("share 1 failed")
        return k
    with pytest.raises(ValueError, match="share 1 failed"):
        blas.cpu_threads.map(share, [0, 1])
    assert blas.cpu_threads.map(lambda k: k * 10, [1, 2]) == [10, 20]


def test_a_share_that_fails_on_the_caller_still_waits_for_the_others(two_threads):
    ended: list = []

    def share(k):
        if k == 0:
            raise KeyError("the caller's share")
        time.sleep(0.2)
        ended.append(k)
    with pytest.raises(KeyError):
        blas.cpu_threads.map(share, [0, 1])
    assert ended == [1]  # the other share's arrays were not handed back while it still ran
    assert blas.cpu_threads.map(lambda k: -k, [1, 2]) == [-1, -2]


def test_shares_that_ask_for_the_pool_run_on_their_own_thread(two_threads):
    inner = blas.cpu_threads.map(lambda k: blas.cpu_threads.map(lambda j: (k, j), [0, 1]), [0, 1])
    assert inner == [[(0, 0), (0, 1)], [(1, 0), (1, 1)]]


def test_matmul_size_counts_broadcast_batches():
    x, y = np.empty((2, 1, 3, 4)), np.empty((5, 4, 6))
    assert blas.matmul_size(x, y) == 2 * 5 * 3 * 4 * 6
    assert blas.matmul_size(np.empty((0, 4)), np.empty((4, 6))) == 0


def test_without_threadpoolctl_nothing_is_split(monkeypatch):
    monkeypatch.setitem(sys.modules, "threadpoolctl", None)  # as in Pyodide: the import fails
    threads = blas.CpuThreads()
    assert threads.count() == 1
    x = np.ones((1024, 1024))
    np.testing.assert_array_equal(threads.matmul(x, x), np.full((1024, 1024), 1024.0))
    assert threads._pool is None and threads._libs == []


def _product_in_child(queue):
    x = np.ones((1024, 1024))
    queue.put((blas.cpu_threads._pool is None, float(blas.cpu_threads.matmul(x, x)[0, 0])))


@pytest.mark.skipif(sys.platform != "linux", reason="fork is Linux's start method; elsewhere no pool is inherited")
def test_a_forked_child_makes_its_own_pool(two_threads):
    blas.cpu_threads.map(lambda k: k, [0, 1])  # the pool's threads exist here, not in a child
    context = multiprocessing.get_context("fork")
    queue = context.Queue()
    child = context.Process(target=_product_in_child, args=(queue,))
    child.start()
    fresh, value = queue.get(timeout=60)
    child.join(timeout=60)
    assert fresh and value == 1024.0 and child.exitcode == 0
