"""Continuous distributions: Normal, Uniform, Laplace, Exponential, Gamma, Beta, Dirichlet.

Every one has ``rsample`` (reparameterized: gradients reach the parameters). Gamma,
Beta and Dirichlet draw standard gamma variates on the host from webgrad's generator
(numpy's sampler) and get their gradient w.r.t. the concentration by implicit
reparameterization (``gamma_grad.py``), as PyTorch; Beta and Dirichlet are normalized
gammas, so their per-sample gradients differ from PyTorch's (the expectations agree).
"""
from __future__ import annotations

import math

import numpy as np

from .. import autograd, creation, ops
from ..tensor import Size, Tensor
from . import constraints
from .gamma_grad import standard_gamma_grad
from .distribution import (
    Distribution, ExponentialFamily, broadcast_all, eps, host, host_draw, nan_like, tiny,
)


def _draw_shape(distribution, sample_shape) -> tuple:
    return tuple(distribution._extended_shape(sample_shape))


def _standard_gamma(concentration: Tensor) -> Tensor:
    """Gamma(concentration, 1) samples of concentration's shape; differentiable w.r.t. it (implicit
    reparameterization) when gradients are on."""
    a = host(concentration)
    x = host_draw(lambda rng, s: np.maximum(rng.standard_gamma(a, size=s), tiny(concentration.dtype)),
                  a.shape, concentration)
    if not (autograd.is_grad_enabled() and concentration.requires_grad):
        return x
    grad = creation.tensor(standard_gamma_grad(a, x.numpy()), dtype=x.dtype, device=x.device)
    return x + (concentration - concentration.detach()) * grad  # the value of x, the gradient dx/da


class Normal(ExponentialFamily):
    """The normal (Gaussian) distribution with mean ``loc`` and standard deviation ``scale``.

    Example:
        >>> m = Normal(webgrad.tensor([0.0]), webgrad.tensor([1.0]))
        >>> m.sample().shape
        webgrad.Size([1])
    """

    arg_constraints = {"loc": constraints.real, "scale": constraints.positive}
    support = constraints.real
    has_rsample = True

    def __init__(self, loc, scale, validate_args=None):
        self.loc, self.scale = broadcast_all(loc, scale)
        super().__init__(self.loc.shape, validate_args=validate_args)

    @property
    def mean(self): return self.loc

    @property
    def mode(self): return self.loc

    @property
    def stddev(self): return self.scale

    @property
    def variance(self): return self.scale.pow(2)

    def rsample(self, sample_shape=Size()):
        noise = creation.randn(_draw_shape(self, sample_shape), dtype=self.loc.dtype, device=self.loc.device)
        return self.loc + noise * self.scale

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        return -((value - self.loc) ** 2) / (2 * self.variance) - self.scale.log() - math.log(math.sqrt(2 * math.pi))

    def cdf(self, value):
        if self._validate_args:
            self._validate_sample(value)
        return 0.5 * (1 + ops.erf((value - self.loc) * self.scale.reciprocal() / math.sqrt(2)))

    def icdf(self, value):
        return self.loc + self.scale * (2 * value - 1).erfinv() * math.sqrt(2)

    def entropy(self):
        return 0.5 + 0.5 * math.log(2 * math.pi) + self.scale.log()


class Uniform(Distribution):
    """Uniform on the half-open interval ``[low, high)``.

    Example:
        >>> Uniform(0.0, 5.0).sample((2,)).shape
        webgrad.Size([2])
    """

    arg_constraints = {"low": constraints.dependent, "high": constraints.dependent}
    has_rsample = True

    def __init__(self, low, high, validate_args=None):
        self.low, self.high = broadcast_all(low, high)
        super().__init__(self.low.shape, validate_args=validate_args)
        if self._validate_args and not bool((self.low < self.high).all()):
            raise ValueError(f"Expected parameter low ({tuple(self.low.shape)}) of distribution {self!r} to be "
                             f"less than high, but found invalid values:\nlow={self.low}\nhigh={self.high}")

    def __repr__(self) -> str:
        return f"Uniform(low: {self.low.size()}, high: {self.high.size()})"

    @property
    def support(self):  # type: ignore[override]
        return constraints.interval(self.low, self.high)

    def _parameter_names(self):
        return ("low", "high")

    @property
    def mean(self): return (self.high + self.low) / 2

    @property
    def mode(self): return nan_like(self.high)

    @property
    def stddev(self): return (self.high - self.low) / 12 ** 0.5

    @property
    def variance(self): return (self.high - self.low).pow(2) / 12

    def rsample(self, sample_shape=Size()):
        u = creation.rand(_draw_shape(self, sample_shape), dtype=self.low.dtype, device=self.low.device)
        return self.low + u * (self.high - self.low)

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        inside = ((self.low <= value) & (self.high > value)).type(self.low.dtype)
        return inside.log() - (self.high - self.low).log()

    def cdf(self, value):
        if self._validate_args:
            self._validate_sample(value)
        return ((value - self.low) / (self.high - self.low)).clamp(0, 1)

    def icdf(self, value):
        return value * (self.high - self.low) + self.low

    def entropy(self):
        return (self.high - self.low).log()


