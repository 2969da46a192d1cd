"""The native WebGPU device: the shared ``Recorder`` (recorder.py) over wgpu-py
(Vulkan/Metal/D3D12; llvmpipe on machines without a GPU). The browser device
(browser.py) is the same recorder over ``js.navigator.gpu``; nothing above this
layer knows which one it runs on.

Errors in wgpu-py 0.32: a validation or out-of-memory error caused by a call is
raised by that call (its ``SafeLibCalls`` captures the error callback), so the
recorder's try/except names the op. What it does not offer: ``device.lost``
(``lost_async`` raises NotImplementedError), ``onuncapturederror`` and error
scopes (``push_error_scope``/``pop_error_scope``). Errors no call can raise, the
device-lost callback among them, only go to the "wgpu" logger, through
``ErrorHandler.log_error``; ``_WgpuErrors`` listens there and hands them to the
device. The lost callback arrives late (at some later poll of the device), so a
loss is also read from the errors calls raise ("Parent device is lost"): after
that the device sends nothing more to the GPU, where a submit on a lost device
can abort the process.
"""
from __future__ import annotations

import logging
import weakref

from .geometry import OPTIONAL_FEATURES, use_f16
from .recorder import (  # noqa: F401  (re-exported: the names callers import from here)
    ARENA_SLOTS,
    UNIFORM_SLOT,
    BindGroupCache,
    DeviceError,
    DispatchTimer,
    Recorder,
    UniformArena,
    Window,
)

_LOST = "The WGPU device was lost"  # how wgpu-py's lost callback starts its log message
PACKED_DOT_PROBE = "fn probe(a: u32, b: u32) -> i32 { return dot4I8Packed(a, b); }"  # geometry.PACKED_DOT_FEATURE


class _WgpuErrors(logging.Handler):
    """Errors wgpu-py could not raise from a call, handed to the device that listens:
    raised at its next read (or, for a loss, at its next operation)."""

    def __init__(self, device: NativeDevice):
        super().__init__(level=logging.ERROR)
        self.device = weakref.ref(device)

    def emit(self, record: logging.LogRecord) -> None:
        device = self.device()
        if device is None or record.funcName != "log_error":  # only wgpu-py's ErrorHandler; not other logs
            return
        message = record.getMessage()
        if message.startswith(_LOST):
            # 'destroyed' is destroy(): our own close(), whose callback may come after the next device
            # listens here; calls on a destroyed device raise "Parent device is lost" themselves.
            if "(destroyed)" not in message:
                device._lost = " ".join(message.split())
        else:
            device._errors.append(message)


