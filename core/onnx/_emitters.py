"""One ONNX emitter per webgrad op, keyed by the op's ``defop`` record.

``EMITTERS[op](low, node, *inputs, **attrs)`` writes the ONNX nodes for one graph node
and returns the name of its result: ``low`` is the ``Lowering`` (``emit``, ``ints``,
``scalar``...), ``node`` the IR node (its values carry shapes and dtypes), ``inputs``
the ONNX names of its inputs and ``attrs`` the node's attrs, with ``Size``s where
they follow a dynamic axis. An op with no entry here stops the export with its name.
"""
from __future__ import annotations

import numpy as np

from ..creation import tensor
from ..dtypes import bool_
from ..ops import conv, elementwise as E, indexing as I, linalg, movement as M, normalization, pooling
from ..ops import reduce as R, scan, sorting
from ..tensor import Tensor
from ._traced import ExportError, Size

EMITTERS: dict = {}
_ELEM = {"float32": 1, "int32": 6, "int64": 7, "bool": 9, "float16": 10, "float64": 11}


def elem_type(dtype) -> int:
    """ONNX's number for a webgrad dtype."""
    if dtype.name not in _ELEM:
        raise ExportError(f"onnx.export: dtype {dtype.name} has no ONNX mapping here; use float32 or int64")
    return _ELEM[dtype.name]


def _is_float(v) -> bool:
    return v.dtype.is_floating_point


# -- elementwise -----------------------------------------------------------------------
def _same(onnx_op):
    return lambda low, node, *inputs: low.emit(onnx_op, inputs)


def _float_only(onnx_op):
    """Floor, ceil, round: an integer is its own result."""
    return lambda low, node, x: low.emit(onnx_op if _is_float(node.inputs[0]) else "Identity", [x])


def _bool_or(onnx_op, bool_op):
    """Add/mul/max/min of bools are or/and (as webgrad's kernels compute them)."""
    return lambda low, node, x, y: low.emit(bool_op if node.inputs[0].dtype is bool_ else onnx_op, [x, y])


def _as_bool(low, node, i, name):
    return name if node.inputs[i].dtype is bool_ else low.emit("Cast", [name], to=9)


def _logical(onnx_op):
    return lambda low, node, x, y: low.emit(onnx_op, [_as_bool(low, node, 0, x), _as_bool(low, node, 1, y)])


def _log1p(low, node, x):
    return low.emit("Log", [low.emit("Add", [x, low.scalar(1, node.inputs[0])])])


def _logical_not(low, node, x):
    if node.inputs[0].dtype is bool_:
        return low.emit("Not", [x])
    return low.emit("Equal", [x, low.scalar(0, node.inputs[0])])


def _never(low, x):
    """All False, shaped like an integer ``x`` (x == x holds)."""
    return low.emit("Not", [low.emit("Equal", [x, x])])


def _isfinite(low, node, x):
    if not _is_float(node.inputs[0]):
        return low.emit("Equal", [x, x])
    return low.emit("Not", [low.emit("Or", [low.emit("IsNaN", [x]), low.emit("IsInf", [x])])])


def _remainder(low, node, x, y):
    if not _is_float(node.inputs[0]):
        return low.emit("Mod", [x, y], fmod=0)  # the divisor's sign, as Python's %
    floor = low.emit("Floor", [low.emit("Div", [x, y])])
    return low.emit("Sub", [x, low.emit("Mul", [y, floor])])


def _floor_divide(low, node, x, y):
    if _is_float(node.inputs[0]):
        return low.emit("Floor", [low.emit("Div", [x, y])])
    exact = low.emit("Sub", [x, low.emit("Mod", [x, y], fmod=0)])  # integer Div truncates; this divides exactly
    return low.emit("Div", [exact, y])


