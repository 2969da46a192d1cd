"""Dropout."""
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
