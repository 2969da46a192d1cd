"""``webgrad.profiler``: where a training step spends its time, as ``torch.profiler``.

    with webgrad.profiler.profile(record_shapes=True, profile_memory=True) as prof:
        train_step(x, y)
    print(prof.key_averages().table(sort_by="self_device_time_total", row_limit=15))
    prof.export_chrome_trace("trace.json")     # Perfetto / chrome://tracing

Every primitive goes through ``ops.registry.apply``; while a profile records, that
function calls ``begin_op``/``end_op`` here (when none records, the hook is None:
one check per op). Backward nodes are timed by the autograd walk (``MulBackward``...),
a few composite functions (``F.linear``, ``F.conv2d``, ``F.cross_entropy``, an
optimizer's ``step``...) are wrapped while recording so their primitives nest under
them, and ``record_function("name")`` marks any range. Host times come from
``time.perf_counter_ns`` (no threads or signals, so it runs in Pyodide too).

WebGPU device time: with the adapter's 'timestamp-query' each dispatch runs in its
own timed compute pass (per kernel and per op); without it, ``device_timing="sync"``
waits for the GPU at op boundaries (which changes the timing it measures), and by
default device time is not measured; the table says which.
"""
from __future__ import annotations

import enum
import functools
import html
import json
import math
import sys
import time
import weakref
from typing import Any

from .ops import registry

__all__ = ["profile", "record_function", "schedule", "ProfilerActivity", "ProfilerAction", "FunctionEvent",
           "FunctionEventAvg", "EventList", "tensorboard_trace_handler"]

_now = time.perf_counter_ns


class ProfilerActivity(enum.Enum):
    CPU = "cpu"
    WEBGPU = "webgpu"
    CUDA = "webgpu"  # scripts written for CUDA profile the accelerator here: WebGPU


class ProfilerAction(enum.Enum):
    NONE = 0
    WARMUP = 1
    RECORD = 2
    RECORD_AND_SAVE = 3


def schedule(*, wait: int, warmup: int, active: int, repeat: int = 0, skip_first: int = 0):
    """As ``torch.profiler.schedule``: per step, skip ``skip_first``, then cycles of ``wait``
    idle steps, ``warmup`` recorded-and-dropped steps and ``active`` recorded steps
    (``repeat`` cycles, 0 = forever); the last active step hands the trace to ``on_trace_ready``."""
    if wait < 0 or warmup < 0 or active <= 0 or repeat < 0 or skip_first < 0:
        raise ValueError(f"profiler.schedule: need wait, warmup, repeat, skip_first >= 0 and active > 0, got "
                         f"wait={wait} warmup={warmup} active={active} repeat={repeat} skip_first={skip_first}")

    def action(step: int) -> ProfilerAction:
        if step < skip_first:
            return ProfilerAction.NONE
        step -= skip_first
        cycle = wait + warmup + active
        if repeat and step // cycle >= repeat:
            return ProfilerAction.NONE
        at = step % cycle
        if at < wait:
            return ProfilerAction.NONE
        if at < wait + warmup:
            return ProfilerAction.WARMUP
        return ProfilerAction.RECORD if at < cycle - 1 else ProfilerAction.RECORD_AND_SAVE
    return action


def tensorboard_trace_handler(dir_name: str, worker_name: str | None = None):
    """An ``on_trace_ready`` that writes each finished trace as Chrome trace JSON into ``dir_name``."""
    import os

    def handler(prof) -> None:
        os.makedirs(dir_name, exist_ok=True)
        name = f"{worker_name or 'webgrad'}.{prof.step_num}.{time.time_ns()}.pt.trace.json"
        prof.export_chrome_trace(os.path.join(dir_name, name))
    return handler


# -- counting -------------------------------------------------------------------
def _nbytes(t) -> int:
    return t.numel() * t.dtype.itemsize


