"""Elementwise primitives: unary, binary with broadcasting, where, and cast.

Binary functions first promote both operands to one dtype (PyTorch's rules, see
``dtypes.result_type``), so every kernel sees equal input dtypes.
"""
from __future__ import annotations

import math

import numpy as np

from .. import dtypes
from ..backend import default_device
from ..backend.numpy.arrays import takes_out
from ..kernels import Elementwise as E
from ..tensor import Tensor
from ._helpers import (broadcast_infer, compare_infer, describe, real_only, reject_complex, require_float,
                       same_dtype_infer)
from .registry import OpError, apply, defop
from ..creation import scalar_tensor, zeros
from ._helpers import broadcast_shapes
from .autocasting import autocast_op

# -- unary ------------------------------------------------------------------------
_erf = np.frompyfunc(math.erf, 1, 1)


def _float_unary_infer(name, complex_too):
    def infer(x, **attrs):
        if x.dtype.is_complex and complex_too:
            return x.shape, x.dtype
        reject_complex(name, x)
        require_float(name, x)
        return x.shape, x.dtype
    return infer


def _unary(name, wgsl, numpy_kernel, vjp=None, float_only=True, complex_too=False):
    """A unary op; ``complex_too``: holomorphic, so numpy's complex kernel and the real vjp
    (complex_ops.py's convention needs no conjugation) serve complex tensors as they are."""
    op = defop(name, infer=_float_unary_infer(name, complex_too) if float_only else same_dtype_infer,
               vjp=vjp, numpy=numpy_kernel, wgsl=wgsl)
    return op


NEG = _unary("neg", E({"f32": "-a", "i32": "-a"}), np.negative, lambda g, x, *, out: -g, float_only=False)
ABS = _unary("abs", E({"f32": "abs(a)", "i32": "abs(a)"}), np.abs, lambda g, x, *, out: g * sign(x),
             float_only=False)  # sign(NaN) = 0: no gradient at NaN, as in PyTorch
EXP = _unary("exp", E("wg_exp(a)"), np.exp, lambda g, x, *, out: g * out, complex_too=True)
LOG = _unary("log", E("wg_log(a)"), np.log, lambda g, x, *, out: g / x, complex_too=True)
LOG1P = _unary("log1p", E("wg_log1p(a)"), np.log1p, lambda g, x, *, out: g / (x + 1), complex_too=True)
SQRT = _unary("sqrt", E("sqrt(a)"), np.sqrt, lambda g, x, *, out: g * 0.5 / out, complex_too=True)
RSQRT = _unary("rsqrt", E("inverseSqrt(a)"), lambda x: 1 / np.sqrt(x),
               lambda g, x, *, out: g * -0.5 * out * out * out, complex_too=True)
SIN = _unary("sin", E("wg_sin(a)"), np.sin, lambda g, x, *, out: g * cos(x), complex_too=True)
COS = _unary("cos", E("wg_cos(a)"), np.cos, lambda g, x, *, out: -g * sin(x), complex_too=True)
TANH = _unary("tanh", E("wg_tanh(a)"), np.tanh, lambda g, x, *, out: g * (1 - out * out), complex_too=True)
SIGMOID = _unary("sigmoid", E("wg_sigmoid(a)"), lambda x: 0.5 * (1 + np.tanh(0.5 * x)),  # no overflow for large |x|
                 lambda g, x, *, out: g * out * (1 - out), complex_too=True)
ERF = _unary("erf", E("wg_erf(a)"), lambda x: np.asarray(_erf(x), dtype=x.dtype),  # 0-d gives a bare float
             lambda g, x, *, out: g * (2 / math.sqrt(math.pi)) * exp(-x * x))
@takes_out
def _relu_numpy(x, out=None):
    if x.dtype.kind != "f" or x.size < 4096:
        return np.maximum(x, 0, out=out)
    # Against an array of zeros: numpy's maximum with a scalar 0 takes a slower loop for floats
    # (0.93 ms for 2.4M float32, 0.55 ms zeros and all). NaN stays NaN either way.
    zeros = np.zeros_like(x) if out is None or np.may_share_memory(out, x) else out
    if zeros is out:
        out.fill(0)
    return np.maximum(x, zeros, out=out if out is not None else zeros)


@takes_out
def _relu_backward_numpy(g, result, out=None):
    # A multiply by the mask, not np.where: where branches per element, and relu's random
    # mask made it 5x slower (2.4M elements: 10.6 ms against 2).
    return np.multiply(g, np.logical_not(result <= 0), out=out)


