"""Functionalization: an in-place write into a value the graph made becomes a new value.

A traced ``h.relu_()`` (or ``h.mul_(2)``, ``h += b``) is ``copy_into(h, relu(copy(h)))``:
an in-place node, which every other pass treats as a barrier (nothing is fused,
merged or moved across it). The write is dropped, and the readers after it read the
written value instead, when ``h`` is a value a node of this graph made, is no view,
and had no view taken of it before the write (a view taken after it reads the new
value), and the written value has h's shape and dtype and is no view. The copy of
the old value then has nothing left to protect (``elide_copies``), and the chain
fuses like out-of-place code.

Writes into arguments, captured tensors (parameters, optimizer state) or views stay
in place: they must reach memory the caller can see. The written value must not be
written in place itself anywhere (readers of ``h`` would see that write too).
"""
from __future__ import annotations

from ...kernels import View


def functionalize(graph) -> int:
    """Turn eligible ``copy_into`` writes into renames, in place; returns how many."""
    def is_view(node):
        return not node.inplace and isinstance(node.op.impls.get("wgsl"), View)

    views = {node.output.id for node in graph.nodes if is_view(node)}
    written = {v.id for node in graph.nodes if node.inplace for v in node.inputs[:node.op.mutates]}
    made = {node.output.id for node in graph.nodes if not node.inplace}
    viewed: set = set()  # values a view has been taken of so far (it would see a later write)
    latest: dict = {}  # id of a written value -> the value its later readers read
    nodes, rewritten = [], 0
    for node in graph.nodes:
        original = list(node.inputs)
        node.inputs = [latest.get(v.id, v) for v in node.inputs]
        if is_view(node):
            viewed.update(v.id for v in original)
        if node.op.name == "copy_into" and not node.attrs:
            target, value = original[0], node.inputs[1]
            if (target.id in made and target.id not in views and target.id not in viewed and value.id not in views
                    and value.id not in written and value.shape == target.shape and value.dtype is target.dtype):
                latest[target.id] = value
                rewritten += 1
                continue
        nodes.append(node)
    graph.nodes = nodes
    graph.replace_values(latest)
    return rewritten
