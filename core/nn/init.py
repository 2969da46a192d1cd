"""``webgrad.nn.init``: fill parameters in place with PyTorch's initialisation schemes.

Every function works under ``no_grad`` through ``Tensor.uniform_``/``normal_``/
``copy_`` and draws from webgrad's seeded generator, so ``webgrad.manual_seed``
makes model initialisation reproducible.

Example:
    >>> w = webgrad.empty(64, 32)
    >>> nn.init.kaiming_uniform_(w, a=math.sqrt(5))
"""
from __future__ import annotations

import math
import warnings

import numpy as np

from .. import creation, ops
from ..autograd import no_grad
from ..creation import eye
from ..random import numpy_generator_for

__all__ = ["calculate_gain", "uniform_", "normal_", "constant_", "zeros_", "ones_", "eye_", "dirac_",
           "xavier_uniform_", "xavier_normal_", "kaiming_uniform_", "kaiming_normal_", "trunc_normal_",
           "orthogonal_", "sparse_"]


def calculate_gain(nonlinearity, param=None):
    """The recommended gain for a nonlinearity (e.g. sqrt(2) for 'relu'), as in PyTorch.

    Example:
        >>> nn.init.calculate_gain("tanh")
        1.6666666666666667
    """
    linear_fns = ("linear", "conv1d", "conv2d", "conv3d", "conv_transpose1d", "conv_transpose2d",
                  "conv_transpose3d")
    if nonlinearity in linear_fns or nonlinearity == "sigmoid":
        return 1
    if nonlinearity == "tanh":
        return 5.0 / 3
    if nonlinearity == "relu":
        return math.sqrt(2.0)
    if nonlinearity == "leaky_relu":
        if param is None:
            negative_slope = 0.01
        elif isinstance(param, (int, float)) and not isinstance(param, bool):
            negative_slope = param
        else:
            raise ValueError(f"negative_slope {param} not a valid number")
        return math.sqrt(2.0 / (1 + negative_slope**2))
    if nonlinearity == "selu":
        return 3.0 / 4
    raise ValueError(f"Unsupported nonlinearity {nonlinearity}")


def _calculate_fan_in_and_fan_out(tensor):
    """(fan_in, fan_out) of a weight: dim 1 and dim 0 times the receptive field (kernel) size."""
    if tensor.ndim < 2:
        raise ValueError(f"Fan in and fan out can not be computed for tensor with fewer than 2 dimensions "
                         f"(got shape {tuple(tensor.shape)})")
    receptive_field = 1
    for s in tensor.shape[2:]:
        receptive_field *= s
    return tensor.shape[1] * receptive_field, tensor.shape[0] * receptive_field


def _fan(tensor, mode):
    if mode not in ("fan_in", "fan_out"):
        raise ValueError(f"mode {mode!r} not supported, please use one of 'fan_in', 'fan_out'")
    fan_in, fan_out = _calculate_fan_in_and_fan_out(tensor)
    return fan_in if mode == "fan_in" else fan_out


def _draw(tensor, kind, generator):
    """Standard uniform or normal samples shaped like ``tensor``, from ``generator`` (or the global stream)."""
    draw = creation.rand if kind == "uniform" else creation.randn
    return draw(*tensor.shape, generator=generator, dtype=tensor.dtype, device=tensor.device)


def uniform_(tensor, a=0.0, b=1.0, generator=None):
    """Fill with samples from U(a, b).

    Example:
        >>> nn.init.uniform_(webgrad.empty(3, 5), -0.1, 0.1)
    """
    with no_grad():
        if generator is None:
            return tensor.uniform_(a, b)
        return tensor.copy_(_draw(tensor, "uniform", generator) * (b - a) + a)


def normal_(tensor, mean=0.0, std=1.0, generator=None):
    """Fill with samples from N(mean, std²)."""
    with no_grad():
        if generator is None:
            return tensor.normal_(mean, std)
        return tensor.copy_(_draw(tensor, "normal", generator) * std + mean)


def constant_(tensor, val):
    """Fill with ``val``."""
    with no_grad():
        return tensor.fill_(val)


def zeros_(tensor):
    """Fill with zeros."""
    return constant_(tensor, 0.0)


def ones_(tensor):
    """Fill with ones."""
    return constant_(tensor, 1.0)


def eye_(tensor):
    """Fill a 2-D tensor with the identity matrix."""
    if tensor.ndim != 2:
        raise ValueError(f"eye_: only tensors with 2 dimensions are supported, got shape {tuple(tensor.shape)}")
    with no_grad():
        return tensor.copy_(eye(*tensor.shape, dtype=tensor.dtype, device=tensor.device))


def xavier_uniform_(tensor, gain=1.0, generator=None):
    """Glorot uniform: U(-a, a) with a = gain * sqrt(6 / (fan_in + fan_out)).

    Example:
        >>> nn.init.xavier_uniform_(webgrad.empty(3, 5), gain=nn.init.calculate_gain("relu"))
    """
    fan_in, fan_out = _calculate_fan_in_and_fan_out(tensor)
    bound = math.sqrt(3.0) * gain * math.sqrt(2.0 / float(fan_in + fan_out))
    return uniform_(tensor, -bound, bound, generator)


def xavier_normal_(tensor, gain=1.0, generator=None):
    """Glorot normal: N(0, std²) with std = gain * sqrt(2 / (fan_in + fan_out))."""
    fan_in, fan_out = _calculate_fan_in_and_fan_out(tensor)
    return normal_(tensor, 0.0, gain * math.sqrt(2.0 / float(fan_in + fan_out)), generator)