# relu's gradient, one pass (torch's threshold_backward): g unless out <= 0, so at NaN it passes.
RELU_BACKWARD = defop("relu_backward", wgsl=E("select(a, A(0), b <= A(0))"), infer=broadcast_infer("relu_backward"),
                      numpy=_relu_backward_numpy,
                      vjp=lambda gg, g, result, *, out: (relu_backward(gg, result), None))
RELU = defop("relu", wgsl=E({"f32": "wg_max(a, 0.0)", "i32": "max(a, 0)"}), infer=real_only("relu", same_dtype_infer),
             numpy=_relu_numpy, vjp=lambda g, x, *, out: relu_backward(g, out))
RECIPROCAL = _unary("reciprocal", E("1.0 / a"), np.reciprocal, lambda g, x, *, out: -g * out * out,
                    complex_too=True)
def _zero_vjp(g, *inputs, out):
    """Step functions (floor, sign, ...): the gradient is zero everywhere, as in PyTorch
    (an explicit zero tensor, so an inf or NaN upstream gradient does not leak in)."""
    return tuple(zeros(g.shape, dtype=g.dtype, device=g.device) for _ in inputs)


def _sign_numpy(x):
    if x.dtype.kind != "f":
        return np.sign(x)
    return np.where(np.isnan(x), x.dtype.type(0), np.sign(x))  # sign(NaN) is 0 in PyTorch


FLOOR = _unary("floor", E("floor(a)"), np.floor, _zero_vjp, float_only=False)
CEIL = _unary("ceil", E("ceil(a)"), np.ceil, _zero_vjp, float_only=False)
ROUND = _unary("round", E("round(a)"), np.round, _zero_vjp, float_only=False)  # half to even, like PyTorch
TRUNC = _unary("trunc", E("wg_trunc(a)"), np.trunc, _zero_vjp)
SIGN = _unary("sign", E({"f32": "wg_sign(a)", "i32": "sign(a)"}), _sign_numpy, _zero_vjp, float_only=False)
LOGICAL_NOT = defop("logical_not", wgsl=E("u32(a == A(0))"),
                    infer=lambda x: (x.shape, dtypes.bool_), numpy=np.logical_not)
# NaN and inf tests look at the bits on WebGPU (math.wgsl): WGSL lets a compiler assume
# they never occur, so x != x could fold to false. Integers and bools are always finite.
ISNAN = defop("isnan", wgsl=E({"f32": "u32(wg_isnan(a))", "*": "0u"}),
              infer=lambda x: (x.shape, dtypes.bool_), numpy=np.isnan)
ISINF = defop("isinf", wgsl=E({"f32": "u32(wg_isinf(a))", "*": "0u"}),
              infer=lambda x: (x.shape, dtypes.bool_), numpy=np.isinf)
ISFINITE = defop("isfinite", wgsl=E({"f32": "u32(!wg_isnan(a) && !wg_isinf(a))", "*": "1u"}),
                 infer=lambda x: (x.shape, dtypes.bool_), numpy=np.isfinite)


# -- more unary maths: trigonometric, hyperbolic, expm1, erfc, erfinv ----------------
# WGSL helpers in math.wgsl keep the digits the textbook formulas lose (expm1 near 0,
# sinh near 0, atanh near +-1, erfc for large x).
_erfc = np.frompyfunc(math.erfc, 1, 1)
_TWO_OVER_SQRT_PI = 2 / math.sqrt(math.pi)


def _erfinv_numpy(y):
    """erfinv in float64: a rational first guess in w = -log(1 - y^2), then Newton steps
    on erf(x) = y, which double the digits each time."""
    y64 = np.asarray(y, dtype=np.float64)
    inside = np.abs(y64) < 1
    safe = np.where(inside, y64, 0.0)
    w = -np.log((1 - safe) * (1 + safe))
    central = w < 5
    t = np.where(central, w - 2.5, np.sqrt(w) - 3)
    coefficients_central = (2.81022636e-08, 3.43273939e-07, -3.5233877e-06, -4.39150654e-06, 0.00021858087,
                            -0.00125372503, -0.00417768164, 0.246640727, 1.50140941)
    coefficients_tail = (-0.000200214257, 0.000100950558, 0.00134934322, -0.00367342844, 0.00573950773,
                         -0.0076224613, 0.00943887047, 1.00167406, 2.83297682)
    p_central, p_tail = np.zeros_like(t), np.zeros_like(t)
    for c_central, c_tail in zip(coefficients_central, coefficients_tail):
        p_central, p_tail = p_central * t + c_central, p_tail * t + c_tail
    x = np.where(central, p_central, p_tail) * safe
    for _ in range(3):
        residual = np.asarray(_erf(x), dtype=np.float64) - safe
        x = x - residual / (_TWO_OVER_SQRT_PI * np.exp(-x * x))
    x = np.where(inside, x, np.where(np.abs(y64) == 1, np.copysign(np.inf, y64), np.nan))
    return np.asarray(x, dtype=np.result_type(y))


