"""``webgrad.profiler``: where a training step spends its time, as ``torch.profiler``.

    with webgrad.profiler.profile(record_shapes=True, profile_memory=True) as prof:
        train_step(x, y)
    print(prof.key_averages().table(sort_by="self_device_time_total", row_limit=15))
    prof.export_chrome_trace("trace.json")     # Perfetto / chrome://tracing

A recording profile is an observer on the op registry's stack (``ops.registry.Observer``):
every primitive goes through ``ops.registry.apply``, which reports it here (when nothing
observes: one check per op). Backward nodes are ranges the autograd walk reports
(``MulBackward``...), functions declared ``@registry.composite`` (``F.linear``,
``F.conv2d``, ``F.cross_entropy``...) and optimizers' ``step`` are ranges their
primitives nest under, a compiled replay reports each kernel call, and
``record_function("name")`` marks any range. Host times come from
``time.perf_counter_ns`` (no threads or signals, so it runs in Pyodide too).

WebGPU device time: with the adapter's 'timestamp-query' each dispatch runs in its
own timed compute pass (per kernel and per op); without it, ``device_timing="sync"``
waits for the GPU at op boundaries (which changes the timing it measures), and by
default device time is not measured; the table says which.
"""
from __future__ import annotations

import enum
import functools
import sys
import time
from typing import Any

from .. import cpu
from ..ops import registry
from .events import EventList, FunctionEvent, FunctionEventAvg

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
    """Bytes of ``t``'s elements as its device stores them (a bfloat16 on cpu, or any half on
    WebGPU, is 4 bytes: the profile shows what is really moved)."""
    return t._data.nbytes


def _shapes(inputs) -> list:
    """Each input's shape (None for a non-tensor argument), by position."""
    return [getattr(t, "shape", None) for t in inputs]


# -- recording ------------------------------------------------------------------
def _webgpu_backend():
    """The WebGPU backend if it exists already (profiling never creates a device)."""
    module = sys.modules.get("webgrad.backend.webgpu")
    return None if module is None else module._state["backend"]


