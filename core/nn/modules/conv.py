"""Conv1d/2d/3d and ConvTranspose1d/2d/3d."""
from __future__ import annotations

import math

from ... import creation
from .. import functional as F
from ..functional_conv import _mode_pad
from .. import init
from ..parameter import Parameter
from .module import Module


def _ntuple(name, value, n):
    if isinstance(value, int):
        return (value,) * n
    value = tuple(value)
    if len(value) != n:
        raise ValueError(f"{name} must be an int or a tuple of {n} ints, got {value}")
    return value


class _ConvNd(Module):
    _dims = 2

    _transposed = False

    def __init__(self, in_channels, out_channels, kernel_size, stride=1, padding=0, dilation=1, groups=1,
                 bias=True, padding_mode="zeros", device=None, dtype=None, output_padding=0):
        super().__init__()
        name, n = type(self).__name__, self._dims
        if groups <= 0:
            raise ValueError(f"{name}: groups must be a positive integer, got {groups}")
        if in_channels % groups:
            raise ValueError(f"{name}: in_channels ({in_channels}) must be divisible by groups ({groups})")
        if out_channels % groups:
            raise ValueError(f"{name}: out_channels ({out_channels}) must be divisible by groups ({groups})")
        if padding_mode not in ("zeros", "reflect", "replicate", "circular"):
            raise ValueError(f"{name}: padding_mode must be one of 'zeros', 'reflect', 'replicate' or "
                             f"'circular', got {padding_mode!r}")
        if self._transposed and padding_mode != "zeros":
            raise ValueError(f'Only "zeros" padding mode is supported for {name}')
        self.in_channels, self.out_channels = in_channels, out_channels
        self.kernel_size = _ntuple("kernel_size", kernel_size, n)
        self.stride = _ntuple("stride", stride, n)
        self.dilation = _ntuple("dilation", dilation, n)
        if isinstance(padding, str):
            if padding not in ("same", "valid"):
                raise ValueError(f"{name}: invalid padding string {padding!r}, should be one of ('valid', 'same')")
            if padding == "same" and any(s != 1 for s in self.stride):
                raise ValueError(f"{name}: padding='same' is not supported for strided convolutions")
            if self._transposed:
                raise ValueError(f"{name}: padding must be an int or a tuple of ints, got {padding!r}")
            self.padding = padding
        else:
            self.padding = _ntuple("padding", padding, n)
        self.groups, self.padding_mode = groups, padding_mode
        self.output_padding = _ntuple("output_padding", output_padding, n)
        self.transposed = self._transposed
        # F.pad order (last dim first), each dim's (before, after): what a non-zeros padding_mode pads.
        if padding == "same":
            self._reversed_padding_repeated_twice = [0, 0] * n
            for d, k, i in zip(self.dilation, self.kernel_size, range(n - 1, -1, -1)):
                total = d * (k - 1)
                self._reversed_padding_repeated_twice[2 * i] = total // 2
                self._reversed_padding_repeated_twice[2 * i + 1] = total - total // 2
        elif padding == "valid":
            self._reversed_padding_repeated_twice = [0, 0] * n
        else:
            self._reversed_padding_repeated_twice = [p for p in reversed(self.padding) for _ in range(2)]
        if self._transposed:
            shape = (in_channels, out_channels // groups) + self.kernel_size
        else:
            shape = (out_channels, in_channels // groups) + self.kernel_size
        self.weight = Parameter(creation.empty(*shape, dtype=dtype, device=device))
        if bias:
            self.bias = Parameter(creation.empty(out_channels, dtype=dtype, device=device))
        else:
            self.register_parameter("bias", None)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        init.kaiming_uniform_(self.weight, a=math.sqrt(5))
        if self.bias is not None:
            fan_in, _ = init._calculate_fan_in_and_fan_out(self.weight)
            if fan_in != 0:
                bound = 1 / math.sqrt(fan_in)
                init.uniform_(self.bias, -bound, bound)

    def extra_repr(self) -> str:
        n = self._dims
        s = f"{self.in_channels}, {self.out_channels}, kernel_size={self.kernel_size}, stride={self.stride}"
        if self.padding != (0,) * n:
            s += f", padding={self.padding}"
        if self.output_padding != (0,) * n:
            s += f", output_padding={self.output_padding}"
        if self.dilation != (1,) * n:
            s += f", dilation={self.dilation}"
        if self.groups != 1:
            s += f", groups={self.groups}"
        if self.bias is None:
            s += ", bias=False"
        if self.padding_mode != "zeros":
            s += f", padding_mode={self.padding_mode}"
        return s

    def _conv_forward(self, conv, input):
        if self.padding_mode != "zeros":
            input = _mode_pad(input, self._reversed_padding_repeated_twice, self.padding_mode)
            return conv(input, self.weight, self.bias, self.stride, 0, self.dilation, self.groups)
        return conv(input, self.weight, self.bias, self.stride, self.padding, self.dilation, self.groups)


class Conv1d(_ConvNd):
    """1-D convolution over (N, C_in, L) with a kernel of ``kernel_size``.

    Example:
        >>> nn.Conv1d(3, 8, 5, padding="same")(webgrad.randn(2, 3, 20)).shape
        webgrad.Size([2, 8, 20])
    """

    _dims = 1

    def forward(self, input):
        return self._conv_forward(F.conv1d, input)


class Conv2d(_ConvNd):
    """2-D convolution over (N, C_in, H, W); PyTorch's arguments and default initialisation.

    Example:
        >>> nn.Conv2d(1, 8, 3, padding=1)
        Conv2d(1, 8, kernel_size=(3, 3), stride=(1, 1), padding=(1, 1))
    """

    _dims = 2

    def forward(self, input):
        return self._conv_forward(F.conv2d, input)


class Conv3d(_ConvNd):
    """3-D convolution over (N, C_in, D, H, W); PyTorch's arguments and default initialisation.

    Example:
        >>> nn.Conv3d(2, 4, 3, padding=1)(webgrad.randn(1, 2, 4, 5, 5)).shape
        webgrad.Size([1, 4, 4, 5, 5])
    """

    _dims = 3

    def forward(self, input):
        return self._conv_forward(F.conv3d, input)


class _ConvTransposeNd(_ConvNd):
    _transposed = True

    def __init__(self, in_channels, out_channels, kernel_size, stride=1, padding=0, output_padding=0, groups=1,
                 bias=True, dilation=1, padding_mode="zeros", device=None, dtype=None):
        super().__init__(in_channels, out_channels, kernel_size, stride, padding, dilation, groups, bias,
                         padding_mode, device, dtype, output_padding=output_padding)

    def _output_padding(self, input, output_size):
        """output_padding that makes the output ``output_size`` (spatial sizes, or with batch and channels)."""
        if output_size is None:
            return self.output_padding
        n = self._dims
        output_size = [int(v) for v in output_size]
        if len(output_size) == n + 2 or (len(output_size) == n + 1 and input.ndim == n + 1):
            output_size = output_size[-n:]
        if len(output_size) != n:
            raise ValueError(f"{type(self).__name__}: output_size must have {n} or {n + 2} elements "
                             f"(got {len(output_size)})")
        padding = []
        for i in range(n):
            size = input.shape[input.ndim - n + i]
            smallest = ((size - 1) * self.stride[i] - 2 * self.padding[i]
                        + self.dilation[i] * (self.kernel_size[i] - 1) + 1)
            largest = smallest + self.stride[i] - 1
            if not smallest <= output_size[i] <= largest:
                raise ValueError(f"requested an output size of {output_size}, but valid sizes range from "
                                 f"{smallest} to {largest} (for an input of {tuple(input.shape[-n:])})")
            padding.append(output_size[i] - smallest)
        return tuple(padding)

    def _transpose_forward(self, conv, input, output_size):
        output_padding = self._output_padding(input, output_size)
        return conv(input, self.weight, self.bias, self.stride, self.padding, output_padding, self.groups,
                    self.dilation)


class ConvTranspose1d(_ConvTransposeNd):
    """1-D transposed convolution over (N, C_in, L); weight (in_channels, out_channels / groups, k).

    Example:
        >>> nn.ConvTranspose1d(3, 2, 3, stride=2)(webgrad.randn(1, 3, 5)).shape
        webgrad.Size([1, 2, 11])
    """

    _dims = 1

    def forward(self, input, output_size=None):
        return self._transpose_forward(F.conv_transpose1d, input, output_size)


class ConvTranspose2d(_ConvTransposeNd):
    """2-D transposed convolution over (N, C_in, H, W); ``output_size=`` in forward picks among the sizes
    a strided convolution maps to the same input size.

    Example:
        >>> nn.ConvTranspose2d(3, 2, 3, stride=2, padding=1)(webgrad.randn(1, 3, 4, 4), output_size=(8, 8)).shape
        webgrad.Size([1, 2, 8, 8])
    """

    _dims = 2

    def forward(self, input, output_size=None):
        return self._transpose_forward(F.conv_transpose2d, input, output_size)


class ConvTranspose3d(_ConvTransposeNd):
    """3-D transposed convolution over (N, C_in, D, H, W).

    Example:
        >>> nn.ConvTranspose3d(2, 3, 2, stride=2)(webgrad.randn(1, 2, 2, 3, 3)).shape
        webgrad.Size([1, 3, 4, 6, 6])
    """

    _dims = 3

    def forward(self, input, output_size=None):
        return self._transpose_forward(F.conv_transpose3d, input, output_size)
