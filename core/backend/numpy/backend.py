"""The numpy backend (device ``"cpu"``): the reference every other backend is
tested against. It runs natively and, unchanged, inside Pyodide.

A tensor's data here is a plain ``np.ndarray`` (views share memory, as in
PyTorch). Each op's numpy kernel is declared beside the op in ``webgrad.ops``.
"""
from __future__ import annotations

import functools
import math

import numpy as np

from ... import random as wg_random
from . import heap
from . import replay as numpy_replay
from . import wasm_gemm
from . import blas
from .blas import cpu_threads, matmul_size
from .arrays import NP_MATMUL, counted, stored_result, takes_out, writes_out  # noqa: F401  (imported from here)
from .wasm_gemm import use_wasm_gemm  # noqa: F401  (webgrad.backend.numpy.use_wasm_gemm)

# The graph passes, in order (graph/passes/__init__.py names them): no functionalization (a
# numpy kernel may return its input, so a write in place stays one) and no generated kernels;
# a fused chain's steps share one planned array (replay.py).
PASSES = ("dce", "folded", "cse", "dce", "transposed", "copies", "fused")


def product_kernel(x, y):
    """The function that computes ``x @ y`` here: the wasm GEMM in Pyodide, else numpy's BLAS on
    one thread, a large product split over the cpu threads (matmul, and kernels made of products)."""
    if not wasm_gemm.IN_PYODIDE:
        kernel = cpu_threads.matmul  # (see blas.py)
    elif wasm_gemm.wants(x, y, matmul_size(x, y)):  # float32 products in wasm (see wasm/)
        kernel = wasm_gemm.matmul
    else:
        kernel = wasm_gemm.numpy_matmul  # numpy's own loop there: y goes k-major first (see wasm/)
    if y.ndim == 2 and x.ndim > 2:
        return functools.partial(_rows_folded, kernel)
    return kernel


def _rows_folded(kernel, x, y):
    """``x`` (..., m, k) @ ``y`` (k, n) as one (... * m, k) product, ``x`` copied first where its
    rows do not fold as they are: numpy would run one small product per leading index (a Linear
    on (batch, seq, features) 1.6x slower; on MultiheadAttention's (seq, batch, features) 4x)."""
    return kernel(x.reshape(math.prod(x.shape[:-1]), x.shape[-1]), y).reshape(*x.shape[:-1], y.shape[-1])