class profile(registry.Observer):  # noqa: N801  (torch's name)
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
        unsupported = [name for name, value in (("with_stack", with_stack), ("with_modules", with_modules),
                                                ("experimental_config", experimental_config)) if value]
        if unsupported:
            import warnings

            warnings.warn(f"profile: {', '.join(unsupported)} is not recorded by webgrad.profiler (ops, backward "
                          f"nodes, composites and record_function ranges are); the argument is ignored",
                          stacklevel=2)
        self.device = ProfilerActivity.WEBGPU in activities
        self.schedule, self.on_trace_ready = schedule, on_trace_ready
        self.record_shapes, self.profile_memory, self.with_flops = record_shapes, profile_memory, with_flops
        self.device_timing = device_timing if self.device else None
        self.step_num = 0
        self._events: list = []
        self._stack: list = []
        self._recording = False
        self._started = False
        self._step_event = None
        self._memory: list = []
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
            self.end(self._step_event, None, None, ())
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
        if registry.observer_of(profile) is not None:
            raise RuntimeError("profile: another webgrad.profiler.profile is recording; stop it first "
                               "(profiles do not nest)")
        self._events, self._stack, self._memory = [], [], []
        if self.profile_memory:
            cpu.counter()  # counting starts with the cpu tensors alive now
        self._origin = _now()
        self._attach_device()
        self._recording = True
        registry.add_observer(self)

    def _record_off(self) -> None:
        registry.remove_observer(self)
        self._recording = False
        if self._step_event is not None and self._step_event.end_ns is None:
            self.end(self._step_event, None, None, ())
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
            self._timer = device.make_timer()
            device.attach_timer(self._timer)

    def _timing_name(self) -> str:
        if self.device_timing is None:
            return "device time not measured (device_timing=None)"
        if self._timer is not None:
            return "device time from WebGPU timestamp queries, per dispatch"
        if self._sync:
            return "device time with synchronization at op boundaries (the waits change the timing)"
        return ("device time not measured: the adapter has no 'timestamp-query'; pass device_timing='sync' "
                "to time ops by waiting for the GPU at op boundaries")

    # -- the registry's events (see ops.registry.Observer) ----------------------
    def op_begin(self, op, inputs):
        return self.begin(op.name, "op", inputs, inputs[0].device)

    def op_end(self, token, op, inputs, attrs, out) -> None:
        self.end(token, out, op.flops and functools.partial(op.flops, **attrs), inputs)

    def op_failed(self, token) -> None:
        """An op that raised never ends and is no parent: it leaves the stack (and the results)."""
        if token in self._stack:
            del self._stack[self._stack.index(token):]

    def enter(self, kind, name, target, args):
        if kind == "backward":
            return self.begin(name, "backward", args, args[0].device), None, None, ()
        if kind in ("composite", "optimizer"):
            first = next((a for a in args if hasattr(a, "_data")), None)
            event = self.begin(name, "composite", args, "cpu" if first is None else first.device)
            return event, True, registry.FLOPS.get(target), args
        return None

    def exit(self, token, out) -> None:
        if token is not None:
            event, keeps_out, flops, args = token
            self.end(event, out if keeps_out else None, flops, args)

    def kernel_begin(self, op, inputs, device, attrs):
        """A compiled replay calls a backend kernel directly (no ``apply``): an op event of its own."""
        arrays = [getattr(t, "_data", t) for t in inputs]
        return self.begin(op.name, "op", arrays, device), op, arrays, attrs

    def kernel_end(self, token, out) -> None:
        event, op, arrays, attrs = token
        self.end(event, None, None, ())
        if op.flops is not None and out is not None and self.with_flops:  # (an epilogue counts its product)
            event.flops = op.flops(_shapes(arrays), out.shape, **attrs)

    # -- ranges --------------------------------------------------------------------
    def begin(self, name, kind, inputs, device_type="cpu"):
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

    def end(self, event, out, flops, inputs) -> None:
        end = _now()
        stack = self._stack
        at = len(stack) - 1
        while at >= 0 and stack[at] is not event:
            at -= 1
        if at < 0:
            return  # already closed with its parent (an exception skipped its own end)
        del stack[at:]  # children an exception left open end with their parent
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
            if self.with_flops and flops is not None:
                event.flops = flops(_shapes(inputs), out.shape)
            event.bytes = sum(_nbytes(t) for t in inputs if hasattr(t, "_data")) + _nbytes(out)
            if self.profile_memory:
                self._count_memory(event, out)
        if event.parent is not None:
            event.parent.children.append(event)

    def _count_memory(self, event, out) -> None:
        data = out._data
        if out.device == "cpu" and getattr(data, "base", 0) is None:  # a fresh numpy array, not a view
            event.cpu_mem = data.nbytes
        values = {"cpu": cpu.counter().in_use}  # the figures of webgrad.cpu and webgrad.webgpu
        if self._backend is not None:
            values["webgpu"] = self._backend.pool.in_use
        self._memory.append((event.end_ns, values))

    # -- results ----------------------------------------------------------------
    def _finish(self) -> EventList:
        events = [e for e in self._events if e.end_ns is not None]  # drop ranges an exception left open
        info = {"device": self.device and self._backend is not None, "memory": self.profile_memory,
                "device_timing": self._timing_name(), "origin_ns": self._origin, "memory_timeline": self._memory}
        if self._backend is not None:
            device = self._backend.device
            if self._timer is not None:
                device.submit()
                device.attach_timer(None)
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


class record_function:  # noqa: N801  (torch's name)
    """Mark a range of code as one event: ``with record_function("data"):`` or as a decorator."""

    def __init__(self, name: str, args: str | None = None):
        self.name, self.args, self._mark, self._prof = name, args, None, None

    def __enter__(self):
        prof = registry.observer_of(profile)
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
