"""Elementwise fusion: a chain of elementwise nodes becomes one node, one kernel.

A node joins the chain of a producer when the producer is elementwise (its op's
``kind``) and its backend can run it in a fused kernel (``Backend.can_fuse``), its output
feeds only this node, has this node's shape (outside inputs may broadcast) and no in-place
write lies between them; the chain's outside inputs must suit the backend too
(``Backend.can_fuse_inputs``: on WebGPU a fused kernel reuses the unary/binary/ternary
shader layouts). The fused node's op has a ``Fused`` kernel record listing the chain's
steps, with the per-step records its backend asks for (``Backend.fused_record``: WebGPU's
``Elementwise`` expressions); the WebGPU backend turns the record into one generated WGSL
kernel (``backend/webgpu/fused.py``), the numpy kernel runs the steps in turn (in one array
where compile's numpy replay gives it one, see ``_numpy_chain``).
"""
from __future__ import annotations

import numpy as np

from ...backend import get_backend
from ...backend.numpy.arrays import takes_out, writes_out
from ...kernels import Fused
from ...ops.registry import OPS, Op
from ..analysis import analyze
from ..ir import Node


def _fusable(node, backend) -> bool:
    """A declared elementwise op (not one a pass made) that ``backend`` can fuse."""
    return (not node.inplace and node.op.kind == "elementwise" and OPS.get(node.op.name) is node.op
            and backend.can_fuse(node))


def elementwise_chain(node, backend):
    """The elementwise nodes ``node`` stands for (a fused chain, or itself), or None."""
    if isinstance(node.op, FusedOp):
        return node.fused
    return [node] if _fusable(node, backend) else None


class FusedOp(Op):
    """The op of a fused elementwise node: its kernels run the chain ``node.fused``."""


def _numpy_chain(record: Fused, out_dtypes):
    """The numpy kernel of a fused node: the steps' own numpy kernels in order. Given ``out``
    (compile's numpy replay hands it a planned array), a step whose kernel writes into an array
    and whose dtype is the result's writes there whenever what ``out`` holds is read by that
    step alone (each step's result is read by exactly one later step), so a chain like
    ``relu(x @ w + b)`` runs in one array; the last result lands in ``out`` in any case."""
    steps = [(OPS[name].impls["numpy"], args, dict(attrs), dtype.np)
             for (name, args, _, _, attrs), dtype in zip(record.steps, out_dtypes)]
    final = out_dtypes[-1].np
    into, holder = [], None  # per step: whether it writes into out; the step whose result out holds
    for kernel, args, attrs, dtype in steps:
        reads = {i for kind, i in args if kind == "t"}
        free = holder is None or holder in reads
        into.append(free and dtype == final and writes_out(kernel, attrs))
        holder = len(into) - 1 if into[-1] else (None if holder in reads else holder)

    @takes_out
    def run(*arrays, out=None):
        temps: list = []
        for (kernel, args, attrs, dtype), write in zip(steps, into):
            vals = [arrays[i] if kind == "in" else temps[i] for kind, i in args]
            if out is not None and write:
                temps.append(kernel(*vals, out=out, **attrs))
            else:
                temps.append(np.asarray(kernel(*vals, **attrs)).astype(dtype, copy=False))
        if out is not None and temps[-1] is not out:
            np.copyto(out, temps[-1])
            return out
        return temps[-1]
    return run


def fuse_elementwise(graph, backend=None) -> int:
    """Fuse elementwise chains in place; returns how many nodes were folded into others.
    ``backend``: the one whose rules apply, by default the graph device's."""
    backend = backend or get_backend(graph.device)
    flow = analyze(graph)
    producer: dict[int, tuple] = {}  # value id -> (position, group) for fusable node outputs
    groups: dict[int, list] = {}  # id(root node) -> chain of nodes, in order
    last_write = -1
    for pos, node in enumerate(graph.nodes):
        if node.inplace:
            last_write = pos
            continue
        if not _fusable(node, backend):
            continue
        chain = [node]
        for v in node.inputs:
            found = producer.get(v.id)
            if found is None or not flow.single_use(v.id) or v.shape != node.output.shape:
                continue
            start, group = found
            if start <= last_write or any(n in chain for n in group):
                continue
            trial = sorted(group + chain, key=graph.nodes.index)
            if backend.can_fuse_inputs(_outside_inputs(trial)):
                chain = trial
                for n in group:
                    groups.pop(id(n), None)
        chain.sort(key=lambda n: graph.nodes.index(n))
        first = graph.nodes.index(chain[0])
        producer[node.output.id] = (first, chain)
        groups[id(node)] = chain
    removed = 0
    by_root = {id(chain[-1]): chain for chain in groups.values() if len(chain) > 1}
    absorbed = {id(n) for chain in by_root.values() for n in chain[:-1]}
    nodes = []
    for node in graph.nodes:
        if id(node) in absorbed:
            removed += 1
            continue
        root_chain = by_root.get(id(node))
        nodes.append(node if root_chain is None else _fused_node(root_chain, backend))
    graph.nodes = nodes
    return removed


def _outside_inputs(chain) -> list:
    made = {n.output.id for n in chain}
    seen: dict[int, object] = {}
    for n in chain:
        for v in n.inputs:
            if v.id not in made:
                seen.setdefault(v.id, v)
    return list(seen.values())


def chain_record(chain, outside, backend) -> Fused:
    """The ``Fused`` record of ``chain`` reading its outside inputs in the order ``outside``."""
    slot = {v.id: k for k, v in enumerate(outside)}
    step_of = {n.output.id: j for j, n in enumerate(chain)}
    steps = []
    for n in chain:
        args = tuple(("t", step_of[v.id]) if v.id in step_of else ("in", slot[v.id]) for v in n.inputs)
        steps.append((n.op.name, args, tuple(v.dtype.name for v in n.inputs), n.output.dtype.name,
                      tuple(sorted(n.attrs.items()))))
    return Fused(tuple(steps), len(outside), backend.fused_record(chain))


def _fused_node(chain, backend) -> Node:
    outside = _outside_inputs(chain)
    record = chain_record(chain, outside, backend)
    name = "fused_" + "_".join(n.op.name for n in chain)
    op = FusedOp(name, infer=lambda *a, **k: None, kind="elementwise",
                 impls={"wgsl": record, "numpy": _numpy_chain(record, [n.output.dtype for n in chain])})
    return Node(op, outside, {}, chain[-1].output, fused=list(chain), source=chain[-1].source)
