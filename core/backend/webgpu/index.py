"""Launchers for the indexing kernels of ``index.wgsl``: take, gather, index_add,
scatter_add and ``put`` (``x[key] = value`` with index tensors or masks).

take and gather share one kernel, and so do index_add and scatter_add: index_add
is scatter_add along dim 0 of 2-D views ``(rows, row_size)`` with the index
broadcast across each row.

Scatter strategy. The default scatter is a scan: one thread per output element
walks its index column in order and adds the matching values. It needs no
atomics, gives the same bits on every run and matches numpy's ``np.add.at``
exactly, which keeps training runs reproducible. Its cost is
``out elements x index length along dim``, so when that would be large (an
embedding gradient: many rows, a long index with duplicates) the launcher
switches to one thread per index element adding through a compare-exchange
loop, whose summation order, and so its last-bit rounding, varies between runs.

Indices must lie in [0, size) (no kernel wraps a negative one; getitem wraps
its own). An out-of-range index never faults the GPU: it reads as 0 (take,
gather) or is skipped (the scatters, put), and sets the backend's error flag,
raised as an IndexError at the next read.
"""
from __future__ import annotations

import math

import numpy as np

from . import large
from .array import contiguous_strides
from .geometry import MAX_RANK, broadcast_strides, coalesce, itemsize
from .views import reshaped_strides

FILE = "index.wgsl"
# The scatters scan (deterministic) unless that takes more than SCAN_MAX_WORK loop
# steps in all and more than SCAN_MAX_RATIO times the atomic kernel's thread count.
SCAN_MAX_WORK = 1 << 20  # about 4 ms of scanning on llvmpipe (CPU); microseconds on a GPU
SCAN_MAX_RATIO = 64
# 32-bit kinds scatter by columns instead (deterministic, the scan's order), up to this many index
# values along dim: each thread walks them all. The char transformer's embedding gradients (512
# tokens into 40 x 48) took 5.5 ms a call scanning in Chromium.
COLUMNS_MAX_SPAN = 1 << 14


def _types(kind):
    # index.wgsl sees elements as bits in u32 words; f16 has the same bits as packed f16 (f16p),
    # so no kernel here needs WGSL's f16 extension.
    return (("T", "f16p" if kind == "f16" else kind),)


def _per_word(kind) -> int:
    return 4 // itemsize(kind)


def _word_aligned(array):
    """``array`` (an output index.wgsl writes whole words of) starts at a word."""
    assert array.offset % _per_word(array.kind) == 0, (array.kind, array.offset)
    return array


def _check_rank(op_name, shape):
    if len(shape) > MAX_RANK:
        raise ValueError(f"{op_name}: webgpu index kernels handle at most {MAX_RANK} dims, got shape "
                         f"{tuple(shape)}; reshape the tensors to fewer dims first")


def _pack(n, *, rank=0, dim=0, rows=0, offsets=(0, 0, 0, 0), span=0, index_step=0, value_step=0, out_step=0,
          shape=(), bound=(), strides=None, window=(0, 0)) -> bytes:
    """The ``Params`` uniform of index.wgsl (64 words); ``strides`` maps slot -> list;
    ``window``: (first row, row count) bound of a tensor larger than one binding."""
    words = np.zeros(64, dtype=np.uint32)
    signed = words.view(np.int32)
    words[0:4] = (n, rank, dim, rows)
    words[4:8] = offsets
    words[8] = span
    signed[9], signed[10], signed[11] = index_step, value_step, out_step
    words[12:12 + len(shape)] = shape
    words[20:20 + len(bound)] = bound
    for slot, st in (strides or {}).items():
        signed[28 + 8 * slot:28 + 8 * slot + len(st)] = st
    words[60:62] = window
    return words.tobytes()


def _with_rank(array, rank):
    """View ``array`` with exactly ``rank`` dims, dropping or adding leading size-1 dims
    (a 0-d tensor's data may be stored with shape (1,))."""
    shape, strides = list(array.shape), list(array.strides)
    while len(shape) > rank and shape[0] == 1:
        shape.pop(0)
        strides.pop(0)
    while len(shape) < rank:
        shape.insert(0, 1)
        strides.insert(0, 0)
    return array.view(tuple(shape), tuple(strides))


def _numel(shape) -> int:
    return math.prod(shape)


