"""What a backend is: the ``Backend`` protocol that the numpy and WebGPU backends implement.

Eager ops call ``run`` and ``run_inplace``. ``webgrad.compile`` (graph/compile.py) traces a
function into a device-neutral graph, runs the passes the backend names (``passes``, each
fusion asking ``can_fuse``) and lowers the result to a ``Plan``: a list of ``Step`` records
the plan runs through ``run``/``run_inplace``. From then on the backend owns the replay:
``record`` runs the plan once while watching it, and gives back what later calls run
instead (WebGPU: a recorded dispatch list, webgpu/replay.py; numpy: a flat list of calls
into planned arrays, numpy/replay.py), as tinygrad's ``Compiled.graph`` belongs to its
device. The graph layer imports no backend module but this one and ``get_backend``.
"""
from __future__ import annotations

from typing import Any, Protocol, Sequence


class Unfit(Exception):
    """A call's arguments are laid out unlike the ones a listing recorded: the plan runs its
    steps instead."""


class Listing(Protocol):
    """A plan's step made ready to re-run by its backend."""

    def run(self, plan, flat_args) -> Any:
        """One call: the result, as ``plan.finish`` gives it; raises ``Unfit`` to decline."""

    def describe(self) -> str:
        """One line for ``explain()``."""


class Backend(Protocol):
    # The graph passes this backend wants, in order, by the names ``graph.passes.PASSES``
    # gives them (their counts are the graph's ``stats``); a name may come twice.
    passes: Sequence[str]
    # Whether ``dispatches()`` counts something (``explain()`` reports it per replay).
    counts_dispatches: bool

    def run(self, op, inputs, attrs, shape, dtype) -> Any:
        """``op``'s result for ``inputs`` (objects with ``._data``), of ``shape`` and ``dtype``."""

    def run_inplace(self, op, tensors, attrs) -> None:
        """Run the in-place ``op``: it writes into its leading ``op.mutates`` inputs."""

    def run_into(self, op, inputs, attrs, out) -> bool:
        """Write ``op``'s result straight into ``out``'s memory (``out`` is one of ``inputs``, of
        the result's shape and dtype: an in-place method's op); False where this backend can't."""

    def contiguous(self, data) -> Any:
        """A fresh contiguous copy of ``data`` (a compiled step's written constants)."""

    def can_fuse(self, node) -> bool:
        """Whether this elementwise node (its op's ``kind`` is ``"elementwise"``) may run inside
        a generated fused kernel on this backend (inductor's ``can_fuse``)."""

    def can_fuse_inputs(self, inputs) -> bool:
        """Whether one fused kernel may read these outside inputs (graph ``Value``s)."""

    def fused_record(self, nodes) -> tuple:
        """The per-node kernel records a fused record carries for this backend (``Fused.kernels``)."""

    def reduction_entry(self, op) -> str | None:
        """The entry a fused reduction of ``op`` runs (its ``kind`` is ``"reduce"``), or None
        where its kernel cannot take spliced chains."""

    def takes_epilogue(self, op) -> bool:
        """Whether ``op``'s kernel (its ``kind`` is ``"matmul"``) can run an elementwise chain
        on its results as it stores them (graph/passes/epilogue.py)."""

    def group_capacity(self, arity: int) -> int:
        """How many optimizer updates of ``arity`` inputs one grouped kernel may take."""

    def dispatches(self) -> int | None:
        """Kernels issued so far (a counter), or None where the backend does not count."""

    def record(self, plan, flat_args) -> tuple[Any, Listing | str]:
        """Run ``plan`` once (``plan.run(flat_args, recording)``) while watching it: the call's
        result and a ``Listing`` for later calls, or the reason there is none."""
