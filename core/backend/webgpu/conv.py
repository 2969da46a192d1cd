"""Launcher for conv.wgsl: conv2d forward, backward_input and backward_weight, one dispatch each.

The two operands stay strided 4-D views (transposed or sliced inputs are read in
place); the output is a new contiguous array. See the shader's header for the maths
and grid. Shapes whose per-thread loop would pass llvmpipe's silent loop-trip limit
are refused with the sizes to reduce, rather than returning wrong numbers.
"""
from __future__ import annotations

import numpy as np

from . import reduce as gpu_reduce

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


def loop_trips(entry, x_shape, w_shape, out_hw, groups, lanes=1):
    """Loop trips of the busiest invocation (each nested loop level counts)."""
    (n, c, _, _), (o, _, kh, kw), (ho, wo) = x_shape, w_shape, out_hw
    if entry == "conv2d_backward_weight":
        return -(-n // lanes) * (1 + ho * (1 + wo)) + lanes.bit_length()
    inner = c // groups if entry == "conv2d_forward" else o // groups
    return kh * (1 + kw * (1 + inner))


def choose_lanes(x_shape, w_shape, out_hw, groups, workgroup, cpu_adapter):
    """backward_weight's threads per weight element: one on a CPU adapter (no barriers,
    which llvmpipe runs slowly) unless the loop would pass the trip limit; a whole
    workgroup on a GPU, where the few weight elements would leave it idle otherwise."""
    if not cpu_adapter:
        return workgroup
    lanes = 1
    while lanes < workgroup and loop_trips("conv2d_backward_weight", x_shape, w_shape, out_hw, groups,
                                           lanes) > LOOP_TRIP_LIMIT:
        lanes *= 2
    return lanes


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
    if out.numel() == 0:
        return out
    groups = attrs["groups"]
    workgroup = min(WORKGROUP, backend.limits["max_compute_invocations_per_workgroup"])
    cpu_adapter = gpu_reduce.is_cpu_adapter(backend)
    constants = {"WG": workgroup}
    total = out.numel()
    if entry == "conv2d_forward":  # four output channels per thread when they divide a group
        constants["OB"] = 4 if (w_shape[0] // groups) % 4 == 0 else 1
        threads = total // constants["OB"]
        workgroups = -(-threads // workgroup)
    elif entry == "conv2d_backward_input":  # four input channels per thread when they divide a group
        constants["OB"] = 4 if (x_shape[1] // groups) % 4 == 0 else 1
        threads = total // constants["OB"]
        workgroups = -(-threads // workgroup)
    else:
        constants["LANES"] = lanes = choose_lanes(x_shape, w_shape, out_hw, groups, workgroup, cpu_adapter)
        threads = total
        workgroups = -(-total // (workgroup // lanes))
    trips = loop_trips(entry, x_shape, w_shape, out_hw, groups, constants.get("LANES", 1))
    if trips > LOOP_TRIP_LIMIT and cpu_adapter:
        raise ValueError(f"{op.name}: input {tuple(x_shape)} and weight {tuple(w_shape)} need {trips} loop trips "
                         f"per thread, past this CPU adapter's limit of {LOOP_TRIP_LIMIT}; split the batch or "
                         f"the channels into smaller convolutions, or move the tensors to 'cpu'")
    params = pack_params(x_shape, w_shape, out_hw, attrs, a, b, threads)
    backend.dispatch(FILE, entry, (), None, constants, [a.buffer, b.buffer, out.buffer], params,
                     backend.grid(workgroups, op.name), f"{FILE}:{entry} {tuple(x_shape)} {tuple(w_shape)}")
    return out
