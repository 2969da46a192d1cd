"""PyTorch's movement and shape functions composed from the view ops, cat and
indexing: roll, meshgrid, broadcast_tensors/broadcast_to/broadcast_shapes, tile,
the *stack family, atleast_*d, tensor_split, split_with_sizes, swapaxes/moveaxis,
rot90, flipud/fliplr, diagonal, diag, diagflat, trace, diag_embed,
tril_indices/triu_indices and ``Tensor.unfold``. Every one runs on each device and
differentiates through the ops it is made of.
"""
from __future__ import annotations

import numpy as np

from .. import dtypes
from ._helpers import broadcast_shapes as _broadcast, describe, normalize_dim
from .indexing import getitem, index_put, index_select
from .movement import cat, expand, flip, movedim, narrow, reshape, split, transpose
from .registry import OpError
from ..creation import arange, tensor, zeros
from ..tensor import Size, Tensor
from .autocasting import autocast_op


def _tensors(op_name, tensors):
    if len(tensors) == 1 and isinstance(tensors[0], (list, tuple)):
        tensors = tuple(tensors[0])
    for t in tensors:
        if not isinstance(t, Tensor):
            raise TypeError(f"{op_name}: expected Tensors, got {type(t).__name__}")
    return tensors


def roll(input, shifts, dims=None):  # noqa: A002  (torch's names)
    """Rotate elements along ``dims`` by ``shifts`` (elements leaving one end come back
    at the other); with no dims, over the flattened tensor.

    Example:
        >>> webgrad.roll(webgrad.arange(5), 2)
        tensor([3, 4, 0, 1, 2])
    """
    shifts = [shifts] if isinstance(shifts, int) else list(shifts)
    if dims is None:
        if len(shifts) != 1:
            raise OpError(f"roll: with no dims, shifts must be one int, got {shifts}")
        return reshape(roll(reshape(input, (-1,)), shifts, 0), tuple(input.shape))
    dims = [dims] if isinstance(dims, int) else list(dims)
    if len(shifts) != len(dims):
        raise OpError(f"roll: shifts and dimensions must align, got shifts={shifts}, dims={dims}")
    out = input
    for shift, dim in zip(shifts, dims):
        d = normalize_dim("roll", dim, input.ndim)
        n = input.shape[d]
        if n == 0:
            continue
        s = shift % n
        if s:
            out = cat([narrow(out, d, n - s, s), narrow(out, d, 0, n - s)], d)
    return out if out is not input else input.clone()


def meshgrid(*tensors, indexing="ij"):
    """Coordinate grids from 1-D tensors: ``indexing='ij'`` (matrix, the default here and in
    PyTorch) or ``'xy'`` (Cartesian: the first two dims swapped)."""
    tensors = _tensors("meshgrid", tensors)
    if indexing not in ("ij", "xy"):
        raise OpError(f"meshgrid: indexing must be 'ij' or 'xy', got {indexing!r}")
    for t in tensors:
        if t.ndim > 1:
            raise OpError(f"meshgrid: expects 0-D or 1-D tensors, got {describe(t)}")
    flat = [reshape(t, (-1,)) for t in tensors]
    swap = indexing == "xy" and len(flat) >= 2
    if swap:
        flat[0], flat[1] = flat[1], flat[0]
    shape = tuple(t.shape[0] for t in flat)
    grids = []
    for i, t in enumerate(flat):
        view = [1] * len(flat)
        view[i] = shape[i]
        grids.append(expand(reshape(t, tuple(view)), shape))
    if swap:
        grids[0], grids[1] = grids[1], grids[0]
    return tuple(grids)


def broadcast_shapes(*shapes):
    """The shape that ``shapes`` broadcast to, as a ``webgrad.Size``."""
    shapes = [(s,) if isinstance(s, int) else tuple(s) for s in shapes]
    return Size(_broadcast("broadcast_shapes", *shapes))


def broadcast_tensors(*tensors):
    """The tensors expanded to their common broadcast shape (views)."""
    tensors = _tensors("broadcast_tensors", tensors)
    shape = _broadcast("broadcast_tensors", *[tuple(t.shape) for t in tensors])
    return tuple(expand(t, shape) for t in tensors)


def broadcast_to(input, size):  # noqa: A002
    return expand(input, tuple(size))


