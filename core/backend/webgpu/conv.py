"""Launcher for conv2d forward, backward_input and backward_weight on WebGPU.

Where the pass is large enough (``PRODUCT_MIN_MACS`` multiply-adds) and the channels allow
(at least ``GEMM_MIN_CHANNELS`` per group on the product's row side; on SwiftShader
``SWIFTSHADER_GEMM_MIN_CHANNELS``) each pass is a product on matmul.wgsl (its blocking chosen
per adapter) over an im2col copy (one strided-copy dispatch: the receptive fields as a (K, L)
matrix):

    forward          out_g (Og, L)  = w_g (Og, K) @ cols_g(x) (K, L)       per image
    backward_weight  gw_g (Og, K)   = g_g (Og, N*L) @ cols_g(x)^T (N*L, K)
    backward_input   a transposed convolution: the forward of g, padded by the kernel's
                     reach less the padding, by w flipped and transposed per group
                     (stride 1; other strides take the direct kernel)

On llvmpipe the direct kernel ran a 3x3 64->64 conv at 13% of a same-FLOP matmul's
GFLOP/s (bench/cnn_step.py --webgpu), the product ~80%. Small passes stay direct: the
digits demo's CNN step (8x8 images, 16 and 32 channels) took 262 ms direct and 346 ms as
products in Chromium on SwiftShader (bench/browser_bench.py), the copies and dispatches
costing more than the product saves. Columns past ``MAX_COLUMN_BYTES`` (or the device's
binding limit) and the other cases run conv.wgsl's direct kernel: one thread per output
element (four channels each where they divide; the forward and the stride-1 backward_input two
pixels of a row too), operands
read as strided 4-D views in place, one dispatch. Shapes whose per-thread loop would pass llvmpipe's silent
loop-trip limit are refused there with the sizes to reduce, rather than returning
wrong numbers.
"""
from __future__ import annotations

import math

import numpy as np

from . import elementwise
from . import reduce as gpu_reduce
from .array import contiguous_strides
from .geometry import FLOATS, dtype_of, is_swiftshader, itemsize, kind_of, stored_kind
from .matmul import _product

FILE = "conv.wgsl"
GEMM_MIN_CHANNELS = 4  # fewer rows per group and the product's tiles are mostly idle
# SwiftShader runs the direct kernel nearer its products. With matmul's 4 x 4 blocks each pass was
# faster direct below 64 rows in Chromium; with its 8 x 8 blocks (and the direct kernels' four
# pixels a thread) they are about even from 16 rows (3x3, padding 1, 32x32 images, batch 16; ms
# direct / product): forward 16->32 111 / 95, 32->32 196 / 177, 64->32 394 / 388; backward_input
# 32->16 (16 rows) 105 / 154, 32->32 197 / 182, 64->32 (32 rows) 383 / 374; backward_weight
# 16->32 129 / 123, 32->32 220 / 231, 64->32 451 / 455.
SWIFTSHADER_GEMM_MIN_CHANNELS = 16
PRODUCT_MIN_MACS = 1 << 25
MAX_COLUMN_BYTES = 1 << 27
WORKGROUP = 64
# The direct forward's (and stride-1 backward_input's) pixels per thread along a row: each weight
# value loaded feeds PIXELS pixels' products (fewer on narrower rows). On llvmpipe the digits CNN's
# forward convs took 5.7-6.5 ms a step with one pixel, 4.0 with two (bench/profile_steps.py
# --devices webgpu --models cnn).
PIXELS = 4
# backward_weight's kernel columns per thread where a thread sums alone (a CPU adapter): each g
# value loaded feeds three products.
KERNEL_COLUMNS = 3
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


