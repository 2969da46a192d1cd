"""Convolution and pooling, composed of Tensor ops (re-exported by ``nn.functional``).

Convolution is the conv2d primitive (ops/conv.py: one kernel per pass on every
backend, forward and both backward); conv1d is conv2d over a unit height. Pooling
stacks one strided slice of the padded input per kernel offset and reduces them.
"""
from __future__ import annotations

import math

import numpy as np

from .. import creation, ops
from ..ops._helpers import describe
from ..ops.movement import slice_dims
from ..ops.registry import OpError, composite

__all__ = ["conv1d", "conv2d", "conv3d", "max_pool2d", "avg_pool2d", "adaptive_avg_pool2d"]


def _tuple(op_name, arg_name, value, n):
    """An int or a sequence of ``n`` ints, as a tuple of ``n`` ints."""
    if isinstance(value, (int, np.integer)) and not isinstance(value, bool):
        return (int(value),) * n
    try:
        value = tuple(int(v) for v in value)
    except TypeError:
        raise TypeError(f"{op_name}: {arg_name} must be an int or a tuple of {n} ints, got {value!r}") from None
    if len(value) == 1:  # PyTorch repeats a one-element tuple over the dims
        value = value * n
    if len(value) != n:
        raise ValueError(f"{op_name}: {arg_name} must be an int or a tuple of {n} ints, got {value!r}")
    return value


def _check_positive(op_name, **values):
    for name, value in values.items():
        if any(v <= 0 for v in value):
            raise ValueError(f"{op_name}: {name} must be positive, got {value}")


def _windows(x, kernel, stride, dilation, out_hw):
    """One strided slice of ``x`` (N, C, H, W) per kernel offset, each (N, C, Ho, Wo), row-major."""
    n, c = x.shape[:2]
    (kh, kw), (sh, sw), (dh, dw), (ho, wo) = kernel, stride, dilation, out_hw
    patches = []
    for i in range(kh):
        for j in range(kw):
            h0, w0 = i * dh, j * dw
            patches.append(slice_dims(x, [(0, n, 1), (0, c, 1), (h0, h0 + sh * (ho - 1) + 1, sh),
                                          (w0, w0 + sw * (wo - 1) + 1, sw)]))
    return patches


def _out_size(size, kernel, stride, dilation):
    return (size - dilation * (kernel - 1) - 1) // stride + 1


# -- convolution -----------------------------------------------------------------
def _conv(op_name, x, weight, bias, stride, pads, dilation, groups):
    """2-D convolution of (N, C, H, W) by (O, C/groups, kh, kw); pads = (left, right, top, bottom)."""
    left, right, top, bottom = pads
    hp, wp = x.shape[2] + top + bottom, x.shape[3] + left + right
    kh, kw = weight.shape[2:]
    if _out_size(hp, kh, stride[0], dilation[0]) <= 0 or _out_size(wp, kw, stride[1], dilation[1]) <= 0:
        raise OpError(f"{op_name}: the padded input ({hp}, {wp}) is smaller than the dilated kernel "
                      f"({dilation[0] * (kh - 1) + 1}, {dilation[1] * (kw - 1) + 1}) (weight {describe(weight)})")
    out = ops.conv2d_core(x, weight, stride, (top, bottom, left, right), dilation, groups)  # one kernel
    if bias is not None:
        out = out + bias.reshape(1, weight.shape[0], 1, 1)
    return out


def _check_conv(op_name, input, weight, bias, groups, spatial):
    if input.ndim not in (spatial + 1, spatial + 2) or weight.ndim != spatial + 2:
        raise OpError(f"{op_name}: expected a {spatial + 2}-D weight and a {spatial + 1}-D (unbatched) or "
                      f"{spatial + 2}-D (batched) input, got input {describe(input)} and weight {describe(weight)}")
    if not isinstance(groups, int) or groups <= 0:
        raise ValueError(f"{op_name}: groups must be a positive int, got {groups!r}")
    channels = input.shape[-spatial - 1]
    if channels != weight.shape[1] * groups:
        raise OpError(f"{op_name}: weight of shape {tuple(weight.shape)} with groups={groups} expects "
                      f"{weight.shape[1] * groups} input channels, but got input of shape "
                      f"{tuple(input.shape)} with {channels} channels")
    if weight.shape[0] % groups:
        raise OpError(f"{op_name}: out_channels {weight.shape[0]} (weight {tuple(weight.shape)}) must be "
                      f"divisible by groups={groups}")
    if bias is not None and tuple(bias.shape) != (weight.shape[0],):
        raise OpError(f"{op_name}: bias of shape {tuple(bias.shape)} does not match out_channels "
                      f"{weight.shape[0]} of weight {tuple(weight.shape)}")
    if not input.dtype.is_floating_point or input.dtype is not weight.dtype or (
            bias is not None and bias.dtype is not weight.dtype):
        shown = describe(input, weight) + (f" and bias {describe(bias)}" if bias is not None else "")
        raise OpError(f"{op_name}: input, weight and bias must have the same floating dtype, got {shown}")


