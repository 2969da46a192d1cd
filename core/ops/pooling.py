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
# Both walk the kh*kw window offsets, each a strided (N, C, Ho, Wo) view of the padded
# input: a few whole-array passes per offset, no window copies and no scattered adds
# (np.add.at over the windows was 8% of a CNN step).
def _padded(x, fill, *, kernel, stride, padding, dilation, out_hw):
    """x with ``fill`` rows and columns around it, enough for every window; and (top, left)."""
    (kh, kw), (sh, sw), (top, left), (dh, dw), (ho, wo) = kernel, stride, padding, dilation, out_hw
    h, w = x.shape[2:]
    bottom = max(0, (ho - 1) * sh + (kh - 1) * dh + 1 - (h + top))
    right = max(0, (wo - 1) * sw + (kw - 1) * dw + 1 - (w + left))
    if top or left or bottom or right:
        x = np.pad(x, ((0, 0), (0, 0), (top, bottom), (left, right)), constant_values=fill)
    return x


def _offset_views(padded, *, kernel, stride, dilation, out_hw, **_):
    """Per window offset (i, j), row-major: (i, j) and the (N, C, Ho, Wo) view it reads."""
    (kh, kw), (sh, sw), (dh, dw), (ho, wo) = kernel, stride, dilation, out_hw
    for i in range(kh):
        for j in range(kw):
            yield (i, j), padded[:, :, i * dh:i * dh + sh * (ho - 1) + 1:sh, j * dw:j * dw + sw * (wo - 1) + 1:sw]


def _first_maxima(x, geometry):
    """Each window's first maximum (or first NaN) and its offset number k = i * kw + j, each
    (N, C, Ho, Wo); padding never wins, also against a window of -inf."""
    (sh, sw), (top, left), (dh, dw), (ho, wo) = (geometry[k] for k in ("stride", "padding", "dilation", "out_hw"))
    h, w = x.shape[2:]
    padded = _padded(x, -np.inf, **geometry)
    best = k = best_inside = None
    for number, ((i, j), view) in enumerate(_offset_views(padded, **geometry)):
        rows = np.arange(ho)[:, None] * sh + i * dh - top
        cols = np.arange(wo)[None, :] * sw + j * dw - left
        inside = (rows >= 0) & (rows < h) & (cols >= 0) & (cols < w)  # (Ho, Wo): not padding
        if best is None:
            best, k, best_inside = view.copy(), np.zeros(view.shape, np.int32), inside
            continue
        better = (view > best) | (np.isnan(view) & ~np.isnan(best))
        if not best_inside.all():  # a window whose best is still padding takes any real value
            better |= ~best_inside
        if not inside.all():
            better &= inside
        np.copyto(best, view, where=better)
        k[better] = number
        best_inside = best_inside | inside
    return best, k


def _select_numpy(x, source, **geometry):
    best, k = _first_maxima(x, geometry)
    if source is x:  # F.max_pool2d: the maxima themselves
        return best
    out = np.zeros(k.shape, source.dtype)
    for number, (_, view) in enumerate(_offset_views(_padded(source, 0, **geometry), **geometry)):
        np.copyto(out, view, where=k == number)
    return out


def _backward_numpy(g, x, **geometry):
    _, k = _first_maxima(x, geometry)
    (top, left), (h, w) = geometry["padding"], x.shape[2:]
    dtype = np.result_type(g, x)
    gx = _padded(np.zeros(x.shape, dtype), 0, **geometry)
    for number, (_, view) in enumerate(_offset_views(gx, **geometry)):
        view += np.where(k == number, g, dtype.type(0))  # overlapping windows add up, one offset at a time
    return gx[:, :, top:top + h, left:left + w]


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
