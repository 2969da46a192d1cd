"""Transposed convolution, 1-D to 3-D (re-exported by ``nn.functional``).

conv_transpose2d is the conv2d primitive's input gradient (ops/conv.py: one kernel, with its
own vjps), so forward and gradients run on every backend; 1-D is 2-D over a unit height, and
3-D folds the depth taps into the output channels of one 2-D transposed convolution.
"""
from __future__ import annotations

from .. import ops
from ..ops._helpers import describe
from ..ops.conv import conv2d_backward_input
from ..ops.registry import OpError, composite
from .functional_conv import _check_positive, _tuple

__all__ = ["conv_transpose1d", "conv_transpose2d", "conv_transpose3d"]


# -- transposed convolution ----------------------------------------------------------
def _check_transpose(op_name, input, weight, bias, groups, spatial):
    if input.ndim not in (spatial + 1, spatial + 2) or weight.ndim != spatial + 2:
        raise OpError(f"{op_name}: expected a {spatial + 2}-D weight and a {spatial + 1}-D (unbatched) or "
                      f"{spatial + 2}-D (batched) input, got input {describe(input)} and weight {describe(weight)}")
    if not isinstance(groups, int) or groups <= 0:
        raise ValueError(f"{op_name}: groups must be a positive int, got {groups!r}")
    channels = input.shape[-spatial - 1]
    if channels != weight.shape[0]:
        raise OpError(f"{op_name}: weight of shape {tuple(weight.shape)} expects {weight.shape[0]} input "
                      f"channels, but got input of shape {tuple(input.shape)} with {channels} channels")
    if weight.shape[0] % groups:
        raise OpError(f"{op_name}: in_channels {weight.shape[0]} (weight {tuple(weight.shape)}) must be "
                      f"divisible by groups={groups}")
    out_channels = weight.shape[1] * groups
    if bias is not None and tuple(bias.shape) != (out_channels,):
        raise OpError(f"{op_name}: bias of shape {tuple(bias.shape)} does not match out_channels {out_channels}")
    if not input.dtype.is_floating_point or input.dtype is not weight.dtype or (
            bias is not None and bias.dtype is not weight.dtype):
        shown = describe(input, weight) + (f" and bias {describe(bias)}" if bias is not None else "")
        raise OpError(f"{op_name}: input, weight and bias must have the same floating dtype, got {shown}")


def _transpose_args(op_name, stride, padding, output_padding, dilation, spatial):
    stride = _tuple(op_name, "stride", stride, spatial)
    dilation = _tuple(op_name, "dilation", dilation, spatial)
    padding = _tuple(op_name, "padding", padding, spatial)
    output_padding = _tuple(op_name, "output_padding", output_padding, spatial)
    _check_positive(op_name, stride=stride, dilation=dilation)
    if any(p < 0 for p in padding) or any(p < 0 for p in output_padding):
        raise ValueError(f"{op_name}: padding and output_padding must be non-negative, got padding={padding}, "
                         f"output_padding={output_padding}")
    for op, s, d in zip(output_padding, stride, dilation):
        if op >= s and op >= d:
            raise ValueError(f"{op_name}: output padding must be smaller than either stride or dilation, got "
                             f"output_padding={output_padding}, stride={stride}, dilation={dilation}")
    return stride, padding, output_padding, dilation


def _transpose_extent(size, kernel, stride, padding, output_padding, dilation):
    """(output size, the uncropped size from the first padded row, rows cut after, zero rows added)."""
    full = (size - 1) * stride + dilation * (kernel - 1) + 1 - padding
    out = full - padding + output_padding
    if out <= 0:
        raise OpError(f"conv_transpose: output size {out} is not positive (input size {size}, kernel {kernel}, "
                      f"stride {stride}, padding {padding}, dilation {dilation})")
    # The rows past `full` receive nothing: they are zeros added after.
    return out, min(out, full), max(0, full - out), max(0, out - full)


def _transpose2d(x, weight, stride, padding, output_padding, dilation, groups):
    """(N, C_in, H, W) by (C_in, C_out / groups, kh, kw): the input gradient of the matching conv2d."""
    sizes, cuts, extras = [], [], []
    for n, k, s, p, op, d in zip(x.shape[2:], weight.shape[2:], stride, padding, output_padding, dilation):
        _, size, cut, extra = _transpose_extent(n, k, s, p, op, d)
        sizes.append(size)
        cuts.append(cut)
        extras.append(extra)
    out = conv2d_backward_input(x, weight, input_hw=tuple(sizes), stride=tuple(stride),
                                padding=(padding[0], cuts[0], padding[1], cuts[1]), dilation=tuple(dilation),
                                groups=groups)
    if any(extras):
        out = ops.pad(out, (0, extras[1], 0, extras[0]))
    return out


