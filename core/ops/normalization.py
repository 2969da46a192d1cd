"""The fused layer-norm primitive: normalize each row over the trailing dims.

``layer_norm_core(x, ndims=k, eps=eps)`` views ``x`` as rows (the leading dims)
of n elements (the product of the last k dims) and returns, per row,

    y = (x - mean) * rstd,    rstd = 1 / sqrt(var + eps)    (biased var)

and ``layer_norm(x, weight, bias, ndims=k, eps=eps)`` the same followed by ``y * weight + bias``
in the same kernel (``F.layer_norm``'s usual case). The input gradient is

    gx = rstd * (g - mean(g) - y * mean(g * y))          (g * weight in place of g with the affine)

one kernel in a plain backward (``layer_norm_backward``, the statistics found again from x), and
Tensor ops under ``create_graph``, so gradients of gradients work. With the affine, backward reads
x (and weight) only and computes y again where the weight's gradient needs it: as torch's layer
norm keeps its input, not its normalized output, a transformer's step keeps one tensor per layer
norm instead of two.
"""
from __future__ import annotations

import numpy as np

from ..kernels import Kernel
from ._helpers import describe, require_float
from .registry import OpError, apply, defop
from ..autograd import is_grad_enabled


def _row_dims(ndim, ndims):
    return tuple(range(ndim - ndims, ndim))


def _normalized_rows(x, ndims, eps):
    """(y, rstd): x's rows of the last ``ndims`` dims normalized, in float64 (float32 sums over
    long rows lose digits), and each row's 1 / sqrt(var + eps). In place on one copy: a fresh
    array per step (each a new mapping, faulted in page by page) made this several times slower."""
    n = int(np.prod(x.shape[x.ndim - ndims:]))
    rows = x.astype(np.float64, order="C").reshape(-1, n)
    mean = rows.sum(axis=1, keepdims=True)
    mean /= n
    rows -= mean
    var = np.einsum("ij,ij->i", rows, rows)[:, None]
    var /= n
    var += eps
    rstd = 1.0 / np.sqrt(var)
    rows *= rstd
    return rows, rstd


def _layer_norm_numpy(x, *, ndims, eps, weight=None, bias=None):
    """The result rounded once to x's dtype, the affine part in float64 too."""
    if x.size == 0:
        return x.copy()
    rows, _ = _normalized_rows(x, ndims, eps)
    if weight is not None:
        rows *= weight.reshape(-1)
        rows += bias.reshape(-1)
    return rows.astype(x.dtype).reshape(x.shape)


def _layer_norm_infer(x, *, ndims, eps):
    return x.shape, x.dtype


def _layer_norm_vjp(g, x, *, out, ndims, eps):
    if not is_grad_enabled():  # a plain backward: one kernel
        return apply(LAYER_NORM_BACKWARD, g, x, ndims=ndims, eps=eps)
    # create_graph: in Tensor ops, rstd recomputed from x, so the second derivative sees its
    # dependence on x
    dims = _row_dims(x.ndim, ndims)
    rstd = (x.var(dims, keepdim=True, correction=0) + eps).rsqrt()
    return rstd * (g - g.mean(dims, keepdim=True) - out * (g * out).mean(dims, keepdim=True))


def _backward_numpy(g, x, *, ndims, eps):
    """gx of layer_norm_core for the incoming gradient g, the statistics again from x (float64)."""
    if x.size == 0:
        return np.zeros_like(x)
    y, rstd = _normalized_rows(x, ndims, eps)
    n = y.shape[1]
    rows = g.astype(np.float64, order="C").reshape(y.shape)
    mean_g = rows.sum(axis=1, keepdims=True)
    mean_g /= n
    mean_gy = np.einsum("ij,ij->i", rows, y)[:, None]
    mean_gy /= n
    rows -= mean_g
    y *= mean_gy
    rows -= y
    rows *= rstd
    return rows.astype(x.dtype).reshape(x.shape)


def _backward_infer(g, x, *, ndims, eps):
    return x.shape, x.dtype


