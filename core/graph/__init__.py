"""Graph mode: ``webgrad.compile`` traces a function into a small IR (``ir``), optimizes
it (``passes``) and replays it (``compile``)."""
from .compile import CompiledFunction, GraphBreak, compile  # noqa: A004  (torch.compile's name)
from .ir import Graph, Node, Value

__all__ = ["compile", "CompiledFunction", "GraphBreak", "Graph", "Node", "Value"]