TAN = _unary("tan", E("wg_tan(a)"), np.tan, lambda g, x, *, out: g * (1 + out * out), complex_too=True)
ASIN = _unary("asin", E("wg_asin(a)"), np.arcsin, lambda g, x, *, out: g * rsqrt(1 - x * x), complex_too=True)
ACOS = _unary("acos", E("wg_acos(a)"), np.arccos, lambda g, x, *, out: -g * rsqrt(1 - x * x), complex_too=True)
ATAN = _unary("atan", E("wg_atan(a)"), np.arctan, lambda g, x, *, out: g / (1 + x * x), complex_too=True)
SINH = _unary("sinh", E("wg_sinh(a)"), np.sinh, lambda g, x, *, out: g * cosh(x), complex_too=True)
COSH = _unary("cosh", E("wg_cosh(a)"), np.cosh, lambda g, x, *, out: g * sinh(x), complex_too=True)
ASINH = _unary("asinh", E("wg_asinh(a)"), np.arcsinh, lambda g, x, *, out: g * rsqrt(x * x + 1), complex_too=True)
ACOSH = _unary("acosh", E("wg_acosh(a)"), np.arccosh,  # (x - 1)(x + 1) in two roots: acosh's branch for complex x
               lambda g, x, *, out: g * rsqrt(x - 1) * rsqrt(x + 1), complex_too=True)
ATANH = _unary("atanh", E("wg_atanh(a)"), np.arctanh, lambda g, x, *, out: g / (1 - x * x), complex_too=True)
EXPM1 = _unary("expm1", E("wg_expm1(a)"), np.expm1, lambda g, x, *, out: g * (out + 1), complex_too=True)
ERFC = _unary("erfc", E("wg_erfc(a)"), lambda x: np.asarray(_erfc(x), dtype=x.dtype),
              lambda g, x, *, out: -g * _TWO_OVER_SQRT_PI * exp(-x * x))
ERFINV = _unary("erfinv", E("wg_erfinv(a)"), _erfinv_numpy,
                lambda g, x, *, out: g * (math.sqrt(math.pi) / 2) * exp(out * out))


def tan(x): return apply(TAN, _floatify(x))
def asin(x): return apply(ASIN, _floatify(x))
def acos(x): return apply(ACOS, _floatify(x))
def atan(x): return apply(ATAN, _floatify(x))
def sinh(x): return apply(SINH, _floatify(x))
def cosh(x): return apply(COSH, _floatify(x))
def asinh(x): return apply(ASINH, _floatify(x))
def acosh(x): return apply(ACOSH, _floatify(x))
def atanh(x): return apply(ATANH, _floatify(x))
def expm1(x): return apply(EXPM1, _floatify(x))
def erfc(x): return apply(ERFC, _floatify(x))
def erfinv(x): return apply(ERFINV, _floatify(x))
def trunc(x):
    reject_complex("trunc", x)
    return x.clone() if x.dtype.category != "float" else apply(TRUNC, x)


def neg(x): return apply(NEG, _check_numeric("neg", x))
def abs(x): return x.abs() if x.dtype.is_complex else apply(ABS, x)  # noqa: A001  (torch.abs; complex: core/complex_ops.py)
def exp(x): return apply(EXP, _floatify(x))
def log(x): return apply(LOG, _floatify(x))
def log1p(x): return apply(LOG1P, _floatify(x))
def sqrt(x): return apply(SQRT, _floatify(x))
def rsqrt(x): return apply(RSQRT, _floatify(x))
def sin(x): return apply(SIN, _floatify(x))
def cos(x): return apply(COS, _floatify(x))
def tanh(x): return apply(TANH, _floatify(x))
def sigmoid(x): return apply(SIGMOID, _floatify(x))
def erf(x): return apply(ERF, _floatify(x))
def relu(x): return apply(RELU, x)
def relu_backward(g, out): return apply(RELU_BACKWARD, g, out)
def reciprocal(x): return apply(RECIPROCAL, _floatify(x))
def floor(x):
    reject_complex("floor", x)
    return x if x.dtype.category != "float" else apply(FLOOR, x)
def ceil(x):
    reject_complex("ceil", x)
    return x if x.dtype.category != "float" else apply(CEIL, x)
def round(x, *, decimals=0):  # noqa: A001
    """Round half to even; with ``decimals``, round(x * 10**decimals) / 10**decimals, as PyTorch."""
    reject_complex("round", x)
    if x.dtype.category != "float":
        return x
    if decimals == 0:
        return apply(ROUND, x)
    scale = 10.0 ** decimals
    return apply(ROUND, x * scale) / scale
