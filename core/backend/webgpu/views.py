"""Movement ops as strided views: no kernel, no copy (reshape copies only when
the data is not laid out so that a view is possible)."""
from __future__ import annotations

from .array import contiguous_strides
from .geometry import broadcast_strides


def run(backend, op, record, arrays, attrs, shape, dtype=None):
    """The launcher of ``View`` records: a strided view of the input, no kernel."""
    (x,) = arrays
    kind = record.kind
    if kind == "reshape":
        strides = reshaped_strides(x.shape, x.strides, shape)
        if strides is None:
            x = backend.contiguous(x)
            strides = contiguous_strides(shape)
        return x.view(shape, strides)
    if kind == "permute":
        dims = attrs["dims"]
        return x.view(shape, tuple(x.strides[d] for d in dims))
    if kind == "expand":
        return x.view(shape, broadcast_strides(x.shape, x.strides, shape))
    if kind == "slice":
        offset, strides = x.offset, list(x.strides)
        for d, (start, _stop, step) in enumerate(attrs["slices"]):
            offset += start * x.strides[d]
            strides[d] = x.strides[d] * step
        return x.view(shape, strides, offset)
    if kind == "flip":
        offset, strides = x.offset, list(x.strides)
        for d in attrs["dims"]:
            if x.shape[d] > 0:
                offset += (x.shape[d] - 1) * x.strides[d]
            strides[d] = -x.strides[d]
        return x.view(shape, strides, offset)
    raise ValueError(f"{op.name}: unknown view kind {kind!r}")


def reshaped_strides(old_shape, old_strides, new_shape):
    """Strides that view (old_shape, old_strides) as new_shape, or None when the
    data must be copied (numpy's attempt_nocopy_reshape)."""
    old = [(n, s) for n, s in zip(old_shape, old_strides) if n != 1]
    if any(n == 0 for n in new_shape) or any(n == 0 for n, _ in old):
        return contiguous_strides(new_shape)
    new_strides = [0] * len(new_shape)
    oi, ni = 0, 0
    while oi < len(old) and ni < len(new_shape):
        # Grow matching groups of old and new dims with equal element counts.
        oj, nj = oi + 1, ni + 1
        op, np_ = old[oi][0], new_shape[ni]
        while op != np_:
            if np_ < op:
                np_ *= new_shape[nj]
                nj += 1
            else:
                op *= old[oj][0]
                oj += 1
        for k in range(oi, oj - 1):  # the old group must itself be contiguous
            if old[k][1] != old[k + 1][0] * old[k + 1][1]:
                return None
        new_strides[nj - 1] = old[oj - 1][1]
        for k in range(nj - 1, ni, -1):
            new_strides[k - 1] = new_strides[k] * new_shape[k]
        oi, ni = oj, nj
    for k in range(ni, len(new_shape)):  # trailing size-1 dims
        new_strides[k] = 1
    return tuple(new_strides)
