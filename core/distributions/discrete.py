"""Discrete distributions: Categorical, OneHotCategorical, Bernoulli, Poisson.

Give ``probs`` or ``logits`` (one of them); both are then available. Samples are
drawn from webgrad's generator and carry no gradient; for a policy gradient use
``log_prob(action)`` (differentiable in the parameters), as in REINFORCE.
"""
from __future__ import annotations

import numpy as np

from .. import creation, ops
from ..nn import functional as F
from ..tensor import Size, Tensor
from . import constraints
from .distribution import Distribution, ExponentialFamily, broadcast_all, eps, host, host_draw, nan_like, softplus


def _one_of(name: str, probs, logits) -> None:
    if (probs is None) == (logits is None):
        raise ValueError(f"{name}: either `probs` or `logits` must be specified, but not both.")


def _clamped_logits(logits: Tensor) -> Tensor:
    """logits with -inf replaced by the dtype's most negative number (so 0 * logit is 0, not nan)."""
    lowest = float(np.finfo(logits.dtype.np).min) if logits.dtype.name != "bfloat16" else -3.3895313892515355e38
    return logits.clamp(lowest, None)


class Categorical(Distribution):
    """A categorical distribution over ``{0, ..., K-1}`` from ``probs`` or ``logits`` of shape (..., K).

    Example:
        >>> m = Categorical(webgrad.tensor([0.25, 0.25, 0.5]))
        >>> m.sample().shape
        webgrad.Size([])
    """

    arg_constraints = {"probs": constraints.simplex, "logits": constraints.independent(constraints.real, 1)}
    has_enumerate_support = True

    def __init__(self, probs=None, logits=None, validate_args=None):
        _one_of(type(self).__name__, probs, logits)
        if probs is not None:
            if probs.dim() < 1:
                raise ValueError("`probs` parameter must be at least one-dimensional.")
            self.probs = probs / probs.sum(-1, keepdim=True)
            self.logits = _clamped_logits(self.probs.clamp(eps(probs.dtype), 1 - eps(probs.dtype)).log())
            given = self.probs
        else:
            if logits.dim() < 1:
                raise ValueError("`logits` parameter must be at least one-dimensional.")
            self.logits = logits - logits.logsumexp(-1, keepdim=True)
            self.probs = self.logits.softmax(-1)
            given = self.logits
        self._given = "probs" if probs is not None else "logits"
        self._num_events = given.shape[-1]
        # Validate only the parameter given (the other is derived), as PyTorch.
        saved = {k: self.__dict__.pop(k) for k in ("probs", "logits") if k != self._given}
        super().__init__(given.shape[:-1], validate_args=validate_args)
        self.__dict__.update(saved)

    def _parameter_names(self):
        return ("probs", "logits")

    @property
    def param_shape(self) -> Size:
        return Size(tuple(self.probs.shape))

    @property
    def support(self):  # type: ignore[override]
        return constraints.integer_interval(0, self._num_events - 1)

    @property
    def mean(self): return nan_like(self.probs, self._extended_shape())

    @property
    def mode(self): return self.probs.argmax(-1)

    @property
    def variance(self): return nan_like(self.probs, self._extended_shape())

    def sample(self, sample_shape=Size()):
        shape = tuple(Size(sample_shape) if not isinstance(sample_shape, int) else (sample_shape,))
        n = int(np.prod(shape)) if shape else 1
        flat = self.probs.detach().reshape(-1, self._num_events)
        draws = ops.multinomial(flat, n, True)  # (batch, n)
        return draws.transpose(0, 1).reshape(*shape, *self._batch_shape)

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        value = value.long().unsqueeze(-1)
        shape = np.broadcast_shapes(tuple(value.shape), tuple(self.logits.shape[:-1]) + (1,))
        value = value.expand(*shape)
        logits = self.logits.expand(*shape[:-1], self._num_events)
        return logits.gather(-1, value).squeeze(-1)

    def entropy(self):
        return -(_clamped_logits(self.logits) * self.probs).sum(-1)

    def enumerate_support(self, expand=True):
        values = creation.arange(self._num_events, device=self.probs.device)
        values = values.reshape(-1, *((1,) * len(self._batch_shape)))
        return values.expand(-1, *self._batch_shape) if expand else values


