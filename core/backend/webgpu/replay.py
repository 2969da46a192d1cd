"""``webgrad.compile``'s replay on WebGPU: a recorded dispatch list, and the rest of what
this backend tells compile (``Lowering``: its passes, its fusion rules; backend/protocol.py).

A plan's first replay runs its steps through the backend's launchers while the device
records every dispatch (a ``Tape``) and the pool keeps every buffer the step releases.
Later calls re-issue that list: the same pipelines and uniforms (written once, into a
buffer of the list's own) and bind groups made once, with no kernel Python, no shape
logic and no allocation for intermediates. What a call still does in Python:

- check that each argument is laid out as recorded (shape, strides, offset, which ones
  share a buffer); a call whose arguments are not runs the plan's Python path;
- draw the random inputs and copy the constants the step writes (fresh every call);
- allocate the buffers of what leaves the step (its results, the ``.grad``s) fresh, since
  the caller may still hold the previous ones; the dispatches that bind those, the
  arguments or the random draws take their bind group from the device's cache;
- re-issue the optimizer updates' recorded dispatches with this call's scalars (lr, bias
  corrections) packed into their uniforms, after each optimizer's ``step()`` ran with its
  updates captured; an update whose recording holds more (a copy of a strided gradient)
  runs its launcher instead.

The buffers the step makes and releases belong to the list, reused within the step as
the pool would (a CUDA graph's private pool does the same); they return to the pool when
the plan is dropped. A recording that cannot stand for the step is not used, and
``explain()`` says why: an upload or a read in the middle of the step, or a dispatch that
binds a buffer the step neither received nor made.
"""
from __future__ import annotations

import weakref
from typing import Any

from ...kernels import Elementwise, Grouped, Kernel
from ..protocol import Unfit
from ..scalars import ScalarCache
from . import optim, optim_group
from .array import GPUArray
from .buffers import Keep, Storage
from .elementwise import NARROW
from .recorder import Tape

# The passes, in order (graph/passes/__init__.py names them). Functionalization first: the
# in-place nodes it removes are barriers to every later pass; it is WebGPU's only, where every
# kernel writes a new buffer (a numpy kernel may return its input). Dead code goes first too:
# an unread view of a value (one setitem takes to learn its target's shape) would otherwise
# count as a reader that sees the value's later writes. Then one generated kernel per chain or
# group; reinplace last: a write in place is a barrier to the passes before it.
PASSES = ("dce", "functionalized", "folded", "cse", "dce", "transposed", "copies", "reciprocals", "fused",
          "reductions", "epilogues", "grouped", "reinplaced")
_ATTRS_OK = {"dtype"}  # attrs a generated elementwise kernel follows (through the output type)


def _launches(record, name: str) -> bool:
    """Whether ``record`` runs through the launcher ``name`` (a launch is named ``name`` or
    ``module.name``)."""
    return record.launch.rsplit(".", 1)[-1] == name


