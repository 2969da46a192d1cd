"""1-D and 3-D pooling, adaptive max pooling, power-average and max-unpooling (re-exported by ``nn.functional``).

All composed of Tensor ops, so they run on every backend with gradients:

- 1-D pools are the 2-D ones over a unit height (their fast kernels).
- 3-D pools stack one strided slice of the padded input per kernel offset and
  reduce them, like the generic 2-D path in functional_conv.py.
- Adaptive pools gather each output's window through a table of input positions
  built in numpy (windows differ in size: a short one repeats its last position,
  which changes neither the max nor which position is the first maximum).
"""
from __future__ import annotations

import itertools
import math

import numpy as np

from .. import creation, ops
from ..ops._helpers import describe
from ..ops.registry import OpError, composite
from ..ops.movement import slice_dims
from .functional_conv import (
    _adaptive_matrix, _check_positive, _pool_counts, _tuple, adaptive_avg_pool2d, avg_pool2d, max_pool2d,
)
from ..ops.autocasting import autocast_op

__all__ = ["max_pool1d", "max_pool3d", "avg_pool1d", "avg_pool3d", "adaptive_avg_pool1d", "adaptive_avg_pool3d",
           "adaptive_max_pool1d", "adaptive_max_pool2d", "adaptive_max_pool3d", "lp_pool1d", "lp_pool2d",
           "lp_pool3d", "max_unpool1d", "max_unpool2d", "max_unpool3d"]


def _check_ndim(op_name, input, spatial):
    if input.ndim not in (spatial + 1, spatial + 2):
        raise OpError(f"{op_name}: expected a {spatial + 1}-D (unbatched) or {spatial + 2}-D (batched) input, "
                      f"got {describe(input)}")


def _stride(op_name, stride, kernel, n):
    return kernel if stride is None or stride == () or stride == [] else _tuple(op_name, "stride", stride, n)


# -- 1-D: the 2-D pools over a unit height -------------------------------------------
@composite("F.max_pool1d")
def max_pool1d(input, kernel_size, stride=None, padding=0, dilation=1, ceil_mode=False, return_indices=False):
    """Largest value in each window of (N, C, L) or (C, L); stride defaults to kernel_size.

    Example:
        >>> F.max_pool1d(webgrad.tensor([[[1., 3., 2., 5.]]]), 2)
        tensor([[[3., 5.]]])
    """
    _check_ndim("max_pool1d", input, 1)
    kernel = _tuple("max_pool1d", "kernel_size", kernel_size, 1)
    stride = _stride("max_pool1d", stride, kernel, 1)
    padding, dilation = _tuple("max_pool1d", "padding", padding, 1), _tuple("max_pool1d", "dilation", dilation, 1)
    out = max_pool2d(input.unsqueeze(-2), (1,) + kernel, (1,) + stride, (0,) + padding, (1,) + dilation,
                     ceil_mode=ceil_mode, return_indices=return_indices)
    if return_indices:
        return out[0].squeeze(-2), out[1].squeeze(-2)
    return out.squeeze(-2)


@composite("F.avg_pool1d")
def avg_pool1d(input, kernel_size, stride=None, padding=0, ceil_mode=False, count_include_pad=True):
    """Mean of each window of (N, C, L) or (C, L).

    Example:
        >>> F.avg_pool1d(webgrad.tensor([[[1., 3., 2., 6.]]]), 2)
        tensor([[[2., 4.]]])
    """
    _check_ndim("avg_pool1d", input, 1)
    kernel = _tuple("avg_pool1d", "kernel_size", kernel_size, 1)
    stride = _stride("avg_pool1d", stride, kernel, 1)
    padding = _tuple("avg_pool1d", "padding", padding, 1)
    return avg_pool2d(input.unsqueeze(-2), (1,) + kernel, (1,) + stride, (0,) + padding, ceil_mode,
                      count_include_pad).squeeze(-2)


