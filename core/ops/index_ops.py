"""PyTorch's indexing functions, composed from the indexing primitives (getitem,
index_put, gather, scatter_add, the row-wise index_add): masked_select,
masked_scatter, scatter (with reduce), scatter_reduce, index_add, index_copy,
index_fill, take, take_along_dim, select and the *_scatter family.

``webgrad.ops.take`` and ``webgrad.ops.indexing.index_add`` are the row primitives
other ops build on; the torch-shaped ``take(input, index)`` (flat positions) and
``index_add(input, dim, index, source)`` live here, reached as ``webgrad.take`` and
``webgrad.index_add`` and the Tensor methods.
"""
from __future__ import annotations

import numpy as np

from .. import dtypes
from ._helpers import broadcast_shapes, describe, normalize_dim
from .elementwise import cast, where
from .indexing import _check_index, gather, getitem, index_put, scatter_add
from .indexing import index_add as _index_add_rows
from .reduce import amax, amin, prod
from .movement import cat, expand, reshape
from .registry import OpError
from ..creation import arange, ones, scalar_tensor, tensor, zeros
from ..tensor import Tensor
from .autocasting import autocast_op


def _as_index(op_name, index, device):
    if not isinstance(index, Tensor):
        index = tensor(np.asarray(index, dtype=np.int64), device=device)
    _check_index(op_name, index)
    return index


# -- masks ---------------------------------------------------------------------------
def masked_select(input, mask):  # noqa: A002  (torch's names)
    """The elements of ``input`` where ``mask`` (broadcast together) is True, as a 1-D tensor."""
    if mask.dtype is not dtypes.bool_:
        raise OpError(f"masked_select: expected a bool mask, got {describe(mask)}")
    shape = broadcast_shapes("masked_select", input.shape, mask.shape)
    return getitem(expand(input, shape), expand(mask, shape))


def masked_scatter(input, mask, source):  # noqa: A002
    """``input`` with the positions where ``mask`` is True filled, in order, from ``source``."""
    if mask.dtype is not dtypes.bool_:
        raise OpError(f"masked_scatter: expected a bool mask, got {describe(mask)}")
    shape = broadcast_shapes("masked_scatter", input.shape, mask.shape)
    input, mask = expand(input, shape), expand(mask, shape)
    count = int(mask.sum().item())
    if count > source.numel():
        raise OpError(f"masked_scatter: the mask selects {count} elements but source has only {source.numel()}")
    return index_put(input, mask, reshape(source, (-1,))[:count])


# -- scatter ---------------------------------------------------------------------------
def _full_key(index, dim):
    """The advanced-index key that reaches ``out[.., index[i, j, ..], ..]`` (index at dim,
    the position itself everywhere else)."""
    key = []
    for d, n in enumerate(index.shape):
        if d == dim:
            key.append(index)
        else:
            shape = [1] * index.ndim
            shape[d] = n
            key.append(reshape(arange(n, device=index.device), tuple(shape)))
    return tuple(key)


def _check_scatter(op_name, input, dim, index, src):  # noqa: A002
    _check_index(op_name, index)
    if index.ndim != input.ndim and not (index.ndim <= 1 and input.ndim <= 1):
        raise OpError(f"{op_name}: index must have as many dims as input ({describe(input, index)})")
    if isinstance(src, Tensor) and src.ndim != index.ndim and not (src.ndim <= 1 and index.ndim <= 1):
        raise OpError(f"{op_name}: src must have as many dims as index ({describe(src, index)})")


def _src_for(src, index, like):
    """src cut to index's shape, or a scalar value spread over it, in ``like``'s dtype."""
    if isinstance(src, Tensor):
        if src.ndim == 0:
            src = src.reshape(1) if index.ndim == 1 else src
        if tuple(src.shape) != tuple(index.shape):
            src = src[tuple(slice(0, n) for n in index.shape)]
        return cast(src, like.dtype)
    return expand(scalar_tensor(src, like.dtype, like.device), tuple(index.shape))


def _zero_d(fn, input, dim, index, *rest, **kw):  # noqa: A002
    """A 0-d input (and index) acts as 1-D with one element, as in PyTorch."""
    if input.ndim == 0:
        rest = tuple(r.reshape(1) if isinstance(r, Tensor) and r.ndim == 0 else r for r in rest)
        return fn(input.reshape(1), 0, index.reshape(-1), *rest, **kw).reshape(())
    return fn(input, normalize_dim(fn.__name__, dim, input.ndim), index.reshape(1) if index.ndim == 0 else index,
              *rest, **kw)


def scatter(input, dim, index, src=None, value=None, *, reduce=None):  # noqa: A002
    """Out-of-place ``torch.scatter``: ``out[index[i][j]][j] = src[i][j]`` for dim 0 (or a
    scalar ``value``); ``reduce='add'`` or ``'multiply'`` combines instead of overwriting."""
    if src is None:
        src = value
    if src is None:
        raise TypeError("scatter: expected src (a tensor) or value (a number)")
    if reduce is not None:
        modes = {"add": "sum", "multiply": "prod"}
        if reduce not in modes:
            raise OpError(f"scatter: reduce argument must be either 'add' or 'multiply', got {reduce!r}")
        if not isinstance(src, Tensor):
            src = scalar_tensor(src, input.dtype, input.device)
        src = expand(src, tuple(index.shape)) if src.ndim == 0 else src
        return scatter_reduce(input, dim, index, src, modes[reduce])
    return _zero_d(_scatter, input, dim, index, src)