class Lowering:
    """What the WebGPU backend tells ``webgrad.compile`` (backend/protocol.py): its passes, which
    nodes one generated kernel may take, and its replay (``record``, below). A base of
    ``WebGPUBackend``: its methods read the backend's own device, pool and caches."""

    passes = PASSES
    counts_dispatches = True
    device: Any  # set by WebGPUBackend
    pool: Any
    index_errors: Any
    scalars: ScalarCache

    def can_fuse(self, node) -> bool:
        record = node.op.impls.get("wgsl")
        if not isinstance(record, Elementwise) or set(node.attrs) - _ATTRS_OK:
            return False
        if any(v.dtype.name in NARROW for v in (node.output, *node.inputs) if v is not None):
            return False  # a fused chain would skip the narrowing of each step's result (elementwise.NARROW)
        return "wg_check_divisor" not in str(record.expr)  # an integer division reports errors through an extra binding

    def can_fuse_inputs(self, inputs) -> bool:
        """A fused kernel reuses the unary/binary/ternary shader layouts: at most three outside
        inputs, two of one dtype, or the second and third of one dtype."""
        dts = [v.dtype for v in inputs]
        return len(dts) <= 3 and (len(dts) != 2 or dts[0] is dts[1]) and (len(dts) != 3 or dts[1] is dts[2])

    def fused_record(self, nodes) -> tuple:
        return tuple(n.op.impls["wgsl"] for n in nodes)  # fused.py splices each step's own expression

    def reduction_entry(self, op) -> str | None:
        record = op.impls.get("wgsl")
        return record.entry if isinstance(record, Kernel) and _launches(record, "reduce") else None

    def takes_epilogue(self, op) -> bool:
        record = op.impls.get("wgsl")
        return isinstance(record, Kernel) and _launches(record, "matmul")  # matmul.wgsl splices the chain

    def group_capacity(self, arity: int) -> int:
        return optim_group.capacity(self, arity)

    def dispatches(self) -> int | None:
        return self.device.dispatches

    def record(self, plan, flat_args):
        """Run ``plan`` once while recording it: (the result, a DispatchList or why there is none)."""
        device, pool, errors = self.device, self.pool, self.index_errors
        if device.tape is not None or pool.keeping is not None:
            return plan.run(flat_args), "another step was being recorded"
        tape, keep, flagged = Tape(), Keep(), []
        recording = _Recording(tape, wanted(plan))
        device.tape, pool.keeping, errors.recording = tape, keep, flagged
        try:
            result = plan.run(flat_args, recording)  # on return its values are gone: what it released is kept
        except BaseException:
            device.tape = pool.keeping = errors.recording = None
            keep.give_back(pool)
            raise
        device.tape = pool.keeping = errors.recording = None
        try:
            if tape.broken is not None:
                raise _Refused(f"{tape.broken} in the middle of the step")
            listing = DispatchList(plan, flat_args, tape, keep, recording, flagged, self._ambient())
        except _Refused as why:
            keep.give_back(pool)
            return result, str(why)
        finally:
            keep.acquired.clear()
        return result, listing

    def _ambient(self) -> dict:
        """The arrays a step binds that belong to no value: cached fill values and the index
        error flag, by id of their buffer."""
        ambient = {id(a.buffer): a for a in self.scalars.values()}
        if self.index_errors.flag is not None:
            ambient[id(self.index_errors.flag.buffer)] = self.index_errors.flag
        return ambient


class _Refused(Exception):
    """The recording cannot stand for the step; the message says why."""


class _Held:
    """The storage of a value in a buffer the list owns (a GPUArray reads ``.buffer``)."""

    __slots__ = ("buffer",)

    def __init__(self, buffer):
        self.buffer = buffer


class _Recording:
    """What ``Plan.run`` shows a recording: the tape's length at each step's end, and the
    layout of the values a replay rebuilds (``wanted``), seen as they are made."""

    def __init__(self, tape: Tape, wanted):
        self.tape, self.wanted = tape, wanted
        self.marks: list[int] = []
        self.layouts: dict = {}  # value id -> (buffer, shape, strides, offset, kind)

    def mark(self, env) -> None:
        self.marks.append(len(self.tape.entries))
        for i in self.wanted:
            a = env[i]
            if a is not None and i not in self.layouts:
                self.layouts[i] = (a.buffer, a.shape, a.strides, a.offset, a.kind)


def in_python(plan) -> set[int]:
    """The ids of the plan steps a replay runs in Python: the optimizer updates (their uniforms,
    lr and bias corrections, change per call) and the checks of computed values."""
    steps = {id(step) for _, updates, _ in plan.optimizers for _, step in updates}
    return steps | {id(step) for step in plan.steps if step.out is None and getattr(step.op, "check", None)}


def wanted(plan) -> list[int]:
    """The values a replay rebuilds: arguments, random draws, written constants, the inputs of
    the steps it runs in Python, the graph's checks, results and gradients."""
    ids = {i for i, _ in plan.args} | {i for i, _, _ in plan.random} | {i for i, _ in plan.copied}
    python = in_python(plan)
    for step in plan.steps:
        if id(step) in python:
            ids.update(step.ids)
    for _, args in plan.graph.checks:
        ids.update(a.id for a in args if hasattr(a, "id"))
    ids.update(v.id for v in plan.graph.outputs)
    ids.update(g.id for _, g in plan.graph.grads)
    return sorted(ids)