def _dispatch(backend, entry, op_name, kind, index, values, out, params, threads, rank):
    """Every index kernel binds the backend's error flag (4): it reports bad indices there.
    ``threads``: gather and scatter_add run one per word of out, the others one per element;
    ``rank``: the iteration space's (Params.rank), a pipeline constant too (RANK)."""
    buffers = [index.buffer, values.buffer, out.buffer, backend.index_errors.buffer_for(op_name)]
    backend.dispatch_1d(FILE, entry, _types(kind), None, {"RANK": rank}, buffers, params, threads,
                        f"{FILE}:{op_name}")


def _gather_rows(backend, op_name, x, index, out, index_strides, x_strides, rows, step, window=(0, 0)):
    """out (contiguous) = x[strided(i) + index[...] * step] over out's shape; with a
    ``window`` (first, count), ``x`` holds rows [first, first + count) only."""
    n = out.numel()
    if n == 0:
        return out
    dims, (si, sx, _) = coalesce(out.shape, [index_strides, x_strides, contiguous_strides(out.shape)])
    _check_rank(op_name, dims)
    params = _pack(n, rank=len(dims), rows=rows, offsets=(index.offset, x.offset, 0, out.offset),
                   index_step=step, shape=dims, strides={0: si, 1: sx}, window=window)
    _dispatch(backend, "gather", op_name, x.kind, index, x, _word_aligned(out), params, -(-n // _per_word(x.kind)),
              len(dims))
    return out


def take(backend, op, record, arrays, attrs, shape, dtype):
    """``out = x[index]`` along dim 0; out's shape is index.shape + x.shape[1:]."""
    x, index = arrays
    out = backend.empty(shape, x.kind, "take")
    lead = len(shape) - len(x.shape) + 1
    index = _with_rank(index, lead)
    index_strides = list(index.strides) + [0] * (len(x.shape) - 1)
    x_strides = [0] * lead + list(x.strides[1:])
    if large.too_large(backend, [x]):  # an embedding table larger than one binding: a dispatch per window
        for first, count, part in large.row_windows(x, large.binding_limit(backend)):
            _gather_rows(backend, "take", part, index, out, index_strides, x_strides, x.shape[0], x.strides[0],
                         window=(first, count))
        return out
    return _gather_rows(backend, "take", x, index, out, index_strides, x_strides, x.shape[0], x.strides[0])


def gather(backend, op, record, arrays, attrs, shape, dtype):
    """``out[c] = x[c with dim := index[c]]`` as in torch.gather; out has index's shape."""
    rank = max(len(shape), 1)  # a 0-d gather runs as 1-d
    x, index = (_with_rank(a, rank) for a in arrays)
    dim = attrs["dim"]
    out = backend.empty(shape, x.kind, "gather")
    x_strides = list(x.strides)
    x_strides[dim] = 0
    _gather_rows(backend, "gather", x, index, out.view(index.shape, contiguous_strides(index.shape)),
                 list(index.strides), x_strides, x.shape[dim], x.strides[dim])
    return out


def _scatter_into(backend, op_name, out, index, src, dim):
    """out (contiguous, holding the base) += src scattered along ``dim`` by ``index``."""
    if out.kind == "u32":
        raise TypeError(f"{op_name}: webgpu adds float and integer tensors only, got bool")
    if index.numel() == 0 or out.numel() == 0:
        return
    span = index.shape[dim]
    rows = out.shape[dim]
    # Into a tensor larger than one binding (an embedding's gradient): the atomic kernel, once
    # per window of out's rows; it skips the indices of other windows.
    split = dim == 0 and large.too_large(backend, [out])
    index_strides, src_strides = list(index.strides), list(src.strides)
    index_strides[dim] = src_strides[dim] = 0
    if _per_word(out.kind) == 1 and span <= COLUMNS_MAX_SPAN and not split:
        _check_rank(op_name, out.shape)
        out_strides = list(contiguous_strides(out.shape))
        columns = list(out.shape)
        columns[dim], out_strides[dim] = 1, 0
        params = _pack(out.numel() // rows, rank=len(out.shape), dim=dim, rows=rows,
                       offsets=(index.offset, src.offset, 0, out.offset), span=span,
                       index_step=index.strides[dim], value_step=src.strides[dim],
                       out_step=contiguous_strides(out.shape)[dim], shape=columns, bound=index.shape,
                       strides={0: index_strides, 1: src_strides, 3: out_strides})
        _dispatch(backend, "scatter_add_columns", op_name, out.kind, index, src, out, params, out.numel() // rows,
                  len(out.shape))
        return
    if out.numel() * span <= max(SCAN_MAX_WORK, SCAN_MAX_RATIO * index.numel()) and not split:
        _check_rank(op_name, out.shape)
        params = _pack(out.numel(), rank=len(out.shape), dim=dim, rows=rows,
                       offsets=(index.offset, src.offset, 0, out.offset), span=span,
                       index_step=index.strides[dim], value_step=src.strides[dim], shape=out.shape, bound=index.shape,
                       strides={0: index_strides, 1: src_strides})
        words = -(-out.numel() // _per_word(out.kind))
        _dispatch(backend, "scatter_add", op_name, out.kind, index, src, _word_aligned(out), params, words,
                  len(out.shape))
        return
    from ...determinism import alert_not_deterministic

    alert_not_deterministic(f"{op_name} on webgpu (atomic scatter-add of {index.numel()} values)")
    out_strides = list(contiguous_strides(out.shape))
    step = out_strides[dim]
    out_strides[dim] = 0
    n = index.numel()
    dims, (si, sv, so) = coalesce(index.shape, [list(index.strides), list(src.strides), out_strides])
    _check_rank(op_name, dims)
    windows = large.row_windows(out, large.binding_limit(backend)) if split else [(0, 0, out)]
    for first, count, part in windows:
        params = _pack(n, rank=len(dims), rows=rows, offsets=(index.offset, src.offset, 0, part.offset),
                       index_step=step, shape=dims, strides={0: si, 1: sv, 3: so}, window=(first, count))
        _dispatch(backend, "scatter_add_atomic", op_name, out.kind, index, src, part, params, n, len(dims))


def scatter_add(backend, op, record, arrays, attrs, shape, dtype):
    """Out-of-place torch.scatter_add: a copy of x, then the adds."""
    x, index, src = (_with_rank(a, max(len(shape), 1)) for a in arrays)  # a 0-d scatter runs as 1-d
    out = backend.contiguous(x)
    _scatter_into(backend, "scatter_add", out, index, src, attrs["dim"])
    return out.view(tuple(shape), contiguous_strides(shape))


def _reshaped(backend, array, shape):
    strides = reshaped_strides(array.shape, array.strides, shape)
    if strides is None:
        array = backend.contiguous(array)
        strides = contiguous_strides(shape)
    return array.view(shape, strides)


def index_add(backend, op, record, arrays, attrs, shape, dtype):
    """``out = base.clone(); out[index[k]] += src[k]`` for every k, duplicates accumulating."""
    base, index, src = arrays
    out = backend.contiguous(base)
    count, rows = index.numel(), base.shape[0]
    row_size = _numel(base.shape[1:])
    if count == 0 or out.numel() == 0:
        return out
    flat_index = _reshaped(backend, index, (count,))
    index_2d = flat_index.view((count, row_size), (flat_index.strides[0], 0))
    src_2d = _reshaped(backend, src, (count, row_size))
    _scatter_into(backend, "index_add", out.view((rows, row_size), (row_size, 1)), index_2d, src_2d, 0)
    return out


def put(backend, dst, positions, src):
    """``dst[key] = src`` for keys with index tensors or masks. ``positions`` (int32,
    shaped like dst[key]; made by the op, see indexing.SETITEM) holds 1 + the logical
    position in dst of each element to write, 0 for a bad index; one kernel writes
    src, broadcast, there through dst's strides. A bad index set the error flag
    (in the take that made the positions) and put then writes nothing at all, so a
    failed write leaves dst as it was, as on the cpu. With duplicate positions one
    of the values lands (which one is unspecified, as in PyTorch)."""
    assert itemsize(dst.kind) == 4, dst.kind  # narrower kinds are widened for it (backend.run)
    target = positions.shape
    n = positions.numel()
    if dst.numel() == 0 or n == 0:
        return
    if src.storage is dst.storage:  # x[i] = x[j]: a buffer cannot be read and written in one dispatch
        src = backend.contiguous(src)
    src = _with_rank(src, min(len(src.shape), len(target)))
    dims, (sp, sv) = coalesce(target, [list(positions.strides), broadcast_strides(src.shape, src.strides, target)])
    bound, (sd,) = coalesce(dst.shape, [list(dst.strides)])
    _check_rank("setitem", dims)
    _check_rank("setitem", bound)
    params = _pack(n, rank=len(dims), offsets=(positions.offset, src.offset, 0, dst.offset), span=len(bound),
                   shape=dims, bound=bound, strides={0: sp, 1: sv, 3: sd})
    _dispatch(backend, "put", "setitem", dst.kind, positions, src, dst, params, n, len(dims))


__all__ = ["take", "gather", "scatter_add", "index_add", "put"]
