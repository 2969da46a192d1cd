"""Lowering a traced forward to a bundle's buffers and steps (the format: ``webgrad.lite``).

The forward is the graph IR of ``webgrad.compile`` (traced once, in eval mode, by the
shared tracer of ``onnx._traced``, which also learns which sizes follow the batch). Then:

1. Constants fold: a node whose inputs are all parameters or constants, and whose shape
   does not follow the batch (a causal mask, a position embedding's rows), is computed here.
2. Elementwise chains fuse, by the shared pass (``graph.passes.fuse``) under this target's
   rules (``LiteTarget``): each chain becomes one ``elementwise`` step whose WGSL splices the
   ops' own expressions, as compile's fused kernels do.
3. Views (reshape, permute, expand, slice) cost nothing: a value is read as a strided view
   of a buffer (``Ref``), and the step that reads it takes the strides as parameters; a copy
   is made only where a step needs contiguous input.
4. Every other op has a lowering in ``LOWERINGS``; an op without one is an ``ExportError``
   naming it and the module path where it occurs.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from .. import get_backend
from ...graph.passes.fold import _Slot
from ...graph.passes.fuse import FusedOp, chain_record, fuse_elementwise
from ...kernels import Elementwise, Fused
from ...ops.registry import OPS
from ...onnx._traced import ExportError, Size, Traced
from . import kernels
from .dims import Dim, contiguous_strides, dim, product

# Graph dtypes and what a bundle stores them as (int64 indices fit int32, as on WebGPU).
DTYPES = {"float32": "float32", "int64": "int32", "int32": "int32", "bool": "bool"}
# The elementwise ops the bundle's runtimes implement (the WGSL splices each op's own
# expression; /lite.js's CPU path has a function per name in web/lite/cpu.js).
ELEMENTWISE = {"add", "sub", "mul", "div", "neg", "abs", "exp", "expm1", "log", "log1p", "sqrt", "rsqrt", "sin", "cos",
               "tanh", "sigmoid", "erf", "relu", "reciprocal", "floor", "ceil", "round", "sign", "pow", "maximum",
               "minimum", "eq", "ne", "lt", "le", "gt", "ge", "logical_not", "logical_and", "logical_or",
               "where", "cast", "copy", "isnan"}
REDUCTIONS = {"sum", "prod", "amax", "amin", "argmax", "argmin"}
_HOST = {"float32": np.float32, "int32": np.int32, "bool": np.uint32}  # a buffer's values as numpy holds them


def bundle_dtype(dtype, where: str) -> str:
    try:
        return DTYPES[dtype.name]
    except KeyError:
        raise ExportError(f"webgrad.export: {where} is {dtype.name}; a bundle holds float32, int32/int64 and bool "
                          f"tensors (convert the model with .float())") from None


@dataclass(eq=False)
class Buffer:
    """One buffer of the bundle: an input, a weight (or folded constant) or a step's output."""
    id: int
    dtype: str  # float32, int32, bool; int8 for a quantized weight
    shape: tuple  # dims (ints or Dims)
    role: str  # "input", "weight", "step"
    data: np.ndarray | None = None  # weights: the values (float32, or int8 when quantized)
    name: str = ""  # weights: the parameter's name, or const.N
    scale: Buffer | None = None  # an int8 weight: its float32 scale per row (axis 0)


@dataclass
class Ref:
    """How a graph value is read: a strided view of a buffer."""
    buffer: Buffer
    shape: tuple
    strides: tuple
    offset: object = 0

    @property
    def contiguous(self) -> bool:
        return self.offset == 0 and all(n == 1 or s == c for n, s, c in
                                        zip(self.shape, self.strides, contiguous_strides(self.shape))) \
            and product(self.shape) == product(self.buffer.shape)


@dataclass
class Step:
    op: str
    inputs: list  # Buffers
    output: Buffer
    attrs: dict
    wgsl: str
    params: list  # dims, written as u32 for the kernel
    grid: object  # threads to launch (a dim)
    into: bool = False  # writes part of an output an earlier step made (cat)


