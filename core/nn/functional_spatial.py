"""Resampling and rearranging images (re-exported by ``nn.functional``): interpolate,
pixel_shuffle, unfold/fold, channel_shuffle, affine_grid and grid_sample.

All composed of Tensor ops, so every backend runs them and gradients come for free:

- interpolate is separable: each spatial dim is resampled by an (out, in) matrix
  (linear, cubic) or an index_select (nearest), built in numpy from PyTorch's
  source-index formulas.
- unfold is a depthwise convolution by one-hot kernels (one conv kernel, exact),
  and fold is its transpose (the convolution's input gradient).
- grid_sample gathers the corners around each sampling point and weighs them.
"""
from __future__ import annotations

import math

import numpy as np

from .. import creation, dtypes, ops
from ..ops._helpers import describe
from ..ops.conv import conv2d_backward_input
from ..ops.registry import OpError, composite
from .functional_conv import _tuple, adaptive_avg_pool2d
from .functional_pool import adaptive_avg_pool1d, adaptive_avg_pool3d

__all__ = ["interpolate", "upsample", "upsample_nearest", "upsample_bilinear", "pixel_shuffle", "pixel_unshuffle",
           "channel_shuffle", "native_channel_shuffle", "unfold", "fold", "affine_grid", "grid_sample"]

_LINEAR_MODES = {"linear": 1, "bilinear": 2, "bicubic": 2, "trilinear": 3}
_MODES = ("nearest", "nearest-exact", "linear", "bilinear", "bicubic", "trilinear", "area")


# -- interpolate ---------------------------------------------------------------------
def _output_sizes(input, size, scale_factor, spatial):
    if size is not None and scale_factor is not None:
        raise ValueError("interpolate: only one of size or scale_factor should be defined")
    if size is not None:
        if isinstance(size, (list, tuple)):
            if len(size) != spatial:
                raise ValueError(f"interpolate: input and output must have the same number of spatial dimensions, "
                                 f"but got input with spatial dimensions of {list(input.shape[2:])} and output "
                                 f"size of {list(size)}. Please provide input tensor in (N, C, d1, d2, ...,dK) "
                                 f"format and output size in (o1, o2, ...,oK) format.")
            sizes = tuple(int(s) for s in size)
        else:
            sizes = (int(size),) * spatial
        return sizes, None
    if scale_factor is None:
        raise ValueError("interpolate: either size or scale_factor should be defined")
    if isinstance(scale_factor, (list, tuple)):
        if len(scale_factor) != spatial:
            raise ValueError(f"interpolate: input and scale_factor must have the same number of spatial "
                             f"dimensions, but got input with spatial dimensions of {list(input.shape[2:])} and "
                             f"scale_factor of shape {list(scale_factor)}. Please provide input tensor in "
                             f"(N, C, d1, d2, ...,dK) format and scale_factor in (s1, s2, ...,sK) format.")
        scales = tuple(float(s) for s in scale_factor)
    else:
        scales = (float(scale_factor),) * spatial
    sizes = tuple(math.floor(float(n) * s) for n, s in zip(input.shape[2:], scales))
    return sizes, scales


def _scale(in_size, out_size, scale, align_corners):
    """PyTorch's area_pixel_compute_scale: source step per output step."""
    if align_corners:
        return (in_size - 1) / (out_size - 1) if out_size > 1 else 0.0
    return 1.0 / scale if scale is not None and scale > 0 else in_size / out_size


def _nearest_index(in_size, out_size, scale, exact):
    """Source index of each output, computed in float32 as PyTorch's kernels do."""
    if not exact and out_size == in_size:
        return np.arange(out_size)
    if not exact and out_size == 2 * in_size:
        return np.arange(out_size) >> 1
    step = np.float32(1.0 / scale) if scale is not None and scale > 0 else np.float32(in_size) / np.float32(out_size)
    positions = np.arange(out_size, dtype=np.float32) + (np.float32(0.5) if exact else np.float32(0))
    return np.minimum(np.floor(positions * step).astype(np.int64), in_size - 1)


def _cubic_weights(t, a=-0.75):
    """The four cubic-convolution weights for taps at offsets -1, 0, 1, 2 from floor(x), t = x - floor(x)."""
    def near(x):  # |x| <= 1
        return ((a + 2) * x - (a + 3)) * x * x + 1

    def far(x):  # 1 < |x| < 2
        return ((a * x - 5 * a) * x + 8 * a) * x - 4 * a

    return [far(t + 1), near(t), near(1 - t), far(2 - t)]


