"""``webgrad.compile``: trace a function (forward, backward, optimizer step) once per
signature, optimize the graph, and replay it on later calls.

The first call with a new signature runs the function eagerly under a ``Tracer``
(so its result is the eager result); later calls with the same signature replay
the plan: a flat list of backend calls into planned slots, with no autograd
bookkeeping, no shape inference and no Python from the function. On WebGPU each
call encodes its dispatches into the device's open encoder, which is submitted
once, at the next readback; from the second replay on, a signature's dispatches are
re-issued from the list its first replay recorded (backend/webgpu/replay.py), with no
kernel Python (the optimizer updates too, with each call's scalars). On numpy, from the
second replay on, a step is a flat list of calls, those whose results stay inside the call
writing into arrays planned once (backend/numpy/replay.py). Which passes run, which nodes
fuse and what a replay becomes is the backend's to say (backend/protocol.py).

Signature: each tensor argument's shape, dtype, device and requires_grad, the
other arguments' values, whether grad mode is on; guards: the train/eval flag
of every module that ran and the identity of every captured tensor's data (a
parameter replaced with ``p.data = ...`` re-traces). A graph break (a host read
such as ``.item()`` inside the function) makes that signature run eagerly, with
one warning naming the file and line.

What a replay runs: the tensor ops, the random draws (fresh numbers each time), the
cpu input checks of cross_entropy/indexing, and each optimizer's ``step()`` with its
updates captured, not run (it advances step counts and yields this step's lr and
bias corrections). What it does not run: any other Python in the function (prints,
counters, ``lr_scheduler.step()``, appending to lists): keep those outside. The
result of a replay carries no autograd graph (the traced function already ran its
backward; a function whose result needs a later backward runs eagerly).
"""
from __future__ import annotations

import functools
import warnings
import weakref
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any

from .. import autograd
from ..backend import get_backend
from ..backend.protocol import Backend, Unfit
from ..ops import autocasting, registry
from ..tensor import Tensor
from . import passes
from .analysis import analyze
from .ir import Graph, Value
from .trace import GraphBreak, Tracer, tracing

__all__ = ["compile", "CompiledFunction", "GraphBreak"]


# -- argument and result structures ------------------------------------------------
def _flatten(obj, tensors: list):
    """``obj`` with every Tensor replaced by its index in ``tensors`` (appended): the
    structure is hashable and used both as part of the signature and to rebuild results."""
    if isinstance(obj, Tensor):
        tensors.append(obj)
        return ("T", len(tensors) - 1)
    if isinstance(obj, (list, tuple)):
        return (type(obj).__name__, tuple(_flatten(x, tensors) for x in obj))
    if isinstance(obj, dict):
        return ("dict", tuple((k, _flatten(v, tensors)) for k, v in obj.items()))
    try:
        hash(obj)
        return ("C", obj)
    except TypeError:
        return ("id", id(obj))


def _unflatten(spec, tensors: list, constants: dict):
    tag, body = spec
    if tag == "T":
        return tensors[body]
    if tag in ("list", "tuple"):
        items = [_unflatten(s, tensors, constants) for s in body]
        return items if tag == "list" else tuple(items)
    if tag == "dict":
        return {k: _unflatten(s, tensors, constants) for k, s in body}
    return constants.get(id(spec), body)


class _Slot:
    """Stands in for a Tensor when a replay calls a backend kernel: backends read ``_data``
    (and, for an in-place op's targets, ``dtype``)."""
    __slots__ = ("_data", "dtype")

    def __init__(self, dtype=None):
        self.dtype = dtype


@dataclass(slots=True, eq=False)
class Step:
    """One backend call of a plan: ``op`` on the values ``ids`` (shown to the kernel through
    ``slots``) with ``attrs``, making value ``out`` of ``shape`` and ``dtype`` (all None for an
    in-place write or a check); ``drop``: the values dead after it."""
    op: Any
    ids: tuple
    slots: list
    attrs: dict
    out: int | None
    shape: tuple | None
    dtype: Any
    drop: tuple


ATTEMPTS = 2  # recordings tried per plan: the first call may fill caches (an upload) that later ones reuse


class _Stale(Exception):
    """A replay found Python state it cannot follow; the call re-traces."""


class _Capture(registry.Observer):
    """Observes an optimizer's ``step()`` at a replay: it claims the in-place updates, so they
    do not run, and keeps their attrs (lr, bias corrections...)."""

    def __init__(self):
        self.calls: list = []

    def claim_inplace(self, op, tensors, attrs) -> bool:
        self.calls.append((op, tensors[0]._data, attrs))
        return True


