"""Threads for the numpy backend's products and convolution passes, by size:

- A product below ``SINGLE_THREAD_BELOW`` multiply-adds runs on one BLAS thread. OpenBLAS's
  threads spin while they wait for each other: for the small products of a training step
  (64 x 64 x 128) they gain little on an idle machine, and under one background process on 2
  cores a digits-MLP step went from ~0.4 ms to 4-30 ms (bench/blas_threads.py).
- Up to ``SPLIT_FROM``, a product runs on BLAS's own threads: they start fastest.
- A larger product, and a convolution pass (whose blocks of images, im2col copy, product and
  col2im add each, go one share per thread; ops/conv.py), run on webgrad's own pool of Python
  threads with BLAS on one thread. numpy lets go of the GIL in its products and copies. After a
  product on several threads, OpenBLAS's idle threads keep spinning (sched_yield) for about
  0.1 s and take a core from whatever else runs in parallel: right after a 2-thread product
  the MNIST CNN's 32->64 conv forward took 19 ms on 2 threads, not 11. The pool's idle threads
  sleep. Under one background process the MNIST CNN step took 99 ms this way, 414 ms with BLAS's
  threads for every product.

The pool has as many threads as numpy's BLAS had when webgrad first used it
(``OPENBLAS_NUM_THREADS``, or a threadpoolctl limit the user set). threadpoolctl sets BLAS's
count; where it is missing (Pyodide, whose numpy has no threads) or finds no BLAS, products run
as numpy's matmul does and nothing is split. While one caller's shares run, another caller's
(another Python thread, or a share's own products) run on their own thread alone.
"""
from __future__ import annotations

import math
import os
import queue
import threading

import numpy as np

# Multiply-adds (m * k * n * batch) below which a product runs on one BLAS thread, and from
# which it is split over the pool; between the two BLAS's own threads start faster than the
# pool's (512 x 64 x 256: 0.10 ms on 2 BLAS threads, 0.17 ms split, 0.17 ms on one thread).
# bench/blas_threads.py compares the whole choice against BLAS's threads for every product.
SINGLE_THREAD_BELOW = 1 << 22
SPLIT_FROM = 1 << 25
# Elements from which an elementwise op's numpy kernel is split over the pool too (along the
# first axis): relu of the MNIST CNN's 64x64x24x24 activations, 0.93 ms on one thread.
ELEMENTWISE_SPLIT_FROM = 1 << 20


class _Pool:
    """``workers - 1`` threads that sleep until handed a share; the caller runs the first."""

    def __init__(self, workers: int):
        self.workers = workers
        self._inboxes: list[queue.SimpleQueue] = [queue.SimpleQueue() for _ in range(workers - 1)]
        self._busy = threading.Lock()
        for inbox in self._inboxes:
            threading.Thread(target=self._serve, args=(inbox,), name="webgrad-cpu", daemon=True).start()

    def _serve(self, inbox) -> None:
        while True:
            fn, share, slot, results, done = inbox.get()
            try:
                results[slot] = fn(share)
                done.put(None)
            except BaseException as error:  # handed to the caller, which raises it
                done.put(error)

    def busy(self) -> bool:
        return self._busy.locked()

    def map(self, fn, shares: list) -> list | None:
        """``[fn(share) for share in shares]`` (at most ``workers`` shares), each on its own
        thread; None, running nothing, while another caller's shares run."""
        if not self._busy.acquire(blocking=False):
            return None
        try:
            # A queue of this call's own: a caller interrupted while it waits (KeyboardInterrupt)
            # leaves its shares' ends there, never in the next call's.
            results: list = [None] * len(shares)
            done: queue.SimpleQueue = queue.SimpleQueue()
            for slot, share in enumerate(shares[1:], 1):
                self._inboxes[slot - 1].put((fn, share, slot, results, done))
            error = None
            try:
                results[0] = fn(shares[0])
            except BaseException as own:
                error = own
            for _ in shares[1:]:  # every share ends before its arrays go back to the caller
                ended = done.get()
                error = error or ended
            if error is not None:
                raise error
            return results
        finally:
            self._busy.release()


