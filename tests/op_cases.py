"""The op table: every op of the core, once, as data.

Each ``OpCase`` is a webgrad function, the same function on numpy arrays (the
reference), the specs of its inputs and whether it is differentiable. The same
table runs on every backend: ``tests/test_ops.py`` compares forward values,
shapes and dtypes with numpy on each device, ``tests/test_gradcheck.py`` checks
every differentiable case in float64 against finite differences.

Adding an op: add rows here. A backend is one parameter (the device); the only
per-backend knob is ``TOLERANCES`` (float32 rtol/atol per op name), below.

Input specs say where values come from, so results are well defined and
gradients are smooth: ``POS`` for log/sqrt, ``AWAY`` keeps values away from
kinks (abs, relu, clamp bounds), ``DISTINCT`` makes max/min/argmax unambiguous,
``IDX`` gives integer index tensors in range.
"""
from __future__ import annotations

import math
import zlib
from dataclasses import dataclass
from typing import Any, Callable

import numpy as np

import webgrad

# -- tolerances -------------------------------------------------------------------
# float32 (rtol, atol) per op name; the reference is computed in float64 from the
# same float32 inputs. WebGPU (f32 in WGSL, other summation orders) loosens these
# here, in this one place.
DEFAULT_TOLERANCE = (1e-5, 1e-6)
TOLERANCES: dict[str, tuple[float, float]] = {
    "sum": (1e-5, 1e-5), "mean": (1e-5, 1e-5), "var": (1e-5, 1e-5), "std": (1e-5, 1e-5),
    "prod": (1e-5, 1e-5), "norm": (1e-5, 1e-5), "logsumexp": (1e-5, 1e-5),
    "softmax": (1e-5, 1e-6), "log_softmax": (1e-5, 1e-5), "matmul": (1e-5, 1e-5), "linear": (1e-5, 1e-5),
    "pow": (1e-5, 1e-5), "erf": (1e-5, 1e-6), "scatter_add": (1e-5, 1e-5),
    "remainder": (1e-5, 1e-5), "sigmoid": (1e-5, 1e-6), "layer_norm_core": (1e-5, 1e-5),
    "layer_norm": (1e-5, 1e-5), "batch_norm": (1e-5, 1e-5),
    "cross_entropy": (1e-5, 1e-5), "cross_entropy_total": (1e-5, 1e-5),
}
FLOAT64_TOLERANCE = (1e-10, 1e-12)


def tolerance(op: str, dtype) -> tuple[float, float]:
    """(rtol, atol) for comparing an output of ``op`` of ``dtype`` with the reference."""
    if dtype is webgrad.float64:
        return FLOAT64_TOLERANCE
    if dtype is webgrad.float32:
        return TOLERANCES.get(op, DEFAULT_TOLERANCE)
    return (0.0, 0.0)  # ints and bools are exact


# -- input specs ------------------------------------------------------------------
@dataclass(frozen=True)
class Arg:
    """How to make one input: shape, dtype name and value domain."""

    shape: tuple
    dtype: str = "float32"
    kind: str = "uniform"  # uniform | away | distinct | nonzero | halves | int | index | bool
    low: float = -2.0
    high: float = 2.0
    away: tuple = ()  # for kind="away": points every value keeps at least 0.1 from
    negative: bool = False  # for kind="index": also use -n..-1

    def make(self, rng: np.random.Generator) -> np.ndarray:
        shape, n = self.shape, int(np.prod(self.shape, dtype=np.int64))
        if self.kind == "bool":
            return rng.random(shape) < 0.5
        if self.kind in ("int", "index"):
            low = -int(self.high) if self.negative else int(self.low)
            return rng.integers(low, int(self.high) + (self.kind == "int"), size=shape).astype(self.dtype)
        if self.kind == "distinct":
            # Well-separated values (gap >= 0.15) in random order: no ties for max/argmax.
            values = (rng.permutation(n) - n / 2) * 0.25 + rng.uniform(-0.05, 0.05, n)
            return values.reshape(shape).astype(self.dtype)
        if self.kind == "nonzero":
            values = rng.uniform(0.5, 2.0, shape) * rng.choice([-1.0, 1.0], shape)
            return values.astype(self.dtype)
        if self.kind == "halves":
            return (rng.integers(-6, 7, size=shape) * 0.5).astype(self.dtype)
        if self.kind == "special":
            values = [np.nan, np.inf, -np.inf, 0.0, -0.0, 1.5, -2.0, 40.0, -40.0]
            return rng.permutation(np.resize(np.array(values), n)).reshape(shape).astype(self.dtype)
        values = rng.uniform(self.low, self.high, shape)
        for point in self.away:
            near = np.abs(values - point) < 0.1
            values = np.where(near, point + np.copysign(0.1 + np.abs(values - point), values - point), values)
        return values.astype(self.dtype)


def F(*shape, low=-2.0, high=2.0, dtype="float32"):
    """Uniform floats in [low, high)."""
    return Arg(shape, dtype, "uniform", low, high)


def POS(*shape, dtype="float32"):
    """Positive floats in [0.5, 2): log, sqrt, rsqrt, pow bases."""
    return Arg(shape, dtype, "uniform", 0.5, 2.0)


def AWAY(*shape, points=(0.0,), dtype="float32"):
    """Floats kept 0.1 away from ``points`` (the kinks of abs, relu, clamp)."""
    return Arg(shape, dtype, "away", away=tuple(points))


def DISTINCT(*shape, dtype="float32"):
    """Floats at least 0.15 apart: no ties for max, min, argmax, sort orders."""
    return Arg(shape, dtype, "distinct")


def NZ(*shape, dtype="float32"):
    """Floats with 0.5 <= |x| < 2, either sign: denominators."""
    return Arg(shape, dtype, "nonzero")


def HALVES(*shape, dtype="float32"):
    """Multiples of 0.5 in [-3, 3]: ties for round, exact floor/ceil."""
    return Arg(shape, dtype, "halves")


def SPECIAL(*shape, dtype="float32"):
    """NaN, infinities, signed zeros and large values, each at least once when n >= 9."""
    return Arg(shape, dtype, "special")


def I(*shape, low=-5, high=5, dtype="int64"):  # noqa: E741,E743
    """Integers in [low, high]."""
    return Arg(shape, dtype, "int", low, high)


def IDX(*shape, high, negative=False, dtype="int64"):
    """Index tensor with values in [0, high) (or [-high, high) with negative=True)."""
    return Arg(shape, dtype, "index", 0, high, negative=negative)


def B(*shape):
    """Random bools: masks and conditions."""
    return Arg(shape, "bool", "bool")


# -- cases ------------------------------------------------------------------------
@dataclass
class OpCase:
    op: str  # the op's name: the key into TOLERANCES
    variant: str
    fn: Callable  # on webgrad tensors
    ref: Callable  # on numpy arrays
    args: tuple
    grad: bool = True  # differentiable w.r.t. its float inputs
    dtype: str | tuple | None = None  # expected result dtype(s); None: numpy's
    gen: Callable | None = None  # custom input maker: rng -> list of arrays

    @property
    def name(self) -> str:
        return f"{self.op}-{self.variant}"

    def make_inputs(self) -> list[np.ndarray]:
        """The inputs as numpy arrays; the same every run (seeded by the case's name)."""
        rng = np.random.default_rng(zlib.crc32(self.name.encode()))
        if self.gen is not None:
            return [np.asarray(a) for a in self.gen(rng)]
        return [a.make(rng) for a in self.args]


CASES: list[OpCase] = []


INT64_RESULT_OPS = {"argmax", "argmin"}  # numpy's index dtype is int32 on wasm32 (Pyodide)


def case(op, variant, fn, ref, *args, **kw) -> None:
    if op in INT64_RESULT_OPS:
        kw.setdefault("dtype", "int64")
    CASES.append(OpCase(op, variant, fn, ref, args, **kw))


def _erf(x):
    return np.vectorize(math.erf, otypes=[np.float64])(x).astype(np.result_type(x, np.float32))


def _sigmoid(x):
    return 1 / (1 + np.exp(-x))


def _on(device, key):
    """A getitem key with numpy index arrays turned into webgrad tensors on ``device``."""
    items = key if isinstance(key, tuple) else (key,)
    items = tuple(webgrad.tensor(i, device=device) if isinstance(i, np.ndarray) else i for i in items)
    return items if isinstance(key, tuple) else items[0]


# ---- elementwise binary arithmetic: + - * / ** ------------------------------------
for op, fn, ref in [
    ("add", lambda x, y: x + y, np.add),
    ("sub", lambda x, y: x - y, np.subtract),
    ("mul", lambda x, y: x * y, np.multiply),
]:
    case(op, "same_shape", fn, ref, F(3, 4), F(3, 4))
    case(op, "broadcast", fn, ref, F(3, 1), F(1, 4))
    case(op, "broadcast_rank", fn, ref, F(2, 3, 4), F(4))
    case(op, "zero_dim", fn, ref, F(), F(2, 3))
    case(op, "scalar_right", lambda x, fn=fn: fn(x, 2.5), lambda x, ref=ref: ref(x, 2.5), F(2, 3))
    case(op, "scalar_left", lambda x, fn=fn: fn(2.5, x), lambda x, ref=ref: ref(2.5, x), F(2, 3))
    case(op, "int_scalar", lambda x, fn=fn: fn(x, 3), lambda x, ref=ref: ref(x, 3), F(4))
    case(op, "int", fn, ref, I(3, 4), I(4), grad=False)
    case(op, "int32_int64", fn, ref, I(3, dtype="int32"), I(3), grad=False)
    case(op, "int32_pyint", lambda x, fn=fn: fn(x, 7), lambda x, ref=ref: ref(x, np.int32(7)),
         I(3, dtype="int32"), grad=False)
    case(op, "int_float", fn, ref, I(3, 4), F(3, 4), dtype="float32")
    case(op, "int_pyfloat", lambda x, fn=fn: fn(x, 1.5), lambda x, ref=ref: ref(x, 1.5),
         I(3), grad=False, dtype="float32")
    case(op, "float32_float64", fn, ref, F(3), F(3, dtype="float64"))
    case(op, "float32_0d_float64", fn, ref, F(3), F(dtype="float64"), dtype="float32")
    case(op, "int_0d_float64", fn, ref, I(3), F(dtype="float64"), dtype="float64")
    if op != "sub":  # sub with a bool operand is an error, as in PyTorch (tests/test_errors.py)
        case(op, "bool_int", fn, ref, B(3), I(3), grad=False)
case("add", "bool_bool", lambda x, y: x + y, np.logical_or, B(5), B(5), grad=False)
case("mul", "bool_bool", lambda x, y: x * y, np.logical_and, B(5), B(5), grad=False)
case("add", "bool_pyint", lambda x: x + 2, lambda x: x.astype(np.int64) + 2, B(4), grad=False)
case("add", "alpha", lambda x, y: webgrad.add(x, y, alpha=2), lambda x, y: x + 2 * y, F(3), F(2, 3))
case("sub", "alpha", lambda x, y: webgrad.sub(x, y, alpha=0.5), lambda x, y: x - 0.5 * y, F(3), F(3))

case("div", "same_shape", lambda x, y: x / y, np.divide, F(3, 4), NZ(3, 4))
case("div", "broadcast", lambda x, y: x / y, np.divide, F(2, 1, 4), NZ(3, 1))
case("div", "scalar_right", lambda x: x / 4.0, lambda x: x / 4.0, F(5))
case("div", "scalar_left", lambda x: 1 / x, lambda x: 1 / x, NZ(5))
case("div", "int_int", lambda x, y: x / y, np.divide, I(6), I(6, low=1, high=4), grad=False, dtype="float32")
case("div", "int_pyint", lambda x: x / 2, lambda x: x / 2, I(6), grad=False, dtype="float32")
case("div", "bool_bool", lambda x, y: x / y, lambda x, y: x / y.astype(np.float64), B(4), B(4), grad=False,
     dtype="float32", gen=lambda rng: [rng.random(4) < 0.5, np.ones(4, dtype=bool)])  # nothing / False
case("div", "true_divide", lambda x, y: webgrad.true_divide(x, y), np.divide, F(3), NZ(3))
case("div", "float64", lambda x, y: x / y, np.divide, F(3, dtype="float64"), NZ(3, dtype="float64"))

case("pow", "square", lambda x: x ** 2, lambda x: x ** 2, F(3, 4))
case("pow", "cube_negative_base", lambda x: x ** 3, lambda x: x ** 3, F(6, low=-2, high=-0.5))
case("pow", "sqrt", lambda x: x ** 0.5, lambda x: x ** 0.5, POS(6))
case("pow", "negative_exponent", lambda x: x ** -1.5, lambda x: x ** -1.5, POS(6))
case("pow", "scalar_base", lambda x: 2 ** x, lambda x: 2.0 ** x, F(6))
case("pow", "tensor_tensor", lambda x, y: x ** y, np.power, POS(2, 3), F(3))
case("pow", "method", lambda x, y: x.pow(y), np.power, POS(4), F(4))
case("pow", "int_square", lambda x: x ** 2, lambda x: x ** 2, I(5), grad=False)
case("pow", "int_sqrt", lambda x: x ** 0.5, lambda x: x ** 0.5, I(5, low=0, high=9), grad=False, dtype="float32")
case("pow", "int_int", lambda x, y: x ** y, np.power, I(5), I(5, low=0, high=3), grad=False)

# ---- unary ----------------------------------------------------------------------
for op, fn, ref, arg in [
    ("neg", lambda x: -x, np.negative, F(3, 4)),
    ("abs", lambda x: x.abs(), np.abs, AWAY(3, 4)),
    ("exp", lambda x: x.exp(), np.exp, F(3, 4)),
    ("log", lambda x: x.log(), np.log, POS(3, 4)),
    ("log1p", lambda x: x.log1p(), np.log1p, F(3, 4, low=-0.5, high=2)),
    ("sqrt", lambda x: x.sqrt(), np.sqrt, POS(3, 4)),
    ("rsqrt", lambda x: x.rsqrt(), lambda x: 1 / np.sqrt(x), POS(3, 4)),
    ("sin", lambda x: x.sin(), np.sin, F(3, 4)),
    ("cos", lambda x: x.cos(), np.cos, F(3, 4)),
    ("tanh", lambda x: x.tanh(), np.tanh, F(3, 4)),
    ("sigmoid", lambda x: x.sigmoid(), _sigmoid, F(3, 4, low=-6, high=6)),
    ("erf", lambda x: x.erf(), _erf, F(3, 4)),
    ("relu", lambda x: x.relu(), lambda x: np.maximum(x, 0), AWAY(3, 4)),
    ("reciprocal", lambda x: x.reciprocal(), lambda x: 1 / x, NZ(3, 4)),
    ("square", lambda x: x.square(), np.square, F(3, 4)),
]:
    case(op, "float", fn, ref, arg)
    case(op, "zero_dim", fn, ref, Arg((), arg.dtype, arg.kind, arg.low, arg.high, arg.away))