class LiteTarget:
    """The bundle's answers to the fusion pass's questions (``backend.protocol.Backend``)."""

    def can_fuse(self, node) -> bool:
        return elementwise_ok(node)

    def can_fuse_inputs(self, inputs) -> bool:
        return len(inputs) <= kernels.MAX_INPUTS

    def fused_record(self, nodes) -> tuple:
        return tuple(n.op.impls["wgsl"] for n in nodes)


def elementwise_ok(node) -> bool:
    return (node.op.name in ELEMENTWISE and isinstance(node.op.impls.get("wgsl"), Elementwise)
            and all(v.dtype.name in DTYPES for v in [*node.inputs, node.output]))


@dataclass
class Lowered:
    buffers: list = field(default_factory=list)
    steps: list = field(default_factory=list)
    inputs: list = field(default_factory=list)  # Buffers
    outputs: list = field(default_factory=list)  # Buffers
    ops: set = field(default_factory=set)  # the graph's op names that were lowered
    index_ranges: dict = field(default_factory=dict)  # input buffer id -> rows its values index


class Lowering:
    def __init__(self, traced: Traced, param_names: dict):
        self.traced = traced
        self.param_names = param_names  # id(backend data) -> "fc.weight"
        self.out = Lowered()
        self.refs: dict[int, Ref] = {}
        self.backend = get_backend(traced.graph.device)
        self.quantized: set = set()  # value ids of weights stored as int8 (float16 is bundle.py's encoding)
        self.node = None

    # -- buffers -------------------------------------------------------------------------
    def buffer(self, dtype: str, shape, role: str, data=None, name: str = "") -> Buffer:
        buffer = Buffer(len(self.out.buffers), dtype, tuple(shape), role, data, name)
        self.out.buffers.append(buffer)
        return buffer

    def shape(self, v) -> tuple:
        return tuple(_dim(n) for n in self.traced.shapes[v.id])

    def new(self, v) -> Ref:
        """A step's output buffer for the graph value ``v``."""
        shape = self.shape(v)
        buffer = self.buffer(bundle_dtype(v.dtype, f"{v} ({self.where()})"), shape, "step")
        return Ref(buffer, shape, contiguous_strides(shape))

    def ref(self, v) -> Ref:
        known = self.refs.get(v.id)
        if known is not None:
            return known
        if v.source == "random":
            raise ExportError(f"webgrad.export: the forward draws random numbers ({self.where()}); export in eval "
                              f"mode (dropout draws nothing there) and draw noise outside the model")
        pattern = self.traced.patterns.get(v.id)
        if v.source not in ("capture", "const") or (pattern is not None and pattern[0] != "fill"):
            raise ExportError(f"webgrad.export: {v} ({v.source}, {self.where()}) is a tensor made in forward whose "
                              f"values follow the batch; a bundle cannot make it (export with dynamic_batch=False)")
        dtype = bundle_dtype(v.dtype, f"the tensor {v} ({self.where()})")
        if pattern is not None:  # zeros(batch, n) and the like: one number, read with strides 0
            number = np.array([pattern[1]]).astype(_HOST[dtype])
            shape = self.shape(v)
            ref = self.refs[v.id] = Ref(self.buffer(dtype, (1,), "weight", number, f"const.{v.id}"), shape,
                                        (0,) * len(shape))
            return ref
        array = np.ascontiguousarray(self.backend.to_numpy(v.data)).astype(_HOST[dtype])
        name = self.param_names.get(id(v.data)) or f"const.{v.id}"
        buffer = self.buffer(dtype, array.shape, "weight", array, name)
        if v.id in self.quantized:
            _quantize(buffer, self)
        ref = self.refs[v.id] = Ref(buffer, array.shape, contiguous_strides(array.shape))
        return ref

    def contiguous(self, ref: Ref) -> Ref:
        """``ref`` itself where its elements lie in order from offset 0, else a copy step's output."""
        if ref.contiguous:
            return ref
        buffer = self.buffer(ref.buffer.dtype, ref.shape, "step")
        out = Ref(buffer, ref.shape, contiguous_strides(ref.shape))
        self.elementwise_step([ref], out, None)
        return out

    def where(self) -> str:
        return self.traced.where(self.node) if self.node is not None else "the model's inputs"

    # -- steps ---------------------------------------------------------------------------
    def add_step(self, op, inputs, output, attrs, wgsl, params, grid, into=False):
        self.out.steps.append(Step(op, [r.buffer for r in inputs], output.buffer, attrs, wgsl, list(params), grid,
                                   into))

    def elementwise_step(self, inputs: list, out: Ref, record, into: bool = False):
        """``out`` (a view of its buffer) = the chain ``record`` over ``inputs`` broadcast to out's shape
        (None: a copy of inputs[0])."""
        shape = out.shape
        params: list = [product(shape), out.offset, *out.strides, *shape]
        for ref in inputs:
            params += [ref.offset, *broadcast_strides(ref, shape)]
        program = [] if record is None else [
            [name, [list(a) for a in args], DTYPES[out_dtype], _json_attrs(dict(attrs))]
            for name, args, _, out_dtype, attrs in record.steps]
        wgsl = kernels.elementwise(len(shape), [r.buffer.dtype for r in inputs], out.buffer.dtype, record)
        self.add_step("elementwise", inputs, out, {"shape": list(shape), "program": program}, wgsl, params,
                      product(shape), into)


