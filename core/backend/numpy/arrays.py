"""How numpy kernels hand over their results: a kernel that takes ``out=``, and a result
stored as its dtype. A leaf (numpy only): the numpy backend, its list of calls
(replay.py) and the graph passes that build numpy kernels for fused nodes use it."""
from __future__ import annotations

from typing import Callable

import numpy as np

# A plain product: the kernel MATMUL declares, which the backend routes to BLAS with a thread
# count (or the wasm GEMM). Taken once, so a test that wraps np.matmul still sees it.
NP_MATMUL = np.matmul

# webgrad.cpu's memory counter, once a user asks for the figures: called with every array
# webgrad makes for a cpu tensor (``counted``); None until then, so uncounted runs pay one check.
COUNT: Callable[[np.ndarray], None] | None = None


def counted(array: np.ndarray) -> np.ndarray:
    if COUNT is not None and isinstance(array, np.ndarray):  # (a 0-d bfloat16 result may be a numpy scalar)
        COUNT(array)
    return array


def takes_out(kernel):
    """Mark a numpy kernel that, as a ufunc does, takes ``out=`` (an array of its result's shape
    and dtype) and returns it with the result written in: compile's numpy replay then hands it
    an array planned once (replay.py)."""
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
    if dtype.rounding is not None:
        result = dtype.rounding(result)
    if COUNT is not None:  # (inline: every cpu op passes here)
        counted(result)
    return result