def pixels(width: int) -> int:
    """Pixels a thread takes along a row ``width`` wide: PIXELS, or the largest power of two that fits."""
    return min(PIXELS, 1 << (max(width, 1).bit_length() - 1))


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
    if a.kind not in FLOATS or b.kind not in FLOATS:
        raise TypeError(f"{op.name}: not supported on webgpu for element types {a.kind}, {b.kind}; "
                        f"convert with .float()")
    if stored_kind(kind_of(dtype)) != kind_of(dtype):  # a packed result: summed into f32, rounded after
        return elementwise.converted(backend, conv2d(backend, op, record, arrays, attrs, shape, dtype_of("f32")),
                                     kind_of(dtype))
    entry = record.entry
    if entry == "conv2d_forward":  # a = x, b = w
        x_shape, w_shape, out_hw = a.shape, b.shape, shape[2:]
    elif entry == "conv2d_backward_input":  # a = g, b = w
        x_shape, w_shape, out_hw = shape, b.shape, a.shape[2:]
    else:  # a = g, b = x
        x_shape, w_shape, out_hw = b.shape, shape, a.shape[2:]
    macs = x_shape[0] * math.prod(w_shape) * math.prod(out_hw)  # N * O * Cg * kh * kw * Ho * Wo, each pass
    if macs >= PRODUCT_MIN_MACS:
        gemm = _as_product(backend, entry, a, b, attrs, tuple(shape), dtype)
        if gemm is not None:
            return gemm
    out = backend.empty(shape, kind_of(dtype), op.name)
    if out.numel() == 0:
        return out
    groups = attrs["groups"]
    workgroup = min(WORKGROUP, backend.limits["max_compute_invocations_per_workgroup"])
    cpu_adapter = gpu_reduce.is_cpu_adapter(backend)
    constants = {"WG": workgroup, "ROUND_OUT": out.kind == "f16"}
    total = out.numel()
    if entry == "conv2d_forward":  # four output channels per thread when they divide a group, four pixels
        constants["OB"] = 4 if (w_shape[0] // groups) % 4 == 0 else 1
        constants["PB"] = pixels(out_hw[1])
        threads = total // constants["OB"] // out_hw[1] * -(-out_hw[1] // constants["PB"])
        workgroups = -(-threads // workgroup)
    elif entry == "conv2d_backward_input":  # four input channels per thread when they divide a group, four pixels
        constants["OB"] = 4 if (x_shape[1] // groups) % 4 == 0 else 1
        constants["PB"] = pixels(x_shape[3]) if attrs["stride"][1] == 1 else 1
        threads = total // constants["OB"] // x_shape[3] * -(-x_shape[3] // constants["PB"])
        workgroups = -(-threads // workgroup)
    else:  # four output channels per team when they divide a group, three kernel columns on one thread
        constants["OB"] = 4 if (w_shape[0] // groups) % 4 == 0 else 1
        constants["LANES"] = lanes = choose_lanes(x_shape, w_shape, out_hw, groups, workgroup, cpu_adapter)
        constants["JB"] = KERNEL_COLUMNS if lanes == 1 and w_shape[3] % KERNEL_COLUMNS == 0 else 1
        threads = total // constants["OB"] // constants["JB"]
        workgroups = -(-threads // (workgroup // lanes))
    trips = loop_trips(entry, x_shape, w_shape, out_hw, groups, constants.get("LANES", 1))
    if trips > LOOP_TRIP_LIMIT and cpu_adapter:
        raise ValueError(f"{op.name}: input {tuple(x_shape)} and weight {tuple(w_shape)} need {trips} loop trips "
                         f"per thread, past this CPU adapter's limit of {LOOP_TRIP_LIMIT}; split the batch or "
                         f"the channels into smaller convolutions, or move the tensors to 'cpu'")
    params = pack_params(x_shape, w_shape, out_hw, attrs, a, b, threads)
    types = (("A", a.kind), ("B", b.kind), ("O", out.kind))
    backend.dispatch(FILE, entry, types, None, constants, [a.buffer, b.buffer, out.buffer], params,
                     backend.grid(workgroups, op.name), f"{FILE}:{entry} {tuple(x_shape)} {tuple(w_shape)}")
    return out


# -- the passes as products over im2col columns ---------------------------------------------
def _fits(backend, elements: int, kind: str) -> bool:
    limit = min(MAX_COLUMN_BYTES, backend.limits["max_storage_buffer_binding_size"])
    return elements * itemsize(kind) <= limit


def _padded(backend, x, padding):
    """x with (top, bottom, left, right) zeros around its last two dims (x itself without)."""
    top, bottom, left, right = padding
    if not any(padding):
        return x
    n, c, h, w = x.shape
    out = backend.full((n, c, h + top + bottom, w + left + right), 0.0, dtype_of(x.kind))
    s = out.strides
    elementwise.copy_into(backend, x, out.view(x.shape, s, out.offset + top * s[2] + left * s[3]))
    return out


def _windows(xp, groups, k_hw, out_hw, stride, dilation):
    """The padded input's receptive fields as a strided view (N, g, Cg, kh, kw, Ho, Wo)."""
    n, c = xp.shape[:2]
    (kh, kw), (ho, wo), (sh, sw), (dh, dw), s = k_hw, out_hw, stride, dilation, xp.strides
    cg = c // groups
    return xp.view((n, groups, cg, kh, kw, ho, wo),
                   (s[0], cg * s[1], s[1], s[2] * dh, s[3] * dw, s[2] * sh, s[3] * sw))


def _contiguous_as(backend, view, shape):
    flat = backend.contiguous(view)
    return flat.view(shape, contiguous_strides(shape), flat.offset)


def _forward(backend, x, w, stride, padding, dilation, groups, dtype):
    """conv2d of x (N, C, H, W) by w (O, Cg, kh, kw): per image and group, w_g @ cols_g; None if
    the columns do not fit."""
    n, _, h, wd = x.shape
    o, cg, kh, kw = w.shape
    top, bottom, left, right = padding
    ho = (h + top + bottom - dilation[0] * (kh - 1) - 1) // stride[0] + 1
    wo = (wd + left + right - dilation[1] * (kw - 1) - 1) // stride[1] + 1
    k, og = cg * kh * kw, o // groups
    if not _fits(backend, n * groups * k * ho * wo, x.kind):
        return None
    xp = _padded(backend, x, padding)
    cols = _contiguous_as(backend, _windows(xp, groups, (kh, kw), (ho, wo), stride, dilation),
                          (n, groups, k, ho * wo))
    wm = w if w.is_contiguous() else _contiguous_as(backend, w, w.shape)
    weights = wm.view((1, groups, og, k), (0, og * k, k, 1))
    out = _product(backend, weights, cols, (n, groups, og, ho * wo), dtype)
    return out.view((n, o, ho, wo), contiguous_strides((n, o, ho, wo)), out.offset)


def gemm_min_channels(backend) -> int:
    """The fewest rows per group (the product's row side) for which a pass runs as a product."""
    info = getattr(backend.device, "adapter_info", None) or {}
    return SWIFTSHADER_GEMM_MIN_CHANNELS if is_swiftshader(info) else GEMM_MIN_CHANNELS


def _as_product(backend, entry, a, b, attrs, shape, dtype):
    """The pass as a product over im2col columns (see the module doc), or None for the direct kernel."""
    stride, padding, dilation, groups = attrs["stride"], attrs["padding"], attrs["dilation"], attrs["groups"]
    min_rows = gemm_min_channels(backend)
    if entry == "conv2d_forward":  # a = x, b = w
        if b.shape[0] // groups < min_rows:
            return None
        return _forward(backend, a, b, stride, padding, dilation, groups, dtype)
    if entry == "conv2d_backward_input":  # a = g (N, O, Ho, Wo), b = w (O, Cg, kh, kw)
        o, cg, kh, kw = b.shape
        (dh, dw), (top, bottom, left, right) = dilation, padding
        reach_h, reach_w = (kh - 1) * dh, (kw - 1) * dw
        transposed = (reach_h - top, reach_h - bottom, reach_w - left, reach_w - right)
        if stride != (1, 1) or min(transposed) < 0 or cg < min_rows:
            return None
        # w_t[g*Cg + c, o', i, j] = w[g*Og + o', c, kh-1-i, kw-1-j]: flipped and transposed per group
        og, s = o // groups, b.strides
        flipped = b.view((groups, cg, og, kh, kw), (og * s[0], s[1], s[0], -s[2], -s[3]),
                         b.offset + (kh - 1) * s[2] + (kw - 1) * s[3])
        w_t = _contiguous_as(backend, flipped, (groups * cg, og, kh, kw))
        return _forward(backend, a, w_t, (1, 1), transposed, dilation, groups, dtype)
    # backward_weight: a = g (N, O, Ho, Wo), b = x (N, C, H, W); shape = w's (O, Cg, kh, kw)
    o, cg, kh, kw = shape
    n, _, ho, wo = a.shape
    og, k, l_total = o // groups, cg * kh * kw, n * ho * wo
    if og < min_rows or not _fits(backend, groups * k * l_total, b.kind):
        return None
    if l_total > LOOP_TRIP_LIMIT and gpu_reduce.is_cpu_adapter(backend):
        return None  # the product's loop over N*L could pass a CPU adapter's silent trip limit
    xp = _padded(backend, b, padding)
    windows = _windows(xp, groups, (kh, kw), (ho, wo), stride, dilation)  # (N, g, Cg, kh, kw, Ho, Wo)
    s = windows.strides
    by_group = windows.view((groups, cg, kh, kw, n, ho, wo), (s[1], s[2], s[3], s[4], s[0], s[5], s[6]))
    cols = _contiguous_as(backend, by_group, (groups, k, l_total))
    t = a.strides  # g as (groups, Og, N, Ho, Wo), copied to (groups, Og, N*L)
    grads = _contiguous_as(backend, a.view((groups, og, n, ho, wo), (og * t[1], t[1], t[0], t[2], t[3])),
                           (groups, og, l_total))
    cols_t = cols.view((groups, l_total, k), (k * l_total, 1, l_total), cols.offset)
    out = _product(backend, grads, cols_t, (groups, og, k), dtype)
    return out.view(shape, contiguous_strides(shape), out.offset)
