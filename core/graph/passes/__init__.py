"""Graph passes: each takes a Graph, rewrites it in place and returns what it changed.

``run`` applies them in order: dead-code elimination, (on WebGPU) functionalization of
in-place writes into values the graph made, constant folding, common-subexpression
elimination, dead-code elimination again, transposed matmuls and copy elision, elementwise
fusion, then (on WebGPU) divisions by reused reciprocals, reductions with prologue and
epilogue chains, matmul epilogues, grouped optimizer updates and, last, writes back in
place where functionalization's copy is not needed (reinplace.py). Each pass keeps
the graph's meaning: in-place nodes stay where they are, and nothing is merged or
moved across one (see cse.py).
"""
from __future__ import annotations

from .copies import elide_copies, transpose_matmuls
from .cse import eliminate_common_subexpressions
from .dce import eliminate_dead_code
from .epilogue import fuse_matmul_epilogues
from .fold import fold_constants
from .functionalize import functionalize
from .fuse import fuse_elementwise
from .group import group_optimizer_steps
from .memory import plan_memory
from .reciprocal import reuse_reciprocals
from .reduce import fuse_reductions
from .reinplace import reinplace

__all__ = ["run", "report", "eliminate_dead_code", "eliminate_common_subexpressions", "fold_constants",
           "functionalize", "fuse_elementwise", "fuse_reductions", "fuse_matmul_epilogues", "reuse_reciprocals",
           "group_optimizer_steps", "transpose_matmuls",
           "elide_copies", "reinplace", "plan_memory"]


def run(graph) -> dict:
    """Optimize ``graph`` in place; the counts of what each pass did are kept on the graph."""
    # Functionalization first: the in-place nodes it removes are barriers to every later pass.
    # WebGPU only: there every kernel writes a new buffer, while a numpy kernel may return its input.
    # Dead code goes first too: an unread view of a value (one setitem takes to learn its
    # target's shape) would otherwise count as a reader that sees the value's later writes.
    dead = eliminate_dead_code(graph)
    stats = {"functionalized": functionalize(graph) if graph.device == "webgpu" else 0,
             "folded": fold_constants(graph), "cse": eliminate_common_subexpressions(graph),
             "dce": dead + eliminate_dead_code(graph), "transposed": transpose_matmuls(graph),
             "copies": elide_copies(graph), "reciprocals": 0, "fused": 0, "reductions": 0, "epilogues": 0,
             "grouped": 0, "reinplaced": 0}
    if graph.device != "webgpu":  # numpy: a chain's steps share one planned array (numpy_replay.py)
        stats["fused"] = fuse_elementwise(graph)
    else:  # one generated kernel per chain or group
        from ...backend import get_backend
        from ...backend.webgpu import fused, optim_group, reduce  # noqa: F401  (register their launchers)

        stats["reciprocals"] = reuse_reciprocals(graph)
        stats["fused"] = fuse_elementwise(graph)
        stats["reductions"] = fuse_reductions(graph)
        stats["epilogues"] = fuse_matmul_epilogues(graph)
        backend = get_backend(graph.device)
        stats["grouped"] = group_optimizer_steps(graph, lambda arity: optim_group.capacity(backend, arity))
        stats["reinplaced"] = reinplace(graph)  # last: a write in place is a barrier to the passes above
    graph.stats = stats
    return stats


def report(graph) -> list:
    """Lines for ``explain()``: what the passes removed and the planned memory."""
    stats = getattr(graph, "stats", None)
    lines = []
    if stats is not None:
        lines.append(f"passes: {stats.get('functionalized', 0)} in-place write(s) functionalized "
                     f"({stats.get('reinplaced', 0)} written back in place where the old value was dead), "
                     f"{stats['folded']} node(s) folded to constants, {stats['cse']} merged as common "
                     f"subexpressions, {stats['dce']} dead node(s) removed, "
                     f"{stats['transposed']} matmul(s) transposed, "
                     f"{stats['copies']} copies elided, {stats.get('reciprocals', 0)} division(s) by a reused "
                     f"reciprocal, {stats['fused']} fused into others, "
                     f"{stats.get('reductions', 0)} chain(s) spliced into reductions, "
                     f"{stats.get('epilogues', 0)} matmul(s) with an epilogue, "
                     f"{stats.get('grouped', 0)} optimizer updates grouped into others")
    mem = plan_memory(graph)
    lines.append(f"memory: {len(mem['nodes_allocating'])} node outputs allocate, peak {mem['peak_bytes']} bytes "
                 f"with lifetimes (vs {mem['total_bytes']} bytes if none were freed)")
    return lines
