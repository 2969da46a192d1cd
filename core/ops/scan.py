"""Prefix scans: cumsum and cumprod. Primitives over the last dim (one WGSL
kernel, scan.wgsl, for both); the public functions move ``dim`` there and back.

Gradients are written in Tensor ops, so they run on every backend and can be
differentiated again:
- cumsum:  dx = reverse cumsum of g.
- cumprod: dx_i = sum_{j >= i} g_j * prod_{k <= j, k != i} x_k. Dividing out by
  x_i fails at zeros, so, as PyTorch does, the positions before a row's first zero
  use (reverse cumsum of g * out) / x_i (out_j is 0 from the first zero on, so
  those terms drop out), the first zero itself uses the cumprod with that zero
  replaced by 1, and every position after it gets 0 (each of its products holds
  the first zero).
"""
from __future__ import annotations

import numpy as np

from .. import dtypes
from ..kernels import Kernel
from ._helpers import normalize_dim
from .elementwise import cast, where
from .movement import flip, movedim
from .registry import apply, defop
from .autocasting import autocast_op


def _reverse_cumsum(g):
    return flip(apply(CUMSUM, flip(g, -1)), -1)


def _cumprod_vjp(g, x, *, out):
    is_zero = x == 0
    zeros_so_far = apply(CUMSUM, cast(is_zero, x.dtype))
    before = zeros_so_far == 0
    first_zero = is_zero & (zeros_so_far == 1)
    grad_before = _reverse_cumsum(g * out) / where(before, x, 1.0)
    grad_first = _reverse_cumsum(g * apply(CUMPROD, where(first_zero, 1.0, x)))
    return where(before, grad_before, where(first_zero, grad_first, 0.0))


def _scan_infer(x):
    return x.shape, x.dtype


def _along_last(np_fn):
    return lambda x: np_fn(x, axis=-1) if x.ndim else x.copy()


CUMSUM = defop("cumsum", kind="reduce", infer=_scan_infer, numpy=_along_last(np.cumsum),
               wgsl=Kernel("scan.wgsl", "cumsum", "scan.scan"), vjp=lambda g, x, *, out: _reverse_cumsum(g),
               reads_inputs=False)
CUMPROD = defop("cumprod", kind="reduce", infer=_scan_infer, numpy=_along_last(np.cumprod),
                wgsl=Kernel("scan.wgsl", "cumprod", "scan.scan"), vjp=_cumprod_vjp)


def _scan(op, x, dim, dtype):
    d = normalize_dim(op.name, dim, x.ndim)
    if dtype is not None:
        x = cast(x, dtypes.to_dtype(dtype))
    elif not (x.dtype.is_floating_point or x.dtype.is_complex):
        x = cast(x, dtypes.int64)  # bools and ints accumulate in int64, as in PyTorch
    if x.ndim == 0:
        return apply(op, x)
    return movedim(apply(op, movedim(x, d, -1)), -1, d)


@autocast_op("cumsum")
def cumsum(x, dim, *, dtype=None):
    """Running sums along ``dim``: ``out[..., j, ...] = x[..., 0, ...] + ... + x[..., j, ...]``.

    Example:
        >>> webgrad.tensor([1, 2, 3]).cumsum(0)
        tensor([1, 3, 6])
    """
    return _scan(CUMSUM, x, dim, dtype)


@autocast_op("cumprod")
def cumprod(x, dim, *, dtype=None):
    """Running products along ``dim`` (gradient exact at zeros too).

    Example:
        >>> webgrad.tensor([1.0, 2.0, 3.0]).cumprod(0)
        tensor([1., 2., 6.])
    """
    return _scan(CUMPROD, x, dim, dtype)
