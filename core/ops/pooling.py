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

import math
import weakref

import numpy as np

from ..backend.numpy.blas import cpu_threads
from ..kernels import Kernel
from ._helpers import describe
from .conv import padded_images
from .registry import OpError, apply, defop


# -- numpy kernels -----------------------------------------------------------------
# One strided copy lays the windows out as kh*kw contiguous (N, C, Ho, Wo) planes, one per
# window offset; then a few whole-plane passes per offset. Strided reads inside the passes
# (or np.add.at over the windows, 8% of a CNN step) cost 5-20x more.
def _padded(x, fill, *, kernel, stride, padding, dilation, out_hw):
    """x with ``fill`` rows and columns around it, enough for every window."""
    (kh, kw), (sh, sw), (top, left), (dh, dw), (ho, wo) = kernel, stride, padding, dilation, out_hw
    h, w = x.shape[2:]
    bottom = max(0, (ho - 1) * sh + (kh - 1) * dh + 1 - (h + top))
    right = max(0, (wo - 1) * sw + (kw - 1) * dw + 1 - (w + left))
    if top or left or bottom or right:
        x = padded_images(x, (top, bottom, left, right), fill)
    return x


def _offset_views(padded, *, kernel, stride, dilation, out_hw, **_):
    """(kh, kw, N, C, Ho, Wo): what each window offset (i, j) reads, a strided view."""
    (kh, kw), (sh, sw), (dh, dw), (ho, wo) = kernel, stride, dilation, out_hw
    s = padded.strides
    return np.lib.stride_tricks.as_strided(padded, (kh, kw, *padded.shape[:2], ho, wo),
                                           (s[2] * dh, s[3] * dw, s[0], s[1], s[2] * sh, s[3] * sw),
                                           writeable=padded.flags.writeable)


def _planes(x, fill, geometry):
    """(kh*kw, N, C, Ho, Wo), contiguous: the value each window reads at offset i * kw + j."""
    views = _offset_views(_padded(x, fill, **geometry), **geometry)
    return np.ascontiguousarray(views).reshape(-1, *views.shape[2:])


def _inside(x_hw, *, kernel, stride, padding, dilation, out_hw, **_):
    """(kh*kw, Ho, Wo) bool: the offset reads the input (not padding); None when nothing is padding."""
    (kh, kw), (sh, sw), (top, left), (dh, dw), (ho, wo) = kernel, stride, padding, dilation, out_hw
    if not top and not left and (ho - 1) * sh + (kh - 1) * dh < x_hw[0] and (wo - 1) * sw + (kw - 1) * dw < x_hw[1]:
        return None  # every window lies inside (no padding, no ceil_mode overhang)
    rows = np.arange(ho)[None, :] * sh + np.arange(kh)[:, None] * dh - top  # (kh, Ho)
    cols = np.arange(wo)[None, :] * sw + np.arange(kw)[:, None] * dw - left  # (kw, Wo)
    row_in, col_in = (rows >= 0) & (rows < x_hw[0]), (cols >= 0) & (cols < x_hw[1])
    inside = (row_in[:, None, :, None] & col_in[None, :, None, :]).reshape(kh * kw, ho, wo)
    return None if inside.all() else inside


def _by_rows(x, rows) -> list:
    """``[rows(lo, hi)]`` over x's batch: one share per cpu thread for a large x (blas.py)."""
    return cpu_threads.map(lambda span: rows(*span), cpu_threads.spans(x.shape[0], x.size))


def _first_maxima(x, geometry):
    """Each window's first maximum (or first NaN) and its offset number k = i * kw + j, each
    (N, C, Ho, Wo); padding never wins, also against a window of -inf."""
    shares = _by_rows(x, lambda lo, hi: _first_maxima_rows(x[lo:hi], geometry))
    if len(shares) == 1:
        return shares[0]
    return np.concatenate([best for best, _ in shares]), np.concatenate([k for _, k in shares])


def _first_maxima_rows(x, geometry):
    planes = _planes(x, -np.inf, geometry)
    inside = _inside(x.shape[2:], **geometry)
    best = planes[0].copy()
    k = np.zeros(best.shape, np.uint8 if len(planes) < 256 else np.int32)
    best_inside = None if inside is None else inside[0]
    nan = bool(np.isnan(best).any()) or bool(np.isnan(planes).any())
    for number in range(1, len(planes)):
        plane = planes[number]
        better = plane > best
        if nan:
            better |= np.isnan(plane) & ~np.isnan(best)
        if inside is not None:  # a window whose best is still padding takes any real value
            better = (better | ~best_inside) & inside[number]
            best_inside = best_inside | inside[number]
        np.maximum(best, plane, out=best)  # NaN stays NaN; the value of a tie is the same either way
        np.maximum(k, better * k.dtype.type(number), out=k)  # the offsets only grow: max is the last better one
    return best, k