# -- 3-D: one strided slice per kernel offset ------------------------------------------
def _pool_geometry(op_name, input, kernel, stride, padding, dilation, ceil_mode):
    """Output sizes and the extra zeros after each dim that ceil_mode's last window reads."""
    sizes, extra = [], []
    for n, k, s, p, d in zip(input.shape[-len(kernel):], kernel, stride, padding, dilation):
        if p < 0 or p > (d * (k - 1) + 1) // 2:
            raise ValueError(f"{op_name}: pad should be at most half of effective kernel size, but got "
                             f"pad={padding}, kernel_size={kernel} and dilation={dilation}")
        span = n + 2 * p - d * (k - 1) - 1
        out = (-(-span // s) if ceil_mode else span // s) + 1
        if ceil_mode and (out - 1) * s >= n + p:  # the last window must start inside the input or left pad
            out -= 1
        if out <= 0:
            raise OpError(f"{op_name}: input {describe(input)} is too small for kernel_size={kernel}, "
                          f"padding={padding}, dilation={dilation} (output size would be {out})")
        sizes.append(out)
        extra.append(max(0, (out - 1) * s + d * (k - 1) + 1 - (n + 2 * p)))
    return tuple(sizes), tuple(extra)


def _window_stack(x, kernel, stride, dilation, out_sizes):
    """(N, C, *out, prod(kernel)): every kernel offset's strided slice of padded x, row-major offsets."""
    lead = [(0, n, 1) for n in x.shape[:-len(kernel)]]
    slices = []
    for offset in itertools.product(*(range(k) for k in kernel)):
        dims = [(o * d, o * d + s * (n - 1) + 1, s) for o, d, s, n in zip(offset, dilation, stride, out_sizes)]
        slices.append(slice_dims(x, lead + dims))
    return ops.stack(slices, -1)


def _pad_spatial(x, padding, extra, value):
    pads = []
    for p, e in zip(reversed(padding), reversed(extra)):
        pads += [p, p + e]
    return ops.pad(x, tuple(pads), value=value) if any(pads) else x


@composite("F.max_pool3d")
def max_pool3d(input, kernel_size, stride=None, padding=0, dilation=1, ceil_mode=False, return_indices=False):
    """Largest value in each window of (N, C, D, H, W) or (C, D, H, W); padding counts as -inf.

    The gradient goes to the first maximum of each window; indices are flat into D * H * W.

    Example:
        >>> F.max_pool3d(webgrad.arange(8.).reshape(1, 1, 2, 2, 2), 2)
        tensor([[[[[7.]]]]])
    """
    _check_ndim("max_pool3d", input, 3)
    kernel = _tuple("max_pool3d", "kernel_size", kernel_size, 3)
    stride = _stride("max_pool3d", stride, kernel, 3)
    padding, dilation = _tuple("max_pool3d", "padding", padding, 3), _tuple("max_pool3d", "dilation", dilation, 3)
    _check_positive("max_pool3d", kernel_size=kernel, stride=stride, dilation=dilation)
    out_sizes, extra = _pool_geometry("max_pool3d", input, kernel, stride, padding, dilation, ceil_mode)
    x = _pad_spatial(input, padding, extra, float("-inf"))
    values, k = _window_stack(x, kernel, stride, dilation, out_sizes).max(-1)
    if not return_indices:
        return values
    # Flat index into the unpadded D * H * W volume, like PyTorch's indices.
    index = None
    place = 1
    for axis in range(2, -1, -1):
        along = k % kernel[axis]
        k = k // kernel[axis]
        shape = [1] * 3
        shape[axis] = out_sizes[axis]
        start = creation.arange(out_sizes[axis], device=input.device).reshape(*shape) * stride[axis] - padding[axis]
        position = (start + along * dilation[axis]) * place
        index = position if index is None else index + position
        place *= input.shape[input.ndim - 3 + axis]
    return values, index


@composite("F.avg_pool3d")
def avg_pool3d(input, kernel_size, stride=None, padding=0, ceil_mode=False, count_include_pad=True,
               divisor_override=None):
    """Mean of each window of (N, C, D, H, W) or (C, D, H, W); zero padding counts unless count_include_pad=False.

    Example:
        >>> F.avg_pool3d(webgrad.ones(1, 1, 4, 4, 4), 2).shape
        webgrad.Size([1, 1, 2, 2, 2])
    """
    _check_ndim("avg_pool3d", input, 3)
    kernel = _tuple("avg_pool3d", "kernel_size", kernel_size, 3)
    stride = _stride("avg_pool3d", stride, kernel, 3)
    padding = _tuple("avg_pool3d", "padding", padding, 3)
    _check_positive("avg_pool3d", kernel_size=kernel, stride=stride)
    for p, k in zip(padding, kernel):
        if p < 0 or p > k // 2:
            raise ValueError(f"avg_pool3d: pad should be at most half of kernel size, but got pad={padding} "
                             f"and kernel_size={kernel}")
    out_sizes, extra = _pool_geometry("avg_pool3d", input, kernel, stride, padding, (1, 1, 1), ceil_mode)
    x = _pad_spatial(input, padding, extra, 0.0)
    total = _window_stack(x, kernel, stride, (1, 1, 1), out_sizes).sum(-1)
    if divisor_override is not None:
        if divisor_override == 0:
            raise ValueError("avg_pool3d: divisor_override must be non-zero")
        return total / divisor_override
    counts = [_pool_counts(n, o, k, s, p, count_include_pad)
              for n, o, k, s, p in zip(input.shape[-3:], out_sizes, kernel, stride, padding)]
    divisor = np.einsum("i,j,k->ijk", *counts)
    return total / creation.tensor(divisor, dtype=input.dtype, device=input.device)


# -- adaptive pools ---------------------------------------------------------------------
def _adaptive_sizes(op_name, input, output_size, spatial):
    _check_ndim(op_name, input, spatial)
    if isinstance(output_size, (int, np.integer)) or output_size is None:
        output_size = (output_size,) * spatial
    output_size = tuple(output_size)
    if len(output_size) != spatial:
        raise ValueError(f"{op_name}: output_size must be an int or a tuple of {spatial}, got {output_size}")
    sizes = tuple(int(n if o is None else o) for o, n in zip(output_size, input.shape[-spatial:]))
    if any(s < 0 for s in sizes):
        raise ValueError(f"{op_name}: output_size must be non-negative, got {output_size}")
    return sizes


def _adaptive_windows(size, out):
    """(out, longest) input positions of each window [floor(i*n/o), ceil((i+1)*n/o)), the last repeated."""
    starts = [(i * size) // out for i in range(out)]
    ends = [-(-((i + 1) * size) // out) for i in range(out)]
    longest = max((e - s for s, e in zip(starts, ends)), default=1)
    table = np.empty((out, longest), np.int64)
    for i, (s, e) in enumerate(zip(starts, ends)):
        table[i] = np.minimum(np.arange(s, s + longest), e - 1)
    return table


def _adaptive_max(op_name, input, output_size, return_indices, spatial):
    sizes = _adaptive_sizes(op_name, input, output_size, spatial)
    in_sizes = tuple(input.shape[-spatial:])
    if any(n == 0 for n in in_sizes):
        raise OpError(f"{op_name}: input {describe(input)} has an empty spatial dim")
    tables = [_adaptive_windows(n, o) for n, o in zip(in_sizes, sizes)]
    # Flat position of each (output position, window offset): outputs first, then offsets, row-major.
    flat = np.zeros([o for o in sizes] + [t.shape[1] for t in tables], np.int64)
    for axis, table in enumerate(tables):
        shape = [1] * (2 * spatial)
        shape[axis], shape[spatial + axis] = table.shape
        flat = flat * in_sizes[axis] + table.reshape(shape)
    flat = flat.reshape(*sizes, -1)
    lead = tuple(input.shape[:-spatial])
    index = creation.tensor(flat.reshape(-1), device=input.device)
    picked = ops.index_select(input.reshape(*lead, -1), len(lead), index).reshape(*lead, *flat.shape)
    values, k = picked.max(-1)
    if not return_indices:
        return values
    positions = creation.tensor(flat, device=input.device).expand(*lead, *flat.shape)
    return values, ops.gather(positions, -1, k.unsqueeze(-1)).squeeze(-1)


@composite("F.adaptive_max_pool1d")
def adaptive_max_pool1d(input, output_size, return_indices=False):
    """Max-pool (N, C, L) or (C, L) to ``output_size`` with PyTorch's window rule.

    Example:
        >>> F.adaptive_max_pool1d(webgrad.tensor([[[1., 4., 2., 3., 5.]]]), 2)
        tensor([[[4., 5.]]])
    """
    return _adaptive_max("adaptive_max_pool1d", input, output_size, return_indices, 1)


@composite("F.adaptive_max_pool2d")
def adaptive_max_pool2d(input, output_size, return_indices=False):
    """Max-pool (N, C, H, W) or (C, H, W) to ``output_size``; indices are flat into H * W.

    Example:
        >>> F.adaptive_max_pool2d(webgrad.randn(2, 3, 7, 5), (2, 3)).shape
        webgrad.Size([2, 3, 2, 3])
    """
    return _adaptive_max("adaptive_max_pool2d", input, output_size, return_indices, 2)


@composite("F.adaptive_max_pool3d")
def adaptive_max_pool3d(input, output_size, return_indices=False):
    """Max-pool (N, C, D, H, W) or (C, D, H, W) to ``output_size``; indices are flat into D * H * W.

    Example:
        >>> F.adaptive_max_pool3d(webgrad.randn(1, 2, 5, 4, 3), 2).shape
        webgrad.Size([1, 2, 2, 2, 2])
    """
    return _adaptive_max("adaptive_max_pool3d", input, output_size, return_indices, 3)


def adaptive_avg_pool1d(input, output_size):
    """Average-pool (N, C, L) or (C, L) to ``output_size``.

    Example:
        >>> F.adaptive_avg_pool1d(webgrad.tensor([[[1., 3., 5., 7.]]]), 2)
        tensor([[[2., 6.]]])
    """
    (size,) = _adaptive_sizes("adaptive_avg_pool1d", input, output_size, 1)
    return adaptive_avg_pool2d(input.unsqueeze(-2), (1, size)).squeeze(-2)


@autocast_op("adaptive_avg_pool3d")
def adaptive_avg_pool3d(input, output_size):
    """Average-pool (N, C, D, H, W) or (C, D, H, W) to ``output_size``: one averaging matrix per dim.

    Example:
        >>> F.adaptive_avg_pool3d(webgrad.randn(1, 2, 5, 4, 3), 1).shape
        webgrad.Size([1, 2, 1, 1, 1])
    """
    sizes = _adaptive_sizes("adaptive_avg_pool3d", input, output_size, 3)
    out = adaptive_avg_pool2d(input.flatten(0, -3), sizes[1:])
    out = out.reshape(*input.shape[:-2], *out.shape[-2:])
    depth = input.shape[-3]
    if sizes[0] != depth:
        matrix = _adaptive_matrix(depth, sizes[0], input.dtype, input.device)
        lead = tuple(out.shape[:-3])
        flat = out.reshape(*lead, depth, math.prod(out.shape[-2:]))
        out = ops.matmul(matrix, flat).reshape(*lead, sizes[0], *out.shape[-2:])
    return out


# -- power-average pools -------------------------------------------------------------------
def _lp_finish(out, norm_type, window):
    return (out.sign() * out.abs().relu()).mul(window).pow(1.0 / norm_type)


@composite("F.lp_pool1d")
def lp_pool1d(input, norm_type, kernel_size, stride=None, ceil_mode=False):
    """(sum of x ** p over each window) ** (1 / p), as PyTorch computes it (through avg_pool1d).

    Example:
        >>> F.lp_pool1d(webgrad.tensor([[[3., 4.]]]), 2, 2)
        tensor([[[5.]]])
    """
    (k,) = _tuple("lp_pool1d", "kernel_size", kernel_size, 1)
    out = avg_pool1d(input.pow(norm_type), k, stride, 0, ceil_mode)
    return _lp_finish(out, norm_type, k)


@composite("F.lp_pool2d")
def lp_pool2d(input, norm_type, kernel_size, stride=None, ceil_mode=False):
    """(sum of x ** p over each window) ** (1 / p) over (N, C, H, W) or (C, H, W).

    Example:
        >>> F.lp_pool2d(webgrad.ones(1, 1, 4, 4), 1, 2)
        tensor([[[[4., 4.],
                  [4., 4.]]]])
    """
    kernel = _tuple("lp_pool2d", "kernel_size", kernel_size, 2)
    out = avg_pool2d(input.pow(norm_type), kernel, stride, 0, ceil_mode)
    return _lp_finish(out, norm_type, math.prod(kernel))


@composite("F.lp_pool3d")
def lp_pool3d(input, norm_type, kernel_size, stride=None, ceil_mode=False):
    """(sum of x ** p over each window) ** (1 / p) over (N, C, D, H, W) or (C, D, H, W).

    Example:
        >>> F.lp_pool3d(webgrad.ones(1, 1, 2, 2, 2), 1, 2).shape
        webgrad.Size([1, 1, 1, 1, 1])
    """
    kernel = _tuple("lp_pool3d", "kernel_size", kernel_size, 3)
    out = avg_pool3d(input.pow(norm_type), kernel, stride, 0, ceil_mode)
    return _lp_finish(out, norm_type, math.prod(kernel))


# -- max unpooling ------------------------------------------------------------------------------
def _max_unpool(op_name, spatial, input, indices, kernel_size, stride, padding, output_size):
    _check_ndim(op_name, input, spatial)
    if tuple(indices.shape) != tuple(input.shape) or indices.dtype.is_floating_point:
        raise OpError(f"{op_name}: indices {describe(indices)} must be integers of the input's shape "
                      f"{tuple(input.shape)}")
    kernel = _tuple(op_name, "kernel_size", kernel_size, spatial)
    stride = _stride(op_name, stride, kernel, spatial)
    padding = _tuple(op_name, "padding", padding, spatial)
    in_sizes = tuple(input.shape[-spatial:])
    default = tuple((n - 1) * s - 2 * p + k for n, k, s, p in zip(in_sizes, kernel, stride, padding))
    if output_size is None:
        sizes = default
    else:
        sizes = tuple(int(v) for v in output_size)[-spatial:]
        if len(sizes) != spatial:
            raise ValueError(f"{op_name}: output_size must have {spatial} elements, got {output_size}")
        for size, low, s in zip(sizes, default, stride):
            if not low - s < size < low + s:
                raise ValueError(f"{op_name}: invalid output_size {tuple(output_size)} (expected sizes between "
                                 f"{tuple(d - s for d, s in zip(default, stride))} and "
                                 f"{tuple(d + s for d, s in zip(default, stride))}, exclusive)")
    lead = tuple(input.shape[:-spatial])
    zeros = creation.zeros(*lead, math.prod(sizes), dtype=input.dtype, device=input.device)
    # Overlapping windows can pick one position twice (with one value): a write, not a sum.
    flat = zeros.scatter(-1, indices.reshape(*lead, -1), input.reshape(*lead, -1))
    return flat.reshape(*lead, *sizes)


@composite("F.max_unpool1d")
def max_unpool1d(input, indices, kernel_size, stride=None, padding=0, output_size=None):
    """Inverse of max_pool1d: each value back at its index, zeros elsewhere.

    Example:
        >>> x = webgrad.tensor([[[1., 4., 2., 3.]]])
        >>> F.max_unpool1d(*F.max_pool1d(x, 2, return_indices=True), 2)
        tensor([[[0., 4., 0., 3.]]])
    """
    return _max_unpool("max_unpool1d", 1, input, indices, kernel_size, stride, padding, output_size)


@composite("F.max_unpool2d")
def max_unpool2d(input, indices, kernel_size, stride=None, padding=0, output_size=None):
    """Inverse of max_pool2d: each value back at its flat H * W index, zeros elsewhere.

    Example:
        >>> values, indices = F.max_pool2d(webgrad.randn(1, 1, 4, 4), 2, return_indices=True)
        >>> F.max_unpool2d(values, indices, 2).shape
        webgrad.Size([1, 1, 4, 4])
    """
    return _max_unpool("max_unpool2d", 2, input, indices, kernel_size, stride, padding, output_size)


@composite("F.max_unpool3d")
def max_unpool3d(input, indices, kernel_size, stride=None, padding=0, output_size=None):
    """Inverse of max_pool3d: each value back at its flat D * H * W index, zeros elsewhere.

    Example:
        >>> values, indices = F.max_pool3d(webgrad.randn(1, 1, 2, 4, 4), 2, return_indices=True)
        >>> F.max_unpool3d(values, indices, 2).shape
        webgrad.Size([1, 1, 2, 4, 4])
    """
    return _max_unpool("max_unpool3d", 3, input, indices, kernel_size, stride, padding, output_size)
