"""Dead-code elimination: drop functional nodes whose output nothing needs.

Needed: the function's outputs, the gradients stored in ``.grad``, and every input
of a needed node. In-place nodes are always kept (they write state that outlives
the call: parameters, optimizer buffers, tensors the caller holds).
"""
from __future__ import annotations


def eliminate_dead_code(graph) -> int:
    needed = {v.id for v in graph.outputs} | {g.id for _, g in graph.grads}
    kept = []
    for node in reversed(graph.nodes):
        if node.inplace or node.output.id in needed:
            kept.append(node)
            needed.update(v.id for v in node.inputs)
    removed = len(graph.nodes) - len(kept)
    graph.nodes = kept[::-1]
    return removed