class Laplace(Distribution):
    """The Laplace distribution with location ``loc`` and scale ``scale``."""

    arg_constraints = {"loc": constraints.real, "scale": constraints.positive}
    support = constraints.real
    has_rsample = True

    def __init__(self, loc, scale, validate_args=None):
        self.loc, self.scale = broadcast_all(loc, scale)
        super().__init__(self.loc.shape, validate_args=validate_args)

    @property
    def mean(self): return self.loc

    @property
    def mode(self): return self.loc

    @property
    def variance(self): return 2 * self.scale.pow(2)

    @property
    def stddev(self): return math.sqrt(2) * self.scale

    def rsample(self, sample_shape=Size()):
        # u uniform on (eps - 1, 1): never -1, where log1p(-|u|) would be -inf (as PyTorch).
        low = eps(self.loc.dtype) - 1
        u = creation.rand(_draw_shape(self, sample_shape), dtype=self.loc.dtype, device=self.loc.device)
        u = u * (1 - low) + low
        return self.loc - self.scale * u.sign() * (-u.abs()).log1p()

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        return -(2 * self.scale).log() - (value - self.loc).abs() / self.scale

    def cdf(self, value):
        if self._validate_args:
            self._validate_sample(value)
        return 0.5 - 0.5 * (value - self.loc).sign() * ((-(value - self.loc).abs() / self.scale).expm1())

    def icdf(self, value):
        term = value - 0.5
        return self.loc - self.scale * term.sign() * (-2 * term.abs()).log1p()

    def entropy(self):
        return 1 + (2 * self.scale).log()


class Exponential(ExponentialFamily):
    """The exponential distribution with rate ``rate`` (mean ``1 / rate``)."""

    arg_constraints = {"rate": constraints.positive}
    support = constraints.nonnegative
    has_rsample = True

    def __init__(self, rate, validate_args=None):
        (self.rate,) = broadcast_all(rate)
        super().__init__(self.rate.shape, validate_args=validate_args)

    @property
    def mean(self): return self.rate.reciprocal()

    @property
    def mode(self): return creation.zeros_like(self.rate)

    @property
    def stddev(self): return self.rate.reciprocal()

    @property
    def variance(self): return self.rate.pow(-2)

    def rsample(self, sample_shape=Size()):
        u = creation.rand(_draw_shape(self, sample_shape), dtype=self.rate.dtype, device=self.rate.device)
        return -(-u).log1p() / self.rate  # u in [0, 1): 1 - u never 0

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        return self.rate.log() - self.rate * value

    def cdf(self, value):
        if self._validate_args:
            self._validate_sample(value)
        return 1 - (-self.rate * value).exp()

    def icdf(self, value):
        return -(-value).log1p() / self.rate

    def entropy(self):
        return 1.0 - self.rate.log()


