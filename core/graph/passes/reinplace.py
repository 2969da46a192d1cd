"""Reinplacing: an ``index_put`` whose old value nothing reads later writes in place.

Functionalization turns ``h[:, t] = v`` into ``h2 = index_put(h, v)``, a copy of all of
``h`` per write: a loop that fills ``h`` step by step would copy it once per step. Run
last, this pass turns such a node back into ``setitem(h, v)`` in place, and points the
readers of ``h2`` at ``h``, when the old ``h`` is dead there:

- ``h`` was made by a node of this graph (a buffer of the step's own, no view: views share
  a buffer with something else), and nothing writes it in place;
- no node after this one reads ``h`` or a view of it, and neither is returned or stored as
  a gradient;
- the written value and the positions are no view of ``h`` (they are read while it is written).
"""
from __future__ import annotations

from ...ops.registry import OPS
from ..ir import Node
from .functionalize import is_view
from .memory import last_uses


def reinplace(graph) -> int:
    """Turn eligible ``index_put`` nodes into in-place ``setitem`` writes; returns how many."""
    made = {node.output.id: node for node in graph.nodes if not node.inplace}
    written = {v.id for node in graph.nodes if node.inplace for v in node.inputs[:node.op.mutates]}
    aliases: dict[int, set] = {}  # value id -> the ids of it and every view taken of it, transitively
    for node in graph.nodes:
        if is_view(node):
            for v in node.inputs[:1]:
                for members in aliases.values():
                    if v.id in members:
                        members.add(node.output.id)
                aliases.setdefault(v.id, {v.id}).add(node.output.id)
    last = last_uses(graph)

    rename: dict = {}
    nodes, changed = [], 0
    for i, node in enumerate(graph.nodes):
        node.inputs = [rename.get(v.id, v) for v in node.inputs]
        if node.op.name == "index_put" and not node.inplace:
            old, *rest = node.inputs
            shared = aliases.get(old.id, {old.id})
            producer = made.get(old.id)
            if (producer is not None and not is_view(producer) and old.id not in written
                    and all(last.get(a, -1) < i for a in shared - {old.id}) and last.get(old.id, -1) == i
                    and not any(v.id in shared for v in rest)):
                nodes.append(Node(OPS["setitem"], node.inputs, node.attrs, None, source=node.source))
                rename[node.output.id] = old
                last[old.id] = last.get(node.output.id, i)
                aliases[old.id] = shared | aliases.get(node.output.id, set())
                changed += 1
                continue
        nodes.append(node)
    graph.nodes = nodes
    graph.replace_values(rename)
    return changed
