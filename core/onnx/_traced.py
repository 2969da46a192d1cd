"""The model's forward as the graph IR ``webgrad.compile`` builds, ready for ONNX lowering.

The model runs once, in eval mode and without autograd, under the graph ``Tracer``
(the one tracer in webgrad: the IR in ``webgrad.graph.ir``). Then the passes that
keep the meaning and help a pure ONNX graph run: dead-code elimination,
functionalization (``h[:, t] = v`` into a tensor made in forward becomes
``index_put``, a new value) and, without dynamic axes, constant folding and common
subexpressions. Module paths for error messages come from the registry's module
ranges, seen by an observer pushed beside the tracer.

Dynamic axes. The IR holds sizes as numbers: a reshape's shape, a slice's stop, a
tensor of zeros made in forward. To learn which of them follow a dynamic axis, the
model is traced again once per dynamic label, with that axis one longer; a number
that changes becomes a ``Size`` of the axis. A graph whose nodes change (a Python
loop over that axis) cannot follow it, and the export says so.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from ..autograd import no_grad
from ..backend import get_backend
from ..dtypes import DType
from ..graph import passes
from ..graph.ir import Graph
from ..graph.trace import Tracer
from ..ops import registry
from ..ops.movement import cat, narrow
from ..tensor import Tensor


class ExportError(RuntimeError):
    """The model uses something the ONNX exporter does not cover."""


@dataclass(frozen=True)
class Size:
    """A number of the graph that follows dynamic axes: ``offset + sum(scale * size(label))``.

    Learned from one trace per label, so it is exact when it follows one label
    (``T - 1``, ``2 * B``); one that follows two (``B * T``) is a product, known only at
    the example sizes (``exact`` is False): a reshape can still leave it to ONNX as -1.
    """
    offset: int
    scales: tuple  # ((label, scale), ...), sorted, none zero

    @property
    def exact(self) -> bool:
        return len(self.scales) == 1

    def _combine(self, other, sign):
        scales = dict(self.scales)
        offset = self.offset
        if isinstance(other, Size):
            for label, scale in other.scales:
                scales[label] = scales.get(label, 0) + sign * scale
            offset += sign * other.offset
        else:
            offset += sign * int(other)
        return size(offset, scales)

    def __add__(self, other):
        return self._combine(other, 1)

    __radd__ = __add__

    def __sub__(self, other):
        return self._combine(other, -1)

    def __rsub__(self, other):
        return size(other, {}) - self

    def __str__(self) -> str:
        text = " + ".join(f"{scale}*{label}" if scale != 1 else label for label, scale in self.scales)
        return f"{text} {'+' if self.offset > 0 else '-'} {abs(self.offset)}" if self.offset else text


def size(offset, scales: dict):
    """A Size, or a plain int when it follows no axis."""
    scales = {k: v for k, v in scales.items() if v}
    return Size(int(offset), tuple(sorted(scales.items()))) if scales else int(offset)


@dataclass
class Traced:
    """A traced forward: the graph, each node's attrs and each value's shape with Sizes
    where they follow dynamic axes, where in the model each node was made."""
    graph: Graph
    attrs: list  # per node of graph.nodes
    shapes: dict  # value id -> shape
    # A constant made in forward whose shape follows a dynamic axis, by value id: ("fill", number)
    # for zeros(batch, n) and the like, ("range", start, step) for arange(time).
    patterns: dict = field(default_factory=dict)
    modules: dict = field(default_factory=dict)  # id(node) -> module path ("" for the model itself)
    model_name: str = "model"
    examples: dict = field(default_factory=dict)  # dynamic label -> its size in the example inputs

    def where(self, node) -> str:
        """'in <module path>, at file:line' for error messages."""
        path = self.modules.get(id(node))
        inside = self.model_name if not path else f"{self.model_name}.{path}"
        return f"in {inside}, at {node.source}" if node.source else f"in {inside}"

    def follow(self, shape, compute, what: str):
        """``compute(shape)`` with the numbers it returns as Sizes where they follow dynamic axes:
        run at the example sizes and at each label one longer, as the traces were."""
        def at(grown):
            return tuple(n if isinstance(n, int) else n.offset + sum(
                scale * (self.examples[label] + (label == grown)) for label, scale in n.scales) for n in shape)
        others = {label: compute(at(label)) for label in self.examples}
        return _Merge(self.examples, {}).combine(compute(at(None)), others, what)


def parameter_names(model) -> dict:
    """id(backend data) -> the parameter's or buffer's name (an exported weight is named after it)."""
    names: dict = {}
    for method in ("named_buffers", "named_parameters"):
        for name, t in getattr(model, method, lambda: ())():
            if t is not None:
                names[id(t._data)] = name
    return names


def flatten_outputs(out) -> list:
    if isinstance(out, Tensor):
        return [out]
    if isinstance(out, (tuple, list)):
        return [t for item in out for t in flatten_outputs(item)]
    if isinstance(out, dict):
        return [t for item in out.values() for t in flatten_outputs(item)]
    raise ExportError(f"onnx.export: the model returned {type(out).__name__}; expected Tensors (or tuples, lists "
                      f"or dicts of them)")


class _ModulePaths(registry.Observer):
    """Notes, as (node count, module path), where each module's nodes start and end: the
    registry reports every module call as a range."""

    def __init__(self, model, tracer):
        named = model.named_modules() if hasattr(model, "named_modules") else ()
        self.paths = {id(module): name for name, module in named}
        self.tracer = tracer
        self.stack: list = []
        self.events: list = []

    def _note(self):
        count = 0 if self.tracer.graph is None else len(self.tracer.graph.nodes)
        self.events.append((count, self.stack[-1] if self.stack else ""))

    def enter(self, kind, name, target, args):
        if kind != "module" or id(target) not in self.paths:
            return False
        self.stack.append(self.paths[id(target)])
        self._note()
        return True

    def exit(self, token, out):
        if token:
            self.stack.pop()
            self._note()

    def of_nodes(self, nodes) -> dict:
        """id(node) -> the path of the innermost module running when the tracer recorded it."""
        modules, path, k = {}, "", 0
        for i, node in enumerate(nodes):
            while k < len(self.events) and self.events[k][0] <= i:
                path = self.events[k][1]
                k += 1
            modules[id(node)] = path
        return modules


def _trace_once(model, args, static=True):
    """Run ``model(*args)`` under the Tracer; returns (graph, outputs, {id(node): module path}).
    ``static``: no dynamic axes. With them constants are not folded (an arange of the length
    exports as a Range, a causal mask folded from two of them could not) and equal nodes are not
    merged (two reshapes, to (batch, 4) and (2, 4), are equal at batch 2 only)."""
    tracer = Tracer(list(args))
    paths = _ModulePaths(model, tracer)
    with no_grad(), registry.observing(paths), tracer:
        outs = flatten_outputs(model(*args))
    try:
        tracer.finish(outs)
    finally:
        tracer.thaw()
    graph = tracer.graph
    if graph is None and args and all(any(o is a for a in args) for o in outs):
        graph = _passthrough(args, outs)  # nn.Identity: no op ran, the tracer made no graph
    elif tracer.broken:
        raise ExportError(f"onnx.export: the forward cannot be traced into a graph: {tracer.broken}")
    modules = paths.of_nodes(graph.nodes)
    passes.eliminate_dead_code(graph)  # first: an unread view would keep a write in place
    passes.functionalize(graph)
    if static:
        passes.fold_constants(graph)
        passes.eliminate_common_subexpressions(graph)
    passes.eliminate_dead_code(graph)
    return graph, outs, modules


def _passthrough(args, outs) -> Graph:
    """The graph of a forward that runs no op and returns some of its inputs."""
    graph = Graph(args[0].device)
    values = [graph.new_value(a.shape, a.dtype, "arg", index=i) for i, a in enumerate(args)]
    graph.outputs.extend(values[next(i for i, a in enumerate(args) if a is o)] for o in outs)
    return graph


def _grown(args, dims):
    """The arguments with each (argument index, dim) in ``dims`` one longer (its first slice repeated)."""
    grown = list(args)
    with no_grad():
        for i, d in dims:
            a = grown[i]
            grown[i] = cat([a, narrow(a, d, 0, 1)], d)
    return grown


def trace(model, args, labels: dict) -> tuple:
    """Trace ``model(*args)``; ``labels`` maps a dynamic label to its [(argument index, dim)].
    Returns (Traced, output tensors)."""
    graph, outs, modules = _trace_once(model, args, static=not labels)
    examples = {}
    for label, dims in labels.items():
        sizes = {args[i].shape[d] for i, d in dims}
        if len(sizes) != 1:
            raise ExportError(f"onnx.export: the inputs' dims named {label!r} in dynamic_axes have different "
                              f"sizes {sorted(sizes)} in the example inputs")
        examples[label] = sizes.pop()
    variants = {label: _trace_once(model, _grown(args, dims), static=False)[0] for label, dims in labels.items()}
    for label, other in variants.items():
        _check_same_nodes(graph, other, label)
    merged = _Merge(examples, variants)
    attrs = [merged.attrs(i, node) for i, node in enumerate(graph.nodes)]
    shapes, patterns = {}, {}
    for v in graph.live_values():
        shapes[v.id] = merged.combine(v.shape, {k: g.values[v.id].shape for k, g in variants.items()},
                                      f"the shape of {v}")
        if v.source == "const" and variants:
            pattern = merged.const(v, {k: g.values[v.id] for k, g in variants.items()}, shapes[v.id], graph.device)
            if pattern is not None:
                patterns[v.id] = pattern
    name = type(model).__name__ if hasattr(model, "named_modules") else getattr(model, "__name__", "model")
    return Traced(graph, attrs, shapes, patterns, modules, name, examples), outs


def _check_same_nodes(graph, other, label):
    def fail(detail):
        raise ExportError(f"onnx.export: the traced graph changes with the size of dynamic axis {label!r} "
                          f"({detail}): the model's Python depends on that size (e.g. a loop over it); export "
                          f"without that axis in dynamic_axes, or with example inputs of size >= 2 on it")
    if len(graph.nodes) != len(other.nodes) or len(graph.values) != len(other.values):
        fail(f"{len(graph.nodes)} nodes at the example size, {len(other.nodes)} one longer")
    for a, b in zip(graph.nodes, other.nodes):
        # By name: each trace makes its input checks' Op records afresh.
        if (a.op.name != b.op.name or [v.id for v in a.inputs] != [v.id for v in b.inputs]
                or (a.output is None) != (b.output is None) or a.output is not None and a.output.id != b.output.id):
            fail(f"'{a.op.name}' at {a.source} became '{b.op.name}' at {b.source}")
    if [v.id for v in graph.outputs] != [v.id for v in other.outputs]:
        fail("the returned values differ")
    for a, b in zip(graph.values, other.values):
        if a.source != b.source:
            fail(f"{a} is a {a.source} at the example size, a {b.source} one longer")


class _Merge:
    """Numbers of the example trace set against the same numbers in each label's trace."""

    def __init__(self, examples: dict, variants: dict):
        self.examples, self.variants = examples, variants

    def attrs(self, i, node) -> dict:
        others = {label: g.nodes[i].attrs for label, g in self.variants.items()}
        return {key: self.combine(value, {label: a[key] for label, a in others.items()},
                                  f"attribute {key}={value!r} of '{node.op.name}' at {node.source}")
                for key, value in node.attrs.items()}

    def combine(self, value, others: dict, what: str):
        """``value`` with each int that changes between the traces replaced by a Size."""
        if isinstance(value, (tuple, list)):
            if any(not isinstance(o, type(value)) or len(o) != len(value) for o in others.values()):
                self._changes(what)
            items = [self.combine(v, {k: o[j] for k, o in others.items()}, what) for j, v in enumerate(value)]
            return type(value)(items)
        if isinstance(value, (int, np.integer)) and not isinstance(value, (bool, np.bool_)):
            scales = {label: int(o) - int(value) for label, o in others.items()}
            offset = int(value) - sum(s * self.examples[label] for label, s in scales.items())
            return size(offset, scales)
        if value is None or isinstance(value, (float, str, bool, slice, DType, type(Ellipsis))):
            if any(o != value for o in others.values()):
                self._changes(what)
        return value  # other objects (tensors in an indexing key) are taken as they are

    def const(self, v, others: dict, shape, device):
        """For a constant made in forward whose shape follows an axis: ("fill", number) when one
        number fills it (``zeros(batch, n)``), ("range", start, step) when it counts
        (``arange(time)``). A constant whose values change otherwise is refused."""
        backend = get_backend(device)
        base = backend.to_numpy(v.data)
        arrays = [base] + [backend.to_numpy(o.data) for o in others.values()]
        if not any(isinstance(s, Size) for s in shape):
            if any(a.shape != base.shape or not np.array_equal(a, base, equal_nan=True) for a in arrays):
                self._changes(f"the values of the constant {v} of shape {base.shape}")
            return None
        first = next((a.reshape(-1)[:2] for a in arrays if a.size >= 2), base.reshape(-1)[:1])
        if first.size and all(np.array_equal(a, np.broadcast_to(first[:1], a.shape), equal_nan=True) for a in arrays):
            return ("fill", first[0])
        if first.size == 2 and all(a.ndim == 1 and np.array_equal(a, first[0] + (first[1] - first[0]) *
                                                                  np.arange(a.size, dtype=a.dtype)) for a in arrays):
            return ("range", first[0], first[1] - first[0])
        self._changes(f"the constant {v} (its shape follows a dynamic axis, and it is neither one number "
                      f"repeated, as zeros or ones are, nor an arange)")

    def _changes(self, what):
        raise ExportError(f"onnx.export: {what} changes with the size of a dynamic axis in a way the exporter "
                          f"cannot follow; export without that axis in dynamic_axes")
