"""2-D max pooling as two primitives, one kernel each (no kh*kw window copies).

``max_pool2d_select(x, source)`` picks, for each window of x (N, C, H, W), the value
of ``source`` (x's shape) at the window's first maximum:

    window (y, x) reads rows y*sh - top + i*dh and columns x*sw - left + j*dw,
    i < kh, j < kw in row-major order; positions outside the input are skipped
    (padding never wins); a NaN wins (the first NaN), as in PyTorch.

``F.max_pool2d(x)`` is ``max_pool2d_select(x, x)``: the maximum itself. Its vjp
puts each gradient at its window's first maximum:

    max_pool2d_backward(g, x) = d<select(x, s), g>/ds

Both are linear in their first-listed value input (``source``, ``g``) and do not
depend on x's values except through where the maxima are, so each one's vjp is
the other: gradients of any order stay on these kernels.
"""
from __future__ import annotations

import numpy as np

from ..kernels import Kernel
from ._helpers import describe
from .registry import OpError, apply, defop


# -- numpy kernels -----------------------------------------------------------------
def _window_maxima(x, *, kernel, stride, padding, dilation, out_hw):
    """(rows, cols) in x of each window's first maximum, each (N, C, Ho, Wo)."""
    (kh, kw), (sh, sw), (top, left), (dh, dw), (ho, wo) = kernel, stride, padding, dilation, out_hw
    h, w = x.shape[2:]
    bottom = max(0, (ho - 1) * sh + (kh - 1) * dh + 1 - (h + top))
    right = max(0, (wo - 1) * sw + (kw - 1) * dw + 1 - (w + left))
    pads = ((0, 0), (0, 0), (top, bottom), (left, right))
    padded = np.pad(x, pads, constant_values=-np.inf)
    inside = np.pad(np.ones(x.shape[2:], bool), pads[2:])
    s, t = padded.strides, inside.strides
    windows = np.lib.stride_tricks.as_strided(
        padded, (*x.shape[:2], ho, wo, kh, kw), (s[0], s[1], s[2] * sh, s[3] * sw, s[2] * dh, s[3] * dw),
        writeable=False).reshape(*x.shape[:2], ho, wo, kh * kw)
    valid = np.lib.stride_tricks.as_strided(
        inside, (ho, wo, kh, kw), (t[0] * sh, t[1] * sw, t[0] * dh, t[1] * dw), writeable=False).reshape(ho, wo, -1)
    k = windows.argmax(-1)  # numpy's argmax: the first maximum, or the first NaN
    # A window whose maximum is -inf may have found padding first: take its first real position.
    padding_won = ~np.take_along_axis(np.broadcast_to(valid, windows.shape), k[..., None], -1)[..., 0]
    k = np.where(padding_won, valid.argmax(-1), k)
    i, j = np.divmod(k, kw)
    rows = np.arange(ho)[:, None] * sh - top + i * dh
    cols = np.arange(wo)[None, :] * sw - left + j * dw
    return rows, cols


def _select_numpy(x, source, **geometry):
    rows, cols = _window_maxima(x, **geometry)
    n, c = np.indices(x.shape[:2], sparse=True)
    return source[n[..., None, None], c[..., None, None], rows, cols]


def _backward_numpy(g, x, **geometry):
    rows, cols = _window_maxima(x, **geometry)
    n, c = np.indices(x.shape[:2], sparse=True)
    gx = np.zeros(x.shape, np.result_type(g, x))
    np.add.at(gx, (n[..., None, None], c[..., None, None], rows, cols), g)
    return gx


# -- shape rules and vjps ----------------------------------------------------------
def _check(op_name, x, other, expected):
    if x.ndim != 4 or not x.dtype.is_floating_point:
        raise OpError(f"{op_name}: expected a floating (N, C, H, W) input, got {describe(x)}")
    if tuple(other.shape) != tuple(expected) or other.dtype is not x.dtype:
        raise OpError(f"{op_name}: {describe(other)} does not match {expected} of {x.dtype.name}")


def _select_infer(x, source, *, out_hw, **_):
    _check("max_pool2d_select", x, source, x.shape)
    return (*x.shape[:2], *out_hw), x.dtype


def _backward_infer(g, x, *, out_hw, **_):
    _check("max_pool2d_backward", x, g, (*x.shape[:2], *out_hw))
    return tuple(x.shape), x.dtype


def _select_vjp(g, x, source, *, out, needs, **geometry):
    # Where the maxima are does not change under a small change of x: no gradient through x.
    return None, (max_pool2d_backward(g, x, **geometry) if needs[1] else None)


def _backward_vjp(u, g, x, *, out, needs, **geometry):
    return (max_pool2d_select(x, u, **geometry) if needs[0] else None), None


MAX_POOL2D_SELECT = defop("max_pool2d_select", kind="reduce", infer=_select_infer, vjp=_select_vjp, numpy=_select_numpy,
                          wgsl=Kernel("pool.wgsl", "max_pool2d_select", "pooling.max_pool2d"))
MAX_POOL2D_BACKWARD = defop("max_pool2d_backward", infer=_backward_infer, vjp=_backward_vjp, numpy=_backward_numpy,
                            kind="index", wgsl=Kernel("pool.wgsl", "max_pool2d_backward", "pooling.max_pool2d"))


def max_pool2d_select(x, source, *, kernel, stride, padding, dilation, out_hw):
    """Values of ``source`` at the first maximum of each window of ``x`` (see the module doc);
    ``padding`` is (top, left): rows and columns of -inf before the input."""
    return apply(MAX_POOL2D_SELECT, x, source, kernel=kernel, stride=stride, padding=padding, dilation=dilation,
                 out_hw=out_hw)


def max_pool2d_backward(g, x, *, kernel, stride, padding, dilation, out_hw):
    return apply(MAX_POOL2D_BACKWARD, g, x, kernel=kernel, stride=stride, padding=padding, dilation=dilation,
                 out_hw=out_hw)