class DispatchList:
    """One plan's recorded step, ready to re-issue (see the module docstring)."""

    def __init__(self, plan, flat_args, tape: Tape, keep: Keep, recording: _Recording, flagged, ambient):
        backend = plan.backend
        device = backend.device
        layouts = recording.layouts
        fixed = {id(data.buffer): data for _, data in plan.fixed}
        held = {id(b): _Held(b) for b in keep.kept()}
        self.pinned = list(ambient.values())  # a cache may drop them; the list still binds them

        # Buffers a call supplies: its arguments', its random draws', and fresh ones for its results.
        varying: set = set()  # ids of the recorded buffers a call replaces
        self.args = []
        for i, k in plan.args:
            buf, *layout = layouts[i]
            if id(buf) in fixed:
                raise _Refused("an argument shares a buffer with a captured tensor")
            varying.add(id(buf))
            self.args.append((k, id(buf), tuple(layout)))
        pre = [i for i, _, _ in plan.random] + [i for i, _ in plan.copied]
        for i in pre:
            varying.add(id(layouts[i][0]))
        self.fresh = []
        for v in list(plan.graph.outputs) + [g for _, g in plan.graph.grads]:
            buf = layouts[v.id][0]
            rid = id(buf)
            if rid in varying or rid in fixed or rid in ambient:
                continue
            if rid not in keep.acquired:
                raise _Refused(f"a result lives in a buffer the step did not make ({v.type_str()})")
            varying.add(rid)
            self.fresh.append((rid, buf.size, f"compiled step result {v.type_str()}"))
        self.pre = [(i, id(layouts[i][0])) for i in pre]
        constant = {**fixed, **ambient, **held}
        stored = {rid: a.storage for rid, a in {**fixed, **ambient}.items()}

        # The values the Python side of a call rebuilds from their layout.
        known = {i for i, _ in plan.fixed} | {i for i, _ in plan.args} | set(pre)
        self.rebuilt: list[tuple] = []
        for i, (buf, shape, strides, offset, kind) in layouts.items():
            if i in known:
                continue
            rid = id(buf)
            if rid in varying:
                self.rebuilt.append((i, rid, None, shape, strides, offset, kind))
            elif rid in held or rid in stored:
                self.rebuilt.append((i, None, held.get(rid) or stored[rid], shape, strides, offset, kind))
            else:
                raise _Refused(f"value {i} lives in a buffer the step neither received nor made")

        # The schedule: runs of recorded dispatches between the steps that run in Python, and
        # the optimizers' refresh before the first write (as Plan.run: a check may still raise).
        marks = recording.marks
        python = in_python(plan)
        static: list[int] = []  # tape indices of the dispatches to re-issue
        spans: dict = {}  # id(step run in Python) -> the tape indices of its dispatches
        plan_of: list = []  # per schedule item: ("list", [tape indices]), ("step", step) or ("refresh", None)
        refresh = bool(plan.optimizers)
        for n, step in enumerate(plan.steps):
            span = range(marks[n], marks[n + 1])
            if refresh and step.out is None and not getattr(step.op, "check", None):
                plan_of.append(("refresh", None))
                refresh = False
            if id(step) in python:
                plan_of.append(("step", step))
                spans[id(step)] = span
            elif span:
                if not plan_of or plan_of[-1][0] != "list":
                    plan_of.append(("list", []))
                plan_of[-1][1].extend(span)
                static.extend(span)
        static_tape = Tape()
        static_tape.entries = [tape.entries[j] for j in static]
        self.prepared = device.prepare(static_tape)
        at = {j: n for n, j in enumerate(static)}
        used = set()
        self.schedule = []
        for kind, item in plan_of:
            if kind == "step":
                entries = [tape.entries[j] for j in spans[id(item)]]
                self.schedule.append(_Update.of(item, entries, varying, constant, device.program_of) or item)
                continue
            if kind != "list":
                self.schedule.append(_REFRESH)
                continue
            dispatches: list[tuple] = []
            rebinds: list[tuple] = []
            for j in item:
                pipeline, buffers, _, grid, label = tape.entries[j]
                positions = []
                for p, buf in enumerate(buffers):
                    rid = id(buf)
                    if rid in varying:
                        positions.append((p, rid))
                    elif rid in constant:
                        used.add(rid)
                    else:
                        raise _Refused(f"{label} binds a buffer the step neither received nor made")
                group = None if positions else device.bind(self.prepared, at[j], buffers)
                if positions:
                    rebinds.append((len(dispatches), at[j], buffers, positions))
                dispatches.append((pipeline[0], group, grid, label))
            self.schedule.append(_Run(dispatches, rebinds))
        self.used = used
        self.flagged = tuple(flagged)
        self.count = len(static)
        self._give_back = weakref.finalize(self, keep.give_back, backend.pool)

    def describe(self) -> str:
        runs = [item for item in self.schedule if isinstance(item, _Run)]
        steps = sum(1 for item in self.schedule if not isinstance(item, (_Run, _Update)) and item is not _REFRESH)
        updates = sum(1 for item in self.schedule if isinstance(item, _Update))
        rebound = sum(len(r.rebinds) for r in runs)
        return (f"a recorded list of {self.count} dispatch(es) in {len(runs)} run(s), {rebound} of them bound "
                f"per call (to arguments, random draws or results); {updates} optimizer update(s) re-issued "
                f"with each call's scalars; {steps} step(s) in Python between them")

    def run(self, plan, flat_args):
        """One call: the recorded dispatches re-issued around the steps that run in Python."""
        backend = plan.backend
        device = backend.device
        storages: dict = {}  # id(recorded buffer) -> this call's storage, for the buffers a call supplies
        for k, rid, layout in self.args:
            a = flat_args[k]._data
            if (a.shape, a.strides, a.offset, a.kind) != layout or storages.setdefault(rid, a.storage) is not a.storage:
                raise Unfit()
        if len({id(s) for s in storages.values()}) != len(storages):
            raise Unfit()
        graph = plan.graph
        env = [None] * len(graph.values)
        for i, data in plan.fixed:
            env[i] = data
        for i, k in plan.args:
            env[i] = flat_args[k]._data
        for check in graph.checks:
            plan.run_check(check, env)
        for i, v in plan.copied:
            env[i] = backend.contiguous(v.data)
        for i, draw, args in plan.random:
            env[i] = draw(*args)
        for i, rid in self.pre:
            storages[rid] = env[i].storage
        for rid, size, label in self.fresh:
            storages[rid] = Storage(backend.pool, size, label)
        for i, rid, storage, shape, strides, offset, kind in self.rebuilt:
            env[i] = GPUArray(storages[rid] if rid is not None else storage, shape, kind, strides, offset)
        now = {rid: s.buffer for rid, s in storages.items()}
        used = self.used.union(map(id, now.values()))
        before = device.dispatches
        for item in self.schedule:
            if isinstance(item, _Run):
                device.replay(item.bound(device, self.prepared, now), used)
                continue
            if item is _REFRESH:
                plan._refresh_optimizers()
                continue
            if isinstance(item, _Update):
                item.issue(device, now)
                continue
            slots = item.slots
            for s, i in zip(slots, item.ids):
                s._data = env[i]
            check = getattr(item.op, "check", None)
            if check is not None:
                plan.run_check(check, env)
            else:
                backend.run_inplace(item.op, slots, item.attrs)
            for s in slots:
                s._data = None
        if self.flagged:
            backend.index_errors.note(self.flagged)
        plan.dispatches = device.dispatches - before
        return plan.finish(flat_args, env)