def _json_attrs(attrs: dict) -> dict:
    out = {}
    for key, value in attrs.items():
        if hasattr(value, "name") and hasattr(value, "np"):  # a dtype (cast)
            value = DTYPES.get(value.name, value.name)
        out[key] = value
    return out


def _dim(n):
    if isinstance(n, Size):
        (label, scale), = n.scales
        return dim(scale, n.offset)
    return int(n)


def broadcast_strides(ref: Ref, shape) -> tuple:
    """``ref``'s strides for reading it broadcast to ``shape`` (right-aligned, 0 where it repeats)."""
    pad = len(shape) - len(ref.shape)
    strides = [0] * pad
    for n, s, m in zip(ref.shape, ref.strides, shape[pad:]):
        strides.append(0 if n == 1 and m != 1 else s)
    return tuple(strides)


def _quantize(buffer: Buffer, low: Lowering) -> None:
    """Per-row (axis 0: a Linear's or a Conv's output channel) symmetric int8, as torch's per-channel
    weight quantization: q = round(w / scale), scale = max|w| / 127 (1 for an all-zero row)."""
    assert buffer.data is not None
    w = buffer.data.reshape(buffer.data.shape[0], -1)
    peak = np.abs(w).max(axis=1)
    scale = np.where(peak > 0, peak / 127.0, 1.0).astype(np.float32)
    buffer.data = np.clip(np.rint(w / scale[:, None]), -127, 127).astype(np.int8).reshape(buffer.data.shape)
    buffer.dtype = "int8"
    buffer.scale = low.buffer("float32", scale.shape, "weight", scale, buffer.name + ".scale")


# -- views -----------------------------------------------------------------------------
def lower_view(low: Lowering, node, attrs) -> Ref:
    ref = low.ref(node.inputs[0])
    name = node.op.name
    shape = low.shape(node.output)
    if name == "permute":
        dims = attrs["dims"]
        return Ref(ref.buffer, shape, tuple(ref.strides[d] for d in dims), ref.offset)
    if name == "expand":
        return Ref(ref.buffer, shape, broadcast_strides(ref, shape), ref.offset)
    if name == "slice":
        return sliced(ref, attrs["slices"], shape)
    # reshape: a view of the elements in order (copied into order first where they are not)
    viewed = _reshaped(ref, shape)
    if viewed is not None:
        return viewed
    flat = low.contiguous(ref)
    return Ref(flat.buffer, shape, contiguous_strides(shape), flat.offset)


def sliced(ref: Ref, slices, shape) -> Ref:
    """``ref``'s leading dims cut by ``slices`` ((start, stop, step) each), as a view of ``shape``."""
    strides, offset = list(ref.strides), ref.offset
    for d, (start, _, step) in enumerate(slices):
        offset = offset + _dim(start) * strides[d]
        strides[d] = strides[d] * step
    return Ref(ref.buffer, shape, tuple(strides), offset)