def sign(x): return apply(SIGN, x) if x.dtype is not dtypes.bool_ else x.clone()  # numpy has no bool sign
def logical_not(x): return apply(LOGICAL_NOT, x)
def isnan(x): return apply(ISNAN, x)
def isinf(x): return apply(ISINF, x)
def isfinite(x): return apply(ISFINITE, x)

# torch's autocast runs these in float32 on the GPU (autocasting.py).
_FLOAT32_UNDER_AUTOCAST = (tan, asin, acos, sinh, cosh, expm1, erfinv, exp, log, log1p, rsqrt, reciprocal)
(tan, asin, acos, sinh, cosh, expm1, erfinv, exp, log, log1p, rsqrt, reciprocal) = (
    autocast_op(f.__name__)(f) for f in _FLOAT32_UNDER_AUTOCAST)


def nan_to_num(x, nan=0.0, posinf=None, neginf=None):
    """NaN -> ``nan``, +inf -> ``posinf``, -inf -> ``neginf`` (by default the dtype's
    largest and lowest finite values), as ``torch.nan_to_num``. The gradient flows
    where x is finite. Integer and bool tensors come back unchanged (a copy).

    Example:
        >>> webgrad.nan_to_num(webgrad.tensor([float("nan"), float("inf"), 1.0]))
        tensor([ 0.0000e+00,  3.4028e+38,  1.0000e+00])
    """
    if x.dtype.category != "float":
        return x.clone()
    info = np.finfo(x.dtype.np)
    posinf = float(info.max) if posinf is None else posinf
    neginf = float(info.min) if neginf is None else neginf
    infinite = isinf(x)
    out = where(isnan(x), nan, x)
    out = where(logical_and(infinite, x > 0), posinf, out)
    return where(logical_and(infinite, x < 0), neginf, out)


def _check_numeric(name, x):
    if x.dtype is dtypes.bool_:
        raise OpError(f"{name}: not supported for bool tensors; use logical_not (~x)")
    return x


def _floatify(x):
    """Integer inputs of float functions (exp, log, ...) compute in the default float dtype
    (complex ones stay complex: the op computes them or says it can't)."""
    return x if x.dtype.is_floating_point or x.dtype.is_complex else cast(x, dtypes.get_default_dtype())


# -- cast -------------------------------------------------------------------------
def _cast_vjp(g, x, *, out, dtype):
    if not x.dtype.is_floating_point:
        return None
    return cast(g.real if g.dtype.is_complex else g, x.dtype)  # a real input's share is the real part


# To bool, NaN is True (it is not zero); wg_truthy tests it through the bits (math.wgsl).
CAST = defop("cast", wgsl=E({"f32->u32": "u32(wg_truthy(a))", "*->u32": "u32(a != A(0))", "*": "O(a)"}),
             infer=lambda x, *, dtype: (x.shape, dtype), vjp=_cast_vjp, reads_inputs=False,
             numpy=lambda x, *, dtype: x.astype(dtype.np))


def cast(x, dtype):
    return x if x.dtype is dtype else apply(CAST, x, dtype=dtype)


# -- binary -----------------------------------------------------------------------
def _pow_vjp(g, x, y, *, out, needs):
    # x ** 0 is constant: a zero gradient, not 0 * 0 ** -1 = NaN at x = 0 (as in PyTorch).
    gx = where(y == 0, 0.0, g * y * pow(x, y - 1)) if needs[0] else None
    gy = g * out * log(where(x > 0, x, 1)) if needs[1] else None
    return gx, gy


def _mul_vjp(g, x, y, *, out, needs):
    return (g * y if needs[0] else None), (g * x if needs[1] else None)


def _div_vjp(g, x, y, *, out, needs):
    return (g / y if needs[0] else None), (-g * out / y if needs[1] else None)


def _extremum_vjp(g, x, y, x_loses, y_loses):
    # As PyTorch: ties split the gradient evenly; each side gets it unless it lost
    # (so with a NaN on either side both get the whole gradient).
    half = where(x == y, g * 0.5, g)
    return where(x_loses, 0.0, half), where(y_loses, 0.0, half)


def _max_vjp(g, x, y, *, out):
    return _extremum_vjp(g, x, y, x < y, x > y)


def _min_vjp(g, x, y, *, out):
    return _extremum_vjp(g, x, y, x > y, x < y)


