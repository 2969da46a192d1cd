"""Buffer planning by lifetime: which node outputs allocate, when each dies, and the
peak bytes a replay holds at once when every value is freed after its last use
(the replay frees them so, and the WebGPU pool hands a freed buffer to the next
allocation of its size class). Views (reshape, permute, expand, slice) allocate nothing.
"""
from __future__ import annotations

import math

from ...kernels import View


def last_uses(graph) -> dict:
    """value id -> the position of the last node reading it; len(graph.nodes) for the values
    that leave the call (outputs, gradients)."""
    last = {}
    for i, node in enumerate(graph.nodes):
        for v in node.inputs:
            last[v.id] = i
    end = len(graph.nodes)
    for v in graph.outputs:
        last[v.id] = end
    for _, g in graph.grads:
        last[g.id] = end
    return last


def plan_memory(graph) -> dict:
    last = last_uses(graph)
    live, peak, total, allocating = 0, 0, 0, []
    dying: dict[int, int] = {}
    for i, node in enumerate(graph.nodes):
        out = node.output
        if out is not None and not isinstance(node.op.impls.get("wgsl"), View):
            size = math.prod(out.shape) * out.dtype.itemsize
            live += size
            total += size
            allocating.append(node)
            dying[last.get(out.id, i)] = dying.get(last.get(out.id, i), 0) + size
        peak = max(peak, live)
        live -= dying.pop(i, 0)
    return {"peak_bytes": peak, "total_bytes": total, "nodes_allocating": allocating}