def _reshaped(ref: Ref, shape):
    """``ref`` read in ``shape`` without a copy, where its elements lie in order."""
    kept = [(n, s) for n, s in zip(ref.shape, ref.strides) if n != 1]
    expected = contiguous_strides(tuple(n for n, _ in kept))
    if any(s != e for (_, s), e in zip(kept, expected)):
        return None
    return Ref(ref.buffer, shape, contiguous_strides(shape), ref.offset)


# -- the other ops ---------------------------------------------------------------------
def lower_matmul(low: Lowering, node, attrs) -> Ref:
    a, b = (low.ref(v) for v in node.inputs)
    out = low.new(node.output)
    _matmul_step(low, a, b, out)
    return out


def _matmul_step(low: Lowering, a: Ref, b: Ref, out: Ref) -> None:
    if len(a.shape) == 1:
        a = Ref(a.buffer, (1, *a.shape), (0, *a.strides), a.offset)
    if len(b.shape) == 1:
        b = Ref(b.buffer, (*b.shape, 1), (*b.strides, 0), b.offset)
    m, k, n = a.shape[-2], a.shape[-1], b.shape[-1]
    batch = _broadcast(a.shape[:-2], b.shape[:-2])
    a_batch = broadcast_strides(Ref(a.buffer, a.shape[:-2], a.strides[:-2]), batch)
    b_batch = broadcast_strides(Ref(b.buffer, b.shape[:-2], b.strides[:-2]), batch)
    total = product(batch) * m * n
    params = [total, m, n, k, *batch, a.offset, *a_batch, a.strides[-2], a.strides[-1],
              b.offset, *b_batch, b.strides[-2], b.strides[-1]]
    inputs = [a, b]
    quantized = _read_weight(b, params, inputs)
    wgsl = kernels.matmul(len(batch), quantized)
    low.add_step("matmul", inputs, out, {"m": m, "n": n, "k": k, "batch": list(batch)}, wgsl, params, total)


def lower_quantized_linear(low: Lowering, node, attrs) -> Ref:
    """A dynamic-quantized Linear (webgrad.ao.quantization) as the bundle's int8 matmul: the weight
    as stored (int8, its scale per row), then the bias. A bundle does not quantize activations, so
    its results differ from the eager layer's by x's rounding to 128 levels there."""
    x = low.ref(node.inputs[0])
    weight, scale, *bias = node.inputs[1:]
    if any(v.source != "capture" for v in (weight, scale)):
        raise ExportError(f"webgrad.export: a quantized Linear's weight is computed in forward ({low.where()}); "
                          f"a bundle stores it as it is")
    q = np.ascontiguousarray(low.backend.to_numpy(weight.data))
    (n, k), name = q.shape, low.param_names.get(id(weight.data)) or f"const.{weight.id}"
    stored = low.buffer("int8", q.shape, "weight", q, name)
    scales = np.broadcast_to(low.backend.to_numpy(scale.data).astype(np.float32), (n,)).copy()
    stored.scale = low.buffer("float32", (n,), "weight", scales, name + ".scale")
    out = low.new(node.output)
    product = Ref(low.buffer("float32", out.shape, "step"), out.shape, out.strides) if bias else out
    _matmul_step(low, x, Ref(stored, (k, n), (1, k)), product)
    if bias:
        add = OPS["add"].impls["wgsl"]
        record = Fused(((("add", (("in", 0), ("in", 1)), ("float32", "float32"), "float32", ())),), 2, (add,))
        low.elementwise_step([product, low.ref(bias[0])], out, record)
    return out


def _read_weight(ref: Ref, params: list, inputs: list) -> bool:
    """Whether the weight operand ``ref`` of a matmul or conv2d is int8: then its scales join the step's
    inputs and its elements per row (a scale's share) its params, as the int8 kernels read them."""
    scale = ref.buffer.scale
    if scale is None:
        return False
    params.append(product(ref.buffer.shape[1:]))
    inputs.append(Ref(scale, scale.shape, (1,)))
    return True


