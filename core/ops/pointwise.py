"""Elementwise maths composed from the primitives of ``elementwise.py``.

None of these needs a kernel or a vjp of its own: each is a few Tensor ops, so it
runs on every backend and its gradient (of any order) comes from autograd. Where a
textbook formula loses digits or produces NaN at a special point (logaddexp at
equal infinities, sinc at 0, lgamma for small arguments), the composition is
arranged so that the value and the gradient are those of PyTorch.

The gamma family (lgamma, digamma, polygamma, zeta) uses the recurrence to move
the argument up by ``_SHIFT`` and then an asymptotic (Stirling / Euler-Maclaurin)
series, accurate to float64 rounding for positive arguments; reflection covers
lgamma and digamma below 1/2. ``polygamma(n >= 1)`` reflects too; ``zeta`` is
accurate for other > 0 (for other < 0 with an integer input, PyTorch sums directly
and is more accurate). On cpu, float32 inputs compute in float64 and round once
(``_widened``): in float32 the series and reflections lose a few digits.
"""
from __future__ import annotations

import functools
import math

from .. import dtypes
from ..tensor import Tensor
from . import elementwise as ew
from .registry import OpError
from ._helpers import describe, reject_complex
from .autocasting import autocast_op

_LN2 = math.log(2.0)
_LN10 = math.log(10.0)
_SHIFT = 8  # lgamma, digamma, zeta: the series start at x + 8
_MAX_TERMS = 256  # zeta's direct terms for a negative other (it reaches down to -248)


def _float(x, name):
    """A float tensor for a float function (ints compute in the default float dtype)."""
    if not isinstance(x, Tensor):
        raise TypeError(f"{name}: expected a Tensor, got {type(x).__name__}")
    reject_complex(name, x)
    return ew._floatify(x)


def _float_pair(name, x, y):
    x, y = ew.promote(name, x, y, float_result=True)
    return x, y


# -- logs and exponentials in other bases ------------------------------------------------
def log2(input): return ew.log(_float(input, "log2")) * (1 / _LN2)  # noqa: A002
def log10(input): return ew.log(_float(input, "log10")) * (1 / _LN10)  # noqa: A002
log2, log10 = autocast_op("log2")(log2), autocast_op("log10")(log10)  # float32 under GPU autocast
def exp2(input): return ew.pow(2.0, _float(input, "exp2"))  # noqa: A002  (exact at integers)


def logaddexp(input, other):  # noqa: A002
    """log(exp(input) + exp(other)) without overflow; equal arguments (also equal
    infinities) give x + log 2 and split the gradient half and half, as in PyTorch.

    Example:
        >>> webgrad.logaddexp(webgrad.tensor([0.0, 1000.0]), webgrad.tensor([0.0, 1000.0]))
        tensor([   0.6931, 1000.6931])
    """
    x, y = _float_pair("logaddexp", input, other)
    same = ew.eq(x, y)
    difference = ew.where(same, 0.0, x - y)  # inf - inf would be NaN (and a NaN gradient)
    general = ew.maximum(x, y) + ew.log1p(ew.exp(-ew.abs(difference)))
    return ew.where(same, (x + y) * 0.5 + _LN2, general)


def logaddexp2(input, other):  # noqa: A002
    """log2(2**input + 2**other), as ``torch.logaddexp2``."""
    x, y = _float_pair("logaddexp2", input, other)
    return logaddexp(x * _LN2, y * _LN2) * (1 / _LN2)


# -- rounding and remainders -------------------------------------------------------------
def frac(input):  # noqa: A002
    """The fractional part, ``input - trunc(input)`` (sign of the input); gradient 1."""
    if input.dtype.category != "float":
        raise OpError(f"frac: only floating point tensors are supported, got {describe(input)}")
    return input - ew.trunc(input)


# -- interpolation and fused multiply-adds -----------------------------------------------
def lerp(input, end, weight):  # noqa: A002
    """input + weight * (end - input), computed from the nearer end as PyTorch does
    (so lerp(a, b, 1) is exactly b). ``weight`` is a number or a tensor.

    Example:
        >>> webgrad.lerp(webgrad.tensor([1.0]), webgrad.tensor([3.0]), 0.5)
        tensor([2.])
    """
    difference = end - input
    if not isinstance(weight, Tensor):
        if builtin_abs(weight) < 0.5:
            return input + difference * weight
        return end - difference * (1 - weight)
    return ew.where(ew.abs(weight) < 0.5, input + weight * difference, end - difference * (1 - weight))