# The backward needs the forward's first-maximum offsets; finding them again was about 40% of
# a backward. The forward leaves them here for the array it read (held weakly, a few at a time):
# the autograd node keeps that same array, and an in-place change of it fails backward anyway.
_OFFSETS: dict = {}  # id(x) -> (weakref to x, geometry, offsets)
_OFFSETS_KEPT = 8


def _remember_offsets(x, geometry, k) -> None:
    if len(_OFFSETS) >= _OFFSETS_KEPT:
        del _OFFSETS[next(iter(_OFFSETS))]  # the oldest
    _OFFSETS[id(x)] = (weakref.ref(x), geometry, k)


def _offsets(x, geometry):
    kept = _OFFSETS.get(id(x))
    if kept is not None and kept[0]() is x and kept[1] == geometry:
        return kept[2]
    return _first_maxima(x, geometry)[1]


def _select_numpy(x, source, **geometry):
    best, k = _first_maxima(x, geometry)
    _remember_offsets(x, geometry, k)
    if source is x:  # F.max_pool2d: the maxima themselves
        return best
    planes = _planes(source, 0, geometry)
    out = planes[0].copy()
    for number in range(1, len(planes)):
        np.copyto(out, planes[number], where=k == number)
    return out


def _backward_numpy(g, x, **geometry):
    k = _offsets(x, geometry)
    gx = np.empty(x.shape, np.result_type(g, x))
    _by_rows(x, lambda lo, hi: _backward_rows(g[lo:hi], k[lo:hi], gx[lo:hi], geometry))
    return gx


def _backward_rows(g, k, out, geometry):
    """``out`` (x's rows) = each window's gradient g at its first maximum k, zeros elsewhere."""
    (top, left), (h, w) = geometry["padding"], out.shape[2:]
    dtype = out.dtype
    out[...] = 0
    gx = _padded(out, 0, **geometry)  # out itself where no window reaches past the input
    views = _offset_views(gx, **geometry)  # writeable: a reshape would copy, so index (i, j)
    kw, zero = views.shape[1], dtype.type(0)
    (kh, _), (sh, sw), (dh, dw) = geometry["kernel"], geometry["stride"], geometry["dilation"]
    disjoint = sh > (kh - 1) * dh and sw > (kw - 1) * dw  # each input element in one window at most
    # Disjoint windows take plain writes; g times the 0/1 mask is exact (and 3x faster than
    # where + add) unless g holds inf or NaN, which times 0 would spread.
    masked = disjoint and bool(np.isfinite(g).all())
    for number in range(views.shape[0] * kw):
        view = views[number // kw, number % kw]
        if masked:
            np.multiply(g, k == number, out=view)
        elif disjoint:
            view[...] = np.where(k == number, g, zero)
        else:
            view += np.where(k == number, g, zero)  # overlaps add up, offset by offset
    if gx is not out:
        out[...] = gx[:, :, top:top + h, left:left + w]


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


def _flops(shapes, out, *, kernel, out_hw, **_):
    """One comparison (select) or add (backward) per window element."""
    n, c = shapes[0][:2]
    return n * c * math.prod(out_hw) * math.prod(kernel)


MAX_POOL2D_SELECT = defop("max_pool2d_select", kind="reduce", infer=_select_infer, vjp=_select_vjp, numpy=_select_numpy,
                          flops=_flops, wgsl=Kernel("pool.wgsl", "max_pool2d_select", "pooling.max_pool2d"))
MAX_POOL2D_BACKWARD = defop("max_pool2d_backward", infer=_backward_infer, vjp=_backward_vjp, numpy=_backward_numpy,
                            kind="index", flops=_flops,
                            wgsl=Kernel("pool.wgsl", "max_pool2d_backward", "pooling.max_pool2d"))


def max_pool2d_select(x, source, *, kernel, stride, padding, dilation, out_hw):
    """Values of ``source`` at the first maximum of each window of ``x`` (see the module doc);
    ``padding`` is (top, left): rows and columns of -inf before the input."""
    return apply(MAX_POOL2D_SELECT, x, source, kernel=kernel, stride=stride, padding=padding, dilation=dilation,
                 out_hw=out_hw)


def max_pool2d_backward(g, x, *, kernel, stride, padding, dilation, out_hw):
    return apply(MAX_POOL2D_BACKWARD, g, x, kernel=kernel, stride=stride, padding=padding, dilation=dilation,
                 out_hw=out_hw)
