"""Activation functions beyond the basic ones in ``functional.py`` (re-exported by ``nn.functional``).

Each is composed of Tensor ops, so it runs on every backend and differentiates
through autograd. At a kink the gradient is PyTorch's choice: ``where`` sends the
gradient down the branch the value came from, so each condition below is written
the way PyTorch's backward formula tests it (``x > 0`` for elu, strict bounds for
hardtanh, ...).

``inplace=True`` writes the result into the input, as in PyTorch (through the
same differentiable in-place update as ``Tensor.relu_``).
"""
from __future__ import annotations

from .. import ops
from ..ops._helpers import describe
from ..ops.registry import OpError
from ..ops.autocasting import autocast_op

__all__ = [
    "hardswish", "hardsigmoid", "selu", "celu", "prelu", "glu", "softsign", "threshold", "softmin",
    "tanhshrink", "softshrink", "hardshrink", "rrelu", "relu_", "elu_", "leaky_relu_", "hardtanh_",
    "threshold_", "celu_", "selu_", "rrelu_",
]

_SELU_ALPHA = 1.6732632423543772848170429916717
_SELU_SCALE = 1.0507009873554804934193349852946


def in_place(name, input, inplace, compute):
    """``compute(input)``, or with ``inplace`` that result written into ``input`` (returned)."""
    if not inplace:
        return compute(input)
    return ops.update_(name + "_", input, compute, direct=compute is ops.relu)


def _negative_part(x):
    """x where x <= 0 and 0 elsewhere; the gradient at 0 is 1 (PyTorch's elu/selu/celu backward)."""
    return ops.where(x > 0, 0.0, x)


def elu_core(x, alpha=1.0):
    return ops.where(x > 0, x, alpha * ops.expm1(_negative_part(x)))


def hardtanh_core(x, min_val=-1.0, max_val=1.0):
    if min_val > max_val:
        raise ValueError(f"hardtanh: min_val ({min_val}) cannot be greater than max_val ({max_val})")
    # Strict inside, so the gradient at either bound is 0 as in PyTorch (clamp would give 1).
    return ops.where(x <= min_val, min_val, ops.where(x >= max_val, max_val, x))


def hardswish(input, inplace=False):
    """x * relu6(x + 3) / 6.

    Example:
        >>> F.hardswish(webgrad.tensor([-4.0, 1.0, 4.0]))
        tensor([-0.0000,  0.6667,  4.0000])
    """
    def compute(x):
        return ops.where(x <= -3.0, 0.0, ops.where(x >= 3.0, x, x * (x + 3.0) * (1.0 / 6.0)))
    return in_place("hardswish", input, inplace, compute)


def hardsigmoid(input, inplace=False):
    """relu6(x + 3) / 6: 0 below -3, 1 above 3, linear between.

    Example:
        >>> F.hardsigmoid(webgrad.tensor([0.0]))
        tensor([0.5000])
    """
    def compute(x):
        return ops.where(x <= -3.0, 0.0, ops.where(x >= 3.0, 1.0, x * (1.0 / 6.0) + 0.5))
    return in_place("hardsigmoid", input, inplace, compute)


def selu(input, inplace=False):
    """scale * elu(x, alpha) with the self-normalizing constants (alpha 1.6733, scale 1.0507)."""
    return in_place("selu", input, inplace, lambda x: elu_core(x, _SELU_ALPHA) * _SELU_SCALE)


def celu(input, alpha=1.0, inplace=False):
    """x for x > 0, alpha * (exp(x / alpha) - 1) otherwise."""
    if alpha == 0:
        raise ValueError("celu: alpha must not be 0 (it divides x)")
    return in_place("celu", input, inplace,
                    lambda x: ops.where(x > 0, x, alpha * ops.expm1(_negative_part(x) * (1.0 / alpha))))


@autocast_op("prelu")
def prelu(input, weight):
    """x for x > 0, weight * x otherwise; ``weight`` has one slope or one per channel (dim 1).

    Example:
        >>> F.prelu(webgrad.tensor([[-2.0, 3.0]]), webgrad.tensor([0.25]))
        tensor([[-0.5000,  3.0000]])
    """
    if weight.numel() != 1:
        channels = input.shape[1] if input.ndim >= 2 else 1
        if weight.ndim != 1 or weight.shape[0] != channels:
            raise OpError(f"prelu: weight {describe(weight)} must have 1 element or one per channel "
                          f"({channels}) of input {describe(input)}")
        weight = weight.reshape((channels,) + (1,) * (input.ndim - 2))
    else:
        weight = weight.reshape(())  # one slope: the result keeps the input's shape
    return ops.where(input > 0, input, weight * input)