class OneHotCategorical(Distribution):
    """A categorical distribution whose samples are one-hot vectors of length K."""

    arg_constraints = {"probs": constraints.simplex, "logits": constraints.independent(constraints.real, 1)}
    support = constraints.one_hot
    has_enumerate_support = True

    def __init__(self, probs=None, logits=None, validate_args=None):
        self._categorical = Categorical(probs, logits, validate_args=validate_args)
        super().__init__(self._categorical.batch_shape, self._categorical.param_shape[-1:], validate_args=False)
        if validate_args is not None:
            self._validate_args = validate_args
        else:
            self._validate_args = self._categorical._validate_args

    def expand(self, batch_shape, _instance=None):
        new = object.__new__(type(self))
        new.__dict__.update(self.__dict__)
        new._categorical = self._categorical.expand(batch_shape)
        new._batch_shape = new._categorical.batch_shape
        return new

    def __repr__(self) -> str:
        return f"OneHotCategorical({self._categorical._given}: {self.probs.size()})"

    @property
    def probs(self): return self._categorical.probs

    @property
    def logits(self): return self._categorical.logits

    @property
    def mean(self): return self.probs

    @property
    def mode(self):
        return F.one_hot(self.probs.argmax(-1), self._event_shape[0]).type(self.probs.dtype)

    @property
    def variance(self): return self.probs * (1 - self.probs)

    def sample(self, sample_shape=Size()):
        indices = self._categorical.sample(sample_shape)
        return F.one_hot(indices, self._event_shape[0]).type(self.probs.dtype)

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        return self._categorical.log_prob(value.argmax(-1))

    def entropy(self):
        return self._categorical.entropy()

    def enumerate_support(self, expand=True):
        n = self._event_shape[0]
        values = creation.eye(n, dtype=self.probs.dtype, device=self.probs.device)
        values = values.reshape(n, *((1,) * len(self._batch_shape)), n)
        return values.expand(n, *self._batch_shape, n) if expand else values


class Bernoulli(ExponentialFamily):
    """A Bernoulli distribution over {0, 1} from ``probs`` or ``logits``."""

    arg_constraints = {"probs": constraints.unit_interval, "logits": constraints.real}
    support = constraints.boolean
    has_enumerate_support = True

    def __init__(self, probs=None, logits=None, validate_args=None):
        _one_of("Bernoulli", probs, logits)
        if probs is not None:
            (self.probs,) = broadcast_all(probs)
            clamped = self.probs.clamp(eps(self.probs.dtype), 1 - eps(self.probs.dtype))
            saved = {"logits": clamped.log() - (-clamped).log1p()}
            given = self.probs
        else:
            (self.logits,) = broadcast_all(logits)
            saved = {"probs": self.logits.sigmoid()}
            given = self.logits
        self._given = "probs" if probs is not None else "logits"
        super().__init__(given.shape, validate_args=validate_args)
        self.__dict__.update(saved)

    def _parameter_names(self):
        return ("probs", "logits")

    def __repr__(self) -> str:
        value = self.__dict__[self._given]
        return f"Bernoulli({self._given}: {value if value.numel() == 1 else value.size()})"

    @property
    def mean(self): return self.probs

    @property
    def mode(self):
        mode = (self.probs >= 0.5).type(self.probs.dtype)
        return ops.where(self.probs == 0.5, nan_like(mode), mode)

    @property
    def variance(self): return self.probs * (1 - self.probs)

    def sample(self, sample_shape=Size()):
        shape = tuple(self._extended_shape(sample_shape))
        u = creation.rand(shape, dtype=self.probs.dtype, device=self.probs.device)
        return (u < self.probs.detach()).type(self.probs.dtype)

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        logits, value = broadcast_all(self.logits, value)
        return value * logits - softplus(logits)  # -BCE with logits

    def entropy(self):
        return softplus(self.logits) - self.probs * self.logits

    def enumerate_support(self, expand=True):
        values = creation.tensor([0.0, 1.0], dtype=self.probs.dtype, device=self.probs.device)
        values = values.reshape(2, *((1,) * len(self._batch_shape)))
        return values.expand(2, *self._batch_shape) if expand else values


class Poisson(ExponentialFamily):
    """The Poisson distribution with ``rate`` (samples are float counts, as PyTorch's)."""

    arg_constraints = {"rate": constraints.nonnegative}
    support = constraints.nonnegative_integer

    def __init__(self, rate, validate_args=None):
        (self.rate,) = broadcast_all(rate)
        super().__init__(self.rate.shape, validate_args=validate_args)

    @property
    def mean(self): return self.rate

    @property
    def mode(self): return self.rate.floor()

    @property
    def variance(self): return self.rate

    def sample(self, sample_shape=Size()):
        rate = host(self.rate)
        return host_draw(lambda rng, s: rng.poisson(rate, size=s), self._extended_shape(sample_shape), self.rate)

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        rate, value = broadcast_all(self.rate, value)
        return ops.xlogy(value, rate) - rate - (value + 1).lgamma()

