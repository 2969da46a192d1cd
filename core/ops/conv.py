"""The 2-D convolution primitives: forward, and its two backward passes.

``conv2d_core(x, w, stride, padding, dilation, groups)`` is PyTorch's conv2d
(cross-correlation) of x (N, C, H, W) by w (O, C/groups, kh, kw) with zero
padding ``(top, bottom, left, right)`` and no bias:

    out[n, o, y, x] = sum_{c, i, j} xpad[n, g*Cg + c, y*sh + i*dh, x*sw + j*dw] * w[o, c, i, j]

where g = o // (O/groups) and Cg = C/groups. Its two vector-Jacobian products
are primitives too, each one kernel per backend:

    conv2d_backward_input(g, w)  = d<out, g>/dx   (a transposed convolution)
    conv2d_backward_weight(g, x) = d<out, g>/dw   (a correlation of g with x)

All three are bilinear, so each one's vjp is another of the three (see the
vjp functions below): gradients of any order stay on these kernels.

numpy: im2col through a strided window view and one batched matmul per pass; a depthwise
convolution (one input and one output channel per group, as avg_pool2d's) as kh*kw whole-array
multiply-adds instead.
WebGPU: a product on matmul.wgsl over an im2col copy where the channels allow, else
conv.wgsl's direct kernel (backend/webgpu/conv.py).
"""
from __future__ import annotations

import math

import numpy as np

from ..backend.numpy import wasm_gemm
from ..backend.numpy import blas
from ..backend.numpy.blas import cpu_threads
from ..backend.numpy.wasm_gemm import np_matmul  # numpy's matmul, or in Pyodide the wasm one
from ..kernels import Kernel
from ._helpers import describe
from .registry import OpError, apply, defop


def _out_size(size, before, after, kernel, stride, dilation):
    return (size + before + after - dilation * (kernel - 1) - 1) // stride + 1


def _geometry(x_hw, k_hw, stride, padding, dilation):
    (h, w), (kh, kw), (sh, sw), (top, bottom, left, right), (dh, dw) = x_hw, k_hw, stride, padding, dilation
    return _out_size(h, top, bottom, kh, sh, dh), _out_size(w, left, right, kw, sw, dw)


# -- numpy kernels -----------------------------------------------------------------
def padded_images(x, padding, fill=0):
    """x (N, C, H, W) with ``padding`` (top, bottom, left, right) rows and columns of ``fill``
    around it: np.pad's result without most of its cost per call (22-32 us of np.pad's 26-54 for
    the digits CNN's images, a few percent of its step)."""
    top, bottom, left, right = padding
    n, c, h, w = x.shape
    shape = (n, c, top + h + bottom, left + w + right)
    out = np.zeros(shape, x.dtype) if fill == 0 else np.full(shape, fill, x.dtype)
    out[:, :, top:top + h, left:left + w] = x
    return out


def _windows(x, k_hw, out_hw, stride, padding, dilation, groups):
    """x's receptive fields as a strided view (N, groups, Cg, Ho, Wo, kh, kw), no copy."""
    if any(padding):
        x = padded_images(x, padding)
    n, c = x.shape[:2]
    (kh, kw), (ho, wo), (sh, sw), (dh, dw) = k_hw, out_hw, stride, dilation
    s = x.strides
    return np.lib.stride_tricks.as_strided(
        x, (n, groups, c // groups, ho, wo, kh, kw), (s[0], s[1] * (c // groups), s[1], s[2] * sh, s[3] * sw,
                                                      s[2] * dh, s[3] * dw), writeable=False)


# im2col copies the windows with output positions innermost, (..., Cg*kh*kw, Ho*Wo): each inner
# run is a row of the image (Wo elements, contiguous at stride 1), where positions-outer order
# copies kw elements at a time. In Pyodide that halves a 3x3 conv (16->32 channels, 32x32,
# batch 16): im2col 8.6 -> 1.2 ms, and the product needs no transposed operand.
# All three passes go a few images at a time, so that a block's columns (about BLOCK_ELEMENTS)
# are still in cache when the product reads them: the MNIST CNN's 32->64 3x3 conv at batch 64
# took 30/43/31 ms (forward/input/weight) for whole-batch columns, 24/32/25 ms in blocks.
BLOCK_ELEMENTS = 1 << 18


