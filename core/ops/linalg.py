"""Matrix multiplication: one batched, broadcasting primitive. 1-D operands are
handled as PyTorch does (a vector is a row on the left, a column on the right,
and that dim is removed from the result)."""
from __future__ import annotations

import math

import numpy as np

from ..backend.numpy.backend import product_kernel
from ..kernels import Kernel
from ._helpers import broadcast_shapes, describe
from . import registry
from .registry import OpError, apply, defop
from ..creation import arange
from ..tensor import Tensor
from .elementwise import where
from .autocasting import autocast_op


def _matmul_infer(x, y):
    if x.ndim < 2 or y.ndim < 2:
        raise OpError(f"matmul: internal error, operands must be at least 2-D ({describe(x, y)})")
    if x.shape[-1] != y.shape[-2]:
        raise OpError(f"matmul: {tuple(x.shape)} @ {tuple(y.shape)}: inner dimensions differ "
                      f"({x.shape[-1]} != {y.shape[-2]})")
    if x.dtype is not y.dtype:
        raise OpError(f"matmul: expected both operands to have the same dtype, got {describe(x, y)}")
    try:
        batch = broadcast_shapes("matmul", x.shape[:-2], y.shape[:-2])
    except OpError:
        raise OpError(f"matmul: {tuple(x.shape)} @ {tuple(y.shape)}: batch dimensions "
                      f"{tuple(x.shape[:-2])} and {tuple(y.shape[:-2])} cannot be broadcast together") from None
    return batch + (x.shape[-2], y.shape[-1]), x.dtype


def _transposed(t):
    """``t.mT``; for t a ``.mT`` view (a Linear's ``weight.mT``) the tensor it views, one op fewer."""
    return t._view_of[0] if t._is_mT_view else t.mT


def _matmul_vjp(g, x, y, *, out, needs):
    gx = g @ _transposed(y) if needs[0] else None
    gy = None
    if needs[1] and y.ndim == 2 and x.ndim > 2:
        # y (a Linear's weight) met every row of x's batch: one product over all rows, as torch
        # folds, not a product per batch entry summed afterwards (a batch-times-y-sized temporary)
        rows = math.prod(x.shape[:-1])
        x, g = x.reshape(rows, x.shape[-1]), g.reshape(rows, g.shape[-1])
    if needs[1]:
        # y = w.mT (F.linear's weight): (g.T @ x).T, whose transpose (the permute's vjp) is a fresh
        # array in w's layout, kept as w.grad without a copy; as torch's mm backward does
        gy = (g.mT @ x).mT if y._is_mT_view else x.mT @ g
    return gx, gy


def product_flops(shapes, out, **_) -> int:
    """2 x multiply-adds of x @ y: each output element sums over x's last dim."""
    return 2 * math.prod(out) * shapes[0][-1]


MATMUL = defop("matmul", infer=_matmul_infer, vjp=_matmul_vjp, numpy=np.matmul, flops=product_flops,
               reads_for_others=True,
               wgsl=Kernel("matmul.wgsl", "matmul", "matmul.matmul"))


@autocast_op("matmul")
def matmul(x, y):
    """Matrix product with batching and broadcasting, like ``torch.matmul``.

    Example:
        >>> webgrad.ones(2, 3) @ webgrad.ones(3)   # -> shape (2,)
    """
    if not isinstance(x, Tensor) or not isinstance(y, Tensor):
        raise TypeError("matmul: both operands must be Tensors")
    if x.ndim == 0 or y.ndim == 0:
        raise OpError(f"matmul: both arguments need at least 1 dimension, got {describe(x, y)}")
    if x.dtype is not y.dtype:  # PyTorch refuses too: a silent float64 product is rarely what was meant
        raise OpError(f"matmul: expected both operands to have the same dtype, got {describe(x, y)}; "
                      f"convert one, e.g. x.to({y.dtype.name}) or y.to({x.dtype.name})")
    if x.dtype.name == "bool":
        raise OpError(f"matmul: not supported for bool tensors ({describe(x, y)})")
    x2 = x.unsqueeze(0) if x.ndim == 1 else x
    y2 = y.unsqueeze(-1) if y.ndim == 1 else y
    if x2.shape[-1] != y2.shape[-2]:
        raise OpError(f"matmul: {tuple(x.shape)} @ {tuple(y.shape)}: inner dimensions differ "
                      f"({x2.shape[-1]} != {y2.shape[-2]})")
    out = apply(MATMUL, x2, y2)
    if y.ndim == 1:
        out = out.squeeze(-1)
    if x.ndim == 1:
        out = out.squeeze(-2 if y.ndim > 1 else -1)
    return out


