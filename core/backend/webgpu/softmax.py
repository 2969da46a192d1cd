"""Launchers for softmax.wgsl: softmax, log_softmax and cross entropy (loss and
gradient) along one dim, fused.

The input stays a strided view: the shader walks it as rows (every dim but the
softmax dim, merged where strides allow) of ``inner`` elements, reading each row
three times (max, sum of exp, write) and writing a new contiguous output.
Only views with more than MAX_RANK unmergeable other dims are refused.

Threads per row (LANES) follow the reductions' rule (``reduce.choose_lanes``):
one thread per row on CPU adapters and for short rows, a team up to a workgroup
per long row on a GPU. Then, on any adapter, a row too long for one thread is
given more: llvmpipe silently ends an invocation after ~65535 loop trips.
"""
from __future__ import annotations

import math

import numpy as np

from . import elementwise, geometry
from . import reduce as gpu_reduce
from .array import contiguous_strides
from .geometry import FLOATS, MAX_RANK, coalesce_dims, stored_kind

FILE = "softmax.wgsl"
TOTAL_FILE = "cross_entropy_total.wgsl"
WORKGROUP = 128                              # threads per workgroup (capped by the device limit)
MAX_LANE_ELEMENTS = gpu_reduce.MAX_LANE_ELEMENTS  # elements one thread may walk in each pass
LOOP_TRIP_LIMIT = gpu_reduce.LOOP_TRIP_LIMIT      # loop trips per invocation on a CPU adapter


def choose_lanes(rows, inner, kept, row_stride, workgroup, cpu_adapter=False):
    """Threads per row, as for a reduction over the softmax dim (tests force it)."""
    return gpu_reduce.choose_lanes(rows, inner, [(n, s) for n, s, _ in kept], [(inner, row_stride)],
                                   workgroup, cpu_adapter)


loop_trips = gpu_reduce.three_pass_loop_trips  # a module name, so tests can patch it


def pack_params(rows, inner, offset, groups, kept, row_stride, out_row_stride,
                labels_offset=0, ignore_index=0, smoothing=0.0, g_offset=0, g_step=0) -> bytes:
    words = np.zeros(40, dtype=np.uint32)
    signed = words.view(np.int32)
    words[0:5] = (rows, inner, offset, groups, len(kept))
    signed[5] = row_stride
    words[6] = out_row_stride
    for k, (n, s, t) in enumerate(kept):
        words[8 + k] = n
        signed[16 + k] = s
        signed[24 + k] = t
    words[32] = labels_offset
    signed[33] = ignore_index
    words[34:35].view(np.float32)[0] = smoothing
    words[35:37] = (g_offset, g_step)
    return words.tobytes()


def plan_rows(backend, op_name, x, dim):
    """How the kernel walks ``x`` as rows along ``dim``: (x, constants, launch, row
    params), with the output contiguous. Refuses views it cannot walk."""
    if not x.shape:  # 0-d: one row of one element
        x = x.view((1,), (1,))
    out_strides = contiguous_strides(x.shape)
    kept = coalesce_dims([(n, s, t) for d, (n, s, t) in enumerate(zip(x.shape, x.strides, out_strides)) if d != dim])
    if len(kept) > MAX_RANK:
        raise ValueError(f"{op_name}: webgpu handles at most {MAX_RANK} other dims that cannot be merged; got "
                         f"shape {tuple(x.shape)} with strides {tuple(x.strides)} along dim {dim}; "
                         f"reshape to fewer dims or move the tensor to 'cpu'")
    rows = math.prod([n for n, _, _ in kept])
    inner = x.shape[dim]

    workgroup = min(WORKGROUP, backend.limits["max_compute_invocations_per_workgroup"])
    cpu_adapter = gpu_reduce.is_cpu_adapter(backend)
    lanes = choose_lanes(rows, inner, kept, x.strides[dim], workgroup, cpu_adapter)
    lanes, groups, launch = gpu_reduce.widen_for_long_rows(
        backend, op_name, x.shape, rows, inner, lanes, workgroup, cpu_adapter, loop_trips)
    constants = {"WG": workgroup, "LANES": lanes, "KEEP_FLAT": len(kept) <= 1}
    return x, constants, launch, (rows, inner, x.offset, groups, kept, x.strides[dim], out_strides[dim])


def _require_float(op_name, x):
    if x.kind not in FLOATS:
        raise TypeError(f"{op_name}: not supported on webgpu for element type {x.kind}; convert with .float()")