def _linear_matrix(in_size, out_size, scale, align_corners, cubic):
    """(out, in) resampling matrix for one dim (linear or cubic), from PyTorch's source-index rule."""
    step = _scale(in_size, out_size, scale, align_corners)
    dst = np.arange(out_size, dtype=np.float64)
    src = dst * step if align_corners else (dst + 0.5) * step - 0.5
    matrix = np.zeros((out_size, in_size))
    rows = np.arange(out_size)
    if cubic:
        base = np.floor(src)
        t = src - base
        for offset, weight in zip(range(-1, 3), _cubic_weights(t)):
            np.add.at(matrix, (rows, np.clip(base.astype(np.int64) + offset, 0, in_size - 1)), weight)
        return matrix
    src = np.maximum(src, 0.0)
    low = np.minimum(src.astype(np.int64), in_size - 1)
    high = np.minimum(low + 1, in_size - 1)
    frac = np.clip(src - low, 0.0, 1.0)
    np.add.at(matrix, (rows, low), 1.0 - frac)
    np.add.at(matrix, (rows, high), frac)
    return matrix


def _antialias_matrix(in_size, out_size, scale, align_corners, cubic):
    """(out, in) matrix of PyTorch's antialiased resampling (a widened filter when downsampling)."""
    step = _scale(in_size, out_size, scale, align_corners)
    support = (2.0 if cubic else 1.0) * (step if step >= 1.0 else 1.0)
    inverse = 1.0 / step if step >= 1.0 else 1.0
    matrix = np.zeros((out_size, in_size))
    for i in range(out_size):
        center = step * (i + 0.5)
        low = max(int(center - support + 0.5), 0)
        high = min(int(center + support + 0.5), in_size)
        x = (np.arange(low, high) - center + 0.5) * inverse
        if cubic:
            a, ax = -0.5, np.abs(x)
            weights = np.where(ax < 1, ((a + 2) * ax - (a + 3)) * ax * ax + 1,
                               np.where(ax < 2, ((a * ax - 5 * a) * ax + 8 * a) * ax - 4 * a, 0.0))
        else:
            weights = np.maximum(0.0, 1.0 - np.abs(x))
        total = weights.sum()
        matrix[i, low:high] = weights / total if total != 0 else weights
    return matrix


def _resample(x, dim, matrix):
    """Apply an (out, in) matrix along ``dim`` of x."""
    m = creation.tensor(matrix, dtype=x.dtype, device=x.device)
    if dim == x.ndim - 1:
        return ops.matmul(x, m.mT)
    moved = x.movedim(dim, -1)
    return ops.matmul(moved, m.mT).movedim(-1, dim)


@composite("F.interpolate")
def interpolate(input, size=None, scale_factor=None, mode="nearest", align_corners=None,
                recompute_scale_factor=None, antialias=False):
    """Resize (N, C, *spatial) to ``size`` or by ``scale_factor``, as ``torch.nn.functional.interpolate``.

    Modes: 'nearest', 'nearest-exact', 'linear' (3-D input), 'bilinear' / 'bicubic' (4-D),
    'trilinear' (5-D) and 'area' (adaptive average pooling).

    Example:
        >>> F.interpolate(webgrad.tensor([[[1., 2.]]]), scale_factor=2, mode="linear")
        tensor([[[1.0000, 1.2500, 1.7500, 2.0000]]])
    """
    if mode not in _MODES:
        raise NotImplementedError(f"interpolate: unknown mode {mode!r}; expected one of {', '.join(_MODES)}")
    spatial = input.ndim - 2
    if spatial < 1 or spatial > 3:
        raise NotImplementedError(f"interpolate: input must be 3-D, 4-D or 5-D (N, C, *spatial), got "
                                  f"{describe(input)}")
    if mode in _LINEAR_MODES:
        if _LINEAR_MODES[mode] != spatial:
            raise NotImplementedError(f"Got {input.ndim}D input, but {mode} mode needs "
                                      f"{_LINEAR_MODES[mode] + 2}D input")
        align_corners = bool(align_corners)
    elif align_corners is not None:
        raise ValueError("align_corners option can only be set with the interpolating modes: "
                         "linear | bilinear | bicubic | trilinear")
    if antialias and not (mode in ("bilinear", "bicubic") and spatial == 2):
        raise NotImplementedError("Anti-alias option is restricted to bilinear and bicubic modes and requires "
                                  "a 4-D tensor as input")
    sizes, scales = _output_sizes(input, size, scale_factor, spatial)
    if recompute_scale_factor and size is not None:
        raise ValueError("recompute_scale_factor is not meaningful with an explicit size.")
    if mode == "area" and scales is not None:
        recompute_scale_factor = True
    if recompute_scale_factor:
        scales = None
    if any(s <= 0 for s in sizes):
        raise ValueError(f"interpolate: output sizes must be positive, got {sizes} for input {describe(input)}")
    if scales is None:
        scales = (None,) * spatial
    if mode == "area":
        pool = {1: adaptive_avg_pool1d, 2: adaptive_avg_pool2d, 3: adaptive_avg_pool3d}[spatial]
        return pool(input, sizes)
    out = input
    for axis, (n, o, s) in enumerate(zip(input.shape[2:], sizes, scales)):
        dim = 2 + axis
        if mode in ("nearest", "nearest-exact"):
            if o != n or mode == "nearest-exact":
                index = _nearest_index(n, o, s, mode == "nearest-exact")
                out = ops.index_select(out, dim, creation.tensor(index, device=input.device))
            continue
        if not input.dtype.is_floating_point:
            raise OpError(f"interpolate: mode {mode!r} needs a floating input, got {describe(input)}")
        cubic = mode == "bicubic"
        if antialias:
            matrix = _antialias_matrix(n, o, s, align_corners, cubic)
        else:
            matrix = _linear_matrix(n, o, s, align_corners, cubic)
        out = _resample(out, dim, matrix)
    return out if out is not input else input * 1


