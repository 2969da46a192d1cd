"""Buffer planning by lifetime: which node outputs allocate, when each dies, and the
peak bytes a replay holds at once when every value is freed after its last use
(the replay frees them so, and the WebGPU pool hands a freed buffer to the next
allocation of its size class). Views (reshape, permute, expand, slice) allocate nothing.
"""
from __future__ import annotations

import math

from ..analysis import analyze, is_view


def plan_memory(graph) -> dict:
    last = analyze(graph).last_use
    live, peak, total, allocating = 0, 0, 0, []
    dying: dict[int, int] = {}
    for i, node in enumerate(graph.nodes):
        out = node.output
        if out is not None and not is_view(node):
            size = math.prod(out.shape) * out.dtype.itemsize
            live += size
            total += size
            allocating.append(node)
            dying[last.get(out.id, i)] = dying.get(last.get(out.id, i), 0) + size
        peak = max(peak, live)
        live -= dying.pop(i, 0)
    return {"peak_bytes": peak, "total_bytes": total, "nodes_allocating": allocating}