def _check_divisor(op_name, x, y):
    """Integer division by zero is an error, as in PyTorch (float division gives inf/nan).
    The WebGPU kernels flag it on the device (wg_check_divisor), raised at the next read."""
    if x.dtype.kind != "f" and np.any(np.asarray(y) == 0):
        raise RuntimeError(f"ZeroDivisionError: {op_name}: integer division by zero ({x.dtype} tensors of "
                           f"shapes {np.shape(x)} and {np.shape(y)}); mask zero divisors first "
                           f"(where(y == 0, 1, y)) or divide float tensors")


def _remainder(x, y):
    _check_divisor("remainder", x, y)
    return np.remainder(x, y)


def _floor_divide(x, y):
    _check_divisor("floor_divide", x, y)
    return np.floor_divide(x, y)


ADD = defop("add", wgsl=E({"u32": "a | b", "*": "a + b"}),
            infer=broadcast_infer("add"), numpy=np.add, vjp=lambda g, x, y, *, out: (g, g), reads_inputs=False)
SUB = defop("sub", wgsl=E("a - b"),
            infer=broadcast_infer("sub"), numpy=np.subtract, vjp=lambda g, x, y, *, out: (g, -g),
            reads_inputs=False)
MUL = defop("mul", wgsl=E({"u32": "a & b", "*": "a * b"}), infer=broadcast_infer("mul"), numpy=np.multiply,
            vjp=_mul_vjp, reads_for_others=True)
DIV = defop("div", wgsl=E("a / b"), infer=broadcast_infer("div"), numpy=np.divide,
            vjp=_div_vjp)
POW = defop("pow", wgsl=E({"f32": "wg_pow(a, b)", "i32": "wg_ipow(a, b)"}),
            infer=broadcast_infer("pow"), numpy=np.power, vjp=_pow_vjp)
MAXIMUM = defop("maximum", wgsl=E({"f32": "wg_max(a, b)", "*": "max(a, b)"}),
                infer=real_only("maximum", broadcast_infer("maximum")),
                numpy=np.maximum, vjp=_max_vjp)
MINIMUM = defop("minimum", wgsl=E({"f32": "wg_min(a, b)", "*": "min(a, b)"}),
                infer=real_only("minimum", broadcast_infer("minimum")),
                numpy=np.minimum, vjp=_min_vjp)
REMAINDER = defop("remainder", wgsl=E({"f32": "a - b * floor(a / b)", "i32": "wg_imod(a, wg_check_divisor(b))"}),
                  infer=broadcast_infer("remainder"), numpy=_remainder,
                  vjp=lambda g, x, y, *, out: (g, -g * floor(x / y)))
FLOOR_DIVIDE = defop("floor_divide", wgsl=E({"f32": "floor(a / b)", "i32": "wg_ifloordiv(a, wg_check_divisor(b))"}),
                     infer=broadcast_infer("floor_divide"), numpy=_floor_divide, vjp=_zero_vjp)
def _atan2_vjp(g, y, x, *, out):
    denominator = x * x + y * y
    return g * x / denominator, -g * y / denominator


def _fmod(x, y):
    _check_divisor("fmod", x, y)
    return np.fmod(x, y)


def _copysign_vjp(g, x, y, *, out):
    ratio = where(x == 0, 0.0, out / where(x == 0, 1.0, x))  # +-1; 0 at x = 0, as in PyTorch
    return g * ratio, zeros(g.shape, dtype=g.dtype, device=g.device)


ATAN2 = defop("atan2", wgsl=E("wg_atan2(a, b)"), infer=broadcast_infer("atan2"), numpy=np.arctan2, vjp=_atan2_vjp)
FMOD = defop("fmod", wgsl=E({"f32": "wg_fmod(a, b)", "i32": "wg_ifmod(a, wg_check_divisor(b))"}),
             infer=broadcast_infer("fmod"), numpy=_fmod, vjp=lambda g, x, y, *, out: (g, -g * trunc(x / y)))
COPYSIGN = defop("copysign", wgsl=E("wg_copysign(a, b)"), infer=broadcast_infer("copysign"), numpy=np.copysign,
                 vjp=_copysign_vjp)

EQ = defop("eq", wgsl=E("u32(a == b)"), infer=compare_infer("eq"), numpy=np.equal)
# NaN != anything is true (IEEE, numpy, PyTorch); WGSL compilers may emit an ordered
# compare that says false, so float ne tests NaN through the bits (math.wgsl).
NE = defop("ne", wgsl=E({"f32": "u32(wg_isnan(a) || wg_isnan(b) || a != b)", "*": "u32(a != b)"}),
           infer=compare_infer("ne"), numpy=np.not_equal)
