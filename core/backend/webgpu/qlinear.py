"""Launching qlinear.wgsl: a dynamic-quantized Linear as integer products (see the shader).

Two dispatches for an input up to ``SMALL_X`` elements: ``quantize_small`` (x's range, then x
to packed int8 rows and its scale) and ``qmatmul`` (the int8 product with the weight as stored,
scaled back, the bias added). A larger x takes its min and max from the reductions first.
The composed float ops this replaces took about fifteen, and multiplied a float32 copy of the
weight made at every call.

The four int8 products of a word pair are one ``dot4I8Packed`` where the device has the WGSL
language feature ``packed_4x8_integer_dot_product`` (``device.packed_dot``), else the same sum
unpacked by hand (``PACKED_DOT`` forces either; tests run both).
"""
from __future__ import annotations

import functools

import numpy as np

from ...kernels import Program
from . import elementwise, large
from . import reduce as gpu_reduce
from .geometry import dtype_of, fold_grid, is_cpu_adapter
from .source import read

FILE = "qlinear.wgsl"
TM = TN = 8  # a thread's block of out (the shader's consts)
WORKGROUP = 16  # threads: WG_X x WG_Y, WG_X as wide as out's columns need, up to all 16
QUANTIZE_WG = 64  # quantize's @workgroup_size
# Inputs up to this many elements are quantized by one workgroup in one dispatch (its range
# found there too); larger ones take the reductions' two passes each, then one thread per vec4.
SMALL_X = 1 << 17
PACKED_DOT: bool | None = None  # None: as the device has it; True/False forces one (tests)
DOT4 = {
    True: "fn wg_dot4_i8(a: u32, b: u32) -> i32 { return dot4I8Packed(a, b); }\n",
    False: """fn wg_dot4_i8(a: u32, b: u32) -> i32 {
  let x = vec4<i32>(bitcast<vec4<i32>>(vec4<u32>(a << 24u, a << 16u, a << 8u, a)) >> vec4<u32>(24u));
  let y = vec4<i32>(bitcast<vec4<i32>>(vec4<u32>(b << 24u, b << 16u, b << 8u, b)) >> vec4<u32>(24u));
  return dot(x, y);
}
""",
}


def _packed_dot(backend) -> bool:
    return getattr(backend.device, "packed_dot", False) if PACKED_DOT is None else PACKED_DOT


@functools.cache
def _source(native: bool) -> str:
    return DOT4[native] + read(FILE)


def _run(backend, entry, buffers, params, grid, label, constants=()):
    native = _packed_dot(backend)
    program = Program.of(FILE, entry, (), None, dict(constants), generated=("dot4I8Packed" if native else "unpacked"))
    backend.run_program(program, buffers, params, grid, label, source=_source(native))


def _rows_of_vec4s(backend, weight, k16: int):
    """``weight`` (n x k int8) as rows of ``k16`` vec4 words from a vec4 boundary: itself where it
    already is one, else a zero-padded copy (rows whose length is not a multiple of 16, a view)."""
    n, k = weight.shape
    if weight.is_contiguous() and k == 16 * k16 and weight.offset % 16 == 0:
        return weight
    padded = backend.full((n, 16 * k16), 0, dtype_of("i8"))
    elementwise.copy_into(backend, weight, large.narrow(padded, 1, 0, k))
    return padded


def pack_params(m, n, k, k16, x_offset=0, lo=None, hi=None, w_offset=0, scale=None, per_row=False,
                bias=None, tiles_n=0, tiles=0) -> bytes:
    words = np.zeros(16, dtype=np.uint32)
    words[0:4] = (m, n, k, k16)
    words[4:7] = (x_offset, 0 if lo is None else lo.offset, 0 if hi is None else hi.offset)
    words[7:12] = (w_offset, 0 if scale is None else scale.offset, per_row, 0 if bias is None else bias.offset,
                   bias is not None)
    words[12:14] = (tiles_n, tiles)
    return words.tobytes()


def quantized_linear(backend, op, record, arrays, attrs, shape, dtype):
    """out = x @ dequantized(weight).T + bias as torch's dynamic int8 Linear computes it (x's
    last dim the features, weight n x k int8, scale one or one per row, bias optional)."""
    x, weight, scale, *rest = arrays
    bias = rest[0] if rest else None
    n, k = weight.shape
    out = backend.empty(shape, "f32", "quantized_linear")
    m = out.numel() // n if n else 0
    if m == 0 or n == 0:
        return out
    if k == 0:  # no products: the bias alone (x quantized from an empty range)
        if bias is None:
            backend.fill(out, 0.0)
        else:
            elementwise.copy_into(backend, bias.view(shape, (0,) * (len(shape) - 1) + bias.strides), out)
        return out
    k16 = -(-k // 16)
    if is_cpu_adapter(getattr(backend.device, "adapter_info", None) or {}) and k16 > gpu_reduce.LOOP_TRIP_LIMIT:
        raise ValueError(f"quantized_linear: {k} in features need {k16} loop trips per thread, past this CPU "
                         f"adapter's limit of {gpu_reduce.LOOP_TRIP_LIMIT} (it would stop silently); move the "
                         f"model to 'cpu'")
    if not x.is_contiguous():
        x = backend.contiguous(x)
    packed = backend.empty((m * k16 + 1, 4), "u32", "quantized x")  # the rows, then the scale
    label = f"{FILE}:quantize {tuple(x.shape)}"
    if m * k <= SMALL_X:
        _run(backend, "quantize_small", [x.buffer, packed.buffer], pack_params(m, n, k, k16, x.offset), (1, 1, 1),
             label)
    else:
        everything = set(range(len(x.shape)))
        lo = gpu_reduce.run(backend, "amin", x, everything, (), "f32")
        hi = gpu_reduce.run(backend, "amax", x, everything, (), "f32")
        groups = -(-m * k16 // QUANTIZE_WG)
        _run(backend, "quantize", [x.buffer, packed.buffer, lo.buffer, hi.buffer],
             pack_params(m, n, k, k16, x.offset, lo, hi), backend.grid(groups, "quantized_linear"), label)

    weight = _rows_of_vec4s(backend, weight, k16)
    wg_x = min(WORKGROUP, 1 << (-(-n // TN) - 1).bit_length())  # a narrow out (10 classes) leaves none idle
    wg_y = WORKGROUP // wg_x
    tiles_n, tiles_m = -(-n // (wg_x * TN)), -(-m // (wg_y * TM))
    tiles = tiles_n * tiles_m
    params = pack_params(m, n, k, k16, w_offset=weight.offset // 16, scale=scale, per_row=len(scale.shape) == 1,
                         bias=bias, tiles_n=tiles_n, tiles=tiles)
    buffers = [packed.buffer, weight.buffer, scale.buffer, (scale if bias is None else bias).buffer, out.buffer]
    grid = fold_grid(tiles, backend.limits["max_compute_workgroups_per_dimension"], "quantized_linear")
    _run(backend, "qmatmul", buffers, params, grid, f"{FILE}:qmatmul {m}x{k} @ {k}x{n}",
         {"WG_X": wg_x, "WG_Y": wg_y})
    return out