EMITTERS.update({
    E.RELU: _same("Relu"), E.NEG: _same("Neg"), E.ABS: _same("Abs"), E.EXP: _same("Exp"), E.LOG: _same("Log"),
    E.SQRT: _same("Sqrt"), E.SIN: _same("Sin"), E.COS: _same("Cos"), E.TANH: _same("Tanh"),
    E.SIGMOID: _same("Sigmoid"), E.ERF: _same("Erf"), E.RECIPROCAL: _same("Reciprocal"), E.SIGN: _same("Sign"),
    E.FLOOR: _float_only("Floor"), E.CEIL: _float_only("Ceil"), E.ROUND: _float_only("Round"),
    E.LOG1P: _log1p,
    E.RSQRT: lambda low, node, x: low.emit("Reciprocal", [low.emit("Sqrt", [x])]),
    E.LOGICAL_NOT: _logical_not,
    E.ISNAN: lambda low, node, x: low.emit("IsNaN", [x]) if _is_float(node.inputs[0]) else _never(low, x),
    E.ISINF: lambda low, node, x: low.emit("IsInf", [x]) if _is_float(node.inputs[0]) else _never(low, x),
    E.ISFINITE: _isfinite,
    E.CAST: lambda low, node, x, *, dtype: low.emit("Cast", [x], to=elem_type(dtype)),
    M.COPY: _same("Identity"),
    E.ADD: _bool_or("Add", "Or"), E.MUL: _bool_or("Mul", "And"), E.SUB: _same("Sub"), E.DIV: _same("Div"),
    E.POW: _same("Pow"), E.MAXIMUM: _bool_or("Max", "Or"), E.MINIMUM: _bool_or("Min", "And"),
    E.REMAINDER: _remainder, E.FLOOR_DIVIDE: _floor_divide,
    E.EQ: _same("Equal"), E.NE: lambda low, node, x, y: low.emit("Not", [low.emit("Equal", [x, y])]),
    E.LT: _same("Less"), E.LE: _same("LessOrEqual"), E.GT: _same("Greater"), E.GE: _same("GreaterOrEqual"),
    E.LOGICAL_AND: _logical("And"), E.LOGICAL_OR: _logical("Or"), E.LOGICAL_XOR: _logical("Xor"),
    E.WHERE: _same("Where"),
})


# -- more unary maths (ops/elementwise.py's trigonometric, hyperbolic and error functions) -----
def _polynomial(low, node, t, coefficients):
    """c0 t^n + ... + cn by Horner's rule, as ONNX nodes."""
    value = low.scalar(coefficients[0], node.inputs[0])
    for c in coefficients[1:]:
        value = low.emit("Add", [low.emit("Mul", [value, t]), low.scalar(c, node.inputs[0])])
    return value


def _erfinv(low, node, x):
    """No ONNX op: the single-precision polynomials of math.wgsl's wg_erfinv (float32 accuracy)."""
    one = low.scalar(1, node.inputs[0])
    w = low.emit("Neg", [low.emit("Log", [low.emit("Mul", [low.emit("Sub", [one, x]), low.emit("Add", [one, x])])])])
    central = _polynomial(low, node, low.emit("Sub", [w, low.scalar(2.5, node.inputs[0])]), (
        2.81022636e-08, 3.43273939e-07, -3.5233877e-06, -4.39150654e-06, 0.00021858087, -0.00125372503,
        -0.00417768164, 0.246640727, 1.50140941))
    tail = _polynomial(low, node, low.emit("Sub", [low.emit("Sqrt", [w]), low.scalar(3, node.inputs[0])]), (
        -0.000200214257, 0.000100950558, 0.00134934322, -0.00367342844, 0.00573950773, -0.0076224613,
        0.00943887047, 1.00167406, 2.83297682))
    small = low.emit("Less", [w, low.scalar(5, node.inputs[0])])
    return low.emit("Mul", [low.emit("Where", [small, central, tail]), x])


def _atan2(low, node, y, x):
    """atan(y / x), moved by +-pi into the left half plane."""
    base = low.emit("Atan", [low.emit("Div", [y, x])])
    zero = low.scalar(0, node.inputs[0])
    turn = low.emit("Where", [low.emit("Less", [y, zero]), low.scalar(-np.pi, node.inputs[0]),
                              low.scalar(np.pi, node.inputs[0])])
    return low.emit("Add", [base, low.emit("Where", [low.emit("Less", [x, zero]), turn, zero])])


def _copysign(low, node, x, y):
    negative = low.emit("Less", [y, low.scalar(0, node.inputs[1])])
    magnitude = low.emit("Abs", [x])
    return low.emit("Where", [negative, low.emit("Neg", [magnitude]), magnitude])


