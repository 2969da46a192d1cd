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


class NumpyBackend:
    name = "numpy"
    device = "cpu"

    def run(self, op, inputs, attrs, shape, dtype):
        kernel = op.impls.get("numpy")
        if kernel is None:
            raise NotImplementedError(f"{op.name}: no numpy kernel")
        if op.name == "matmul":
            x, y = inputs[0]._data, inputs[1]._data
            size = matmul_size(x, y)
            if wasm_gemm.wants(x, y, size):  # Pyodide: float32 products in wasm (see wasm/)
                kernel = wasm_gemm.matmul
            else:  # one BLAS thread for small products (see blas.py)
                blas_threads.choose(size)
                if wasm_gemm.IN_PYODIDE:  # numpy's own loop there: y goes k-major first (see wasm/)
                    kernel = wasm_gemm.numpy_matmul
        result = kernel(*[t._data for t in inputs], **attrs)
        if type(result) is not np.ndarray:
            result = np.asarray(result)
        if result.dtype != dtype.np:
            result = result.astype(dtype.np)
        if dtype.rounding is not None:  # bfloat16: computed in float32, rounded back
            result = dtype.rounding(result)
        return result

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