def upsample(input, size=None, scale_factor=None, mode="nearest", align_corners=None):
    """Deprecated alias of :func:`interpolate` (kept, as in PyTorch)."""
    return interpolate(input, size, scale_factor, mode, align_corners)


def upsample_nearest(input, size=None, scale_factor=None):
    """Nearest-neighbour upsampling (PyTorch's deprecated ``F.upsample_nearest``)."""
    return interpolate(input, size, scale_factor, mode="nearest")


def upsample_bilinear(input, size=None, scale_factor=None):
    """Bilinear upsampling with align_corners=True (PyTorch's deprecated ``F.upsample_bilinear``)."""
    return interpolate(input, size, scale_factor, mode="bilinear", align_corners=True)


# -- rearranging -------------------------------------------------------------------------
@composite("F.pixel_shuffle")
def pixel_shuffle(input, upscale_factor):
    """(*, C * r * r, H, W) -> (*, C, H * r, W * r): sub-pixel convolution's rearrangement.

    Example:
        >>> F.pixel_shuffle(webgrad.randn(1, 8, 3, 3), 2).shape
        webgrad.Size([1, 2, 6, 6])
    """
    r = int(upscale_factor)
    if input.ndim < 3 or r <= 0 or input.shape[-3] % (r * r):
        raise OpError(f"pixel_shuffle: expected at least 3 dims with channels divisible by "
                      f"upscale_factor ** 2 = {r * r}, got {describe(input)}")
    *lead, c, h, w = input.shape
    x = input.reshape(*lead, c // (r * r), r, r, h, w)
    k = len(lead)
    x = x.permute(*range(k), k, k + 3, k + 1, k + 4, k + 2)
    return x.reshape(*lead, c // (r * r), h * r, w * r)


@composite("F.pixel_unshuffle")
def pixel_unshuffle(input, downscale_factor):
    """(*, C, H * r, W * r) -> (*, C * r * r, H, W): the inverse of pixel_shuffle.

    Example:
        >>> F.pixel_unshuffle(webgrad.randn(1, 2, 6, 6), 2).shape
        webgrad.Size([1, 8, 3, 3])
    """
    r = int(downscale_factor)
    if input.ndim < 3 or r <= 0 or input.shape[-2] % r or input.shape[-1] % r:
        raise OpError(f"pixel_unshuffle: expected at least 3 dims with height and width divisible by "
                      f"downscale_factor={r}, got {describe(input)}")
    *lead, c, h, w = input.shape
    x = input.reshape(*lead, c, h // r, r, w // r, r)
    k = len(lead)
    x = x.permute(*range(k), k, k + 2, k + 4, k + 1, k + 3)
    return x.reshape(*lead, c * r * r, h // r, w // r)


@composite("F.channel_shuffle")
def channel_shuffle(input, groups):
    """Interleave the channels of (N, C, *) from ``groups`` groups (ShuffleNet).

    Example:
        >>> F.channel_shuffle(webgrad.arange(4.).reshape(1, 4, 1), 2).flatten()
        tensor([0., 2., 1., 3.])
    """
    groups = int(groups)
    if input.ndim < 3 or groups <= 0 or input.shape[1] % groups:
        raise OpError(f"channel_shuffle: expected at least 3 dims and channels divisible by groups={groups}, "
                      f"got {describe(input)}")
    n, c, *rest = input.shape
    return input.reshape(n, groups, c // groups, *rest).transpose(1, 2).reshape(n, c, *rest)


native_channel_shuffle = channel_shuffle


def _one_hot_kernels(channels, kernel, dtype, device):
    """(C * kh * kw, 1, kh, kw): output channel c * K + k copies kernel offset k of channel c."""
    k = kernel[0] * kernel[1]
    eye = np.eye(k).reshape(k, 1, *kernel)
    return creation.tensor(np.tile(eye, (channels, 1, 1, 1)), dtype=dtype, device=device)


def _fold_args(op_name, kernel_size, dilation, padding, stride):
    kernel = _tuple(op_name, "kernel_size", kernel_size, 2)
    dilation = _tuple(op_name, "dilation", dilation, 2)
    padding = _tuple(op_name, "padding", padding, 2)
    stride = _tuple(op_name, "stride", stride, 2)
    if min(kernel + dilation + stride) <= 0 or min(padding) < 0:
        raise ValueError(f"{op_name}: kernel_size, dilation and stride must be positive and padding "
                         f"non-negative, got kernel_size={kernel}, dilation={dilation}, padding={padding}, "
                         f"stride={stride}")
    return kernel, dilation, padding, stride


@composite("F.unfold")
def unfold(input, kernel_size, dilation=1, padding=0, stride=1):
    """Sliding blocks of (N, C, H, W) as columns: (N, C * kh * kw, L), L the number of blocks (im2col).

    Example:
        >>> F.unfold(webgrad.randn(1, 3, 4, 4), 2).shape
        webgrad.Size([1, 12, 9])
    """
    kernel, dilation, padding, stride = _fold_args("unfold", kernel_size, dilation, padding, stride)
    if input.ndim not in (3, 4) or not input.dtype.is_floating_point:
        raise OpError(f"unfold: expected a floating 3-D (C, H, W) or 4-D (N, C, H, W) input, got {describe(input)}")
    unbatched = input.ndim == 3
    x = input.unsqueeze(0) if unbatched else input
    c = x.shape[1]
    weight = _one_hot_kernels(c, kernel, x.dtype, x.device)
    pads = (padding[0], padding[0], padding[1], padding[1])
    if x.shape[0] == 0:  # an empty batch: only the shape (the conv kernel wants at least one image)
        blocks = [(n + 2 * p - d * (k - 1) - 1) // s + 1
                  for n, p, d, k, s in zip(x.shape[2:], padding, dilation, kernel, stride)]
        out = x.reshape(0, c * kernel[0] * kernel[1], blocks[0] * blocks[1])
        return out.squeeze(0) if unbatched else out
    cols = ops.conv2d_core(x, weight, stride, pads, dilation, groups=c)
    out = cols.reshape(x.shape[0], c * kernel[0] * kernel[1], -1)
    return out.squeeze(0) if unbatched else out


@composite("F.fold")
def fold(input, output_size, kernel_size, dilation=1, padding=0, stride=1):
    """Sum columns (N, C * kh * kw, L) back into an (N, C, *output_size) image (col2im; unfold's adjoint).

    Example:
        >>> F.fold(webgrad.ones(1, 4, 4), (3, 3), 2)
        tensor([[[[1., 2., 1.],
                  [2., 4., 2.],
                  [1., 2., 1.]]]])
    """
    output_size = _tuple("fold", "output_size", output_size, 2)
    kernel, dilation, padding, stride = _fold_args("fold", kernel_size, dilation, padding, stride)
    if input.ndim not in (2, 3) or not input.dtype.is_floating_point:
        raise OpError(f"fold: expected a floating 2-D (C * kh * kw, L) or 3-D (N, C * kh * kw, L) input, got "
                      f"{describe(input)}")
    unbatched = input.ndim == 2
    x = input.unsqueeze(0) if unbatched else input
    k = kernel[0] * kernel[1]
    blocks = [(o + 2 * p - d * (kk - 1) - 1) // s + 1
              for o, p, d, kk, s in zip(output_size, padding, dilation, kernel, stride)]
    if x.shape[1] % k or min(blocks) <= 0 or x.shape[2] != blocks[0] * blocks[1]:
        raise OpError(f"fold: input {describe(input)} does not match kernel_size={kernel} (channels must be "
                      f"divisible by {k}) with {blocks} blocks for output_size={output_size}, padding={padding}, "
                      f"dilation={dilation}, stride={stride}")
    c = x.shape[1] // k
    weight = _one_hot_kernels(c, kernel, x.dtype, x.device)
    grad = x.reshape(x.shape[0], c * k, *blocks)
    out = conv2d_backward_input(grad, weight, input_hw=tuple(output_size), stride=stride,
                                padding=(padding[0], padding[0], padding[1], padding[1]), dilation=dilation,
                                groups=c)
    return out.squeeze(0) if unbatched else out


# -- affine_grid / grid_sample ---------------------------------------------------------------
def _base_coordinates(n, align_corners):
    if align_corners:
        values = np.linspace(-1.0, 1.0, n) if n > 1 else np.zeros(1)
    else:
        values = (np.arange(n) * 2.0 + 1.0) / n - 1.0
    return values


@composite("F.affine_grid")
def affine_grid(theta, size, align_corners=None):
    """Sampling grid (N, H, W, 2) (or (N, D, H, W, 3)) of ``theta`` (N, 2, 3) (or (N, 3, 4)) for grid_sample.

    Example:
        >>> theta = webgrad.tensor([[[1., 0., 0.], [0., 1., 0.]]])
        >>> F.affine_grid(theta, (1, 1, 2, 2), align_corners=False).shape
        webgrad.Size([1, 2, 2, 2])
    """
    align_corners = bool(align_corners)
    size = tuple(int(s) for s in size)
    spatial = len(size) - 2
    if spatial not in (2, 3) or theta.ndim != 3 or tuple(theta.shape[1:]) != (spatial, spatial + 1) \
            or theta.shape[0] != size[0] or not theta.dtype.is_floating_point:
        raise OpError(f"affine_grid: expected a floating theta of shape (N, 2, 3) for a 4-D size or (N, 3, 4) for "
                      f"a 5-D size, with N = size[0]; got theta {describe(theta)} and size {size}")
    if min(size[2:]) <= 0:
        raise ValueError(f"affine_grid: expected non-zero, positive output size, got {size}")
    # Coordinates (x, y[, z], 1) of every output position, x along the last dim.
    axes = [_base_coordinates(n, align_corners) for n in size[2:]]
    mesh = np.meshgrid(*axes, indexing="ij")  # each (D,) H, W
    base = np.stack([*reversed(mesh), np.ones_like(mesh[0])], -1).reshape(-1, spatial + 1)
    base_t = creation.tensor(base, dtype=theta.dtype, device=theta.device)
    grid = ops.matmul(base_t, theta.transpose(1, 2))  # (N, positions, spatial)
    return grid.reshape(size[0], *size[2:], spatial)


def _unnormalize(coord, size, align_corners):
    if align_corners:
        return (coord + 1) / 2 * (size - 1)
    return ((coord + 1) * size - 1) / 2


def _reflect(coord, low2, high2):
    """Reflect coordinates into [low2 / 2, high2 / 2] (PyTorch's reflect_coordinates)."""
    if low2 == high2:
        return coord * 0
    low, span = low2 / 2, (high2 - low2) / 2
    coord = (coord - low).abs()
    flips = (coord / span).floor()
    extra = coord - flips * span
    even = (flips - 2 * (flips / 2).floor()) == 0
    return ops.where(even, extra + low, span - extra + low)


def _padded_coordinate(coord, size, padding_mode, align_corners):
    """Pixel coordinate moved inside by 'border' (clamp) or 'reflection'; 'zeros' leaves it."""
    if padding_mode == "border":
        coord = coord.clamp(0, size - 1)
    elif padding_mode == "reflection":
        if align_corners:
            coord = _reflect(coord, 0, 2 * (size - 1))
        else:
            coord = _reflect(coord, -1, 2 * size - 1)
        coord = coord.clamp(0, size - 1)
    return coord


@composite("F.grid_sample")
def grid_sample(input, grid, mode="bilinear", padding_mode="zeros", align_corners=None):
    """Sample (N, C, H_in, W_in) at the points of ``grid`` (N, H, W, 2), x then y in [-1, 1];
    also (N, C, D, H, W) with a (N, D', H', W', 3) grid. Modes 'bilinear', 'nearest' and
    'bicubic' (4-D only); padding_mode 'zeros', 'border' or 'reflection'.

    Example:
        >>> grid = F.affine_grid(webgrad.tensor([[[1., 0., 0.], [0., 1., 0.]]]), (1, 1, 3, 3), align_corners=True)
        >>> image = webgrad.randn(1, 1, 3, 3)
        >>> bool((F.grid_sample(image, grid, align_corners=True) - image).abs().max() < 1e-5)
        True
    """
    if mode not in ("bilinear", "nearest", "bicubic"):
        raise ValueError(f"grid_sample: mode must be 'bilinear', 'nearest' or 'bicubic', got {mode!r}")
    if padding_mode not in ("zeros", "border", "reflection"):
        raise ValueError(f"grid_sample: padding_mode must be 'zeros', 'border' or 'reflection', got "
                         f"{padding_mode!r}")
    spatial = input.ndim - 2
    if spatial not in (2, 3) or grid.ndim != input.ndim or grid.shape[-1] != spatial \
            or grid.shape[0] != input.shape[0] or grid.dtype is not input.dtype:
        raise OpError(f"grid_sample: expected a 4-D input with a (N, H, W, 2) grid or a 5-D input with a "
                      f"(N, D, H, W, 3) grid of the same batch and dtype, got input {describe(input)} and grid "
                      f"{describe(grid)}")
    if mode == "bicubic" and spatial != 2:
        raise ValueError("grid_sample: bicubic interpolation only supports 4-D input")
    align_corners = bool(align_corners)
    n, c = input.shape[:2]
    in_sizes = tuple(input.shape[2:])  # (D,) H, W
    out_sizes = tuple(grid.shape[1:-1])
    flat_grid = grid.reshape(n, -1, spatial)
    # Source coordinate per input dim, outermost first (the grid lists x first).
    coords = [_unnormalize(flat_grid[..., spatial - 1 - axis], in_sizes[axis], align_corners)
              for axis in range(spatial)]
    if mode != "bicubic":  # bicubic pads each tap's position instead
        coords = [_padded_coordinate(coord, size, padding_mode, align_corners) for coord, size in zip(coords, in_sizes)]
    flat_input = input.reshape(n, c, -1)
    points = flat_grid.shape[1]

    def sample(corner):
        """Values at integer positions (one per dim), zero where outside the input."""
        inside = None
        index = None
        for axis, position in enumerate(corner):
            ok = (position.detach() >= 0) & (position.detach() <= in_sizes[axis] - 1)
            inside = ok if inside is None else inside & ok
            clamped = position.detach().clamp(0, in_sizes[axis] - 1).to(dtypes.int64)
            index = clamped if index is None else index * in_sizes[axis] + clamped
        values = ops.gather(flat_input, 2, index.unsqueeze(1).expand(n, c, points))
        return values * inside.unsqueeze(1).to(input.dtype)

    if mode == "nearest":
        out = sample([coord.round() for coord in coords])
        # The grid's gradient is zero (as PyTorch returns it), not missing: a select that never picks it.
        keep = creation.ones(1, dtype=dtypes.bool_, device=input.device)
        out = ops.where(keep, out, flat_grid[..., 0].unsqueeze(1))
    elif mode == "bicubic":
        lows = [coord.floor() for coord in coords]
        weights = [_cubic_weights(coord - low) for coord, low in zip(coords, lows)]
        out = None
        for i in range(4):
            for j in range(4):
                taps = [_padded_coordinate(lows[0] + (i - 1), in_sizes[0], padding_mode, align_corners),
                        _padded_coordinate(lows[1] + (j - 1), in_sizes[1], padding_mode, align_corners)]
                term = sample(taps) * (weights[0][i] * weights[1][j]).unsqueeze(1)
                out = term if out is None else out + term
    else:
        lows = [coord.floor() for coord in coords]
        fracs = [coord - low for coord, low in zip(coords, lows)]
        out = None
        for corner in range(2 ** spatial):
            bits = [(corner >> (spatial - 1 - axis)) & 1 for axis in range(spatial)]
            weight = None
            for axis, bit in enumerate(bits):
                w = fracs[axis] if bit else 1 - fracs[axis]
                weight = w if weight is None else weight * w
            term = sample([low + bit for low, bit in zip(lows, bits)]) * weight.unsqueeze(1)
            out = term if out is None else out + term
    return out.reshape(n, c, *out_sizes)
