"""Dropout, and Dropout1d/Dropout2d that drop whole channels."""
from __future__ import annotations

from ... import creation, ops
from ...ops._helpers import describe
from ...ops.registry import OpError
from .. import functional as F
from .module import Module


class Dropout(Module):
    """Zero elements with probability ``p`` while training (scaling the rest by 1/(1-p)); identity in eval.

    Example:
        >>> layer = nn.Dropout(0.5)
        >>> layer.eval()(webgrad.ones(4))
        tensor([1., 1., 1., 1.])
    """

    def __init__(self, p=0.5, inplace=False):
        super().__init__()
        if not 0.0 <= p <= 1.0:
            raise ValueError(f"dropout probability has to be between 0 and 1, but got {p}")
        self.p, self.inplace = p, inplace

    def forward(self, input):
        return F.dropout(input, self.p, self.training, self.inplace)

    def extra_repr(self) -> str:
        return f"p={self.p}, inplace={self.inplace}"


def _channel_dropout(name, input, p, training, spatial_dims):
    """Zero whole channels: one keep/drop draw per (batch, channel), broadcast over the spatial dims."""
    if not 0.0 <= p <= 1.0:
        raise ValueError(f"{name}: dropout probability has to be between 0 and 1, but got {p}")
    if input.ndim not in (spatial_dims + 1, spatial_dims + 2):
        raise OpError(f"{name}: expected a {spatial_dims + 1}-D (unbatched) or {spatial_dims + 2}-D input "
                      f"(channels, then {spatial_dims} spatial dim(s)), got {describe(input)}")
    if not training or p == 0.0:
        return input
    if p == 1.0:
        return input * 0.0
    mask_shape = tuple(input.shape[:-spatial_dims]) + (1,) * spatial_dims
    keep = creation.rand(*mask_shape, device=input.device) >= p
    return ops.where(keep, input * (1.0 / (1.0 - p)), 0.0)


class Dropout1d(Dropout):
    """Zero whole channels of (N, C, L) or (C, L) input with probability ``p`` while training.

    Example:
        >>> nn.Dropout1d(0.5)(webgrad.ones(2, 3, 4))[0, :, 0]  # each channel all kept (x2) or all zero
    """

    def forward(self, input):
        return _channel_dropout("Dropout1d", input, self.p, self.training, 1)


class Dropout2d(Dropout):
    """Zero whole channels of (N, C, H, W) or (C, H, W) input with probability ``p`` while training.

    Example:
        >>> nn.Dropout2d(0.25)(webgrad.ones(8, 16, 5, 5)).shape
        webgrad.Size([8, 16, 5, 5])
    """

    def forward(self, input):
        return _channel_dropout("Dropout2d", input, self.p, self.training, 2)
