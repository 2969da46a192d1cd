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
from ..analysis import analyze, is_view
from ..ir import Node


def reinplace(graph) -> int:
    """Turn eligible ``index_put`` nodes into in-place ``setitem`` writes; returns how many."""
    index_put, setitem = OPS["index_put"], OPS["setitem"]
    df = analyze(graph)  # last_use and aliases are kept up to date below as writes move in place
    made, written, aliases, last = df.producer, df.written, df.aliases, df.last_use

    rename: dict = {}
    nodes, changed = [], 0
    for i, node in enumerate(graph.nodes):
        node.rename_inputs(rename)
        if node.op is index_put and not node.inplace:
            old, *rest = node.inputs
            shared = aliases.get(old.id, {old.id})
            producer = made.get(old.id)
            if (producer is not None and not is_view(producer) and old.id not in written
                    and all(last.get(a, -1) < i for a in shared - {old.id}) and last.get(old.id, -1) == i
                    and not any(v.id in shared for v in rest)):
                nodes.append(Node(setitem, node.inputs, node.attrs, None, source=node.source))
                rename[node.output.id] = old
                last[old.id] = last.get(node.output.id, i)
                aliases[old.id] = shared | aliases.get(node.output.id, set())
                changed += 1
                continue
        nodes.append(node)
    graph.nodes = nodes
    graph.replace_values(rename)
    return changed