def _flops(name: str, inputs, out) -> int:
    """Multiply-adds x 2 of the ops that dominate compute; 0 for the rest."""
    if name == "matmul":
        return 2 * out.numel() * inputs[0].shape[-1]
    if name == "F.linear":
        return 2 * out.numel() * inputs[1].shape[-1]
    if name in ("F.conv1d", "F.conv2d"):
        weight = inputs[1]
        return 2 * out.numel() * math.prod(weight.shape[1:])  # (C_in / groups) * kernel per output
    if name == "F.scaled_dot_product_attention":
        q, k, v = inputs[:3]
        scores = out.numel() // v.shape[-1] * k.shape[-2]  # batch * L * S
        return 2 * scores * q.shape[-1] + 2 * scores * v.shape[-1]
    return 0


class FunctionEvent:
    """One timed range: an op, a backward node, a composite, a ``record_function`` or a
    GPU kernel (``kind``). Times are in microseconds, as in torch."""

    __slots__ = ("id", "name", "kind", "device_type", "start_ns", "end_ns", "parent", "children", "input_shapes",
                 "flops", "bytes", "dispatch_range", "device_ns", "self_device_ns", "kernel_ns", "cpu_mem",
                 "device_mem", "_mem0", "_frame", "__weakref__")

    def __init__(self, id, name, kind, device_type, start_ns, parent, input_shapes=()):
        self.id, self.name, self.kind, self.device_type = id, name, kind, device_type
        self.start_ns, self.end_ns, self.parent = start_ns, None, parent
        self.children: list = []
        self.input_shapes = input_shapes
        self.flops = self.bytes = self.cpu_mem = self.device_mem = self._mem0 = 0
        self.dispatch_range = None  # (counter at begin, counter at end) on webgpu
        self._frame = None  # an op's `apply` frame while it runs (to spot one an exception left)
        self.device_ns = self.self_device_ns = self.kernel_ns = 0.0

    @property
    def cpu_time_total(self) -> float:
        return 0.0 if self.kind == "kernel" else (self.end_ns - self.start_ns) / 1e3

    @property
    def self_cpu_time_total(self) -> float:
        return self.cpu_time_total - sum(c.cpu_time_total for c in self.children)

    @property
    def device_time_total(self) -> float:
        return self.device_ns / 1e3

    @property
    def self_device_time_total(self) -> float:
        return self.self_device_ns / 1e3

    @property
    def dispatches(self) -> int:
        if self.dispatch_range is None:  # not counted on the device itself (a host range): its children's
            return sum(c.dispatches for c in self.children)
        return self.dispatch_range[1] - self.dispatch_range[0]

    @property
    def self_dispatches(self) -> int:
        return self.dispatches - sum(c.dispatches for c in self.children)

    @property
    def cpu_memory_usage(self) -> int:
        return self.cpu_mem + sum(c.cpu_memory_usage for c in self.children)

    @property
    def self_cpu_memory_usage(self) -> int:
        return self.cpu_mem

    @property
    def device_memory_usage(self) -> int:
        return self.device_mem

    @property
    def self_device_memory_usage(self) -> int:
        return self.device_mem - sum(c.device_mem for c in self.children)

    def __repr__(self) -> str:
        return (f"<FunctionEvent {self.name} kind={self.kind} cpu_time_total={self.cpu_time_total:.1f}us "
                f"device_time_total={self.device_time_total:.1f}us shapes={self.input_shapes}>")


_FIELDS = ("cpu_time_total", "self_cpu_time_total", "device_time_total", "self_device_time_total",
           "cpu_memory_usage", "self_cpu_memory_usage", "device_memory_usage", "self_device_memory_usage",
           "flops", "bytes", "dispatches", "self_dispatches")
_ALIASES = {"cuda_time_total": "device_time_total", "self_cuda_time_total": "self_device_time_total",
            "webgpu_time_total": "device_time_total", "self_webgpu_time_total": "self_device_time_total",
            "cuda_memory_usage": "device_memory_usage", "self_cuda_memory_usage": "self_device_memory_usage",
            "cpu_time": "cpu_time_total", "device_time": "device_time_total", "calls": "count"}