for op, fn, ref in [
    ("exp", webgrad.exp, np.exp), ("log", webgrad.log, np.log), ("sqrt", webgrad.sqrt, np.sqrt),
    ("sin", webgrad.sin, np.sin), ("tanh", webgrad.tanh, np.tanh), ("sigmoid", webgrad.sigmoid, _sigmoid),
]:
    case(op, "int_input", fn, ref, I(5, low=1, high=4), grad=False, dtype="float32")
case("sigmoid", "large", lambda x: x.sigmoid(), _sigmoid, F(4, low=-80, high=80))
case("neg", "int", lambda x: -x, np.negative, I(5), grad=False)
case("abs", "int", lambda x: x.abs(), np.abs, I(5), grad=False)
case("relu", "int", lambda x: x.relu(), lambda x: np.maximum(x, 0), I(5), grad=False)
case("relu", "function", webgrad.relu, lambda x: np.maximum(x, 0), AWAY(2, 3))
case("relu_backward", "threshold", lambda g, y: webgrad.ops.elementwise.relu_backward(g, y),
     lambda g, y: np.where(y <= 0, 0, g), F(3, 4), AWAY(3, 4))
case("abs", "builtin", lambda x: abs(x), np.abs, AWAY(4))
case("neg", "float64", lambda x: -x, np.negative, F(4, dtype="float64"))

for op, fn, ref in [("floor", lambda x: x.floor(), np.floor), ("ceil", lambda x: x.ceil(), np.ceil),
                    ("round", lambda x: x.round(), np.round), ("sign", lambda x: x.sign(), np.sign)]:
    case(op, "float", fn, ref, F(3, 4, low=-3, high=3), grad=False)
    case(op, "halves", fn, ref, HALVES(13), grad=False)
    case(op, "int", fn, ref, I(5), grad=False, dtype="int64")
case("sign", "bool", lambda x: x.sign(), lambda x: x.copy(), B(5), grad=False)

# ---- step functions: zero gradients (PyTorch); sign(NaN) = 0; trunc ------------------------
for op, fn, ref in [("floor", lambda x: x.floor(), np.floor), ("ceil", lambda x: x.ceil(), np.ceil),
                    ("round", lambda x: x.round(), np.round), ("sign", lambda x: x.sign(), np.sign),
                    ("trunc", lambda x: x.trunc(), np.trunc)]:
    case(op, "zero_gradient", fn, ref, F(3, 4, low=-3, high=3))
case("trunc", "halves", lambda x: webgrad.trunc(x), np.trunc, HALVES(13), grad=False)
case("trunc", "special", lambda x: x.trunc(), np.trunc, SPECIAL(9), grad=False)
case("sign", "special", lambda x: x.sign(), lambda x: np.where(np.isnan(x), 0, np.sign(x)).astype(x.dtype),
     SPECIAL(9), grad=False)


# ---- trigonometric and hyperbolic functions, expm1, erfc, erfinv ---------------------------
def _erfinv_reference(y):
    """erfinv by bisection on math.erf (independent of the kernel's Newton iteration)."""
    def one(v):
        if not abs(v) <= 1:  # NaN too
            return math.nan
        if abs(v) == 1:
            return math.copysign(math.inf, v)
        low, high = -6.0, 6.0
        for _ in range(80):
            middle = (low + high) / 2
            low, high = (middle, high) if math.erf(middle) < v else (low, middle)
        return (low + high) / 2
    return np.vectorize(one, otypes=[np.float64])(y).astype(np.result_type(y, np.float32))


def _erfc_reference(x):
    return np.vectorize(math.erfc, otypes=[np.float64])(x).astype(np.result_type(x, np.float32))


for op, fn, ref, arg in [
    ("tan", lambda x: x.tan(), np.tan, F(3, 4, low=-1.2, high=1.2)),
    ("asin", lambda x: x.asin(), np.arcsin, F(3, 4, low=-0.9, high=0.9)),
    ("acos", lambda x: x.arccos(), np.arccos, F(3, 4, low=-0.9, high=0.9)),
    ("atan", lambda x: x.atan(), np.arctan, F(3, 4, low=-4, high=4)),
    ("sinh", lambda x: x.sinh(), np.sinh, F(3, 4, low=-3, high=3)),
    ("cosh", lambda x: x.cosh(), np.cosh, F(3, 4, low=-3, high=3)),
    ("asinh", lambda x: x.asinh(), np.arcsinh, F(3, 4, low=-5, high=5)),
    ("acosh", lambda x: x.acosh(), np.arccosh, F(3, 4, low=1.2, high=5)),
    ("atanh", lambda x: x.atanh(), np.arctanh, F(3, 4, low=-0.9, high=0.9)),
    ("expm1", lambda x: x.expm1(), np.expm1, F(3, 4)),
    ("erfc", lambda x: x.erfc(), _erfc_reference, F(3, 4, low=-3, high=3)),
    ("erfinv", lambda x: x.erfinv(), _erfinv_reference, F(3, 4, low=-0.95, high=0.95)),
]:
    case(op, "float", fn, ref, arg)
    case(op, "zero_dim", fn, ref, Arg((), arg.dtype, arg.kind, arg.low, arg.high))
    case(op, "float64", fn, ref, Arg((5,), "float64", arg.kind, arg.low, arg.high))
    case(op, "special", fn, ref, SPECIAL(9), grad=False)
for op, fn, ref in [("tan", webgrad.tan, np.tan), ("atan", webgrad.arctan, np.arctan),
                    ("sinh", webgrad.sinh, np.sinh), ("expm1", webgrad.expm1, np.expm1)]:
    case(op, "int_input", fn, ref, I(5, low=-2, high=2), grad=False, dtype="float32")
# Near 0, where 1 - exp(x) or (exp(x) - exp(-x)) / 2 would lose every digit.
case("expm1", "tiny", lambda x: x.expm1(), np.expm1, F(6, low=-1e-4, high=1e-4))
case("sinh", "tiny", lambda x: x.sinh(), np.sinh, F(6, low=-1e-4, high=1e-4))
case("asinh", "tiny", lambda x: x.asinh(), np.arcsinh, F(6, low=-1e-4, high=1e-4))
case("atanh", "tiny", lambda x: x.atanh(), np.arctanh, F(6, low=-1e-4, high=1e-4))
case("erfc", "tail", lambda x: x.erfc(), _erfc_reference, F(6, low=3, high=9), grad=False)
case("atan2", "same_shape", lambda y, x: webgrad.atan2(y, x), np.arctan2, F(3, 4), NZ(3, 4))
case("atan2", "broadcast_method", lambda y, x: y.arctan2(x), np.arctan2, F(3, 1), NZ(4))
case("atan2", "int", lambda y, x: webgrad.atan2(y, x), np.arctan2, I(6), I(6), grad=False, dtype="float32")
case("atan2", "special", lambda y, x: webgrad.atan2(y, x), np.arctan2, SPECIAL(9), F(9), grad=False)
case("fmod", "float", lambda x, y: webgrad.fmod(x, y), np.fmod, F(3, 4), F(3, 4),
     gen=lambda rng: _away_from_multiples(rng, (3, 4)))
case("fmod", "scalar", lambda x: x.fmod(1.5), lambda x: np.fmod(x, 1.5), F(6),
     gen=lambda rng: [((rng.integers(-3, 3, 6) + rng.uniform(0.1, 0.9, 6)) * 1.5).astype(np.float32)])
case("fmod", "int", lambda x, y: webgrad.fmod(x, y), np.fmod, I(6, low=-9, high=9), I(6, low=1, high=4), grad=False)
case("fmod", "int_negative_divisor", lambda x: x.fmod(-3), lambda x: np.fmod(x, -3), I(6, low=-9, high=9),
     grad=False)
case("copysign", "float", lambda x, y: webgrad.copysign(x, y), np.copysign, AWAY(3, 4), F(3, 4))
case("copysign", "special", lambda x, y: x.copysign(y), np.copysign, SPECIAL(9), SPECIAL(9), grad=False)
case("copysign", "scalar", lambda x: x.copysign(-1.0), lambda x: np.copysign(x, -1.0), AWAY(5))
case("copysign", "int", lambda x, y: webgrad.copysign(x, y), np.copysign, I(5), I(5), grad=False,
     dtype="float32")
# ---- bitwise ops: bool and integer tensors --------------------------------------------------
for op, fn, ref in [("bitwise_and", lambda x, y: x & y, np.bitwise_and),
                    ("bitwise_or", lambda x, y: x | y, np.bitwise_or),
                    ("bitwise_xor", lambda x, y: webgrad.bitwise_xor(x, y), np.bitwise_xor)]:
    case(op, "int", fn, ref, I(3, 4, low=-20, high=20), I(4, low=-20, high=20), grad=False)
    case(op, "bool", fn, ref, B(3, 4), B(3, 4), grad=False)
    case(op, "int32_scalar", lambda x, fn=fn: fn(x, 6), lambda x, ref=ref: ref(x, np.int32(6)),
         I(5, low=-20, high=20, dtype="int32"), grad=False)
case("bitwise_and", "scalar_left", lambda x: 12 & x, lambda x: np.bitwise_and(12, x), I(5, low=-20, high=20),
     grad=False)
case("bitwise_not", "int", lambda x: ~x, np.invert, I(6, low=-20, high=20), grad=False)
case("bitwise_not", "bool", lambda x: x.bitwise_not(), np.invert, B(6), grad=False)
case("bitwise_left_shift", "int", lambda x, y: x << y, np.left_shift, I(6, low=-20, high=20), I(6, low=0, high=8),
     grad=False)
case("bitwise_left_shift", "scalar_left", lambda y: 3 << y, lambda y: np.left_shift(3, y), I(6, low=0, high=8),
     grad=False)
case("bitwise_right_shift", "int", lambda x, y: x >> y, np.right_shift, I(6, low=-99, high=99),
     I(6, low=0, high=8), grad=False)
case("bitwise_right_shift", "method", lambda x: x.bitwise_right_shift(2), lambda x: np.right_shift(x, 2),
     I(6, low=-99, high=99, dtype="int32"), grad=False)
# ---- uint8, int8, int16: wrap-around casts and arithmetic, torch's promotion ---------------------
case("cast", "to_uint8_wraps", lambda x: x.byte(), lambda x: x.astype(np.uint8), I(8, low=-300, high=300), grad=False)
case("cast", "to_int8_wraps", lambda x: x.char(), lambda x: x.astype(np.int8), I(8, low=-300, high=300), grad=False)
case("cast", "to_int16_wraps", lambda x: x.short(), lambda x: x.astype(np.int16), I(8, low=-70000, high=70000),
     grad=False)
case("cast", "float_to_uint8", lambda x: x.to(webgrad.uint8), lambda x: x.astype(np.uint8), F(8, low=0, high=255),
     grad=False)
case("cast", "uint8_to_float", lambda x: x.float(), lambda x: x.astype(np.float32),
     I(8, low=0, high=255, dtype="uint8"), grad=False)
case("add", "uint8_wraps", lambda x, y: x + y, np.add, I(8, low=0, high=255, dtype="uint8"),
     I(8, low=0, high=255, dtype="uint8"), grad=False)
case("mul", "int8_wraps", lambda x, y: x * y, np.multiply, I(8, low=-128, high=127, dtype="int8"),
     I(8, low=-128, high=127, dtype="int8"), grad=False)
case("sub", "int16_wraps", lambda x, y: x - y, np.subtract, I(8, low=-32768, high=32767, dtype="int16"),
     I(8, low=-32768, high=32767, dtype="int16"), grad=False)
case("add", "uint8_int8", lambda x, y: x + y, np.add, I(8, low=0, high=255, dtype="uint8"),
     I(8, low=-128, high=127, dtype="int8"), grad=False, dtype="int16")
case("add", "uint8_pyint", lambda x: x + 7, lambda x: x + np.uint8(7), I(8, low=0, high=255, dtype="uint8"), grad=False)
case("neg", "uint8_wraps", lambda x: -x, np.negative, I(8, low=0, high=255, dtype="uint8"), grad=False)
case("sub", "uint8_pyint_wraps", lambda x: x - 300, lambda x: (x.astype(np.int64) - 300).astype(np.uint8),
     I(8, low=0, high=255, dtype="uint8"), grad=False)
case("bitwise_and", "uint8", lambda x, y: x & y, np.bitwise_and, I(8, low=0, high=255, dtype="uint8"),
     I(8, low=0, high=255, dtype="uint8"), grad=False)
case("bitwise_not", "uint8", lambda x: ~x, np.invert, I(8, low=0, high=255, dtype="uint8"), grad=False)
case("bitwise_not", "int8", lambda x: ~x, np.invert, I(8, low=-128, high=127, dtype="int8"), grad=False)
case("bitwise_left_shift", "int16_wraps", lambda x: x << 9, lambda x: np.left_shift(x, np.int16(9)),
     I(8, low=-300, high=300, dtype="int16"), grad=False)
TOLERANCES.update({"erfinv": (2e-5, 1e-6), "tan": (1e-5, 1e-5), "cosh": (1e-5, 1e-5), "sinh": (1e-5, 1e-5),
                   "erfc": (2e-5, 1e-6)})

# ---- isnan, isinf, isfinite, nan_to_num: NaN, +-inf and signed zeros in every row ------
for op, fn, ref in [("isnan", lambda x: x.isnan(), np.isnan), ("isinf", webgrad.isinf, np.isinf),
                    ("isfinite", lambda x: x.isfinite(), np.isfinite)]:
    case(op, "special", fn, ref, SPECIAL(3, 6), grad=False)
    case(op, "int", fn, ref, I(5), grad=False)
    case(op, "bool", fn, ref, B(4), grad=False)
case("nan_to_num", "default", lambda x: x.nan_to_num(), lambda x: np.nan_to_num(x.astype(np.float32)),
     SPECIAL(3, 6), grad=False)
case("nan_to_num", "values", lambda x: webgrad.nan_to_num(x, nan=1.5, posinf=9.0, neginf=-9.0),
     lambda x: np.nan_to_num(x, nan=1.5, posinf=9.0, neginf=-9.0), SPECIAL(9), grad=False)
