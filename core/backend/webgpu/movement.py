"""Launchers for ops that move data without arithmetic: unslice (the adjoint of
slicing), cat, flip, the in-place copy/setitem and index_put (setitem on a
copy). All are strided copies through unary.wgsl into views of the destination."""
from __future__ import annotations

import math

from ...kernels import View
from . import elementwise, index, views
from .geometry import broadcast_strides
from .views import reshaped_strides


def _zeros(backend, shape, kind, label):
    out = backend.empty(shape, kind, label)
    n = math.prod(shape)
    if n:
        backend.fill(out, 0)
    return out


def _slice_view(array, slices):
    offset, strides, shape = array.offset, list(array.strides), list(array.shape)
    for d, (start, stop, step) in enumerate(slices):
        offset += start * array.strides[d]
        strides[d] = array.strides[d] * step
        shape[d] = len(range(start, stop, step))
    return array.view(tuple(shape), tuple(strides), offset)


def unslice(backend, op, record, arrays, attrs, shape, dtype):
    (g,) = arrays
    out = _zeros(backend, shape, g.kind, "unslice")
    elementwise.copy_into(backend, g, _slice_view(out, attrs["slices"]))
    return out


def cat(backend, op, record, arrays, attrs, shape, dtype):
    dim = attrs["dim"]
    out = backend.empty(shape, arrays[0].kind, "cat")
    start = 0
    for a in arrays:
        size = a.shape[dim]
        if a.numel():
            place = [(0, n, 1) for n in shape]
            place[dim] = (start, start + size, 1)
            elementwise.copy_into(backend, a, _slice_view(out, place))
        start += size
    return out


def copy_into(backend, op, record, arrays, attrs, shape, dtype):
    dst, src = arrays
    if dst.numel():
        elementwise.copy_into(backend, _broadcast(src, dst.shape), dst)


def _broadcast(array, shape):
    return array.view(tuple(shape), tuple(broadcast_strides(array.shape, array.strides, shape)))


def setitem(backend, op, record, arrays, attrs, shape, dtype):
    """``x[key] = value`` with the key resolved by the op (indexing.SETITEM): a basic
    key writes through a view of x, any other through the positions it selects."""
    dst, src, *positions = arrays
    if positions:
        index.put(backend, dst, positions[0], src)
        return
    slices, target = attrs["view"]
    view = _slice_view(dst, slices)
    view = view.view(tuple(target), reshaped_strides(view.shape, view.strides, tuple(target)))
    if view.numel():
        elementwise.copy_into(backend, _broadcast(src, view.shape), view)


def flip(backend, op, record, arrays, attrs, shape, dtype):
    """torch.flip copies: the reversed-stride view of x, made contiguous."""
    return backend.contiguous(views.run(backend, op, View("flip"), arrays, attrs, shape))


def index_put(backend, op, record, arrays, attrs, shape, dtype):
    """Out-of-place ``x[key] = value`` (setitem's differentiable form): a copy of x, written into."""
    x, *rest = arrays
    out = backend.contiguous(x)
    setitem(backend, op, record, [out, *rest], attrs, shape, dtype)
    return out
