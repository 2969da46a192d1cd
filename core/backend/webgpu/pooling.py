"""Launcher for pool.wgsl: max_pool2d_select and max_pool2d_backward, one dispatch each.

Both operands stay strided 4-D views; the output is a new contiguous array. A
thread's loops are kh*kw (select) or (kh*kw)^2 (backward) trips, far below
llvmpipe's loop limit for any kernel PyTorch accepts on these sizes. Where windows
never overlap the backward runs a thread per window (max_pool2d_backward_cells).
"""
from __future__ import annotations

import numpy as np

from . import elementwise
from .geometry import FLOATS, dtype_of, kind_of, stored_kind


FILE = "pool.wgsl"


def pack_params(a, b, total) -> bytes:
    words = np.zeros(16, dtype=np.uint32)
    words[0], words[4:6] = total, (a.offset, b.offset)
    words.view(np.int32)[8:12] = a.strides
    words.view(np.int32)[12:16] = b.strides
    return words.tobytes()


def constants(x_shape, out_hw, attrs) -> dict:
    """The plane and the window, as pool.wgsl's pipeline constants."""
    (_, c, h, w), (ho, wo) = x_shape, out_hw
    (kh, kw), (sh, sw), (dh, dw), (top, left) = attrs["kernel"], attrs["stride"], attrs["dilation"], attrs["padding"]
    return {"C": c, "H": h, "W": w, "HO": ho, "WO": wo, "KH": kh, "KW": kw, "SH": sh, "SW": sw,
            "DH": dh, "DW": dw, "TOP": top, "LEFT": left}


def max_pool2d(backend, op, record, arrays, attrs, shape, dtype):
    a, b = arrays
    if a.kind not in FLOATS or b.kind not in FLOATS:
        raise TypeError(f"{op.name}: not supported on webgpu for element types {a.kind}, {b.kind}; "
                        f"convert with .float()")
    if stored_kind(kind_of(dtype)) != kind_of(dtype):  # a packed result: written as f32, rounded after
        return elementwise.converted(backend, max_pool2d(backend, op, record, arrays, attrs, shape, dtype_of("f32")),
                                     kind_of(dtype))
    backward = record.entry == "max_pool2d_backward"
    x_shape = b.shape if backward else a.shape
    out = backend.empty(shape, kind_of(dtype), op.name)
    total, entry = out.numel(), record.entry
    if total == 0:
        return out
    if backward and all(d * (k - 1) < s for k, s, d in zip(attrs["kernel"], attrs["stride"], attrs["dilation"])):
        total, entry = a.numel(), "max_pool2d_backward_cells"  # disjoint windows: a thread each
    types = (("A", a.kind), ("B", b.kind), ("O", out.kind))
    backend.dispatch_1d(FILE, entry, types, None,
                        {**constants(x_shape, attrs["out_hw"], attrs), "ROUND_OUT": out.kind == "f16"},
                        [a.buffer, b.buffer, out.buffer], pack_params(a, b, total), total,
                        f"{FILE}:{entry} {tuple(x_shape)}")
    return out
