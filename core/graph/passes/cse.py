"""Common-subexpression elimination: a node that repeats an earlier node (same op,
same inputs, same attrs) reuses the earlier output.

Only within one stretch between in-place nodes: an in-place write may change an
input, so a write starts a new stretch. Nodes whose attrs cannot be hashed are left
alone. Random draws are graph inputs, not nodes, so two draws never merge.
"""
from __future__ import annotations


def _key(node, epoch):
    try:
        attrs = tuple(sorted(node.attrs.items()))
        hash(attrs)
    except TypeError:
        return None
    return (node.op, tuple(v.id for v in node.inputs), attrs, epoch)


def eliminate_common_subexpressions(graph) -> int:
    seen: dict = {}
    replace: dict = {}  # value id -> the Value that replaces it
    epoch = 0
    kept = []
    for node in graph.nodes:
        node.rename_inputs(replace)
        if node.inplace:
            epoch += 1
            kept.append(node)
            continue
        key = _key(node, epoch)
        earlier = seen.get(key) if key is not None else None
        if earlier is not None and (earlier.output.shape, earlier.output.dtype) == (node.output.shape,
                                                                                   node.output.dtype):
            replace[node.output.id] = earlier.output
            continue
        if key is not None:
            seen[key] = node
        kept.append(node)
    graph.replace_values(replace)
    removed = len(graph.nodes) - len(kept)
    graph.nodes = kept
    return removed