def glu(input, dim=-1):
    """a * sigmoid(b), where a and b are the two halves of ``input`` along ``dim``.

    Example:
        >>> F.glu(webgrad.randn(4, 6)).shape
        webgrad.Size([4, 3])
    """
    if input.ndim == 0:
        raise OpError("glu: does not support scalars because halving size must be even")
    size = input.shape[dim]
    if size % 2:
        raise OpError(f"glu: halving dimension must be even, but dimension {dim} is size {size}")
    a, b = ops.split(input, size // 2, dim)
    return a * ops.sigmoid(b)


def softsign(input):
    """x / (1 + |x|)."""
    return input / (ops.abs(input) + 1.0)


def threshold(input, threshold, value, inplace=False):
    """x where x > threshold, else ``value``.

    Example:
        >>> F.threshold(webgrad.tensor([0.5, 2.0]), 1.0, -1.0)
        tensor([-1.,  2.])
    """
    return in_place("threshold", input, inplace, lambda x: ops.where(x > threshold, x, value))


def softmin(input, dim=None, _stacklevel=3, dtype=None):
    """softmax(-x) along ``dim``."""
    if dtype is not None:
        input = input.to(dtype)
    if dim is None:
        dim = 0 if input.ndim in (0, 1, 3) else 1
    return ops.softmax(-input, dim)


def tanhshrink(input):
    """x - tanh(x)."""
    return input - ops.tanh(input)


def softshrink(input, lambd=0.5):
    """x - lambd above lambd, x + lambd below -lambd, 0 between."""
    if lambd < 0:
        raise ValueError(f"softshrink: lambda must be greater or equal to 0, but found to be {lambd}")
    return ops.where(input > lambd, input - lambd, ops.where(input < -lambd, input + lambd, 0.0))


def hardshrink(input, lambd=0.5):
    """x where |x| > lambd, else 0."""
    return ops.where((input > lambd) | (input < -lambd), input, 0.0)


def rrelu(input, lower=1.0 / 8, upper=1.0 / 3, training=False, inplace=False):
    """Leaky ReLU with a random slope U(lower, upper) per element while training, (lower + upper) / 2 otherwise.

    Example:
        >>> F.rrelu(webgrad.tensor([-2.0, 1.0]))   # eval: slope 11/48
        tensor([-0.4583,  1.0000])
    """
    if not 0 <= lower <= upper:
        raise ValueError(f"rrelu: expected 0 <= lower <= upper, got lower={lower}, upper={upper}")
    if not training:
        slope = (lower + upper) / 2.0
        return in_place("rrelu", input, inplace, lambda x: ops.where(x > 0, x, x * slope))
    noise = ops.rand_like(input.detach()) * (upper - lower) + lower
    return in_place("rrelu", input, inplace, lambda x: ops.where(x >= 0, x, x * noise))


def relu_(input):
    """relu, written into ``input``."""
    return in_place("relu", input, True, ops.relu)


def elu_(input, alpha=1.0):
    """elu, written into ``input``."""
    return in_place("elu", input, True, lambda x: elu_core(x, alpha))


def leaky_relu_(input, negative_slope=0.01):
    """leaky_relu, written into ``input``."""
    return in_place("leaky_relu", input, True, lambda x: ops.where(x > 0, x, x * negative_slope))


def hardtanh_(input, min_val=-1.0, max_val=1.0):
    """hardtanh, written into ``input``."""
    return in_place("hardtanh", input, True, lambda x: hardtanh_core(x, min_val, max_val))


def threshold_(input, threshold, value):
    """threshold, written into ``input``."""
    return in_place("threshold", input, True, lambda x: ops.where(x > threshold, x, value))


def celu_(input, alpha=1.0):
    """celu, written into ``input``."""
    return celu(input, alpha, inplace=True)


def selu_(input):
    """selu, written into ``input``."""
    return selu(input, inplace=True)


def rrelu_(input, lower=1.0 / 8, upper=1.0 / 3, training=False):
    """rrelu, written into ``input``."""
    return rrelu(input, lower, upper, training, inplace=True)

