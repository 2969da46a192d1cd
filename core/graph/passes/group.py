"""Grouped optimizer updates: the per-parameter in-place steps of one optimizer
(``adam_step`` on every parameter, ...) become one node per group of parameters,
one kernel on WebGPU instead of one per parameter, as PyTorch's foreach/fused
optimizers do.

Consecutive in-place nodes of the same optimizer op with equal attrs form a group
of at most ``capacity(inputs per member)`` members (a shader binds a limited number
of storage buffers). The grouped node's op is ``optim.updates.grouped_op``'s (an eager
step's ``Updates`` runs the same): its inputs are the members' inputs one after
another, its numpy kernel runs the member op on each in turn, and WebGPU runs one
generated kernel over all of them (``backend/webgpu/optim_group.py``).
``node.members`` keeps the original nodes, so a replay can still hand each
parameter's fresh scalars (lr, bias corrections) to its group.
"""
from __future__ import annotations

from ..ir import Node


def _updates():
    from ...optim import updates
    return updates


def grouped_node(members: list) -> Node:
    first = members[0]
    op = _updates().grouped_op(first.op, len(members), len(first.inputs))
    inputs = [v for n in members for v in n.inputs]
    return Node(op, inputs, dict(first.attrs), None, source=first.source, members=list(members))


def group_optimizer_steps(graph, capacity) -> int:
    """Group runs of equal optimizer steps in place (``capacity(arity)``: members per
    group at most); returns how many nodes were folded into groups."""
    ops = set(_updates().OPTIMIZER_OPS)
    nodes: list = []
    run: list = []
    folded = 0

    def flush():
        nonlocal folded
        size = max(1, capacity(len(run[0].inputs))) if run else 1
        for start in range(0, len(run), size):
            chunk = run[start:start + size]
            nodes.append(chunk[0] if len(chunk) == 1 else grouped_node(chunk))
            folded += len(chunk) - 1
        run.clear()

    def groupable(node) -> bool:
        return node.inplace and node.op in ops and all(v.dtype.name == "float32" for v in node.inputs)

    for node in graph.nodes:
        if run and not (groupable(node) and node.op is run[0].op and node.attrs == run[0].attrs):
            flush()
        (run if groupable(node) else nodes).append(node)
    flush()
    graph.nodes = nodes
    return folded
