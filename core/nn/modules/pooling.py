"""Max, average, adaptive, power-average pools and max-unpooling over 1, 2 and 3 spatial dims."""
from __future__ import annotations

from .. import functional as F
from .module import Module


class MaxPool2d(Module):
    """Max over (kernel_size) windows of (N, C, H, W); stride defaults to kernel_size.

    Example:
        >>> nn.MaxPool2d(2)
        MaxPool2d(kernel_size=2, stride=2, padding=0, dilation=1, ceil_mode=False)
    """

    def __init__(self, kernel_size, stride=None, padding=0, dilation=1, return_indices=False, ceil_mode=False):
        super().__init__()
        self.kernel_size = kernel_size
        self.stride = stride if stride is not None else kernel_size
        self.padding, self.dilation = padding, dilation
        self.return_indices, self.ceil_mode = return_indices, ceil_mode

    def forward(self, input):
        return F.max_pool2d(input, self.kernel_size, self.stride, self.padding, self.dilation,
                            ceil_mode=self.ceil_mode, return_indices=self.return_indices)

    def extra_repr(self) -> str:
        return (f"kernel_size={self.kernel_size}, stride={self.stride}, padding={self.padding}, "
                f"dilation={self.dilation}, ceil_mode={self.ceil_mode}")


class AvgPool2d(Module):
    """Mean over (kernel_size) windows of (N, C, H, W); stride defaults to kernel_size.

    Example:
        >>> nn.AvgPool2d(2)(webgrad.ones(1, 1, 4, 4)).shape
        webgrad.Size([1, 1, 2, 2])
    """

    def __init__(self, kernel_size, stride=None, padding=0, ceil_mode=False, count_include_pad=True,
                 divisor_override=None):
        super().__init__()
        self.kernel_size = kernel_size
        self.stride = stride if stride is not None else kernel_size
        self.padding, self.ceil_mode = padding, ceil_mode
        self.count_include_pad, self.divisor_override = count_include_pad, divisor_override

    def forward(self, input):
        return F.avg_pool2d(input, self.kernel_size, self.stride, self.padding, self.ceil_mode,
                            self.count_include_pad, self.divisor_override)

    def extra_repr(self) -> str:
        return f"kernel_size={self.kernel_size}, stride={self.stride}, padding={self.padding}"


class AdaptiveAvgPool2d(Module):
    """Average-pool to a fixed ``output_size`` whatever the input size.

    Example:
        >>> nn.AdaptiveAvgPool2d(1)(webgrad.randn(2, 8, 5, 7)).shape
        webgrad.Size([2, 8, 1, 1])
    """

    def __init__(self, output_size):
        super().__init__()
        self.output_size = output_size

    def forward(self, input):
        return F.adaptive_avg_pool2d(input, self.output_size)

    def extra_repr(self) -> str:
        return f"output_size={self.output_size}"


def _ntuple(value, n):
    return (value,) * n if isinstance(value, int) else tuple(value)


class _MaxPoolNd(Module):
    _pool = "max_pool2d"

    def __init__(self, kernel_size, stride=None, padding=0, dilation=1, return_indices=False, ceil_mode=False):
        super().__init__()
        self.kernel_size = kernel_size
        self.stride = stride if stride is not None else kernel_size
        self.padding, self.dilation = padding, dilation
        self.return_indices, self.ceil_mode = return_indices, ceil_mode

    def forward(self, input):
        return getattr(F, self._pool)(input, self.kernel_size, self.stride, self.padding, self.dilation,
                                      ceil_mode=self.ceil_mode, return_indices=self.return_indices)

    def extra_repr(self) -> str:
        return (f"kernel_size={self.kernel_size}, stride={self.stride}, padding={self.padding}, "
                f"dilation={self.dilation}, ceil_mode={self.ceil_mode}")


class MaxPool1d(_MaxPoolNd):
    """Max over windows of (N, C, L); stride defaults to kernel_size.

    Example:
        >>> nn.MaxPool1d(2)(webgrad.randn(1, 3, 8)).shape
        webgrad.Size([1, 3, 4])
    """

    _pool = "max_pool1d"