LT = defop("lt", wgsl=E("u32(a < b)"), infer=real_only("lt", compare_infer("lt")), numpy=np.less)
LE = defop("le", wgsl=E("u32(a <= b)"), infer=real_only("le", compare_infer("le")), numpy=np.less_equal)
GT = defop("gt", wgsl=E("u32(a > b)"), infer=real_only("gt", compare_infer("gt")), numpy=np.greater)
GE = defop("ge", wgsl=E("u32(a >= b)"), infer=real_only("ge", compare_infer("ge")), numpy=np.greater_equal)
LOGICAL_AND = defop("logical_and", wgsl=E({"f32": "u32(wg_truthy(a) && wg_truthy(b))",
                                            "*": "u32((a != A(0)) && (b != A(0)))"}),
                    infer=compare_infer("logical_and"), numpy=np.logical_and)
LOGICAL_OR = defop("logical_or", wgsl=E({"f32": "u32(wg_truthy(a) || wg_truthy(b))",
                                          "*": "u32((a != A(0)) || (b != A(0)))"}),
                   infer=compare_infer("logical_or"), numpy=np.logical_or)
LOGICAL_XOR = defop("logical_xor", wgsl=E({"f32": "u32(wg_truthy(a) != wg_truthy(b))",
                                            "*": "u32((a != A(0)) != (b != A(0)))"}),
                    infer=compare_infer("logical_xor"), numpy=np.logical_xor)



# -- bitwise ops (bool and integer tensors) -------------------------------------------
def _bitwise_infer(op_name):
    def infer(x, y, **attrs):
        for t in (x, y):
            if t.dtype.category == "float":
                raise OpError(f"{op_name}: only integer and bool tensors are supported, got {describe(t)}")
        return broadcast_shapes(op_name, x.shape, y.shape), x.dtype
    return infer


def _shift_right(x, y):
    return np.right_shift(x, np.minimum(y, x.dtype.itemsize * 8 - 1).astype(x.dtype))


def _shift_left(x, y):
    return np.where(y >= x.dtype.itemsize * 8, x.dtype.type(0), np.left_shift(x, y))


BITWISE_AND = defop("bitwise_and", wgsl=E("a & b"), infer=_bitwise_infer("bitwise_and"), numpy=np.bitwise_and)
BITWISE_OR = defop("bitwise_or", wgsl=E("a | b"), infer=_bitwise_infer("bitwise_or"), numpy=np.bitwise_or)
BITWISE_XOR = defop("bitwise_xor", wgsl=E("a ^ b"), infer=_bitwise_infer("bitwise_xor"), numpy=np.bitwise_xor)
# Shift counts of the width or more: 0 for <<, the sign for >> (PyTorch's results; WGSL and C
# would take the count modulo the width).
BITWISE_LEFT_SHIFT = defop("bitwise_left_shift", wgsl=E("select(a << u32(b), 0, b >= 32 || b < 0)"),
                           infer=_bitwise_infer("bitwise_left_shift"), numpy=_shift_left)
BITWISE_RIGHT_SHIFT = defop("bitwise_right_shift", wgsl=E("a >> u32(clamp(b, 0, 31))"),
                            infer=_bitwise_infer("bitwise_right_shift"), numpy=_shift_right)
BITWISE_NOT = defop("bitwise_not", wgsl=E({"u32": "1u - a", "*": "~a"}), numpy=np.invert,
                    infer=lambda x: (x.shape, x.dtype) if x.dtype.category != "float" else _no_float("bitwise_not", x))


def _no_float(op_name, x):
    raise OpError(f"{op_name}: only integer and bool tensors are supported, got {describe(x)}")


def _bitwise(op, x, y):
    if op is not BITWISE_LEFT_SHIFT and op is not BITWISE_RIGHT_SHIFT and _is_bool(x) and _is_bool(y):
        # On bools these are the logical ops: one primitive per meaning, so masks (x > 0) & (y < 0)
        # keep lowering wherever logical_and does (ONNX, the web bundle).
        logical = {BITWISE_AND: logical_and, BITWISE_OR: logical_or, BITWISE_XOR: logical_xor}[op]
        return logical(x, y)
    return _binary(op, x, y)


def bitwise_and(input, other): return _bitwise(BITWISE_AND, input, other)  # noqa: A002
def bitwise_or(input, other): return _bitwise(BITWISE_OR, input, other)  # noqa: A002
def bitwise_xor(input, other): return _bitwise(BITWISE_XOR, input, other)  # noqa: A002
def bitwise_left_shift(input, other): return _bitwise(BITWISE_LEFT_SHIFT, input, other)  # noqa: A002
def bitwise_right_shift(input, other): return _bitwise(BITWISE_RIGHT_SHIFT, input, other)  # noqa: A002
def bitwise_not(input):  # noqa: A002
    return logical_not(input) if _is_bool(input) else apply(BITWISE_NOT, input)