@autocast_op("addcmul")
def addcmul(input, tensor1, tensor2, *, value=1):  # noqa: A002
    """input + value * tensor1 * tensor2."""
    product = tensor1 * tensor2
    return input + (product if value == 1 else product * value)


@autocast_op("addcdiv")
def addcdiv(input, tensor1, tensor2, *, value=1):  # noqa: A002
    """input + value * tensor1 / tensor2 (integer tensor1 and tensor2 are an error, as in PyTorch)."""
    if tensor1.dtype.category != "float" and tensor2.dtype.category != "float":
        raise OpError(f"addcdiv: integer division of tensors is not supported ({describe(tensor1)} / "
                      f"{describe(tensor2)}); use addcmul with a reciprocal or float tensors")
    quotient = tensor1 / tensor2
    return input + (quotient if value == 1 else quotient * value)


def clamp_min(input, min):  # noqa: A002
    return ew.clamp(input, min=min)


def clamp_max(input, max):  # noqa: A002
    return ew.clamp(input, max=max)


# -- geometry and signs -----------------------------------------------------------------
def hypot(input, other):  # noqa: A002
    """sqrt(input**2 + other**2)."""
    x, y = _float_pair("hypot", input, other)
    return ew.sqrt(x * x + y * y)


def square(input):  # noqa: A002
    return ew.mul(input, input)


def deg2rad(input): return _float(input, "deg2rad") * (math.pi / 180)  # noqa: A002
def rad2deg(input): return _float(input, "rad2deg") * (180 / math.pi)  # noqa: A002


def positive(input):  # noqa: A002
    if input.dtype is dtypes.bool_:
        raise OpError("positive: the `+` operator on a bool tensor is not supported")
    return input


# -- logs of products -------------------------------------------------------------------
def logit(input, eps=None):  # noqa: A002
    """log(p / (1 - p)); with ``eps``, p is first clamped to [eps, 1 - eps]."""
    p = _float(input, "logit")
    if eps is not None:
        p = ew.clamp(p, eps, 1 - eps)
    return ew.log(p) - ew.log1p(-p)


def _x_log(name, x, y, log_fn, neutral, pole):
    x, y = _float_pair(name, x, y)
    # 0 * log(y) is 0 (NaN only for a NaN y), as in PyTorch. Where the log is not finite
    # (y at or below the pole, y = inf) it sees a harmless value instead, so neither the
    # value nor the gradient turns NaN; elsewhere d/dx stays log(y), as PyTorch's.
    not_finite = ew.logical_or(ew.le(y, pole), ew.isinf(y))
    masked = ew.logical_and(ew.eq(x, 0), not_finite)
    return x * log_fn(ew.where(masked, neutral, y))


def xlogy(input, other):  # noqa: A002
    """input * log(other), 0 where input is 0 (unless other is NaN)."""
    return _x_log("xlogy", input, other, ew.log, 1.0, 0.0)


def xlog1py(input, other):  # noqa: A002
    """input * log1p(other), 0 where input is 0 (unless other is NaN)."""
    return _x_log("xlog1py", input, other, ew.log1p, 0.0, -1.0)


def sinc(input):  # noqa: A002
    """sin(pi x) / (pi x), 1 at x = 0 (gradient 0 there)."""
    x = _float(input, "sinc")
    zero = ew.eq(x, 0)
    scaled = ew.where(zero, 1.0, x) * math.pi
    return ew.where(zero, 1.0, ew.sin(scaled) / scaled)


def float_power(input, exponent):  # noqa: A002
    """input ** exponent computed in float64 (cpu only: WebGPU has no float64)."""
    base = ew.cast(input, dtypes.float64) if isinstance(input, Tensor) else float(input)
    power = ew.cast(exponent, dtypes.float64) if isinstance(exponent, Tensor) else float(exponent)
    if not isinstance(base, Tensor) and not isinstance(power, Tensor):
        raise TypeError("float_power: expected at least one Tensor")
    return ew.pow(base, power)


def entr(input):  # noqa: A002
    """-x log x for x > 0, 0 at 0, -inf below 0 (``torch.special.entr``)."""
    x = _float(input, "entr")
    positive_x = ew.gt(x, 0)
    value = -x * ew.log(ew.where(positive_x, x, 1.0))
    return ew.where(ew.isnan(x), x, ew.where(positive_x, value, ew.where(ew.eq(x, 0), 0.0, -math.inf)))


