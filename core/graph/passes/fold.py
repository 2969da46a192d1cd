"""Constant folding: a functional node whose inputs are all constants (tensors made
during the trace that nothing outside holds, and that no node writes) is computed
once, at compile time, and becomes a constant itself.

Captured tensors are never folded: a parameter or a buffer the caller holds may
change between calls.
"""
from __future__ import annotations

from ..analysis import analyze


class _Slot:
    __slots__ = ("_data",)

    def __init__(self, data):
        self._data = data


def fold_constants(graph) -> int:
    from ...backend import get_backend

    backend = get_backend(graph.device)
    written = analyze(graph).written
    kept, folded = [], 0
    for node in graph.nodes:
        if (not node.inplace and node.output.id not in written and node.inputs
                and all(v.source == "const" and v.id not in written for v in node.inputs)):
            out = node.output
            out.data = backend.run(node.op, [_Slot(v.data) for v in node.inputs], node.attrs, out.shape, out.dtype)
            out.source = "const"
            folded += 1
            continue
        kept.append(node)
    graph.nodes = kept
    return folded
