"""The device interface the WebGPU backend talks to, and its native
implementation over wgpu-py. The browser implementation (Pyodide over
``js.navigator.gpu``) provides the same methods; nothing above this layer knows
which one it runs on.

Interface: ``create_buffer``, ``write_buffer``, ``pipeline`` (compiled once per
kernel record), ``dispatch`` (recorded into one open command encoder),
``submit``, ``read`` (blocking) and ``read_async``.

Ordering rule: ``queue.writeBuffer`` runs before any not-yet-submitted encoder,
so writing into a buffer the open encoder already uses would reorder the two.
``write_buffer`` therefore submits first in that case. Uniform parameters of all
dispatches in one encoder live in one arena buffer written just before submit.
"""
from __future__ import annotations

import logging

UNIFORM_SLOT = 256          # minUniformBufferOffsetAlignment on every adapter we target
ARENA_SLOTS = 256           # dispatches per submit at most
_log = logging.getLogger("webgrad.webgpu")


class DeviceError(RuntimeError):
    """A WebGPU error (validation, out of memory, device lost), naming the op."""


class UniformArena:
    """The Params of every dispatch in the open encoder, one 256-byte slot each,
    written to the arena buffer in one go just before the encoder is submitted."""

    def __init__(self):
        self.data = bytearray()

    def has_room(self) -> bool:
        return len(self.data) + UNIFORM_SLOT <= UNIFORM_SLOT * ARENA_SLOTS

    def add(self, uniform: bytes, label: str) -> int:
        """Append ``uniform`` in a fresh slot and return its byte offset."""
        if len(uniform) > UNIFORM_SLOT:
            raise DeviceError(f"webgpu: {label}: Params of {len(uniform)} bytes exceed the {UNIFORM_SLOT}-byte slot")
        offset = len(self.data)
        self.data += uniform
        self.data += bytes(-len(uniform) % UNIFORM_SLOT)
        return offset

    def take(self) -> bytes:
        data, self.data = bytes(self.data), bytearray()
        return data


class BindGroupCache:
    """Bind groups by (layout, arena slot, buffers). A training loop repeats the
    same dispatches on the same pooled buffers, and creating a bind group was the
    largest cost of recording a dispatch. Entries hold their buffers, so an id in
    a key cannot be reused by another buffer while the entry lives."""

    LIMIT = 4096

    def __init__(self):
        self.groups = {}

    def get(self, layout, offset: int, size: int, buffers, make):
        key = (id(layout), offset, size, *map(id, buffers))
        hit = self.groups.get(key)
        if hit is not None:
            return hit[0]
        if len(self.groups) >= self.LIMIT:
            self.groups.clear()
        group = make()
        self.groups[key] = (group, layout, tuple(buffers))
        return group

    def clear(self) -> None:
        self.groups.clear()


class DispatchTimer:
    """GPU time of every dispatch, for ``webgrad.profiler`` ('timestamp-query'): while a
    timer is attached, each dispatch runs in its own compute pass whose beginning and
    end write a timestamp into a query set; ``submit`` resolves them and reads them back
    (a wait, only while profiling). ``results`` holds (dispatch number, kernel, start ns,
    end ns); timestamps are nanoseconds in the GPU's own time base."""

    CAPACITY = 1024  # dispatches per query set; a full set makes the device submit

    def __init__(self, query_set, resolved, keys=("query_set", "beginning_of_pass_write_index",
                                                  "end_of_pass_write_index")):
        self.query_set, self.resolved, self.keys = query_set, resolved, keys  # keys: the transport's spelling
        self.pending: list = []   # (dispatch number, kernel) in query order, not yet read
        self.results: list = []

    def pass_args(self, number: int, kernel: str) -> dict:
        """The compute pass's ``timestampWrites`` for dispatch ``number``."""
        index = 2 * len(self.pending)
        self.pending.append((number, kernel))
        query_set, begin, end = self.keys
        return {query_set: self.query_set, begin: index, end: index + 1}

    def full(self) -> bool:
        return len(self.pending) >= self.CAPACITY

    def add(self, raw) -> None:
        """Store the resolved (start, end) pairs of the pending dispatches, read back as ``raw``."""
        import numpy as np

        stamps = np.frombuffer(raw, dtype=np.uint64).reshape(-1, 2)
        for (number, kernel), (start, end) in zip(self.pending, stamps.tolist()):
            self.results.append((number, kernel, start, end))
        self.pending.clear()