# -- comparisons ---------------------------------------------------------------------------
def isclose(input, other, rtol=1e-05, atol=1e-08, equal_nan=False):  # noqa: A002
    """|input - other| <= atol + rtol * |other| elementwise (equal infinities are close)."""
    x, y = ew.promote("isclose", input, other)
    if x.dtype is dtypes.bool_:
        return ew.eq(x, y)
    close = ew.eq(x, y)
    if rtol != 0 or atol != 0:
        xf, yf = ew.promote("isclose", x, y, float_result=True)
        within = ew.le(ew.abs(xf - yf), atol + rtol * ew.abs(yf))
        close = ew.logical_or(close, ew.logical_and(within, ew.isfinite(xf - yf)))
    if equal_nan:
        close = ew.logical_or(close, ew.logical_and(ew.isnan(x), ew.isnan(y)))
    return close


def allclose(input, other, rtol=1e-05, atol=1e-08, equal_nan=False) -> bool:  # noqa: A002
    return bool(isclose(input, other, rtol, atol, equal_nan).all())


def equal(input, other) -> bool:  # noqa: A002
    """True when both have the same shape and the same values (a Python bool)."""
    return tuple(input.shape) == tuple(other.shape) and bool(ew.eq(input, other).all())


def isposinf(input): return ew.logical_and(ew.isinf(input), ew.gt(input, 0))  # noqa: A002
def isneginf(input): return ew.logical_and(ew.isinf(input), ew.lt(input, 0))  # noqa: A002


def isreal(input):  # noqa: A002
    """All True: webgrad has no complex dtypes."""
    return ew.eq(ew.isnan(input), ew.isnan(input))


# -- the gamma family ------------------------------------------------------------------------
# Bernoulli numbers B2, B4, ..., B16 (the asymptotic series' coefficients).
_BERNOULLI = (1 / 6, -1 / 30, 1 / 42, -1 / 30, 5 / 66, -691 / 2730, 7 / 6, -3617 / 510)


def _sin_pi(x):
    """sin(pi x) with x first reduced to [-1, 1] exactly (no pi * big x rounding)."""
    return ew.sin((x - ew.round(x * 0.5) * 2) * math.pi)


def _cos_pi(x):
    return ew.cos((x - ew.round(x * 0.5) * 2) * math.pi)


def _nonpositive_integer(x):
    return ew.logical_and(ew.le(x, 0), ew.eq(x, ew.floor(x)))


def _lgamma_positive(x):
    """lgamma for x >= 1/2: shift small arguments up by 8, then Stirling's series."""
    small = ew.lt(x, _SHIFT)
    base = ew.where(small, x, 1.0)
    product = base
    for k in range(1, _SHIFT):
        product = product * (base + k)
    z = ew.where(small, x + _SHIFT, x)
    inverse = 1 / z
    inverse2 = inverse * inverse
    series = 0.0
    for k in reversed(range(len(_BERNOULLI))):
        series = series * inverse2 + _BERNOULLI[k] / ((2 * k + 2) * (2 * k + 1))
    stirling = (z - 0.5) * ew.log(z) - z + 0.5 * math.log(2 * math.pi) + series * inverse
    return stirling - ew.where(small, ew.log(product), 0.0)


def _widened(fn, *xs):
    """``fn(*xs)``, in float64 for float32 cpu tensors (rounded once at the end)."""
    if xs[0].dtype is dtypes.float32 and xs[0].device == "cpu":
        return ew.cast(fn(*[ew.cast(x, dtypes.float64) for x in xs]), dtypes.float32)
    return fn(*xs)


def lgamma(input):  # noqa: A002
    """log |Gamma(x)|; inf at 0 and the negative integers.

    Example:
        >>> webgrad.lgamma(webgrad.tensor([0.5, 3.0]))
        tensor([0.5724, 0.6931])
    """
    return _widened(_lgamma, _float(input, "lgamma"))


def _lgamma(x):
    reflect = ew.lt(x, 0.5)
    positive_part = _lgamma_positive(ew.where(reflect, 1 - x, x))
    # Reflection: lgamma(x) = log(pi / |sin(pi x)|) - lgamma(1 - x), fed a safe x elsewhere.
    reflected_x = ew.where(reflect, x, 0.25)
    reflected = math.log(math.pi) - ew.log(ew.abs(_sin_pi(reflected_x))) - positive_part
    out = ew.where(reflect, reflected, positive_part)
    return ew.where(_nonpositive_integer(x), math.inf, out)


