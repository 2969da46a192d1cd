"""Upsample, UpsamplingNearest2d, UpsamplingBilinear2d, PixelShuffle, PixelUnshuffle, ChannelShuffle,
Fold and Unfold: modules around the functions of ``nn/functional_spatial.py``."""
from __future__ import annotations

from .. import functional as F
from .module import Module


class Upsample(Module):
    """Resize (N, C, *spatial) to ``size`` or by ``scale_factor`` (see ``F.interpolate``).

    Example:
        >>> nn.Upsample(scale_factor=2, mode="nearest")(webgrad.randn(1, 3, 4, 4)).shape
        webgrad.Size([1, 3, 8, 8])
    """

    def __init__(self, size=None, scale_factor=None, mode="nearest", align_corners=None,
                 recompute_scale_factor=None):
        super().__init__()
        self.name = type(self).__name__
        self.size = size
        if isinstance(scale_factor, tuple):
            self.scale_factor = tuple(float(factor) for factor in scale_factor)
        else:
            self.scale_factor = float(scale_factor) if scale_factor else None
        self.mode, self.align_corners = mode, align_corners
        self.recompute_scale_factor = recompute_scale_factor

    def forward(self, input):
        return F.interpolate(input, self.size, self.scale_factor, self.mode, self.align_corners,
                             recompute_scale_factor=self.recompute_scale_factor)

    def extra_repr(self) -> str:
        if self.scale_factor is not None:
            shown = f"scale_factor={self.scale_factor!r}"
        else:
            shown = f"size={self.size!r}"
        return f"{shown}, mode={self.mode!r}"


class UpsamplingNearest2d(Upsample):
    """Nearest-neighbour upsampling of (N, C, H, W).

    Example:
        >>> nn.UpsamplingNearest2d(scale_factor=2)(webgrad.randn(1, 1, 2, 2)).shape
        webgrad.Size([1, 1, 4, 4])
    """

    def __init__(self, size=None, scale_factor=None):
        super().__init__(size, scale_factor, mode="nearest")


class UpsamplingBilinear2d(Upsample):
    """Bilinear upsampling of (N, C, H, W) with align_corners=True.

    Example:
        >>> nn.UpsamplingBilinear2d(scale_factor=2)(webgrad.randn(1, 1, 2, 2)).shape
        webgrad.Size([1, 1, 4, 4])
    """

    def __init__(self, size=None, scale_factor=None):
        super().__init__(size, scale_factor, mode="bilinear", align_corners=True)


class PixelShuffle(Module):
    """(*, C * r * r, H, W) -> (*, C, H * r, W * r).

    Example:
        >>> nn.PixelShuffle(2)(webgrad.randn(1, 4, 3, 3)).shape
        webgrad.Size([1, 1, 6, 6])
    """

    def __init__(self, upscale_factor):
        super().__init__()
        self.upscale_factor = upscale_factor

    def forward(self, input):
        return F.pixel_shuffle(input, self.upscale_factor)

    def extra_repr(self) -> str:
        return f"upscale_factor={self.upscale_factor}"


class PixelUnshuffle(Module):
    """(*, C, H * r, W * r) -> (*, C * r * r, H, W).

    Example:
        >>> nn.PixelUnshuffle(2)(webgrad.randn(1, 1, 6, 6)).shape
        webgrad.Size([1, 4, 3, 3])
    """

    def __init__(self, downscale_factor):
        super().__init__()
        self.downscale_factor = downscale_factor

    def forward(self, input):
        return F.pixel_unshuffle(input, self.downscale_factor)

    def extra_repr(self) -> str:
        return f"downscale_factor={self.downscale_factor}"


class ChannelShuffle(Module):
    """Interleave the channels of (N, C, *) from ``groups`` groups.

    Example:
        >>> nn.ChannelShuffle(2)(webgrad.arange(4.).reshape(1, 4, 1)).flatten()
        tensor([0., 2., 1., 3.])
    """

    def __init__(self, groups):
        super().__init__()
        self.groups = groups

    def forward(self, input):
        return F.channel_shuffle(input, self.groups)

    def extra_repr(self) -> str:
        return f"groups={self.groups}"


class Fold(Module):
    """Sum columns (N, C * kh * kw, L) into an image (N, C, *output_size) (see ``F.fold``).

    Example:
        >>> nn.Fold((3, 3), 2)(webgrad.ones(1, 4, 4)).shape
        webgrad.Size([1, 1, 3, 3])
    """

    def __init__(self, output_size, kernel_size, dilation=1, padding=0, stride=1):
        super().__init__()
        self.output_size, self.kernel_size = output_size, kernel_size
        self.dilation, self.padding, self.stride = dilation, padding, stride

    def forward(self, input):
        return F.fold(input, self.output_size, self.kernel_size, self.dilation, self.padding, self.stride)

    def extra_repr(self) -> str:
        return (f"output_size={self.output_size}, kernel_size={self.kernel_size}, dilation={self.dilation}, "
                f"padding={self.padding}, stride={self.stride}")


class Unfold(Module):
    """Sliding blocks of (N, C, H, W) as columns (N, C * kh * kw, L) (see ``F.unfold``).

    Example:
        >>> nn.Unfold(2)(webgrad.randn(1, 3, 4, 4)).shape
        webgrad.Size([1, 12, 9])
    """

    def __init__(self, kernel_size, dilation=1, padding=0, stride=1):
        super().__init__()
        self.kernel_size, self.dilation, self.padding, self.stride = kernel_size, dilation, padding, stride

    def forward(self, input):
        return F.unfold(input, self.kernel_size, self.dilation, self.padding, self.stride)

    def extra_repr(self) -> str:
        return (f"kernel_size={self.kernel_size}, dilation={self.dilation}, padding={self.padding}, "
                f"stride={self.stride}")