class CpuThreads:
    """Runs the numpy backend's products (``matmul``) and a kernel's independent shares of work
    (``map``) on BLAS's thread count."""

    def __init__(self):
        self._libs: list | None = None  # (threadpoolctl controller, default count), found on first use
        self._many: bool | None = None  # whether BLAS was last set to its default count (None: not set)
        self._pool: _Pool | None = None
        self.split = True  # False: every product on BLAS's default threads, nothing split (bench/blas_threads.py)

    @staticmethod
    def _find() -> list:
        try:
            found = [(lib, lib.num_threads) for lib in numpy_blas_controllers()]
        except Exception:  # an unusual BLAS build: keep numpy's own behaviour
            return []
        return [(lib, default) for lib, default in found if isinstance(default, int) and default > 1]

    def _threads(self) -> int:
        if self._libs is None:
            self._libs = self._find()
        return max((default for _, default in self._libs), default=1)

    def _blas(self, many: bool) -> None:
        """BLAS on its default count or on one thread; changed only when that differs (each change
        costs a few microseconds)."""
        if many is not self._many:
            self._many = many
            for lib, default in self._libs or ():
                lib.set_num_threads(default if many else 1)

    def count(self) -> int:
        """The threads a kernel's shares may use: BLAS's count at first use, 1 where nothing can
        be set (or with ``split`` off)."""
        return self._threads() if self.split else 1

    def map(self, fn, shares: list) -> list:
        """``[fn(share) for share in shares]``, the shares on as many threads (at most
        ``count()`` shares; fewer run on fewer threads), each share's products on one BLAS thread."""
        if len(shares) > 1 and self.count() >= len(shares):
            if self._pool is None or self._pool.workers < len(shares):
                self._pool = _Pool(self.count())
            self._blas(False)
            results = self._pool.map(fn, shares)
            if results is not None:
                return results
        return [fn(share) for share in shares]

    def matmul(self, x: np.ndarray, y: np.ndarray, out: np.ndarray | None = None) -> np.ndarray:
        """``np.matmul(x, y, out=out)`` for operands of at least 2 dims, on threads by its size."""
        if self._pool is not None and self._pool.busy():  # a share's own product: BLAS is on one thread
            return np.matmul(x, y, out=out)
        size = matmul_size(x, y)
        m, n = x.shape[-2], y.shape[-1]
        parts = min(self.count(), max(m, n)) if size >= SPLIT_FROM else 1
        if parts <= 1:
            self._threads()
            self._blas(size >= SINGLE_THREAD_BELOW or not self.split)
            return np.matmul(x, y, out=out)
        if out is None:
            shape = np.broadcast_shapes(x.shape[:-2], y.shape[:-2]) + (m, n)
            out = np.empty(shape, np.result_type(x.dtype, y.dtype))
        bounds = [(max(m, n) * k // parts, max(m, n) * (k + 1) // parts) for k in range(parts)]

        def rows(span):
            np.matmul(x[..., span[0]:span[1], :], y, out=out[..., span[0]:span[1], :])

        def columns(span):
            np.matmul(x, y[..., span[0]:span[1]], out=out[..., span[0]:span[1]])
        self.map(rows if m >= n else columns, bounds)
        return out

    def spans(self, n: int, size: int) -> list[tuple[int, int]]:
        """[(lo, hi)]: n rows in one share per thread for a pass over ``size`` elements from
        ``ELEMENTWISE_SPLIT_FROM`` (a kernel whose rows are independent, for ``map``), else one."""
        parts = max(1, min(self.count(), n)) if size >= ELEMENTWISE_SPLIT_FROM else 1
        return [(n * k // parts, n * (k + 1) // parts) for k in range(parts)]

    def update(self, kernel, arrays: tuple, attrs: dict) -> None:
        """Run an in-place kernel whose arrays all have one shape and each element's result reads
        only that element (an optimizer's step), over flat shares of them where that pays."""
        spans = self.spans(arrays[0].size, arrays[0].size)
        if len(spans) == 1 or not all(a.shape == arrays[0].shape and a.flags.c_contiguous for a in arrays):
            kernel(*arrays, **attrs)
            return
        flat = [a.reshape(-1) for a in arrays]  # views: writes reach the arrays
        self.map(lambda span: kernel(*[a[span[0]:span[1]] for a in flat], **attrs), spans)

    def elementwise(self, kernel, arrays: list, attrs: dict, out: np.ndarray) -> bool:
        """Run an elementwise kernel that writes ``out=`` split along out's first axis, from
        ``ELEMENTWISE_SPLIT_FROM`` elements of one dtype; False, running nothing, otherwise."""
        if out.size < ELEMENTWISE_SPLIT_FROM or any(a.dtype != out.dtype for a in arrays):
            return False
        n = out.shape[0]
        parts = min(self.count(), n)
        split = [a.ndim == out.ndim and a.shape[0] == n for a in arrays]  # the rest broadcast whole
        if parts <= 1 or not all(whole or a.ndim < out.ndim or a.shape[0] == 1 for a, whole in zip(arrays, split)):
            return False

        def share(k):
            lo, hi = n * k // parts, n * (k + 1) // parts
            kernel(*[a[lo:hi] if cut else a for a, cut in zip(arrays, split)], out=out[lo:hi], **attrs)
        self.map(share, list(range(parts)))
        return True

    def reset(self) -> None:
        """Give every BLAS library its default count back and find it again on next use."""
        for lib, default in self._libs or ():
            lib.set_num_threads(default)
        self._libs, self._many = None, None


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
    lead_x, lead_y = x.shape[:-2], y.shape[:-2]
    batch = math.prod(lead_x if lead_x == lead_y or not lead_y else
                      lead_y if not lead_x else np.broadcast_shapes(lead_x, lead_y))
    return batch * x.shape[-2] * x.shape[-1] * y.shape[-1]


cpu_threads = CpuThreads()
if hasattr(os, "register_at_fork"):  # a forked child has none of the pool's threads: it makes its own
    os.register_at_fork(after_in_child=lambda: setattr(cpu_threads, "_pool", None))