EMITTERS.update({
    E.TAN: _same("Tan"), E.ASIN: _same("Asin"), E.ACOS: _same("Acos"), E.ATAN: _same("Atan"),
    E.SINH: _same("Sinh"), E.COSH: _same("Cosh"), E.ASINH: _same("Asinh"), E.ACOSH: _same("Acosh"),
    E.ATANH: _same("Atanh"),
    E.EXPM1: lambda low, node, x: low.emit("Sub", [low.emit("Exp", [x]), low.scalar(1, node.inputs[0])]),
    E.ERFC: lambda low, node, x: low.emit("Sub", [low.scalar(1, node.inputs[0]), low.emit("Erf", [x])]),
    E.ERFINV: _erfinv,
    E.TRUNC: lambda low, node, x: low.emit("Mul", [low.emit("Sign", [x]), low.emit("Floor", [low.emit("Abs", [x])])]),
    E.FMOD: lambda low, node, x, y: low.emit("Mod", [x, y], fmod=1),
    E.ATAN2: _atan2, E.COPYSIGN: _copysign,
})


def _bitwise(onnx_op, bool_op):
    """Bools: the logical op; integers: ONNX's Bitwise* (opset 18)."""
    def emit(low, node, *inputs):
        if node.inputs[0].dtype is bool_:
            return low.emit(bool_op, inputs)
        if low.opset < 18:
            raise ExportError(f"onnx.export: {onnx_op} of integers needs opset_version >= 18, got {low.opset}")
        return low.emit(onnx_op, inputs)
    return emit


def _shift(left):
    """x * 2**y, or floor(x / 2**y) (ONNX's BitShift takes unsigned integers only)."""
    def emit(low, node, x, y):
        power = low.emit("Pow", [low.scalar(2, node.inputs[0]), y])
        if left:
            return low.emit("Mul", [x, power])
        return _floor_divide(low, node, x, power)
    return emit


EMITTERS.update({
    E.BITWISE_AND: _bitwise("BitwiseAnd", "And"), E.BITWISE_OR: _bitwise("BitwiseOr", "Or"),
    E.BITWISE_XOR: _bitwise("BitwiseXor", "Xor"), E.BITWISE_NOT: _bitwise("BitwiseNot", "Not"),
    E.BITWISE_LEFT_SHIFT: _shift(True), E.BITWISE_RIGHT_SHIFT: _shift(False),
})


# -- reductions -------------------------------------------------------------------------
def _reduce(onnx_op, axes_input_since):
    """ReduceSum takes its axes as an input from opset 13, the others from opset 18."""
    def emit(low, node, x, *, dims, keepdim):
        if not dims:
            return low.emit("Identity", [x])  # no dim to reduce (ONNX would reduce them all)
        axes = [int(d) for d in dims]
        if low.opset >= axes_input_since:
            return low.emit(onnx_op, [x, low.ints(axes)], keepdims=int(keepdim))
        return low.emit(onnx_op, [x], axes=axes, keepdims=int(keepdim))
    return emit


def _arg_reduce(onnx_op):
    def emit(low, node, x, *, dim, keepdim):
        if dim is not None:
            return low.emit(onnx_op, [x], axis=int(dim), keepdims=int(keepdim), select_last_index=0)
        flat = low.emit(onnx_op, [low.emit("Reshape", [x, low.ints([-1])])], axis=0, keepdims=0)
        return low.emit("Reshape", [flat, low.ints(low.shape(node.output))])
    return emit


def _layer_norm(low, node, x, weight=None, bias=None, *, ndims, eps):
    """layer_norm_core (scale 1) or layer_norm (its weight and bias)."""
    if low.opset < 17:
        raise ExportError(f"onnx.export: LayerNorm needs opset_version >= 17 (LayerNormalization), got {low.opset}")
    if weight is None:
        shape = low.static(low.shape(node.inputs[0])[-ndims:], "LayerNorm's normalized shape")
        weight = low.const(np.ones(shape, dtype=node.inputs[0].dtype.np), "ones")
    return low.emit("LayerNormalization", [x, weight] + ([bias] if bias is not None else []), axis=-int(ndims),
                    epsilon=float(eps))


