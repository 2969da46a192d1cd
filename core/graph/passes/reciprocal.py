"""Divisions by a value whose reciprocal the graph computes anyway become products.

The backward of ``a / b`` divides the incoming gradient by ``b``; seeded with one (the
backward of a mean loss, ``total / count``) that is ``1 / b``. So a training step
computes both ``a / b`` and ``1 / b``, and ``a / b`` becomes ``a * (1 / b)``: the
multiplication then joins a chain or a reduction's epilogue (passes/reduce.py) and the
reciprocal is made once. The result may differ from the quotient in its last bit
(float32 tolerance, as any reassociation).

Only float32 divisions are rewritten. The reciprocal's node moves up to just before
the first division it serves when it came later, which needs no in-place node
between the two (its inputs, ``b`` and the constant one, exist by then).
"""
from __future__ import annotations

import math

import numpy as np

from ...ops.registry import OPS
from ..ir import Node


def _float_division(node) -> bool:
    return (node.op is OPS["div"] and not node.inplace and not node.attrs
            and all(v.dtype.name == "float32" for v in (*node.inputs, node.output)))


def _is_reciprocal(node, backend) -> bool:
    one = node.inputs[0]
    if not _float_division(node) or one.source != "const" or math.prod(one.shape) != 1:
        return False
    return bool(np.all(backend.to_numpy(one.data) == 1.0)) and node.output.shape == node.inputs[1].shape


def reuse_reciprocals(graph) -> int:
    """Rewrite divisions in place; returns how many."""
    from ...backend import get_backend

    backend = get_backend(graph.device)
    rewritten = 0
    for r in [n for n in graph.nodes if _is_reciprocal(n, backend)]:
        denominator = r.inputs[1]
        for node in list(graph.nodes):
            if node is r or not _float_division(node) or node.inputs[1] is not denominator:
                continue
            pos, rpos = graph.nodes.index(node), graph.nodes.index(r)
            if rpos > pos:
                if any(n.inplace for n in graph.nodes[pos:rpos]):
                    continue
                graph.nodes.insert(pos, graph.nodes.pop(rpos))
                pos += 1
            graph.nodes[pos] = Node(OPS["mul"], [node.inputs[0], r.output], {}, node.output, source=node.source)
            rewritten += 1
    return rewritten
