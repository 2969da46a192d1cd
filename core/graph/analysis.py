"""Dataflow facts of a graph, computed in one place (as torch.fx keeps ``Node.users``).

``analyze(graph)`` walks the nodes once and returns a ``Dataflow``; passes and the
lowering read it instead of rebuilding their own sets. Its fields, by value id:

- ``producer``: value id -> the functional node making it (absent for graph inputs).
- ``position``: ``id(node)`` -> its index in ``graph.nodes``; a grouped node's members
  (``node.members``) map to the group's index.
- ``uses``: value id -> the indices of the nodes reading it, in order, once per input
  slot (``mul(x, x)`` reads ``x`` twice). Values no node reads are absent.
- ``last_use``: value id -> the index of the last node reading it, and
  ``len(graph.nodes)`` for the values that leave the call (outputs, gradients): a value
  is dead after ``last_use``. Values nothing reads are absent.
- ``written``: ids of the values an in-place node writes (its first ``op.mutates`` inputs;
  each member's, for a grouped optimizer update).
- ``escaping``: ids of the values that must stay materialized in memory of their own:
  returned, stored as a gradient, or read or written by an in-place node.
- ``views``: ids of the values view nodes make (they share their input's memory).
- ``aliases``: value id -> the ids of it and every view taken of it, transitively
  (values no view is taken of are absent: ``aliases_of`` gives ``{id}`` for them).

``single_use(id)`` is the condition for folding a value's producer into its one reader
(fusion, copy elision): one node input reads it and it does not escape.

The facts describe the graph as it was when ``analyze`` ran: a pass that rewrites
nodes analyzes again, or updates the few facts it keeps using itself (reinplace.py).
"""
from __future__ import annotations

from dataclasses import dataclass, field


def is_view(node) -> bool:
    """Whether ``node`` makes a view: a value sharing its first input's memory."""
    return not node.inplace and node.op.kind == "view"


@dataclass
class Dataflow:
    producer: dict = field(default_factory=dict)  # value id -> Node
    position: dict = field(default_factory=dict)  # id(node) -> index in graph.nodes
    uses: dict = field(default_factory=dict)  # value id -> [node index, ...]
    last_use: dict = field(default_factory=dict)  # value id -> node index (len(nodes): leaves the call)
    written: set = field(default_factory=set)
    escaping: set = field(default_factory=set)
    views: set = field(default_factory=set)
    aliases: dict = field(default_factory=dict)  # value id -> {ids sharing its memory through views}

    def single_use(self, value_id: int) -> bool:
        return len(self.uses.get(value_id, ())) == 1 and value_id not in self.escaping

    def aliases_of(self, value_id: int) -> set:
        return self.aliases.get(value_id, {value_id})


def analyze(graph) -> Dataflow:
    df = Dataflow()
    for i, node in enumerate(graph.nodes):
        df.position[id(node)] = i
        for member in node.members or ():
            df.position[id(member)] = i
        for v in node.inputs:
            df.uses.setdefault(v.id, []).append(i)
            df.last_use[v.id] = i
        if node.inplace:
            for writer in node.members or [node]:  # a grouped update writes each member's leading inputs
                df.written.update(v.id for v in writer.inputs[:writer.op.mutates])
            df.escaping.update(v.id for v in node.inputs)
            continue
        df.producer[node.output.id] = node
        if is_view(node) and node.inputs:
            base, out = node.inputs[0].id, node.output.id
            df.views.add(out)
            for members in df.aliases.values():  # a view of a view aliases the first base too
                if base in members:
                    members.add(out)
            df.aliases.setdefault(base, {base}).add(out)
    end = len(graph.nodes)
    for v in [*graph.outputs, *(g for _, g in graph.grads)]:
        df.last_use[v.id] = end
        df.escaping.add(v.id)
    return df