case("nan_to_num", "finite", lambda x: x.nan_to_num(), lambda x: x, F(3, 4))  # gradient: identity
case("nan_to_num", "int", lambda x: x.nan_to_num(), lambda x: x, I(5), grad=False)
# Compares and truth values with NaN: NaN != x is True, bool(NaN) is True (WGSL may say otherwise).
for op, fn, ref in [("eq", lambda x, y: x == y, np.equal), ("ne", lambda x, y: x != y, np.not_equal),
                    ("lt", lambda x, y: x < y, np.less), ("le", lambda x, y: x <= y, np.less_equal),
                    ("gt", lambda x, y: x > y, np.greater), ("ge", lambda x, y: x >= y, np.greater_equal),
                    ("logical_and", webgrad.logical_and, np.logical_and),
                    ("logical_or", webgrad.logical_or, np.logical_or),
                    ("logical_xor", webgrad.logical_xor, np.logical_xor)]:
    case(op, "special", fn, ref, SPECIAL(3, 6), SPECIAL(3, 6), grad=False)
case("logical_not", "special", webgrad.logical_not, np.logical_not, SPECIAL(9), grad=False)
case("cast", "special_to_bool", lambda x: x.bool(), lambda x: x.astype(bool), SPECIAL(9), grad=False)

# ---- clamp, maximum/minimum, where ---------------------------------------------
case("clamp", "both", lambda x: x.clamp(-0.5, 0.5), lambda x: np.clip(x, -0.5, 0.5), AWAY(3, 4, points=(-0.5, 0.5)))
case("clamp", "min", lambda x: x.clamp(min=0.25), lambda x: np.maximum(x, 0.25), AWAY(3, 4, points=(0.25,)))
case("clamp", "max", lambda x: webgrad.clamp(x, max=-0.25), lambda x: np.minimum(x, -0.25),
     AWAY(3, 4, points=(-0.25,)))
case("clamp", "int", lambda x: x.clamp(-2, 2), lambda x: np.clip(x, -2, 2), I(6), grad=False)
case("clamp", "int_float_bounds", lambda x: x.clamp(-1.5, 2.5), lambda x: np.clip(x, -1.5, 2.5), I(6),
     grad=False, dtype="float32")
case("clamp", "clip_alias", lambda x: x.clip(-1, 1), lambda x: np.clip(x, -1, 1), AWAY(5, points=(-1, 1)))


def _apart(rng, shape):
    """Two float arrays whose elements differ by at least 0.2: no ties for maximum."""
    x = rng.uniform(-2, 2, shape)
    y = x + rng.uniform(0.2, 1.0, shape) * rng.choice([-1.0, 1.0], shape)
    return [x.astype(np.float32), y.astype(np.float32)]


def _apart_broadcast(rng):
    x = rng.uniform(-2, 2, (3, 4))
    y = rng.uniform(2.2, 3.0, (4,)) * rng.choice([-1.0, 1.0], (4,))  # |y| > |x| everywhere
    return [x.astype(np.float32), y.astype(np.float32)]


for op, function, method, ref in [("maximum", webgrad.maximum, lambda x, y: x.max(y), np.maximum),
                                  ("minimum", webgrad.minimum, lambda x, y: webgrad.min(x, y), np.minimum)]:
    case(op, "same_shape", function, ref, F(3, 4), F(3, 4), gen=lambda rng: _apart(rng, (3, 4)))
    case(op, "max_min_form", method, ref, F(3, 4), F(3, 4), gen=lambda rng: _apart(rng, (3, 4)))
    case(op, "method", lambda x, y, op=op: getattr(x, op)(y), ref, F(5), F(5), gen=lambda rng: _apart(rng, (5,)))
    case(op, "broadcast", function, ref, F(3, 4), F(4), gen=_apart_broadcast)
    case(op, "int", function, ref, I(3, 4), I(4), grad=False)
    case(op, "int_float", function, ref, I(3, 4), F(3, 4), grad=False, dtype="float32")

case("where", "same_shape", lambda c, x, y: webgrad.where(c, x, y), np.where, B(3, 4), F(3, 4), F(3, 4))
case("where", "broadcast", lambda c, x, y: webgrad.where(c, x, y), np.where, B(3, 1), F(1, 4), F(3, 4))
case("where", "scalar_other", lambda c, x: webgrad.where(c, x, 0.0), lambda c, x: np.where(c, x, 0.0),
     B(2, 3), F(2, 3))
case("where", "scalar_both", lambda c: webgrad.where(c, 1.0, -1.0), lambda c: np.where(c, 1.0, -1.0).astype(np.float32),
     B(5), grad=False)
case("where", "int", lambda c, x, y: webgrad.where(c, x, y), np.where, B(5), I(5), I(5), grad=False)
case("where", "method", lambda x, c, y: x.where(c, y), lambda x, c, y: np.where(c, x, y), F(4), B(4), F(4))
case("where", "condition_from_compare", lambda x: webgrad.where(x > 0, x, x * 0.1),
     lambda x: np.where(x > 0, x, x * 0.1), AWAY(3, 3))
case("masked_fill", "scalar", lambda x, m: x.masked_fill(m, -1.0), lambda x, m: np.where(m, -1.0, x).astype(x.dtype),
     F(3, 4), B(3, 4))
case("masked_fill", "broadcast_mask", lambda x, m: x.masked_fill(m, 0.0),
     lambda x, m: np.where(m, 0.0, x).astype(x.dtype), F(3, 4), B(4))

# ---- comparisons and logical ops ------------------------------------------------
for op, fn, ref in [("eq", lambda x, y: x == y, np.equal), ("ne", lambda x, y: x != y, np.not_equal),
                    ("lt", lambda x, y: x < y, np.less), ("le", lambda x, y: x <= y, np.less_equal),
                    ("gt", lambda x, y: x > y, np.greater), ("ge", lambda x, y: x >= y, np.greater_equal)]:
    case(op, "float", fn, ref, F(3, 4), F(3, 4), grad=False)
    case(op, "broadcast_int", fn, ref, I(3, 4, low=-2, high=2), I(4, low=-2, high=2), grad=False)
    case(op, "scalar", lambda x, fn=fn: fn(x, 1), lambda x, ref=ref: ref(x, 1), I(6, low=0, high=2), grad=False)
    case(op, "int_float", fn, ref, HALVES(6), I(6, low=-3, high=3), grad=False)
case("eq", "method", lambda x, y: x.eq(y), np.equal, I(5, low=0, high=2), I(5, low=0, high=2), grad=False)
case("lt", "method", lambda x, y: webgrad.lt(x, y), np.less, F(5), F(5), grad=False)
case("ge", "method", lambda x: x.ge(0.0), lambda x: x >= 0.0, F(5), grad=False)
for op, fn, ref in [("logical_and", lambda x, y: x & y, np.logical_and),
                    ("logical_or", lambda x, y: x | y, np.logical_or),
                    ("logical_xor", lambda x, y: x ^ y, np.logical_xor)]:
    case(op, "operator", fn, ref, B(3, 4), B(4), grad=False)
    case(op, "function", getattr(webgrad, op), ref, B(3, 4), B(3, 4), grad=False)
    case(op, "numbers", getattr(webgrad, op), ref, I(6, low=0, high=1), F(6), grad=False, dtype="bool")
case("logical_not", "operator", lambda x: ~x, np.logical_not, B(3, 4), grad=False)
case("logical_not", "float", lambda x: webgrad.logical_not(x), np.logical_not, I(5, low=0, high=1), grad=False)

# ---- remainder, floor_divide ----------------------------------------------------


def _away_from_multiples(rng, shape):
    """x and y with frac(x / y) in [0.1, 0.9]: remainder is smooth there."""
    y = rng.uniform(0.5, 2.0, shape) * rng.choice([-1.0, 1.0], shape)
    x = (rng.integers(-3, 3, shape) + rng.uniform(0.1, 0.9, shape)) * y
    return [x.astype(np.float32), y.astype(np.float32)]


case("remainder", "float", lambda x, y: x % y, np.remainder, F(3, 4), F(3, 4),
     gen=lambda rng: _away_from_multiples(rng, (3, 4)))
case("remainder", "scalar", lambda x: x % 1.5, lambda x: np.remainder(x, 1.5), F(6),
     gen=lambda rng: [((rng.integers(-3, 3, 6) + rng.uniform(0.1, 0.9, 6)) * 1.5).astype(np.float32)])
case("remainder", "function", lambda x, y: webgrad.remainder(x, y), np.remainder, F(3, 4), F(3, 4),
     gen=lambda rng: _away_from_multiples(rng, (3, 4)))
case("remainder", "int", lambda x, y: x % y, np.remainder, I(6, low=-9, high=9), I(6, low=1, high=4), grad=False)
case("remainder", "int_negative_divisor", lambda x: x % -3, lambda x: np.remainder(x, -3), I(6, low=-9, high=9),
     grad=False)
