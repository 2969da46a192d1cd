"""Launcher for layer_norm.wgsl: the fused layer_norm_core over the trailing dims.

The input stays a strided view: the shader walks it as rows (the leading dims,
merged where strides allow) of ``inner`` elements (the normalized dims, which
must merge into one strided dim), reading each row three times (sum, squared
deviations, write) into a new contiguous output. A view whose normalized dims
do not merge (say, a transposed pair of them) is first copied to a contiguous
array; only views with more than MAX_RANK unmergeable leading dims are refused.

Threads per row (LANES) follow the reductions' rule (``reduce.choose_lanes``):
one thread per row on CPU adapters and for short rows, a team up to a workgroup
per long row on a GPU. Then, on any adapter, a row too long for one thread is
given more: llvmpipe silently ends an invocation after ~65535 loop trips.
"""
from __future__ import annotations

import math

import numpy as np

from . import elementwise
from . import reduce as gpu_reduce
from .geometry import FLOATS, MAX_RANK, coalesce_dims, stored_kind

FILE = "layer_norm.wgsl"
WORKGROUP = 128                                   # threads per workgroup (capped by the device limit)
MAX_LANE_ELEMENTS = gpu_reduce.MAX_LANE_ELEMENTS  # elements one thread may walk in each pass
LOOP_TRIP_LIMIT = gpu_reduce.LOOP_TRIP_LIMIT      # loop trips per invocation on a CPU adapter


def split_rows(x, ndims):
    """(kept, row): the leading dims and the normalized dims of the view ``x``,
    each a coalesced list of (size, stride)."""
    lead = len(x.shape) - ndims
    kept = coalesce_dims(zip(x.shape[:lead], x.strides[:lead]))
    row = coalesce_dims(zip(x.shape[lead:], x.strides[lead:]))
    return kept, row


def choose_lanes(rows, inner, kept, row_stride, workgroup, cpu_adapter=False):
    """Threads per row, as for a reduction over the row (tests force it)."""
    return gpu_reduce.choose_lanes(rows, inner, kept, [(inner, row_stride)], workgroup, cpu_adapter)


loop_trips = gpu_reduce.three_pass_loop_trips  # a module name, so tests can patch it


def pack_params(rows, inner, offset, groups, kept, row_stride, eps) -> bytes:
    words = np.zeros(24, dtype=np.uint32)
    words[0:5] = (rows, inner, offset, groups, len(kept))
    words.view(np.int32)[5] = row_stride
    words.view(np.float32)[6] = eps
    for k, (n, s) in enumerate(kept):
        words[8 + k] = n
        words.view(np.int32)[16 + k] = s
    return words.tobytes()


def backward_loop_trips(inner, lanes, rounds):
    """Loop trips of layer_norm_backward: the two statistics passes, the gradient sums (two
    elements a trip), the write (one), and four tree combines."""
    per_lane = -(-inner // lanes)
    return rounds * (2 * (per_lane // 4 + 4) + per_lane // 2 + 1 + per_lane + 4 * lanes.bit_length())


def layer_norm(backend, op, record, arrays, attrs, shape, dtype):
    """layer_norm_core of ``arrays[0]`` over its last ``attrs["ndims"]`` dims, then (the
    layer_norm op) ``* arrays[1] + arrays[2]``; f16 in and out is read and written as it is, a
    packed 16-bit float read as it is and the result rounded after, computed in f32."""
    x = arrays[0]
    if len(arrays) == 3:  # read as row element r: parameters are contiguous from 0 already, other views are copied
        w, b = (_from_zero(backend, a) for a in arrays[1:])
        return _launch(backend, record, x, [w, b], attrs, shape, {"AFFINE": True}, loop_trips)
    return _launch(backend, record, x, [x, x], attrs, shape, {"AFFINE": False}, loop_trips)  # x: bound, never read


def layer_norm_backward(backend, op, record, arrays, attrs, shape, dtype):
    """The input gradient of layer_norm_core for the incoming gradient ``arrays[0]`` at
    ``arrays[1]`` (one kernel: statistics again, two sums, the write)."""
    g, x = arrays
    return _launch(backend, record, x, [_from_zero(backend, g)], attrs, shape, {}, backward_loop_trips)


def _from_zero(backend, a):
    """``a``, or a copy of it, with its elements in order from offset 0."""
    return a if a.is_contiguous() and not a.offset else backend.contiguous(a)


def _launch(backend, record, x, extra, attrs, shape, constants, trips):
    """Dispatch ``record``'s entry over x's rows, binding ``extra`` (all of one element kind)
    after x and the output."""
    if x.kind not in FLOATS:
        raise TypeError(f"layer_norm: not supported on webgpu for element type {x.kind}; convert with .float()")
    kind = x.kind
    if math.prod(shape) == 0:
        return backend.empty(shape, kind, "layer_norm")
    out = backend.empty(shape, stored_kind(kind), "layer_norm")
    ndims = attrs["ndims"]
    kept, row = split_rows(x, ndims)
    if len(kept) > MAX_RANK:
        raise ValueError(f"layer_norm: webgpu handles at most {MAX_RANK} leading dims that cannot be merged; got "
                         f"shape {tuple(x.shape)} with strides {tuple(x.strides)}; reshape to fewer dims or "
                         f"move the tensor to 'cpu'")
    if len(row) > 1:  # the shader walks one strided row dim; other rows are made contiguous once
        x = backend.contiguous(x)
        kept, row = split_rows(x, ndims)
    rows = math.prod([n for n, _ in kept])
    inner, row_stride = row[0] if row else (1, 0)

    workgroup = min(WORKGROUP, backend.limits["max_compute_invocations_per_workgroup"])
    cpu_adapter = gpu_reduce.is_cpu_adapter(backend)
    lanes = choose_lanes(rows, inner, kept, row_stride, workgroup, cpu_adapter)
    lanes, groups, launch = gpu_reduce.widen_for_long_rows(
        backend, record.entry, x.shape, rows, inner, lanes, workgroup, cpu_adapter, trips)

    constants = {"WG": workgroup, "LANES": lanes, "KEEP_FLAT": len(kept) <= 1, "ROUND_OUT": out.kind == "f16",
                 **constants}
    params = pack_params(rows, inner, x.offset, groups, kept, row_stride, attrs["eps"])
    types = (("X", x.kind), ("O", out.kind), ("W", extra[0].kind))
    backend.dispatch(FILE, record.entry, types, None, constants, [x.buffer, out.buffer] + [a.buffer for a in extra],
                     params, launch, f"{FILE}:{record.entry} {tuple(x.shape)}")
    return elementwise.converted(backend, out, kind)