def _conv_padding(op_name, padding, kernel, stride, dilation, spatial):
    """Per spatial dim (before, after) padding from an int, a tuple, 'valid' or 'same'."""
    if isinstance(padding, str):
        if padding == "valid":
            return [(0, 0)] * spatial
        if padding == "same":
            if any(s != 1 for s in stride):
                raise ValueError(f"{op_name}: padding='same' is not supported for strided convolutions "
                                 f"(stride={stride})")
            total = [d * (k - 1) for k, d in zip(kernel, dilation)]
            return [(t // 2, t - t // 2) for t in total]  # the odd one goes after, as in PyTorch
        raise ValueError(f"{op_name}: invalid padding string {padding!r}; expected 'valid' or 'same'")
    pads = _tuple(op_name, "padding", padding, spatial)
    if any(p < 0 for p in pads):
        raise ValueError(f"{op_name}: padding must be non-negative, got {padding}")
    return [(p, p) for p in pads]


def _conv_flops(shapes, out) -> int:
    """Each output element: (C_in / groups) x kernel multiply-adds."""
    return 2 * math.prod(out) * math.prod(shapes[1][1:])


@composite("F.conv2d", flops=_conv_flops)
def conv2d(input, weight, bias=None, stride=1, padding=0, dilation=1, groups=1):
    """2-D convolution (cross-correlation, as in PyTorch) over (N, C, H, W) or (C, H, W).

    Args: weight (out_channels, in_channels / groups, kH, kW); padding an int, a pair,
    'valid' or 'same'.

    Example:
        >>> F.conv2d(webgrad.randn(1, 3, 8, 8), webgrad.randn(4, 3, 3, 3), padding=1).shape
        webgrad.Size([1, 4, 8, 8])
    """
    _check_conv("conv2d", input, weight, bias, groups, 2)
    stride, dilation = _tuple("conv2d", "stride", stride, 2), _tuple("conv2d", "dilation", dilation, 2)
    _check_positive("conv2d", stride=stride, dilation=dilation)
    (top, bottom), (left, right) = _conv_padding("conv2d", padding, weight.shape[2:], stride, dilation, 2)
    unbatched = input.ndim == 3
    x = input.unsqueeze(0) if unbatched else input
    out = _conv("conv2d", x, weight, bias, stride, (left, right, top, bottom), dilation, groups)
    return out.squeeze(0) if unbatched else out


@composite("F.conv1d", flops=_conv_flops)
def conv1d(input, weight, bias=None, stride=1, padding=0, dilation=1, groups=1):
    """1-D convolution over (N, C, L) or (C, L) with weight (out_channels, in_channels / groups, k).

    Example:
        >>> F.conv1d(webgrad.randn(2, 3, 10), webgrad.randn(4, 3, 5)).shape
        webgrad.Size([2, 4, 6])
    """
    _check_conv("conv1d", input, weight, bias, groups, 1)
    stride, dilation = _tuple("conv1d", "stride", stride, 1), _tuple("conv1d", "dilation", dilation, 1)
    _check_positive("conv1d", stride=stride, dilation=dilation)
    ((left, right),) = _conv_padding("conv1d", padding, weight.shape[2:], stride, dilation, 1)
    unbatched = input.ndim == 2
    x = (input.unsqueeze(0) if unbatched else input).unsqueeze(2)  # (N, C, 1, L)
    out = _conv("conv1d", x, weight.unsqueeze(2), bias, (1,) + stride, (left, right, 0, 0), (1,) + dilation,
                groups).squeeze(2)
    return out.squeeze(0) if unbatched else out


@composite("F.conv3d", flops=_conv_flops)
def conv3d(input, weight, bias=None, stride=1, padding=0, dilation=1, groups=1):
    """3-D convolution over (N, C, D, H, W) or (C, D, H, W) with weight (out, in / groups, kD, kH, kW).

    The depth taps are folded into the channels of one 2-D convolution per output depth
    (a copy of the input per depth tap), so it runs on the conv2d kernel on every backend.

    Example:
        >>> F.conv3d(webgrad.randn(1, 2, 5, 6, 6), webgrad.randn(4, 2, 3, 3, 3), padding=1).shape
        webgrad.Size([1, 4, 5, 6, 6])
    """
    _check_conv("conv3d", input, weight, bias, groups, 3)
    stride, dilation = _tuple("conv3d", "stride", stride, 3), _tuple("conv3d", "dilation", dilation, 3)
    _check_positive("conv3d", stride=stride, dilation=dilation)
    (front, back), (top, bottom), (left, right) = _conv_padding(
        "conv3d", padding, weight.shape[2:], stride, dilation, 3)
    unbatched = input.ndim == 4
    x = input.unsqueeze(0) if unbatched else input
    n, c, depth = x.shape[:3]
    o, cg, kd, kh, kw = weight.shape
    (sd, sh, sw), (dd, dh, dw) = stride, dilation
    padded_depth = depth + front + back
    out_depth = _out_size(padded_depth, kd, sd, dd)
    if out_depth <= 0:
        raise OpError(f"conv3d: the padded input depth {padded_depth} is smaller than the dilated kernel depth "
                      f"{dd * (kd - 1) + 1} (input {describe(input)}, weight {describe(weight)})")
    if front or back:
        x = ops.pad(x, (0, 0, 0, 0, front, back))
    taps = [slice_dims(x, [(0, n, 1), (0, c, 1), (i * dd, i * dd + sd * (out_depth - 1) + 1, sd),
                           (0, x.shape[3], 1), (0, x.shape[4], 1)]) for i in range(kd)]
    # (N, C, kD, Do, H, W) -> (N*Do, C*kD, H, W): channel c*kD + i, which is weight's (C/groups, kD) order.
    stacked = ops.stack(taps, 2).permute(0, 3, 1, 2, 4, 5).reshape(n * out_depth, c * kd, *x.shape[3:])
    flat = _conv("conv3d", stacked, weight.reshape(o, cg * kd, kh, kw), None, (sh, sw),
                 (left, right, top, bottom), (dh, dw), groups)
    out = flat.reshape(n, out_depth, o, *flat.shape[2:]).permute(0, 2, 1, 3, 4)
    if bias is not None:
        out = out + bias.reshape(1, o, 1, 1, 1)
    return out.squeeze(0) if unbatched else out


def _mode_pad(x, pad, mode):
    """Pad the last dims by ``pad=(left, right, top, bottom, ...)`` with mode 'reflect', 'replicate' or
    'circular' (as Conv's ``padding_mode``): each dim is an index_select of the source rows."""
    for k in range(len(pad) // 2):
        dim, (lo, hi) = x.ndim - 1 - k, pad[2 * k:2 * k + 2]
        if not lo and not hi:
            continue
        n = x.shape[dim]
        positions = np.arange(-lo, n + hi)
        if mode == "reflect":
            if lo >= n or hi >= n:
                raise ValueError(f"padding_mode='reflect': padding ({lo}, {hi}) must be smaller than the input "
                                 f"size {n} of dim {dim}")
            period = 2 * (n - 1) if n > 1 else 1
            positions = np.abs(positions) % period
            positions = np.where(positions >= n, period - positions, positions)
        elif mode == "replicate":
            positions = np.clip(positions, 0, n - 1)
        elif mode == "circular":
            if lo > n or hi > n:
                raise ValueError(f"padding_mode='circular': padding ({lo}, {hi}) must be at most the input size "
                                 f"{n} of dim {dim}")
            positions = positions % n
        else:
            raise ValueError(f"padding_mode must be 'zeros', 'reflect', 'replicate' or 'circular', got {mode!r}")
        x = ops.index_select(x, dim, creation.tensor(positions, device=x.device))
    return x


# -- pooling ---------------------------------------------------------------------
def _pool_setup(op_name, input, kernel_size, stride, padding, dilation, ceil_mode):
    if input.ndim not in (3, 4):
        raise OpError(f"{op_name}: expected a 3-D (C, H, W) or 4-D (N, C, H, W) input, got {describe(input)}")
    kernel = _tuple(op_name, "kernel_size", kernel_size, 2)
    stride = kernel if stride is None or stride == () or stride == [] else _tuple(op_name, "stride", stride, 2)
    padding = _tuple(op_name, "padding", padding, 2)
    dilation = _tuple(op_name, "dilation", dilation, 2)
    _check_positive(op_name, kernel_size=kernel, stride=stride, dilation=dilation)
    for p, k, d in zip(padding, kernel, dilation):
        limit = (d * (k - 1) + 1) // 2 if op_name == "max_pool2d" else k // 2
        if p < 0 or p > limit:
            raise ValueError(f"{op_name}: pad should be at most half of effective kernel size, but got "
                             f"pad={padding}, kernel_size={kernel} and dilation={dilation}")
    sizes, extra = [], []
    for n, k, s, p, d in zip(input.shape[-2:], kernel, stride, padding, dilation):
        span = n + 2 * p - d * (k - 1) - 1
        out = (-(-span // s) if ceil_mode else span // s) + 1
        if ceil_mode and (out - 1) * s >= n + p:  # the last window must start inside the input or left pad
            out -= 1
        if out <= 0:
            raise OpError(f"{op_name}: input {describe(input)} is too small for kernel_size={kernel}, "
                          f"padding={padding}, dilation={dilation} (output size would be {out})")
        sizes.append(out)
        extra.append(max(0, (out - 1) * s + d * (k - 1) + 1 - (n + 2 * p)))
    return kernel, stride, padding, dilation, tuple(sizes), tuple(extra)


@composite("F.max_pool2d")
def max_pool2d(input, kernel_size, stride=None, padding=0, dilation=1, ceil_mode=False, return_indices=False):
    """Largest value in each (dilated) window; padding counts as -inf. stride defaults to kernel_size.

    The gradient goes to the first maximum of each window, as in PyTorch.

    Example:
        >>> F.max_pool2d(webgrad.arange(16.).reshape(1, 1, 4, 4), 2)
        tensor([[[[ 5.,  7.],
                  [13., 15.]]]])
    """
    kernel, stride, padding, dilation, out_hw, extra = _pool_setup(
        "max_pool2d", input, kernel_size, stride, padding, dilation, ceil_mode)
    unbatched = input.ndim == 3
    x = input.unsqueeze(0) if unbatched else input
    if not return_indices and x.dtype.is_floating_point:  # one kernel each way (ops/pooling.py)
        geometry = dict(kernel=kernel, stride=stride, padding=padding, dilation=dilation, out_hw=out_hw)
        values = ops.max_pool2d_select(x, x, **geometry)
        return values.squeeze(0) if unbatched else values
    (ph, pw), (eh, ew) = padding, extra
    if ph or pw or eh or ew:
        x = ops.pad(x, (pw, pw + ew, ph, ph + eh), value=float("-inf"))
    windows = ops.stack(_windows(x, kernel, stride, dilation, out_hw), -1)  # (N, C, Ho, Wo, kh*kw)
    values, k = windows.max(-1)  # first maximum, gradient to it alone
    if unbatched:
        values, k = values.squeeze(0), k.squeeze(0)
    if not return_indices:
        return values
    # Flat index into the unpadded H * W plane, like PyTorch's indices.
    rows = creation.arange(out_hw[0], device=input.device).reshape(-1, 1) * stride[0] - ph
    cols = creation.arange(out_hw[1], device=input.device) * stride[1] - pw
    rows = rows + (k // kernel[1]) * dilation[0]
    cols = cols + (k % kernel[1]) * dilation[1]
    return values, rows * input.shape[-1] + cols


def _pool_counts(size, out, kernel, stride, padding, count_include_pad):
    """How many elements PyTorch divides by along one dim, per output position."""
    counts = np.empty(out)
    for o in range(out):
        start = o * stride - padding
        end = min(start + kernel, size + padding)
        if not count_include_pad:
            start, end = max(start, 0), min(end, size)
        counts[o] = end - start
    return counts


@composite("F.avg_pool2d")
def avg_pool2d(input, kernel_size, stride=None, padding=0, ceil_mode=False, count_include_pad=True,
               divisor_override=None):
    """Mean of each window; zero padding counts toward the mean unless count_include_pad=False.

    Example:
        >>> F.avg_pool2d(webgrad.ones(1, 1, 4, 4), 2).shape
        webgrad.Size([1, 1, 2, 2])
    """
    kernel, stride, padding, dilation, out_hw, extra = _pool_setup(
        "avg_pool2d", input, kernel_size, stride, padding, 1, ceil_mode)
    unbatched = input.ndim == 3
    x = input.unsqueeze(0) if unbatched else input
    (ph, pw), (eh, ew) = padding, extra
    if divisor_override == 0:
        raise ValueError("avg_pool2d: divisor_override must be non-zero")
    if divisor_override is not None:
        divisors = np.full(out_hw, float(divisor_override))
    else:
        rows = _pool_counts(input.shape[-2], out_hw[0], kernel[0], stride[0], ph, count_include_pad)
        cols = _pool_counts(input.shape[-1], out_hw[1], kernel[1], stride[1], pw, count_include_pad)
        divisors = np.outer(rows, cols)
    uniform = bool((divisors == divisors.flat[0]).all())
    as_conv = x.dtype.is_floating_point and x.numel() > 0
    if as_conv:
        # Window sums as one depthwise convolution. One divisor for every window (no padding
        # counted apart) goes into its taps, with no division after.
        taps = creation.full((x.shape[1], 1, *kernel), 1 / divisors.flat[0] if uniform else 1.0, dtype=x.dtype,
                             device=x.device)
        out = ops.conv2d_core(x, taps, stride, (ph, ph + eh, pw, pw + ew), (1, 1), groups=x.shape[1])
    else:
        if ph or pw or eh or ew:
            x = ops.pad(x, (pw, pw + ew, ph, ph + eh))
        out = ops.stack(_windows(x, kernel, stride, dilation, out_hw), -1).sum(-1)
    if not (as_conv and uniform):
        out = out / creation.tensor(divisors, dtype=input.dtype, device=input.device)
    return out.squeeze(0) if unbatched else out


def _adaptive_matrix(size, out, dtype, device):
    """(out, size) averaging matrix: row i averages input[floor(i*size/out) : ceil((i+1)*size/out)]."""
    matrix = np.zeros((out, size))
    for i in range(out):
        start, end = (i * size) // out, -(-((i + 1) * size) // out)
        matrix[i, start:end] = 1.0 / (end - start)
    return creation.tensor(matrix, dtype=dtype, device=device)


def adaptive_avg_pool2d(input, output_size):
    """Average-pool (N, C, H, W) or (C, H, W) to ``output_size`` with PyTorch's window rule.

    Example:
        >>> F.adaptive_avg_pool2d(webgrad.randn(2, 3, 7, 5), 1).shape
        webgrad.Size([2, 3, 1, 1])
    """
    if input.ndim not in (3, 4):
        raise OpError(f"adaptive_avg_pool2d: expected a 3-D or 4-D input, got {describe(input)}")
    if isinstance(output_size, int):
        output_size = (output_size, output_size)
    oh, ow = (n if o is None else o for o, n in zip(output_size, input.shape[-2:]))
    if oh <= 0 or ow <= 0:
        raise ValueError(f"adaptive_avg_pool2d: output_size must be positive, got {output_size}")
    h, w = input.shape[-2:]
    if h % oh == 0 and w % ow == 0 and (oh, ow) != (h, w):
        # Equal windows that tile the input: one mean over a reshaped view (one reduction;
        # many tiny batched matmuls are slow on WebGPU).
        lead = tuple(input.shape[:-2])
        return input.reshape(*lead, oh, h // oh, ow, w // ow).mean((-3, -1))
    out = input
    if oh != h:
        out = ops.matmul(_adaptive_matrix(h, oh, input.dtype, input.device), out)
    if ow != w:
        out = ops.matmul(out, _adaptive_matrix(w, ow, input.dtype, input.device).mT)
    return out if out is not input else input * 1.0

