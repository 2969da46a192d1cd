"""MultivariateNormal and Independent.

MultivariateNormal keeps the lower Cholesky factor ``scale_tril`` of its covariance and
works through it (``webgrad.linalg.cholesky`` and ``solve_triangular``, so gradients
reach ``loc`` and the covariance on any device that has those ops).
"""
from __future__ import annotations

import importlib
import math

import numpy as np

from .. import creation
from ..tensor import Size, Tensor
from . import constraints
from .distribution import Distribution, sum_rightmost


def _linalg():
    # webgrad.linalg is loaded on first use (as webgrad's other subpackages).
    return importlib.import_module("webgrad.linalg")


def _diagonal(matrix: Tensor) -> Tensor:
    return _linalg().diagonal(matrix, offset=0, dim1=-2, dim2=-1)


def _batch_mahalanobis(scale_tril: Tensor, diff: Tensor) -> Tensor:
    """|| L^{-1} diff ||^2 over the last dim, L and diff broadcast against each other."""
    shape = np.broadcast_shapes(tuple(scale_tril.shape[:-2]), tuple(diff.shape[:-1]))
    n = diff.shape[-1]
    L = scale_tril.expand(*shape, n, n)
    solved = _linalg().solve_triangular(L, diff.expand(*shape, n).unsqueeze(-1), upper=False)
    return solved.squeeze(-1).pow(2).sum(-1)


def _precision_to_scale_tril(precision: Tensor) -> Tensor:
    # P = U^T U with U upper (the Cholesky factor of the flipped matrix, flipped back); then
    # cov = P^{-1} = U^{-1} U^{-T}, whose lower factor is L = U^{-T}... computed by one triangular solve.
    flipped = _linalg().cholesky(precision.flip((-2, -1)))
    inverse_of_l = flipped.flip((-2, -1)).mT  # lower triangular: L^{-1}
    eye = creation.eye(precision.shape[-1], dtype=precision.dtype, device=precision.device)
    return _linalg().solve_triangular(inverse_of_l, eye.expand(*inverse_of_l.shape), upper=False)


class MultivariateNormal(Distribution):
    """A multivariate normal with mean ``loc`` (..., n) and one of ``covariance_matrix``,
    ``precision_matrix`` or ``scale_tril`` (lower triangular with a positive diagonal) (..., n, n).

    Example:
        >>> m = MultivariateNormal(webgrad.zeros(2), webgrad.eye(2))
        >>> m.rsample((3,)).shape
        webgrad.Size([3, 2])
    """

    arg_constraints = {"loc": constraints.real_vector, "covariance_matrix": constraints.positive_definite,
                       "precision_matrix": constraints.positive_definite, "scale_tril": constraints.lower_cholesky}
    support = constraints.real_vector
    has_rsample = True

    def __init__(self, loc, covariance_matrix=None, precision_matrix=None, scale_tril=None, validate_args=None):
        if loc.dim() < 1:
            raise ValueError("loc must be at least one-dimensional.")
        given = [m for m in (covariance_matrix, precision_matrix, scale_tril) if m is not None]
        if len(given) != 1:
            raise ValueError("Exactly one of covariance_matrix or precision_matrix or scale_tril may be specified.")
        matrix = given[0]
        if matrix.dim() < 2:
            raise ValueError("scale_tril, covariance_matrix or precision_matrix must be at least two-dimensional, "
                             "with optional leading batch dimensions")
        batch_shape = np.broadcast_shapes(tuple(matrix.shape[:-2]), tuple(loc.shape[:-1]))
        n = loc.shape[-1]
        matrix = matrix.expand(*batch_shape, -1, -1)
        self.loc = loc.expand(*batch_shape, -1)
        if scale_tril is not None:
            self.scale_tril = matrix
        elif covariance_matrix is not None:
            self.covariance_matrix = matrix
        else:
            self.precision_matrix = matrix
        super().__init__(batch_shape, (n,), validate_args=validate_args)
        if scale_tril is not None:
            self._unbroadcasted_scale_tril = scale_tril
        elif covariance_matrix is not None:
            self._unbroadcasted_scale_tril = _linalg().cholesky(covariance_matrix)
        else:
            self._unbroadcasted_scale_tril = _precision_to_scale_tril(precision_matrix)

    def _parameter_names(self):
        return ("loc", "covariance_matrix", "precision_matrix", "scale_tril")

    def __getattr__(self, name):
        # The two matrices not given are derived on first use (as PyTorch's lazy properties).
        derived = ("scale_tril", "covariance_matrix", "precision_matrix")
        if name in derived and "_unbroadcasted_scale_tril" in self.__dict__:
            L = self.__dict__["_unbroadcasted_scale_tril"]
            shape = tuple(self._batch_shape) + tuple(self._event_shape) * 2
            if name == "scale_tril":
                value = L
            elif name == "covariance_matrix":
                value = L @ L.mT
            else:
                eye = creation.eye(L.shape[-1], dtype=L.dtype, device=L.device).expand(*L.shape)
                inverse = _linalg().solve_triangular(L, eye, upper=False)
                value = inverse.mT @ inverse
            return value.expand(*shape)
        raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")

    @property
    def mean(self): return self.loc

    @property
    def mode(self): return self.loc

    @property
    def variance(self):
        return self._unbroadcasted_scale_tril.pow(2).sum(-1).expand(*self._batch_shape, *self._event_shape)

    def rsample(self, sample_shape=Size()):
        shape = tuple(self._extended_shape(sample_shape))
        noise = creation.randn(shape, dtype=self.loc.dtype, device=self.loc.device)
        return self.loc + (self._unbroadcasted_scale_tril @ noise.unsqueeze(-1)).squeeze(-1)

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        diff = value - self.loc
        m = _batch_mahalanobis(self._unbroadcasted_scale_tril, diff)
        half_log_det = _diagonal(self._unbroadcasted_scale_tril).log().sum(-1)
        return -0.5 * (self._event_shape[0] * math.log(2 * math.pi) + m) - half_log_det

    def entropy(self):
        half_log_det = _diagonal(self._unbroadcasted_scale_tril).log().sum(-1)
        h = 0.5 * self._event_shape[0] * (1.0 + math.log(2 * math.pi)) + half_log_det
        return h.expand(*self._batch_shape) if len(self._batch_shape) else h