_REFRESH = object()  # in a schedule: Plan._refresh_optimizers() here


class _Update:
    """An optimizer update's recorded dispatches, re-issued with the scalars its step's attrs
    hold at this call (``_refresh_optimizers`` updates them): no launcher Python."""

    __slots__ = ("dispatches", "op_name", "attrs")

    def __init__(self, dispatches, op_name, attrs):
        self.dispatches, self.op_name, self.attrs = dispatches, op_name, attrs

    @classmethod
    def of(cls, step, entries, varying, constant, program_of):
        """The update ``step`` recorded as ``entries``, or None where a recording holds anything
        but optimizer update dispatches (by the kernel record each pipeline was compiled for)
        over buffers the list knows."""
        op, attrs = step.op, step.attrs
        if not entries or getattr(op, "check", None) or not all(optim.is_update(program_of(e[0])) for e in entries):
            return None
        dispatches = []
        for pipeline, buffers, uniform, grid, label in entries:
            if not all(id(b) in varying or id(b) in constant for b in buffers):
                return None
            positions = [(p, id(b)) for p, b in enumerate(buffers) if id(b) in varying]
            dispatches.append((pipeline, buffers, positions, uniform, grid, label))
        record = op.impls.get("wgsl")
        return cls(dispatches, record.op if isinstance(record, Grouped) else op.name, attrs)

    def issue(self, device, now):
        for pipeline, buffers, positions, uniform, grid, label in self.dispatches:
            if positions:
                buffers = list(buffers)
                for p, rid in positions:
                    buffers[p] = now[rid]
            device.dispatch(pipeline, buffers, optim.repack(uniform, self.op_name, self.attrs), grid, label)


class _Run:
    """Consecutive recorded dispatches: (pipeline, bind group, grid, label) each; ``rebinds``
    are those whose bind group depends on the call's buffers."""

    __slots__ = ("dispatches", "rebinds")

    def __init__(self, dispatches, rebinds):
        self.dispatches, self.rebinds = dispatches, rebinds

    def bound(self, device, prepared, now):
        if not self.rebinds:
            return self.dispatches
        dispatches = list(self.dispatches)
        for n, index, buffers, positions in self.rebinds:
            buffers = list(buffers)
            for p, rid in positions:
                buffers[p] = now[rid]
            pipe, _, grid, label = dispatches[n]
            dispatches[n] = (pipe, device.bind(prepared, index, buffers), grid, label)
        return dispatches