def _broadcast(x, y) -> tuple:
    rank = max(len(x), len(y))
    x, y = (1,) * (rank - len(x)) + tuple(x), (1,) * (rank - len(y)) + tuple(y)
    return tuple(b if a == 1 else a for a, b in zip(x, y))


def lower_conv2d(low: Lowering, node, attrs) -> Ref:
    x = low.contiguous(low.ref(node.inputs[0]))
    w = low.contiguous(low.ref(node.inputs[1]))
    out = low.new(node.output)
    (n, c, h, wd), (o, _, kh, kw), (_, _, ho, wo) = x.shape, w.shape, out.shape
    (sh, sw), (top, _, left, _) = attrs["stride"], attrs["padding"]
    (dh, dw), groups = attrs["dilation"], attrs["groups"]
    total = product(out.shape)
    params = [total, n, c, h, wd, o, ho, wo, kh, kw, sh, sw, top, left, dh, dw, groups, x.offset, w.offset]
    inputs = [x, w]
    quantized = _read_weight(w, params, inputs)
    low.add_step("conv2d", inputs, out, {"stride": list(attrs["stride"]), "padding": [top, left],
                                        "dilation": list(attrs["dilation"]), "groups": groups},
                 kernels.conv2d(quantized), params, total)
    return out


def lower_max_pool(low: Lowering, node, attrs) -> Ref:
    if node.inputs[0] is not node.inputs[1]:
        raise ExportError(f"webgrad.export: 'max_pool2d_select' of one tensor's values at another's maxima "
                          f"({low.where()}) is not lowered; only max pooling is")
    x = low.contiguous(low.ref(node.inputs[0]))
    out = low.new(node.output)
    (n, c, h, w), (_, _, ho, wo) = x.shape, out.shape
    (kh, kw), (sh, sw), (top, left), (dh, dw) = attrs["kernel"], attrs["stride"], attrs["padding"], attrs["dilation"]
    total = product(out.shape)
    params = [total, n * c, h, w, ho, wo, kh, kw, sh, sw, top, left, dh, dw, x.offset]
    low.add_step("max_pool2d", [x], out, {"kernel": [kh, kw], "stride": [sh, sw], "padding": [top, left],
                                         "dilation": [dh, dw]}, kernels.read_kernel("max_pool2d"), params, total)
    return out


def lower_softmax(low: Lowering, node, attrs) -> Ref:
    x = low.contiguous(low.ref(node.inputs[0]))
    out = low.new(node.output)
    d = attrs["dim"] % len(x.shape)
    outer, size, inner = product(x.shape[:d]), x.shape[d], product(x.shape[d + 1:])
    params = [outer * inner, size, inner, x.offset]
    low.add_step(node.op.name, [x], out, {"outer": outer, "n": size, "inner": inner},
                 kernels.read_kernel(node.op.name), params, outer * inner)
    return out


def lower_layer_norm(low: Lowering, node, attrs) -> Ref:
    """layer_norm_core; for layer_norm (with weight and bias) then one elementwise step of
    ``* weight + bias``, so bundles run the kernels they always had."""
    x = low.contiguous(low.ref(node.inputs[0]))
    out = low.new(node.output)
    normalized = out
    if len(node.inputs) == 3:
        normalized = Ref(low.buffer(out.buffer.dtype, out.shape, "step"), out.shape, out.strides)
    ndims = attrs["ndims"]
    rows, size = product(x.shape[:-ndims]), product(x.shape[-ndims:])
    eps_bits = int(np.float32(attrs["eps"]).view(np.uint32))
    low.add_step("layer_norm", [x], normalized, {"rows": rows, "n": size, "eps": float(attrs["eps"])},
                 kernels.read_kernel("layer_norm"), [rows, size, eps_bits, x.offset], rows)
    if len(node.inputs) == 3:
        dtype = node.output.dtype.name
        steps = (("mul", (("in", 0), ("in", 1)), (dtype, dtype), dtype, ()),
                 ("add", (("t", 0), ("in", 2)), (dtype, dtype), dtype, ()))
        affine = Fused(steps, 3, (OPS["mul"].impls["wgsl"], OPS["add"].impls["wgsl"]))
        low.elementwise_step([normalized, low.ref(node.inputs[1]), low.ref(node.inputs[2])], out, affine)
    return out


