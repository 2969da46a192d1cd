"""Fewer copies: the ones autograd adds so that each ``.grad`` owns its memory.

- ``transpose_matmuls``: ``permute(matmul(a, b), (1, 0))`` becomes
  ``matmul(permute(b), permute(a))`` (``(ab)^T = b^T a^T``); matmul kernels read
  transposed operands through their strides, so the product lands in the wanted
  layout and the copy that made it contiguous has nothing left to do.
- ``elide_copies``: a ``copy`` of a value that a node has just made (optionally
  reshaped), that nothing else reads and that is laid out contiguously, is that
  value: the copy's readers use it directly.
"""
from __future__ import annotations

from ...ops.registry import OPS
from ..analysis import analyze
from ..ir import Node


def transpose_matmuls(graph) -> int:
    df = analyze(graph)
    made = df.producer
    permute, matmul, changed = OPS["permute"], OPS["matmul"], 0
    nodes = []
    for node in graph.nodes:
        src = made.get(node.inputs[0].id) if node.op is permute and node.inputs else None
        if (src is not None and src.op is matmul and node.attrs.get("dims") == (1, 0)
                and len(src.output.shape) == 2 and df.single_use(src.output.id) and src in nodes):
            a, b = src.inputs
            if len(a.shape) != 2 or len(b.shape) != 2:
                nodes.append(node)
                continue
            bt = graph.new_value((b.shape[1], b.shape[0]), b.dtype, "node")
            at = graph.new_value((a.shape[1], a.shape[0]), a.dtype, "node")
            nodes.remove(src)
            nodes += [Node(permute, [b], {"dims": (1, 0)}, bt, source=src.source),
                      Node(permute, [a], {"dims": (1, 0)}, at, source=src.source),
                      Node(src.op, [bt, at], dict(src.attrs), node.output, source=node.source)]
            changed += 1
            continue
        nodes.append(node)
    graph.nodes = nodes
    return changed


def _fresh(node) -> bool:
    """Whether ``node`` always writes a new contiguous buffer on every backend (some numpy
    kernels may hand back their input, e.g. a cast to the same dtype: those are left alone)."""
    op = node.op
    if node.fused is not None:  # an elementwise chain (passes/fuse.py) writes a new buffer
        return all(n.op.kind == "elementwise" for n in node.fused)
    if op.kind == "elementwise":
        return op not in (OPS["cast"], OPS["copy"])
    return op in (OPS["matmul"], OPS["sum"], OPS["index_put"])


def elide_copies(graph) -> int:
    df = analyze(graph)
    made, copy, reshape = df.producer, OPS["copy"], OPS["reshape"]
    replace: dict = {}
    nodes, removed = [], 0
    for node in graph.nodes:
        node.rename_inputs(replace)
        if node.op is copy and not node.attrs and df.single_use(node.inputs[0].id):
            src = made.get(node.inputs[0].id)
            base = src
            if src is not None and src.op is reshape:
                base = made.get(src.inputs[0].id) if df.single_use(src.inputs[0].id) else None
            if base is not None and _fresh(base) and node.output.dtype is node.inputs[0].dtype:
                replace[node.output.id] = node.inputs[0]
                removed += 1
                continue
        nodes.append(node)
    graph.nodes = nodes
    graph.replace_values(replace)
    return removed