class Gamma(ExponentialFamily):
    """The gamma distribution with shape ``concentration`` and ``rate`` (sampling: no rsample here)."""

    arg_constraints = {"concentration": constraints.positive, "rate": constraints.positive}
    support = constraints.nonnegative

    def __init__(self, concentration, rate, validate_args=None):
        self.concentration, self.rate = broadcast_all(concentration, rate)
        super().__init__(self.concentration.shape, validate_args=validate_args)

    @property
    def mean(self): return self.concentration / self.rate

    @property
    def mode(self): return ((self.concentration - 1) / self.rate).clamp(0, None)

    @property
    def variance(self): return self.concentration / self.rate.pow(2)

    has_rsample = True

    def rsample(self, sample_shape=Size()):
        shape = _draw_shape(self, sample_shape)
        value = _standard_gamma(self.concentration.expand(*shape)) / self.rate
        floor = value.detach().clamp(tiny(value.dtype), None)
        return value + (floor - value.detach())  # never below the smallest normal number, as PyTorch

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        c = self.concentration
        return ops.xlogy(c, self.rate) + ops.xlogy(c - 1, value) - self.rate * value - c.lgamma()

    def entropy(self):
        c = self.concentration
        return c - self.rate.log() + c.lgamma() + (1.0 - c) * c.digamma()


class Dirichlet(ExponentialFamily):
    """The Dirichlet distribution over the simplex, with ``concentration`` (..., K) (no rsample here)."""

    arg_constraints = {"concentration": constraints.independent(constraints.positive, 1)}
    support = constraints.simplex

    def __init__(self, concentration, validate_args=None):
        if concentration.dim() < 1:
            raise ValueError("`concentration` parameter must be at least one-dimensional.")
        self.concentration = concentration
        super().__init__(concentration.shape[:-1], concentration.shape[-1:], validate_args=validate_args)

    @property
    def mean(self): return self.concentration / self.concentration.sum(-1, True)

    @property
    def mode(self):
        c = self.concentration
        k = c.shape[-1]
        mode = (c - 1).clamp(0, None)
        mode = mode / mode.sum(-1, True)
        # Where any concentration is below 1 the density is unbounded at a vertex: PyTorch puts the
        # mode there (a one-hot at the largest concentration).
        below = (c < 1).all(-1, True)
        one_hot = (creation.arange(k, device=c.device) == c.argmax(-1, True)).type(c.dtype)
        return ops.where(below, one_hot, mode)

    @property
    def variance(self):
        c = self.concentration
        total = c.sum(-1, True)
        return c * (total - c) / (total.pow(2) * (total + 1))

    has_rsample = True

    def rsample(self, sample_shape=Size()):
        gammas = _standard_gamma(self.concentration.expand(*_draw_shape(self, sample_shape)))
        return gammas / gammas.sum(-1, True)

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        c = self.concentration
        return ops.xlogy(c - 1.0, value).sum(-1) + c.sum(-1).lgamma() - c.lgamma().sum(-1)

    def entropy(self):
        c = self.concentration
        k = c.shape[-1]
        total = c.sum(-1)
        return c.lgamma().sum(-1) - total.lgamma() - (k - total) * total.digamma() - ((c - 1.0) * c.digamma()).sum(-1)


class Beta(ExponentialFamily):
    """The beta distribution on (0, 1) with ``concentration1`` (alpha) and ``concentration0`` (beta)."""

    arg_constraints = {"concentration1": constraints.positive, "concentration0": constraints.positive}
    support = constraints.unit_interval

    def __init__(self, concentration1, concentration0, validate_args=None):
        self.concentration1, self.concentration0 = broadcast_all(concentration1, concentration0)
        super().__init__(self.concentration1.shape, validate_args=validate_args)

    @property
    def mean(self): return self.concentration1 / (self.concentration1 + self.concentration0)

    @property
    def mode(self): return (self.concentration1 - 1) / (self.concentration1 + self.concentration0 - 2)

    @property
    def variance(self):
        total = self.concentration1 + self.concentration0
        return self.concentration1 * self.concentration0 / (total.pow(2) * (total + 1))

    has_rsample = True

    def rsample(self, sample_shape=Size()):
        shape = _draw_shape(self, sample_shape)
        x = _standard_gamma(self.concentration1.expand(*shape))
        y = _standard_gamma(self.concentration0.expand(*shape))
        return x / (x + y)

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        a, b = self.concentration1, self.concentration0
        return (ops.xlogy(a - 1, value) + ops.xlogy(b - 1, 1 - value)
                + (a + b).lgamma() - a.lgamma() - b.lgamma())

    def entropy(self):
        a, b = self.concentration1, self.concentration0
        total = a + b
        log_beta = a.lgamma() + b.lgamma() - total.lgamma()
        return log_beta - (a - 1) * a.digamma() - (b - 1) * b.digamma() + (total - 2) * total.digamma()