def lower_reduce(low: Lowering, node, attrs) -> Ref:
    x = low.ref(node.inputs[0])
    out = low.new(node.output)
    reduced = attrs.get("dims", attrs.get("dim"))
    if reduced is None:
        reduced = tuple(range(len(x.shape)))
    elif isinstance(reduced, int):
        reduced = (reduced,)
    _reduce_step(low, node.op.name, x, out, reduced)
    return out


def _reduce_step(low: Lowering, name: str, x: Ref, out: Ref, reduced) -> None:
    kept = [d for d in range(len(x.shape)) if d not in reduced]
    total = product(out.shape)
    kept_shape = [x.shape[d] for d in kept]
    red_shape = [x.shape[d] for d in reduced]
    params = [total, x.offset, *kept_shape, *[x.strides[d] for d in kept], *red_shape,
              *[x.strides[d] for d in reduced]]
    wgsl = kernels.reduce(name, len(kept), len(reduced), x.buffer.dtype, out.buffer.dtype)
    low.add_step("reduce", [x], out, {"op": name, "kept": kept_shape, "reduced": red_shape}, wgsl, params, total)


def _chain(*steps) -> Fused:
    """A float32 elementwise chain of ``(op name, args)`` steps (args as Fused's)."""
    names = tuple(name for name, _ in steps)
    return Fused(tuple((name, args, ("float32",) * len(args), "float32", ()) for name, args in steps),
                 1 + max(k for _, args in steps for kind, k in args if kind == "in"),
                 tuple(OPS[name].impls["wgsl"] for name in names))


def _per_channel(ref: Ref, row: int, ndim: int) -> Ref:
    """Row ``row`` of a (2, C) statistics buffer, shaped (1, C, 1, ...) to broadcast over x's channels."""
    return Ref(ref.buffer, (1, ref.shape[1]) + (1,) * (ndim - 2), (0, ref.strides[1]) + (0,) * (ndim - 2),
               ref.offset + row * ref.strides[0])


def lower_batch_norm_stats(low: Lowering, node, attrs) -> Ref:
    """(2, C): each channel's mean, then its biased variance (the centred squares' mean), as reduce
    and elementwise steps. The count is summed too (ones read with strides 0), so it follows the batch."""
    x = low.ref(node.inputs[0])
    out = low.new(node.output)
    ndim = len(x.shape)
    reduced = (0,) + tuple(range(2, ndim))
    channels = out.shape[1]
    rows = [Ref(out.buffer, (channels,), (out.strides[1],), out.offset + r * out.strides[0]) for r in (0, 1)]
    ones = Ref(low.buffer("float32", (1,), "weight", np.ones(1, np.float32), f"const.ones.{node.output.id}"),
               x.shape, (0,) * ndim)
    counts, sums, squared_sums = (Ref(low.buffer("float32", (channels,), "step"), (channels,), (1,)) for _ in range(3))
    divided = _chain(("div", (("in", 0), ("in", 1))))
    _reduce_step(low, "sum", ones, counts, reduced)
    _reduce_step(low, "sum", x, sums, reduced)
    low.elementwise_step([sums, counts], rows[0], divided)  # makes out; row 1 is written into it
    squares = Ref(low.buffer("float32", x.shape, "step"), x.shape, contiguous_strides(x.shape))
    centred = _chain(("sub", (("in", 0), ("in", 1))), ("mul", (("t", 0), ("t", 0))))
    low.elementwise_step([x, _per_channel(out, 0, ndim)], squares, centred)
    _reduce_step(low, "sum", squares, squared_sums, reduced)
    low.elementwise_step([squared_sums, counts], rows[1], divided, into=True)
    return out