def _scatter(input, dim, index, src):  # noqa: A002
    _check_scatter("scatter", input, dim, index, src)
    return index_put(input, _full_key(index, dim), _src_for(src, index, input))


def _region(input, index, dim):  # noqa: A002
    """The part of input that index reaches: all of ``dim``, index's extent elsewhere."""
    return tuple(slice(None) if d == dim else slice(0, n) for d, n in enumerate(index.shape))


def scatter_reduce(input, dim, index, src, reduce, *, include_self=True):  # noqa: A002
    """Combine ``src`` into ``input`` at ``index`` along ``dim`` with ``reduce`` in
    ('sum', 'prod', 'mean', 'amax', 'amin'); ``include_self=False`` leaves input's own
    values out wherever something is scattered.

    'prod', 'amax' and 'amin' compare every index with every position of ``dim``
    (memory index.numel() x input.shape[dim]); their gradients are PyTorch's (ties in
    amax/amin share it evenly).
    """
    if reduce not in ("sum", "prod", "mean", "amax", "amin"):
        raise OpError(f"scatter_reduce: reduce argument must be one of 'sum', 'prod', 'mean', 'amax', "
                      f"'amin', got {reduce!r}")
    return _zero_d(_scatter_reduce, input, dim, index, src, reduce, include_self)


def _scatter_reduce(input, dim, index, src, reduce, include_self):  # noqa: A002
    _check_scatter("scatter_reduce", input, dim, index, src)
    src = _src_for(src, index, input)
    if index.numel() == 0:
        return input.clone()
    counts = scatter_add(zeros(tuple(input.shape), dtype=dtypes.int64, device=input.device), dim, index,
                         ones(tuple(index.shape), dtype=dtypes.int64, device=input.device))
    touched = counts > 0
    if reduce in ("sum", "mean"):
        base = input if include_self else where(touched, 0, input)
        total = scatter_add(base, dim, index, src)
        if reduce == "sum":
            return total
        n = counts + 1 if include_self else where(touched, counts, 1)
        if input.dtype.category != "float":
            return where(touched, _floor_div(total, n), input)
        return total / cast(n, input.dtype)
    # prod, amax, amin: a one-hot comparison of each index with each position of dim.
    key = _region(input, index, dim)
    region = input[key]
    n = input.shape[dim]
    positions = reshape(arange(n, device=input.device), (n,) + (1,) * (index.ndim - dim))
    # (... before dim, n, index's dim, ... after): onehot[.., p, i, ..] = index[.., i, ..] == p
    onehot = index.unsqueeze(dim) == positions
    spread = src.unsqueeze(dim)
    if reduce == "prod":
        fill = 1
    elif input.dtype.category == "float":
        fill = float("-inf") if reduce == "amax" else float("inf")
    elif input.dtype is dtypes.bool_:
        fill = reduce == "amin"
    else:  # no infinity: the data's own extreme is neutral (dtype limits may not fit a device's int32)
        pick = amin if reduce == "amax" else amax
        fill = pick(cat([reshape(src, (-1,)), reshape(region, (-1,))]))
    candidates = where(onehot, spread, fill)
    if include_self:
        candidates = cat([candidates, region.unsqueeze(dim + 1)], dim + 1)
    combine = {"prod": prod, "amax": amax, "amin": amin}[reduce]
    result = combine(candidates, dim + 1)
    if not include_self:
        result = where(touched[key], result, region)
    if tuple(result.shape) == tuple(input.shape):
        return result
    return index_put(input, key, result)


def _floor_div(a, b):
    return (a - (a % b)) // b


def index_add(input, dim, index, source, *, alpha=1):  # noqa: A002
    """``input`` plus ``alpha * source`` added at the positions ``index`` along ``dim``."""
    index = _as_index("index_add", index, input.device)
    if input.ndim == 0:
        return index_add(input.reshape(1), 0, index.reshape(-1), source.reshape(-1), alpha=alpha).reshape(())
    d = normalize_dim("index_add", dim, input.ndim)
    if index.ndim > 1:
        raise OpError(f"index_add: index must be 0-D or 1-D, got {describe(index)}")
    source = source.unsqueeze(d) if source.ndim == input.ndim - 1 else source
    if alpha != 1:
        source = source * alpha
    out = _index_add_rows(input.movedim(d, 0), index.reshape(-1), cast(source, input.dtype).movedim(d, 0))
    return out.movedim(0, d)


def _dim_key(input, dim, index):  # noqa: A002
    return (slice(None),) * dim + (index,)