def _blocks(n, per_image, most):
    step = max(1, min(most, BLOCK_ELEMENTS // max(1, per_image)))
    return [(b, min(n, b + step)) for b in range(0, n, step)]


# A large pass splits the batch's blocks over the cpu threads (backend/numpy/blas.py), each
# doing its blocks' im2col copies, products and adds: numpy lets go of the GIL in all three.
# Splitting each block's product alone leaves the rest on one thread: the MNIST CNN's 32->64
# conv forward at batch 64 took 13.7 ms on 2 BLAS threads, 10.5 ms with blocks on 2 threads.
# From PARALLEL_FROM multiply-adds, or (a depthwise conv: avg_pool2d) an input or gradient of
# blas.ELEMENTWISE_SPLIT_FROM elements, a pass is worth the threads' start.
PARALLEL_FROM = 1 << 22


def _over_blocks(n, per_image, multiply_adds, elements, run):
    """``[run(blocks)]`` for the batch's blocks, or ``run`` of each thread's share of them. A
    block holds at most a thread's part of the batch, so that the shares come out even."""
    large = multiply_adds >= PARALLEL_FROM or elements >= blas.ELEMENTWISE_SPLIT_FROM
    threads = cpu_threads.count() if large else 1
    blocks = _blocks(n, per_image, -(-n // threads))
    threads = min(len(blocks), threads)
    shares = [blocks[len(blocks) * k // threads:len(blocks) * (k + 1) // threads] for k in range(threads)]
    return cpu_threads.map(run, shares)


# A depthwise convolution's products are thousands of (1 x kh*kw) by (kh*kw x Ho*Wo) ones, a
# batched matmul at its slowest, and its col2im adds strided blocks. Each window offset is instead
# a multiply(-add) of whole arrays. numpy multiplies a strided view by per-channel taps at half the
# speed of a contiguous array, so the taps go on contiguous terms. A box filter (taps equal within
# each channel: avg_pool2d) sums its windows' rows, contiguous runs, before their columns and
# scales once. avg_pool2d 2x2 on (64, 64, 24, 24), one thread: 2.0 ms forward and 7.1 ms backward
# as products, 1.1 and 1.4 ms so.
def _depthwise(x_channels, w, groups):
    return groups > 1 and groups == x_channels == w.shape[0]


def _box(taps):
    """Whether every channel's taps are one value (a box filter)."""
    return bool((taps == taps[:, :1, :1]).all())


def _sum(arrays, out):
    """The arrays' sum, written into ``out``."""
    if len(arrays) == 1:
        np.copyto(out, arrays[0])
    else:
        np.add(arrays[0], arrays[1], out=out)
    for more in arrays[2:]:
        out += more
    return out


def _depthwise_numpy(x, w, out_hw, stride, padding, dilation):
    n, c = x.shape[:2]
    (kh, kw), (ho, wo), (sh, sw), (dh, dw) = w.shape[2:], out_hw, stride, dilation
    if any(padding):
        x = padded_images(x, padding)
    taps = w.reshape(c, kh, kw, 1, 1)
    box = _box(taps)
    out = np.empty((n, c, ho, wo), np.result_type(x, w))

    def run(blocks):
        most = max(b1 - b0 for b0, b1 in blocks)
        term = np.empty((most, c, ho, x.shape[3] if box else wo), out.dtype)
        for b0, b1 in blocks:
            total, part = out[b0:b1], term[:b1 - b0]
            if box:  # part: the window rows' sums, full width
                rows = [x[b0:b1, :, i * dh:i * dh + sh * (ho - 1) + 1:sh] for i in range(kh)]
                rows = _sum(rows, part) if kh > 1 else rows[0]
                _sum([rows[..., j * dw:j * dw + sw * (wo - 1) + 1:sw] for j in range(kw)], total)
                total *= taps[:, 0, 0]
                continue
            for i in range(kh):
                for j in range(kw):
                    term = part if i or j else total  # the first offset's term starts the total
                    np.copyto(term, x[b0:b1, :, i * dh:i * dh + sh * (ho - 1) + 1:sh,
                                      j * dw:j * dw + sw * (wo - 1) + 1:sw])
                    term *= taps[:, i, j]
                    if i or j:
                        total += part
    _over_blocks(n, x[0].size + out[0].size, out.size * kh * kw, max(x.size, out.size), run)
    return out


def _depthwise_backward_input(g, w, input_hw, stride, padding, dilation):
    n, c, ho, wo = g.shape
    kh, kw = w.shape[2:]
    (sh, sw), (dh, dw), (top, bottom, left, right) = stride, dilation, padding
    hp, wp = input_hw[0] + top + bottom, input_hw[1] + left + right
    taps = w.reshape(c, kh, kw, 1, 1)
    box = _box(taps)
    # Windows closer than the stride never meet (2x2 pooling at stride 2): each offset writes its
    # own elements, and where they tile the padded input nothing needs zeroing first.
    disjoint = dh * (kh - 1) < sh and dw * (kw - 1) < sw
    tiled = disjoint and (dh, dw) == (1, 1) and (kh * ho, kw * wo) == (hp, wp) == (sh * ho, sw * wo)
    gx = (np.empty if tiled else np.zeros)((n, c, hp, wp), np.result_type(g, w))

    def run(blocks):
        term = np.empty((max(b1 - b0 for b0, b1 in blocks), c, ho, wo), gx.dtype)
        for b0, b1 in blocks:
            part = term[:b1 - b0]
            for i in range(kh):
                for j in range(kw):
                    if not box or not (i or j):
                        np.multiply(g[b0:b1], taps[:, i, j], out=part)
                    into = gx[b0:b1, :, i * dh:i * dh + sh * (ho - 1) + 1:sh, j * dw:j * dw + sw * (wo - 1) + 1:sw]
                    if disjoint:
                        np.copyto(into, part)
                    else:
                        into += part
    _over_blocks(n, g[0].size + gx[0].size, g.size * kh * kw, max(g.size, gx.size), run)
    return gx[:, :, top:top + input_hw[0], left:left + input_hw[1]]


def _conv2d_numpy(x, w, *, stride, padding, dilation, groups):
    n, o = x.shape[0], w.shape[0]
    ho, wo = _geometry(x.shape[2:], w.shape[2:], stride, padding, dilation)
    out = wasm_gemm.conv2d(x, w, (ho, wo), stride, padding, dilation, groups)  # Pyodide: no im2col copy
    if out is not None:
        return out.reshape(n, o, ho, wo)
    if _depthwise(x.shape[1], w, groups):
        return _depthwise_numpy(x, w, (ho, wo), stride, padding, dilation)
    windows = _windows(x, w.shape[2:], (ho, wo), stride, padding, dilation, groups)
    wm = w.reshape(groups, o // groups, -1)[None]
    out = np.empty((n, groups, o // groups, ho * wo), np.result_type(x, w))

    def run(blocks):
        for b0, b1 in blocks:
            cols = windows[b0:b1].transpose(0, 1, 2, 5, 6, 3, 4).reshape(b1 - b0, groups, -1, ho * wo)  # (B, g, K, L)
            out[b0:b1] = np_matmul(wm, cols)
    _over_blocks(n, wm.shape[-1] * ho * wo, n * o * wm.shape[-1] * ho * wo, max(x.size, out.size), run)
    return out.reshape(n, o, ho, wo)


def _backward_input_numpy(g, w, *, input_hw, stride, padding, dilation, groups):
    if _depthwise(w.shape[1] * groups, w, groups):
        return _depthwise_backward_input(g, w, input_hw, stride, padding, dilation)
    n, o, ho, wo = g.shape
    _, cg, kh, kw = w.shape
    (sh, sw), (dh, dw), (top, bottom, left, right) = stride, dilation, padding
    h, wd = input_hw
    hp, wp = h + top + bottom, wd + left + right  # the padded input
    wm = w.reshape(groups, o // groups, cg * kh * kw).transpose(0, 2, 1)[None]
    dtype = np.result_type(g, w)
    if (sh, sw) == (1, 1):
        # col2im as kh*kw flat adds. g is widened to the padded input's size (zero columns and
        # rows), so a window offset (i, j) shifts an image's whole column block, every channel
        # at once, by one flat offset into the padded input: one 1-D add per offset and image.
        # The zeros add nothing where a shift wraps into the next channel or image, and what
        # runs past a block's end is zeros, left out (blocks on two threads never meet). numpy
        # adds a strided 2-D block at a quarter of a flat one's speed: per-channel row adds took
        # 6 of the MNIST CNN's 23 ms (32->64 3x3, batch 64); in Pyodide ~4 of 9 ms.
        # The product fills only the first ho*wp columns of each plane-long row of ``cols``;
        # the rest stay the zeros they were made with (a wider g would multiply zeros: 8% more
        # of the MNIST CNN's product).
        plane, row = hp * wp, cg * hp * wp  # row: one group's channels of one image
        wk = w.reshape(groups, o // groups, cg, kh * kw).transpose(0, 3, 2, 1)  # (g, kh*kw, Cg, O/g)
        wm = wk.reshape(groups, kh * kw * cg, o // groups)[None]
        flat = np.zeros(n * groups * row, dtype)

        def run(blocks):
            most = max(b1 - b0 for b0, b1 in blocks)
            widened = np.zeros((most, o, ho, wp), g.dtype)  # columns wo.. stay zero
            made = np.zeros((most, groups, kh * kw * cg, plane), dtype)
            for b0, b1 in blocks:
                b = b1 - b0
                widened[:b, :, :, :wo] = g[b0:b1]
                np_matmul(wm, widened[:b].reshape(b, groups, o // groups, ho * wp), out=made[:b, :, :, :ho * wp])
                cols = made[:b].reshape(b, groups, kh, kw, row)
                rows = b * groups
                for i in range(kh):
                    for j in range(kw):
                        shift = i * dh * wp + j * dw
                        block = flat[b0 * groups * row + shift:b1 * groups * row]
                        src = cols[:, :, i, j].reshape(rows, row)
                        if rows > 1:
                            whole = block[:(rows - 1) * row].reshape(rows - 1, row)
                            whole += src[:-1]
                        block[(rows - 1) * row:] += src[-1, :row - shift]
        _over_blocks(n, groups * kh * kw * row, n * o * cg * kh * kw * plane, max(g.size, flat.size), run)
        gx = flat.reshape(n, groups * cg, hp, wp)
    else:
        gx = np.zeros((n, groups * cg, hp, wp), dtype)

        def run(blocks):
            for b0, b1 in blocks:
                cols = np_matmul(wm, g[b0:b1].reshape(b1 - b0, groups, o // groups, ho * wo))
                cols = cols.reshape(b1 - b0, groups * cg, kh, kw, ho, wo)
                block = gx[b0:b1]
                for i in range(kh):  # col2im: kh*kw strided adds, each a whole (B, C, Ho, Wo) block
                    for j in range(kw):
                        block[:, :, i * dh:i * dh + sh * (ho - 1) + 1:sh, j * dw:j * dw + sw * (wo - 1) + 1:sw] += \
                            cols[:, :, i, j]
        _over_blocks(n, groups * cg * kh * kw * ho * wo, n * o * cg * kh * kw * ho * wo, max(g.size, gx.size), run)
    return gx[:, :, top:top + h, left:left + wd]


def _backward_weight_numpy(g, x, *, kernel_hw, stride, padding, dilation, groups):
    n, o, ho, wo = g.shape
    windows = _windows(x, kernel_hw, (ho, wo), stride, padding, dilation, groups)
    k = x.shape[1] // groups * math.prod(kernel_hw)
    # The transposed gradient, (K, O) per group: with the columns as the product's left operand
    # and g transposed on the right, BLAS reads both as stored. g @ columns.T took 18.5 ms for
    # the MNIST CNN's 32->64 conv at batch 64, columns @ g.T 15 ms. One product per image, summed
    # after, reads g in place: a product over a block's images needs g's images side by side, a
    # copy as large as g (the MNIST CNN's 1->32 conv: 1.4 ms so, 0.4 ms per image).
    def run(blocks):
        total = np.zeros((groups, k, o // groups), np.result_type(g, x))
        for b0, b1 in blocks:
            b = b1 - b0
            cols = windows[b0:b1].transpose(0, 1, 2, 5, 6, 3, 4).reshape(b, groups, k, ho * wo)  # (B, g, K, L)
            gm = g[b0:b1].reshape(b, groups, o // groups, ho * wo)
            total += np_matmul(cols, gm.transpose(0, 1, 3, 2)).sum(0)
        return total
    total = sum(_over_blocks(n, groups * k * ho * wo, n * o * k * ho * wo, max(g.size, x.size), run))
    return np.ascontiguousarray(total.transpose(0, 2, 1)).reshape(o, x.shape[1] // groups, *kernel_hw)


# -- shape rules and vjps ----------------------------------------------------------
def _conv2d_infer(x, w, *, stride, padding, dilation, groups):
    return (x.shape[0], w.shape[0], *_geometry(x.shape[2:], w.shape[2:], stride, padding, dilation)), x.dtype


def _check_grad_shape(op_name, g, x_hw, k_hw, stride, padding, dilation):
    expected = _geometry(x_hw, k_hw, stride, padding, dilation)
    if g.ndim != 4 or tuple(g.shape[2:]) != expected:
        raise OpError(f"{op_name}: the output gradient {describe(g)} does not match the convolution's output "
                      f"size {expected} for input size {tuple(x_hw)}, kernel {tuple(k_hw)}, stride={stride}, "
                      f"padding={padding}, dilation={dilation}")


def _backward_input_infer(g, w, *, input_hw, stride, padding, dilation, groups):
    _check_grad_shape("conv2d_backward_input", g, input_hw, w.shape[2:], stride, padding, dilation)
    return (g.shape[0], w.shape[1] * groups, *input_hw), g.dtype


def _backward_weight_infer(g, x, *, kernel_hw, stride, padding, dilation, groups):
    _check_grad_shape("conv2d_backward_weight", g, x.shape[2:], kernel_hw, stride, padding, dilation)
    return (g.shape[1], x.shape[1] // groups, *kernel_hw), g.dtype


def _conv2d_vjp(g, x, w, *, out, needs, **geometry):
    gx = conv2d_backward_input(g, w, input_hw=tuple(x.shape[2:]), **geometry) if needs[0] else None
    gw = conv2d_backward_weight(g, x, kernel_hw=tuple(w.shape[2:]), **geometry) if needs[1] else None
    return gx, gw


def _backward_input_vjp(u, g, w, *, out, needs, input_hw, **geometry):
    # <u, bi(g, w)> = <conv(u, w), g>: linear in g through conv, in w through bw.
    gg = conv2d(u, w, **geometry) if needs[0] else None
    gw = conv2d_backward_weight(g, u, kernel_hw=tuple(w.shape[2:]), **geometry) if needs[1] else None
    return gg, gw


def _backward_weight_vjp(v, g, x, *, out, needs, kernel_hw, **geometry):
    # <v, bw(g, x)> = <conv(x, v), g>: linear in g through conv, in x through bi.
    gg = conv2d(x, v, **geometry) if needs[0] else None
    gx = conv2d_backward_input(g, v, input_hw=tuple(x.shape[2:]), **geometry) if needs[1] else None
    return gg, gx


# FLOPs (profiler): each pass multiplies and adds once per (output element, Cg*kh*kw term).
def _forward_flops(shapes, out, **_):  # (x, w) -> (N, O, Ho, Wo)
    return 2 * math.prod(out) * math.prod(shapes[1][1:])


def _backward_input_flops(shapes, out, **_):  # (g, w) -> x's shape
    return 2 * math.prod(shapes[0]) * math.prod(shapes[1][1:])


def _backward_weight_flops(shapes, out, **_):  # (g, x) -> w's shape
    return 2 * math.prod(shapes[0]) * math.prod(out[1:])


CONV2D = defop("conv2d", kind="matmul", infer=_conv2d_infer, vjp=_conv2d_vjp, numpy=_conv2d_numpy,
               flops=_forward_flops, wgsl=Kernel("conv.wgsl", "conv2d_forward", "conv.conv2d"))
CONV2D_BACKWARD_INPUT = defop("conv2d_backward_input", infer=_backward_input_infer, vjp=_backward_input_vjp,
                              kind="matmul", numpy=_backward_input_numpy, flops=_backward_input_flops,
                              wgsl=Kernel("conv.wgsl", "conv2d_backward_input", "conv.conv2d"))
CONV2D_BACKWARD_WEIGHT = defop("conv2d_backward_weight", infer=_backward_weight_infer, vjp=_backward_weight_vjp,
                               kind="matmul", numpy=_backward_weight_numpy, flops=_backward_weight_flops,
                               wgsl=Kernel("conv.wgsl", "conv2d_backward_weight", "conv.conv2d"))


def conv2d(x, w, *, stride, padding, dilation, groups):
    return apply(CONV2D, x, w, stride=stride, padding=padding, dilation=dilation, groups=groups)


def conv2d_backward_input(g, w, *, input_hw, stride, padding, dilation, groups):
    return apply(CONV2D_BACKWARD_INPUT, g, w, input_hw=input_hw, stride=stride, padding=padding,
                 dilation=dilation, groups=groups)


def conv2d_backward_weight(g, x, *, kernel_hw, stride, padding, dilation, groups):
    return apply(CONV2D_BACKWARD_WEIGHT, g, x, kernel_hw=kernel_hw, stride=stride, padding=padding,
                 dilation=dilation, groups=groups)


def conv2d_core(x, w, stride=(1, 1), padding=(0, 0, 0, 0), dilation=(1, 1), groups=1):
    """2-D convolution without bias, as one kernel: x (N, C, H, W), w (O, C/groups, kh, kw).

    ``padding`` is (top, bottom, left, right) zeros; stride and dilation are pairs.
    ``F.conv2d`` / ``F.conv1d`` check their arguments and call this.

    Example:
        >>> webgrad.ops.conv2d_core(webgrad.ones(1, 1, 3, 3), webgrad.ones(1, 1, 2, 2)).shape
        webgrad.Size([1, 1, 2, 2])
    """
    stride, dilation = tuple(int(s) for s in stride), tuple(int(d) for d in dilation)
    padding = tuple(int(p) for p in padding)
    if x.ndim != 4 or w.ndim != 4 or len(stride) != 2 or len(dilation) != 2 or len(padding) != 4:
        raise OpError(f"conv2d: expected a 4-D input and weight, stride and dilation pairs and 4 paddings, got "
                      f"{describe(x, w)}, stride={stride}, padding={padding}, dilation={dilation}")
    if not x.dtype.is_floating_point or x.dtype is not w.dtype:
        raise OpError(f"conv2d: input and weight must have the same floating dtype, got {describe(x, w)}; "
                      f"convert with .to(webgrad.float32)")
    if groups <= 0 or x.shape[1] != w.shape[1] * groups or w.shape[0] % groups:
        raise OpError(f"conv2d: weight {tuple(w.shape)} with groups={groups} does not fit input {tuple(x.shape)}")
    if min(stride + dilation) <= 0 or min(padding) < 0:
        raise ValueError(f"conv2d: stride and dilation must be positive and padding non-negative, got "
                         f"stride={stride}, padding={padding}, dilation={dilation}")
    ho, wo = _geometry(x.shape[2:], w.shape[2:], stride, padding, dilation)
    if ho <= 0 or wo <= 0:
        raise OpError(f"conv2d: the padded input is smaller than the dilated kernel: input {describe(x)}, "
                      f"weight {describe(w)}, padding={padding}, dilation={dilation}")
    return conv2d(x, w, stride=stride, padding=padding, dilation=dilation, groups=int(groups))
