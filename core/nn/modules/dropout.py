"""Dropout, Dropout1d/2d/3d that drop whole channels, and the alpha dropouts for SELU networks."""
from __future__ import annotations

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


class Dropout1d(Dropout):
    """Zero whole channels of (N, C, L) or (C, L) input with probability ``p`` while training.

    Example:
        >>> nn.Dropout1d(0.5)(webgrad.ones(2, 3, 4))[0, :, 0]  # each channel all kept (x2) or all zero
    """

    def forward(self, input):
        return F.dropout1d(input, self.p, self.training, self.inplace)


class Dropout2d(Dropout):
    """Zero whole channels of (N, C, H, W) or (C, H, W) input with probability ``p`` while training.

    Other ranks warn and proceed as in PyTorch (see ``F.dropout2d``).

    Example:
        >>> nn.Dropout2d(0.25)(webgrad.ones(8, 16, 5, 5)).shape
        webgrad.Size([8, 16, 5, 5])
    """

    def forward(self, input):
        return F.dropout2d(input, self.p, self.training, self.inplace)


class Dropout3d(Dropout):
    """Zero whole channels of (N, C, D, H, W) or (C, D, H, W) input with probability ``p`` while training."""

    def forward(self, input):
        return F.dropout3d(input, self.p, self.training, self.inplace)


class AlphaDropout(Dropout):
    """Dropout that keeps SELU activations' zero mean and unit variance (training only)."""

    def forward(self, input):
        return F.alpha_dropout(input, self.p, self.training)


class FeatureAlphaDropout(Dropout):
    """Alpha dropout of whole channels (training only)."""

    def forward(self, input):
        return F.feature_alpha_dropout(input, self.p, self.training)
