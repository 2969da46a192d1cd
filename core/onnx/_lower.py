"""Lowering a traced graph to ONNX: each node goes through its op's emitter (``_emitters.EMITTERS``).

Arguments become the graph's inputs, captured tensors (parameters, buffers) and
constants become initializers (named after the parameter where there is one), and
each functional node becomes the ONNX nodes its emitter writes. A number that
follows a dynamic axis (a ``Size``) is computed in the graph from the input's shape.
"""
from __future__ import annotations

import numpy as np

from ..backend import get_backend
from ._emitters import EMITTERS, elem_type
from ._traced import ExportError, Size, Traced


class Lowering:
    """The ONNX graph being written: emitters call ``emit``, ``const``, ``ints`` and ``value``."""

    def __init__(self, traced: Traced, helper, numpy_helper, opset: int, axes: dict, param_names: dict):
        self.traced, self.helper, self.numpy_helper, self.opset = traced, helper, numpy_helper, opset
        self.axes = axes  # label -> (input name, dim): where its size is read at run time
        self.param_names = param_names  # id(backend data) -> "fc.weight"
        self.nodes: list = []
        self.initializers: list = []
        self.names: dict[int, str] = {}  # value id -> ONNX name
        self.cached: dict = {}  # constant vectors and label sizes, made once
        self.counter = 0

    # -- names --------------------------------------------------------------------------
    def fresh(self, base: str) -> str:
        self.counter += 1
        return f"{base}_{self.counter}"

    def emit(self, op_type: str, inputs, outputs: int = 1, **attrs):
        """Add one ONNX node; returns its output name (a list of them when ``outputs`` > 1)."""
        names = [self.fresh(op_type.lower()) for _ in range(outputs)]
        self.nodes.append(self.helper.make_node(op_type, list(inputs), names, name=names[0], **attrs))
        return names[0] if outputs == 1 else names

    def const(self, array, base: str = "const") -> str:
        # np.array, not np.ascontiguousarray: that one makes a 0-d array 1-d
        name = self.fresh(base)
        self.initializers.append(self.numpy_helper.from_array(np.array(array, order="C"), name))
        return name

    def scalar(self, number, like) -> str:
        """A 0-d initializer of ``like``'s dtype (a Value), e.g. the 1 of log1p."""
        key = ("scalar", number, like.dtype.name)
        if key not in self.cached:
            self.cached[key] = self.const(np.array(number, dtype=like.dtype.np), "scalar")
        return self.cached[key]

    def value(self, v) -> str:
        """The ONNX name of a graph value: arguments are bound by ``export``, node outputs by
        their emitters; a captured tensor or a constant becomes an initializer here."""
        name = self.names.get(v.id)
        if name is not None:
            return name
        if v.source == "random":
            raise ExportError(f"onnx.export: the forward draws random numbers ({v}: {v.type_str()}), which an "
                              f"exported graph cannot repeat; export in eval mode (dropout draws nothing there) "
                              f"and draw noise outside the model")
        if v.source not in ("capture", "const"):
            raise ExportError(f"onnx.export: {v} ({v.source}) has no ONNX name (an exporter bug)")
        elem_type(v.dtype)
        if v.dtype.name == "bfloat16":
            raise ExportError("onnx.export: bfloat16 tensors are not exported; convert the model with .float()")
        pattern = self.traced.patterns.get(v.id)  # made in forward, its shape follows a dynamic axis
        if pattern is not None and pattern[0] == "fill":  # zeros(batch, n)
            name = self.filled(self.shape(v), pattern[1], v.dtype.np, f"the shape of {v}")
        elif pattern is not None:  # arange(time): start + step * Range(0, n)
            count = self.emit("Reshape", [self.ints(self.shape(v), f"the length of {v}"), self.ints([])])
            name = self.emit("Range", [self.const(np.array(0, np.int64)), count, self.const(np.array(1, np.int64))])
            if v.dtype.name != "int64":
                name = self.emit("Cast", [name], to=elem_type(v.dtype))
            if pattern[2] != 1:
                name = self.emit("Mul", [name, self.scalar(pattern[2], v)])
            if pattern[1] != 0:
                name = self.emit("Add", [name, self.scalar(pattern[1], v)])
        else:
            array = get_backend(self.traced.graph.device).to_numpy(v.data)
            base = self.param_names.get(id(v.data))
            if base is not None:  # each parameter's data is one value of the graph: one initializer
                name = base
                self.initializers.append(self.numpy_helper.from_array(np.array(array, order="C"), name))
            else:
                name = self.const(array, "const")
        self.names[v.id] = name
        return name

    def filled(self, shape, number, np_dtype, what: str = "a shape") -> str:
        """A tensor of ``shape`` (Sizes allowed) holding ``number`` everywhere."""
        value = self.numpy_helper.from_array(np.array([number], dtype=np_dtype), "value")
        return self.emit("ConstantOfShape", [self.ints(shape, what)], value=value)

    def shape(self, v) -> tuple:
        """A value's shape, with Sizes where it follows dynamic axes."""
        return self.traced.shapes[v.id]

    # -- integer vectors (shapes, slice bounds) -------------------------------------------
    def static(self, numbers, what: str) -> list:
        """Plain ints, or an error naming ``what`` where one follows a dynamic axis."""
        numbers = list(numbers)
        for n in numbers:
            if isinstance(n, Size):
                raise ExportError(f"onnx.export: {what} follows a dynamic axis ({n}) where the ONNX op needs a "
                                  f"fixed number; export without that axis in dynamic_axes")
        return [int(n) for n in numbers]

    def label_size(self, label) -> str:
        """An int64[1] tensor holding the size of a dynamic axis, read from an input's shape."""
        key = ("label", label)
        if key not in self.cached:
            name, dim = self.axes[label]
            shape = self.emit("Shape", [name])
            self.cached[key] = self.emit("Gather", [shape, self.ints([dim])], axis=0)
        return self.cached[key]

    def ints(self, numbers, what: str = "a size", infer_one: bool = False) -> str:
        """An int64 vector of ``numbers``: an initializer when all are plain ints, else computed
        from the inputs' shapes. ``infer_one``: one inexact Size may become -1 (a Reshape infers it)."""
        numbers = list(numbers)
        inexact = [n for n in numbers if isinstance(n, Size) and not n.exact]
        if len(inexact) > int(infer_one):
            raise ExportError(f"onnx.export: {what} ({', '.join(str(n) for n in numbers)}) multiplies sizes of "
                              f"several dynamic axes; export with fewer dynamic axes")
        if not any(isinstance(n, Size) for n in numbers):
            key = ("ints", tuple(int(n) for n in numbers))
            if key not in self.cached:
                self.cached[key] = self.const(np.array(key[1], dtype=np.int64), "ints")
            return self.cached[key]
        pieces, run = [], []
        for n in numbers:
            if not isinstance(n, Size):
                run.append(int(n))
                continue
            if run:
                pieces.append(self.ints(run))
                run = []
            if not n.exact:
                pieces.append(self.ints([-1]))
                continue
            (label, scale), = n.scales
            piece = self.label_size(label)
            if scale != 1:
                piece = self.emit("Mul", [piece, self.ints([scale])])
            if n.offset:
                piece = self.emit("Add", [piece, self.ints([n.offset])])
            pieces.append(piece)
        if run:
            pieces.append(self.ints(run))
        return pieces[0] if len(pieces) == 1 else self.emit("Concat", pieces, axis=0)