class FunctionEventAvg:
    """Totals over the events with one name (and input shapes, when grouped by them)."""

    cpu_time_total = self_cpu_time_total = device_time_total = self_device_time_total = 0.0
    cpu_memory_usage = self_cpu_memory_usage = device_memory_usage = self_device_memory_usage = 0
    flops = bytes = dispatches = self_dispatches = 0

    def __init__(self, key, input_shapes):
        self.key, self.input_shapes, self.count, self.kind = key, input_shapes, 0, None

    def add(self, event) -> None:
        self.count += 1
        self.kind = self.kind or event.kind
        for name in _FIELDS:
            setattr(self, name, getattr(self, name) + getattr(event, name))

    @property
    def cpu_time(self) -> float:
        return self.cpu_time_total / max(self.count, 1)

    @property
    def device_time(self) -> float:
        return self.device_time_total / max(self.count, 1)

    def __repr__(self) -> str:
        return (f"<FunctionEventAvg {self.key} count={self.count} cpu_time_total={self.cpu_time_total:.1f}us "
                f"self_device_time_total={self.self_device_time_total:.1f}us>")


class EventList(list):
    """A list of events (or of averages) that prints as a table."""

    def __init__(self, items=(), *, info=None):
        super().__init__(items)
        self.info = info or {}

    def key_averages(self, group_by_input_shape: bool = False) -> "EventList":
        groups: dict = {}
        for e in self:
            shapes = _shape_key(e.input_shapes) if group_by_input_shape else ""
            avg = groups.get((e.name, shapes))
            if avg is None:
                avg = groups[(e.name, shapes)] = FunctionEventAvg(e.name, shapes)
            avg.add(e)
        return EventList(groups.values(), info=dict(self.info, by_shape=group_by_input_shape))

    def total_average(self) -> FunctionEventAvg:
        total = FunctionEventAvg("Total", "")
        for e in self:
            total.add(e)
        return total

    def table(self, sort_by: str | None = None, row_limit: int = 100, max_name_column_width: int = 55,
              header: str | None = None, top_level_events_only: bool = False) -> str:
        columns, rows, notes = self._rows(sort_by, row_limit, top_level_events_only)
        widths = [max(len(c), *(len(r[i]) for r in rows)) if rows else len(c) for i, c in enumerate(columns)]
        widths[0] = min(widths[0], max_name_column_width)
        line = "-" * (sum(widths) + 2 * (len(widths) - 1))

        def fmt(cells):
            first = cells[0] if len(cells[0]) <= widths[0] else cells[0][:widths[0] - 3] + "..."
            out = [first.ljust(widths[0])] + [c.rjust(w) for c, w in zip(cells[1:], widths[1:])]
            return "  ".join(out).rstrip()
        lines = ([header] if header else []) + [line, fmt(columns), line] + [fmt(r) for r in rows] + [line]
        return "\n".join(lines + notes) + "\n"

    def _repr_html_(self) -> str:
        columns, rows, notes = self._rows(None, 100, False)
        head = "".join(f"<th>{html.escape(c)}</th>" for c in columns)
        body = "".join("<tr>" + "".join(f"<td>{html.escape(c)}</td>" for c in r) + "</tr>" for r in rows)
        foot = "".join(f"<div>{html.escape(n)}</div>" for n in notes)
        return (f"<table class='webgrad-profile'><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"
                f"{foot}")

    def __str__(self) -> str:
        return self.table()

    def _rows(self, sort_by, row_limit, top_level_only):
        averages = self if not self or isinstance(self[0], FunctionEventAvg) else self.key_averages()
        if top_level_only:
            raise NotImplementedError("table: top_level_events_only=True is not supported; leave it False")
        if sort_by is not None:
            key = _ALIASES.get(sort_by, sort_by)
            if key not in _FIELDS and key != "count":
                raise ValueError(f"table: unknown sort_by={sort_by!r}; use one of "
                                 f"{', '.join(_FIELDS + ('count',))}")
            averages = sorted(averages, key=lambda a: getattr(a, key), reverse=True)
        if row_limit is not None and row_limit >= 0:
            averages = list(averages)[:row_limit]
        info = self.info
        device = bool(info.get("device"))
        memory = bool(info.get("memory"))
        host_self = sum(a.self_cpu_time_total for a in self) or 1.0
        device_self = sum(a.self_device_time_total for a in self) or 1.0
        columns = ["Name", "Self CPU %", "Self CPU", "CPU total %", "CPU total", "CPU time avg"]
        if device:
            columns += ["Self WebGPU", "Self WebGPU %", "WebGPU total", "WebGPU time avg"]
        if memory:
            columns += ["CPU Mem", "Self CPU Mem"] + (["WebGPU Mem", "Self WebGPU Mem"] if device else [])
        columns += ["# of Calls"] + (["Dispatches"] if device else [])
        flops = any(a.flops for a in averages)
        columns += ["Total MFLOPs"] * flops + ["Input Shapes"] * bool(info.get("by_shape"))
        rows = []
        for a in averages:
            row = [a.key, _pct(a.self_cpu_time_total, host_self), _us(a.self_cpu_time_total),
                   _pct(a.cpu_time_total, host_self), _us(a.cpu_time_total), _us(a.cpu_time)]
            if device:
                row += [_us(a.self_device_time_total), _pct(a.self_device_time_total, device_self),
                        _us(a.device_time_total), _us(a.device_time)]
            if memory:
                row += [_mem(a.cpu_memory_usage), _mem(a.self_cpu_memory_usage)]
                row += [_mem(a.device_memory_usage), _mem(a.self_device_memory_usage)] if device else []
            row += [str(a.count)] + ([str(a.dispatches)] if device else [])
            row += [f"{a.flops / 1e6:.3f}" if a.flops else "--"] * flops + [a.input_shapes] * bool(info.get("by_shape"))
            rows.append(row)
        notes = [f"Self CPU time total: {_us(sum(a.self_cpu_time_total for a in self))}"]
        if device:
            notes.append(f"Self WebGPU time total: {_us(sum(a.self_device_time_total for a in self))} "
                         f"({info.get('device_timing', '')})")
            notes.append(f"WebGPU dispatches: {sum(a.self_dispatches for a in self)}, submits: "
                         f"{info.get('submits', 0)}, reads: {info.get('reads', 0)}")
        return columns, rows, notes

    def export_chrome_trace(self, path: str) -> None:
        events = [e for e in self if isinstance(e, FunctionEvent)]
        with open(path, "w") as f:
            json.dump(_chrome_trace(events, self.info), f)