class MaxPool3d(_MaxPoolNd):
    """Max over windows of (N, C, D, H, W); stride defaults to kernel_size.

    Example:
        >>> nn.MaxPool3d(2)(webgrad.randn(1, 3, 4, 4, 4)).shape
        webgrad.Size([1, 3, 2, 2, 2])
    """

    _pool = "max_pool3d"


class AvgPool1d(Module):
    """Mean over windows of (N, C, L); stride defaults to kernel_size.

    Example:
        >>> nn.AvgPool1d(2)(webgrad.ones(1, 1, 4))
        tensor([[[1., 1.]]])
    """

    def __init__(self, kernel_size, stride=None, padding=0, ceil_mode=False, count_include_pad=True):
        super().__init__()
        self.kernel_size = _ntuple(kernel_size, 1)
        self.stride = _ntuple(stride if stride is not None else kernel_size, 1)
        self.padding = _ntuple(padding, 1)
        self.ceil_mode, self.count_include_pad = ceil_mode, count_include_pad

    def forward(self, input):
        return F.avg_pool1d(input, self.kernel_size, self.stride, self.padding, self.ceil_mode,
                            self.count_include_pad)

    def extra_repr(self) -> str:
        return f"kernel_size={self.kernel_size}, stride={self.stride}, padding={self.padding}"


class AvgPool3d(AvgPool2d):
    """Mean over windows of (N, C, D, H, W); stride defaults to kernel_size.

    Example:
        >>> nn.AvgPool3d(2)(webgrad.ones(1, 1, 2, 4, 4)).shape
        webgrad.Size([1, 1, 1, 2, 2])
    """

    def forward(self, input):
        return F.avg_pool3d(input, self.kernel_size, self.stride, self.padding, self.ceil_mode,
                            self.count_include_pad, self.divisor_override)


class _AdaptivePool(Module):
    _pool = "adaptive_avg_pool1d"

    def __init__(self, output_size):
        super().__init__()
        self.output_size = output_size

    def forward(self, input):
        return getattr(F, self._pool)(input, self.output_size)

    def extra_repr(self) -> str:
        return f"output_size={self.output_size}"


class AdaptiveAvgPool1d(_AdaptivePool):
    """Average-pool (N, C, L) to a fixed ``output_size``.

    Example:
        >>> nn.AdaptiveAvgPool1d(2)(webgrad.randn(2, 3, 7)).shape
        webgrad.Size([2, 3, 2])
    """

    _pool = "adaptive_avg_pool1d"


class AdaptiveAvgPool3d(_AdaptivePool):
    """Average-pool (N, C, D, H, W) to a fixed ``output_size``.

    Example:
        >>> nn.AdaptiveAvgPool3d(1)(webgrad.randn(2, 3, 4, 5, 6)).shape
        webgrad.Size([2, 3, 1, 1, 1])
    """

    _pool = "adaptive_avg_pool3d"


class _AdaptiveMaxPool(_AdaptivePool):
    def __init__(self, output_size, return_indices=False):
        super().__init__(output_size)
        self.return_indices = return_indices

    def forward(self, input):
        return getattr(F, self._pool)(input, self.output_size, self.return_indices)


class AdaptiveMaxPool1d(_AdaptiveMaxPool):
    """Max-pool (N, C, L) to a fixed ``output_size``.

    Example:
        >>> nn.AdaptiveMaxPool1d(2)(webgrad.randn(2, 3, 7)).shape
        webgrad.Size([2, 3, 2])
    """

    _pool = "adaptive_max_pool1d"


class AdaptiveMaxPool2d(_AdaptiveMaxPool):
    """Max-pool (N, C, H, W) to a fixed ``output_size``.

    Example:
        >>> nn.AdaptiveMaxPool2d((2, 3))(webgrad.randn(2, 3, 7, 7)).shape
        webgrad.Size([2, 3, 2, 3])
    """

    _pool = "adaptive_max_pool2d"


