"""BatchNorm1d/2d/3d, InstanceNorm1d/2d/3d, GroupNorm, LayerNorm, RMSNorm and LocalResponseNorm."""
from __future__ import annotations

import warnings

from ... import creation, dtypes
from ...ops._helpers import describe
from ...ops.registry import OpError
from .. import functional as F
from .. import init
from ..parameter import Parameter
from .module import Module


def _affine_parameters(module, shape, affine, bias, dtype, device) -> None:
    """A norm layer's ``weight`` (and ``bias`` unless bias=False) of ``shape`` when ``affine``;
    registered as None otherwise, as torch's layers do."""
    def make():
        return Parameter(creation.empty(*shape, dtype=dtype, device=device))
    module.register_parameter("weight", make() if affine else None)
    module.register_parameter("bias", make() if affine and bias else None)


class _BatchNorm(Module):
    _allowed_dims: tuple = ()

    def __init__(self, num_features, eps=1e-5, momentum=0.1, affine=True, track_running_stats=True,
                 device=None, dtype=None, *, bias=True):
        super().__init__()
        self.num_features, self.eps, self.momentum = num_features, eps, momentum
        self.affine, self.track_running_stats = affine, track_running_stats
        _affine_parameters(self, (num_features,), affine, bias, dtype, device)
        if track_running_stats:
            self.register_buffer("running_mean", creation.zeros(num_features, dtype=dtype, device=device))
            self.register_buffer("running_var", creation.ones(num_features, dtype=dtype, device=device))
            self.register_buffer("num_batches_tracked", creation.tensor(0, dtype=dtypes.int64, device=device))
        else:
            self.register_buffer("running_mean", None)
            self.register_buffer("running_var", None)
            self.register_buffer("num_batches_tracked", None)
        self.reset_parameters()

    def reset_running_stats(self) -> None:
        if self.track_running_stats:
            init.zeros_(self.running_mean)
            init.ones_(self.running_var)
            init.zeros_(self.num_batches_tracked)

    def reset_parameters(self) -> None:
        self.reset_running_stats()
        if self.affine:
            init.ones_(self.weight)
            if self.bias is not None:
                init.zeros_(self.bias)

    def _check_input_dim(self, input) -> None:
        if input.ndim not in self._allowed_dims:
            shown = " or ".join(f"{d}D" for d in self._allowed_dims)
            raise OpError(f"{type(self).__name__}: expected {shown} input, got {describe(input)}")
        if input.shape[1] != self.num_features:
            raise OpError(f"{type(self).__name__}: expected {self.num_features} channels in dim 1, got "
                          f"input {describe(input)}")

    def forward(self, input):
        self._check_input_dim(input)
        factor = 0.0 if self.momentum is None else self.momentum
        if self.training and self.track_running_stats and self.num_batches_tracked is not None:
            self.num_batches_tracked.add_(1)
            if self.momentum is None:  # cumulative moving average
                factor = 1.0 / float(self.num_batches_tracked.item())
        use_batch_stats = self.training or (self.running_mean is None and self.running_var is None)
        keep_running = not self.training or self.track_running_stats
        return F.batch_norm(input, self.running_mean if keep_running else None,
                            self.running_var if keep_running else None, self.weight, self.bias,
                            use_batch_stats, factor, self.eps)

    def extra_repr(self) -> str:
        return (f"{self.num_features}, eps={self.eps}, momentum={self.momentum}, affine={self.affine}, "
                f"bias={self.bias is not None}, track_running_stats={self.track_running_stats}")


class BatchNorm1d(_BatchNorm):
    """Batch normalization over (N, C) or (N, C, L), with running statistics for eval.

    Example:
        >>> nn.BatchNorm1d(16)(webgrad.randn(8, 16)).shape
        webgrad.Size([8, 16])
    """

    _allowed_dims = (2, 3)


class BatchNorm2d(_BatchNorm):
    """Batch normalization over (N, C, H, W), with running statistics for eval.

    Example:
        >>> nn.BatchNorm2d(8)
        BatchNorm2d(8, eps=1e-05, momentum=0.1, affine=True, bias=True, track_running_stats=True)
    """

    _allowed_dims = (4,)


class BatchNorm3d(_BatchNorm):
    """Batch normalization over (N, C, D, H, W), with running statistics for eval.

    Example:
        >>> nn.BatchNorm3d(4)(webgrad.randn(2, 4, 3, 3, 3)).shape
        webgrad.Size([2, 4, 3, 3, 3])
    """

    _allowed_dims = (5,)


class _InstanceNorm(_BatchNorm):
    _spatial_dims = 1

    def __init__(self, num_features, eps=1e-5, momentum=0.1, affine=False, track_running_stats=False,
                 device=None, dtype=None, *, bias=True):
        super().__init__(num_features, eps, momentum, affine, track_running_stats, device, dtype, bias=bias)

    def forward(self, input):
        unbatched = self._spatial_dims + 1
        if input.ndim not in (unbatched, unbatched + 1):
            raise ValueError(f"{type(self).__name__}: expected {unbatched}D (unbatched) or {unbatched + 1}D "
                             f"input, got {describe(input)}")
        channels = input.shape[input.ndim - unbatched]
        if channels != self.num_features:
            message = (f"{type(self).__name__}: expected input's size at dim={input.ndim - unbatched} to match "
                       f"num_features ({self.num_features}), but got: {channels}.")
            if self.affine:
                raise ValueError(message)
            warnings.warn(message + " num_features is not used because affine=False", stacklevel=2)
        x = input.unsqueeze(0) if input.ndim == unbatched else input
        out = F.instance_norm(x, self.running_mean, self.running_var, self.weight, self.bias,
                              self.training or not self.track_running_stats,
                              self.momentum if self.momentum is not None else 0.0, self.eps)
        return out.squeeze(0) if input.ndim == unbatched else out


