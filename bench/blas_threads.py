"""BLAS threads per matmul size (core/backend/blas.py), with and without a background load.

Two workloads on the numpy backend: the digits MLP training step (64 -> 128 -> 10,
batch 64, Adam; its products are small) and one large matmul (1024 x 1024 @
1024 x 1024). Each runs with webgrad's per-size choice (one BLAS thread below
``blas.SINGLE_THREAD_BELOW`` multiply-adds, the default count above) and with
the choice off (numpy's default threads for every product), first on an idle
machine, then with ``--load`` background processes each keeping a core busy.
Modes alternate in rounds so drift in the machine's load hits both alike.
Prints the median ms per call and the ratio default / per-size (above 1: the
choice is faster).

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


def large_matmul():
    rng = np.random.default_rng(0)
    a = webgrad.tensor(rng.random((LARGE, LARGE), dtype=np.float32))
    b = webgrad.tensor(rng.random((LARGE, LARGE), dtype=np.float32))
    return lambda: a @ b


def set_mode(mode: str, threshold: int) -> None:
    blas.blas_threads.reset()
    blas.SINGLE_THREAD_BELOW = threshold if mode == "per-size" else 0


def measure(workloads, rounds: int, seconds: float, threshold: int) -> dict:
    results: dict = {}
    for _ in range(rounds):
        for mode in ("per-size", "default"):
            set_mode(mode, threshold)
            for name, (fn, min_calls) in workloads.items():
                results.setdefault((name, mode), []).append(per_call(fn, seconds, min_calls))
    set_mode("per-size", threshold)
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
    workloads = {"MLP step": (webgrad_step("cpu"), 20), f"matmul {LARGE}^3": (large_matmul(), 3)}
    from threadpoolctl import threadpool_info

    threads = [(info["internal_api"], info["num_threads"]) for info in threadpool_info() if info["user_api"] == "blas"]
    print(f"{os.cpu_count()} CPUs; BLAS {threads}; one thread below {threshold} multiply-adds")
    print(f"{'workload':<16} {'load':>4} {'per-size ms':>12} {'default ms':>11} {'default/per-size':>17}")
    for load in (0, args.load):
        workers = [multiprocessing.Process(target=spin, daemon=True) for _ in range(load)]
        for worker in workers:
            worker.start()
        try:
            result = measure(workloads, args.rounds, args.seconds, threshold)
        finally:
            for worker in workers:
                worker.terminate()
                worker.join()
        for name in workloads:
            ours, peer = result[(name, "per-size")], result[(name, "default")]
            print(f"{name:<16} {load:>4} {ours * 1e3:12.3f} {peer * 1e3:11.3f} {peer / ours:16.2f}x")


if __name__ == "__main__":
    main()