def _shape_key(shapes) -> str:
    return str([list(s) for s in shapes])


def _us(us: float) -> str:
    if abs(us) >= 1e6:
        return f"{us / 1e6:.3f}s"
    if abs(us) >= 1e3:
        return f"{us / 1e3:.3f}ms"
    return f"{us:.3f}us"


def _pct(part: float, whole: float) -> str:
    return f"{100.0 * part / whole:.2f}%"


def _mem(n: int) -> str:
    for unit, size in (("Gb", 1 << 30), ("Mb", 1 << 20), ("Kb", 1 << 10)):
        if abs(n) >= size:
            return f"{n / size:.2f} {unit}"
    return f"{n} b"


def _chrome_trace(events, info) -> dict:
    """Chrome trace format: complete ('X') events in microseconds; host on pid 0, GPU
    kernels on pid 1; memory in use as counter ('C') events."""
    origin = info.get("origin_ns", 0)
    trace = [{"ph": "M", "name": "process_name", "pid": 0, "tid": 0, "args": {"name": "webgrad host"}},
             {"ph": "M", "name": "process_name", "pid": 1, "tid": 0, "args": {"name": "WebGPU"}}]
    for e in events:
        args = {"Input Dims": [list(s) for s in e.input_shapes]} if e.input_shapes else {}
        if e.flops:
            args["FLOPs"] = e.flops
        if e.bytes:
            args["bytes"] = e.bytes
        if e.dispatches and e.kind != "kernel":
            args["dispatches"] = e.dispatches
        if e.device_ns and e.kind != "kernel":
            args["device_us"] = e.device_ns / 1e3
        if e.parent is not None:
            args["parent"] = e.parent.name
        kernel = e.kind == "kernel"
        trace.append({"ph": "X", "name": e.name, "cat": e.kind, "pid": 1 if kernel else 0, "tid": 0,
                      "ts": (e.start_ns - origin) / 1e3, "dur": (e.end_ns - e.start_ns) / 1e3, "args": args})
    for ts, values in info.get("memory_timeline", ()):
        trace.append({"ph": "C", "name": "Memory in use (bytes)", "pid": 0, "tid": 0, "ts": (ts - origin) / 1e3,
                      "args": values})
    return {"traceEvents": trace, "displayTimeUnit": "ms",
            "otherData": {"device_timing": info.get("device_timing", "")}}


