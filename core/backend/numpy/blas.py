"""BLAS threads per matrix product size, for the numpy backend.

OpenBLAS splits a product over all cores once it is past a small size. For the
small products of a typical training step (64 x 64 x 128) the threads gain
little when the machine is idle, and when other processes keep the cores busy
they spin waiting for each other: a digits-MLP step went from ~0.4 ms to 4-30 ms
under one background process on 2 cores (see bench/blas_threads.py). So a
product below ``SINGLE_THREAD_BELOW`` multiply-adds runs on one BLAS thread, and
a larger one on the number of threads BLAS had when webgrad first used it (what
``OPENBLAS_NUM_THREADS`` or the user chose).

The count is changed only when the size class changes (each change costs a few
microseconds), so after a small product numpy's BLAS stays on one thread until
webgrad runs a large one. threadpoolctl does the switching; where it is missing
(Pyodide, whose numpy has no threaded BLAS) or finds no BLAS, nothing happens.
threadpoolctl lets only one Python thread change a process-wide BLAS pool at a
time; from other threads the choice is skipped, which costs speed, never results.
"""
from __future__ import annotations

import math

import numpy as np

# Multiply-adds (m * k * n * batch) below which a product runs on one thread;
# 0 turns the choice off (bench/blas_threads.py compares both).
SINGLE_THREAD_BELOW = 1 << 22


class BlasThreads:
    """Switches the BLAS libraries numpy loaded between one thread and their default count."""

    def __init__(self):
        self._libs: list | None = None  # (threadpoolctl controller, default count), found on first use
        self._single: bool | None = None  # the state last set

    @staticmethod
    def _find() -> list:
        try:
            found = [(lib, lib.num_threads) for lib in numpy_blas_controllers()]
        except Exception:  # an unusual BLAS build: keep numpy's own behaviour
            return []
        return [(lib, default) for lib, default in found if isinstance(default, int) and default > 1]

    def choose(self, multiply_adds: int) -> None:
        """Set the thread count for a product of ``multiply_adds`` multiply-adds."""
        single = multiply_adds < SINGLE_THREAD_BELOW
        if single is self._single:
            return
        if self._libs is None:
            self._libs = self._find()
        self._single = single
        for lib, default in self._libs:
            lib.set_num_threads(1 if single else default)

    def reset(self) -> None:
        """Give every BLAS library its default count back (and forget the state)."""
        for lib, default in self._libs or ():
            lib.set_num_threads(default)
        self._single = None


def numpy_blas_controllers() -> list:
    """threadpoolctl's controllers of numpy's BLAS; [] without threadpoolctl."""
    try:
        from threadpoolctl import ThreadpoolController  # type: ignore[import-untyped]
    except ImportError:
        return []
    libs = ThreadpoolController().select(user_api="blas").lib_controllers
    # numpy's own BLAS, not another library's (torch ships one too) when they differ.
    return [lib for lib in libs if "numpy" in str(lib.filepath)] or libs


def matmul_size(x, y) -> int:
    """Multiply-adds of ``np.matmul(x, y)`` for operands of at least 2 dims."""
    batch = math.prod(np.broadcast_shapes(x.shape[:-2], y.shape[:-2]))
    return batch * x.shape[-2] * x.shape[-1] * y.shape[-1]


blas_threads = BlasThreads()