def _digamma_positive(x):
    """digamma for x >= 1/2: psi(x) = psi(x + 8) - sum 1/(x + k), then the asymptotic series."""
    correction = 1 / x
    for k in range(1, _SHIFT):
        correction = correction + 1 / (x + k)
    z = x + _SHIFT
    inverse2 = 1 / (z * z)
    series = 0.0
    for k in reversed(range(len(_BERNOULLI))):
        series = series * inverse2 + _BERNOULLI[k] / (2 * k + 2)
    return ew.log(z) - 0.5 / z - series * inverse2 - correction


def digamma(input):  # noqa: A002
    """The logarithmic derivative of Gamma; -inf at 0, NaN at negative integers (PyTorch's values)."""
    return _widened(_digamma, _float(input, "digamma"))


def _digamma(x):
    reflect = ew.lt(x, 0.5)
    positive_part = _digamma_positive(ew.where(reflect, 1 - x, x))
    reflected_x = ew.where(reflect, x, 0.25)
    # Reflection: psi(x) = psi(1 - x) - pi cos(pi x) / sin(pi x).
    reflected = positive_part - math.pi * _cos_pi(reflected_x) / _sin_pi(reflected_x)
    out = ew.where(reflect, reflected, positive_part)
    out = ew.where(_nonpositive_integer(x), math.nan, out)
    return ew.where(ew.eq(x, 0), -math.inf, out)


def zeta(input, other):  # noqa: A002
    """The Hurwitz zeta function sum_k (other + k) ** -input (``torch.special.zeta``), for
    input > 1: direct terms until other + k passes 8, then Euler-Maclaurin. Elsewhere
    PyTorch's values: inf at input = 1 and at other a non-positive integer, NaN for input < 1
    and for other < 0 with a non-integer input. A negative ``other`` is read on the host to
    count its direct terms (at most ``_MAX_TERMS``; NaN past that, never a wrong value)."""
    s, q = _float_pair("zeta", input, other)
    terms = _SHIFT
    if q.numel():
        lowest = float(q.min())  # a host read: only zeta's own callers pay it (polygamma does not)
        if lowest < 0:
            terms = _MAX_TERMS if not lowest > -_MAX_TERMS else _SHIFT + math.ceil(-lowest)
    return _widened(functools.partial(_zeta, terms=terms), s, q)


def _zeta(s, q, terms=_SHIFT):
    total = ew.pow(q, -s)
    for k in range(1, terms):
        total = total + ew.pow(q + k, -s)
    z = q + terms
    z_power = ew.pow(z, -s)  # z ** -s
    total = total + z * z_power / (s - 1) + 0.5 * z_power
    rising = s  # s (s + 1) ... (s + 2j - 2)
    term_power = z_power / z  # z ** (-s - 2j + 1)
    factorial = 2.0  # (2j)!
    for j in range(1, len(_BERNOULLI) + 1):
        total = total + (_BERNOULLI[j - 1] / factorial) * rising * term_power
        rising = rising * (s + 2 * j - 1) * (s + 2 * j)
        term_power = term_power / (z * z)
        factorial *= (2 * j + 1) * (2 * j + 2)
    total = ew.where(ew.lt(z, _SHIFT), math.nan, total)  # the series would start too low: refuse
    total = ew.where(ew.logical_and(ew.lt(q, 0), ew.ne(s, ew.floor(s))), math.nan, total)
    total = ew.where(_nonpositive_integer(q), math.inf, total)
    return ew.where(ew.eq(s, 1), math.inf, ew.where(ew.lt(s, 1), math.nan, total))


def polygamma(n, input):  # noqa: A002
    """The n-th derivative of digamma: (-1)**(n+1) n! zeta(n + 1, x) (positive x for n >= 1)."""
    if not isinstance(n, int) or n < 0:
        raise OpError(f"polygamma: n must be a non-negative integer, got {n!r}")
    if n == 0:
        return digamma(input)
    return _widened(functools.partial(_polygamma, n), _float(input, "polygamma"))