# -- recording ------------------------------------------------------------------
def _webgpu_backend():
    """The WebGPU backend if it exists already (profiling never creates a device)."""
    module = sys.modules.get("webgrad.backend.webgpu")
    return None if module is None else module._state["backend"]


# Composite functions timed as one range around their primitives while recording.
_COMPOSITES = {"webgrad.nn.functional": ("linear", "conv1d", "conv2d", "cross_entropy", "nll_loss", "mse_loss",
                                         "scaled_dot_product_attention", "max_pool2d", "avg_pool2d", "batch_norm",
                                         "layer_norm", "dropout", "relu", "gelu")}


def _wrapped(name, fn, recorder):
    @functools.wraps(fn)
    def timed(*args, **kwargs):
        first = next((a for a in args if hasattr(a, "_data")), None)
        mark = recorder.begin(name, "composite", args, "cpu" if first is None else first.device)
        out = None
        try:
            out = fn(*args, **kwargs)
        finally:
            recorder.end(mark, out, name, args)
        return out
    return timed


class profile:  # noqa: N801  (torch's name)
    """Record ops, backward nodes, ranges and WebGPU kernels while active (a context
    manager, or ``start()``/``stop()``). ``device_timing``: "auto" (timestamp queries
    when the adapter has them), "sync" (wait for the GPU at every op boundary), or None."""

    def __init__(self, *, activities=None, schedule=None, on_trace_ready=None, record_shapes: bool = False,
                 profile_memory: bool = False, with_stack: bool = False, with_flops: bool = True,
                 with_modules: bool = False, device_timing: str | None = "auto", experimental_config=None):
        activities = set(ProfilerActivity) if activities is None else set(activities)
        unknown = [a for a in activities if not isinstance(a, ProfilerActivity)]
        if unknown:
            raise ValueError(f"profile: unknown activities {unknown}; use webgrad.profiler.ProfilerActivity.CPU/WEBGPU")
        if device_timing not in ("auto", "sync", None):
            raise ValueError(f"profile: device_timing={device_timing!r}; use 'auto', 'sync' or None")
        self.device = ProfilerActivity.WEBGPU in activities
        self.schedule, self.on_trace_ready = schedule, on_trace_ready
        self.record_shapes, self.profile_memory, self.with_flops = record_shapes, profile_memory, with_flops
        self.device_timing = device_timing if self.device else None
        self.step_num = 0
        self._events: list = []
        self._stack: list = []
        self._recording = False
        self._started = False
        self._patched: list = []
        self._step_event = None
        self._memory: list = []
        self._cpu_in_use = 0
        self._finished: EventList | None = None
        self._timer: Any = None
        self._sync = False
        self._counters = (0, 0)

    # -- lifecycle --------------------------------------------------------------
    def __enter__(self):
        self.start()
        return self

    def __exit__(self, *exc):
        self.stop()
        return False

    def start(self) -> None:
        if self._started:
            raise RuntimeError("profile.start: this profile is already started")
        self._started = True
        self._finished = None
        if self._action() != ProfilerAction.NONE:
            self._record_on()

    def stop(self) -> None:
        if not self._started:
            raise RuntimeError("profile.stop: the profile was not started")
        if self._recording:
            self._record_off()
            if self.on_trace_ready is not None:
                self.on_trace_ready(self)
        self._started = False

    def step(self) -> None:
        """Mark the end of a training step (with ``schedule``: advances the schedule)."""
        if not self._started:
            raise RuntimeError("profile.step: call it inside `with profile(...)` (or after start())")
        if self._recording and self._step_event is not None:
            self.end(self._step_event, None, "", ())
        self._step_event = None
        before = self._action()
        self.step_num += 1
        after = self._action()
        if self._recording and before == ProfilerAction.RECORD_AND_SAVE:
            self._record_off()
            if self.on_trace_ready is not None:
                self.on_trace_ready(self)
        elif self._recording and after == ProfilerAction.NONE:
            self._record_off()
        if self._recording and before == ProfilerAction.WARMUP and after != ProfilerAction.WARMUP:
            self._record_off()  # warmup steps are recorded only to be dropped
            self._record_on()
        elif not self._recording and after != ProfilerAction.NONE:
            self._record_on()
        if self._recording:
            self._step_event = self.begin(f"ProfilerStep#{self.step_num}", "user", ())

    def _action(self) -> ProfilerAction:
        return ProfilerAction.RECORD if self.schedule is None else self.schedule(self.step_num)

    def _record_on(self) -> None:
        if registry.PROFILER is not None:
            raise RuntimeError("profile: another webgrad.profiler.profile is recording; stop it first "
                               "(profiles do not nest)")
        self._events, self._stack, self._memory, self._cpu_in_use = [], [], [], 0
        self._origin = _now()
        self._attach_device()
        for module_name, names in _COMPOSITES.items():
            module = sys.modules.get(module_name)
            for name in names if module is not None else ():
                fn = getattr(module, name, None)
                if fn is not None:
                    self._patched.append((module, name, fn))
                    setattr(module, name, _wrapped(f"F.{name}", fn, self))
        from .optim.optimizer import Optimizer

        for cls in _subclasses(Optimizer):
            if "step" in cls.__dict__:
                fn = cls.__dict__["step"]
                self._patched.append((cls, "step", fn))
                cls.step = _wrapped(f"Optimizer.step#{cls.__name__}.step", fn, self)
        self._recording = True
        registry.PROFILER = self

    def _record_off(self) -> None:
        registry.PROFILER = None
        self._recording = False
        for owner, name, fn in reversed(self._patched):
            setattr(owner, name, fn)
        self._patched = []
        if self._step_event is not None and self._step_event.end_ns is None:
            self.end(self._step_event, None, "", ())
        self._step_event = None
        self._finished = self._finish()

    def _attach_device(self) -> None:
        """Start counting (and, with timestamp queries, timing) on the WebGPU device if it exists."""
        backend = _webgpu_backend() if self.device else None
        self._backend = backend
        if backend is None:
            return
        device = backend.device
        device.submit()  # earlier work must not land in the first timed pass
        self._counters = (getattr(device, "submits", 0), getattr(device, "reads", 0))
        self._sync = self.device_timing == "sync"
        if self.device_timing == "auto" and getattr(device, "timestamps", False):
            self._timer = device.timer = device.make_timer()

    def _timing_name(self) -> str:
        if self.device_timing is None:
            return "device time not measured (device_timing=None)"
        if self._timer is not None:
            return "device time from WebGPU timestamp queries, per dispatch"
        if self._sync:
            return "device time with synchronization at op boundaries (the waits change the timing)"
        return ("device time not measured: the adapter has no 'timestamp-query'; pass device_timing='sync' "
                "to time ops by waiting for the GPU at op boundaries")

    # -- hooks (called by ops.registry.apply, the autograd walk, the wrappers) ---
    def begin(self, name, kind, inputs, device_type="cpu"):
        stack = self._stack
        while stack and stack[-1]._frame is not None and not _running(stack[-1]._frame):
            stack.pop()._frame = None  # an op that raised: it never ended, and is no parent
        shapes = tuple(tuple(t.shape) for t in inputs if hasattr(t, "shape")) if self.record_shapes else ()
        event = FunctionEvent(len(self._events), name, kind, device_type, 0,
                              self._stack[-1] if self._stack else None, shapes)
        if device_type == "webgpu" or (kind == "user" and self._backend is not None):
            if self._backend is None:  # the device was made after the profile started
                self._attach_device()
            if self._backend is not None:  # (user ranges count the dispatches inside them too)
                device = self._backend.device
                if self._sync:
                    device.wait()
                event.dispatch_range = (device.dispatches, device.dispatches)
                if self.profile_memory:
                    event._mem0 = self._backend.pool.in_use
        self._events.append(event)
        self._stack.append(event)
        event.start_ns = _now()
        return event

    def end(self, event, out, name, inputs) -> None:
        end = _now()
        stack = self._stack
        at = len(stack) - 1
        while at >= 0 and stack[at] is not event:
            at -= 1
        if at < 0:
            return  # already closed with its parent (an exception skipped its own end)
        del stack[at:]  # children an exception left open end with their parent
        event._frame = None
        if event.dispatch_range is not None and self._backend is not None:
            device = self._backend.device
            if self._sync:
                device.wait()
                end = _now()
                event.device_ns = float(end - event.start_ns)
            event.dispatch_range = (event.dispatch_range[0], device.dispatches)
            if self.profile_memory:
                event.device_mem = self._backend.pool.in_use - event._mem0
        event.end_ns = end
        if out is not None and hasattr(out, "_data"):
            if self.with_flops:
                event.flops = _flops(name, inputs, out)
            event.bytes = sum(_nbytes(t) for t in inputs if hasattr(t, "_data")) + _nbytes(out)
            if self.profile_memory:
                self._count_memory(event, out)
        if event.parent is not None:
            event.parent.children.append(event)

    def _count_memory(self, event, out) -> None:
        data = out._data
        if out.device == "cpu" and getattr(data, "base", 0) is None:  # a fresh numpy array, not a view
            event.cpu_mem = data.nbytes
            self._cpu_in_use += data.nbytes
            weakref.finalize(data, self._cpu_freed, data.nbytes)
        values = {"cpu": self._cpu_in_use}
        if self._backend is not None:
            values["webgpu"] = self._backend.pool.in_use
        self._memory.append((event.end_ns, values))

    def _cpu_freed(self, nbytes) -> None:
        self._cpu_in_use -= nbytes

    def begin_op(self, op, inputs):
        event = self.begin(op.name, "op", inputs, inputs[0].device)
        event._frame = sys._getframe(1)
        return event

    def end_op(self, mark, op, inputs, out) -> None:
        self.end(mark, out, op.name, inputs)

    def begin_backward(self, node, grad):
        return self.begin(node.name(), "backward", (grad,), grad.device)

    # -- results ----------------------------------------------------------------
    def _finish(self) -> EventList:
        events = [e for e in self._events if e.end_ns is not None]  # drop ranges an exception left open
        info = {"device": self.device and self._backend is not None, "memory": self.profile_memory,
                "device_timing": self._timing_name(), "origin_ns": self._origin, "memory_timeline": self._memory}
        if self._backend is not None:
            device = self._backend.device
            if self._timer is not None:
                device.submit()
                device.timer = None
                events += self._kernel_events(events, self._timer.results)
                self._timer = None
            info["submits"] = getattr(device, "submits", 0) - self._counters[0]
            info["reads"] = getattr(device, "reads", 0) - self._counters[1]
            if self.profile_memory:
                info["webgpu_peak_bytes"] = self._backend.pool.peak
        for e in reversed(events):  # children before parents
            if e.kind == "kernel":
                continue
            children = sum(c.device_ns for c in e.children)
            if e.dispatch_range is None:  # a host range: device memory is its children's
                e.device_mem = sum(c.device_mem for c in e.children)
            if not self._sync:  # totals from the kernels' times (the kernels hold the self time, as in torch)
                e.device_ns = e.kernel_ns + children
            elif e.dispatch_range is None:  # not synchronized (a user range): its children's time
                e.device_ns = children
            else:
                e.self_device_ns = e.device_ns - children
        return EventList(events, info=info)

    @staticmethod
    def _kernel_events(events, results) -> list:
        """GPU kernels as events, each under the innermost op that dispatched it."""
        owner = {}
        for e in events:  # begin order: an inner op overwrites its parent's claim
            if e.dispatch_range is not None:
                for n in range(*e.dispatch_range):
                    owner[n] = e
        kernels, offset = [], None
        for n, name, start, end in results:
            op = owner.get(n)
            if offset is None:  # place the GPU's clock on the host's: first kernel at its op's start
                offset = (op.start_ns if op is not None else 0) - start
            k = FunctionEvent(-1, name, "kernel", "webgpu", start + offset, op)
            k.end_ns, k.device_ns = end + offset, float(end - start)
            k.self_device_ns = k.device_ns
            if op is not None:
                op.kernel_ns += k.device_ns
            kernels.append(k)
        return kernels

    def events(self) -> EventList:
        if self._finished is None:
            raise RuntimeError("profile.events: nothing recorded yet; read results after the `with` block "
                               "(or after stop())")
        return self._finished

    def key_averages(self, group_by_input_shape: bool = False, group_by_stack_n: int = 0) -> EventList:
        if group_by_input_shape and not self.record_shapes:
            raise ValueError("key_averages(group_by_input_shape=True) needs profile(record_shapes=True)")
        return self.events().key_averages(group_by_input_shape)

    def export_chrome_trace(self, path: str) -> None:
        self.events().export_chrome_trace(path)

    def memory_stats(self) -> dict:
        """Peak bytes in use while recording: ``{"cpu": ..., "webgpu": ...}`` (needs profile_memory)."""
        timeline = self.events().info["memory_timeline"]
        peaks: dict = {}
        for _, values in timeline:
            for device, n in values.items():
                peaks[device] = max(peaks.get(device, 0), n)
        return peaks

    def _repr_html_(self) -> str:
        return self.key_averages()._repr_html_()


def _running(frame) -> bool:
    """Whether ``frame`` is on the current call stack (checked only when an op is
    the innermost open event: inside an op that calls ops, or after one raised)."""
    f: Any = sys._getframe(2)
    while f is not None:
        if f is frame:
            return True
        f = f.f_back
    return False


def _subclasses(cls):
    for sub in cls.__subclasses__():
        yield sub
        yield from _subclasses(sub)


class record_function:  # noqa: N801  (torch's name)
    """Mark a range of code as one event: ``with record_function("data"):`` or as a decorator."""

    def __init__(self, name: str, args: str | None = None):
        self.name, self.args, self._mark, self._prof = name, args, None, None

    def __enter__(self):
        prof = registry.PROFILER
        if prof is not None:
            self._prof, self._mark = prof, prof.begin(self.name, "user", ())
        return self

    def __exit__(self, *exc):
        if self._prof is not None:
            self._prof.end(self._mark, None, self.name, ())
            self._prof = self._mark = None
        return False

    def __call__(self, fn):
        name = self.name

        @functools.wraps(fn)
        def wrapper(*args, **kwargs):
            with record_function(name):
                return fn(*args, **kwargs)
        return wrapper