def _batch_norm_stats(low, node, x):
    """(2, C): each channel's mean and biased variance (ReduceMean over every dim but 1), float32."""
    ndim = len(node.inputs[0].shape)
    if node.inputs[0].dtype.np != np.float64:
        x = low.emit("Cast", [x], to=1)  # FLOAT: statistics are float32, as the op's
    mean_of = _reduce("ReduceMean", 18)
    axes = (0,) + tuple(range(2, ndim))
    mean = mean_of(low, node, x, dims=axes, keepdim=True)
    centred = low.emit("Sub", [x, mean])
    var = mean_of(low, node, low.emit("Mul", [centred, centred]), dims=axes, keepdim=False)
    rows = [low.emit("Reshape", [v, low.ints([1, -1])]) for v in (low.emit("Reshape", [mean, low.ints([-1])]), var)]
    return low.emit("Concat", rows, axis=0)


def _batch_norm(low, node, x, stats, weight, bias, *, eps):
    """BatchNormalization with the batch's own statistics as its mean and variance inputs."""
    mean, var = (low.emit("Gather", [stats, low.const(np.array(i, dtype=np.int64), "row")], axis=0) for i in (0, 1))
    if low.opset < 15:  # before opset 15 every input has X's type
        kind = {np.dtype(np.float16): 10, np.dtype(np.float64): 11}.get(np.dtype(node.inputs[0].dtype.np), 1)
        mean, var, weight, bias = (low.emit("Cast", [v], to=kind) for v in (mean, var, weight, bias))
    return low.emit("BatchNormalization", [x, weight, bias, mean, var], epsilon=float(eps))


def _argsort(low, node, x, *, descending):
    n = low.shape(node.inputs[0])[-1]
    _, indices = low.emit("TopK", [x, low.ints([n], "argsort's length")], outputs=2, axis=-1,
                          largest=int(bool(descending)), sorted=1)
    return indices


def _cumsum(low, node, x):
    if not node.inputs[0].shape:
        return low.emit("Identity", [x])
    return low.emit("CumSum", [x, low.const(np.array(-1, dtype=np.int64), "axis")])


def _cross_entropy(low, node, x, labels, *, ignore_index, smoothing):
    """Per position: -log_softmax(x)[label] over dim 1 (mixed with the mean over classes by
    ``smoothing``), 0 where the label is ``ignore_index``."""
    logp = low.emit("LogSoftmax", [x], axis=1)
    valid = low.emit("Not", [low.emit("Equal", [labels, low.scalar(ignore_index, node.inputs[1])])])
    safe = low.emit("Where", [valid, labels, low.scalar(0, node.inputs[1])])
    picked = low.emit("GatherElements", [logp, low.emit("Unsqueeze", [safe, low.ints([1])])], axis=1)
    loss = low.emit("Neg", [low.emit("Squeeze", [picked, low.ints([1])])])
    if smoothing:
        classes = node.inputs[0].shape[1]
        spread = low.emit("ReduceSum", [logp, low.ints([1])], keepdims=0)
        loss = low.emit("Sub", [low.emit("Mul", [loss, low.scalar(1.0 - smoothing, node.inputs[0])]),
                                low.emit("Mul", [spread, low.scalar(smoothing / classes, node.inputs[0])])])
    return low.emit("Where", [valid, loss, low.scalar(0, node.inputs[0])])


EMITTERS.update({
    R.CROSS_ENTROPY: _cross_entropy,
    R.SUM: _reduce("ReduceSum", 13), R.AMAX: _reduce("ReduceMax", 18), R.AMIN: _reduce("ReduceMin", 18),
    R.PROD: _reduce("ReduceProd", 18), R.ARGMAX: _arg_reduce("ArgMax"), R.ARGMIN: _arg_reduce("ArgMin"),
    R.SOFTMAX: lambda low, node, x, *, dim: low.emit("Softmax", [x], axis=int(dim)),
    R.LOG_SOFTMAX: lambda low, node, x, *, dim: low.emit("LogSoftmax", [x], axis=int(dim)),
    normalization.LAYER_NORM_CORE: _layer_norm, normalization.LAYER_NORM: _layer_norm,
    normalization.BATCH_NORM_STATS: _batch_norm_stats, normalization.BATCH_NORM: _batch_norm,
    sorting.ARGSORT: _argsort, scan.CUMSUM: _cumsum,
})


