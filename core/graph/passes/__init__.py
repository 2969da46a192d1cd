"""Graph passes: each takes a Graph, rewrites it in place and returns what it changed.

``run`` applies those the graph's backend names (``Backend.passes``, backend/protocol.py),
in its order, by the names in ``PASSES``: on numpy dead-code elimination, constant
folding, common-subexpression elimination, dead-code elimination again, transposed matmuls,
copy elision and elementwise fusion; WebGPU adds functionalization of in-place writes into
values the graph made (second), divisions by reused reciprocals, reductions with prologue
and epilogue chains, matmul epilogues, grouped optimizer updates and, last, writes back in
place where functionalization's copy is not needed (reinplace.py). Each pass keeps
the graph's meaning: in-place nodes stay where they are, and nothing is merged or
moved across one (see cse.py).
"""
from __future__ import annotations

from ...backend import get_backend
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
from ..verify import verify

__all__ = ["run", "report", "eliminate_dead_code", "eliminate_common_subexpressions", "fold_constants",
           "functionalize", "fuse_elementwise", "fuse_reductions", "fuse_matmul_epilogues", "reuse_reciprocals",
           "group_optimizer_steps", "transpose_matmuls",
           "elide_copies", "reinplace", "plan_memory"]


# A pass by the name its count has in ``graph.stats``: its function of the graph and the
# graph's backend, and how ``explain()`` says what it did (in this order).
PASSES = {
    "functionalized": (lambda graph, backend: functionalize(graph), "{} in-place write(s) functionalized"),
    "reinplaced": (lambda graph, backend: reinplace(graph), "{} written back in place where the old value was dead"),
    "folded": (lambda graph, backend: fold_constants(graph), "{} node(s) folded to constants"),
    "cse": (lambda graph, backend: eliminate_common_subexpressions(graph), "{} merged as common subexpressions"),
    "dce": (lambda graph, backend: eliminate_dead_code(graph), "{} dead node(s) removed"),
    "transposed": (lambda graph, backend: transpose_matmuls(graph), "{} matmul(s) transposed"),
    "copies": (lambda graph, backend: elide_copies(graph), "{} copies elided"),
    "reciprocals": (lambda graph, backend: reuse_reciprocals(graph), "{} division(s) by a reused reciprocal"),
    "fused": (fuse_elementwise, "{} fused into others"),
    "reductions": (fuse_reductions, "{} chain(s) spliced into reductions"),
    "epilogues": (fuse_matmul_epilogues, "{} matmul(s) with an epilogue"),
    "grouped": (lambda graph, backend: group_optimizer_steps(graph, backend.group_capacity),
                "{} optimizer updates grouped into others"),
}


# The tests set this: verify the graph (graph/verify.py) after every pass, to fail where it broke.
VERIFY = False


def run(graph) -> dict:
    """Optimize ``graph`` in place with its backend's passes; the counts of what each did are
    kept on the graph (``graph.stats``: every name in ``PASSES``, 0 where it did not run)."""
    backend = get_backend(graph.device)
    stats = dict.fromkeys(PASSES, 0)
    for name in backend.passes:
        stats[name] += PASSES[name][0](graph, backend)
        if VERIFY:
            verify(graph, after=name)
    graph.stats = stats
    return stats


def report(graph) -> list:
    """Lines for ``explain()``: what the passes removed and the planned memory."""
    stats = getattr(graph, "stats", None)
    lines = []
    if stats is not None:
        lines.append("passes: " + ", ".join(said.format(stats[name]) for name, (_, said) in PASSES.items()))
    mem = plan_memory(graph)
    lines.append(f"memory: {len(mem['nodes_allocating'])} node outputs allocate, peak {mem['peak_bytes']} bytes "
                 f"with lifetimes (vs {mem['total_bytes']} bytes if none were freed)")
    return lines