def lower_batch_norm(low: Lowering, node, attrs) -> Ref:
    """(x - mean) * rsqrt(var + eps) * weight + bias: one elementwise step over the statistics' rows."""
    x, stats, weight, bias = (low.ref(v) for v in node.inputs)
    out = low.new(node.output)
    ndim = len(x.shape)
    shape = (1, stats.shape[1]) + (1,) * (ndim - 2)
    eps = Ref(low.buffer("float32", (1,), "weight", np.array([attrs["eps"]], np.float32),
                         f"const.eps.{node.output.id}"), (1,), (0,))
    chain = _chain(("sub", (("in", 0), ("in", 1))), ("add", (("in", 2), ("in", 3))), ("rsqrt", (("t", 1),)),
                   ("mul", (("t", 0), ("t", 2))), ("mul", (("t", 3), ("in", 4))), ("add", (("t", 4), ("in", 5))))
    low.elementwise_step([x, _per_channel(stats, 0, ndim), _per_channel(stats, 1, ndim), eps,
                          _reshaped(low.contiguous(weight), shape), _reshaped(low.contiguous(bias), shape)], out, chain)
    return out


def lower_take(low: Lowering, node, attrs) -> Ref:
    table = low.contiguous(low.ref(node.inputs[0]))
    index = low.contiguous(low.ref(node.inputs[1]))
    out = low.new(node.output)
    rows, inner = table.shape[0], product(table.shape[1:])
    total = product(out.shape)
    if index.buffer.role == "input":  # the runtimes check a user's indices before running
        low.out.index_ranges[index.buffer.id] = min(rows, low.out.index_ranges.get(index.buffer.id, rows))
    params = [total, rows, inner, table.offset, index.offset]
    low.add_step("take", [table, index], out, {"rows": rows, "inner": inner},
                 kernels.take(table.buffer.dtype), params, total)
    return out


def lower_cat(low: Lowering, node, attrs) -> Ref:
    out = low.new(node.output)
    d = attrs["dim"]
    start: object = 0
    for v in node.inputs:
        ref = low.ref(v)
        part = Ref(out.buffer, ref.shape, out.strides, start * out.strides[d])
        low.elementwise_step([ref], part, None, into=start != 0)
        start = start + ref.shape[d]
    return out


def lower_unslice(low: Lowering, node, attrs) -> Ref:
    """Zeros of the output's shape (one zero read with strides 0), then the input into its slices."""
    out = low.new(node.output)
    dtype = out.buffer.dtype
    zero = low.buffer(dtype, (1,), "weight", np.zeros(1, _HOST[dtype]), f"const.zero{out.buffer.id}")
    low.elementwise_step([Ref(zero, out.shape, (0,) * len(out.shape))], out, None)
    part = sliced(out, attrs["slices"], low.shape(node.inputs[0]))
    low.elementwise_step([low.ref(node.inputs[0])], part, None, into=True)
    return out


def lower_elementwise(low: Lowering, node, attrs) -> Ref:
    out = low.new(node.output)
    inputs = [low.ref(v) for v in node.inputs]
    record = node.op.impls["wgsl"] if isinstance(node.op, FusedOp) else chain_record([node], node.inputs,
                                                                                       LiteTarget())
    low.elementwise_step(inputs, out, record)
    return out


LOWERINGS = {
    "matmul": lower_matmul, "quantized_linear": lower_quantized_linear, "conv2d": lower_conv2d,
    "max_pool2d_select": lower_max_pool,
    "softmax": lower_softmax, "log_softmax": lower_softmax, "layer_norm_core": lower_layer_norm,
    "layer_norm": lower_layer_norm, "batch_norm_stats": lower_batch_norm_stats, "batch_norm": lower_batch_norm,
    "take": lower_take, "cat": lower_cat, "unslice": lower_unslice, **dict.fromkeys(REDUCTIONS, lower_reduce),
    **dict.fromkeys(("permute", "expand", "slice", "reshape"), lower_view),
}


def lowers(node) -> bool:
    return node.op.name in LOWERINGS or isinstance(node.op, FusedOp) or elementwise_ok(node)


