"""``verify(graph)``: the graph's invariants, checked (as JAX's ``check_jaxpr``).

The tests run it after every pass (``passes.VERIFY``), so a pass that breaks the IR fails
where it broke it, not later in a replay. A broken graph raises ``GraphError`` naming the
node and what is wrong. The rules:

- every value a node, an output, a gradient or an input check refers to is the graph's
  own (``graph.values[v.id] is v``);
- a node reads only values that exist when it runs: graph inputs (arg, capture, const,
  random) or the outputs of earlier nodes;
- SSA: a value is made by at most one node, and never a graph input;
- an in-place node makes no value and a functional one makes one, as its op says, and its
  op's kind is "inplace" exactly when the op is; an in-place node writes at most the inputs
  it has (``op.mutates``);
- a node's output has the shape and dtype its op's ``infer`` gives for its inputs, where
  ``infer`` can say (it runs on stand-ins carrying shape, dtype and device);
- a fused node (``node.fused``) makes its last member's value; each member is a functional
  node checked as above, reading the fused node's inputs or earlier members' outputs;
- a grouped node (``node.members``) is in-place and reads its members' inputs in order;
  its members are in-place nodes of one op;
- outputs and gradients are values that exist after the last node; a gradient is stored
  into an argument or a captured tensor of its shape; input checks read the graph's values.
"""
from __future__ import annotations

import math

from ..ops.registry import OpError
from .ir import Graph, Node, Value

INPUTS = ("arg", "capture", "const", "random")


class GraphError(Exception):
    """A graph that breaks an invariant of the IR (a pass's bug, not the user's)."""


class _Abstract:
    """What ``op.infer`` sees of a value: its type and device, no data."""

    def __init__(self, value, device):
        self.shape, self.dtype, self.device = value.shape, value.dtype, device

    @property
    def ndim(self) -> int:
        return len(self.shape)

    def numel(self) -> int:
        return math.prod(self.shape)


def describe(node: Node) -> str:
    left = "(in-place)" if node.output is None else f"{node.output}: {node.output.type_str()}"
    return f"{left} = {node.label()}({', '.join(repr(v) for v in node.inputs)})"


def verify(graph: Graph, after: str = "") -> None:
    """Raise ``GraphError`` if ``graph`` breaks an invariant; ``after`` names the pass that
    just ran, for the message."""
    context = f" after pass {after!r}" if after else ""

    def fail(where: str, what: str):
        raise GraphError(f"graph verify{context}: {where}: {what}")

    def own(v, where: str):
        if not (0 <= v.id < len(graph.values)) or graph.values[v.id] is not v:
            fail(where, f"{v!r} is not a value of this graph")

    defined = {v.id for v in graph.values if v.source in INPUTS}
    for i, node in enumerate(graph.nodes):
        where = f"node {i} ({describe(node)}, from {node.source or 'a pass'})"
        for v in node.inputs:
            own(v, where)
            if v.id not in defined:
                fail(where, f"reads {v!r} before any node makes it (or after the node making it was removed)")
        _check_node(node, where, fail, graph.device)
        if node.output is not None:
            own(node.output, where)
            if node.output.id in defined:
                fail(where, f"makes {node.output!r}, which is already made (by a graph input or an earlier node)")
            defined.add(node.output.id)
        if node.fused is not None:
            _check_fused(node, where, fail, graph.device)
        if node.members is not None:
            _check_grouped(node, where, fail)
    for k, v in enumerate(graph.outputs):
        own(v, f"output {k}")
        if v.id not in defined:
            fail(f"output {k}", f"returns {v!r}, which no remaining node makes")
    for p, g in graph.grads:
        where = f"gradient {p!r}.grad = {g!r}"
        own(p, where)
        own(g, where)
        if p.source not in ("arg", "capture"):
            fail(where, f"stores into {p!r} of source {p.source!r}, not an argument or captured tensor")
        if g.id not in defined:
            fail(where, f"stores {g!r}, which no remaining node makes")
        if tuple(g.shape) != tuple(p.shape):
            fail(where, f"gradient of shape {g.shape} for a tensor of shape {p.shape}")
    for fn, args in graph.checks:
        for v in args:
            if isinstance(v, Value):
                own(v, f"input check {getattr(fn, '__name__', fn)}")


def _check_node(node: Node, where: str, fail, device: str) -> None:
    op = node.op
    if op.inplace != (node.output is None):
        fail(where, "an in-place op must make no value" if op.inplace else "a functional op must make one value")
    if op.inplace != (op.kind == "inplace"):
        fail(where, f"op {op.name!r} is {'' if op.inplace else 'not '}in-place but of kind {op.kind!r}")
    if op.inplace:
        if op.mutates > len(node.inputs):
            fail(where, f"writes {op.mutates} inputs but has {len(node.inputs)}")
        return
    if node.output is not None:
        _check_infer(node, node.output, where, fail, device)


def _check_infer(node: Node, out: Value, where: str, fail, device) -> None:
    try:
        inferred = node.op.infer(*[_Abstract(v, device) for v in node.inputs], **node.attrs)
    except OpError as e:
        fail(where, f"its op refuses its inputs: {e}")
    except Exception:  # noqa: BLE001  an infer that needs more than types (data, a real Tensor): not checkable
        return
    if not (isinstance(inferred, tuple) and len(inferred) == 2):
        return  # passes' own ops (fused, grouped) infer nothing: their members are checked
    shape, dtype = inferred
    if tuple(shape) != tuple(out.shape) or dtype is not out.dtype:
        fail(where, f"makes {out.type_str()} but its op infers {dtype.name}[{','.join(map(str, shape))}]")


def _check_fused(node: Node, where: str, fail, device) -> None:
    members = node.fused
    if not members or not all(isinstance(n, Node) for n in members):
        fail(where, "a fused node needs a non-empty list of member nodes")
    if members[-1].output is not node.output:
        fail(where, "a fused node must make its last member's value")
    available = {v.id for v in node.inputs}
    for k, member in enumerate(members):
        here = f"{where}, member {k} ({describe(member)})"
        if member.output is None or member.fused is not None:
            fail(here, "a fused member must be a plain functional node")
        for v in member.inputs:
            if v.id not in available:
                fail(here, f"reads {v!r}, neither an input of the fused node nor an earlier member's value")
        _check_node(member, here, fail, device)
        available.add(member.output.id)


def _check_grouped(node: Node, where: str, fail) -> None:
    members = node.members
    if not node.inplace or not members:
        fail(where, "a grouped node must be in-place and have members")
    if any(not m.inplace or m.op is not members[0].op for m in members):
        fail(where, "a grouped node's members must be in-place nodes of one op")
    if [v.id for v in node.inputs] != [v.id for m in members for v in m.inputs]:
        fail(where, "a grouped node must read its members' inputs, in order")
