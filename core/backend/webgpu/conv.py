"""Launcher for conv.wgsl: conv2d forward, backward_input and backward_weight, one dispatch each.

The two operands stay strided 4-D views (transposed or sliced inputs are read in
place); the output is a new contiguous array. See the shader's header for the maths
and grid. Shapes whose per-thread loop would pass llvmpipe's silent loop-trip limit
are refused with the sizes to reduce, rather than returning wrong numbers.
"""
from __future__ import annotations

import numpy as np

from . import reduce as gpu_reduce
from .backend import launcher

FILE = "conv.wgsl"
WORKGROUP = 64
LOOP_TRIP_LIMIT = gpu_reduce.LOOP_TRIP_LIMIT


def pack_params(x_shape, w_shape, out_hw, attrs, a, b, total) -> bytes:
    (n, c, h, w), (o, _, kh, kw), (ho, wo) = x_shape, w_shape, out_hw
    (sh, sw), (dh, dw), (top, _, left, _) = attrs["stride"], attrs["dilation"], attrs["padding"]
    words = np.zeros(28, dtype=np.uint32)
    words[0:20] = (n, c, h, w, o, kh, kw, attrs["groups"], ho, wo, sh, sw, dh, dw, top, left,
                   a.offset, b.offset, total, 0)
    words.view(np.int32)[20:24] = a.strides
    words.view(np.int32)[24:28] = b.strides
    return words.tobytes()


def loop_trips(entry, x_shape, w_shape, out_hw, groups, workgroup):
    """Loop trips of the busiest invocation (each nested loop level counts)."""
    (n, c, _, _), (o, _, kh, kw), (ho, wo) = x_shape, w_shape, out_hw
    if entry == "conv2d_forward":
        inner = c // groups
    elif entry == "conv2d_backward_input":
        inner = o // groups
    else:
        return -(-n * ho * wo // workgroup) + workgroup.bit_length()
    return inner * (1 + kh * (1 + kw))


@launcher("conv2d")
def conv2d(backend, op, record, arrays, attrs, shape, dtype):
    a, b = arrays
    if a.kind != "f32" or b.kind != "f32":
        raise TypeError(f"{op.name}: not supported on webgpu for element types {a.kind}, {b.kind}; "
                        f"convert with .float()")
    entry = record.entry
    if entry == "conv2d_forward":  # a = x, b = w
        x_shape, w_shape, out_hw = a.shape, b.shape, shape[2:]
    elif entry == "conv2d_backward_input":  # a = g, b = w
        x_shape, w_shape, out_hw = shape, b.shape, a.shape[2:]
    else:  # a = g, b = x
        x_shape, w_shape, out_hw = b.shape, shape, a.shape[2:]
    out = backend.empty(shape, "f32", op.name)
    total = out.numel()
    if total == 0:
        return out
    workgroup = min(WORKGROUP, backend.limits["max_compute_invocations_per_workgroup"])
    trips = loop_trips(entry, x_shape, w_shape, out_hw, attrs["groups"], workgroup)
    if trips > LOOP_TRIP_LIMIT and gpu_reduce.is_cpu_adapter(backend):
        raise ValueError(f"{op.name}: input {tuple(x_shape)} and weight {tuple(w_shape)} need {trips} loop trips "
                         f"per thread, past this CPU adapter's limit of {LOOP_TRIP_LIMIT}; split the batch or "
                         f"the channels into smaller convolutions, or move the tensors to 'cpu'")
    groups = total if entry == "conv2d_backward_weight" else -(-total // workgroup)
    params = pack_params(x_shape, w_shape, out_hw, attrs, a, b, total)
    backend.dispatch(FILE, entry, (), None, {"WG": workgroup}, [a.buffer, b.buffer, out.buffer], params,
                     backend.grid(groups, op.name), f"{FILE}:{entry} {tuple(x_shape)} {tuple(w_shape)}")
    return out
