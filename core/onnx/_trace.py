"""The tracer behind ``webgrad.onnx.export``: run the model once and write an ONNX node for each layer and
function call it makes.

Layers of known types (Linear, Conv2d, pooling, norms, Embedding, activations...)
become one ONNX node each, whatever ops they run inside; calls of webgrad functions
(``F.relu``, ``x.view``, ``+``, ``torch.flatten``, ``torch.cat``...) made between layers
become nodes too. The inputs are traced with ``requires_grad``, so every tensor
derived from them carries an autograd node: a value computed by anything the tracer
does not cover is noticed where it is used (or returned), and the export stops with an
error naming that op rather than writing a wrong graph.
"""
from __future__ import annotations

import math

import numpy as np

from ..nn import modules as M
from ..tensor import Tensor


class ExportError(RuntimeError):
    """The model uses something the ONNX exporter does not cover."""


_ELEM = {"float32": 1, "int32": 6, "int64": 7, "bool": 9, "float64": 11}


def elem_type(dtype) -> int:
    if dtype.name not in _ELEM:
        raise ExportError(f"onnx.export: dtype {dtype.name} has no ONNX mapping here; use float32 or int64")
    return _ELEM[dtype.name]


class Tracer:
    def __init__(self, helper, numpy_helper, opset: int):
        self.helper, self.numpy_helper, self.opset = helper, numpy_helper, opset
        self.names: dict[int, str] = {}
        self.alive: list = []  # keeps traced tensors alive, so their ids stay unique
        self.nodes: list = []
        self.initializers: list = []
        self.depth = 0
        self.counter = 0

    # -- values ---------------------------------------------------------------------------------------------
    def fresh(self, base: str) -> str:
        self.counter += 1
        return f"{base}_{self.counter}"

    def bind(self, tensor, name: str) -> str:
        self.names[id(tensor)] = name
        self.alive.append(tensor)
        return name

    def constant(self, array, base="const") -> str:
        name = self.fresh(base)
        self.initializers.append(self.numpy_helper.from_array(np.ascontiguousarray(array), name))
        return name

    def name_of(self, value, like=None) -> str:
        """The ONNX name of a traced tensor; a parameter, buffer or number becomes an initializer."""
        if isinstance(value, Tensor):
            if id(value) in self.names:
                return self.names[id(value)]
            if value.grad_fn is not None:
                op = getattr(getattr(value.grad_fn, "op", None), "name", type(value.grad_fn).__name__)
                raise ExportError(f"onnx.export: a value of shape {tuple(value.shape)} was computed by '{op}', "
                                  f"which the ONNX exporter does not cover (it records layers such as Linear, "
                                  f"Conv2d, BatchNorm and calls such as F.relu, view, +, cat); rewrite that "
                                  f"part with covered layers or functions")
            return self.constant(value.detach().cpu().numpy())
        dtype = np.float32 if like is None or like.dtype.is_floating_point else np.int64
        return self.constant(np.array(value, dtype=dtype), "scalar")

    def traced(self, value) -> bool:
        return isinstance(value, Tensor) and (id(value) in self.names or value.grad_fn is not None)

    def node(self, op: str, inputs, out, **attrs) -> None:
        output = self.bind(out, self.fresh(op.lower()))
        self.nodes.append(self.helper.make_node(op, inputs, [output], name=output, **attrs))

    def chain(self, op: str, inputs, **attrs) -> str:
        """A node whose output is an intermediate (no tensor of its own)."""
        output = self.fresh(op.lower())
        self.nodes.append(self.helper.make_node(op, inputs, [output], name=output, **attrs))
        return output


# -- layers ----------------------------------------------------------------------------------------------------

def _pair(v):
    return tuple(v) if isinstance(v, (tuple, list)) else (v, v)


def _linear(t, m, x, out):
    y = t.chain("MatMul", [t.name_of(x), t.constant(m.weight.detach().cpu().numpy().T, "weight_t")])
    if m.bias is None:
        t.node("Identity", [y], out)
    else:
        t.node("Add", [y, t.name_of(m.bias)], out)


