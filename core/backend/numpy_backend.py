"""The numpy backend (device ``"cpu"``): the reference every other backend is
tested against. It runs natively and, unchanged, inside Pyodide.

A tensor's data here is a plain ``np.ndarray`` (views share memory, as in
PyTorch). Each op's numpy kernel is declared beside the op in ``webgrad.ops``.
"""
from __future__ import annotations

import numpy as np

from .. import random as wg_random
from . import wasm as wasm_gemm
from .blas import blas_threads, matmul_size
from .wasm import use_wasm_gemm  # noqa: F401  (webgrad.backend.numpy_backend.use_wasm_gemm)


def _stored(array: np.ndarray, dtype) -> np.ndarray:
    """``array`` as ``dtype`` stores it (bfloat16: float32 rounded to bfloat16)."""
    if array.dtype != dtype.np:
        array = array.astype(dtype.np)
    return array if dtype.rounding is None else dtype.rounding(array)


def takes_out(kernel):
    """Mark a numpy kernel that, as a ufunc does, takes ``out=`` (an array of its result's shape
    and dtype) and returns it with the result written in: compile's numpy replay then hands it
    an array planned once (graph/numpy_replay.py)."""
    kernel.takes_out = True
    return kernel


def writes_out(kernel, attrs) -> bool:
    """Whether ``kernel(*arrays, out=array, **attrs)`` writes its result into ``array``."""
    return (isinstance(kernel, np.ufunc) and not attrs) or getattr(kernel, "takes_out", False)


def stored_result(result, dtype) -> np.ndarray:
    """A kernel's result as an array of ``dtype`` (bfloat16: computed in float32, rounded back)."""
    if type(result) is not np.ndarray:
        result = np.asarray(result)
    if result.dtype != dtype.np:
        result = result.astype(dtype.np)
    return result if dtype.rounding is None else dtype.rounding(result)


class NumpyBackend:
    name = "numpy"
    device = "cpu"

    def run(self, op, inputs, attrs, shape, dtype):
        arrays = [t._data for t in inputs]
        return stored_result(self.kernel(op, arrays)(*arrays, **attrs), dtype)

    def kernel(self, op, arrays):
        """The function that runs ``op`` on ``arrays``: its numpy kernel, but for matmul the
        wasm GEMM in Pyodide or numpy's BLAS with the thread count set for the product's size."""
        kernel = op.impls.get("numpy")
        if kernel is None:
            raise NotImplementedError(f"{op.name}: no numpy kernel")
        if op.name == "matmul":
            x, y = arrays
            size = matmul_size(x, y)
            if wasm_gemm.wants(x, y, size):  # Pyodide: float32 products in wasm (see wasm/)
                return wasm_gemm.matmul
            blas_threads.choose(size)  # one BLAS thread for small products (see blas.py)
            if wasm_gemm.IN_PYODIDE:  # numpy's own loop there: y goes k-major first (see wasm/)
                return wasm_gemm.numpy_matmul
        return kernel

    def run_inplace(self, op, tensors, attrs):
        op.impls["numpy"](*[t._data for t in tensors], **attrs)

    # -- data in and out ------------------------------------------------------
    def from_numpy(self, array: np.ndarray, dtype):
        return _stored(array, dtype)

    def to_numpy(self, data) -> np.ndarray:
        return data

    def full(self, shape, value, dtype):
        return _stored(np.full(shape, value, dtype=dtype.np), dtype)

    def arange(self, start, step, count, dtype):
        return _stored((start + step * np.arange(count)).astype(dtype.np, copy=False), dtype)

    def uniform(self, shape, low, high, dtype):
        return _stored(wg_random.numpy_generator().uniform(low, high, size=shape), dtype)

    def normal(self, shape, mean, std, dtype):
        return _stored(wg_random.numpy_generator().standard_normal(size=shape) * std + mean, dtype)

    def randint(self, shape, low, high, dtype):
        return wg_random.numpy_generator().integers(low, high, size=shape).astype(dtype.np)

    def is_contiguous(self, data) -> bool:
        return data.flags.c_contiguous

    def shares_memory(self, a, b) -> bool:
        return np.may_share_memory(a, b)

    def synchronize(self) -> None:
        pass