class Plan:
    """One signature's graph lowered to a list of backend calls."""

    def __init__(self, graph: Graph, guards, modules, optimizers, out_spec, out_constants):
        self.graph = graph
        self.guards = guards
        self.modules = [(weakref.ref(m), m.training) for m in modules]
        self.out_spec, self.out_constants = out_spec, out_constants
        self.backend: Backend = get_backend(graph.device)
        self.dispatches = None  # per replay, where the backend counts them (WebGPU)
        self.listing = None     # what the backend's record() made for later calls (protocol.Listing)
        self.unrecorded = None  # why there is none
        self.recordings = 0
        self._lower(optimizers)

    def _lower(self, optimizers):
        graph, backend = self.graph, self.backend
        flow = analyze(graph)  # position: a grouped optimizer update stands for its members
        written_consts = {v.id for v in graph.values if v.id in flow.written and v.source == "const"}
        self.fixed = [(v.id, v.data) for v in graph.values if v.source in ("capture", "const")
                      and v.id not in written_consts]
        self.copied = [(v.id, v) for v in graph.values if v.id in written_consts]
        self.args = [(v.id, v.index) for v in graph.values if v.source == "arg"]
        self.random = [(v.id, getattr(backend, v.data[0]), v.data[1]) for v in graph.values if v.source == "random"]
        self.steps: list[Step] = []
        for i, node in enumerate(graph.nodes):
            # Dead after this step (outputs and gradients live to the end: last_use is past it).
            drop = tuple(dict.fromkeys(v.id for v in node.inputs if flow.last_use[v.id] == i and v.source == "node"))
            out = node.output
            self.steps.append(Step(node.op, tuple(v.id for v in node.inputs), [_Slot(v.dtype) for v in node.inputs],
                                   dict(node.attrs), None if out is None else out.id,
                                   None if out is None else out.shape, None if out is None else out.dtype, drop))
        self.optimizers = [(weakref.ref(opt), [(n.op, self.steps[flow.position[id(n)]]) for n in nodes],
                            [n.inputs[0].data for n in nodes]) for opt, nodes in optimizers]
        # Written captured tensors get their version bumped, as the eager in-place ops do.
        written = flow.written
        owner = {id(data): ref for ref, data in self.guards}
        self.grads = [(owner[id(p.data)], g) for p, g in graph.grads if p.source == "capture" and id(p.data) in owner]
        self.arg_grads = [(p.index, g) for p, g in graph.grads if p.source == "arg"]
        self.bump = [ref for ref, data in self.guards
                     if any(v.data is data and v.id in written for v in graph.values if v.source == "capture")]

    def matches(self) -> bool:
        for ref, data in self.guards:
            t = ref()
            if t is None or t._data is not data:
                return False
        for ref, training in self.modules:
            m = ref()
            if m is None or m.training != training:
                return False
        return True

    def _refresh_optimizers(self):
        """Run each optimizer's ``step()`` with its updates captured, not run: it advances its
        Python state (step counts) as eagerly and gives this step's scalars to the replay."""
        for ref, steps, datas in self.optimizers:
            opt = ref()
            if opt is None:
                raise _Stale()
            saved = {id(p): dict(s) for p, s in opt.state.items()}
            params = {id(data) for data in datas}
            lent = [p for group in opt.param_groups for p in group["params"]
                    if p.grad is None and id(p._data) in params]
            for p in lent:  # step() skips parameters without .grad; the replay makes them
                p.grad = p
            capture = _Capture()
            try:
                with registry.observing(capture):
                    opt.step()
            finally:
                for p in lent:
                    p.grad = None
            calls = capture.calls
            fresh: dict = {}  # id(step) -> (step, attrs); a grouped step needs equal attrs from all
            stale = len(calls) != len(steps)
            for (op, data, attrs), (traced_op, s), d in zip(calls, steps, datas):
                seen = fresh.setdefault(id(s), (s, attrs))
                stale = stale or op is not traced_op or data is not d or seen[1] != attrs
            if stale:
                for p, s in opt.state.items():
                    s.update(saved.get(id(p), {}))
                raise _Stale()
            for s, attrs in fresh.values():
                s.attrs.update(attrs)

    def call(self, flat_args):
        """One replay: the backend's listing (WebGPU: a recorded dispatch list; numpy: a list of
        calls) where there is one, else the backend calls (always while a profile records: it
        shows each op, which a listing does not run)."""
        if registry.OBSERVERS:  # e.g. a profile: it sees each op, which a listing does not run
            return self.run(flat_args)
        if self.listing is not None:
            try:
                return self.listing.run(self, flat_args)
            except Unfit:  # arguments laid out unlike the recorded ones
                return self.run(flat_args)
        if self.recordings < ATTEMPTS:
            self.recordings += 1
            result, listing = self.backend.record(self, flat_args)
            if isinstance(listing, str):
                self.unrecorded = listing
            else:
                self.listing, self.unrecorded = listing, None
            return result
        return self.run(flat_args)

    def inputs(self, flat_args) -> list:
        """A call's values, by id, before its first step: captured tensors and constants, the
        arguments, the random draws; the graph's input checks have run (before anything
        changes state)."""
        backend = self.backend
        env = [None] * len(self.graph.values)
        for i, data in self.fixed:
            env[i] = data
        for i, v in self.copied:  # a constant the graph writes: fresh from its first contents
            env[i] = backend.contiguous(v.data)
        for i, k in self.args:
            env[i] = flat_args[k]._data
        for check in self.graph.checks:
            self.run_check(check, env)
        for i, draw, args in self.random:
            env[i] = draw(*args)
        return env

    def run(self, flat_args, recording=None):
        """One replay through the backend's kernels. ``recording`` (the backend's, from its
        ``record``) is told each step's end and shown the values as they are made."""
        backend = self.backend
        env = self.inputs(flat_args)
        refresh = bool(self.optimizers)  # at the first write: a check in the graph may still raise
        if recording is not None:
            recording.mark(env)
        before = backend.dispatches()
        run, run_inplace = registry.replay_kernels(backend, self.graph.device)  # observers see each call
        for step in self.steps:
            slots, out = step.slots, step.out
            for s, i in zip(slots, step.ids):
                s._data = env[i]
            if out is None:
                check = getattr(step.op, "check", None)
                if check is not None:
                    self.run_check(check, env)
                else:
                    if refresh:
                        self._refresh_optimizers()
                        refresh = False
                    run_inplace(step.op, slots, step.attrs)
            else:
                env[out] = run(step.op, slots, step.attrs, step.shape, step.dtype)
            for s in slots:
                s._data = None
            if recording is not None:
                recording.mark(env)
            for i in step.drop:
                env[i] = None
        if before is not None:
            self.dispatches = backend.dispatches() - before
        return self.finish(flat_args, env)

    def run_check(self, check, env) -> None:
        """Run one of the graph's input checks (``(fn, args)``) on this call's values ``env``:
        given to the backends' listings, which make no Tensors."""
        fn, args = check
        device = self.graph.device
        fn(*[Tensor._make(env[a.id], a.shape, a.dtype, device) if isinstance(a, Value) else a for a in args])

    def finish(self, flat_args, env):
        """The step's results from ``env``: version bumps, ``.grad``s, the function's result."""
        for ref in self.bump:
            t = ref()
            if t is not None:
                t._bump_version()
        graph = self.graph
        outs = [Tensor._make(env[v.id], v.shape, v.dtype, graph.device) for v in graph.outputs]
        for ref, g in self.grads:
            t = ref()
            if t is not None:
                t.grad = Tensor._make(env[g.id], g.shape, g.dtype, graph.device)
        for k, g in self.arg_grads:
            flat_args[k].grad = Tensor._make(env[g.id], g.shape, g.dtype, graph.device)
        return _unflatten(self.out_spec, outs, self.out_constants)