case("remainder", "scalar_left", lambda x: 5 % x, lambda x: np.remainder(5, x), I(6, low=1, high=4), grad=False)
case("floor_divide", "float", lambda x, y: x // y, np.floor_divide, F(3, 4), NZ(3, 4), grad=False)
case("floor_divide", "int", lambda x, y: x // y, np.floor_divide, I(6, low=-9, high=9),
     I(6, low=1, high=4), grad=False)
case("floor_divide", "int_negative_scalar", lambda x: x // -2, lambda x: np.floor_divide(x, -2),
     I(6, low=-9, high=9), grad=False)
case("floor_divide", "function", lambda x: webgrad.ops.floor_divide(x, 2.0), lambda x: np.floor_divide(x, 2.0),
     F(6, low=-5, high=5), grad=False)

# ---- reductions -----------------------------------------------------------------
for op, fn, ref in [("sum", lambda x, **k: x.sum(**k), lambda x, **k: np.sum(x, **k)),
                    ("mean", lambda x, **k: x.mean(**k), lambda x, **k: np.mean(x, **k))]:
    case(op, "all", lambda x, fn=fn: fn(x), lambda x, ref=ref: ref(x), F(2, 3, 4))
    case(op, "dim", lambda x, fn=fn: fn(x, dim=1), lambda x, ref=ref: ref(x, axis=1), F(2, 3, 4))
    case(op, "negative_dim", lambda x, fn=fn: fn(x, dim=-1), lambda x, ref=ref: ref(x, axis=-1), F(2, 3, 4))
    case(op, "dims", lambda x, fn=fn: fn(x, dim=(0, 2)), lambda x, ref=ref: ref(x, axis=(0, 2)), F(2, 3, 4))
    case(op, "dims_negative_keepdim", lambda x, fn=fn: fn(x, dim=(-1, 0), keepdim=True),
         lambda x, ref=ref: ref(x, axis=(-1, 0), keepdims=True), F(2, 3, 4))
    case(op, "keepdim", lambda x, fn=fn: fn(x, dim=1, keepdim=True),
         lambda x, ref=ref: ref(x, axis=1, keepdims=True), F(2, 3, 4))
    case(op, "zero_dim", lambda x, fn=fn: fn(x), lambda x, ref=ref: ref(x), F())
case("sum", "int", lambda x: x.sum(0), lambda x: x.sum(0), I(3, 4), grad=False, dtype="int64")
# dim=() reduces every dim in PyTorch's sum/mean/amax/amin/var/norm (numpy's would reduce none); any/all keep all
case("sum", "empty_dim_list", lambda x: x.sum(dim=()), lambda x: x.sum(), F(3, 4))
case("mean", "empty_dim_list", lambda x: x.mean(dim=[]), lambda x: x.mean(), F(3, 4))
case("amax", "empty_dim_list", lambda x: x.amax(dim=()), lambda x: x.max(), DISTINCT(3, 4))
case("var", "empty_dim_list", lambda x: x.var(dim=()), lambda x: x.var(ddof=1), F(3, 4))
case("any", "empty_dim_list", lambda x: x.any(dim=()), lambda x: x.astype(bool), F(3, 4), grad=False)
case("sum", "int32_to_int64", lambda x: x.sum(), lambda x: x.sum(dtype=np.int64), I(3, 4, dtype="int32"), grad=False)
case("sum", "bool", lambda x: x.sum(-1), lambda x: x.sum(-1), B(3, 4), grad=False, dtype="int64")
case("sum", "dtype", lambda x: x.sum(dtype=webgrad.float64), lambda x: x.sum(dtype=np.float64), F(3, 4))
case("sum", "function", lambda x: webgrad.sum(x, 1), lambda x: x.sum(1), F(3, 4))
case("mean", "function", lambda x: webgrad.mean(x, (0, 1)), lambda x: x.mean((0, 1)), F(3, 4))

for op, np_fn in [("max", np.max), ("min", np.min)]:
    method = (lambda x, *a, op=op, **k: getattr(x, op)(*a, **k))
    arg_np = np.argmax if op == "max" else np.argmin
    case(op, "all", lambda x, m=method: m(x), lambda x, f=np_fn: f(x), DISTINCT(3, 4))
    case(op, "dim", lambda x, m=method: tuple(m(x, 1)),
         lambda x, f=np_fn, a=arg_np: (f(x, 1), a(x, 1)), DISTINCT(3, 4), dtype=("float32", "int64"))
    case(op, "dim_named", lambda x, m=method: (m(x, dim=0).values, m(x, dim=0).indices),
         lambda x, f=np_fn, a=arg_np: (f(x, 0), a(x, 0)), DISTINCT(3, 4), dtype=("float32", "int64"))
    case(op, "negative_dim_keepdim", lambda x, m=method: tuple(m(x, -1, keepdim=True)),
         lambda x, f=np_fn, a=arg_np: (f(x, -1, keepdims=True), np.expand_dims(a(x, -1), -1)),
         DISTINCT(2, 3, 4), dtype=("float32", "int64"))
    case(op, "function", lambda x, op=op: getattr(webgrad, op)(x, 2).values, lambda x, f=np_fn: f(x, 2),
         DISTINCT(2, 3, 4))
    case(op, "int", lambda x, m=method: m(x), lambda x, f=np_fn: f(x), I(3, 4), grad=False)
for op, np_fn in [("amax", np.amax), ("amin", np.amin)]:
    case(op, "all", lambda x, op=op: getattr(x, op)(), lambda x, f=np_fn: f(x), DISTINCT(3, 4))
    case(op, "dim", lambda x, op=op: getattr(x, op)(1), lambda x, f=np_fn: f(x, 1), DISTINCT(3, 4))
    case(op, "dims", lambda x, op=op: getattr(webgrad, op)(x, (0, 2)), lambda x, f=np_fn: f(x, (0, 2)),
         DISTINCT(2, 3, 4))
    case(op, "dims_keepdim", lambda x, op=op: getattr(x, op)((-1, 1), keepdim=True),
         lambda x, f=np_fn: f(x, (-1, 1), keepdims=True), DISTINCT(2, 3, 4))
    case(op, "int", lambda x, op=op: getattr(x, op)(0), lambda x, f=np_fn: f(x, 0), I(3, 4), grad=False)
for op, np_fn in [("argmax", np.argmax), ("argmin", np.argmin)]:
    case(op, "all", lambda x, op=op: getattr(x, op)(), lambda x, f=np_fn: f(x), DISTINCT(3, 4), grad=False)
    case(op, "dim", lambda x, op=op: getattr(x, op)(1), lambda x, f=np_fn: f(x, 1), DISTINCT(3, 4), grad=False)
    case(op, "negative_dim_keepdim", lambda x, op=op: getattr(webgrad, op)(x, -1, keepdim=True),
         lambda x, f=np_fn: f(x, -1, keepdims=True), DISTINCT(2, 3, 4), grad=False)
    case(op, "keepdim_all", lambda x, op=op: getattr(x, op)(keepdim=True),
         lambda x, f=np_fn: np.reshape(f(x), (1, 1)), DISTINCT(3, 4), grad=False)
    # Small ints have ties: the first index wins, as in PyTorch and numpy.
    case(op, "int_ties_first", lambda x, op=op: getattr(x, op)(0), lambda x, f=np_fn: f(x, 0),
         I(5, 4, low=0, high=1), grad=False)
    case(op, "float_ties_first", lambda x, op=op: getattr(x, op)(-1), lambda x, f=np_fn: f(x, -1),
         HALVES(3, 8), grad=False)

for op, np_fn in [("var", np.var), ("std", np.std)]:
    m = (lambda x, *a, op=op, **k: getattr(x, op)(*a, **k))
    case(op, "all", lambda x, m=m: m(x), lambda x, f=np_fn: f(x, ddof=1), F(3, 4))
    case(op, "dim", lambda x, m=m: m(x, 1), lambda x, f=np_fn: f(x, 1, ddof=1), F(3, 4))
    case(op, "unbiased_false", lambda x, m=m: m(x, 0, unbiased=False), lambda x, f=np_fn: f(x, 0), F(3, 4))
    case(op, "unbiased_true_keepdim", lambda x, m=m: m(x, -1, True, True),
         lambda x, f=np_fn: f(x, -1, ddof=1, keepdims=True), F(3, 4))
    case(op, "correction_0", lambda x, m=m: m(x, correction=0), lambda x, f=np_fn: f(x), F(3, 4))
    case(op, "correction_2", lambda x, m=m: m(x, (0, 2), correction=2),
         lambda x, f=np_fn: f(x, (0, 2), ddof=2), F(2, 3, 4))
    case(op, "function", lambda x, op=op: getattr(webgrad, op)(x, dim=(0, 1), keepdim=True),
         lambda x, f=np_fn: f(x, (0, 1), ddof=1, keepdims=True), F(2, 3, 4))

case("prod", "all", lambda x: x.prod(), np.prod, F(2, 3, low=0.5, high=1.5))
case("prod", "dim", lambda x: x.prod(1), lambda x: np.prod(x, 1), F(3, 4))
case("prod", "keepdim", lambda x: x.prod(-1, keepdim=True), lambda x: np.prod(x, -1, keepdims=True), F(3, 4))
case("prod", "dims", lambda x: webgrad.prod(x, (0, 2)), lambda x: np.prod(x, (0, 2)), F(2, 2, 3))


def _with_zeros(rng):
    """Rows with no zero, one zero and two zeros: every branch of prod's gradient."""
    x = rng.uniform(-2, 2, (3, 4)).astype(np.float32)
    x[1, 2] = 0.0
    x[2, 0] = x[2, 3] = 0.0
    return [x]


case("prod", "one_and_two_zeros", lambda x: x.prod(1), lambda x: np.prod(x, 1), F(3, 4), gen=_with_zeros)
case("prod", "one_zero_all", lambda x: x.prod(), np.prod, F(2, 3), gen=lambda rng: [_with_zeros(rng)[0][:2, 1:]])
case("prod", "two_zeros_all", lambda x: x.prod(), np.prod, F(2, 3), gen=lambda rng: [_with_zeros(rng)[0][1:, :3]])
case("prod", "int", lambda x: x.prod(0), lambda x: np.prod(x, 0), I(3, 4, low=-3, high=3), grad=False)


def _logsumexp(x, axis, keepdims=False):
    peak = np.max(x, axis=axis, keepdims=True)
    out = np.log(np.sum(np.exp(x - peak), axis=axis, keepdims=True)) + peak
    return out if keepdims else np.squeeze(out, axis=axis)


def _softmax(x, axis):
    e = np.exp(x - x.max(axis=axis, keepdims=True))
    return e / e.sum(axis=axis, keepdims=True)


case("logsumexp", "dim", lambda x: x.logsumexp(1), lambda x: _logsumexp(x, 1), F(3, 4))
case("logsumexp", "dims", lambda x: webgrad.logsumexp(x, (0, 2)), lambda x: _logsumexp(x, (0, 2)), F(2, 3, 4))
case("logsumexp", "keepdim", lambda x: x.logsumexp(-1, keepdim=True), lambda x: _logsumexp(x, -1, True), F(3, 4))
case("logsumexp", "large", lambda x: x.logsumexp(0), lambda x: _logsumexp(x, 0), F(5, low=500, high=600))
case("softmax", "last", lambda x: x.softmax(-1), lambda x: _softmax(x, -1), F(3, 4))
case("softmax", "first", lambda x: webgrad.softmax(x, 0), lambda x: _softmax(x, 0), F(3, 4))
case("softmax", "middle_3d", lambda x: x.softmax(1), lambda x: _softmax(x, 1), F(2, 3, 4))
case("softmax", "large", lambda x: x.softmax(-1), lambda x: _softmax(x, -1), F(2, 5, low=-300, high=300))
case("log_softmax", "last", lambda x: x.log_softmax(-1), lambda x: np.log(_softmax(x, -1)), F(3, 4))
case("log_softmax", "first", lambda x: webgrad.log_softmax(x, 0), lambda x: np.log(_softmax(x, 0)), F(3, 4))
case("log_softmax", "middle_3d", lambda x: x.log_softmax(1), lambda x: np.log(_softmax(x, 1)), F(2, 3, 4))
case("log_softmax", "large", lambda x: x.log_softmax(-1), lambda x: x - _logsumexp(x, -1, True),
     F(2, 5, low=-300, high=300))


def _layer_norm(x, ndims, eps=1e-5):
    axes = tuple(range(x.ndim - ndims, x.ndim))
    centered = x - x.mean(axes, keepdims=True)
    return centered / np.sqrt((centered * centered).mean(axes, keepdims=True) + eps)


case("layer_norm_core", "last", lambda x: webgrad.ops.layer_norm_core(x, ndims=1), lambda x: _layer_norm(x, 1),
     F(3, 6))
case("layer_norm_core", "two_dims", lambda x: webgrad.ops.layer_norm_core(x, ndims=2, eps=1e-3),
     lambda x: _layer_norm(x, 2, 1e-3), F(2, 3, 4))
case("layer_norm_core", "one_d", lambda x: webgrad.ops.layer_norm_core(x, ndims=1), lambda x: _layer_norm(x, 1),
     F(5))
case("layer_norm_core", "offset_mean", lambda x: webgrad.ops.layer_norm_core(x, ndims=1),
     lambda x: _layer_norm(x, 1), F(4, 7, low=50, high=54))
case("layer_norm", "last", lambda x, w, b: webgrad.ops.layer_norm(x, w, b, ndims=1),
     lambda x, w, b: _layer_norm(x, 1) * w + b, F(3, 6), F(6), F(6))
case("layer_norm", "two_dims", lambda x, w, b: webgrad.ops.layer_norm(x, w, b, ndims=2, eps=1e-3),
     lambda x, w, b: _layer_norm(x, 2, 1e-3) * w + b, F(2, 3, 4), F(3, 4), F(3, 4))
case("layer_norm", "transposed", lambda x, w, b: webgrad.ops.layer_norm(x.transpose(0, 1), w, b, ndims=1),
     lambda x, w, b: _layer_norm(x.transpose(1, 0, 2), 1) * w + b, F(4, 2, 5), F(5), F(5))
case("layer_norm", "strided_weight", lambda x, w, b: webgrad.ops.layer_norm(x, w[::2], b[1:], ndims=1),
     lambda x, w, b: _layer_norm(x, 1) * w[::2] + b[1:], F(3, 4), F(8), F(5))
def _batch_stats(x):
    axes = (0,) + tuple(range(2, x.ndim))
    mean = x.mean(axes)
    centered = x - mean.reshape((1, -1) + (1,) * (x.ndim - 2))
    return np.stack([mean, (centered * centered).mean(axes)]).astype(np.result_type(x, np.float32))


def _batch_norm(x, w, b, eps=1e-5):
    mean, var = _batch_stats(x)
    shape = (1, -1) + (1,) * (x.ndim - 2)
    return (x - mean.reshape(shape)) / np.sqrt(var.reshape(shape) + eps) * w.reshape(shape) + b.reshape(shape)


def _by_own_stats(x, w, b, eps=1e-5):
    return webgrad.ops.batch_norm(x, webgrad.ops.batch_norm_stats(x.detach()), w, b, eps=eps)


case("batch_norm_stats", "images", lambda x: webgrad.ops.batch_norm_stats(x), _batch_stats, F(3, 4, 5, 2),
     grad=False)
case("batch_norm_stats", "rows", lambda x: webgrad.ops.batch_norm_stats(x), _batch_stats, F(7, 3), grad=False)
case("batch_norm_stats", "offset_mean", lambda x: webgrad.ops.batch_norm_stats(x), _batch_stats,
     F(6, 2, 5, low=50, high=54), grad=False)
case("batch_norm", "images", _by_own_stats, _batch_norm, F(3, 4, 5, 2), F(4), F(4))
case("batch_norm", "rows", lambda x, w, b: _by_own_stats(x, w, b, eps=1e-3), lambda x, w, b: _batch_norm(x, w, b, 1e-3),
     F(7, 3), F(3), F(3))
case("batch_norm", "sequence", _by_own_stats, _batch_norm, F(2, 3, 6), F(3), F(3))
case("batch_norm", "offset_mean", _by_own_stats, _batch_norm, F(6, 2, 5, low=50, high=54), F(2), F(2))
case("batch_norm", "transposed", lambda x, w, b: _by_own_stats(x.transpose(0, 1), w, b),
     lambda x, w, b: _batch_norm(x.transpose(1, 0, 2, 3), w, b), F(3, 4, 2, 3), F(3), F(3))


case("norm", "all", lambda x: x.norm(), lambda x: np.sqrt(np.sum(x * x)), F(3, 4))
case("norm", "dim", lambda x: x.norm(dim=1), lambda x: np.sqrt(np.sum(x * x, 1)), F(3, 4))
case("norm", "dims_keepdim", lambda x: webgrad.norm(x, dim=(0, -1), keepdim=True),
     lambda x: np.sqrt(np.sum(x * x, (0, -1), keepdims=True)), F(2, 3, 4))
case("norm", "p1", lambda x: x.norm(p=1, dim=0), lambda x: np.sum(np.abs(x), 0), AWAY(3, 4))
case("norm", "p3", lambda x: x.norm(p=3), lambda x: np.sum(np.abs(x) ** 3) ** (1 / 3), AWAY(3, 4))
case("norm", "inf", lambda x: x.norm(p=float("inf"), dim=1), lambda x: np.max(np.abs(x), 1), F(3, 4),
     gen=lambda rng: [np.abs(DISTINCT(3, 4).make(rng)) * rng.choice([-1, 1], (3, 4)).astype(np.float32) + 0.05])
for op, np_fn in [("all", np.all), ("any", np.any)]:
    case(op, "bool", lambda x, op=op: getattr(x, op)(), lambda x, f=np_fn: f(x), B(3, 4), grad=False)
    case(op, "dim", lambda x, op=op: getattr(x, op)(1), lambda x, f=np_fn: f(x, 1), B(3, 4), grad=False)
    case(op, "dims_keepdim", lambda x, op=op: getattr(webgrad, op)(x, (0, 2), keepdim=True),
         lambda x, f=np_fn: f(x, (0, 2), keepdims=True), B(2, 3, 2), grad=False)
    case(op, "int", lambda x, op=op: getattr(x, op)(-1), lambda x, f=np_fn: f(x, -1), I(3, 3, low=0, high=2),
         grad=False)
    case(op, "float", lambda x, op=op: getattr(x, op)(0), lambda x, f=np_fn: f(x, 0), HALVES(4, 3), grad=False)
    case(op, "empty_dim", lambda x, op=op: getattr(x, op)(1), lambda x, f=np_fn: f(x, 1), B(3, 0), grad=False)

# 0-d tensors accept dim 0 and -1, as in PyTorch: reducing over them changes nothing.
case("sum", "zero_dim_with_dim", lambda x: x.sum(0, keepdim=True), lambda x: x, F())
case("mean", "zero_dim_with_dim", lambda x: x.mean(-1), lambda x: x, F())
case("softmax", "zero_dim", lambda x: x.softmax(0), lambda x: np.ones_like(x), F())
case("log_softmax", "zero_dim", lambda x: x.log_softmax(-1), lambda x: np.zeros_like(x), F())
case("logsumexp", "zero_dim", lambda x: x.logsumexp(0), lambda x: x, F())
case("max", "zero_dim_with_dim", lambda x: tuple(x.max(0)), lambda x: (x, np.array(0)), F(), dtype=("float32", "int64"))
case("argmax", "zero_dim_with_dim", lambda x: x.argmax(-1), lambda x: np.array(0), F(), grad=False)
case("amin", "zero_dim_with_dim", lambda x: x.amin(0), lambda x: x, F())
case("squeeze", "zero_dim_with_dim", lambda x: x.squeeze(0), lambda x: x, F())
case("flip", "zero_dim", lambda x: x.flip(0), lambda x: x, F())

# ---- matmul ---------------------------------------------------------------------
for variant, a, b in [("1d_1d", (3,), (3,)), ("1d_2d", (3,), (3, 2)), ("2d_1d", (2, 3), (3,)),
                      ("2d_2d", (2, 3), (3, 4)), ("batched", (4, 2, 3), (4, 3, 5)),
                      ("broadcast_batch", (2, 1, 3, 4), (5, 4, 2)), ("3d_1d", (4, 2, 3), (3,)),
                      ("1d_3d", (3,), (4, 3, 2)), ("2d_3d", (2, 3), (4, 3, 5))]:
    case("matmul", variant, lambda x, y: x @ y, np.matmul, F(*a), F(*b))
case("matmul", "function", webgrad.matmul, np.matmul, F(2, 3), F(3, 2))
case("matmul", "mm", lambda x, y: x.mm(y), np.matmul, F(2, 3), F(3, 2))
case("matmul", "bmm", webgrad.bmm, np.matmul, F(2, 2, 3), F(2, 3, 2))
case("matmul", "int", lambda x, y: x @ y, np.matmul, I(2, 3), I(3, 2), grad=False)
# F.linear's one-op form (ops.linalg.linear): weight (out, in), bias (out,) or none, any batch dims
for variant, x_shape, bias in [("2d", (4, 5), True), ("batched", (2, 4, 5), True), ("no_bias", (4, 5), False),
                               ("batched_no_bias", (3, 1, 5), False)]:
    case("linear", variant, (lambda x, w, b: webgrad.nn.functional.linear(x, w, b)) if bias else
         (lambda x, w: webgrad.nn.functional.linear(x, w)),
         (lambda x, w, b: x @ w.T + b) if bias else (lambda x, w: x @ w.T), F(*x_shape), F(3, 5), *[F(3)][:bias])

# ---- shape and movement ---------------------------------------------------------
X = F(2, 3, 4)
case("reshape", "minus_one", lambda x: x.reshape(-1, 4), lambda x: x.reshape(-1, 4), X)
case("reshape", "tuple", lambda x: x.reshape((4, 6)), lambda x: x.reshape(4, 6), X)
case("reshape", "to_scalar", lambda x: x.reshape(()), lambda x: x.reshape(()), F(1))
case("reshape", "function", lambda x: webgrad.reshape(x, (3, -1)), lambda x: x.reshape(3, -1), X)
case("reshape", "view", lambda x: x.view(6, -1), lambda x: x.reshape(6, -1), X)
case("reshape", "view_as", lambda x, y: x.view_as(y), lambda x, y: x.reshape(y.shape), F(2, 6), F(3, 4))
case("reshape", "of_transposed", lambda x: x.T.reshape(-1), lambda x: x.T.reshape(-1), F(3, 4))
case("permute", "method", lambda x: x.permute(2, 0, 1), lambda x: x.transpose(2, 0, 1), X)
case("permute", "tuple_negative", lambda x: x.permute((-1, 1, 0)), lambda x: x.transpose(2, 1, 0), X)
case("permute", "function", lambda x: webgrad.permute(x, (1, 2, 0)), lambda x: x.transpose(1, 2, 0), X)
case("transpose", "method", lambda x: x.transpose(0, 2), lambda x: np.swapaxes(x, 0, 2), X)
case("transpose", "negative", lambda x: webgrad.transpose(x, -1, -2), lambda x: np.swapaxes(x, -1, -2), X)
case("transpose", "T", lambda x: x.T, lambda x: x.T, X)
case("transpose", "mT", lambda x: x.mT, lambda x: np.swapaxes(x, -1, -2), X)
case("squeeze", "all", lambda x: x.squeeze(), np.squeeze, F(1, 3, 1, 2))
case("squeeze", "dim", lambda x: x.squeeze(2), lambda x: np.squeeze(x, 2), F(1, 3, 1, 2))
case("squeeze", "negative_dim_not_one", lambda x: x.squeeze(-1), lambda x: x, F(1, 3, 1, 2))
case("squeeze", "dims", lambda x: webgrad.squeeze(x, (0, 2)), lambda x: np.squeeze(x, (0, 2)), F(1, 3, 1, 2))
case("unsqueeze", "first", lambda x: x.unsqueeze(0), lambda x: x[None], F(3, 4))
case("unsqueeze", "negative", lambda x: x.unsqueeze(-1), lambda x: x[..., None], F(3, 4))
case("unsqueeze", "middle", lambda x: webgrad.unsqueeze(x, 1), lambda x: x[:, None], F(3, 4))
case("expand", "method", lambda x: x.expand(2, 3, 4), lambda x: np.broadcast_to(x, (2, 3, 4)), F(3, 1))
case("expand", "minus_one", lambda x: x.expand(-1, 5), lambda x: np.broadcast_to(x, (3, 5)), F(3, 1))
case("expand", "expand_as", lambda x, y: x.expand_as(y), lambda x, y: np.broadcast_to(x, y.shape), F(4), F(3, 4))
case("expand", "broadcast_to", lambda x: x.broadcast_to((2, 4)), lambda x: np.broadcast_to(x, (2, 4)), F(1, 4))
case("flatten", "all", lambda x: x.flatten(), lambda x: x.reshape(-1), X)
case("flatten", "start", lambda x: x.flatten(1), lambda x: x.reshape(2, -1), X)
case("flatten", "range", lambda x: webgrad.flatten(x, 0, 1), lambda x: x.reshape(6, 4), X)
case("flatten", "zero_dim", lambda x: x.flatten(), lambda x: x.reshape(1), F())
case("unflatten", "sizes", lambda x: x.unflatten(2, (2, 2)), lambda x: x.reshape(2, 3, 2, 2), X)
case("unflatten", "minus_one", lambda x: webgrad.unflatten(x, -1, (-1, 2)), lambda x: x.reshape(2, 3, 2, 2), X)
case("cat", "dim0", lambda x, y: webgrad.cat([x, y]), lambda x, y: np.concatenate([x, y]), F(2, 3), F(4, 3))
case("cat", "negative_dim_three", lambda x, y, z: webgrad.cat((x, y, z), dim=-1),
     lambda x, y, z: np.concatenate([x, y, z], -1), F(2, 1), F(2, 3), F(2, 2))
case("cat", "promotes", lambda x, y: webgrad.cat([x, y], 1), lambda x, y: np.concatenate([x, y], 1).astype(np.float32),
     F(2, 2), I(2, 3), grad=False)
case("cat", "skips_empty_1d", lambda x, y: webgrad.cat([x, y]), lambda x, y: y, F(0), F(2, 3), grad=False)
case("cat", "concatenate_alias", lambda x, y: webgrad.concatenate([x, y], 1), lambda x, y: np.concatenate([x, y], 1),
     F(2, 2), F(2, 1))
case("stack", "dim0", lambda x, y: webgrad.stack([x, y]), lambda x, y: np.stack([x, y]), F(2, 3), F(2, 3))
case("stack", "last", lambda x, y, z: webgrad.stack([x, y, z], -1), lambda x, y, z: np.stack([x, y, z], -1),
     F(2, 3), F(2, 3), F(2, 3))
case("stack", "zero_dim", lambda x, y: webgrad.stack([x, y]), lambda x, y: np.stack([x, y]), F(), F())
case("split", "size", lambda x: x.split(2, dim=2), lambda x: np.split(x, 2, axis=2), X)
case("split", "uneven", lambda x: webgrad.split(x, 2, 1), lambda x: np.split(x, [2], axis=1), X)
case("split", "sections", lambda x: x.split([1, 3], dim=-1), lambda x: np.split(x, [1], axis=-1), X)
case("chunk", "even", lambda x: x.chunk(2, -1), lambda x: np.split(x, 2, -1), X)
case("chunk", "uneven", lambda x: webgrad.chunk(x, 2, 1), lambda x: np.split(x, [2], 1), X)
case("chunk", "more_than_size", lambda x: x.chunk(5, 0), lambda x: np.split(x, 2, 0), X)
case("unbind", "dim1", lambda x: webgrad.unbind(x, 1), lambda x: tuple(x[:, i] for i in range(3)), X)
case("narrow", "dim", lambda x: webgrad.narrow(x, 2, 1, 2), lambda x: x[:, :, 1:3], X)
case("flip", "one", lambda x: x.flip(0), lambda x: np.flip(x, 0), X)
case("flip", "several", lambda x: webgrad.flip(x, (0, -1)), lambda x: np.flip(x, (0, 2)), X)
case("repeat", "same_rank", lambda x: x.repeat(2, 3), lambda x: np.tile(x, (2, 3)), F(2, 3))
case("repeat", "more_dims", lambda x: x.repeat(2, 1, 2), lambda x: np.tile(x, (2, 1, 2)), F(2, 3))
case("movedim", "single", lambda x: x.movedim(0, -1), lambda x: np.moveaxis(x, 0, -1), X)
case("movedim", "several", lambda x: webgrad.movedim(x, (0, 1), (2, 0)), lambda x: np.moveaxis(x, (0, 1), (2, 0)), X)
case("clone", "method", lambda x: x.clone(), np.copy, X)
case("clone", "function", webgrad.clone, np.copy, I(3), grad=False)
case("contiguous", "of_transposed", lambda x: x.T.contiguous(), lambda x: np.ascontiguousarray(x.T), X)


def _pad_ref(x, pad, value=0.0):
    widths = [(0, 0)] * x.ndim
    for i in range(len(pad) // 2):
        widths[x.ndim - 1 - i] = (pad[2 * i], pad[2 * i + 1])
    crop = tuple(slice(max(-lo, 0), n - max(-hi, 0)) for (lo, hi), n in zip(widths, x.shape))
    return np.pad(x[crop], [(max(lo, 0), max(hi, 0)) for lo, hi in widths], constant_values=value)


case("pad", "last_dim", lambda x: webgrad.ops.pad(x, (1, 2)), lambda x: _pad_ref(x, (1, 2)), F(2, 3))
case("pad", "two_dims", lambda x: webgrad.ops.pad(x, (1, 0, 2, 1)), lambda x: _pad_ref(x, (1, 0, 2, 1)), F(2, 3, 2))
case("pad", "negative", lambda x: webgrad.ops.pad(x, (-1, 1, 0, -1)), lambda x: _pad_ref(x, (-1, 1, 0, -1)), F(3, 4))
case("pad", "value", lambda x: webgrad.ops.pad(x, (2, 1), value=-1.5), lambda x: _pad_ref(x, (2, 1), -1.5), F(2, 3))
case("pad", "int", lambda x: webgrad.ops.pad(x, (1, 1), value=7), lambda x: _pad_ref(x, (1, 1), 7), I(2, 2), grad=False)

# ---- indexing: x[key] -------------------------------------------------------------
def _split_ints(ndim, key):
    """PyTorch's rule for ints (and 0-d int arrays) in a key: they select and drop
    their dim before any advanced indexing, so, unlike in numpy, they never move
    where the advanced-index dims land (x[1, :, idx] is (5, 2) for x (4, 5, 6)).
    Returns the ints as a basic key and the rest of the key."""
    items = key if isinstance(key, tuple) else (key,)

    def consumed(i):
        if i is None or i is Ellipsis:
            return 0
        return i.ndim if isinstance(i, np.ndarray) and i.dtype == np.bool_ else 1

    def is_int(i):
        if isinstance(i, np.ndarray):
            return i.ndim == 0 and i.dtype.kind in "iu"
        return isinstance(i, (int, np.integer)) and not isinstance(i, bool)

    total = sum(consumed(i) for i in items)
    basic, rest, dim = [slice(None)] * ndim, [], 0
    for i in items:
        if is_int(i):
            basic[dim] = int(i)
        else:
            rest.append(i)
        dim += ndim - total if i is Ellipsis else consumed(i)
    return tuple(basic) + (Ellipsis,), tuple(rest)  # the ... keeps a 0-d selection a view


def torch_getitem(x, key):
    """``x[key]`` on a numpy array, with PyTorch's indexing rules."""
    basic, rest = _split_ints(x.ndim, key)
    return x[basic][rest]


def torch_setitem(x, key, value):
    """``x[key] = value`` on a numpy array, with PyTorch's indexing rules."""
    basic, rest = _split_ints(x.ndim, key)
    x[basic][rest] = value


Y = F(4, 5, 6)
GETITEM_KEYS = [
    ("int", 1), ("negative_int", -1), ("ints", (0, -2)), ("slice", slice(1, 3)),
    ("slice_step", slice(None, None, 2)), ("slices_steps", (slice(1, None, 2), slice(None, 4, 3))),
    ("none", (None, 1)), ("ellipsis", (Ellipsis, 2)), ("ellipsis_middle", (1, Ellipsis, slice(0, 3))),
    ("none_ellipsis_none", (None, Ellipsis, None)), ("all_kinds", (slice(None), None, -1, slice(None, None, 4))),
    ("empty_slice", slice(2, 2)), ("slice_past_end", slice(2, 100)),
    ("index_tensor", np.array([2, 0, 2])), ("index_tensor_negative", np.array([-1, 0, -4])),
    ("index_tensor_2d", np.array([[0, 1], [3, 3]])), ("index_0d_tensor", np.array(2)),
    ("two_indices_broadcast", (np.array([[0], [3]]), np.array([1, 4, 4]))),
    ("index_after_slice", (slice(None), np.array([4, 0]))),
    ("separated_indices", (np.array([0, 3]), slice(None), np.array([5, -1]))),
    ("int_and_index", (np.array([1, 2]), 0, np.array([3, 3]))),
    ("adjacent_after_slice", (slice(1, 3), np.array([0, 1]), np.array([[2], [4]]))),
    ("index_with_none", (None, np.array([0, 1]), 2)),
    ("ellipsis_index", (Ellipsis, np.array([0, -1]))),
    ("int32_index", np.array([1, 3], dtype=np.int32)),
    # Where PyTorch and numpy differ: ints are not advanced indices.
    ("int_slice_index", (1, slice(None), np.array([1, 2]))),
    ("int_between_indices", (np.array([0, 3]), 2, np.array([1, 5]))),
    ("0d_tensor_slice_index", (np.array(1), slice(None), np.array([1, 2]))),
    ("none_int_none_index", (None, 1, None, np.array([0, 4]))),
    ("0d_mask_true", np.array(True)), ("0d_mask_false", (np.array(False),)), ("int_0d_mask", (0, np.array(True))),
]
for variant, key in GETITEM_KEYS:
    case("getitem", variant, lambda x, key=key: x[_on(x.device, key)], lambda x, key=key: torch_getitem(x, key), Y)
case("getitem", "mask_full", lambda x: x[x > 0], lambda x: x[x > 0], Y)
case("getitem", "mask_first_dim", lambda x, m: x[m], lambda x, m: x[m], Y, B(4))
case("getitem", "mask_after_slice", lambda x, m: x[:, m], lambda x, m: x[:, m], Y, B(5, 6))
case("getitem", "mask_and_int", lambda x, m: x[m, :, 1], lambda x, m: torch_getitem(x, (m, slice(None), 1)), Y, B(4))
case("getitem", "list_index", lambda x: x[[0, 2]], lambda x: x[[0, 2]], Y)
case("getitem", "int_tensor_values", lambda x: x[1:3, ::2], lambda x: x[1:3, ::2], I(4, 5), grad=False)
case("getitem", "index_from_int_tensor", lambda x, i: x[i], lambda x, i: x[i], Y, IDX(2, 3, high=4, negative=True))
case("take", "rows", lambda x, i: webgrad.ops.take(x, i), lambda x, i: x[i], F(5, 2), IDX(2, 3, high=5))
case("index_select", "dim0", lambda x, i: x.index_select(0, i), lambda x, i: x[i], F(4, 3), IDX(5, high=4))
case("index_select", "dim1", lambda x, i: webgrad.index_select(x, 1, i), lambda x, i: x[:, i], F(4, 3), IDX(4, high=3))
case("index_select", "negative_dim", lambda x, i: x.index_select(-1, i), lambda x, i: x[..., i], Y, IDX(3, high=6))


def _gather_ref(x, dim, index):
    return np.take_along_axis(x, index, axis=dim)


def _scatter_add_ref(x, dim, index, src):
    out = x.copy()
    grids = list(np.indices(index.shape, sparse=True))
    grids[dim] = index
    np.add.at(out, tuple(grids), src[tuple(slice(0, n) for n in index.shape)])
    return out


case("gather", "dim1", lambda x, i: x.gather(1, i), lambda x, i: _gather_ref(x, 1, i), F(3, 4), IDX(3, 5, high=4))
case("gather", "dim0", lambda x, i: webgrad.gather(x, 0, i), lambda x, i: _gather_ref(x, 0, i),
     F(3, 4), IDX(2, 4, high=3))
case("gather", "negative_dim_3d", lambda x, i: x.gather(-1, i), lambda x, i: _gather_ref(x, -1, i),
     F(2, 3, 4), IDX(2, 3, 2, high=4))
case("scatter_add", "dim0", lambda x, i, s: x.scatter_add(0, i, s), lambda x, i, s: _scatter_add_ref(x, 0, i, s),
     F(3, 4), IDX(5, 4, high=3), F(5, 4))
case("scatter_add", "dim1_smaller_index", lambda x, i, s: webgrad.scatter_add(x, 1, i, s),
     lambda x, i, s: _scatter_add_ref(x, 1, i, s), F(3, 4), IDX(2, 3, high=4), F(3, 5))


# ---- x[key] = value and in-place ops, on copies (differentiable, as in PyTorch) ------
def _set(key):
    def fn(x, v):
        y = x.clone()
        y[_on(x.device, key)] = v
        return y

    def ref(x, v):
        y = x.copy()
        torch_setitem(y, key, v)
        return y
    return fn, ref


for variant, key, value in [
    ("int", 1, F(5, 6)), ("broadcast_value", (slice(None), 2), F(6)), ("slice_step", (slice(None, None, 2),), F(1)),
    ("ellipsis", (Ellipsis, 0), F(4, 5)), ("index_tensor", np.array([3, 0]), F(2, 5, 6)),
    ("two_index_tensors", (np.array([0, 1, 3]), slice(None), np.array([5, -6, 0])), F(3, 5)),
    ("negative_int_none", (-1, None), F(5, 6)),
    ("int_slice_index", (1, slice(None), np.array([1, 2])), F(5, 2)),
    ("0d_mask", (0, np.array(True)), F(1, 5, 6)), ("all_ints", (1, 2, 3), F()),
]:
    fn, ref = _set(key)
    case("setitem", variant, fn, ref, Y, value)
case("setitem", "python_scalar", lambda x: _set(1)[0](x, 2.5), lambda x: _set(1)[1](x, 2.5), Y)
case("setitem", "mask", lambda x: _set_mask(x), lambda x: np.where(x > 0, 0.0, x).astype(x.dtype), Y)
case("setitem", "value_is_a_view_of_the_target", lambda x: _set_shifted(x), lambda x: _set_shifted_ref(x), F(5, 3))
case("setitem", "rows_from_the_previous_row", lambda x, w: _recurrence(x, w), lambda x, w: _recurrence_ref(x, w),
     F(4, 3, low=-1, high=1), F(3, 3, low=-1, high=1))
case("setitem", "int_tensor_float_value", lambda x: _set(0)[0](x, 1.7), lambda x: _set(0)[1](x, 1), I(3, 2),
     grad=False)


def _set_mask(x):
    y = x.clone()
    y[y > 0] = 0.0
    return y


def _inplace(method, *args):
    def fn(x, *rest):
        y = x.clone()
        getattr(y, method)(*rest, *args)
        return y
    return fn


case("inplace", "add_", _inplace("add_"), np.add, F(3, 4), F(4))
case("inplace", "add_alpha", _inplace("add_", 3), lambda x, y: x + 3 * y, F(3, 4), F(3, 4))
case("inplace", "sub_", _inplace("sub_"), np.subtract, F(3, 4), F(3, 4))
case("inplace", "mul_", _inplace("mul_"), np.multiply, F(3, 4), F(3, 1))
case("inplace", "div_", _inplace("div_"), np.divide, F(3, 4), NZ(3, 4))
case("inplace", "iadd_scalar", lambda x: _iop(x, "__iadd__", 2.0), lambda x: x + 2.0, F(5))
case("inplace", "imul_tensor", lambda x, y: _iop(x, "__imul__", y), np.multiply, F(5), F(5))
case("inplace", "isub_int", lambda x: _iop(x, "__isub__", 2), lambda x: x - 2, I(5), grad=False)
case("inplace", "itruediv", lambda x: _iop(x, "__itruediv__", 4.0), lambda x: x / 4.0, F(5))
case("inplace", "int_mul_bool", lambda x, m: _iop(x, "mul_", m), np.multiply, I(5), B(5), grad=False)
case("inplace", "float32_add_float64", lambda x, y: _iop(x, "add_", y), lambda x, y: x + y, F(5), F(5, dtype="float64"),
     grad=False, dtype="float32")
case("inplace", "clamp_", _inplace("clamp_", -0.5, 0.5), lambda x: np.clip(x, -0.5, 0.5), F(6))
case("inplace", "fill_", _inplace("fill_", 3.0), lambda x: np.full_like(x, 3.0), F(2, 3))
case("inplace", "zero_", _inplace("zero_"), np.zeros_like, F(2, 3))
case("inplace", "copy_broadcast", _inplace("copy_"), lambda x, y: np.broadcast_to(y, x.shape).astype(x.dtype),
     F(2, 3), I(3))
case("inplace", "copy_from_float", _inplace("copy_"), lambda x, y: np.broadcast_to(y, x.shape).astype(x.dtype),
     F(2, 3), F(2, 1))
case("inplace", "mul_by_itself", lambda x: _iop(x, "mul_", None), lambda x: x * x, F(5))
case("inplace", "relu_", _inplace("relu_"), lambda x: np.maximum(x, 0), AWAY(3, 4))
# flip copies (as torch.flip): changing the result leaves the input alone (test_inputs_unchanged)
case("inplace", "add_to_a_flipped_copy", lambda x: x.flip(0).add_(1.0), lambda x: np.flip(x, 0) + 1, F(4, 3))
case("inplace", "sigmoid_then_exp_", lambda x: _inplace("sigmoid_")(x).exp_(), lambda x: np.exp(_sigmoid(x)), F(3, 4))
case("inplace", "pow_", _inplace("pow_", 3.0), lambda x: x ** 3.0, F(6))
case("inplace", "sqrt_of_a_row", lambda x: _sqrt_row(x), lambda x: np.vstack([x[:1], np.sqrt(x[1:2]), x[2:]]),
     POS(3, 4))
case("inplace", "scaled_column_through_view", lambda x: _scale_column(x), lambda x: _scale_column_ref(x), F(3, 4))
case("inplace", "through_transpose_and_flat_views", lambda x, w: _through_views(x, w),
     lambda x, w: _through_views_ref(x, w), F(3, 4), F(3))
case("inplace", "residual_iadd_after_relu", lambda x, y: _residual(x, y), lambda x, y: np.maximum(x * 2, 0) + y,
     AWAY(3, 4), F(3, 4))
case("inplace", "masked_fill_", lambda x, m: _inplace("masked_fill_", 0.0)(x, m),
     lambda x, m: np.where(m, 0, x).astype(x.dtype), F(2, 3), B(2, 3))
case("inplace", "through_view", lambda x: _through_view(x), lambda x: _through_view_ref(x), F(3, 4))


def _iop(x, method, other):
    y = x.clone()
    y = getattr(y, method)(y if other is None else other)
    return y


def _sqrt_row(x):
    y = x * 1
    y[1].sqrt_()
    return y


def _through_views(x, w):
    y = x * 1
    y.T.mul_(w)  # a permute view
    y.reshape(-1)[2:7].sub_(y.reshape(-1)[:5].clone())  # slices of a reshape view
    return y


def _through_views_ref(x, w):
    y = x * w[:, None]
    flat = y.reshape(-1)
    flat[2:7] -= flat[:5].copy()
    return y


def _scale_column(x):
    y = x * 1
    y[:, 1] *= 3.0  # mul_ through a view, then setitem of the view into its own base
    return y


def _scale_column_ref(x):
    y = x.copy()
    y[:, 1] *= 3.0
    return y


def _residual(x, y):
    out = (x * 2).relu()
    out += y  # ResNet's `out += identity`
    return out


def _set_shifted(x):
    y = x * 1
    y[1:] = y[:-1]  # the value is a view of the target
    return y


def _set_shifted_ref(x):
    y = x.copy()
    y[1:] = x[:-1]
    return y


def _recurrence(x, w):
    """An RNN-style loop: each row of a buffer is computed from the one before."""
    h = webgrad.zeros(x.shape, dtype=x.dtype, device=x.device)
    h[0] = x[0].tanh()
    for t in range(1, x.shape[0]):
        h[t] = (h[t - 1].clone() @ w + x[t]).tanh()  # clone: h[t - 1] changes when h does, as in PyTorch
    return h


def _recurrence_ref(x, w):
    h = np.zeros_like(x)
    h[0] = np.tanh(x[0])
    for t in range(1, x.shape[0]):
        h[t] = np.tanh(h[t - 1] @ w + x[t])
    return h


# webgrad.index_put: out-of-place x[indices] = values, as torch.index_put (distinct
# positions: with repeats, which write lands is unspecified, as in PyTorch)
case("index_put", "index_tensor", lambda x, i, v: webgrad.index_put(x, (i,), v),
     lambda x, i, v: _index_put_ref(x, (i,), v), F(5, 3), IDX(2, high=5), F(2, 3),
     gen=lambda rng: [F(5, 3).make(rng), np.array([3, 0]), F(2, 3).make(rng)])
case("index_put", "two_index_tensors_broadcast", lambda x, i, j, v: x.index_put((i, j), v),
     lambda x, i, j, v: _index_put_ref(x, (i, j), v), F(4, 5), IDX(3, high=4), IDX(3, high=5), F(1),
     gen=lambda rng: [F(4, 5).make(rng), np.array([0, 2, 3]), np.array([4, 1, 1]), F(1).make(rng)])


def _index_put_ref(x, indices, v):
    y = x.copy()
    y[indices] = v
    return y


def _through_view(x):
    """Writes through a view reach the base, as in PyTorch."""
    y = x.clone()
    row = y[1]
    row[::2] = 9.0
    y[:, 3].fill_(-1.0)
    return y


def _through_view_ref(x):
    y = x.copy()
    y[1, ::2] = 9.0
    y[:, 3] = -1.0
    return y


# ---- dtype conversions ------------------------------------------------------------
case("cast", "to_float64", lambda x: x.to(webgrad.float64), lambda x: x.astype(np.float64), F(3))
case("cast", "double", lambda x: x.double(), lambda x: x.astype(np.float64), F(3))
case("cast", "float_from_int", lambda x: x.float(), lambda x: x.astype(np.float32), I(3), grad=False)
case("cast", "long_truncates", lambda x: x.long(), lambda x: x.astype(np.int64), F(6, low=-3, high=3), grad=False)
case("cast", "int", lambda x: x.int(), lambda x: x.astype(np.int32), F(6, low=-3, high=3), grad=False)
case("cast", "bool", lambda x: x.bool(), lambda x: x.astype(bool), I(6, low=-1, high=1), grad=False)
case("cast", "bool_to_float", lambda x: x.float(), lambda x: x.astype(np.float32), B(4), grad=False)
case("cast", "to_python_type", lambda x: x.to(int), lambda x: x.astype(np.int64), HALVES(3), grad=False)
case("cast", "to_other", lambda x, y: x.to(y), lambda x, y: x.astype(y.dtype), F(3), I(2, dtype="int32"), grad=False)
case("cast", "type", lambda x: x.type(webgrad.int64), lambda x: x.astype(np.int64), HALVES(3), grad=False)
case("cast", "to_copy", lambda x: x.to(webgrad.float32, copy=True), np.copy, F(3), grad=False)

# ---- composed expressions: several ops at once, for broadcasting through autograd --
case("composite", "mlp_layer", lambda x, w, b: (x @ w + b).tanh().sum(-1),
     lambda x, w, b: np.tanh(x @ w + b).sum(-1), F(4, 3), F(3, 5), F(5))
case("composite", "broadcast_chain", lambda x, y, z: (x * y - z / 2).exp().mean((0, 2)),
     lambda x, y, z: np.exp(x * y - z / 2).mean((0, 2)), F(2, 1, 4, low=-1, high=1), F(3, 1, low=-1, high=1),
     F(1, 1, 1, low=-1, high=1))
case("composite", "same_input_twice", lambda x: x * x.sin() + x, lambda x: x * np.sin(x) + x, F(3, 4))
case("composite", "cross_entropy", lambda x, t: -x.log_softmax(-1).gather(1, t).mean(),
     lambda x, t: -np.mean(np.take_along_axis(np.log(_softmax(x, -1)), t, 1)), F(4, 5), IDX(4, 1, high=5))
case("composite", "layer_norm", lambda x: (x - x.mean(-1, keepdim=True)) / (x.var(-1, keepdim=True, unbiased=False)
                                                                            + 1e-5).sqrt(),
     lambda x: (x - x.mean(-1, keepdims=True)) / np.sqrt(x.var(-1, keepdims=True) + 1e-5), F(3, 6))



# ---- nn.functional.cross_entropy: fused (no weight) and composed (weight) paths -------
def _cross_entropy_ref(x, t, weight=None, ignore_index=-100, label_smoothing=0.0, reduction="mean"):
    """PyTorch's cross_entropy of logits (N, C, ...) and class indices, in numpy."""
    logp = np.log(_softmax(x, 1))
    valid = t != ignore_index
    safe = np.where(valid, t, 0)
    w = np.ones(x.shape[1], x.dtype) if weight is None else weight
    w_picked = np.where(valid, w[safe], 0).astype(x.dtype)
    loss = -np.take_along_axis(logp, safe[:, None], 1)[:, 0] * w_picked
    smooth = -(logp * w.reshape((1, -1) + (1,) * (x.ndim - 2))).sum(1) / x.shape[1]
    loss = (1 - label_smoothing) * loss + label_smoothing * np.where(valid, smooth, 0).astype(x.dtype)
    if reduction == "mean":
        return loss.sum() / w_picked.sum()
    return loss.sum() if reduction == "sum" else loss


def _ce(**kw):
    """F.cross_entropy with options ``kw``; a ``weight`` array goes to the logits' device."""
    def fn(x, t):
        options = dict(kw)
        if "weight" in options:
            options["weight"] = webgrad.tensor(options["weight"], device=x.device, dtype=x.dtype)
        return webgrad.nn.functional.cross_entropy(x, t, **options)

    def ref(x, t):
        options = dict(kw)
        if "weight" in options:
            options["weight"] = np.asarray(options["weight"], x.dtype)
        return _cross_entropy_ref(x, t, **options)
    return fn, ref


for variant, options, logits, labels in [
    ("mean", {}, F(6, 5), IDX(6, high=5)),
    ("sum_smoothed", {"reduction": "sum", "label_smoothing": 0.2}, F(6, 5), IDX(6, high=5)),
    ("none_ignored", {"reduction": "none", "ignore_index": 2}, F(8, 5), IDX(8, high=5)),
    ("spatial_smoothed_ignored", {"label_smoothing": 0.1, "ignore_index": 0}, F(2, 4, 3, 2), IDX(2, 3, 2, high=4)),
    ("long_rows", {"label_smoothing": 0.3}, F(3, 257, low=-30, high=30), IDX(3, high=257)),
    ("large_logits", {}, F(4, 6, low=80, high=90), IDX(4, high=6)),
    ("weighted_smoothed", {"weight": [0.5, 2.0, 1.0, 0.25, 1.5], "label_smoothing": 0.1, "ignore_index": 4},
     F(6, 5), IDX(6, high=5)),
]:
    # unweighted sums and means are one op of their own (cross_entropy_total)
    total = "weight" not in options and options.get("reduction", "mean") != "none"
    case("cross_entropy_total" if total else "cross_entropy", variant, *_ce(**options), logits, labels)
case("cross_entropy_total", "of_transposed_logits", lambda x, t: webgrad.nn.functional.cross_entropy(x.T, t),
     lambda x, t: _cross_entropy_ref(x.T, t), F(5, 4), IDX(4, high=5))

# ---- strided views as inputs: backends must honour strides, offsets and broadcasts ---
case("views", "exp_of_transposed", lambda x: x.T.exp(), lambda x: np.exp(x.T), F(3, 4))
case("views", "add_step_slice_and_transposed", lambda x, y: x[:, ::2] + y.T, lambda x, y: x[:, ::2] + y.T,
     F(3, 8), F(4, 3))
case("views", "matmul_of_transposed", lambda x, y: x.T @ y.mT, lambda x, y: x.T @ np.swapaxes(y, -1, -2),
     F(4, 2), F(5, 4))
case("views", "sum_of_permuted", lambda x: x.permute(2, 0, 1)[1:].sum((0, 2)),
     lambda x: x.transpose(2, 0, 1)[1:].sum((0, 2)), F(2, 3, 4))
case("views", "softmax_of_slice", lambda x: x[1:, 1:3].softmax(0), lambda x: _softmax(x[1:, 1:3], 0), F(4, 5))
case("views", "log_softmax_of_permuted", lambda x: x.permute(2, 0, 1).log_softmax(1),
     lambda x: np.log(_softmax(x.transpose(2, 0, 1), 1)), F(2, 3, 4))
case("views", "layer_norm_of_transposed", lambda x: webgrad.ops.layer_norm_core(x.transpose(0, 1), ndims=1),
     lambda x: _layer_norm(x.T, 1), F(5, 4))
case("views", "layer_norm_of_permuted_two_dims", lambda x: webgrad.ops.layer_norm_core(x.permute(2, 0, 1), ndims=2),
     lambda x: _layer_norm(x.transpose(2, 0, 1), 2), F(2, 3, 4))
case("views", "softmax_of_flipped_slice", lambda x: x.flip(1)[:, ::2].softmax(-1),
     lambda x: _softmax(np.flip(x, 1)[:, ::2], -1), F(3, 7))
case("views", "cat_of_views", lambda x: webgrad.cat([x[:, :1], x.flip(1), x.T.T[:, 2:]], 1),
     lambda x: np.concatenate([x[:, :1], np.flip(x, 1), x[:, 2:]], 1), F(3, 4))
case("views", "gather_of_transposed", lambda x, i: x.T.gather(0, i), lambda x, i: _gather_ref(x.T, 0, i),
     F(3, 4), IDX(2, 3, high=4))
case("views", "index_of_expanded", lambda x: x.expand(3, 4)[webgrad.tensor([2, 0], device=x.device)] * 2,
     lambda x: np.broadcast_to(x, (3, 4))[[2, 0]] * 2, F(4))
case("views", "reshape_of_permuted", lambda x: x.permute(1, 0, 2).reshape(3, 8),
     lambda x: x.transpose(1, 0, 2).reshape(3, 8), F(2, 3, 4))
case("views", "where_of_views", lambda c, x: webgrad.where(c.T, x[::2], x[1::2]),
     lambda c, x: np.where(c.T, x[::2], x[1::2]), B(3, 2), F(4, 3))
case("views", "unsqueeze_expand_mul", lambda x, y: x.unsqueeze(-1) * y.unsqueeze(0),
     lambda x, y: x[:, :, None] * y[None], F(2, 3), F(3, 4))
case("views", "max_of_flipped", lambda x: tuple(x.flip(0).max(0)),
     lambda x: (np.flip(x, 0).max(0), np.flip(x, 0).argmax(0)), DISTINCT(3, 4), dtype=("float32", "int64"))

# ---- special values: NaN propagates and infinities saturate as in numpy, on every backend --
for op, fn, ref in [
    ("relu", lambda x: x.relu(), lambda x: np.where(np.isnan(x), x, np.maximum(x, 0))),
    ("sigmoid", lambda x: x.sigmoid(), _sigmoid), ("tanh", lambda x: x.tanh(), np.tanh),
    ("sign", lambda x: x.sign(), lambda x: np.where(np.isnan(x), 0, np.sign(x)).astype(x.dtype)),  # torch: 0 at NaN
    ("abs", lambda x: x.abs(), np.abs), ("exp", lambda x: x.exp(), np.exp),
    ("neg", lambda x: -x, np.negative), ("floor", lambda x: x.floor(), np.floor),
    ("ceil", lambda x: x.ceil(), np.ceil), ("round", lambda x: x.round(), np.round),
    ("log", lambda x: x.log(), np.log), ("sqrt", lambda x: x.sqrt(), np.sqrt), ("sin", lambda x: x.sin(), np.sin),
    ("cos", lambda x: x.cos(), np.cos), ("rsqrt", lambda x: x.rsqrt(), lambda x: 1 / np.sqrt(x)),
    ("log1p", lambda x: x.log1p(), np.log1p), ("erf", lambda x: webgrad.erf(x), _erf),
    ("reciprocal", lambda x: x.reciprocal(), np.reciprocal),
    ("pow", lambda x: x ** 2.0, lambda x: x ** 2.0), ("div", lambda x: x / x.flip(0), lambda x: x / np.flip(x, 0)),
    ("maximum", lambda x: webgrad.maximum(x, x.flip(0)), lambda x: np.maximum(x, np.flip(x, 0))),
    ("minimum", lambda x: webgrad.minimum(x, x.flip(0)), lambda x: np.minimum(x, np.flip(x, 0))),
    ("clamp", lambda x: x.clamp(-1.0, 1.0), lambda x: np.clip(x, -1.0, 1.0)),
    ("amax", lambda x: x.amax(1), lambda x: np.max(x, 1)), ("sum", lambda x: x.sum(1), lambda x: np.sum(x, 1)),
    ("softmax", lambda x: x.softmax(1), lambda x: _softmax(x, 1)),
]:
    case(op, "special_values", fn, ref, SPECIAL(9, 3), grad=False)


# ---- scans, sorting, searching, triangles, einsum ---------------------------------------
def _order(row, descending):
    """Stable sorting order of a 1-D row, NaN largest, -0.0 == 0.0: a plain-Python reference."""
    def key(i):
        v = float(row[i])
        if math.isnan(v):
            return (not descending, 0.0)
        return (descending, -v if descending else v)
    return sorted(range(len(row)), key=key)


def _argsort_ref(x, axis=-1, descending=False):
    moved = np.moveaxis(np.asarray(x), axis, -1)
    flat = moved.reshape(-1, moved.shape[-1])
    out = np.array([_order(r, descending) for r in flat], dtype=np.int64).reshape(moved.shape)
    return np.moveaxis(out, -1, axis)


def _sort_ref(x, axis=-1, descending=False):
    idx = _argsort_ref(x, axis, descending)
    return np.take_along_axis(x, idx, axis), idx


def _topk_ref(x, k, axis=-1, largest=True):
    values, idx = _sort_ref(x, axis, largest)
    keep = np.arange(k)
    return np.take(values, keep, axis), np.take(idx, keep, axis)


def _sorted_and_values(shape_seq, shape_values, ints=False):
    def gen(rng):
        seq = np.sort(rng.uniform(-2, 2, shape_seq), axis=-1)
        values = rng.uniform(-2.5, 2.5, shape_values)
        values.flat[:3] = seq.flat[:3]  # exact hits: left and right differ there
        if ints:
            return [np.round(seq * 3).astype(np.int64), np.round(values * 3).astype(np.int64)]
        return [seq.astype(np.float32), values.astype(np.float32)]
    return gen


def _signs(shape):
    return lambda rng: [rng.choice([-1.0, 1.0], shape).astype(np.float32)]


def _triangle_ref(x, k, lower):
    rows, cols = x.shape[-2:]
    keep = (np.tril if lower else np.triu)(np.ones((rows, cols), dtype=bool), k)
    return np.where(keep, x, np.zeros((), x.dtype))


case("cumsum", "last", lambda x: x.cumsum(-1), lambda x: np.cumsum(x, -1), F(3, 4))
case("cumsum", "first", lambda x: webgrad.cumsum(x, 0), lambda x: np.cumsum(x, 0), F(3, 4))
case("cumsum", "middle_3d", lambda x: x.cumsum(1), lambda x: np.cumsum(x, 1), F(2, 3, 4))
case("cumsum", "zero_dim", lambda x: x.cumsum(0), lambda x: x.copy(), F())
case("cumsum", "int", lambda x: x.cumsum(0), lambda x: np.cumsum(x, 0), I(6, dtype="int32"), grad=False,
     dtype="int64")
case("cumsum", "bool", lambda x: x.cumsum(0), lambda x: np.cumsum(x, 0), B(7), grad=False, dtype="int64")
case("cumsum", "dtype_arg", lambda x: x.cumsum(0, dtype=webgrad.float32), lambda x: np.cumsum(x, 0), I(5),
     grad=False, dtype="float32")
case("cumsum", "long_rows", lambda x: x.cumsum(1), lambda x: np.cumsum(x, 1), HALVES(2, 9000), grad=False)
case("cumprod", "last", lambda x: x.cumprod(-1), lambda x: np.cumprod(x, -1), F(3, 4))
case("cumprod", "first", lambda x: webgrad.cumprod(x, 0), lambda x: np.cumprod(x, 0), F(4, 3))
case("cumprod", "zeros", lambda x: x.cumprod(1), lambda x: np.cumprod(x, 1), F(3, 4), gen=_with_zeros)
case("cumprod", "zeros_first_dim", lambda x: x.cumprod(0), lambda x: np.cumprod(x, 0), F(4, 3),
     gen=lambda rng: [_with_zeros(rng)[0].T.copy()])
case("cumprod", "int", lambda x: x.cumprod(0), lambda x: np.cumprod(x, 0), I(5, low=-2, high=2), grad=False,
     dtype="int64")
case("cumprod", "long_rows", lambda x: x.cumprod(-1), lambda x: np.cumprod(x, -1), F(2, 9000), grad=False,
     gen=_signs((2, 9000)))

case("sort", "last", lambda x: tuple(x.sort()), _sort_ref, DISTINCT(3, 5), dtype=("float32", "int64"))
case("sort", "descending_dim0", lambda x: tuple(webgrad.sort(x, 0, descending=True)),
     lambda x: _sort_ref(x, 0, True), DISTINCT(4, 3), dtype=("float32", "int64"))
case("sort", "ties_stable", lambda x: tuple(x.sort(stable=True)), _sort_ref, HALVES(3, 9), grad=False,
     dtype=("float32", "int64"))
case("sort", "ties_descending", lambda x: tuple(x.sort(descending=True)), lambda x: _sort_ref(x, -1, True),
     HALVES(3, 9), grad=False, dtype=("float32", "int64"))
case("sort", "nan_inf_signed_zeros", lambda x: tuple(x.sort(0)), lambda x: _sort_ref(x, 0), SPECIAL(9, 2),
     grad=False, dtype=("float32", "int64"))
case("sort", "nan_descending", lambda x: tuple(x.sort(0, descending=True)), lambda x: _sort_ref(x, 0, True),
     SPECIAL(9, 2), grad=False, dtype=("float32", "int64"))
case("sort", "int", lambda x: tuple(x.sort()), _sort_ref, I(2, 7), grad=False, dtype=("int64", "int64"))
# Rows longer than 1024 take the bitonic network on webgpu (shorter ones the rank sort).
case("sort", "long_rows", lambda x: tuple(x.sort()), _sort_ref, DISTINCT(2, 1500), grad=False,
     dtype=("float32", "int64"))
case("sort", "long_ties_descending", lambda x: tuple(x.sort(0, descending=True)), lambda x: _sort_ref(x, 0, True),
     HALVES(1100, 2), grad=False, dtype=("float32", "int64"))
case("sort", "long_nan_int", lambda x: tuple(x.sort()), _sort_ref, I(3000, low=-40, high=40, dtype="int32"),
     grad=False, dtype=("int32", "int64"))
case("sort", "long_special", lambda x: tuple(x.sort(descending=True)), lambda x: _sort_ref(x, -1, True),
     SPECIAL(1030), grad=False, dtype=("float32", "int64"))
case("topk", "long_row", lambda x: tuple(x.topk(5)), lambda x: _topk_ref(x, 5), DISTINCT(3, 2000),
     dtype=("float32", "int64"))
case("argsort", "float", lambda x: x.argsort(), _argsort_ref, DISTINCT(3, 5), grad=False, dtype="int64")
case("argsort", "descending_int32", lambda x: webgrad.argsort(x, 0, descending=True),
     lambda x: _argsort_ref(x, 0, True), I(6, 2, dtype="int32"), grad=False, dtype="int64")
case("argsort", "bool", lambda x: x.argsort(), _argsort_ref, B(9), grad=False, dtype="int64")
case("topk", "largest", lambda x: tuple(x.topk(2)), lambda x: _topk_ref(x, 2), DISTINCT(3, 6),
     dtype=("float32", "int64"))
case("topk", "smallest_dim0", lambda x: tuple(webgrad.topk(x, 3, dim=0, largest=False)),
     lambda x: _topk_ref(x, 3, 0, False), DISTINCT(5, 2), dtype=("float32", "int64"))
case("topk", "all_unsorted_flag", lambda x: tuple(x.topk(4, sorted=False)), lambda x: _topk_ref(x, 4),
     DISTINCT(2, 4), dtype=("float32", "int64"))
case("topk", "k_zero", lambda x: tuple(x.topk(0)), lambda x: _topk_ref(x, 0), DISTINCT(2, 4), grad=False,
     dtype=("float32", "int64"))

case("searchsorted", "left", lambda s, v: webgrad.searchsorted(s, v), np.searchsorted, F(6), F(8),
     gen=_sorted_and_values((6,), (8,)), grad=False, dtype="int64")
case("searchsorted", "right", lambda s, v: webgrad.searchsorted(s, v, right=True),
     lambda s, v: np.searchsorted(s, v, side="right"), F(6), F(2, 4), gen=_sorted_and_values((6,), (2, 4)),
     grad=False, dtype="int64")
case("searchsorted", "rows_side_right", lambda s, v: webgrad.searchsorted(s, v, side="right"),
     lambda s, v: np.stack([np.searchsorted(a, b, side="right") for a, b in zip(s, v)]), F(3, 5), F(3, 4),
     gen=_sorted_and_values((3, 5), (3, 4)), grad=False, dtype="int64")
case("searchsorted", "int_out_int32", lambda s, v: webgrad.searchsorted(s, v, out_int32=True), np.searchsorted,
     I(6), I(5), gen=_sorted_and_values((6,), (5,), ints=True), grad=False, dtype="int32")
case("bucketize", "left", lambda v, b: webgrad.bucketize(v, b), lambda v, b: np.searchsorted(b, v), F(3, 4), F(5),
     gen=lambda rng: _sorted_and_values((5,), (3, 4))(rng)[::-1], grad=False, dtype="int64")
case("bucketize", "right", lambda v, b: webgrad.bucketize(v, b, right=True),
     lambda v, b: np.searchsorted(b, v, side="right"), F(7), F(4),
     gen=lambda rng: _sorted_and_values((4,), (7,))(rng)[::-1], grad=False, dtype="int64")
case("unique", "sorted", lambda x: webgrad.unique(x), np.unique, I(12, low=-3, high=3), grad=False)
case("unique", "inverse_counts", lambda x: x.unique(return_inverse=True, return_counts=True),
     lambda x: (np.unique(x), np.unique(x, return_inverse=True)[1].reshape(x.shape),
                np.unique(x, return_counts=True)[1]), I(3, 4, low=-2, high=2), grad=False,
     dtype=("int64", "int64", "int64"))
case("unique", "dim0", lambda x: webgrad.unique(x, dim=0, return_counts=True),
     lambda x: (np.unique(x, axis=0), np.unique(x, axis=0, return_counts=True)[1]), F(5, 2), grad=False,
     gen=lambda rng: [np.array([[1, 2], [0, 3], [1, 2], [0, 3], [-1, 5]], dtype=np.float32)],
     dtype=("float32", "int64"))
case("unique", "float", lambda x: x.unique(), np.unique, HALVES(10), grad=False)

case("tril", "square", lambda x: x.tril(), lambda x: _triangle_ref(x, 0, True), F(4, 4))
case("tril", "wide_diag1", lambda x: webgrad.tril(x, 1), lambda x: _triangle_ref(x, 1, True), F(3, 5))
case("tril", "batched_diag_neg", lambda x: x.tril(-1), lambda x: _triangle_ref(x, -1, True), F(2, 4, 3))
case("tril", "bool", lambda x: x.tril(), lambda x: _triangle_ref(x, 0, True), B(3, 3), grad=False)
case("triu", "square", lambda x: x.triu(), lambda x: _triangle_ref(x, 0, False), F(4, 4))
case("triu", "tall_diag1", lambda x: webgrad.triu(x, diagonal=1), lambda x: _triangle_ref(x, 1, False), F(5, 3))
case("triu", "int_diag_neg", lambda x: x.triu(-2), lambda x: _triangle_ref(x, -2, False), I(2, 4, 4),
     grad=False)
case("where", "scalar_input", lambda c, y: webgrad.where(c, -1.5, y), lambda c, y: np.where(c, -1.5, y), B(4),
     F(2, 4))
case("where", "int_scalars", lambda c: webgrad.where(c, 3, -1), lambda c: np.where(c, 3, -1), B(5),
     grad=False, dtype="int64")
case("outer", "float", lambda x, y: webgrad.outer(x, y), np.outer, F(3), F(4))
case("outer", "method_int", lambda x, y: x.outer(y), np.outer, I(3), I(2), grad=False)
for variant, equation, shapes in [
    ("matmul", "ij,jk->ik", [(3, 4), (4, 2)]),
    ("batched", "bij,bjk->bik", [(2, 3, 4), (2, 4, 5)]),
    ("attention", "bqd,bkd->bqk", [(2, 3, 4), (2, 5, 4)]),
    ("diagonal", "ii->i", [(4, 4)]),
    ("trace", "ii", [(3, 3)]),
    ("outer", "i,j->ij", [(3,), (4,)]),
    ("transpose_ellipsis", "...ij->...ji", [(2, 3, 4)]),
    ("sum_all", "ij->", [(3, 4)]),
    ("implicit", "ij,jk", [(2, 3), (3, 4)]),
    ("three_operands", "ij,jk,kl->il", [(2, 3), (3, 4), (4, 2)]),
    ("bilinear", "bn,anm,bm->ba", [(2, 3), (4, 3, 5), (2, 5)]),
    ("broadcast_ellipsis", "...j,j->...", [(2, 3, 4), (4,)]),
]:
    case("einsum", variant, lambda *xs, eq=equation: webgrad.einsum(eq, *xs),
         lambda *xs, eq=equation: np.einsum(eq, *xs), *[F(*s) for s in shapes])
case("einsum", "list_form", lambda x, y: webgrad.einsum("ij,j->i", [x, y]), lambda x, y: x @ y, F(3, 4), F(4))


# ---- zero-size tensors ----------------------------------------------------------------
case("empty", "add", lambda x, y: x + y, np.add, F(0, 3), F(3), grad=False)
case("empty", "sum", lambda x: x.sum(0), lambda x: x.sum(0), F(0, 3), grad=False)
case("empty", "sum_all", lambda x: x.sum(), np.sum, F(2, 0), grad=False)
case("empty", "matmul_inner_zero", lambda x, y: x @ y, np.matmul, F(2, 0), F(0, 3), grad=False)
case("empty", "matmul_rows_zero", lambda x, y: x @ y, np.matmul, F(0, 2), F(2, 3), grad=False)
case("empty", "cat", lambda x, y: webgrad.cat([x, y]), lambda x, y: np.concatenate([x, y]), F(0, 3), F(2, 3),
     grad=False)
case("empty", "reshape", lambda x: x.reshape(3, 0, 2), lambda x: x.reshape(3, 0, 2), F(0, 6), grad=False)
case("empty", "mask_selects_nothing", lambda x: x[x > 100], lambda x: x[x > 100], F(3, 4), grad=False)
case("empty", "index_with_empty", lambda x: x[webgrad.tensor([], dtype=webgrad.int64, device=x.device)],
     lambda x: x[np.array([], dtype=np.int64)], F(3, 4), grad=False)
case("empty", "exp", lambda x: x.exp(), np.exp, F(0), grad=False)
case("empty", "prod", lambda x: x.prod(1), lambda x: x.prod(1), F(3, 0), grad=False)


# ---- creation ops: no inputs, the device is their only argument ---------------------
@dataclass
class CreationCase:
    name: str
    fn: Callable[[str], Any]  # device -> webgrad tensor
    ref: Callable[[], np.ndarray]
    dtype: str


CREATION_CASES = [
    CreationCase("zeros", lambda d: webgrad.zeros(2, 3, device=d), lambda: np.zeros((2, 3)), "float32"),
    CreationCase("zeros_tuple", lambda d: webgrad.zeros((2, 3), device=d), lambda: np.zeros((2, 3)), "float32"),
    CreationCase("zeros_int", lambda d: webgrad.zeros(4, dtype=webgrad.int64, device=d), lambda: np.zeros(4), "int64"),
    CreationCase("zeros_scalar", lambda d: webgrad.zeros((), device=d), lambda: np.zeros(()), "float32"),
    CreationCase("ones", lambda d: webgrad.ones([3], device=d), lambda: np.ones(3), "float32"),
    CreationCase("ones_bool", lambda d: webgrad.ones(2, 2, dtype=webgrad.bool, device=d), lambda: np.ones((2, 2)),
                 "bool"),
    CreationCase("empty_shape", lambda d: webgrad.empty(2, 0, device=d), lambda: np.zeros((2, 0)), "float32"),
    CreationCase("full_float", lambda d: webgrad.full((2, 2), 1.5, device=d), lambda: np.full((2, 2), 1.5), "float32"),
    CreationCase("full_int", lambda d: webgrad.full((3,), 7, device=d), lambda: np.full(3, 7), "int64"),
    CreationCase("full_bool", lambda d: webgrad.full((3,), True, device=d), lambda: np.full(3, True), "bool"),
    CreationCase("full_dtype", lambda d: webgrad.full((3,), 2, dtype=webgrad.float64, device=d),
                 lambda: np.full(3, 2.0), "float64"),
    CreationCase("arange_end", lambda d: webgrad.arange(5, device=d), lambda: np.arange(5), "int64"),
    CreationCase("arange_start_end", lambda d: webgrad.arange(2, 7, device=d), lambda: np.arange(2, 7), "int64"),
    CreationCase("arange_step", lambda d: webgrad.arange(1, 10, 3, device=d), lambda: np.arange(1, 10, 3), "int64"),
    CreationCase("arange_negative_step", lambda d: webgrad.arange(5, -3, -2, device=d), lambda: np.arange(5, -3, -2),
                 "int64"),
    CreationCase("arange_float_step", lambda d: webgrad.arange(0, 1, 0.1, device=d), lambda: np.arange(0, 1, 0.1),
                 "float32"),
    CreationCase("arange_float_start", lambda d: webgrad.arange(0.5, 2.0, 0.25, device=d),
                 lambda: np.arange(0.5, 2.0, 0.25), "float32"),
    CreationCase("arange_float_end", lambda d: webgrad.arange(3.0, device=d), lambda: np.arange(3.0), "float32"),
    CreationCase("arange_dtype", lambda d: webgrad.arange(4, dtype=webgrad.float64, device=d), lambda: np.arange(4.0),
                 "float64"),
    CreationCase("arange_empty", lambda d: webgrad.arange(3, 3, device=d), lambda: np.arange(3, 3), "int64"),
    CreationCase("linspace", lambda d: webgrad.linspace(-1, 1, 5, device=d), lambda: np.linspace(-1, 1, 5), "float32"),
    CreationCase("linspace_one", lambda d: webgrad.linspace(2, 3, 1, device=d), lambda: np.linspace(2, 3, 1),
                 "float32"),
    CreationCase("linspace_dtype", lambda d: webgrad.linspace(0, 1, 11, dtype=webgrad.float64, device=d),
                 lambda: np.linspace(0, 1, 11), "float64"),
    CreationCase("eye", lambda d: webgrad.eye(3, device=d), lambda: np.eye(3), "float32"),
    CreationCase("eye_rect", lambda d: webgrad.eye(2, 4, device=d), lambda: np.eye(2, 4), "float32"),
    CreationCase("eye_int", lambda d: webgrad.eye(2, dtype=webgrad.int64, device=d), lambda: np.eye(2), "int64"),
    CreationCase("zeros_like", lambda d: webgrad.zeros_like(webgrad.ones(2, 3, dtype=webgrad.int32, device=d)),
                 lambda: np.zeros((2, 3)), "int32"),
    CreationCase("ones_like_dtype", lambda d: webgrad.ones_like(webgrad.zeros(2, device=d), dtype=webgrad.float64),
                 lambda: np.ones(2), "float64"),
    CreationCase("full_like", lambda d: webgrad.full_like(webgrad.zeros(2, 2, device=d), -3.0),
                 lambda: np.full((2, 2), -3.0), "float32"),
    CreationCase("empty_like", lambda d: webgrad.empty_like(webgrad.zeros(3, device=d)).zero_(), lambda: np.zeros(3),
                 "float32"),
    CreationCase("tensor_nested", lambda d: webgrad.tensor([[1, 2], [3, 4]], device=d),
                 lambda: np.array([[1, 2], [3, 4]]), "int64"),
    CreationCase("tensor_float", lambda d: webgrad.tensor([1.0, 2.5], device=d), lambda: np.array([1.0, 2.5]),
                 "float32"),
    CreationCase("tensor_mixed_int_float", lambda d: webgrad.tensor([1, 2.5], device=d), lambda: np.array([1, 2.5]),
                 "float32"),
    CreationCase("tensor_bool", lambda d: webgrad.tensor([True, False], device=d), lambda: np.array([True, False]),
                 "bool"),
    CreationCase("tensor_scalar", lambda d: webgrad.tensor(3.0, device=d), lambda: np.array(3.0), "float32"),
    CreationCase("tensor_numpy_float64", lambda d: webgrad.tensor(np.array([0.1, 0.2]), device=d),
                 lambda: np.array([0.1, 0.2]), "float64"),
    CreationCase("tensor_numpy_int32", lambda d: webgrad.tensor(np.array([1, 2], dtype=np.int32), device=d),
                 lambda: np.array([1, 2]), "int32"),
    CreationCase("tensor_dtype", lambda d: webgrad.tensor([1, 2], dtype=webgrad.float32, device=d),
                 lambda: np.array([1.0, 2.0]), "float32"),
    CreationCase("tensor_of_tensors", lambda d: webgrad.tensor([webgrad.tensor(1.0), webgrad.tensor(2.0)], device=d),
                 lambda: np.array([1.0, 2.0]), "float32"),
    CreationCase("tensor_empty", lambda d: webgrad.tensor([], device=d), lambda: np.zeros(0), "float32"),
    CreationCase("as_tensor", lambda d: webgrad.as_tensor([1, 2], dtype=webgrad.float64, device=d),
                 lambda: np.array([1.0, 2.0]), "float64"),
]


def cases_for(op: str) -> list[OpCase]:
    return [c for c in CASES if c.op == op]


_names = [c.name for c in CASES]
assert len(_names) == len(set(_names)), sorted(n for n in _names if _names.count(n) > 1)