# -- matmul, convolution, pooling ---------------------------------------------------------
def _conv2d(low, node, x, w, *, stride, padding, dilation, groups):
    top, bottom, left, right = low.static(padding, "conv2d's padding")
    return low.emit("Conv", [x, w], kernel_shape=list(node.inputs[1].shape[2:]), strides=list(stride),
                    pads=[top, left, bottom, right], dilations=list(dilation), group=int(groups))


def _max_pool(low, node, x, source, *, kernel, stride, padding, dilation, out_hw):
    if node.inputs[0] is not node.inputs[1]:
        raise ExportError(f"onnx.export: max_pool2d_select of another tensor's values (a max-pool gradient, "
                          f"{low.traced.where(node)}) is not exported")
    h, w = low.static(low.shape(node.inputs[0])[2:], "max_pool2d's input size")
    (kh, kw), (sh, sw), (top, left), (dh, dw), (ho, wo) = kernel, stride, padding, dilation, out_hw
    # The rows and columns of padding after the input that the last window reaches (ceil_mode
    # makes more windows): with them ONNX's floor rule gives exactly (ho, wo) windows.
    bottom = max(0, (ho - 1) * sh + (kh - 1) * dh + 1 - (h + top))
    right = max(0, (wo - 1) * sw + (kw - 1) * dw + 1 - (w + left))
    return low.emit("MaxPool", [x], kernel_shape=[kh, kw], strides=[sh, sw], pads=[top, left, bottom, right],
                    dilations=[dh, dw])


EMITTERS.update({linalg.MATMUL: _same("MatMul"), conv.CONV2D: _conv2d, pooling.MAX_POOL2D_SELECT: _max_pool})


# -- movement ---------------------------------------------------------------------------
def _reshape(low, node, x, *, shape):
    zero = any(n == 0 for n in shape if not isinstance(n, Size))
    extra = {"allowzero": 1} if zero and low.opset >= 14 else {}  # a 0 in the shape means 0, not "copy"
    return low.emit("Reshape", [x, low.ints(shape, "a reshape's shape", infer_one=True)], **extra)


def _slice(low, node, x, *, slices):
    return _cut(low, x, low.shape(node.inputs[0]), slices)


def _cut(low, x, shape, slices):
    """A Slice over the dims where ``slices`` takes less than all of ``shape``."""
    cut = [(d, s) for d, s in enumerate(slices) if tuple(s) != (0, shape[d], 1)]
    if not cut:
        return low.emit("Identity", [x])
    starts, ends, steps = zip(*(s for _, s in cut))
    return low.emit("Slice", [x, low.ints(starts, "a slice's start"), low.ints(ends, "a slice's stop"),
                              low.ints([d for d, _ in cut]), low.ints(steps)])


def _pads(shape, slices) -> list:
    """Pad's widths that put a block at ``slices`` (unit steps) of ``shape``: the starts, then the rest."""
    slices = list(slices) + [(0, n, 1) for n in shape[len(slices):]]
    return [start for start, _, _ in slices] + [n - stop for n, (_, stop, _) in zip(shape, slices)]


def _unslice(low, node, g, *, shape, slices):
    """Zeros of ``shape`` with g placed at ``slices``: a Pad, for unit steps."""
    if any(step != 1 for _, _, step in slices):
        raise ExportError(f"onnx.export: unslice with a step ({low.traced.where(node)}) is not exported")
    return low.emit("Pad", [g, low.ints(_pads(shape, slices), "a padding")])


def _flip(low, node, x, *, dims):
    k = len(dims)
    return low.emit("Slice", [x, low.ints([-1] * k), low.ints([np.iinfo(np.int64).min] * k),
                              low.ints([int(d) for d in dims]), low.ints([-1] * k)])


EMITTERS.update({
    M.RESHAPE: _reshape, M.SLICE: _slice, M.UNSLICE: _unslice, M.FLIP: _flip,
    M.PERMUTE: lambda low, node, x, *, dims: low.emit("Transpose", [x], perm=[int(d) for d in dims]),
    M.EXPAND: lambda low, node, x, *, shape: low.emit("Expand", [x, low.ints(shape, "an expand's shape")]),
    M.CAT: lambda low, node, *xs, dim: low.emit("Concat", xs, axis=int(dim)),
})


