"""Matmul epilogues: an elementwise chain that consumes a matmul's product (a bias
add, an activation, backward's ReLU mask) runs inside the product's stores, so the
product is never written to memory and read back: one dispatch instead of two.

A chain (a node ``fuse_elementwise`` made, or a single elementwise node) takes the
product when: the product feeds only this chain and is not returned; the chain's
result has the product's shape; the product, the result and the chain's other
inputs (two at most, extra bindings of the kernel) are float32; the product's kernel can
take an epilogue (``Backend.takes_epilogue``: on WebGPU, matmul.wgsl's); and no in-place
node lies between the two (the product moves to the chain's place, after any write that
could change its operands). The new node's kernel record is an ``Epilogue`` whose
chain reads the product as input 0; the WebGPU launcher (backend/webgpu/matmul.py)
splices it into matmul.wgsl, and runs it as a second dispatch where it cannot address
an input in place.
"""
from __future__ import annotations

import numpy as np

from ...backend import get_backend
from ...kernels import Epilogue
from ...ops.registry import Op
from ..analysis import analyze
from ..ir import Node
from .fuse import _numpy_chain, _outside_inputs, chain_record, elementwise_chain

MAX_EXTRA_INPUTS = 2


def _epilogue_node(product_node, chain, others, backend) -> Node:
    record = chain_record(chain, [product_node.output, *others], backend)
    numpy_chain = _numpy_chain(record, [n.output.dtype for n in chain])
    op = Op("matmul_" + "_".join(n.op.name for n in chain), infer=lambda *a, **k: None,
            kind="matmul", flops=product_node.op.flops,
            impls={"wgsl": Epilogue(record), "numpy": lambda a, b, *ext: numpy_chain(np.matmul(a, b), *ext)})
    return Node(op, [*product_node.inputs, *others], {}, chain[-1].output, fused=[product_node, *chain],
                source=chain[-1].source)


def fuse_matmul_epilogues(graph, backend=None) -> int:
    """Fold products into the chains that consume them, in place; returns how many.
    ``backend``: the one whose rules apply, by default the graph device's."""
    backend = backend or get_backend(graph.device)
    flow = analyze(graph)
    products: dict[int, tuple] = {}  # value id -> (position, matmul node)
    replaced: dict[int, Node] = {}  # id(chain node) -> its epilogue node
    absorbed: set[int] = set()
    last_write = -1
    for pos, node in enumerate(graph.nodes):
        if node.inplace:
            last_write = pos
            continue
        if node.op.kind == "matmul" and backend.takes_epilogue(node.op):
            products[node.output.id] = (pos, node)
            continue
        chain = elementwise_chain(node, backend)
        if chain is None or node.output.dtype.name != "float32":
            continue
        outside = _outside_inputs(chain)
        for v in outside:
            found = products.get(v.id)
            if (found is None or not flow.single_use(v.id) or v.shape != node.output.shape
                    or v.dtype.name != "float32" or found[0] < last_write):
                continue
            others = [u for u in outside if u is not v]
            if len(others) > MAX_EXTRA_INPUTS or any(u.dtype.name != "float32" for u in others):
                continue
            replaced[id(node)] = _epilogue_node(found[1], chain, others, backend)
            absorbed.add(id(found[1]))
            break
    graph.nodes = [replaced.get(id(n), n) for n in graph.nodes if id(n) not in absorbed]
    return len(absorbed)