def tile(input, dims):  # noqa: A002
    """Repeat ``input`` ``dims[i]`` times along each dim (``dims`` padded with 1s in front)."""
    dims = (dims,) if isinstance(dims, int) else tuple(dims)
    if len(dims) < input.ndim:
        dims = (1,) * (input.ndim - len(dims)) + dims
    return input.repeat(*dims)


def repeat_interleave(input, repeats=None, dim=None, *, output_size=None):  # noqa: A002
    """Repeat each element (each slice along ``dim``) ``repeats`` times in place, as
    ``torch.repeat_interleave``; with no ``dim``, over the flattened tensor. ``repeats`` is a
    number or one count per slice (a tensor, read on the host like torch's sync). The one-
    argument form ``repeat_interleave(counts)`` gives ``arange(len(counts))`` repeated.

    Example:
        >>> webgrad.repeat_interleave(webgrad.tensor([1, 2]), 2)
        tensor([1, 1, 2, 2])
    """
    if repeats is None:  # torch.repeat_interleave(repeats): the indices each count repeats
        counts = input
        if counts.ndim > 1:
            raise OpError(f"repeat_interleave: repeats must be 0-d or 1-d, got {describe(counts)}")
        counts = counts.reshape(-1)
        return repeat_interleave(arange(counts.shape[0], device=counts.device), counts, 0, output_size=output_size)
    if dim is None:
        input, dim = input.reshape(-1), 0
    dim = normalize_dim("repeat_interleave", dim, input.ndim)
    n = input.shape[dim] if input.ndim else 1
    if isinstance(repeats, Tensor):
        if repeats.dtype.category != "int" or repeats.ndim > 1:
            raise OpError(f"repeat_interleave: repeats must be an integer tensor of 0 or 1 dims, got "
                          f"{describe(repeats)}")
        counts = np.asarray(repeats.tolist(), dtype=np.int64).reshape(-1)
        if counts.size == 1:
            counts = np.full(n, counts[0])
    else:
        counts = np.full(n, int(repeats), dtype=np.int64)
    if counts.size != n:
        raise OpError(f"repeat_interleave: repeats must have the same size as input along dim {dim} "
                      f"({n}), got {counts.size}")
    if (counts < 0).any():
        raise OpError("repeat_interleave: repeats can not be negative")
    if output_size is not None and int(counts.sum()) != output_size:
        raise OpError(f"repeat_interleave: output_size={output_size} but the repeats sum to {int(counts.sum())}")
    # np.repeat wants its counts as intp (int32 on wasm32, in Pyodide)
    positions = np.repeat(np.arange(n, dtype=np.int64), counts.astype(np.intp))
    index = tensor(positions, dtype=dtypes.int64, device=input.device)
    if input.ndim == 0:
        return index_select(input.reshape(1), 0, index)
    return index_select(input, dim, index)


def atleast_1d(*tensors):
    return _atleast(tensors, 1)


def atleast_2d(*tensors):
    return _atleast(tensors, 2)


def atleast_3d(*tensors):
    return _atleast(tensors, 3)


def _atleast(tensors, n):
    single = len(tensors) == 1 and isinstance(tensors[0], Tensor)
    out = []
    for t in _tensors(f"atleast_{n}d", tensors):
        if t.ndim < n:
            if n == 3 and t.ndim == 2:
                t = t.unsqueeze(-1)
            elif n == 3 and t.ndim == 1:
                t = reshape(t, (1, t.shape[0], 1))
            else:
                t = reshape(t, (1,) * (n - t.ndim) + tuple(t.shape))
        out.append(t)
    return out[0] if single else tuple(out)


def hstack(tensors):
    tensors = _atleast(tuple(tensors), 1)
    return cat(tensors, 0 if tensors[0].ndim == 1 else 1)


def vstack(tensors):
    return cat(_atleast(tuple(tensors), 2), 0)


row_stack = vstack


def dstack(tensors):
    return cat(_atleast(tuple(tensors), 3), 2)


def column_stack(tensors):
    columns = [reshape(t, (t.numel(), 1)) if t.ndim <= 1 else t for t in _tensors("column_stack", tuple(tensors))]
    return cat(columns, 1)


