"""The op registry: every primitive op is declared once with ``defop``.

A declaration carries the shape/dtype rule (``infer``, which raises the
user-facing error), one implementation per backend, and the vector-Jacobian
product written in Tensor ops (so it runs on any backend and can itself be
differentiated). ``apply`` is the single path from a Tensor call to a backend
kernel and, when gradients are wanted, to a node in the autograd graph.
"""
from __future__ import annotations

import inspect
from dataclasses import dataclass, field
from typing import Any, Callable

from .. import autograd
from ..kernels import Elementwise, Epilogue, Fused, Reduction, View

OPS: dict[str, "Op"] = {}

# What an op does to memory, for passes and backends to classify it without reading its
# kernels (tinygrad's op groups): set by ``defop`` (given, or derived from the kernels).
KINDS = ("elementwise", "view", "reduce", "index", "matmul", "inplace", "other")


@dataclass(eq=False)
class Op:
    name: str
    infer: Callable
    vjp: Callable | None = None
    impls: dict[str, Any] = field(default_factory=dict)
    inplace: bool = False  # writes into its inputs; never recorded for autograd
    mutates: int = 1  # for in-place ops: how many leading inputs it writes
    # Whether the vjp reads its inputs' values (not just shapes): only then is an
    # in-place change of an input before backward an error (views, add, copy... are free).
    reads_inputs: bool = True
    # Whether the vjp takes ``needs``: one bool per input, True where a gradient is wanted
    # (PyTorch's output_mask). Such a vjp computes nothing for the others (returns None).
    vjp_takes_needs: bool = False
    kind: str = "other"  # one of KINDS

    def __repr__(self) -> str:
        return f"Op({self.name})"


def defop(name: str, *, infer: Callable, vjp: Callable | None = None,
          inplace: bool = False, mutates: int = 1, reads_inputs: bool | None = None,
          kind: str | None = None, **impls) -> Op:
    """Declare a primitive. ``impls`` maps a backend name to its kernel, e.g.
    ``numpy=np.add``. Backends added later attach theirs with ``bind``.
    ``reads_inputs`` defaults to True, and to False for views. ``kind`` (one of ``KINDS``)
    defaults to what the kernels say: a view, an elementwise expression, a reduction..."""
    if name in OPS:
        raise ValueError(f"op {name!r} declared twice")
    if reads_inputs is None:
        reads_inputs = not isinstance(impls.get("wgsl"), View)
    takes_needs = vjp is not None and "needs" in inspect.signature(vjp).parameters
    kind = kind or _derived_kind(name, inplace, impls.get("wgsl"))
    if kind not in KINDS:
        raise ValueError(f"op {name!r}: kind must be one of {KINDS}, got {kind!r}")
    op = Op(name, infer, vjp, dict(impls), inplace, mutates, reads_inputs, takes_needs, kind)
    OPS[name] = op
    return op


def _derived_kind(name: str, inplace: bool, wgsl) -> str:
    if inplace:
        return "inplace"
    if isinstance(wgsl, View):
        return "view"
    if isinstance(wgsl, (Elementwise, Fused)):
        return "elementwise"
    if isinstance(wgsl, Epilogue) or name == "matmul":
        return "matmul"
    if isinstance(wgsl, Reduction):
        return "reduce"
    return "other"


def bind(backend: str, **kernels) -> None:
    """Attach kernels for one backend to already-declared ops, by op name."""
    for name, kernel in kernels.items():
        OPS[name].impls[backend] = kernel


class OpError(ValueError):
    """Bad input to an op: names the op, the shapes and dtypes involved."""


def common_device(op_name: str, tensors) -> str:
    device = tensors[0].device
    for t in tensors[1:]:
        if t.device != device:
            desc = ", ".join(f"{tuple(x.shape)} on {x.device}" for x in tensors)
            raise RuntimeError(f"{op_name}: expected all tensors on the same device, got {desc}; "
                               f"move them with .to({device!r})")
    return device


# webgrad.profiler's hook: the recording profile (core/profiler.py) or None. While None,
# ``apply`` and ``apply_inplace`` pay one check for it.
PROFILER: Any = None


# webgrad.compile's hook (core/graph/trace.py): the active Tracer, which records every op
# into a graph while a compiled function is traced, or None. One check per op while None.
TRACER = None


def apply(op: Op, *inputs, **attrs):
    """Run ``op`` on Tensors ``inputs`` and record it for autograd when needed.
    This is the hot path of every op: keep it lean."""
    prof = PROFILER
    if prof is not None:  # profiling: time this op as one event
        mark = prof.begin_op(op, inputs)
    device = inputs[0].device
    for t in inputs:
        if t.device != device:
            common_device(op.name, inputs)
    shape, dtype = op.infer(*inputs, **attrs)
    data = get_backend(device).run(op, inputs, attrs, shape, dtype)
    out = Tensor._make(data, shape, dtype, device)
    if op.vjp is not None and autograd.is_grad_enabled():
        for t in inputs:
            if t._requires_grad:
                autograd.record(op, inputs, attrs, out)
                break
    if TRACER is not None:
        TRACER.record(op, inputs, attrs, out)
    if prof is not None:
        prof.end_op(mark, op, inputs, out)
    return out


def apply_inplace(op: Op, *tensors, **attrs):
    """Run an in-place op that overwrites the data of its first ``op.mutates``
    tensors (an optimizer step, ``fill_``, ``__setitem__``) and bump their
    version counters so autograd notices stale saved values."""
    if TRACER is not None and TRACER.record_inplace(op, tensors, attrs):
        return tensors[0]  # a replay collecting an optimizer's per-step scalars: nothing runs
    prof = PROFILER
    if prof is not None:  # profiling: time this op as one event
        mark = prof.begin_op(op, tensors)
    device = common_device(op.name, tensors) if len(tensors) > 1 else tensors[0].device
    written = tensors[:op.mutates]
    for t in written:
        autograd.check_inplace_allowed(op.name, t)
    op.infer(*tensors, **attrs)
    get_backend(device).run_inplace(op, tensors, attrs)
    for t in written:
        t._bump_version()
    if prof is not None:
        prof.end_op(mark, op, tensors, None)
    return tensors[0]


from ..backend import get_backend  # noqa: E402  (imported last: backends import ops)
from ..tensor import Tensor  # noqa: E402