class NativeDevice:
    """wgpu-py (Vulkan/Metal/D3D12; llvmpipe on machines without a GPU)."""

    def __init__(self, power_preference="high-performance"):
        import os
        import tempfile

        # Mesa's Vulkan loader complains on stderr when this is unset (headless machines).
        os.environ.setdefault("XDG_RUNTIME_DIR", tempfile.gettempdir())
        import wgpu

        self._wgpu = wgpu
        adapter = wgpu.gpu.request_adapter_sync(power_preference=power_preference)
        if adapter is None:
            raise DeviceError("webgpu: no adapter found; install mesa-vulkan-drivers or use device='cpu'")
        self.adapter_info = dict(adapter.info)
        wanted = {
            "max-storage-buffer-binding-size": adapter.limits["max-storage-buffer-binding-size"],
            "max-buffer-size": adapter.limits["max-buffer-size"],
            "max-compute-invocations-per-workgroup": adapter.limits["max-compute-invocations-per-workgroup"],
            "max-compute-workgroup-size-x": adapter.limits["max-compute-workgroup-size-x"],
            "max-storage-buffers-per-shader-stage": adapter.limits["max-storage-buffers-per-shader-stage"],
        }
        # 'timestamp-query' lets webgrad.profiler time each dispatch on the GPU.
        features = [name for name in ("timestamp-query",) if name in adapter.features]
        self.device = adapter.request_device_sync(required_limits=wanted, required_features=features,
                                                  label="webgrad")
        self.timestamps = "timestamp-query" in features
        limits = self.device.limits
        self.limits = {
            "max_storage_buffer_binding_size": int(limits["max-storage-buffer-binding-size"]),
            "max_buffer_size": int(limits["max-buffer-size"]),
            "max_compute_workgroups_per_dimension": int(limits["max-compute-workgroups-per-dimension"]),
            "max_compute_invocations_per_workgroup": int(limits["max-compute-invocations-per-workgroup"]),
        }
        self._usage = wgpu.BufferUsage.STORAGE | wgpu.BufferUsage.COPY_SRC | wgpu.BufferUsage.COPY_DST
        self._arena = self.device.create_buffer(
            size=UNIFORM_SLOT * ARENA_SLOTS, label="uniform arena",
            usage=wgpu.BufferUsage.UNIFORM | wgpu.BufferUsage.COPY_DST)
        self._uniforms = UniformArena()
        self.bind_groups = BindGroupCache()
        self._encoder = None
        self._pass = None
        self._used = set()        # ids of buffers the open encoder touches
        self._pipelines = {}
        self.dispatches = 0       # counters the profiler reads
        self.submits = 0
        self.reads = 0
        self.timer: DispatchTimer | None = None  # set by webgrad.profiler to time dispatches
        self._probe = None        # a 4-byte buffer read back by wait()

    # -- buffers ------------------------------------------------------------------
    def create_buffer(self, size: int, label: str):
        try:
            return self.device.create_buffer(size=size, usage=self._usage, label=label)
        except Exception as err:  # out of memory and validation errors come back here
            raise DeviceError(f"webgpu: could not allocate {size} bytes for {label}: {err}") from err

    def write_buffer(self, buffer, offset: int, data) -> None:
        if id(buffer) in self._used:
            self.submit()
        self.device.queue.write_buffer(buffer, offset, data)

    def read(self, buffer, offset: int, size: int) -> memoryview:
        self.submit()
        self.reads += 1
        return self.device.queue.read_buffer(buffer, offset, size)

    def wait(self) -> None:
        """Submit and block until the GPU has finished all work (profiler's op-boundary sync)."""
        self.submit()
        if self._probe is None:
            self._probe = self.create_buffer(4, "wait probe")
        self.device.queue.read_buffer(self._probe, 0, 4)  # a read waits for the queue to drain

    async def read_async(self, buffer, offset: int, size: int):
        return self.read(buffer, offset, size)

    # -- kernels ------------------------------------------------------------------
    def pipeline(self, key, source: str, entry: str, constants: dict, label: str):
        found = self._pipelines.get(key)
        if found is None:
            try:
                module = self.device.create_shader_module(code=source, label=label)
                found = self.device.create_compute_pipeline(
                    layout="auto", label=label,
                    compute={"module": module, "entry_point": entry, "constants": constants})
            except Exception as err:
                raise DeviceError(f"webgpu: compiling {label} failed: {err}") from err
            self._pipelines[key] = (found, found.get_bind_group_layout(0))
            found = self._pipelines[key]
        return found

    def dispatch(self, pipeline, buffers, uniform: bytes, grid, label: str) -> None:
        """Record one dispatch. ``buffers`` bind to 1, 2, ...; ``uniform`` to 0."""
        if not self._uniforms.has_room():
            self.submit()
        offset = self._uniforms.add(uniform, label)
        pipe, layout = pipeline
        entries = [{"binding": 0, "resource": {"buffer": self._arena, "offset": offset, "size": len(uniform)}}]
        for i, buf in enumerate(buffers):
            entries.append({"binding": i + 1, "resource": {"buffer": buf, "offset": 0, "size": buf.size}})
            self._used.add(id(buf))
        try:
            group = self.bind_groups.get(layout, offset, len(uniform), buffers, lambda: self.device.create_bind_group(
                layout=layout, entries=entries, label=label))
            if self._encoder is None:
                self._encoder = self.device.create_command_encoder(label="webgrad batch")
            timer = self.timer
            if self._pass is None:
                timed = {} if timer is None else {"timestamp_writes": timer.pass_args(self.dispatches,
                                                                                        pipe.label or label)}
                self._pass = self._encoder.begin_compute_pass(label="webgrad pass", **timed)
            self._pass.set_pipeline(pipe)
            self._pass.set_bind_group(0, group)
            self._pass.dispatch_workgroups(*grid)
            if timer is not None:  # profiling: one pass per dispatch, so its timestamps time it alone
                self._pass.end()
                self._pass = None
        except Exception as err:
            raise DeviceError(f"webgpu: {label}: {err}") from err
        self.dispatches += 1
        if timer is not None and timer.full():
            self.submit()

    def submit(self) -> None:
        if self._encoder is None:
            return
        if self._pass is not None:
            self._pass.end()
        timer = self.timer
        if timer is not None and timer.pending:
            self._encoder.resolve_query_set(timer.query_set, 0, 2 * len(timer.pending), timer.resolved, 0)
        commands = self._encoder.finish()
        self.device.queue.write_buffer(self._arena, 0, self._uniforms.take())
        try:
            self.device.queue.submit([commands])
        except Exception as err:
            raise DeviceError(f"webgpu: submit failed: {err}") from err
        finally:
            self._encoder = self._pass = None
            self._uniforms = UniformArena()
            self._used.clear()
        self.submits += 1
        if timer is not None and timer.pending:
            timer.add(self.device.queue.read_buffer(timer.resolved, 0, 16 * len(timer.pending)))

    def make_timer(self) -> DispatchTimer:
        """A timer for webgrad.profiler to attach as ``self.timer`` (needs ``self.timestamps``)."""
        wgpu = self._wgpu
        query_set = self.device.create_query_set(type=wgpu.QueryType.timestamp, count=2 * DispatchTimer.CAPACITY)
        resolved = self.device.create_buffer(size=16 * DispatchTimer.CAPACITY, label="profiler timestamps",
                                             usage=wgpu.BufferUsage.QUERY_RESOLVE | wgpu.BufferUsage.COPY_SRC)
        return DispatchTimer(query_set, resolved)

    def close(self) -> None:
        """Destroy the device (webgrad.webgpu.reset); the object is unusable afterwards."""
        self.bind_groups.clear()
        self.device.destroy()