def _polygamma(n, x):
    reflect = ew.lt(x, 0.5)
    scale = (-1) ** (n + 1) * math.factorial(n)
    positive_part = _zeta(*ew.promote("polygamma", n + 1.0, ew.where(reflect, 1 - x, x))) * scale  # x >= 1/2
    # Reflection, differentiated n times: psi_n(x) = (-1)^n psi_n(1 - x) - pi^(n+1) P_n(cot(pi x)),
    # where P_0(c) = c and P_(k+1)(c) = -(1 + c^2) P_k'(c) (the derivatives of the cotangent).
    coefficients = [0.0, 1.0]  # P_0, lowest power first
    for _ in range(n):
        derivative = [k * coefficients[k] for k in range(1, len(coefficients))] + [0.0, 0.0]
        coefficients = [-(derivative[k] + (derivative[k - 2] if k >= 2 else 0.0)) for k in range(len(derivative))]
    reflected_x = ew.where(reflect, x, 0.25)
    cot = _cos_pi(reflected_x) / _sin_pi(reflected_x)
    poly = 0.0
    for c in reversed(coefficients):
        poly = poly * cot + c
    reflected = positive_part * ((-1) ** n) - poly * math.pi ** (n + 1)
    out = ew.where(reflect, reflected, positive_part)
    return ew.where(_nonpositive_integer(x), -math.inf if n % 2 == 0 else math.inf, out)


def mvlgamma(input, p):  # noqa: A002
    """The multivariate log-gamma of dimension p: sum_j lgamma(x - j/2) + p(p-1)/4 log(pi)."""
    x = _float(input, "mvlgamma")
    out = lgamma(x)
    for j in range(1, p):
        out = out + lgamma(x - j / 2)
    return out + p * (p - 1) / 4 * math.log(math.pi)


def builtin_abs(value):
    return value if value >= 0 else -value


# -- modified Bessel functions of the first kind, orders 0 and 1 -----------------------------
_BESSEL_SWITCH = 20.0  # |x| below: the power series; above: the asymptotic series
_SERIES_TERMS = 48
_ASYMPTOTIC_TERMS = 24


def _bessel_series(t, order):
    """sum_k t^k / (k! (k + order)!) with t = x^2 / 4, term by term (term_k = term_(k-1) t / (k (k + order))):
    Horner's rule would be shorter, but its backward pass multiplies t^47, which overflows float32."""
    term = t * 0 + 1 / math.factorial(order)
    total = term
    for k in range(1, _SERIES_TERMS):
        term = term * t * (1 / (k * (k + order)))
        total = total + term
    return total


def _bessel_asymptotic(z, order):
    """exp(-z) I_order(z) for large z: (2 pi z)^-1/2 sum_k (-1)^k a_k / z^k, with
    a_k = prod_j (4 order^2 - (2j - 1)^2) / (k! 8^k)."""
    coefficients, a = [], 1.0
    for k in range(_ASYMPTOTIC_TERMS):
        coefficients.append((-1) ** k * a)
        a *= (4 * order * order - (2 * k + 1) ** 2) / ((k + 1) * 8)
    inverse = 1 / z
    total = coefficients[-1]
    for c in reversed(coefficients[:-1]):
        total = total * inverse + c
    return total * ew.rsqrt(z * (2 * math.pi))


def _bessel(input, order, scaled, name):  # noqa: A002
    x = _float(input, name)
    magnitude = ew.abs(x)
    large = ew.gt(magnitude, _BESSEL_SWITCH)
    small_x = ew.where(large, 0.0, x)  # each branch sees values it is accurate (and finite) for
    series = _bessel_series(small_x * small_x * 0.25, order)
    if order == 1:
        series = series * small_x * 0.5
    if scaled:
        series = series * ew.exp(-ew.abs(small_x))
    z = ew.where(large, magnitude, _BESSEL_SWITCH + 1)
    asymptotic = _bessel_asymptotic(z, order)
    if order == 1:
        asymptotic = ew.where(ew.lt(x, 0), -asymptotic, asymptotic)  # I_1 is odd
    if not scaled:
        asymptotic = asymptotic * ew.exp(z)
    return ew.where(ew.isnan(x), x, ew.where(large, asymptotic, series))


def i0(input): return _bessel(input, 0, False, "i0")  # noqa: A002
def i0e(input): return _bessel(input, 0, True, "i0e")  # noqa: A002
def i1(input): return _bessel(input, 1, False, "i1")  # noqa: A002
def i1e(input): return _bessel(input, 1, True, "i1e")  # noqa: A002