def _scalar_tensor(value, dtype, device):
    if dtype.category == "int" and dtype.itemsize < 4 and not isinstance(value, bool):
        info = np.iinfo(dtype.np)
        if not info.min <= value <= info.max:  # uint8 tensor - 3: -3 wraps to 253, as in PyTorch
            value = int(np.array(int(value), dtype=np.int64).astype(dtype.np))
    return scalar_tensor(value, dtype, device)


def promote(op_name, *operands, float_result=False):
    """Cast operands (Tensors or Python numbers) to their common dtype, as tensors."""
    tensors = [a for a in operands if isinstance(a, Tensor)]
    if not tensors:
        raise TypeError(f"{op_name}: expected at least one Tensor operand")
    for a in operands:
        if not isinstance(a, (Tensor, bool, int, float, complex, np.number, np.bool_)):
            raise TypeError(f"{op_name}: unsupported operand type {type(a).__name__}; "
                            f"expected a Tensor or a Python number")
    dtype = dtypes.result_type([t.dtype for t in tensors if t.shape],
                               [t.dtype for t in tensors if not t.shape],
                               [a for a in operands if not isinstance(a, Tensor)])
    if float_result and not (dtype.is_floating_point or dtype.is_complex):
        dtype = dtypes.get_default_dtype()
    device = tensors[0].device
    return [cast(a, dtype) if isinstance(a, Tensor) else _scalar_tensor(a, dtype, device)
            for a in operands]


def _binary(op, x, y, float_result=False):
    # Fast paths for the common cases (same-dtype tensors, a float tensor and a
    # Python float); they give exactly what promote() would, without its cost.
    if isinstance(x, Tensor):
        category = x.dtype.category
        if isinstance(y, Tensor):
            if x.dtype is y.dtype and (category == "float" or not float_result):
                return apply(op, x, y)
        elif category == "float" and type(y) in (float, int):
            return apply(op, x, _scalar_tensor(y, x.dtype, x.device))
    elif isinstance(y, Tensor) and y.dtype.category == "float" and type(x) in (float, int):
        return apply(op, _scalar_tensor(x, y.dtype, y.device), y)
    x, y = promote(op.name, x, y, float_result=float_result)
    return apply(op, x, y)


def _scalars_to_tensor(x, y):
    """``torch.add(2, 3)``: two Python numbers make a 0-d tensor of their result type
    on the default device (add, sub, mul and div take them, as in PyTorch)."""
    if isinstance(x, Tensor) or isinstance(y, Tensor):
        return x
    dtype = dtypes.result_type([], [], [x, y])  # a TypeError names anything not a number
    return _scalar_tensor(x, dtype, default_device()).clone()


def add(x, y, *, alpha=1):
    x = _scalars_to_tensor(x, y)
    if alpha != 1:
        y = mul(y, alpha)
    return _binary(ADD, x, y)


def _is_bool(a):
    return a.dtype is dtypes.bool_ if isinstance(a, Tensor) else isinstance(a, (bool, np.bool_))


def sub(x, y, *, alpha=1):
    # Like PyTorch, any bool operand is an error (not only bool - bool).
    if _is_bool(x) or _is_bool(y):
        shown = " and ".join(describe(a) if isinstance(a, Tensor) else repr(a) for a in (x, y))
        raise OpError(f"sub: subtraction with a bool operand is not supported ({shown}); "
                      f"use logical_xor, or convert the bools with .int() or .float() first")
    x = _scalars_to_tensor(x, y)
    if alpha != 1:
        y = mul(y, alpha)
    x, y = promote("sub", x, y)
    return apply(SUB, x, y)


def mul(x, y): return _binary(MUL, _scalars_to_tensor(x, y), y)


def div(x, y, *, rounding_mode=None):
    """``x / y`` (true division, float result); ``rounding_mode="trunc"`` rounds the
    quotient toward zero, ``"floor"`` down (both keep integer dtypes), as ``torch.div``.

    Example:
        >>> webgrad.div(webgrad.tensor([-7, 7]), 2, rounding_mode="trunc")
        tensor([-3,  3])
    """
    x = _scalars_to_tensor(x, y)
    if rounding_mode is None:
        return _binary(DIV, x, y, float_result=True)
    if rounding_mode == "floor":
        return floor_divide(x, y)
    if rounding_mode != "trunc":
        raise ValueError(f"div expected rounding_mode to be one of None, 'trunc', or 'floor' "
                         f"but found {rounding_mode!r}")
    x, y = promote("div", x, y)
    if x.dtype.category == "float":
        return trunc(_binary(DIV, x, y))
    # Integers: x - fmod(x, y) is an exact multiple of y, so floor division is exact there.
    return floor_divide(sub(x, fmod(x, y)), y)