def _conv(t, m, x, out):
    if getattr(m, "padding_mode", "zeros") != "zeros":
        raise ExportError(f"onnx.export: Conv padding_mode={m.padding_mode!r} is not exported; use 'zeros'")
    dims = m.weight.ndim - 2
    if isinstance(m.padding, str):
        if m.padding != "valid":
            raise ExportError("onnx.export: Conv padding='same' is not exported; give the padding as numbers")
        pads = [0] * 2 * dims
    else:
        p = tuple(m.padding) if isinstance(m.padding, (tuple, list)) else (m.padding,) * dims
        pads = list(p) * 2
    as_tuple = (lambda v: tuple(v) if isinstance(v, (tuple, list)) else (v,) * dims)
    inputs = [t.name_of(x), t.name_of(m.weight)] + ([t.name_of(m.bias)] if m.bias is not None else [])
    t.node("Conv", inputs, out, kernel_shape=list(m.weight.shape[2:]), strides=list(as_tuple(m.stride)),
           pads=pads, dilations=list(as_tuple(m.dilation)), group=m.groups)


def _max_pool(t, m, x, out):
    k, s = _pair(m.kernel_size), _pair(m.stride if m.stride is not None else m.kernel_size)
    p, d = _pair(m.padding), _pair(getattr(m, "dilation", 1))
    if getattr(m, "return_indices", False):
        raise ExportError("onnx.export: MaxPool2d(return_indices=True) is not exported")
    t.node("MaxPool", [t.name_of(x)], out, kernel_shape=list(k), strides=list(s), pads=list(p) * 2,
           dilations=list(d), ceil_mode=int(bool(getattr(m, "ceil_mode", False))))


def _avg_pool(t, m, x, out):
    k, s = _pair(m.kernel_size), _pair(m.stride if m.stride is not None else m.kernel_size)
    p = _pair(m.padding)
    if getattr(m, "divisor_override", None) is not None:
        raise ExportError("onnx.export: AvgPool2d(divisor_override=...) is not exported")
    t.node("AveragePool", [t.name_of(x)], out, kernel_shape=list(k), strides=list(s), pads=list(p) * 2,
           ceil_mode=int(bool(getattr(m, "ceil_mode", False))),
           count_include_pad=int(bool(getattr(m, "count_include_pad", True))))


def _adaptive_avg_pool(t, m, x, out):
    if tuple(out.shape[2:]) != (1, 1):
        raise ExportError(f"onnx.export: AdaptiveAvgPool2d is exported only for output size 1 (global average "
                          f"pooling), got output {tuple(out.shape)}")
    t.node("GlobalAveragePool", [t.name_of(x)], out)


def _batch_norm(t, m, x, out):
    if m.running_mean is None:
        raise ExportError("onnx.export: BatchNorm with track_running_stats=False is not exported")
    c = m.num_features
    scale = m.weight if m.weight is not None else np.ones(c, np.float32)
    bias = m.bias if m.bias is not None else np.zeros(c, np.float32)
    names = [t.name_of(x)] + [t.name_of(v) if isinstance(v, Tensor) else t.constant(v)
                              for v in (scale, bias, m.running_mean, m.running_var)]
    t.node("BatchNormalization", names, out, epsilon=float(m.eps))


def _layer_norm(t, m, x, out):
    if t.opset < 17:
        raise ExportError(f"onnx.export: LayerNorm needs opset_version >= 17 (LayerNormalization), got {t.opset}")
    shape = tuple(m.normalized_shape)
    weight = m.weight if m.weight is not None else np.ones(shape, np.float32)
    inputs = [t.name_of(x), t.name_of(weight) if isinstance(weight, Tensor) else t.constant(weight)]
    if getattr(m, "bias", None) is not None:
        inputs.append(t.name_of(m.bias))
    t.node("LayerNormalization", inputs, out, axis=-len(shape), epsilon=float(m.eps))


def _embedding(t, m, x, out):
    if m.max_norm is not None:
        raise ExportError("onnx.export: Embedding(max_norm=...) is not exported")
    t.node("Gather", [t.name_of(m.weight), t.name_of(x)], out, axis=0)


def _gelu(t, x, out, approximate="none"):
    if t.opset >= 20:
        t.node("Gelu", [t.name_of(x)], out, approximate=approximate)
        return
    if approximate != "none":
        raise ExportError("onnx.export: GELU(approximate='tanh') needs opset_version >= 20")
    name = t.name_of(x)  # 0.5 x (1 + erf(x / sqrt 2))
    erf = t.chain("Erf", [t.chain("Mul", [name, t.constant(np.float32(1 / math.sqrt(2)))])])
    half_x = t.chain("Mul", [name, t.constant(np.float32(0.5))])
    t.node("Mul", [half_x, t.chain("Add", [erf, t.constant(np.float32(1.0))])], out)