class InstanceNorm1d(_InstanceNorm):
    """Normalize each channel of each sample of (N, C, L) or (C, L) input over its positions.

    Example:
        >>> nn.InstanceNorm1d(3)
        InstanceNorm1d(3, eps=1e-05, momentum=0.1, affine=False, bias=False, track_running_stats=False)
    """

    _spatial_dims = 1


class InstanceNorm2d(_InstanceNorm):
    """Normalize each channel of each sample of (N, C, H, W) or (C, H, W) input over its positions."""

    _spatial_dims = 2


class InstanceNorm3d(_InstanceNorm):
    """Normalize each channel of each sample of (N, C, D, H, W) or (C, D, H, W) input over its positions."""

    _spatial_dims = 3


class GroupNorm(Module):
    """Normalize groups of channels per sample, then scale and shift per channel.

    Example:
        >>> nn.GroupNorm(2, 4)(webgrad.randn(3, 4, 5)).shape
        webgrad.Size([3, 4, 5])
    """

    def __init__(self, num_groups, num_channels, eps=1e-5, affine=True, device=None, dtype=None, *, bias=True):
        super().__init__()
        if num_channels % num_groups:
            raise ValueError("num_channels must be divisible by num_groups")
        self.num_groups, self.num_channels, self.eps, self.affine = num_groups, num_channels, eps, affine
        _affine_parameters(self, (num_channels,), affine, bias, dtype, device)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        if self.affine:
            init.ones_(self.weight)
            if self.bias is not None:
                init.zeros_(self.bias)

    def forward(self, input):
        return F.group_norm(input, self.num_groups, self.weight, self.bias, self.eps)

    def extra_repr(self) -> str:
        return (f"{self.num_groups}, {self.num_channels}, eps={self.eps}, affine={self.affine}, "
                f"bias={self.bias is not None}")


class RMSNorm(Module):
    """x / sqrt(mean(x²) + eps) over the last dims ``normalized_shape``, times a learned weight.

    Example:
        >>> nn.RMSNorm(8)
        RMSNorm((8,), eps=None, elementwise_affine=True)
    """

    def __init__(self, normalized_shape, eps=None, elementwise_affine=True, device=None, dtype=None):
        super().__init__()
        if isinstance(normalized_shape, int):
            normalized_shape = (normalized_shape,)
        self.normalized_shape = tuple(normalized_shape)
        self.eps, self.elementwise_affine = eps, elementwise_affine
        if elementwise_affine:
            self.weight = Parameter(creation.empty(*self.normalized_shape, dtype=dtype, device=device))
        else:
            self.register_parameter("weight", None)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        if self.elementwise_affine:
            init.ones_(self.weight)

    def forward(self, input):
        return F.rms_norm(input, self.normalized_shape, self.weight, self.eps)

    def extra_repr(self) -> str:
        return f"{self.normalized_shape}, eps={self.eps}, elementwise_affine={self.elementwise_affine}"


class LocalResponseNorm(Module):
    """Divide by a power of the summed squares of ``size`` neighbouring channels.

    Example:
        >>> nn.LocalResponseNorm(2)
        LocalResponseNorm(2, alpha=0.0001, beta=0.75, k=1.0)
    """

    def __init__(self, size, alpha=1e-4, beta=0.75, k=1.0):
        super().__init__()
        self.size, self.alpha, self.beta, self.k = size, alpha, beta, k

    def forward(self, input):
        return F.local_response_norm(input, self.size, self.alpha, self.beta, self.k)

    def extra_repr(self) -> str:
        return f"{self.size}, alpha={self.alpha}, beta={self.beta}, k={self.k}"


class LayerNorm(Module):
    """Normalize over the last dims given by ``normalized_shape``, then scale and shift.

    Example:
        >>> nn.LayerNorm(64)
        LayerNorm((64,), eps=1e-05, elementwise_affine=True, bias=True)
    """

    def __init__(self, normalized_shape, eps=1e-5, elementwise_affine=True, bias=True, device=None, dtype=None):
        super().__init__()
        if isinstance(normalized_shape, int):
            normalized_shape = (normalized_shape,)
        self.normalized_shape = tuple(normalized_shape)
        self.eps, self.elementwise_affine = eps, elementwise_affine
        _affine_parameters(self, self.normalized_shape, elementwise_affine, bias, dtype, device)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        if self.elementwise_affine:
            init.ones_(self.weight)
            if self.bias is not None:
                init.zeros_(self.bias)

    def forward(self, input):
        return F.layer_norm(input, self.normalized_shape, self.weight, self.bias, self.eps)

    def extra_repr(self) -> str:
        return (f"{self.normalized_shape}, eps={self.eps}, elementwise_affine={self.elementwise_affine}, "
                f"bias={self.bias is not None}")
