"""``webgrad.compile``'s replay on numpy: a flat list of calls into planned arrays.

``NumpyBackend.record`` makes it: a plan's first replay runs through the backend
(``Plan.run``) while it notes, per step, which of the step's inputs its result shares
memory with (a numpy kernel may return an input or a view of it). Later calls run a list
made from that, one call per step, with no slots and no per-step dispatch on the op, and:

- a step whose kernel writes into a given array (a numpy ufunc, matmul natively, a kernel
  marked ``takes_out``, a fused elementwise chain) writes its result into an array planned
  for it, when that result stays inside the call: it is not returned, not a gradient, not
  read or written by an in-place update or a check, shares memory with nothing that is, and
  came out fresh, of its shape and dtype, at the recording. Planned arrays are allocated
  once per plan and reused by every call, and a step reuses the array of a value whose last
  reader (or the last reader of a view of it) came before it, as passes/memory.py counts;
- any other step calls its kernel as the backend does (``NumpyBackend.kernel``), so its
  result is fresh each call.
"""
from __future__ import annotations

import weakref

import numpy as np

from .arrays import NP_MATMUL, counted, stored_result, takes_out, writes_out
from . import blas
from .blas import cpu_threads
from .wasm_gemm import IN_PYODIDE


class Recording:
    """What ``Plan.run`` shows a recording: after each step, the step's result, to see which
    of its inputs it shares memory with and whether it is a fresh array of its type."""

    def __init__(self, plan):
        self.steps = plan.steps
        self.done = -1  # marks come before the first step, then after each
        self.aliases: dict[int, set] = {}  # value id -> ids of the inputs it shares memory with
        self.fresh: set = set()  # value ids that came out as new contiguous arrays of their type

    def mark(self, env) -> None:
        if self.done >= 0:
            step = self.steps[self.done]
            out, dtype = step.out, step.dtype
            if out is not None:
                result = env[out]
                view = step.op.kind == "view"  # a view always shares, whatever it was here
                self.aliases[out] = {i for i in step.ids if isinstance(env[i], np.ndarray)
                                     and (view or np.may_share_memory(result, env[i]))}
                if (not self.aliases[out] and result.flags.c_contiguous and result.flags.owndata
                        and result.shape == step.shape and result.dtype == dtype.np and dtype.rounding is None):
                    self.fresh.add(out)
        self.done += 1


def _outside(plan) -> set:
    """Ids of the values a call's caller or its Python side sees: results, gradients, the
    inputs of in-place steps and of checks."""
    graph = plan.graph
    ids = {v.id for v in graph.outputs} | {g.id for _, g in graph.grads}
    for _, args in graph.checks:
        ids.update(a.id for a in args if hasattr(a, "id"))
    for step in plan.steps:
        if step.out is None:
            ids.update(step.ids)
    return ids


