"""webgrad.special: PyTorch's ``torch.special`` functions.

Each is a webgrad op or a short composition of ops, so it runs on every device and
has gradients. Not provided (yet): the Bessel functions other than i0, i0e, i1
and i1e (bessel_j0, modified_bessel_k0, ...), the orthogonal polynomials and airy_ai.

Example:
    >>> import webgrad
    >>> webgrad.special.ndtr(webgrad.tensor([0.0]))
    tensor([0.5000])
"""
from __future__ import annotations

import math

from . import ops
from .ops.elementwise import _floatify

erf = ops.erf
erfc = ops.erfc
erfinv = ops.erfinv
expm1 = ops.expm1
exp2 = ops.exp2
log1p = ops.log1p
logit = ops.logit
expit = ops.sigmoid
xlogy = ops.xlogy
xlog1py = ops.xlog1py
gammaln = ops.lgamma
digamma = ops.digamma
psi = ops.digamma
polygamma = ops.polygamma
multigammaln = ops.mvlgamma
sinc = ops.sinc
entr = ops.entr
zeta = ops.zeta
logsumexp = ops.logsumexp
i0 = ops.i0
i0e = ops.i0e
i1 = ops.i1
i1e = ops.i1e

_SQRT_HALF = math.sqrt(0.5)


def round(input, *, decimals=0):  # noqa: A001,A002  (torch.special.round)
    return ops.round(input, decimals=decimals)


def softmax(input, dim, *, dtype=None):  # noqa: A002
    return ops.softmax(input, dim, dtype=dtype)


def log_softmax(input, dim, *, dtype=None):  # noqa: A002
    return ops.log_softmax(input, dim, dtype=dtype)


def ndtr(input):  # noqa: A002
    """The standard normal CDF, erfc(-x / sqrt 2) / 2 (accurate in the lower tail too)."""
    return ops.erfc(-_floatify(input) * _SQRT_HALF) * 0.5


def ndtri(input):  # noqa: A002
    """The inverse of ndtr: sqrt(2) erfinv(2p - 1)."""
    return ops.erfinv(_floatify(input) * 2 - 1) * math.sqrt(2.0)


def erfcx(input):  # noqa: A002
    """The scaled complementary error function exp(x^2) erfc(x); for large x (where exp(x^2)
    overflows) the asymptotic series 1/(x sqrt(pi)) (1 - 1/(2x^2) + 3/(4x^4) - ...)."""
    x = _floatify(input)
    cut = 25.0 if x.dtype.itemsize == 8 else 9.0
    large = ops.gt(x, cut)
    direct_x = ops.where(large, 0.0, x)
    direct = ops.exp(direct_x * direct_x) * ops.erfc(direct_x)
    z = ops.where(large, x, cut + 1)
    inverse = 1 / (2 * z * z)
    series, term = 1.0, 1.0
    for k in range(1, 12):
        term = term * -(2 * k - 1) * inverse
        series = series + term
    asymptotic = series / (z * math.sqrt(math.pi))
    return ops.where(large, asymptotic, direct)


def log_ndtr(input):  # noqa: A002
    """log(ndtr(x)); far in the lower tail (where ndtr underflows) the asymptotic series
    -x^2/2 - log(-x sqrt(2 pi)) + log(1 - 1/x^2 + 3/x^4 - 15/x^6 + 105/x^8)."""
    x = _floatify(input)
    cut = -30.0 if x.dtype.itemsize == 8 else -10.0
    tail = ops.lt(x, cut)
    xt = ops.where(tail, x, cut)
    inverse2 = 1 / (xt * xt)
    series = 1 + inverse2 * (-1 + inverse2 * (3 + inverse2 * (-15 + inverse2 * 105)))
    asymptotic = -0.5 * xt * xt - ops.log(-xt) - 0.5 * math.log(2 * math.pi) + ops.log(series)
    central = ops.log(ndtr(ops.where(tail, cut, x)))
    return ops.where(tail, asymptotic, central)


__all__ = ["digamma", "entr", "erf", "erfc", "erfcx", "erfinv", "exp2", "expit", "expm1", "gammaln", "i0", "i0e",
           "i1", "i1e", "log1p", "log_ndtr", "log_softmax", "logit", "logsumexp", "multigammaln", "ndtr", "ndtri",
           "polygamma", "psi", "round", "sinc", "softmax", "xlog1py", "xlogy", "zeta"]