# -- the whole graph -------------------------------------------------------------------
def fold(traced: Traced) -> None:
    """Compute here each node whose inputs are all parameters or constants and whose shape does not
    follow the batch; views of parameters stay views (a weight read transposed is read so)."""
    graph, backend = traced.graph, get_backend(traced.graph.device)
    kept = []
    for node in graph.nodes:
        static = node.output is not None and not any(isinstance(n, Size) for n in traced.shapes[node.output.id])
        if (static and node.inputs and all(v.source in ("capture", "const") and v.id not in traced.patterns
                                           for v in node.inputs)
                and not (node.op.kind == "view" and any(v.source == "capture" for v in node.inputs))):
            out = node.output
            out.data = backend.run(node.op, [_Slot(v.data) for v in node.inputs], node.attrs, out.shape, out.dtype)
            out.source = "const"
            continue
        kept.append(node)
    graph.nodes = kept


def _weight_uses(graph) -> dict:
    """For each parameter or constant (by value id): how it is read, through views, as
    (op name, operand index) pairs; a value read by a view that reaches no op is read ("view", 0)."""
    base: dict = {}
    uses: dict = {}
    for node in graph.nodes:
        for i, v in enumerate(node.inputs):
            root = base.get(v.id, v.id if v.source in ("capture", "const") else None)
            if root is None:
                continue
            if node.op.kind == "view" and node.output is not None:
                base[node.output.id] = root
            else:
                uses.setdefault(root, []).append((node.op.name, i))
    for v in graph.outputs:
        if v.id in base:
            uses.setdefault(base[v.id], []).append(("output", 0))
    return uses


def lower(traced: Traced, param_names: dict, weights: str) -> Lowered:
    graph = traced.graph
    node_attrs = {id(n): a for n, a in zip(graph.nodes, traced.attrs)}  # attrs with Sizes, before passes
    fold(traced)
    fuse_elementwise(graph, LiteTarget())
    missing: dict = {}
    for node in graph.nodes:
        if node.output is not None and not lowers(node):
            missing.setdefault(node.op.name, traced.where(node))
    if missing:
        listed = "; ".join(f"'{name}' ({where})" for name, where in missing.items())
        raise ExportError(f"webgrad.export: {listed}: an op the web bundle does not lower yet; rewrite that part "
                          f"with lowered ops, or embed the model with the Python runtime (the widget's fallback)")
    low = Lowering(traced, param_names)
    if weights == "int8":
        for vid, uses in _weight_uses(graph).items():
            v = graph.values[vid]
            if (v.dtype.name == "float32" and len(v.shape) >= 2 and v.source == "capture"
                    and all(use in (("matmul", 1), ("conv2d", 1)) for use in uses)):
                low.quantized.add(vid)
    for v in sorted((v for v in graph.values if v.source == "arg"), key=lambda v: v.index):
        shape = low.shape(v)
        buffer = low.buffer(bundle_dtype(v.dtype, f"input {v.index}"), shape, "input")
        low.refs[v.id] = Ref(buffer, shape, contiguous_strides(shape))
        low.out.inputs.append(buffer)
    for node in graph.nodes:
        low.node = node
        if node.inplace:
            if node.op.mutates == 0:
                continue  # an input check: the runtimes check inputs against the bundle's shapes
            raise ExportError(f"webgrad.export: '{node.op.name}' ({traced.where(node)}) writes in place into a "
                              f"tensor the caller sees; use the out-of-place form (y = x.clone(); y[...] = v)")
        lowering = LOWERINGS.get(node.op.name, lower_elementwise)
        low.out.ops.add(node.label())
        low.refs[node.output.id] = lowering(low, node, node_attrs.get(id(node), node.attrs))
    low.node = None
    for v in graph.outputs:
        ref = low.ref(v)
        if (ref.buffer.role != "step" or not ref.contiguous or ref.shape != ref.buffer.shape
                or ref.buffer in low.out.outputs):
            ref = _copied(low, ref)  # outputs are buffers of their own, in order
        low.out.outputs.append(ref.buffer)
    return low.out


def _copied(low: Lowering, ref: Ref) -> Ref:
    buffer = low.buffer(ref.buffer.dtype, ref.shape, "step")
    out = Ref(buffer, ref.shape, contiguous_strides(ref.shape))
    low.elementwise_step([ref], out, None)
    return out


__all__ = ["Buffer", "Dim", "Lowered", "Step", "lower", "LOWERINGS", "ELEMENTWISE"]
