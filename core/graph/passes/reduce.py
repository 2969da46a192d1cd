"""Reductions with spliced chains: an elementwise chain that makes a reduction's input
(the compare and cast of ``(target != ignore_index).sum()``) runs as the reduction reads
each element, and a chain that consumes its result (a mean's division, a cast) runs as
each result is stored. The chains' values are never written to memory and read back:
one dispatch instead of two or three.

A reduction (an op of kind ``reduce`` whose backend kernel can take spliced chains,
``Backend.reduction_entry``: on WebGPU sum, prod, amax, amin, of float32 or integers) takes
- a prologue: the chain making its input, when that input feeds only the reduction and
  the chain reads one tensor of the input's shape (the one reduced) and otherwise
  only one-element tensors;
- an epilogue: the chain consuming its result, when the result feeds only that chain,
  the chain's result has the reduction's shape and its other inputs are one-element
  tensors.
No in-place node may lie between the parts (the fused node takes the last part's
place), and the one-element inputs, at most MAX_EXTRA_INPUTS in all, are extra
bindings of the kernel. A chain that is one reduction's epilogue is not another's
prologue. The node's kernel record is a ``Reduction`` of that entry; backend/webgpu/reduce.py
splices its chains into reduce.wgsl.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from ...backend import get_backend
from ...kernels import Reduction
from ...ops.registry import Op
from ..analysis import analyze
from ..ir import Node
from .fuse import _numpy_chain, _outside_inputs, chain_record, elementwise_chain

MAX_EXTRA_INPUTS = 4
_DTYPES = ("float32", "int32", "int64")  # what reduce.wgsl accumulates (int64 as i32)


def _is_reduction(node, backend) -> bool:
    return (not node.inplace and node.op.kind == "reduce" and backend.reduction_entry(node.op) is not None
            and node.output.dtype.name in _DTYPES and node.inputs[0].dtype is node.output.dtype)


def _one_element(values) -> bool:
    return all(math.prod(v.shape) == 1 for v in values)


def _prologue(reduction, chains, flow, last_write):
    """(chain, reduced tensor, one-element inputs, the chain's node) making ``reduction``'s
    input, or None."""
    v = reduction.inputs[0]
    found = chains.get(v.id)
    if found is None or found[0] < last_write or not flow.single_use(v.id) or math.prod(v.shape) <= 1:
        return None
    _, chain, node = found
    outside = _outside_inputs(chain)
    main = [u for u in outside if u.shape == v.shape]
    others = [u for u in outside if u.shape != v.shape]
    if len(main) != 1 or not _one_element(others) or len(others) > MAX_EXTRA_INPUTS:
        return None
    return chain, main[0], others, node


def _reduction_node(reduction, prologue, epilogue, epilogue_others, backend) -> Node:
    if prologue is not None:
        chain, main, others, _ = prologue
        pro, inputs = chain_record(chain, [main, *others], backend), [main, *others]
        numpy_prologue = _numpy_chain(pro, [n.output.dtype for n in chain])
    else:
        chain, pro, inputs, numpy_prologue = [], None, [reduction.inputs[0]], None
    epi, numpy_epilogue = None, None
    if epilogue is not None:
        epi = chain_record(epilogue, [reduction.output, *epilogue_others], backend)
        numpy_epilogue = _numpy_chain(epi, [n.output.dtype for n in epilogue])
    split = len(inputs)
    numpy_reduce, reduced_dtype = reduction.op.impls["numpy"], reduction.output.dtype.np

    def run_numpy(x, *others, **attrs):
        if numpy_prologue is not None:
            x = numpy_prologue(x, *others[:split - 1])
        r = np.asarray(numpy_reduce(x, **attrs)).astype(reduced_dtype, copy=False)
        return r if numpy_epilogue is None else numpy_epilogue(r, *others[split - 1:])
    parts = [*chain, reduction, *(epilogue or [])]
    op = Op("_".join(n.op.name for n in parts), infer=lambda *a, **k: None, kind="reduce",
            impls={"wgsl": Reduction(backend.reduction_entry(reduction.op), pro, epi), "numpy": run_numpy})
    last = parts[-1]
    return Node(op, [*inputs, *epilogue_others], dict(reduction.attrs), last.output, fused=parts, source=last.source)


@dataclass
class _Fusion:
    """A reduction with the chains taken so far; ``place``: the node it will replace."""
    pos: int
    place: Node
    reduction: Node
    prologue: tuple | None
    epilogue: list = field(default_factory=list)
    others: list = field(default_factory=list)  # the epilogue's one-element inputs
    absorbed: list = field(default_factory=list)

    def extras(self) -> int:
        return len(self.others) + (len(self.prologue[2]) if self.prologue else 0)


def fuse_reductions(graph, backend=None) -> int:
    """Splice prologue and epilogue chains into reductions, in place; returns how many
    chains were taken. ``backend``: the one whose rules apply, by default the graph device's."""
    backend = backend or get_backend(graph.device)
    flow = analyze(graph)
    chains: dict[int, tuple] = {}  # chain output id -> (position, chain, node) of elementwise nodes
    fusions: dict[int, _Fusion] = {}  # output id -> the reduction (with chains) making it
    last_write = -1
    for pos, node in enumerate(graph.nodes):
        if node.inplace:
            last_write = pos
            continue
        if _is_reduction(node, backend):
            fusions[node.output.id] = _Fusion(pos, node, node, _prologue(node, chains, flow, last_write))
            continue
        chain = elementwise_chain(node, backend)
        if chain is None:
            continue
        outside = _outside_inputs(chain)
        for v in outside:
            found = fusions.get(v.id)
            if (found is None or found.pos < last_write or not flow.single_use(v.id)
                    or node.output.shape != v.shape):
                continue
            others = [u for u in outside if u is not v and all(u is not w for w in found.others)]
            if not _one_element(others) or found.extras() + len(others) > MAX_EXTRA_INPUTS:
                continue
            del fusions[v.id]  # the epilogue grows: this chain runs on the previous one's result
            fusions[node.output.id] = _Fusion(pos, node, found.reduction, found.prologue, found.epilogue + chain,
                                              found.others + others, found.absorbed + [found.place])
            break
        else:
            chains[node.output.id] = (pos, chain, node)
    replaced: dict[int, Node] = {}
    absorbed: set[int] = set()
    taken = 0
    for f in fusions.values():
        if f.prologue is None and not f.epilogue:
            continue
        replaced[id(f.place)] = _reduction_node(f.reduction, f.prologue, f.epilogue or None, f.others, backend)
        absorbed.update(id(n) for n in f.absorbed + ([f.prologue[3]] if f.prologue else []))
        taken += len(f.absorbed) + (f.prologue is not None)
    graph.nodes = [replaced.get(id(n), n) for n in graph.nodes if id(n) not in absorbed]
    return taken