class _Eager:
    """A signature that broke the graph: it runs eagerly."""

    def __init__(self, reason):
        self.reason = reason

    def matches(self) -> bool:
        return True


class CompiledFunction:
    """The callable ``webgrad.compile(fn)`` returns. ``.graph`` is the latest traced graph,
    ``.explain()`` says what was traced, where it broke, and what a replay dispatches."""

    def __init__(self, fn, cache_size=8, optimize=True):
        if not callable(fn):
            raise TypeError(f"webgrad.compile: expected a function, got {type(fn).__name__}")
        if not isinstance(cache_size, int) or cache_size < 1:
            raise ValueError(f"webgrad.compile: cache_size must be a positive int, got {cache_size!r}")
        self.fn = fn
        self.cache_size = cache_size
        self.optimize = optimize
        self.cache: OrderedDict = OrderedDict()
        self.breaks: list[str] = []
        self.traces = 0
        self.replays = 0
        self._latest = None
        functools.update_wrapper(self, fn)

    def __call__(self, *args, **kwargs):
        if tracing() is not None:  # called inside another compiled function's trace: inline it
            return self.fn(*args, **kwargs)
        flat: list = []
        spec = _flatten((args, kwargs), flat)
        first: dict[int, int] = {}  # which arguments share data (the graph binds each data once)
        key = (spec, autograd.is_grad_enabled(), autocasting.key(),
               tuple((tuple(t.shape), t.dtype.name, str(t.device), t._requires_grad,
                      first.setdefault(id(t._data), k)) for k, t in enumerate(flat)))
        plan = self.cache.get(key)
        if plan is not None and plan.matches():
            self.cache.move_to_end(key)
            if isinstance(plan, _Eager):
                return self.fn(*args, **kwargs)
            try:
                result = plan.call(flat)
                self.replays += 1
                return result
            except _Stale:
                pass
        return self._trace(key, flat, args, kwargs)

    def _trace(self, key, flat, args, kwargs):
        self.traces += 1
        with Tracer(flat) as tracer:
            result = self.fn(*args, **kwargs)
        outs: list = []
        out_spec = _flatten(result, outs)
        try:
            guards = None if tracer.broken else tracer.finish(outs)
        finally:
            tracer.thaw()
        if tracer.broken:
            self._break(tracer.broken)
            self._store(key, _Eager(tracer.broken))
            return result
        graph = tracer.graph
        if self.optimize:
            passes.run(graph)
        plan = Plan(graph, guards, tracer.modules.values(), tracer.optimizers.values(), out_spec, {})
        self._latest = plan
        self._store(key, plan)
        return result

    def _store(self, key, plan):
        self.cache[key] = plan
        self.cache.move_to_end(key)
        while len(self.cache) > self.cache_size:
            self.cache.popitem(last=False)

    def _break(self, reason):
        if reason not in self.breaks:
            self.breaks.append(reason)
            name = getattr(self.fn, "__qualname__", repr(self.fn))
            warnings.warn(f"webgrad.compile({name}): graph break at {reason}; this call signature runs "
                          f"eagerly (same results, no replay)", UserWarning, stacklevel=4)

    @property
    def graph(self) -> Graph | None:
        """The most recently traced graph (``print(fn.graph)`` shows its IR)."""
        return None if self._latest is None else self._latest.graph

    def explain(self) -> str:
        """What was traced: signatures, graph breaks, nodes, fused kernels and dispatches per replay."""
        name = getattr(self.fn, "__qualname__", repr(self.fn))
        lines = [f"webgrad.compile({name}): {self.traces} trace(s), {self.replays} replay(s), "
                 f"{len(self.cache)} cached signature(s)"]
        lines.append(f"graph breaks: {len(self.breaks)}")
        lines += [f"  {b}" for b in self.breaks]
        for i, plan in enumerate(self.cache.values()):
            if isinstance(plan, _Eager):
                lines.append(f"signature {i}: eager (graph break)")
                continue
            g = plan.graph
            fused = [n for n in g.nodes if n.fused is not None]
            counted = ("" if not plan.backend.counts_dispatches else ", dispatches per replay: "
                       + ("not measured yet" if plan.dispatches is None else str(plan.dispatches)))
            lines.append(f"signature {i}: {len(g.nodes)} nodes on {g.device}, {len(fused)} fused kernel(s){counted}")
            for n in fused:
                lines.append(f"  fused: {' -> '.join(m.op.name for m in n.fused)} ({n.output.type_str()})")
            for n in g.nodes:
                if n.members:
                    lines.append(f"  grouped: {len(n.members)} {n.members[0].op.name} updates in one kernel")
            for line in passes.report(g):
                lines.append(f"  {line}")
            if plan.listing is not None:
                lines.append(f"  replay: {plan.listing.describe()}")
            elif plan.unrecorded is not None:
                lines.append(f"  replay: through the kernels' Python (no recorded list: {plan.unrecorded})")
        return "\n".join(lines)


def compile(fn=None, *, cache_size: int = 8, optimize: bool = True):  # noqa: A001  (torch.compile's name)
    """Compile ``fn`` (usable as ``@webgrad.compile`` or ``webgrad.compile(fn, cache_size=4)``).

    Example:
        >>> @webgrad.compile
        ... def train_step(x, y):
        ...     opt.zero_grad(); loss = F.cross_entropy(model(x), y); loss.backward(); opt.step()
        ...     return loss
    """
    if fn is None:
        return lambda f: CompiledFunction(f, cache_size, optimize)
    return CompiledFunction(fn, cache_size, optimize)
