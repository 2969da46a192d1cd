"""The ``Distribution`` base class and helpers shared by every distribution.

Shapes follow PyTorch: a sample has shape ``sample_shape + batch_shape + event_shape``;
``log_prob(value)`` reduces the event dims and gives ``sample_shape + batch_shape``.
Random draws come from webgrad's generator (``webgrad.manual_seed`` reproduces them).
"""
from __future__ import annotations

import numbers

import numpy as np

from .. import autograd, creation, dtypes, ops, random
from ..tensor import Size, Tensor
from . import constraints


class Distribution:
    """Base class of probability distributions, as ``torch.distributions.Distribution``.

    Args:
        batch_shape: the shape over which parameters are batched.
        event_shape: the shape of a single sample.
        validate_args: check parameters (and ``log_prob``'s value) against their
            constraints, raising ``ValueError``; default True, as PyTorch's
            (``Distribution.set_default_validate_args(False)`` turns it off).
    """

    has_rsample = False
    has_enumerate_support = False
    _validate_args = True
    arg_constraints: dict = {}
    support: constraints.Constraint | None = None

    @staticmethod
    def set_default_validate_args(value: bool) -> None:
        if value not in (True, False):
            raise ValueError(f"set_default_validate_args: expected True or False, got {value!r}")
        Distribution._validate_args = value

    def __init__(self, batch_shape=(), event_shape=(), validate_args=None):
        self._batch_shape, self._event_shape = Size(batch_shape), Size(event_shape)
        if validate_args is not None:
            self._validate_args = validate_args
        if self._validate_args:
            for name, constraint in self.arg_constraints.items():
                if isinstance(constraint, constraints._Dependent) or name not in self.__dict__:
                    continue  # dependent, or a parameter given the other way (probs vs logits)
                value = self.__dict__[name]
                if not isinstance(value, Tensor):
                    continue
                valid = constraint.check(value)
                if not bool(valid.all()):
                    raise ValueError(
                        f"Expected parameter {name} ({type(value).__name__} of shape {tuple(value.shape)}) of "
                        f"distribution {self!r} to satisfy the constraint {constraint!r}, but found invalid "
                        f"values:\n{value}")

    # -- shapes ---------------------------------------------------------------------------
    @property
    def batch_shape(self) -> Size:
        return self._batch_shape

    @property
    def event_shape(self) -> Size:
        return self._event_shape

    def _extended_shape(self, sample_shape=()) -> Size:
        return Size(tuple(_as_shape(sample_shape)) + tuple(self._batch_shape) + tuple(self._event_shape))

    def expand(self, batch_shape, _instance=None):
        """The same distribution with its parameters broadcast to ``batch_shape`` (views, no copies)."""
        batch_shape = Size(_as_shape(batch_shape))
        new = object.__new__(type(self))
        new.__dict__.update(self.__dict__)
        for name, value in self.__dict__.items():
            if isinstance(value, Tensor) and name in self._parameter_names():
                tail = tuple(value.shape[len(self._batch_shape):])
                new.__dict__[name] = value.expand(*batch_shape, *tail)
        new._batch_shape = batch_shape
        return new

    def _parameter_names(self) -> tuple:
        return tuple(self.arg_constraints)

    # -- statistics (subclasses override what they have) ----------------------------------
    @property
    def mean(self) -> Tensor:
        raise NotImplementedError(f"{type(self).__name__} does not implement mean")

    @property
    def mode(self) -> Tensor:
        raise NotImplementedError(f"{type(self).__name__} does not implement mode")

    @property
    def variance(self) -> Tensor:
        raise NotImplementedError(f"{type(self).__name__} does not implement variance")

    @property
    def stddev(self) -> Tensor:
        return self.variance.sqrt()

    def entropy(self) -> Tensor:
        raise NotImplementedError(f"{type(self).__name__} does not implement entropy")

    def perplexity(self) -> Tensor:
        return self.entropy().exp()

    def cdf(self, value) -> Tensor:
        raise NotImplementedError(f"{type(self).__name__} does not implement cdf")

    def icdf(self, value) -> Tensor:
        raise NotImplementedError(f"{type(self).__name__} does not implement icdf")

    def log_prob(self, value) -> Tensor:
        raise NotImplementedError(f"{type(self).__name__} does not implement log_prob")

    def enumerate_support(self, expand=True) -> Tensor:
        raise NotImplementedError(f"{type(self).__name__} does not implement enumerate_support")

    # -- sampling ---------------------------------------------------------------------------
    def sample(self, sample_shape=Size()) -> Tensor:
        """A sample of shape ``sample_shape + batch_shape + event_shape``, outside autograd."""
        with autograd.no_grad():
            return self.rsample(sample_shape)

    def rsample(self, sample_shape=Size()) -> Tensor:
        """A reparameterized sample: gradients flow to the parameters."""
        raise NotImplementedError(f"{type(self).__name__} has no reparameterized sample (rsample); use sample()")

    def sample_n(self, n: int) -> Tensor:
        return self.sample(Size((n,)))

    # -- validation ---------------------------------------------------------------------------
    def _validate_sample(self, value) -> None:
        if not isinstance(value, Tensor):
            raise ValueError("The value argument to log_prob must be a Tensor")
        event_dim = len(self._event_shape)
        if tuple(value.shape[len(value.shape) - event_dim:]) != tuple(self._event_shape) or value.ndim < event_dim:
            raise ValueError(f"The right-most size of value must match event_shape: {tuple(value.shape)} vs "
                             f"{tuple(self._event_shape)}.")
        actual, expected = tuple(value.shape), tuple(self._batch_shape) + tuple(self._event_shape)
        for i, j in zip(reversed(actual), reversed(expected)):
            if i != 1 and j != 1 and i != j:
                raise ValueError(f"Value is not broadcastable with batch_shape+event_shape: {actual} vs {expected}.")
        support = self.support
        if support is None or isinstance(support, constraints._Dependent):
            return
        if not bool(support.check(value).all()):
            raise ValueError(f"Expected value argument ({type(value).__name__} of shape {actual}) to be within the "
                             f"support ({support!r}) of the distribution {self!r}, but found invalid values:\n{value}")

    def __repr__(self) -> str:
        names = [k for k in self.arg_constraints if k in self.__dict__]
        args = ", ".join(f"{k}: {self.__dict__[k] if self.__dict__[k].numel() == 1 else self.__dict__[k].size()}"
                         for k in names if isinstance(self.__dict__[k], Tensor))
        return f"{type(self).__name__}({args})"