def _softmax_node(op):
    def emit(t, x, out, dim):
        t.node(op, [t.name_of(x)], out, axis=dim if dim >= 0 else dim + x.ndim)
    return emit


LAYERS = {
    M.Linear: _linear, M.Conv1d: _conv, M.Conv2d: _conv, M.MaxPool2d: _max_pool, M.AvgPool2d: _avg_pool,
    M.AdaptiveAvgPool2d: _adaptive_avg_pool, M.BatchNorm1d: _batch_norm, M.BatchNorm2d: _batch_norm,
    M.LayerNorm: _layer_norm, M.Embedding: _embedding,
    M.ReLU: lambda t, m, x, out: t.node("Relu", [t.name_of(x)], out),
    M.Sigmoid: lambda t, m, x, out: t.node("Sigmoid", [t.name_of(x)], out),
    M.Tanh: lambda t, m, x, out: t.node("Tanh", [t.name_of(x)], out),
    M.LeakyReLU: lambda t, m, x, out: t.node("LeakyRelu", [t.name_of(x)], out, alpha=float(m.negative_slope)),
    M.GELU: lambda t, m, x, out: _gelu(t, x, out, m.approximate),
    M.Softmax: lambda t, m, x, out: _softmax_node("Softmax")(t, x, out, m.dim),
    M.LogSoftmax: lambda t, m, x, out: _softmax_node("LogSoftmax")(t, x, out, m.dim),
    M.Dropout: lambda t, m, x, out: t.node("Identity", [t.name_of(x)], out),
    M.Identity: lambda t, m, x, out: t.node("Identity", [t.name_of(x)], out),
    M.Flatten: lambda t, m, x, out: _reshape(t, x, out),
}


# -- functions -------------------------------------------------------------------------------------------------

def _reshape(t, x, out):
    """Reshape to ``out``'s shape, copying dim 0 (the batch) from the input so a dynamic batch still works."""
    shape = list(out.shape)
    if shape and x.ndim and shape[0] == x.shape[0]:
        shape[0] = 0
        if shape.count(-1) == 0 and len(shape) > 1:
            shape[-1] = -1
    t.node("Reshape", [t.name_of(x), t.constant(np.array(shape, np.int64), "shape")], out)


def _binary(op):
    def emit(t, args, kwargs, out):
        x, y = args[0], args[1]
        like = x if isinstance(x, Tensor) else y
        t.node(op, [t.name_of(x, like), t.name_of(y, like)], out)
    return emit


def _unary(op):
    return lambda t, args, kwargs, out: t.node(op, [t.name_of(args[0])], out)


def _dim_arg(args, kwargs, position, default=None):
    return kwargs.get("dim", args[position] if len(args) > position else default)


FUNCTIONS = {
    "relu": _unary("Relu"), "sigmoid": _unary("Sigmoid"), "tanh": _unary("Tanh"), "exp": _unary("Exp"),
    "neg": _unary("Neg"), "sqrt": _unary("Sqrt"),
    "gelu": lambda t, a, k, out: _gelu(t, a[0], out, k.get("approximate", a[1] if len(a) > 1 else "none")),
    "softmax": lambda t, a, k, out: _softmax_node("Softmax")(t, a[0], out, _dim_arg(a, k, 1)),
    "log_softmax": lambda t, a, k, out: _softmax_node("LogSoftmax")(t, a[0], out, _dim_arg(a, k, 1)),
    "add": _binary("Add"), "sub": _binary("Sub"), "mul": _binary("Mul"), "div": _binary("Div"),
    "matmul": _binary("MatMul"),
    "reshape": lambda t, a, k, out: _reshape(t, a[0], out),
    "flatten": lambda t, a, k, out: _reshape(t, a[0], out),
    "permute": lambda t, a, k, out: t.node("Transpose", [t.name_of(a[0])], out, perm=_perm(a)),
    "transpose": lambda t, a, k, out: t.node("Transpose", [t.name_of(a[0])], out, perm=_swap(a)),
    "cat": lambda t, a, k, out: t.node("Concat", [t.name_of(v) for v in a[0]], out,
                                       axis=_dim_arg(a, k, 1, 0) % out.ndim),
}


def _perm(args):
    dims = args[1:] if len(args) > 2 or not isinstance(args[1], (tuple, list)) else args[1]
    return [d % args[0].ndim for d in dims]


def _swap(args):
    x, a, b = args[0], args[1] % args[0].ndim, args[2] % args[0].ndim
    perm = list(range(x.ndim))
    perm[a], perm[b] = perm[b], perm[a]
    return perm

