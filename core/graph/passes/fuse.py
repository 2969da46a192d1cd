"""Elementwise fusion: a chain of elementwise nodes becomes one node, one kernel.

A node joins the chain of a producer when the producer is elementwise (its WebGPU
record is an ``Elementwise`` expression), its output feeds only this node, has this
node's shape (outside inputs may broadcast) and no in-place write lies between
them. The fused node's op is a ``FusedOp`` whose kernel record lists the chain's
steps with each op's own ``Elementwise`` record (from its ``defop``); the
WebGPU backend turns the record into one generated WGSL kernel
(``backend/webgpu/fused.py``), the numpy kernel runs the steps in turn (in one array where
compile's numpy replay gives it one, see ``_numpy_chain``).

A fused kernel reuses the unary/binary/ternary shader layouts, so a chain takes at
most three outside inputs (two of one dtype, or the second and third of one dtype).
"""
from __future__ import annotations

import numpy as np

from ...backend.numpy_backend import takes_out, writes_out
from ...kernels import Elementwise, Fused
from ...ops.registry import OPS, Op
from ..ir import Node

_ATTRS_OK = {"dtype"}  # attrs the generated kernel follows (through the output type)


def _fusable(node) -> bool:
    if node.inplace or not isinstance(node.op.impls.get("wgsl"), Elementwise):
        return False
    if set(node.attrs) - _ATTRS_OK or "wg_check_divisor" in str(node.op.impls["wgsl"].expr):
        return False  # an integer division reports errors through an extra binding
    return node.op.name in OPS


def elementwise_chain(node):
    """The elementwise nodes ``node`` stands for (a fused chain, or itself), or None."""
    if isinstance(node.op.impls.get("wgsl"), Fused):
        return node.fused
    return [node] if _fusable(node) else None


def _fits_layout(inputs) -> bool:
    dts = [v.dtype for v in inputs]
    return len(dts) <= 3 and (len(dts) != 2 or dts[0] is dts[1]) and (len(dts) != 3 or dts[1] is dts[2])


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


def uses_and_escaping(graph) -> tuple[dict, set]:
    """How many node inputs read each value, and the values that must stay materialized:
    returned, stored as a gradient, or read or written by an in-place node."""
    uses: dict[int, int] = {}
    for node in graph.nodes:
        for v in node.inputs:
            uses[v.id] = uses.get(v.id, 0) + 1
    escaping = {v.id for v in graph.outputs} | {g.id for _, g in graph.grads}
    for node in graph.nodes:
        if node.inplace:
            escaping.update(v.id for v in node.inputs)
    return uses, escaping


def fuse_elementwise(graph) -> int:
    """Fuse elementwise chains in place; returns how many nodes were folded into others."""
    uses, escaping = uses_and_escaping(graph)
    producer: dict[int, tuple] = {}  # value id -> (position, group) for fusable node outputs
    groups: dict[int, list] = {}  # id(root node) -> chain of nodes, in order
    last_write = -1
    for pos, node in enumerate(graph.nodes):
        if node.inplace:
            last_write = pos
            continue
        if not _fusable(node):
            continue
        chain = [node]
        for v in node.inputs:
            found = producer.get(v.id)
            if found is None or uses.get(v.id) != 1 or v.id in escaping or v.shape != node.output.shape:
                continue
            start, group = found
            if start <= last_write or any(n in chain for n in group):
                continue
            trial = sorted(group + chain, key=graph.nodes.index)
            if _fits_layout(_outside_inputs(trial)):
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
        nodes.append(node if root_chain is None else _fused_node(root_chain))
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


def chain_record(chain, outside) -> Fused:
    """The ``Fused`` record of ``chain`` reading its outside inputs in the order ``outside``."""
    slot = {v.id: k for k, v in enumerate(outside)}
    step_of = {n.output.id: j for j, n in enumerate(chain)}
    steps = []
    for n in chain:
        args = tuple(("t", step_of[v.id]) if v.id in step_of else ("in", slot[v.id]) for v in n.inputs)
        steps.append((n.op.name, args, tuple(v.dtype.name for v in n.inputs), n.output.dtype.name,
                      tuple(sorted(n.attrs.items()))))
    return Fused(tuple(steps), len(outside), tuple(n.op.impls["wgsl"] for n in chain))


def _fused_node(chain) -> Node:
    outside = _outside_inputs(chain)
    record = chain_record(chain, outside)
    name = "fused_" + "_".join(n.op.name for n in chain)
    op = Op(name, infer=lambda *a, **k: None,
            impls={"wgsl": record, "numpy": _numpy_chain(record, [n.output.dtype for n in chain])})
    return Node(op, outside, {}, chain[-1].output, fused=list(chain), source=chain[-1].source)