class ExponentialFamily(Distribution):
    """Marker base class of the exponential-family distributions (as PyTorch's)."""


# -- helpers ---------------------------------------------------------------------------------
def _as_shape(shape) -> tuple:
    if isinstance(shape, numbers.Integral):
        return (int(shape),)
    return tuple(int(s) for s in shape)


def broadcast_all(*values) -> list:
    """Tensors and numbers -> tensors of one broadcast shape; numbers take the first tensor's
    dtype and device (the default dtype when none is a tensor), as PyTorch's ``broadcast_all``."""
    like = next((v for v in values if isinstance(v, Tensor)), None)
    for v in values:
        if not isinstance(v, (Tensor, numbers.Number)):
            raise ValueError(f"Input arguments must all be instances of numbers.Number or Tensor, "
                             f"got {type(v).__name__}")
    dtype = like.dtype if like is not None and like.dtype.is_floating_point else dtypes.get_default_dtype()
    device = like.device if like is not None else None
    tensors = [v if isinstance(v, Tensor) else creation.tensor(float(v), dtype=dtype, device=device) for v in values]
    shape = np.broadcast_shapes(*(tuple(t.shape) for t in tensors))
    return [t if tuple(t.shape) == shape else t.expand(*shape) for t in tensors]


def as_float_tensor(value, like=None) -> Tensor:
    if isinstance(value, Tensor):
        return value
    dtype = like.dtype if like is not None else dtypes.get_default_dtype()
    return creation.tensor(value, dtype=dtype, device=None if like is None else like.device)


def host_draw(draw, shape, like: Tensor) -> Tensor:
    """A sample drawn on the host by ``draw(numpy_generator, shape)`` (Gamma, Beta, Poisson...: numpy
    has the exact samplers), from webgrad's generator, as a tensor like ``like``."""
    array = np.asarray(draw(random.numpy_generator(), tuple(shape)), dtype=like.dtype.np)
    return creation.tensor(array, dtype=like.dtype, device=like.device)


def host(value: Tensor) -> np.ndarray:
    return value.detach().cpu().numpy().astype(np.float64)


def tiny(dtype) -> float:
    return float(np.finfo(dtype.np).tiny) if dtype.name != "bfloat16" else 2.0 ** -126


def eps(dtype) -> float:
    return float(np.finfo(dtype.np).eps) if dtype.name != "bfloat16" else 2.0 ** -7


def nan_like(value: Tensor, shape=None) -> Tensor:
    return creation.full(tuple(value.shape) if shape is None else tuple(shape), float("nan"), dtype=value.dtype,
                         device=value.device)


def sum_rightmost(value: Tensor, dims: int) -> Tensor:
    for _ in range(dims):
        value = value.sum(-1)
    return value


def softplus(x: Tensor) -> Tensor:
    """log(1 + exp(x)), stable for large |x|."""
    return ops.clamp(x, 0, None) + (-x.abs()).exp().log1p()
