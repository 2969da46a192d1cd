"""Activation layers: thin modules around ``nn.functional``."""
from __future__ import annotations

from ... import creation
from .. import functional as F
from .. import init
from ..parameter import Parameter
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
        return F.relu(input, self.inplace)

    def extra_repr(self) -> str:
        return _inplace_repr(self.inplace)


class ReLU6(ReLU):
    """min(max(x, 0), 6)."""

    def forward(self, input):
        return F.relu6(input, self.inplace)


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
        return F.silu(input, self.inplace)

    def extra_repr(self) -> str:
        return _inplace_repr(self.inplace)


class Mish(SiLU):
    """x * tanh(softplus(x))."""

    def forward(self, input):
        return F.mish(input, self.inplace)


class ELU(Module):
    """x for x > 0, alpha * (exp(x) - 1) otherwise."""

    def __init__(self, alpha=1.0, inplace=False):
        super().__init__()
        self.alpha, self.inplace = alpha, inplace

    def forward(self, input):
        return F.elu(input, self.alpha, self.inplace)

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
        return F.leaky_relu(input, self.negative_slope, self.inplace)

    def extra_repr(self) -> str:
        return f"negative_slope={self.negative_slope}" + _inplace_repr(self.inplace, ", ")


class Hardtanh(Module):
    """Clamp to [min_val, max_val]."""

    def __init__(self, min_val=-1.0, max_val=1.0, inplace=False):
        super().__init__()
        self.min_val, self.max_val, self.inplace = min_val, max_val, inplace

    def forward(self, input):
        return F.hardtanh(input, self.min_val, self.max_val, self.inplace)

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


class _InplaceActivation(Module):
    def __init__(self, inplace=False):
        super().__init__()
        self.inplace = inplace

    def extra_repr(self) -> str:
        return _inplace_repr(self.inplace)


class Hardswish(_InplaceActivation):
    """x * relu6(x + 3) / 6."""

    def forward(self, input):
        return F.hardswish(input, self.inplace)


class Hardsigmoid(_InplaceActivation):
    """relu6(x + 3) / 6."""

    def forward(self, input):
        return F.hardsigmoid(input, self.inplace)


class SELU(_InplaceActivation):
    """scale * elu(x, alpha) with the self-normalizing constants."""

    def forward(self, input):
        return F.selu(input, self.inplace)


class CELU(Module):
    """x for x > 0, alpha * (exp(x / alpha) - 1) otherwise."""

    def __init__(self, alpha=1.0, inplace=False):
        super().__init__()
        self.alpha, self.inplace = alpha, inplace

    def forward(self, input):
        return F.celu(input, self.alpha, self.inplace)

    def extra_repr(self) -> str:
        return f"alpha={self.alpha}" + _inplace_repr(self.inplace, ", ")


class PReLU(Module):
    """Leaky ReLU with a learned slope: one (``num_parameters=1``) or one per channel, starting at ``init``.

    Example:
        >>> nn.PReLU(3)(webgrad.randn(2, 3, 5)).shape
        webgrad.Size([2, 3, 5])
    """

    def __init__(self, num_parameters=1, init=0.25, device=None, dtype=None):
        super().__init__()
        self.num_parameters, self.init = num_parameters, init
        self.weight = Parameter(creation.empty(num_parameters, dtype=dtype, device=device))
        self.reset_parameters()

    def reset_parameters(self) -> None:
        init.constant_(self.weight, self.init)

    def forward(self, input):
        return F.prelu(input, self.weight)

    def extra_repr(self) -> str:
        return f"num_parameters={self.num_parameters}"


class GLU(Module):
    """a * sigmoid(b) for the two halves a, b of the input along ``dim``."""

    def __init__(self, dim=-1):
        super().__init__()
        self.dim = dim

    def forward(self, input):
        return F.glu(input, self.dim)

    def extra_repr(self) -> str:
        return f"dim={self.dim}"


class Softsign(Module):
    """x / (1 + |x|)."""

    def forward(self, input):
        return F.softsign(input)


class Tanhshrink(Module):
    """x - tanh(x)."""

    def forward(self, input):
        return F.tanhshrink(input)


class Threshold(Module):
    """x where x > threshold, else ``value``.

    Example:
        >>> nn.Threshold(0.1, 20.0)
        Threshold(threshold=0.1, value=20.0)
    """

    def __init__(self, threshold, value, inplace=False):
        super().__init__()
        self.threshold, self.value, self.inplace = threshold, value, inplace

    def forward(self, input):
        return F.threshold(input, self.threshold, self.value, self.inplace)

    def extra_repr(self) -> str:
        return f"threshold={self.threshold}, value={self.value}" + _inplace_repr(self.inplace, ", ")


class Softshrink(Module):
    """x -/+ lambd outside [-lambd, lambd], 0 inside."""

    def __init__(self, lambd=0.5):
        super().__init__()
        self.lambd = lambd

    def forward(self, input):
        return F.softshrink(input, self.lambd)

    def extra_repr(self) -> str:
        return str(self.lambd)


class Hardshrink(Softshrink):
    """x outside [-lambd, lambd], 0 inside."""

    def forward(self, input):
        return F.hardshrink(input, self.lambd)


class RReLU(Module):
    """Randomized leaky ReLU: slope U(lower, upper) while training, their mean in eval."""

    def __init__(self, lower=1.0 / 8, upper=1.0 / 3, inplace=False):
        super().__init__()
        self.lower, self.upper, self.inplace = lower, upper, inplace

    def forward(self, input):
        return F.rrelu(input, self.lower, self.upper, self.training, self.inplace)

    def extra_repr(self) -> str:
        return f"lower={self.lower}, upper={self.upper}" + _inplace_repr(self.inplace, ", ")


class Softmin(Softmax):
    """softmax(-x) along ``dim``."""

    def forward(self, input):
        return F.softmin(input, self.dim)


class Softmax2d(Module):
    """softmax over the channels of (N, C, H, W) or (C, H, W) input."""

    def forward(self, input):
        if input.ndim not in (3, 4):
            raise ValueError(f"Softmax2d: expected input of 3 or 4 dimensions, got {input.ndim}")
        return F.softmax(input, -3)