def diff(input, n=1, dim=-1, prepend=None, append=None):  # noqa: A002
    """The ``n``-th forward difference along ``dim`` (``prepend``/``append`` joined first)."""
    d = normalize_dim("diff", dim, input.ndim)
    if n == 0:  # PyTorch returns the input itself then, prepend and append ignored
        return input
    x = cat([t for t in (prepend, input, append) if t is not None], d) if prepend is not None or \
        append is not None else input
    for _ in range(n):
        m = x.shape[d]
        if m == 0:
            break
        if x.dtype is dtypes.bool_:
            x = narrow(x, d, 1, m - 1) != narrow(x, d, 0, m - 1)
        else:
            x = narrow(x, d, 1, m - 1) - narrow(x, d, 0, m - 1)
    return x


def tensor_split(input, indices_or_sections, dim=0):  # noqa: A002
    """Split into ``n`` nearly equal parts (the first ``size % n`` one longer) or at the given indices."""
    d = normalize_dim("tensor_split", dim, input.ndim)
    n = input.shape[d]
    if isinstance(indices_or_sections, Tensor):
        indices_or_sections = indices_or_sections.tolist()
    if isinstance(indices_or_sections, int):
        parts = indices_or_sections
        if parts <= 0:
            raise OpError(f"tensor_split: number of sections must be larger than 0, got {parts}")
        sizes = [n // parts + (1 if i < n % parts else 0) for i in range(parts)]
        bounds = np.cumsum([0] + sizes).tolist()
    else:
        bounds = [0] + [int(i) for i in indices_or_sections] + [n]
    out = []
    for start, stop in zip(bounds[:-1], bounds[1:]):
        start, stop = min(max(start, 0), n), min(max(stop, 0), n)
        out.append(narrow(input, d, start, max(stop - start, 0)))
    return tuple(out)


def split_with_sizes(input, split_sizes, dim=0):  # noqa: A002
    return split(input, list(split_sizes), dim)


def ravel(input):  # noqa: A002
    """The elements as a 1-D tensor (a view where the layout allows)."""
    return reshape(input, (-1,))


def swapaxes(input, axis0, axis1):  # noqa: A002
    return transpose(input, axis0, axis1)


swapdims = swapaxes


def moveaxis(input, source, destination):  # noqa: A002
    return movedim(input, source, destination)


def rot90(input, k=1, dims=(0, 1)):  # noqa: A002
    """Rotate by 90 degrees ``k`` times in the plane of ``dims`` (from the first towards the second)."""
    dims = list(dims)
    if len(dims) != 2:
        raise OpError(f"rot90: expected total rotation dims == 2, but got dims = {len(dims)}")
    if input.ndim < 2:
        raise OpError(f"rot90: expected total dims >= 2, but got total dims = {input.ndim}")
    d0, d1 = (normalize_dim("rot90", d, input.ndim) for d in dims)
    if d0 == d1:
        raise OpError(f"rot90: expected rotation dims to be different, but got dim0 = {d0} and dim1 = {d1}")
    k %= 4
    if k == 1:
        return transpose(flip(input, [d1]), d0, d1)
    if k == 2:
        return flip(input, [d0, d1])
    if k == 3:
        return flip(transpose(input, d0, d1), [d1])
    return input.clone()


def flipud(input):  # noqa: A002
    if input.ndim < 1:
        raise OpError(f"flipud: input must be >= 1-d, got {describe(input)}")
    return flip(input, [0])


def fliplr(input):  # noqa: A002
    if input.ndim < 2:
        raise OpError(f"fliplr: input must be >= 2-d, got {describe(input)}")
    return flip(input, [1])


def _diagonal_index(n1, n2, offset, device):
    rows = range(max(0, -offset), max(max(0, -offset), min(n1, n2 - offset)))
    i = arange(rows.start, rows.stop, device=device) if len(rows) else zeros(0, dtype=dtypes.int64, device=device)
    return i, i + offset


def diagonal(input, offset=0, dim1=0, dim2=1):  # noqa: A002
    """The diagonal of the (dim1, dim2) planes, as a last dim: ``out[..., i] = input[.., i, .., i + offset, ..]``."""
    d1 = normalize_dim("diagonal", dim1, input.ndim)
    d2 = normalize_dim("diagonal", dim2, input.ndim)
    if d1 == d2:
        raise OpError(f"diagonal: dimensions cannot be identical {dim1}, {dim2}")
    i, j = _diagonal_index(input.shape[d1], input.shape[d2], offset, input.device)
    key: list = [slice(None)] * input.ndim
    key[d1], key[d2] = i, j
    out = getitem(input, tuple(key))
    return movedim(out, min(d1, d2) if abs(d1 - d2) == 1 else 0, -1)


def diag_embed(input, offset=0, dim1=-2, dim2=-1):  # noqa: A002
    """Tensors whose (dim1, dim2) diagonals are ``input``'s last dim (zeros elsewhere)."""
    nd = input.ndim + 1
    d1, d2 = normalize_dim("diag_embed", dim1, nd), normalize_dim("diag_embed", dim2, nd)
    if d1 == d2:
        raise OpError(f"diag_embed: diagonal dimensions cannot be identical {dim1}, {dim2}")
    n = input.shape[-1] + abs(offset)
    shape = [n if d in (d1, d2) else 0 for d in range(nd)]
    rest = iter(input.shape[:-1])
    shape = [s if s else next(rest) for s in shape]
    i, j = _diagonal_index(n, n, offset, input.device)
    key: list = [slice(None)] * nd
    key[d1], key[d2] = i, j
    src = movedim(input, -1, min(d1, d2) if abs(d1 - d2) == 1 else 0)
    return index_put(zeros(tuple(shape), dtype=input.dtype, device=input.device), tuple(key), src)


def diag(input, diagonal=0):  # noqa: A002
    """A 1-D input becomes a square matrix with it on the ``diagonal``-th diagonal; a 2-D
    input gives that diagonal as 1-D."""
    if input.ndim == 1:
        return diag_embed(input, diagonal, 0, 1)
    if input.ndim == 2:
        return globals()["diagonal"](input, diagonal, 0, 1)
    raise OpError(f"diag: matrix or a vector expected, got {describe(input)}")


def diagflat(input, offset=0):  # noqa: A002
    return diag_embed(reshape(input, (-1,)), offset, 0, 1)


@autocast_op("trace")
def trace(input):  # noqa: A002
    """The sum of a 2-D tensor's main diagonal."""
    if input.ndim != 2:
        raise OpError(f"trace: expected a matrix, got {describe(input)}")
    return diagonal(input).sum()


def _triangle_indices(op_name, row, col, offset, dtype, device, lower):
    r, c = np.indices((row, col))
    keep = (c - r <= offset) if lower else (c - r >= offset)
    dtype = dtype or dtypes.int64
    return tensor(np.stack([r[keep], c[keep]]).reshape(2, -1), dtype=dtype, device=device)


def tril_indices(row, col, offset=0, *, dtype=None, device=None, layout=None):
    """The (2, N) row and column indices of the lower triangle of a row x col matrix."""
    return _triangle_indices("tril_indices", row, col, offset, dtype, device, True)


def triu_indices(row, col, offset=0, *, dtype=None, device=None, layout=None):
    """The (2, N) row and column indices of the upper triangle of a row x col matrix."""
    return _triangle_indices("triu_indices", row, col, offset, dtype, device, False)


def unfold(input, dimension, size, step):  # noqa: A002  (Tensor.unfold, not nn.functional.unfold)
    """Every window of ``size`` elements along ``dimension``, ``step`` apart: that dim becomes
    the number of windows and a new last dim of ``size`` holds each window."""
    d = normalize_dim("unfold", dimension, max(input.ndim, 1))
    x = input.reshape(1) if input.ndim == 0 else input
    n = x.shape[d]
    if size < 0 or size > n:
        raise OpError(f"unfold: maximum size for tensor at dimension {d} is {n} but size is {size}")
    if step <= 0:
        raise OpError(f"unfold: step is {step} but must be > 0")
    windows = (n - size) // step + 1
    index = reshape(arange(windows, device=x.device) * step, (windows, 1)) + reshape(arange(size, device=x.device),
                                                                                      (1, size))
    key: list = [slice(None)] * x.ndim
    key[d] = index
    out = getitem(x, tuple(key))  # (.., windows, size, ..) with the pair where dim d was
    out = movedim(out, d + 1, -1)
    return out.reshape(size) if input.ndim == 0 else out