def _linear_infer(x, w, b=None):
    return x.shape[:-1] + (w.shape[0],), x.dtype


def _linear_vjp(g, x, w, b=None, *, out, needs):
    gx = g @ w if needs[0] else None
    gw = None
    if needs[1]:  # one product over every row of x's batch, as torch folds
        rows = math.prod(x.shape[:-1])
        g2, x2 = (g, x) if x.ndim == 2 else (g.reshape(rows, g.shape[-1]), x.reshape(rows, x.shape[-1]))
        gw = g2.mT @ x2
    return gx, gw, g if len(needs) > 2 and needs[2] else None  # autograd sums g to the bias's shape


def _linear_numpy(x, w, b=None):
    """x @ w.T + b, the product as the numpy backend runs matmul's (threads, or wasm GEMM in Pyodide)."""
    wt = w.T
    out = product_kernel(x, wt)(x, wt)
    if b is not None:
        np.add(out, b, out=out)
    return out


LINEAR = defop("linear", infer=_linear_infer, vjp=_linear_vjp, numpy=_linear_numpy, kind="matmul",
               flops=product_flops, reads_for_others=True, wgsl=Kernel("matmul.wgsl", "matmul", "matmul.linear"))


def linear(x, w, b=None):
    """``F.linear`` as one op (x @ w.T + b in one kernel, one autograd node) where it can be:
    a 2-D weight, one floating dtype and device, a bias of shape (out_features,) or none, and
    no graph being traced (``Observer.traces_graph``); else None, and F.linear composes the ops."""
    if registry.tracing_graph():
        return None
    if w.ndim != 2 or x.ndim < 2 or not x.dtype.is_floating_point or w.dtype is not x.dtype \
            or w.device != x.device or x.shape[-1] != w.shape[1]:
        return None
    if b is None:
        return apply(LINEAR, x, w)
    if b.ndim != 1 or b.shape[0] != w.shape[0] or b.dtype is not x.dtype or b.device != x.device:
        return None
    return apply(LINEAR, x, w, b)


@autocast_op("mm")
def mm(x, y):
    if x.ndim != 2 or y.ndim != 2:
        raise OpError(f"mm: expected 2-D tensors, got {describe(x, y)}")
    return matmul(x, y)


@autocast_op("bmm")
def bmm(x, y):
    if x.ndim != 3 or y.ndim != 3:
        raise OpError(f"bmm: expected 3-D tensors, got {describe(x, y)}")
    if x.shape[0] != y.shape[0]:
        raise OpError(f"bmm: batch sizes differ ({describe(x, y)})")
    return matmul(x, y)


# -- composed: triangles and outer products -----------------------------------------
def _triangle(op_name, x, diagonal, keep_below):
    """x where (column - row) <= diagonal (tril) or >= diagonal (triu), else 0,
    over the last two dims: a mask from two small aranges and one where, on any device."""
    if x.ndim < 2:
        raise OpError(f"{op_name}: expected a tensor with at least 2 dims, got shape {tuple(x.shape)}")
    if not isinstance(diagonal, int) or isinstance(diagonal, bool):
        raise TypeError(f"{op_name}: diagonal must be an int, got {diagonal!r}")
    rows, cols = x.shape[-2], x.shape[-1]
    offset = arange(cols, device=x.device).unsqueeze(0) - arange(rows, device=x.device).unsqueeze(1)
    keep = offset <= diagonal if keep_below else offset >= diagonal
    return where(keep, x, False if x.dtype.name == "bool" else 0)


def tril(x, diagonal=0):
    """The lower triangle of the last two dims (elements with column - row <= diagonal); the rest 0.

    Example:
        >>> webgrad.ones(3, 3).tril()   # causal attention masks
    """
    return _triangle("tril", x, diagonal, True)


def triu(x, diagonal=0):
    """The upper triangle of the last two dims (elements with column - row >= diagonal); the rest 0."""
    return _triangle("triu", x, diagonal, False)


def outer(x, y):
    """Outer product of two 1-D tensors: ``out[i, j] = x[i] * y[j]``."""
    if x.ndim != 1 or y.ndim != 1:
        raise OpError(f"outer: expected two 1-D tensors, got {describe(x, y)}")
    return x.unsqueeze(1) * y.unsqueeze(0)


ger = outer