def _dispatch(backend, record, x, out, constants, buffers, params, launch) -> None:
    """One dispatch of ``record``'s entry reading ``x`` into ``out``: f16 is read as f32, and
    stored rounded from f32."""
    backend.dispatch(FILE, record.entry, (("X", x.kind), ("O", out.kind)), None,
                     {**constants, "ROUND_OUT": out.kind == "f16"}, buffers, params, launch,
                     f"{FILE}:{record.entry} {tuple(x.shape)}")


def softmax(backend, op, record, arrays, attrs, shape, dtype):
    """softmax / log_softmax (``op.name``) of ``arrays[0]`` along ``attrs["dim"]``; f16 in and
    out is read and written as it is, computed in f32."""
    (x,) = arrays
    _require_float(op.name, x)
    kind = x.kind
    if math.prod(shape) == 0:
        return backend.empty(shape, kind, op.name)
    out = backend.empty(shape, stored_kind(kind), op.name)
    x, constants, launch, rows = plan_rows(backend, op.name, x, attrs["dim"])
    _dispatch(backend, record, x, out, constants, [x.buffer, out.buffer], pack_params(*rows), launch)
    return elementwise.converted(backend, out, kind)


def cross_entropy(backend, op, record, arrays, attrs, shape, dtype):
    """cross_entropy (per-position loss), cross_entropy_total (its sum, or mean over the
    positions counted) or cross_entropy_backward (the gradient, given ``g`` per position or
    one value) of logits ``arrays[0]`` (N, C, ...) and labels ``arrays[1]``. f16 logits are
    read as they are; the loss is computed and stored in f32 (then rounded by a cast when its
    dtype is float16), the gradient stored as the logits are."""
    x, labels = arrays[:2]
    _require_float(op.name, x)
    if not labels.is_contiguous():  # the kernels read labels[offset + o]: rows run row-major over (N, d1, ...)
        labels = backend.contiguous(labels)
    if op.name == "cross_entropy_backward":
        g = elementwise.converted(backend, arrays[2], "f32")  # (read as f32)
        if attrs.get("mean"):  # a mean's gradient: g / count, which every position reads
            g = _total(backend, g, labels, attrs, op.name)
        return elementwise.converted(backend, _rows(backend, record, op.name, x, labels, attrs, shape, g), x.kind)
    loss = _rows(backend, record, op.name, x, labels, attrs, labels.shape)
    if op.name == "cross_entropy_total":
        loss = _total(backend, loss, labels, attrs, op.name)
    return elementwise.converted(backend, loss, geometry.kind_of(dtype))


def _rows(backend, record, name, x, labels, attrs, shape, g=None):
    """softmax.wgsl's cross_entropy (``g`` None: the loss per position, in f32) or
    cross_entropy_backward (the gradient, stored as ``x``; ``g`` one per position, contiguous,
    or one value broadcast) of logits ``x`` and contiguous ``labels``."""
    out = backend.empty(shape, "f32" if g is None else stored_kind(x.kind), name)
    if math.prod(shape) == 0:
        return out
    buffers = [x.buffer, out.buffer, labels.buffer, backend.index_errors.buffer_for(name)]
    extra = {}
    if g is not None:
        if any(g.strides) and not g.is_contiguous():
            g = backend.contiguous(g)
        extra = {"g_offset": g.offset, "g_step": int(any(g.strides))}
        buffers.append(g.buffer)
    x, constants, launch, rows = plan_rows(backend, name, x, 1)
    params = pack_params(*rows, labels_offset=labels.offset, ignore_index=attrs["ignore_index"],
                         smoothing=attrs["smoothing"], **extra)
    _dispatch(backend, record, x, out, constants, buffers, params, launch)
    return out


def _total(backend, values, labels, attrs, name):
    """cross_entropy_total.wgsl: one f32, the sum of the f32 ``values`` (divided by the count
    of labels not ignored where ``attrs["mean"]``), in one workgroup."""
    out = backend.empty((), "f32", name)
    words = np.zeros(8, dtype=np.int32)  # Params, padded to 16 bytes
    words[:6] = (values.numel(), labels.numel(), values.offset, labels.offset, attrs["ignore_index"],
                 int(attrs["mean"]))
    backend.dispatch(TOTAL_FILE, "total", (), None, {}, [values.buffer, labels.buffer, out.buffer],
                     words.tobytes(), (1,), f"{TOTAL_FILE}:total {tuple(labels.shape)}")
    return out
