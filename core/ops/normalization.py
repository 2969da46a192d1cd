"""The fused layer-norm primitive: normalize each row over the trailing dims.

``layer_norm_core(x, ndims=k, eps=eps)`` views ``x`` as rows (the leading dims)
of n elements (the product of the last k dims) and returns, per row,

    y = (x - mean) * rstd,    rstd = 1 / sqrt(var + eps)    (biased var)

with no weight or bias: ``F.layer_norm`` applies those with ordinary ops.
The vjp is written in Tensor ops from x and y, so gradients of gradients work:

    gx = rstd * (g - mean(g) - y * mean(g * y))
"""
from __future__ import annotations

import numpy as np

from ..kernels import Kernel
from ._helpers import describe, require_float
from .registry import OpError, apply, defop


def _row_dims(ndim, ndims):
    return tuple(range(ndim - ndims, ndim))


def _layer_norm_numpy(x, *, ndims, eps):
    if x.size == 0:
        return x.copy()
    axes = _row_dims(x.ndim, ndims)
    # Statistics in float64 (float32 sums over long rows lose digits), result in x's dtype.
    wide = x.astype(np.float64)
    mean = wide.mean(axis=axes, keepdims=True)
    centered = wide - mean
    var = (centered * centered).mean(axis=axes, keepdims=True)
    return (centered / np.sqrt(var + eps)).astype(x.dtype)


def _layer_norm_infer(x, *, ndims, eps):
    return x.shape, x.dtype


def _layer_norm_vjp(g, x, *, out, ndims, eps):
    dims = _row_dims(x.ndim, ndims)
    # rstd recomputed from x in Tensor ops, so the second derivative sees its dependence on x.
    rstd = (x.var(dims, keepdim=True, correction=0) + eps).rsqrt()
    return rstd * (g - g.mean(dims, keepdim=True) - out * (g * out).mean(dims, keepdim=True))


# Fused: one kernel reads each row three times (sum, squared deviations, write)
# instead of the six or so composed ops that each write a full-size temporary.
LAYER_NORM_CORE = defop("layer_norm_core", kind="reduce", infer=_layer_norm_infer, numpy=_layer_norm_numpy,
                        wgsl=Kernel("layer_norm.wgsl", "layer_norm", "layer_norm.layer_norm"),
                        vjp=_layer_norm_vjp)


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