def true_divide(x, y): return div(x, y)
def maximum(x, y): return _binary(MAXIMUM, x, y)
def minimum(x, y): return _binary(MINIMUM, x, y)
def remainder(x, y): return _binary(REMAINDER, x, _nonzero_scalar("remainder", x, y))
def floor_divide(x, y): return _binary(FLOOR_DIVIDE, x, _nonzero_scalar("floor_divide", x, y))
@autocast_op("atan2")
def atan2(input, other): return _binary(ATAN2, input, other, float_result=True)  # noqa: A002
def fmod(input, other): return _binary(FMOD, input, _nonzero_scalar("fmod", input, other))  # noqa: A002
def copysign(input, other): return _binary(COPYSIGN, input, other, float_result=True)  # noqa: A002


def _nonzero_scalar(op_name, x, y):
    """An integer tensor divided by a Python 0 fails at once on every device (a zero in a
    tensor divisor fails in the kernel: at once on the cpu, at the next read on webgpu)."""
    if isinstance(x, Tensor) and x.dtype.category != "float" and type(y) in (int, bool) and y == 0:
        raise RuntimeError(f"ZeroDivisionError: {op_name}: integer division by zero ({describe(x)} by 0); "
                           f"divide by a non-zero number, or a float")
    return y
def eq(x, y): return _binary(EQ, x, y)
def ne(x, y): return _binary(NE, x, y)
def lt(x, y): return _binary(LT, x, y)
def le(x, y): return _binary(LE, x, y)
def gt(x, y): return _binary(GT, x, y)
def ge(x, y): return _binary(GE, x, y)
def logical_and(x, y): return _binary(LOGICAL_AND, x, y)
def logical_or(x, y): return _binary(LOGICAL_OR, x, y)
def logical_xor(x, y): return _binary(LOGICAL_XOR, x, y)


@autocast_op("pow")
def pow(x, y):  # noqa: A001  (torch.pow)
    if isinstance(y, Tensor) or not isinstance(x, Tensor):
        return _binary(POW, x, y)
    # A Python exponent keeps the base's dtype; negative int powers of ints are an error.
    if x.dtype.category != "float" and isinstance(y, int) and y < 0:
        raise OpError(f"pow: integers to negative integer powers are not allowed ({describe(x)} ** {y})")
    return _binary(POW, x, y)


# -- where / clamp ------------------------------------------------------------------
def _where_infer(c, x, y):
    if c.dtype is not dtypes.bool_:
        raise OpError(f"where: condition must be a bool tensor, got {describe(c)}")
    return broadcast_shapes("where", c.shape, x.shape, y.shape), x.dtype


def _where_vjp(g, c, x, y, *, out):
    zero = zeros_like_scalar(g)
    return None, where(c, g, zero), where(c, zero, g)


def zeros_like_scalar(t):
    return _scalar_tensor(0, t.dtype, t.device)


WHERE = defop("where", wgsl=E("select(c, b, a != 0u)"), infer=_where_infer, vjp=_where_vjp, numpy=np.where)


def where(condition, x, y):
    """``x`` where ``condition`` holds, else ``y`` (either may be a Python number)."""
    if not isinstance(condition, Tensor):
        raise TypeError("where: condition must be a bool Tensor")
    if not isinstance(x, Tensor) and not isinstance(y, Tensor):
        x = _scalar_tensor(x, dtypes.result_type([], [], [x, y]), condition.device)
    x, y = promote("where", x, y)
    return apply(WHERE, condition, x, y)


def clamp(x, min=None, max=None):  # noqa: A002  (torch's names)
    """Limit ``x`` to [min, max]; the gradient flows where min <= x <= max."""
    if min is None and max is None:
        raise ValueError("clamp: at least one of min and max must be given")
    out = x
    if min is not None:
        out = where(out < min, min, out)
    if max is not None:
        out = where(out > max, max, out)
    return out


def masked_fill(x, mask, value):
    """Where ``mask`` is True, replace ``x`` by ``value``."""
    if not isinstance(mask, Tensor) or mask.dtype is not dtypes.bool_:
        raise OpError(f"masked_fill: mask must be a bool tensor, got "
                      f"{describe(mask) if isinstance(mask, Tensor) else type(mask).__name__}")
    if isinstance(value, Tensor):
        value = cast(value, x.dtype)
    else:
        value = _scalar_tensor(value, x.dtype, x.device)
    return apply(WHERE, mask, value, x)