# -- indexing ---------------------------------------------------------------------------
def _needs_opset(low, node, opset, onnx_op):
    if low.opset < opset:
        raise ExportError(f"onnx.export: '{node.op.name}' ({low.traced.where(node)}) needs opset_version >= "
                          f"{opset} ({onnx_op} with reduction='add'), got {low.opset}")


def _scatter_add(low, node, x, index, src, *, dim):
    _needs_opset(low, node, 16, "ScatterElements")
    index_shape, src_shape = low.shape(node.inputs[1]), low.shape(node.inputs[2])
    if tuple(index_shape) != tuple(src_shape):  # torch reads only src's leading corner
        src = _cut(low, src, src_shape, [(0, n, 1) for n in index_shape])
    return low.emit("ScatterElements", [x, index, src], axis=int(dim), reduction="add")


def _index_add(low, node, base, index, src):
    _needs_opset(low, node, 16, "ScatterND")
    positions = low.emit("Unsqueeze", [index, low.ints([-1])])
    return low.emit("ScatterND", [base, positions, src], reduction="add")


def _index_put(low, node, x, value, *positions, key, view=None):
    """``x[key] = value`` out of place. A key of ints and unit-step slices puts the value in
    with Pad and Where (the sizes may follow dynamic axes); any other key writes at positions
    computed here from the key, with ScatterND (its index tensors must be constants)."""
    if I._is_basic(key):
        shape = low.shape(node.inputs[0])
        slices, out_shape = low.traced.follow(
            shape, lambda concrete: I._resolve_key(M.expand(tensor(0.0), concrete), key)[:2],
            f"the key {key!r} of x[key] = value")
        if all(step == 1 for _, _, step in slices):
            slices = list(slices) + [(0, n, 1) for n in shape[len(slices):]]
            block = [stop - start for start, stop, _ in slices]  # out_shape with ints' dims kept, None's dropped
            value = low.emit("Expand", [value, low.ints(out_shape, "the indexed shape")])
            value = low.emit("Reshape", [value, low.ints(block, "the indexed shape")])
            pads = low.ints(_pads(shape, slices), "a padding")
            inside = low.emit("Pad", [low.filled(block, 1, np.uint8), pads])
            placed = low.emit("Pad", [value, pads])
            return low.emit("Where", [low.emit("Cast", [inside], to=9), placed, x])
    return _index_put_at_positions(low, node, x, value, key)


def _index_put_at_positions(low, node, x, value, key):
    shape = low.static(low.shape(node.inputs[0]), "the shape of a tensor written by x[key] = value")
    items = key if isinstance(key, tuple) else (key,)
    constants = {id(v.data) for v in low.traced.graph.values if v.source in ("capture", "const")}
    for item in items:
        if isinstance(item, Tensor) and id(item._data) not in constants:
            raise ExportError(f"onnx.export: x[index] = value with an index tensor computed in forward "
                              f"({low.traced.where(node)}) is not exported; use scatter_add or where")
    cpu_key = tuple(i.cpu() if isinstance(i, Tensor) else i for i in items)
    numbered = tensor(np.arange(int(np.prod(shape)), dtype=np.int64).reshape(shape))
    selected = I.getitem(numbered, cpu_key if isinstance(key, tuple) else cpu_key[0]).numpy()
    flat = low.emit("Reshape", [x, low.ints([-1])])
    updates = low.emit("Expand", [value, low.ints(selected.shape)])
    written = low.emit("ScatterND", [flat, low.const(selected[..., None], "positions"), updates])
    return low.emit("Reshape", [written, low.ints(shape)])


EMITTERS.update({
    I.TAKE: lambda low, node, x, index: low.emit("Gather", [x, index], axis=0),
    I.GATHER: lambda low, node, x, index, *, dim: low.emit("GatherElements", [x, index], axis=int(dim)),
    I.SCATTER_ADD: _scatter_add, I.INDEX_ADD: _index_add, I.INDEX_PUT: _index_put,
})
