"""Functionalization: an in-place write into a value the graph made becomes a new value.

A traced ``h.relu_()`` (or ``h.mul_(2)``, ``h += b``) is ``copy_into(h, relu(copy(h)))``,
and an untracked ``h[:, t] = v`` is ``setitem(h, v)``: in-place nodes, which every other
pass treats as a barrier (nothing is fused, merged or moved across them). A
``copy_into`` is dropped, its readers after it reading the written value instead, and a
``setitem`` becomes ``index_put``, setitem's out-of-place form, whose new value the
later readers read. This holds when ``h`` is a value a node of this graph made or a
constant made in the trace (its kept data is then never written, so no longer copied
fresh per call), is no view, and had no view taken of it before the write (a view
taken after it reads the new value); a ``copy_into``'s written value must moreover have
h's shape and dtype and be no view. The copy of the old value then has nothing left to
protect (``elide_copies``), and the chain fuses like out-of-place code. ``reinplace``
turns an ``index_put`` whose old value nothing reads later back into a write in place.

Writes into arguments, captured tensors (parameters, optimizer state) or views stay
in place: they must reach memory the caller can see. A ``copy_into``'s written value
must not be written in place itself anywhere (readers of ``h`` would see that write too).
"""
from __future__ import annotations

from ...ops.registry import OPS
from ..analysis import analyze, is_view
from ..ir import Node


def functionalize(graph) -> int:
    """Turn eligible ``copy_into`` and ``setitem`` writes into new values, in place; returns how many."""
    copy_into, setitem = OPS["copy_into"], OPS["setitem"]
    df = analyze(graph)
    views, written = df.views, df.written
    owned = set(df.producer) | {v.id for v in graph.values if v.source == "const"}
    viewed: set = set()  # values a view has been taken of so far (it would see a later write)
    latest: dict = {}  # id of a written value -> the value its later readers read
    nodes, rewritten = [], 0
    for node in graph.nodes:
        original = list(node.inputs)
        node.rename_inputs(latest)
        if is_view(node):
            viewed.update(v.id for v in original)
        target = original[0] if node.inplace and node.inputs else None
        if target is not None and (target.id not in owned or target.id in views or target.id in viewed):
            target = None
        if target is not None and node.op is copy_into and not node.attrs:
            value = node.inputs[1]
            if (value.id not in views and value.id not in written and value.shape == target.shape
                    and value.dtype is target.dtype):
                latest[target.id] = value
                rewritten += 1
                continue
        if target is not None and node.op is setitem:
            new = graph.new_value(target.shape, target.dtype, "node")
            nodes.append(Node(OPS["index_put"], node.inputs, node.attrs, new, source=node.source))
            latest[target.id] = new
            rewritten += 1
            continue
        nodes.append(node)
    graph.nodes = nodes
    graph.replace_values(latest)
    return rewritten