def lower(traced: Traced, low: Lowering) -> None:
    """Emit every node of the traced graph through its op's emitter."""
    graph = traced.graph
    missing: dict[str, str] = {}  # op name -> where it first occurs
    for node in graph.nodes:
        if node.output is not None and node.op not in EMITTERS:
            missing.setdefault(node.op.name, traced.where(node))
    if missing:
        listed = "; ".join(f"'{name}' ({where})" for name, where in missing.items())
        raise ExportError(f"onnx.export: {listed}: an op the ONNX exporter does not cover (no emitter in "
                          f"webgrad/onnx/_emitters.py); rewrite that part with covered ops")
    for node, attrs in zip(graph.nodes, traced.attrs):
        if node.inplace:
            if node.op.mutates == 0:
                continue  # an input check (it writes nothing): ONNX has no run-time checks
            # Functionalization made new values of the writes it could: this one reaches memory
            # the caller sees, or memory another tensor shares.
            what = {"arg": "a model input", "capture": "a tensor from outside forward (a parameter or buffer)"}
            written = node.inputs[0]
            raise ExportError(f"onnx.export: '{node.op.name}' ({traced.where(node)}) writes in place into "
                              f"{what.get(written.source, 'a view of another tensor')}; an ONNX graph has no "
                              f"in-place writes: use the out-of-place form (y = x.clone(); y[...] = v)")
        inputs = [low.value(v) for v in node.inputs]
        low.names[node.output.id] = EMITTERS[node.op](low, node, *inputs, **attrs)