class AdaptiveMaxPool3d(_AdaptiveMaxPool):
    """Max-pool (N, C, D, H, W) to a fixed ``output_size``.

    Example:
        >>> nn.AdaptiveMaxPool3d(1)(webgrad.randn(2, 3, 4, 5, 6)).shape
        webgrad.Size([2, 3, 1, 1, 1])
    """

    _pool = "adaptive_max_pool3d"


class _LPPool(Module):
    _pool = "lp_pool1d"

    def __init__(self, norm_type, kernel_size, stride=None, ceil_mode=False):
        super().__init__()
        self.norm_type, self.kernel_size, self.stride, self.ceil_mode = norm_type, kernel_size, stride, ceil_mode

    def forward(self, input):
        return getattr(F, self._pool)(input, float(self.norm_type), self.kernel_size, self.stride, self.ceil_mode)

    def extra_repr(self) -> str:
        return (f"norm_type={self.norm_type}, kernel_size={self.kernel_size}, stride={self.stride}, "
                f"ceil_mode={self.ceil_mode}")


class LPPool1d(_LPPool):
    """Power-average pool over (N, C, L): (sum of x ** p over each window) ** (1 / p).

    Example:
        >>> nn.LPPool1d(2, 2)(webgrad.tensor([[[3., 4.]]]))
        tensor([[[5.]]])
    """

    _pool = "lp_pool1d"


class LPPool2d(_LPPool):
    """Power-average pool over (N, C, H, W).

    Example:
        >>> nn.LPPool2d(2, 2)(webgrad.ones(1, 1, 4, 4)).shape
        webgrad.Size([1, 1, 2, 2])
    """

    _pool = "lp_pool2d"


class LPPool3d(_LPPool):
    """Power-average pool over (N, C, D, H, W).

    Example:
        >>> nn.LPPool3d(2, 2)(webgrad.ones(1, 1, 2, 2, 2)).shape
        webgrad.Size([1, 1, 1, 1, 1])
    """

    _pool = "lp_pool3d"


class _MaxUnpool(Module):
    _dims = 1

    def __init__(self, kernel_size, stride=None, padding=0):
        super().__init__()
        n = self._dims
        self.kernel_size = _ntuple(kernel_size, n)
        self.stride = _ntuple(stride if stride is not None else kernel_size, n)
        self.padding = _ntuple(padding, n)

    def forward(self, input, indices, output_size=None):
        unpool = getattr(F, f"max_unpool{self._dims}d")
        return unpool(input, indices, self.kernel_size, self.stride, self.padding, output_size)

    def extra_repr(self) -> str:
        return f"kernel_size={self.kernel_size}, stride={self.stride}, padding={self.padding}"


class MaxUnpool1d(_MaxUnpool):
    """Inverse of MaxPool1d: values back at their indices, zeros elsewhere.

    Example:
        >>> values, indices = nn.MaxPool1d(2, return_indices=True)(webgrad.randn(1, 1, 4))
        >>> nn.MaxUnpool1d(2)(values, indices).shape
        webgrad.Size([1, 1, 4])
    """

    _dims = 1


class MaxUnpool2d(_MaxUnpool):
    """Inverse of MaxPool2d: values back at their indices, zeros elsewhere.

    Example:
        >>> values, indices = nn.MaxPool2d(2, return_indices=True)(webgrad.randn(1, 1, 4, 4))
        >>> nn.MaxUnpool2d(2)(values, indices).shape
        webgrad.Size([1, 1, 4, 4])
    """

    _dims = 2


class MaxUnpool3d(_MaxUnpool):
    """Inverse of MaxPool3d: values back at their indices, zeros elsewhere.

    Example:
        >>> values, indices = nn.MaxPool3d(2, return_indices=True)(webgrad.randn(1, 1, 2, 4, 4))
        >>> nn.MaxUnpool3d(2)(values, indices).shape
        webgrad.Size([1, 1, 2, 4, 4])
    """

    _dims = 3