# The vjp of a plain backward: each row read four times (two statistics, the two sums, the write)
# instead of about twenty composed ops, each writing a temporary of the input's size.
LAYER_NORM_BACKWARD = defop("layer_norm_backward", kind="reduce", infer=_backward_infer, numpy=_backward_numpy,
                            wgsl=Kernel("layer_norm.wgsl", "layer_norm_backward", "layer_norm.layer_norm_backward"))


# Fused: one kernel reads each row three times (sum, squared deviations, write)
# instead of the six or so composed ops that each write a full-size temporary.
LAYER_NORM_CORE = defop("layer_norm_core", kind="reduce", infer=_layer_norm_infer, numpy=_layer_norm_numpy,
                        wgsl=Kernel("layer_norm.wgsl", "layer_norm", "layer_norm.layer_norm"),
                        vjp=_layer_norm_vjp)


def _affine_infer(x, weight, bias, *, ndims, eps):
    return x.shape, x.dtype


def _affine_numpy(x, weight, bias, *, ndims, eps):
    return _layer_norm_numpy(x, ndims=ndims, eps=eps, weight=weight, bias=bias)


def _affine_vjp(g, x, weight, bias, *, out, ndims, eps, needs):
    lead = tuple(range(x.ndim - ndims))
    # y again, rather than kept from forward: for the weight, and for gx's Tensor ops under create_graph
    y = layer_norm_core(x, ndims=ndims, eps=eps) if needs[1] or is_grad_enabled() else None
    gx = _layer_norm_vjp(g * weight, x, out=y, ndims=ndims, eps=eps) if needs[0] else None
    gw = _sum_rows(g * y, lead) if needs[1] else None
    gb = _sum_rows(g, lead) if needs[2] else None
    return gx, gw, gb


def _sum_rows(t, lead):
    return t.sum(lead) if lead else t  # a single row (ndims == x.ndim): nothing to add up


LAYER_NORM = defop("layer_norm", kind="reduce", infer=_affine_infer, numpy=_affine_numpy,
                   wgsl=Kernel("layer_norm.wgsl", "layer_norm", "layer_norm.layer_norm"), vjp=_affine_vjp)


def layer_norm_core(x, *, ndims, eps=1e-5):
    """(x - mean) / sqrt(var + eps) over the last ``ndims`` dims (biased var), one fused kernel.

    Args:
        x: a floating-point tensor with at least ``ndims`` dims.
        ndims: how many trailing dims form one row (at least 1).
        eps: added to the variance before the square root.

    Example:
        >>> webgrad.ops.layer_norm_core(webgrad.tensor([[1.0, 3.0]]), ndims=1)   # about [[-1., 1.]]
    """
    require_float("layer_norm", x)
    if not 1 <= ndims <= x.ndim:
        raise OpError(f"layer_norm: cannot normalize over the last {ndims} dims of {describe(x)}; "
                      f"ndims must be between 1 and {x.ndim}")
    return apply(LAYER_NORM_CORE, x, ndims=int(ndims), eps=float(eps))


def layer_norm(x, weight, bias, *, ndims, eps=1e-5):
    """``layer_norm_core(x) * weight + bias`` in one kernel; weight and bias have the shape of
    the last ``ndims`` dims and x's dtype.

    Example:
        >>> w, b = webgrad.tensor([2.0, 2.0]), webgrad.tensor([0.0, 1.0])
        >>> webgrad.ops.layer_norm(webgrad.tensor([[1.0, 3.0]]), w, b, ndims=1)   # about [[-2., 3.]]
    """
    require_float("layer_norm", x)
    if not 1 <= ndims <= x.ndim:
        raise OpError(f"layer_norm: cannot normalize over the last {ndims} dims of {describe(x)}; "
                      f"ndims must be between 1 and {x.ndim}")
    rows = tuple(x.shape[x.ndim - ndims:])
    for name, t in (("weight", weight), ("bias", bias)):
        if tuple(t.shape) != rows or t.dtype is not x.dtype or t.device != x.device:
            raise OpError(f"layer_norm: {name} must have the normalized shape {rows}, dtype and device of "
                          f"input {describe(x)}, got {describe(t)}")
    return apply(LAYER_NORM, x, weight, bias, ndims=int(ndims), eps=float(eps))
