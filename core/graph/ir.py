"""The graph IR that ``webgrad.compile`` traces into: plain data, printed like a jaxpr.

A graph is a list of values and a list of nodes in execution order.

- A *value* (``%3``) is one tensor: its shape, dtype and where it comes from.
  Sources: ``arg`` (the i-th tensor among the function's arguments), ``capture``
  (a tensor that existed outside the trace: a parameter, optimizer state, a
  constant; bound by reference), ``const`` (a tensor made inside the trace and
  dropped after it, e.g. the backward seed; its data is kept), ``random`` (drawn
  again at every replay, never reusing the traced numbers) or ``node`` (made by
  a node).
- A *node* applies one ``defop`` record (``webgrad.ops.registry.Op``; the op's
  declaration stays the single source of truth for its rules and kernels) to
  values, with the call's attrs. A functional node makes one new value; an
  in-place node (optimizer updates, ``fill_``, ``__setitem__``) writes into its
  first ``op.mutates`` inputs and makes none.
- ``outputs`` are the values the function returns (in its return structure) and
  ``grads`` the ``(captured value, value)`` pairs to store in ``.grad`` after a replay.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass(eq=False)
class Value:
    id: int
    shape: tuple
    dtype: Any  # a webgrad dtype
    source: str  # "arg", "capture", "const", "random", "node"
    data: Any = None  # capture/const: the backend data; random: (kind, args)
    index: int = -1  # arg: position among the flattened tensor arguments

    def __repr__(self) -> str:
        return f"%{self.id}"

    def type_str(self) -> str:
        return f"{self.dtype.name}[{','.join(str(s) for s in self.shape)}]"


@dataclass(eq=False)
class Node:
    op: Any  # an Op record
    inputs: list  # list[Value]
    attrs: dict
    output: Value | None = None  # None for in-place nodes
    fused: Any = None  # passes.fuse: the chain of nodes this one stands for
    members: Any = None  # passes.group: the optimizer steps this grouped one stands for
    source: str = ""  # "file:line" of the user's call that made it (for explain())

    @property
    def inplace(self) -> bool:
        return self.output is None

    def rename_inputs(self, replace: dict) -> None:
        """Read ``replace[value id]`` where a pass merged or renamed a value, here and in the
        members of a fused chain (which read the same values)."""
        for node in [self, *(self.fused or ())]:
            node.inputs = [replace.get(v.id, v) for v in node.inputs]

    def label(self) -> str:
        """The op's name, or ``fused[a,b,...]`` for a node standing for a fused chain."""
        return self.op.name if self.fused is None else "fused[" + ",".join(n.op.name for n in self.fused) + "]"


@dataclass(eq=False)
class Graph:
    device: str
    values: list = field(default_factory=list)
    nodes: list = field(default_factory=list)
    outputs: list = field(default_factory=list)  # list[Value], flattened return tensors
    grads: list = field(default_factory=list)  # list[(Value capture, Value)]
    stats: dict | None = None  # what the passes did (passes.run)
    checks: list = field(default_factory=list)  # (function, args with Values): input checks rerun per replay

    def new_value(self, shape, dtype, source, data=None, index=-1) -> Value:
        value = Value(len(self.values), tuple(shape), dtype, source, data, index)
        self.values.append(value)
        return value

    def replace_values(self, replace: dict) -> None:
        """Point the results (returned values, stored gradients) at ``replace[value id]``
        where a pass merged or renamed a value; the nodes' inputs are the pass's to rewrite."""
        self.outputs = [replace.get(v.id, v) for v in self.outputs]
        self.grads = [(p, replace.get(g.id, g)) for p, g in self.grads]

    def inputs_of_kind(self, source: str) -> list:
        return [v for v in self.values if v.source == source]

    def live_values(self) -> list:
        """Values still referenced by a node, an output or a grad after passes ran."""
        seen: dict[int, Value] = {}
        for node in self.nodes:
            for v in node.inputs:
                seen[v.id] = v
            if node.output is not None:
                seen[node.output.id] = node.output
        for v in self.outputs:
            seen[v.id] = v
        for p, g in self.grads:
            seen[p.id], seen[g.id] = p, g
        return [seen[k] for k in sorted(seen)]

    def __str__(self) -> str:
        return format_graph(self)


def _attr_str(attrs: dict) -> str:
    def short(v):
        if isinstance(v, float):
            return f"{v:.6g}"
        return repr(v)
    return ", ".join(f"{k}={short(v)}" for k, v in attrs.items())


def format_graph(graph: Graph) -> str:
    """A table: one line per node, ``%out: type = op(inputs) {attrs}``, after a
    header listing the graph's inputs by kind (like a jaxpr's binders)."""
    live = graph.live_values()
    lines = [f"graph on {graph.device}: {len(graph.nodes)} nodes"]
    for source in ("arg", "capture", "const", "random"):
        vals = [v for v in live if v.source == source]
        if vals:
            lines.append(f"  {source + 's:':9} " + ", ".join(f"{v}: {v.type_str()}" for v in vals))
    for node in graph.nodes:
        name = node.label()
        args = ", ".join(repr(v) for v in node.inputs)
        attrs = _attr_str(node.attrs) if node.fused is None else ""
        left = f"{node.output}: {node.output.type_str()}" if node.output is not None else "(in-place)"
        lines.append(f"  {left:24} = {name}({args}){'  {' + attrs + '}' if attrs else ''}")
    if graph.outputs:
        lines.append("  return " + ", ".join(repr(v) for v in graph.outputs))
    if graph.grads:
        lines.append("  grads  " + ", ".join(f"{p}.grad = {g}" for p, g in graph.grads))
    return "\n".join(lines)
