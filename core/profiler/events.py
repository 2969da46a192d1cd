"""The profiler's results: events, per-name averages, the printed / HTML table and the
Chrome trace. Times are microseconds (as torch's), kept as nanoseconds inside."""
from __future__ import annotations

import html
import json

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
        columns += ["Total FLOPs"] * flops + ["Bytes Moved"] + ["Input Shapes"] * bool(info.get("by_shape"))
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
            row += [_count(a.flops) if a.flops else "--"] * flops + [_mem(a.bytes) if a.bytes else "--"]
            row += [a.input_shapes] * bool(info.get("by_shape"))
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


def _count(n: int) -> str:
    for unit, size in (("T", 1e12), ("G", 1e9), ("M", 1e6), ("K", 1e3)):
        if n >= size:
            return f"{n / size:.3f}{unit}"
    return str(n)


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
