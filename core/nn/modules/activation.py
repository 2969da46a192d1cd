"""Activation layers: thin modules around ``nn.functional``."""
from __future__ import annotations

from .. import functional as F
from .module import Module


def _inplace_repr(inplace, leading=""):
    return f"{leading}inplace=True" if inplace else ""


class ReLU(Module):
    """max(x, 0).

    Example:
        >>> nn.ReLU()(webgrad.tensor([-1.0, 2.0]))
        tensor([0., 2.])
    """

    def __init__(self, inplace=False):
        super().__init__()
        self.inplace = inplace

    def forward(self, input):
        return F.relu(input)

    def extra_repr(self) -> str:
        return _inplace_repr(self.inplace)


class ReLU6(ReLU):
    """min(max(x, 0), 6)."""

    def forward(self, input):
        return F.relu6(input)


class GELU(Module):
    """x * Phi(x); ``approximate='tanh'`` for the tanh formula.

    Example:
        >>> nn.GELU()
        GELU(approximate='none')
    """

    def __init__(self, approximate="none"):
        super().__init__()
        if approximate not in ("none", "tanh"):
            raise ValueError(f"GELU: approximate must be 'none' or 'tanh', got {approximate!r}")
        self.approximate = approximate

    def forward(self, input):
        return F.gelu(input, approximate=self.approximate)

    def extra_repr(self) -> str:
        return f"approximate={self.approximate!r}"


class SiLU(Module):
    """x * sigmoid(x)."""

    def __init__(self, inplace=False):
        super().__init__()
        self.inplace = inplace

    def forward(self, input):
        return F.silu(input)

    def extra_repr(self) -> str:
        return _inplace_repr(self.inplace)


class Mish(SiLU):
    """x * tanh(softplus(x))."""

    def forward(self, input):
        return F.mish(input)


class ELU(Module):
    """x for x > 0, alpha * (exp(x) - 1) otherwise."""

    def __init__(self, alpha=1.0, inplace=False):
        super().__init__()
        self.alpha, self.inplace = alpha, inplace

    def forward(self, input):
        return F.elu(input, self.alpha)

    def extra_repr(self) -> str:
        return f"alpha={self.alpha}" + _inplace_repr(self.inplace, ", ")


class LeakyReLU(Module):
    """x for x > 0, negative_slope * x otherwise.

    Example:
        >>> nn.LeakyReLU(0.2)
        LeakyReLU(negative_slope=0.2)
    """

    def __init__(self, negative_slope=0.01, inplace=False):
        super().__init__()
        self.negative_slope, self.inplace = negative_slope, inplace

    def forward(self, input):
        return F.leaky_relu(input, self.negative_slope)

    def extra_repr(self) -> str:
        return f"negative_slope={self.negative_slope}" + _inplace_repr(self.inplace, ", ")


class Hardtanh(Module):
    """Clamp to [min_val, max_val]."""

    def __init__(self, min_val=-1.0, max_val=1.0, inplace=False):
        super().__init__()
        self.min_val, self.max_val, self.inplace = min_val, max_val, inplace

    def forward(self, input):
        return F.hardtanh(input, self.min_val, self.max_val)

    def extra_repr(self) -> str:
        return f"min_val={self.min_val}, max_val={self.max_val}" + _inplace_repr(self.inplace, ", ")


class Softplus(Module):
    """log(1 + exp(beta * x)) / beta, linear above ``threshold``.

    Example:
        >>> nn.Softplus()
        Softplus(beta=1.0, threshold=20.0)
    """

    def __init__(self, beta=1.0, threshold=20.0):
        super().__init__()
        self.beta, self.threshold = beta, threshold

    def forward(self, input):
        return F.softplus(input, self.beta, self.threshold)

    def extra_repr(self) -> str:
        return f"beta={self.beta}, threshold={self.threshold}"


class Tanh(Module):
    """Hyperbolic tangent."""

    def forward(self, input):
        return F.tanh(input)


class Sigmoid(Module):
    """1 / (1 + exp(-x))."""

    def forward(self, input):
        return F.sigmoid(input)


class LogSigmoid(Module):
    """log(sigmoid(x)), computed stably."""

    def forward(self, input):
        return F.logsigmoid(input)


class Softmax(Module):
    """softmax along ``dim``.

    Example:
        >>> nn.Softmax(dim=-1)(webgrad.zeros(2, 4))[0]
        tensor([0.2500, 0.2500, 0.2500, 0.2500])
    """

    def __init__(self, dim=None):
        super().__init__()
        self.dim = dim

    def forward(self, input):
        return F.softmax(input, self.dim)

    def extra_repr(self) -> str:
        return f"dim={self.dim}"


class LogSoftmax(Softmax):
    """log(softmax(x)) along ``dim``, computed stably."""

    def forward(self, input):
        return F.log_softmax(input, self.dim)
