"""Random draws as in PyTorch, from webgrad's own streams (``webgrad.manual_seed`` or a
``generator=``): bernoulli, normal (its four forms), poisson, and the in-place family
uniform_, normal_, bernoulli_, exponential_, geometric_, cauchy_, log_normal_ and random_.

Each one transforms uniform or standard-normal draws (``rand``/``randn``, made on the
tensor's device, or on the host from a ``generator``) with Tensor ops, so it runs on
every device. ``poisson`` draws on the host (numpy) and uploads.
"""
from __future__ import annotations

import math

import numpy as np

from .. import dtypes
from ..creation import rand, randn, tensor
from ..random import numpy_generator_for
from ..tensor import Tensor
from ._helpers import broadcast_shapes, describe
from .elementwise import cast, cos, exp, log, sin, where
from .indexing import copy_
from .registry import OpError


def _float_dtype(t):
    return t.dtype if t.dtype.category == "float" else dtypes.get_default_dtype()


def _uniform(shape, dtype, device, generator):
    return rand(*shape, generator=generator, dtype=dtype, device=device)


def _normal(shape, dtype, device, generator):
    return randn(*shape, generator=generator, dtype=dtype, device=device)


def bernoulli(input, p=None, *, generator=None):  # noqa: A002  (torch's names)
    """1 with probability ``input`` (or ``p``), else 0, in ``input``'s dtype.

    Example:
        >>> webgrad.bernoulli(webgrad.full((3,), 0.5))
    """
    probs = input.detach() if p is None else p
    if isinstance(probs, Tensor) and probs.dtype.category != "float":
        raise OpError(f"bernoulli: expected float probabilities, got {describe(probs)}")
    u = _uniform(tuple(input.shape), _float_dtype(input), input.device, generator)
    draws = cast(u < probs, input.dtype)
    if input.requires_grad:  # PyTorch keeps the draw in the graph with a zero gradient
        draws = where(tensor(True, device=input.device), draws, input)
    return draws


def normal(mean, std=1.0, size=None, *, generator=None, dtype=None, device=None, requires_grad=False):
    """Normal draws: ``normal(mean, std)`` with tensor (or number) mean and std broadcast
    together, or ``normal(mean, std, size)`` with numbers. Differentiable in mean and std
    (mean + std * eps), as in PyTorch."""
    if isinstance(mean, Tensor) or isinstance(std, Tensor):
        if size is not None:
            raise OpError("normal: size is only accepted with number mean and std")
        shapes = [tuple(t.shape) for t in (mean, std) if isinstance(t, Tensor)]
        like = mean if isinstance(mean, Tensor) else std
        if isinstance(std, Tensor) and std.dtype.category == "float" and bool((std.detach() < 0).any()):
            raise OpError("normal: expects all elements of std >= 0.0")
        shape = broadcast_shapes("normal", *shapes)
        return mean + std * _normal(shape, _float_dtype(like), like.device, generator)
    if size is None:
        raise TypeError("normal: with number mean and std, size is required, e.g. normal(0.0, 1.0, (3,))")
    if std < 0:
        raise OpError(f"normal: expects std >= 0.0, but found std {std}")
    size = (size,) if isinstance(size, int) else tuple(size)
    out = _normal(size, dtype, device, generator) * std + mean
    return out.detach().requires_grad_(requires_grad) if requires_grad else out


def poisson(input, generator=None):  # noqa: A002
    """Poisson counts with rates ``input`` (same shape and dtype), drawn on the host."""
    rates = input.detach()._host()
    if (rates < 0).any():
        raise OpError("poisson: rates must be non-negative")
    draws = numpy_generator_for(generator).poisson(rates)
    return tensor(np.asarray(draws), dtype=input.dtype, device=input.device)


# -- in place: x is refilled, its shape, dtype and device kept --------------------------
def _fill(x, values):
    return copy_(x, values)


def _from_to(args, kwargs, defaults):
    """``uniform_(0, 1)`` or ``uniform_(from=0, to=1)``: ``from`` is a Python keyword, so
    it arrives in **kwargs."""
    values = list(args) + [None] * (2 - len(args))
    for i, name in enumerate(("from", "to")):
        if name in kwargs:
            values[i] = kwargs.pop(name)
    if kwargs:
        raise TypeError(f"unexpected keyword arguments {sorted(kwargs)}")
    return [defaults[i] if v is None else v for i, v in enumerate(values)]


def uniform_(x, *args, generator=None, **kwargs):
    """Fill with uniform draws in [from, to) (default [0, 1))."""
    low, high = _from_to(args, kwargs, (0.0, 1.0))
    return _fill(x, _uniform(tuple(x.shape), _float_dtype(x), x.device, generator) * (high - low) + low)


def normal_(x, mean=0.0, std=1.0, *, generator=None):
    return _fill(x, _normal(tuple(x.shape), _float_dtype(x), x.device, generator) * std + mean)


def bernoulli_(x, p=0.5, *, generator=None):
    return _fill(x, bernoulli(x, p, generator=generator))


def exponential_(x, lambd=1.0, *, generator=None):
    """Fill with exponential draws of rate ``lambd``: -log(1 - u) / lambd."""
    if lambd <= 0:
        raise OpError(f"exponential_: expects lambda > 0.0, but found lambda={lambd}")
    u = _uniform(tuple(x.shape), _float_dtype(x), x.device, generator)
    return _fill(x, -log(1.0 - u) / lambd)


def geometric_(x, p, *, generator=None):
    """Fill with the number of Bernoulli(p) trials up to the first success (1, 2, ...)."""
    if not 0 < p < 1:
        raise OpError(f"geometric_: expects p to be in (0, 1), but got p={p}")
    u = _uniform(tuple(x.shape), _float_dtype(x), x.device, generator)
    trials = (log(1.0 - u) / math.log(1.0 - p)).ceil()
    return _fill(x, where(trials < 1, 1.0, trials))


def cauchy_(x, median=0.0, sigma=1.0, *, generator=None):
    """Fill with Cauchy draws: median + sigma * tan(pi * (u - 1/2))."""
    angle = (_uniform(tuple(x.shape), _float_dtype(x), x.device, generator) - 0.5) * math.pi
    return _fill(x, median + sigma * sin(angle) / cos(angle))


def log_normal_(x, mean=1.0, std=2.0, *, generator=None):
    """Fill with exp of normal(mean, std) draws."""
    return _fill(x, exp(_normal(tuple(x.shape), _float_dtype(x), x.device, generator) * std + mean))


def random_(x, *args, generator=None, **kwargs):
    """Fill with integers uniform in [from, to); ``random_(to)`` is [0, to); with no bounds,
    [0, 2**mantissa] for floats and [0, max] of the dtype for ints (as in PyTorch)."""
    if len(args) == 1 and "to" not in kwargs:
        args = (0, args[0])
    low, high = _from_to(args, kwargs, (0, None))
    if high is None:
        if x.dtype.category == "float":
            high = 2 ** {"float64": 53, "float32": 24, "float16": 11, "bfloat16": 8}.get(x.dtype.name, 24) + 1
        elif x.dtype is dtypes.bool_:
            high = 2
        else:
            high = int(np.iinfo(x.dtype.np).max)
    if high <= low:
        raise OpError(f"random_: expects 'from' to be less than 'to', but got from={low} >= to={high}")
    u = _uniform(tuple(x.shape), dtypes.float64 if x.device == "cpu" else dtypes.float32, x.device, generator)
    drawn = (u * float(high - low)).floor() + low
    return _fill(x, where(drawn >= high, high - 1, drawn))