def kaiming_uniform_(tensor, a=0, mode="fan_in", nonlinearity="leaky_relu", generator=None):
    """He uniform: U(-b, b) with b = gain * sqrt(3 / fan); ``a`` is leaky_relu's negative slope.

    Example:
        >>> nn.init.kaiming_uniform_(webgrad.empty(3, 5), mode="fan_in", nonlinearity="relu")
    """
    if 0 in tensor.shape:
        warnings.warn("Initializing zero-element tensors is a no-op", stacklevel=2)
        return tensor
    std = calculate_gain(nonlinearity, a) / math.sqrt(_fan(tensor, mode))
    bound = math.sqrt(3.0) * std
    return uniform_(tensor, -bound, bound, generator)


def kaiming_normal_(tensor, a=0, mode="fan_in", nonlinearity="leaky_relu", generator=None):
    """He normal: N(0, std²) with std = gain / sqrt(fan)."""
    if 0 in tensor.shape:
        warnings.warn("Initializing zero-element tensors is a no-op", stacklevel=2)
        return tensor
    return normal_(tensor, 0.0, calculate_gain(nonlinearity, a) / math.sqrt(_fan(tensor, mode)), generator)


def trunc_normal_(tensor, mean=0.0, std=1.0, a=-2.0, b=2.0, generator=None):
    """Fill with N(mean, std²) truncated to [a, b], by the inverse CDF (as PyTorch).

    Uniform samples between the CDF values of a and b are mapped back through
    sqrt(2) * erfinv(2u - 1), then clamped to [a, b] against rounding.

    Example:
        >>> nn.init.trunc_normal_(webgrad.empty(3, 5), std=0.02)
    """
    if not a < b:
        raise ValueError(f"trunc_normal_: expected a < b, got a={a}, b={b}")
    if mean < a - 2 * std or mean > b + 2 * std:
        warnings.warn("mean is more than 2 std from [a, b] in nn.init.trunc_normal_. The distribution of values "
                      "may be incorrect.", stacklevel=2)

    def cdf(x):
        return (1.0 + math.erf(x / math.sqrt(2.0))) / 2.0

    low, high = cdf((a - mean) / std), cdf((b - mean) / std)
    with no_grad():
        u = _draw(tensor, "uniform", generator) * (2 * high - 2 * low) + (2 * low - 1)
        values = ops.erfinv(u) * (std * math.sqrt(2.0)) + mean
        return tensor.copy_(ops.clamp(values, a, b))


def dirac_(tensor, groups=1):
    """Fill a 3-, 4- or 5-D (conv) weight with the Dirac delta: each output channel passes its input channel.

    Example:
        >>> nn.init.dirac_(webgrad.empty(4, 4, 3, 3))
    """
    if tensor.ndim not in (3, 4, 5):
        raise ValueError("Only tensors with 3, 4, or 5 dimensions are supported")
    sizes = tuple(tensor.shape)
    if sizes[0] % groups != 0:
        raise ValueError("dim 0 must be divisible by groups")
    out_per_group = sizes[0] // groups
    values = np.zeros(sizes)
    centre = tuple(s // 2 for s in sizes[2:])
    for g in range(groups):
        for d in range(min(out_per_group, sizes[1])):
            values[(g * out_per_group + d, d) + centre] = 1
    with no_grad():
        return tensor.copy_(creation.tensor(values, dtype=tensor.dtype, device=tensor.device))


def orthogonal_(tensor, gain=1, generator=None):
    """Fill with a (semi-)orthogonal matrix (the trailing dims flattened), times ``gain``.

    The Q of a Gaussian matrix's QR decomposition, signs fixed by R's diagonal, as
    PyTorch; the decomposition runs on the host.

    Example:
        >>> q = nn.init.orthogonal_(webgrad.empty(3, 5))
        >>> q @ q.T   # about the identity
    """
    if tensor.ndim < 2:
        raise ValueError("Only tensors with 2 or more dimensions are supported")
    if tensor.numel() == 0:
        return tensor
    rows = tensor.shape[0]
    cols = tensor.numel() // rows
    flat = numpy_generator_for(generator).standard_normal((rows, cols))
    if rows < cols:
        flat = flat.T
    q, r = np.linalg.qr(flat)
    q = q * np.sign(np.diag(r))
    if rows < cols:
        q = q.T
    with no_grad():
        return tensor.copy_(creation.tensor(q.reshape(tuple(tensor.shape)) * gain, dtype=tensor.dtype,
                                            device=tensor.device))


def sparse_(tensor, sparsity, std=0.01, generator=None):
    """Fill a 2-D tensor with N(0, std²) values, then zero ``ceil(sparsity * rows)`` random rows of each column.

    Example:
        >>> nn.init.sparse_(webgrad.empty(10, 4), sparsity=0.3)
    """
    if tensor.ndim != 2:
        raise ValueError("Only tensors with 2 dimensions are supported")
    rows, cols = tensor.shape
    zeros = int(math.ceil(sparsity * rows))
    rng = numpy_generator_for(generator)
    values = rng.standard_normal((rows, cols)) * std
    for col in range(cols):
        values[rng.permutation(rows)[:zeros], col] = 0
    with no_grad():
        return tensor.copy_(creation.tensor(values, dtype=tensor.dtype, device=tensor.device))