@autocast_op("index_copy")
def index_copy(input, dim, index, source):  # noqa: A002
    """``input`` with the slices at ``index`` along ``dim`` replaced by ``source``'s."""
    index = _as_index("index_copy", index, input.device)
    if input.ndim == 0:
        return index_put(input.reshape(1), (index.reshape(-1),), source.reshape(-1)).reshape(())
    d = normalize_dim("index_copy", dim, input.ndim)
    if source.ndim == input.ndim - 1:
        source = source.unsqueeze(d)
    return index_put(input, _dim_key(input, d, index.reshape(-1)), source)


def index_fill(input, dim, index, value):  # noqa: A002
    """``input`` with the slices at ``index`` along ``dim`` set to ``value``."""
    index = _as_index("index_fill", index, input.device)
    if input.ndim == 0:
        return index_put(input.reshape(1), (index.reshape(-1),), value).reshape(())
    d = normalize_dim("index_fill", dim, input.ndim)
    # A mask along dim, not index_put: a repeated index must fill (and take gradient) once.
    n = input.shape[d]
    index = index.reshape(-1, 1)
    hit = ((where(index < 0, index + n, index) == arange(n, device=input.device)).any(0))
    hit = reshape(hit, (n,) + (1,) * (input.ndim - d - 1))
    if isinstance(value, Tensor):
        if value.ndim:
            raise OpError(f"index_fill: only supports a 0-dimensional value tensor, got {describe(value)}")
        value = cast(value, input.dtype)
    return where(hit, value, input)


def take(input, index):  # noqa: A002
    """The elements at flat (row-major) positions ``index`` of ``input``; negative ones count from the end."""
    index = _as_index("take", index, input.device)
    return getitem(reshape(input, (-1,)), index)


def put(input, index, source, accumulate=False):  # noqa: A002
    """``input`` with the elements at flat (row-major) positions ``index`` set to (or, with
    ``accumulate``, increased by) ``source``'s."""
    index = reshape(_as_index("put", index, input.device), (-1,))
    flat = index_put(reshape(input, (-1,)), (index,), reshape(source, (-1,)), accumulate)
    return reshape(flat, tuple(input.shape))


def take_along_dim(input, indices, dim=None):  # noqa: A002
    """``gather`` with broadcasting: picks ``input``'s values at ``indices`` along ``dim``
    (over the flattened input when dim is None)."""
    if dim is None:
        return gather(reshape(input, (-1,)), 0, reshape(indices, (-1,)))  # no negative indices here (PyTorch)
    d = normalize_dim("take_along_dim", dim, input.ndim)
    if indices.ndim != input.ndim:
        raise OpError(f"take_along_dim: input and indices should have the same number of dimensions "
                      f"({describe(input, indices)})")
    n = input.shape[d]
    indices = where(indices < 0, indices + n, indices)
    shape_in = list(broadcast_shapes("take_along_dim", tuple(n for i, n in enumerate(input.shape) if i != d),
                                     tuple(n for i, n in enumerate(indices.shape) if i != d)))
    full_in = tuple(shape_in[:d]) + (input.shape[d],) + tuple(shape_in[d:])
    full_idx = tuple(shape_in[:d]) + (indices.shape[d],) + tuple(shape_in[d:])
    return gather(expand(input, full_in), d, expand(indices, full_idx))


def select(input, dim, index):  # noqa: A002
    """The slice at ``index`` along ``dim``, that dim removed (a view)."""
    d = normalize_dim("select", dim, input.ndim)
    return getitem(input, (slice(None),) * d + (int(index),))


def select_scatter(input, src, dim, index):  # noqa: A002
    """``input`` with ``input.select(dim, index)`` replaced by ``src``."""
    d = normalize_dim("select_scatter", dim, input.ndim)
    return index_put(input, (slice(None),) * d + (int(index),), src)


def slice_scatter(input, src, dim=0, start=None, end=None, step=1):  # noqa: A002
    """``input`` with ``input[.., start:end:step, ..]`` (along ``dim``) replaced by ``src``."""
    d = normalize_dim("slice_scatter", dim, input.ndim)
    return index_put(input, (slice(None),) * d + (slice(start, end, step),), src)


def diagonal_scatter(input, src, offset=0, dim1=0, dim2=1):  # noqa: A002
    """``input`` with its diagonal (as ``torch.diagonal(input, offset, dim1, dim2)``) replaced by ``src``."""
    d1 = normalize_dim("diagonal_scatter", dim1, input.ndim)
    d2 = normalize_dim("diagonal_scatter", dim2, input.ndim)
    rows = range(max(0, -offset), min(input.shape[d1], input.shape[d2] - offset))
    i = arange(rows.start, rows.stop, device=input.device) if len(rows) else zeros(0, dtype=dtypes.int64,
                                                                                 device=input.device)
    key: list = [slice(None)] * input.ndim
    key[d1], key[d2] = i, i + offset
    # x[key] puts the diagonal where the two index tensors stand when they are neighbours, else
    # first; torch.diagonal puts it last: move src's last dim to match.
    src = src.movedim(-1, min(d1, d2) if abs(d1 - d2) == 1 else 0)
    return index_put(input, tuple(key), src)