class NumpyBackend:
    """Implements backend/protocol.py's ``Backend``."""
    name = "numpy"
    device = "cpu"
    passes = PASSES
    counts_dispatches = False

    def __init__(self):
        heap.keep_freed_memory()  # a step's arrays reuse the last step's pages (heap.py)

    def run(self, op, inputs, attrs, shape, dtype):
        arrays = [t._data for t in inputs]
        for a in arrays:
            if a.dtype.char == "e":  # float16: computed in float32, rounded once (torch's opmath)
                arrays = [a.astype(np.float32) if a.dtype.char == "e" else a for a in arrays]
                break
        kernel = self.kernel(op, arrays)
        if (op.kind == "elementwise" and math.prod(shape) >= blas.ELEMENTWISE_SPLIT_FROM and cpu_threads.count() > 1
                and writes_out(kernel, attrs)):
            out = np.empty(shape, dtype.np)
            if cpu_threads.elementwise(kernel, arrays, attrs, out):  # large: split over the cpu threads
                return stored_result(out, dtype)
        return stored_result(kernel(*arrays, **attrs), dtype)

    def kernel(self, op, arrays):
        """The function that runs ``op`` on ``arrays``: its numpy kernel, but for matmul the
        wasm GEMM in Pyodide or numpy's BLAS split over the cpu threads by the product's size."""
        kernel = op.impls.get("numpy")
        if kernel is None:
            raise NotImplementedError(f"{op.name}: no numpy kernel")
        return product_kernel(*arrays) if kernel is NP_MATMUL else kernel

    def run_inplace(self, op, tensors, attrs):
        op.impls["numpy"](*[t._data for t in tensors], **attrs)

    def run_into(self, op, inputs, attrs, out) -> bool:
        target = out._data
        arrays = [t._data for t in inputs]
        if (op.kind != "elementwise" or out.dtype.rounding is not None or not target.flags.writeable
                or any(a.dtype != target.dtype for a in arrays)  # (float16 computes in float32)
                or any(s == 0 and n > 1 for s, n in zip(target.strides, target.shape))):
            return False
        kernel = self.kernel(op, arrays)
        if not writes_out(kernel, attrs):
            return False
        if not (target.size >= blas.ELEMENTWISE_SPLIT_FROM and cpu_threads.elementwise(kernel, arrays, attrs, target)):
            kernel(*arrays, out=target, **attrs)  # (an input that is out is read where it is written)
        return True

    # -- compile (backend/protocol.py) ----------------------------------------
    def can_fuse(self, node) -> bool:
        # The rule WebGPU's generated kernels follow (attrs only through the output type), kept
        # so both devices fuse alike; unlike there, an integer division may join a chain.
        return not set(node.attrs) - {"dtype"}

    def can_fuse_inputs(self, inputs) -> bool:
        # WebGPU's layout rule, kept for the same reason (a numpy chain could read any number).
        dts = [v.dtype for v in inputs]
        return len(dts) <= 3 and (len(dts) != 2 or dts[0] is dts[1]) and (len(dts) != 3 or dts[1] is dts[2])

    def fused_record(self, nodes) -> tuple:
        return ()  # the numpy kernel of a fused node runs its steps' own kernels by name

    # The fused reductions and epilogues the passes make run here as their parts' numpy kernels
    # in turn (the numpy pass list makes none: with no generated kernel they save nothing).
    def reduction_entry(self, op) -> str | None:
        return op.name  # any axis reduction: the chains run before and after its numpy kernel

    def takes_epilogue(self, op) -> bool:
        return op.impls.get("numpy") is NP_MATMUL  # an epilogue node's numpy kernel is np.matmul, then the chain

    def group_capacity(self, arity: int) -> int:
        return 1

    def dispatches(self) -> int | None:
        return None

    def record(self, plan, flat_args):
        """Run ``plan`` once, noting what each step's result shares memory with, and give the
        flat list of calls later calls run (replay.py)."""
        recording = numpy_replay.Recording(plan)
        result = plan.run(flat_args, recording)
        return result, numpy_replay.NumpyList(plan, recording)

    def contiguous(self, data) -> np.ndarray:
        return counted(data.copy())

    # -- data in and out ------------------------------------------------------
    def from_numpy(self, array: np.ndarray, dtype):
        return stored_result(array, dtype)

    def to_numpy(self, data) -> np.ndarray:
        return data

    def full(self, shape, value, dtype):
        return stored_result(np.full(shape, value, dtype=dtype.np), dtype)

    def arange(self, start, step, count, dtype):
        return stored_result((start + step * np.arange(count)).astype(dtype.np, copy=False), dtype)

    def uniform(self, shape, low, high, dtype):
        rng = wg_random.numpy_generator()
        if dtype.np == np.float32 and (low, high) == (0.0, 1.0):  # rand, dropout: float32 draws, half the cost
            return stored_result(rng.random(shape, dtype=np.float32), dtype)
        return stored_result(rng.uniform(low, high, size=shape), dtype)

    def bernoulli(self, shape, p, scale, dtype):
        """``scale`` with probability ``p``, else 0 (dropout's mask): each a 32-bit word of the
        generator compared with p * 2**32, a third of the cost of ``rand`` then compare (no float per draw)."""
        count = math.prod(shape)
        threshold = round(p * 2**32)
        if threshold >= 2**32:
            kept = np.ones(shape, bool)
        else:
            words = wg_random.numpy_generator().bit_generator.random_raw(-(-count // 2)).view(np.uint32)
            kept = (words[:count] < np.uint32(threshold)).reshape(shape)
        return stored_result(np.multiply(kept, scale, dtype=dtype.np), dtype)

    def normal(self, shape, mean, std, dtype):
        return stored_result(wg_random.numpy_generator().standard_normal(size=shape) * std + mean, dtype)

    def randint(self, shape, low, high, dtype):
        return stored_result(wg_random.numpy_generator().integers(low, high, size=shape), dtype)

    def is_contiguous(self, data) -> bool:
        return data.flags.c_contiguous

    def shares_memory(self, a, b) -> bool:
        return np.may_share_memory(a, b)

    def synchronize(self) -> None:
        pass