class Independent(Distribution):
    """Treat the rightmost ``reinterpreted_batch_ndims`` batch dims of ``base_distribution`` as event
    dims: ``log_prob`` and ``entropy`` sum over them (e.g. a diagonal Normal as one vector event)."""

    arg_constraints: dict = {}

    def __init__(self, base_distribution, reinterpreted_batch_ndims, validate_args=None):
        if reinterpreted_batch_ndims > len(base_distribution.batch_shape):
            raise ValueError(f"Expected reinterpreted_batch_ndims <= len(base_distribution.batch_shape), actual "
                             f"{reinterpreted_batch_ndims} vs {len(base_distribution.batch_shape)}")
        shape = tuple(base_distribution.batch_shape) + tuple(base_distribution.event_shape)
        event_dim = reinterpreted_batch_ndims + len(base_distribution.event_shape)
        self.base_dist, self.reinterpreted_batch_ndims = base_distribution, reinterpreted_batch_ndims
        super().__init__(shape[:len(shape) - event_dim], shape[len(shape) - event_dim:], validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        batch_shape = tuple(batch_shape)
        base = self.base_dist.expand(batch_shape + tuple(self._event_shape[:self.reinterpreted_batch_ndims]))
        return Independent(base, self.reinterpreted_batch_ndims, validate_args=False)

    @property
    def has_rsample(self):  # type: ignore[override]
        return self.base_dist.has_rsample

    @property
    def support(self):  # type: ignore[override]
        base = self.base_dist.support
        return constraints.independent(base, self.reinterpreted_batch_ndims) if base is not None else None

    @property
    def mean(self): return self.base_dist.mean

    @property
    def mode(self): return self.base_dist.mode

    @property
    def variance(self): return self.base_dist.variance

    def sample(self, sample_shape=Size()):
        return self.base_dist.sample(sample_shape)

    def rsample(self, sample_shape=Size()):
        return self.base_dist.rsample(sample_shape)

    def log_prob(self, value):
        return sum_rightmost(self.base_dist.log_prob(value), self.reinterpreted_batch_ndims)

    def entropy(self):
        return sum_rightmost(self.base_dist.entropy(), self.reinterpreted_batch_ndims)

    def __repr__(self) -> str:
        return f"Independent({self.base_dist!r}, {self.reinterpreted_batch_ndims})"