class NumpyList:
    """One plan's steps as a flat list of calls (see the module docstring)."""

    def __init__(self, plan, recording: Recording):
        backend = plan.backend
        steps = plan.steps
        # Values that share memory with a value seen outside are seen outside too.
        outside = _outside(plan)
        for step in reversed(steps):
            if step.out in outside:
                outside |= recording.aliases.get(step.out, set())
        # A planned array lives until the last reader of any value sharing memory with it.
        roots: dict[int, set] = {}  # value id -> the step results whose memory it may be
        sharing: dict[int, set] = {}  # step result id -> the values that may be its memory
        for out in (step.out for step in steps):
            if out is not None:
                roots[out] = {out}.union(*(roots.get(i, ()) for i in recording.aliases.get(out, ())))
                for root in roots[out]:
                    sharing.setdefault(root, set()).add(out)
        last_read: dict[int, int] = {}
        for n, step in enumerate(steps):
            for i in step.ids:
                last_read[i] = n
        free: dict[tuple, list] = {}  # (shape, dtype) -> planned arrays no live value uses
        dying: dict[int, list] = {}  # step -> planned arrays free after it
        self.planned = 0
        self.calls = []  # one function of env per step (and the optimizers' refresh before the first write)
        refresh = bool(plan.optimizers)
        for n, step in enumerate(steps):
            op, ids, attrs, out, shape, dtype = step.op, step.ids, step.attrs, step.out, step.shape, step.dtype
            if out is None:
                if getattr(op, "check", None):
                    self.calls.append(_check(op.check, weakref.ref(plan)))
                    continue
                if refresh:
                    self.calls.append(_refresh(weakref.ref(plan)))
                    refresh = False
                self.calls.append(_inplace(op.impls["numpy"], ids, attrs))
                continue
            kernel = op.impls.get("numpy")
            if kernel is NP_MATMUL:  # natively BLAS, with out=; in Pyodide chosen per call (wasm GEMM or not)
                kernel = _blas_matmul if not IN_PYODIDE else None
            if (kernel is not None and out in recording.fresh and out not in outside
                    and writes_out(kernel, attrs)):
                key = (shape, dtype.np)
                array = free[key].pop() if free.get(key) else counted(np.empty(shape, dtype.np))
                self.planned += 1
                end = max(last_read.get(v, n) for v in sharing[out])
                dying.setdefault(end, []).append((key, array))
                if op.kind == "elementwise" and array.size >= blas.ELEMENTWISE_SPLIT_FROM:
                    kernel = _split(kernel)
                self.calls.append(_into(kernel, ids, attrs, out, array))
            else:
                self.calls.append(_call(backend, op, ids, attrs, out, dtype))
            for key, array in dying.pop(n, ()):
                free.setdefault(key, []).append(array)
        self.count = len(steps)

    def describe(self) -> str:
        return (f"a flat list of {self.count} call(s), {self.planned} writing into arrays planned "
                "once and reused by every call")

    def run(self, plan, flat_args):
        env = plan.inputs(flat_args)
        for call in self.calls:
            call(env)
        return plan.finish(flat_args, env)


# The calls, each a function of the call's values (env), made once per plan.
def _into(kernel, ids, attrs, out, array):
    if len(ids) == 1 and not attrs:
        (a,) = ids
        def call(env):
            env[out] = kernel(env[a], out=array)
    elif len(ids) == 2 and not attrs:
        a, b = ids
        def call(env):
            env[out] = kernel(env[a], env[b], out=array)
    else:
        def call(env):
            env[out] = kernel(*[env[i] for i in ids], out=array, **attrs)
    return call


def _call(backend, op, ids, attrs, out, dtype):
    if op.impls.get("numpy") is NP_MATMUL:  # the backend chooses the kernel by the operands (Pyodide: wasm or numpy)
        def call(env):
            arrays = [env[i] for i in ids]
            env[out] = stored_result(backend.kernel(op, arrays)(*arrays, **attrs), dtype)
    else:
        kernel = backend.kernel(op, ())
        def call(env):
            env[out] = stored_result(kernel(*[env[i] for i in ids], **attrs), dtype)
    return call


def _inplace(kernel, ids, attrs):
    def call(env):
        kernel(*[env[i] for i in ids], **attrs)  # attrs: the step's own dict, which the refresh updates
    return call


def _refresh(plan):
    def call(env):
        plan()._refresh_optimizers()  # a weak reference: the plan holds this list
    return call


def _check(check, plan):
    def call(env):
        plan().run_check(check, env)  # the plan makes the Tensors a check reads
    return call


def _split(kernel):
    """An elementwise kernel split over the cpu threads where it can be (blas.py)."""
    @takes_out
    def split(*arrays, out, **attrs):
        if cpu_threads.elementwise(kernel, arrays, attrs, out):
            return out
        return kernel(*arrays, out=out, **attrs)
    return split


@takes_out
def _blas_matmul(x, y, out):
    """np.matmul with out=, split over the cpu threads by the product's size (as the backend does)."""
    return cpu_threads.matmul(x, y, out=out)