class NativeDevice(Recorder):
    """wgpu-py (Vulkan/Metal/D3D12; llvmpipe on machines without a GPU)."""

    def __init__(self, power_preference="high-performance"):
        super().__init__()
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
        features = [name for name in OPTIONAL_FEATURES if name in adapter.features]
        self.device = adapter.request_device_sync(required_limits=wanted, required_features=features,
                                                  label="webgrad")
        self.timestamps = "timestamp-query" in features
        use_f16("shader-f16" in features)
        self.packed_dot = self._compiles(PACKED_DOT_PROBE)
        limits = self.device.limits
        self.limits = {
            "max_storage_buffer_binding_size": int(limits["max-storage-buffer-binding-size"]),
            "max_buffer_size": int(limits["max-buffer-size"]),
            "max_compute_workgroups_per_dimension": int(limits["max-compute-workgroups-per-dimension"]),
            "max_compute_invocations_per_workgroup": int(limits["max-compute-invocations-per-workgroup"]),
            "max_storage_buffers_per_shader_stage": int(limits["max-storage-buffers-per-shader-stage"]),
        }
        self._usage = wgpu.BufferUsage.STORAGE | wgpu.BufferUsage.COPY_SRC | wgpu.BufferUsage.COPY_DST
        self._arena = self._create_uniforms(UNIFORM_SLOT * ARENA_SLOTS, "uniform arena")
        self._probe = None        # a 4-byte buffer read back by wait()
        self._listener = _WgpuErrors(self)
        logging.getLogger("wgpu").addHandler(self._listener)

    def _compiles(self, source: str) -> bool:
        """Whether ``source`` compiles here (wgpu-py lists no WGSL language features: ask naga)."""
        try:
            self.device.create_shader_module(code=source)
        except Exception:  # wgpu's validation error: the feature is missing
            return False
        return True

    def make_timer(self) -> DispatchTimer:
        """A timer for webgrad.profiler to attach as ``self.timer`` (needs ``self.timestamps``)."""
        wgpu = self._wgpu
        query_set = self.device.create_query_set(type=wgpu.QueryType.timestamp, count=2 * DispatchTimer.CAPACITY)
        resolved = self.device.create_buffer(size=16 * DispatchTimer.CAPACITY, label="profiler timestamps",
                                             usage=wgpu.BufferUsage.QUERY_RESOLVE | wgpu.BufferUsage.COPY_SRC)
        return DispatchTimer(query_set, resolved)

    # -- the transport ------------------------------------------------------------
    def _loss_in(self, err: Exception) -> str | None:
        lost = [line.strip() for line in str(err).splitlines() if "device is lost" in line.lower()]
        return lost[0] if lost else None

    def _create_buffer(self, size: int, label: str):
        return self.device.create_buffer(size=size, usage=self._usage, label=label)

    def _write(self, buffer, offset: int, view: memoryview) -> None:
        self.device.queue.write_buffer(buffer, offset, view)

    def _read(self, pieces: list) -> list:
        return [self.device.queue.read_buffer(buffer, offset, size) for buffer, offset, size in pieces]

    async def _read_async(self, pieces: list) -> list:
        return self._read(pieces)  # wgpu-py's read_buffer blocks; there is no async one

    def _wait(self) -> None:
        if self._probe is None:
            self._probe = self._create_buffer(4, "wait probe")
        self.device.queue.read_buffer(self._probe, 0, 4)  # a read waits for the queue to drain

    def _compile(self, source: str, entry: str, constants: dict, label: str):
        module = self.device.create_shader_module(code=source, label=label)
        pipe = self.device.create_compute_pipeline(
            layout="auto", label=label, compute={"module": module, "entry_point": entry, "constants": constants})
        return pipe, pipe.get_bind_group_layout(0)

    def _create_uniforms(self, size: int, label: str):
        usage = self._wgpu.BufferUsage.UNIFORM | self._wgpu.BufferUsage.COPY_DST
        return self.device.create_buffer(size=size, usage=usage, label=label)

    def _bind_group(self, layout, uniforms, offset: int, size: int, buffers, label: str):
        entries = [{"binding": 0, "resource": {"buffer": uniforms, "offset": offset, "size": size}}]
        for i, buf in enumerate(buffers):
            whole = type(buf) is not Window
            resource = {"buffer": buf, "offset": 0, "size": buf.size} if whole else \
                {"buffer": buf.buffer, "offset": buf.offset, "size": buf.size}
            entries.append({"binding": i + 1, "resource": resource})
        return self.device.create_bind_group(layout=layout, entries=entries, label=label)

    def _new_encoder(self):
        return self.device.create_command_encoder(label="webgrad batch")

    def _begin_pass(self, encoder, timestamp_writes: dict | None):
        timed = {} if timestamp_writes is None else {"timestamp_writes": timestamp_writes}
        return encoder.begin_compute_pass(label="webgrad pass", **timed)

    def _record(self, pass_, pipe, group, grid) -> None:
        pass_.set_pipeline(pipe)
        pass_.set_bind_group(0, group)
        pass_.dispatch_workgroups(*grid)

    def _resolve_queries(self, encoder, timer: DispatchTimer, count: int) -> None:
        encoder.resolve_query_set(timer.query_set, 0, 2 * count, timer.resolved, 0)

    def _submit(self, commands) -> None:
        self.device.queue.submit([commands])

    def _close(self) -> None:
        logging.getLogger("wgpu").removeHandler(self._listener)
        self.device.destroy()
