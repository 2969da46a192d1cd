"""Kernel records: how an op names the WGSL code that runs it on WebGPU.

A kernel is data. Op declarations carry a record (``wgsl=...``); the WebGPU
backend turns records into pipelines, caching them by the record itself, so no
cache key is ever written by hand. Nothing here imports wgpu.

- ``Elementwise(expr)``: an expression over inputs ``a``, ``b``, ``c`` (typed
  ``A``, ``B``; output type ``O``) spliced into ``unary.wgsl``, ``binary.wgsl``
  or ``ternary.wgsl``. ``expr`` may be a dict keyed by element kind
  (``"f32"``, ``"i32"``, ``"u32"``, ``"<in>-><out>"`` or ``"*"``). This is also
  what a later fusion pass composes.
- ``Kernel(file, entry, launch)``: a hand-written entry point in ``file`` (for the
  optimizer ops, the update function of ``optim.wgsl`` that optim_step.wgsl calls);
  ``launch`` is the import path (``"module.function"`` under
  ``webgrad.backend.webgpu``) of the Python launcher that sizes the grid and
  packs the ``Params`` uniform. Besides that entry a launcher may run
  strided copies (``unary.wgsl``) to lay out operands or outputs; a write with
  a basic key (``setitem``, ``index_put``) runs only such a copy.
- ``View(kind)``: no kernel at all; the backend returns a strided view.
- ``Fused``, ``Epilogue``, ``Reduction``, ``Grouped``: the records of nodes the graph passes make
  (``webgrad.graph.passes``).
- ``Program``: what one compiled pipeline is made of (file, entry, types, spliced
  expression, override constants, and the record of a generated source). The
  pipeline cache is keyed by this record; ``Program.of`` is the one place it is made.

Every record names its launcher the same way, in a ``launch`` import path (a field of
``Kernel``, a class attribute of the others): the backend imports it directly
(``webgpu.backend.launcher_of``), so no registry is filled by side-effect imports.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, ClassVar


@dataclass(frozen=True)
class Elementwise:
    expr: str | dict[str, str]  # an expression, or one per kind
    launch: ClassVar[str] = "elementwise.run"

    def __post_init__(self):
        # Records key caches (a fused chain's source), so a per-kind dict is kept as sorted pairs.
        if isinstance(self.expr, dict):
            object.__setattr__(self, "expr", tuple(sorted(self.expr.items())))

    def expression(self, in_kind: str, out_kind: str) -> str | None:
        if isinstance(self.expr, str):
            return self.expr
        exprs = dict(self.expr)
        for key in (f"{in_kind}->{out_kind}", f"*->{out_kind}", in_kind, "*"):
            if key in exprs:
                return exprs[key]
        return None


@dataclass(frozen=True)
class Kernel:
    file: str
    entry: str
    launch: str  # "module.function" under webgrad.backend.webgpu
    constants: tuple = field(default=())  # ((name, value), ...) pipeline-override constants


@dataclass(frozen=True)
class View:
    kind: str  # "reshape", "permute", "expand", "slice"
    launch: ClassVar[str] = "views.run"


@dataclass(frozen=True)
class Fused:
    """A fused elementwise chain (graph.passes.fuse): steps of ``(op name, args, input dtype
    names, output dtype name, attrs)``, args being ``("in", k)`` (the k-th outside input) or
    ``("t", j)`` (step j's result); ``kernels``: each step's ``Elementwise`` record (its op's own)."""
    steps: tuple
    inputs: int
    kernels: tuple = ()
    launch: ClassVar[str] = "fused.launch_fused"


@dataclass(frozen=True)
class Epilogue:
    """A matmul whose stored values run through ``chain`` (graph.passes.epilogue); chain input 0
    is the product."""
    chain: Fused
    launch: ClassVar[str] = "matmul.matmul_epilogue"


@dataclass(frozen=True)
class Reduction:
    """A reduction (``entry``: sum, prod, amax or amin) with elementwise chains spliced in
    (graph.passes.reduce): ``prologue`` makes each element as it is read (its input 0 is the
    reduced tensor), ``epilogue`` runs on each result as it is stored (its input 0 is the
    result); either may be None. Their other inputs are one-element tensors."""
    entry: str
    prologue: Fused | None
    epilogue: Fused | None
    launch: ClassVar[str] = "reduce.fused_reduction"


@dataclass(frozen=True)
class Grouped:
    """``count`` calls of the optimizer op ``op`` (its name), ``arity`` inputs each, in one
    dispatch (graph.passes.group)."""
    op: str
    count: int
    arity: int
    launch: ClassVar[str] = "optim_group.optim_group"


@dataclass(frozen=True)
class Program:
    file: str  # the .wgsl file (for a generated source: the layout it follows)
    entry: str
    types: tuple = ()  # (alias, element kind) pairs, e.g. (("T", "f32"),)
    expr: str | None = None  # an expression spliced into the file
    constants: tuple = ()  # sorted (name, value) pipeline-override constants
    generated: Any = None  # the record a generated source is made from (Fused, Grouped...), else None

    @classmethod
    def of(cls, file, entry, types=(), expr=None, constants=None, generated=None) -> "Program":
        return cls(file, entry, tuple(types), expr, tuple(sorted((constants or {}).items())), generated)