def _transpose_nd(op_name, spatial, input, weight, bias, stride, padding, output_padding, groups, dilation):
    _check_transpose(op_name, input, weight, bias, groups, spatial)
    stride, padding, output_padding, dilation = _transpose_args(
        op_name, stride, padding, output_padding, dilation, spatial)
    unbatched = input.ndim == spatial + 1
    x = input.unsqueeze(0) if unbatched else input
    if spatial == 1:
        out = _transpose2d(x.unsqueeze(2), weight.unsqueeze(2), (1,) + stride, (0,) + padding,
                           (0,) + output_padding, (1,) + dilation, groups).squeeze(2)
    elif spatial == 2:
        out = _transpose2d(x, weight, stride, padding, output_padding, dilation, groups)
    else:
        out = _transpose3d(x, weight, stride, padding, output_padding, dilation, groups)
    if bias is not None:
        out = out + bias.reshape(1, -1, *([1] * spatial))
    return out.squeeze(0) if unbatched else out


def _transpose3d(x, weight, stride, padding, output_padding, dilation, groups):
    """Depth taps as extra output channels of one 2-D transposed convolution, then each tap's
    planes added at depths ``t * stride + tap * dilation`` (zeros between them)."""
    n, c_in, depth = x.shape[:3]
    cog, kd = weight.shape[1:3]
    (sd, sh, sw), (pd, ph, pw), (od, oph, opw), (dd, dh, dw) = stride, padding, output_padding, dilation
    planes = _transpose2d(x.permute(0, 2, 1, 3, 4).reshape(n * depth, c_in, *x.shape[3:]),
                          weight.reshape(c_in, cog * kd, *weight.shape[3:]), (sh, sw), (ph, pw), (oph, opw),
                          (dh, dw), groups)  # (N*D, C_out*kD, Ho, Wo), channel co*kD + tap
    planes = planes.reshape(n, depth, cog * groups, kd, *planes.shape[2:])
    span = (depth - 1) * sd + 1
    full = span + dd * (kd - 1)
    total = None
    for tap in range(kd):
        plane = planes[:, :, :, tap]  # (N, D, C_out, Ho, Wo)
        if sd > 1:  # zeros between the input depths
            plane = ops.pad(plane.unsqueeze(2), (0, 0, 0, 0, 0, 0, 0, sd - 1)).flatten(1, 2)[:, :span]
        plane = ops.pad(plane, (0, 0, 0, 0, 0, 0, tap * dd, full - span - tap * dd))
        total = plane if total is None else total + plane
    out_depth = _transpose_extent(depth, kd, sd, pd, od, dd)[0]
    total = ops.pad(total, (0, 0, 0, 0, 0, 0, -pd, out_depth - (full - pd)))
    return total.permute(0, 2, 1, 3, 4)


@composite("F.conv_transpose1d")
def conv_transpose1d(input, weight, bias=None, stride=1, padding=0, output_padding=0, groups=1, dilation=1):
    """1-D transposed convolution ("deconvolution") over (N, C_in, L) or (C_in, L).

    Args: weight (in_channels, out_channels / groups, k). The output length is
    (L - 1) * stride - 2 * padding + dilation * (k - 1) + output_padding + 1.

    Example:
        >>> F.conv_transpose1d(webgrad.randn(2, 3, 5), webgrad.randn(3, 4, 3), stride=2).shape
        webgrad.Size([2, 4, 11])
    """
    return _transpose_nd("conv_transpose1d", 1, input, weight, bias, stride, padding, output_padding, groups,
                         dilation)


@composite("F.conv_transpose2d")
def conv_transpose2d(input, weight, bias=None, stride=1, padding=0, output_padding=0, groups=1, dilation=1):
    """2-D transposed convolution over (N, C_in, H, W) or (C_in, H, W): the gradient of conv2d
    with respect to its input, as PyTorch defines it. weight is (in, out / groups, kH, kW).

    Example:
        >>> F.conv_transpose2d(webgrad.randn(1, 3, 4, 4), webgrad.randn(3, 2, 3, 3), stride=2, padding=1,
        ...                    output_padding=1).shape
        webgrad.Size([1, 2, 8, 8])
    """
    return _transpose_nd("conv_transpose2d", 2, input, weight, bias, stride, padding, output_padding, groups,
                         dilation)


@composite("F.conv_transpose3d")
def conv_transpose3d(input, weight, bias=None, stride=1, padding=0, output_padding=0, groups=1, dilation=1):
    """3-D transposed convolution over (N, C_in, D, H, W) or (C_in, D, H, W); weight (in, out / groups, kD, kH, kW).

    Example:
        >>> F.conv_transpose3d(webgrad.randn(1, 2, 3, 3, 3), webgrad.randn(2, 4, 2, 2, 2), stride=2).shape
        webgrad.Size([1, 4, 6, 6, 6])
    """
    return _transpose_nd("conv_transpose3d", 3, input, weight, bias, stride, padding, output_padding, groups,
                         dilation)
