"""The cpu threads products run on (core/backend/numpy/blas.py), with and without a background load.

Workloads on the numpy backend: the digits MLP training step (64 -> 128 -> 10, batch 64, Adam;
its products are small), a mid-size product (512 x 64 @ 64 x 256, as in the char transformer),
one large matmul (1024 x 1024 @ 1024 x 1024) and the MNIST CNN's training step (bench/cnn_step.py:
its convolutions split their batch over the threads). Each runs with webgrad's threads (BLAS on
one thread; from ``blas.SINGLE_THREAD_BELOW`` multiply-adds a product, or a conv pass's blocks,
split over webgrad's pool) and with BLAS's own threads for every product (numpy's default),
first on an idle machine, then with ``--load`` background processes each keeping a core busy.
Modes alternate in rounds so drift in the machine's load hits both alike. Prints the median ms
per call and the ratio BLAS / webgrad (above 1: webgrad's threads are faster).

Some machines here set OPENBLAS_CORETYPE/OPENBLAS_L2_SIZE, which make numpy's
small matmuls much slower; measure with both unset:
    env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE python bench/blas_threads.py [--load 1]
"""
from __future__ import annotations

import argparse
import multiprocessing
import os
import statistics
import sys
import time

import numpy as np

import webgrad
from webgrad.backend.numpy import blas

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import cnn_step  # noqa: E402  (the MNIST network bench/cnn_step.py times)
from mlp_step import webgrad_step  # noqa: E402  (the same step bench/mlp_step.py times)

LARGE = 1024


def spin() -> None:
    while True:
        pass


def per_call(fn, seconds: float, min_calls: int) -> float:
    """Median seconds per call of ``fn``, over at least ``seconds`` and ``min_calls`` calls."""
    for _ in range(3):
        fn()
    times = []
    end = time.perf_counter() + seconds
    while len(times) < min_calls or time.perf_counter() < end:
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def product(m: int, k: int, n: int):
    rng = np.random.default_rng(0)
    a = webgrad.tensor(rng.random((m, k), dtype=np.float32))
    b = webgrad.tensor(rng.random((k, n), dtype=np.float32))
    return lambda: a @ b


def mnist_step():
    model = cnn_step.mnist_net(webgrad)
    x, y = cnn_step.data((1, 28, 28), cnn_step.MNIST_BATCH)
    return cnn_step.step_fn(webgrad, model, webgrad.optim.Adadelta(model.parameters()),
                            webgrad.tensor(x), webgrad.tensor(y))


def set_mode(mode: str) -> None:
    blas.cpu_threads.reset()
    blas.cpu_threads.split = mode == "webgrad"


def measure(workloads, rounds: int, seconds: float) -> dict:
    results: dict = {}
    for _ in range(rounds):
        for mode in ("webgrad", "BLAS"):
            set_mode(mode)
            for name, (fn, min_calls) in workloads.items():
                results.setdefault((name, mode), []).append(per_call(fn, seconds, min_calls))
    set_mode("webgrad")
    return {key: statistics.median(values) for key, values in results.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--load", type=int, default=1, help="background busy processes (default 1)")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--seconds", type=float, default=1.0, help="per measurement (default 1)")
    args = parser.parse_args()
    for name in ("OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE"):
        if os.environ.get(name):
            print(f"note: {name}={os.environ[name]} is set; numpy's BLAS runs a slower kernel (see docstring)")
    threshold = blas.SINGLE_THREAD_BELOW
    from threadpoolctl import threadpool_info

    # (read before webgrad first multiplies: from then on it keeps BLAS itself on one thread)
    threads = [(info["internal_api"], info["num_threads"]) for info in threadpool_info() if info["user_api"] == "blas"]
    workloads = {"MLP step": (webgrad_step("cpu"), 20), "matmul 512x64x256": (product(512, 64, 256), 20),
                 f"matmul {LARGE}^3": (product(LARGE, LARGE, LARGE), 3), "MNIST CNN step": (mnist_step(), 3)}
    print(f"{os.cpu_count()} CPUs; BLAS {threads}; one thread below {threshold} multiply-adds")
    print(f"{'workload':<18} {'load':>4} {'webgrad ms':>11} {'BLAS ms':>9} {'BLAS/webgrad':>13}")
    for load in (0, args.load):
        workers = [multiprocessing.Process(target=spin, daemon=True) for _ in range(load)]
        for worker in workers:
            worker.start()
        try:
            result = measure(workloads, args.rounds, args.seconds)
        finally:
            for worker in workers:
                worker.terminate()
                worker.join()
        for name in workloads:
            ours, peer = result[(name, "webgrad")], result[(name, "BLAS")]
            print(f"{name:<18} {load:>4} {ours * 1e3:11.3f} {peer * 1e3:9.3f} {peer / ours:12.2f}x")


if __name__ == "__main__":
    main()
