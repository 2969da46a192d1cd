"""The browser WebGPU device: the shared ``Recorder`` (recorder.py) over
``js.navigator.gpu`` inside Pyodide (in a Web Worker or on a page). The native
device (device.py) is the same recorder over wgpu-py.

Blocking readback waits for ``GPUBuffer.mapAsync`` with ``pyodide.ffi.run_sync``.
That needs JavaScript Promise Integration *and* a Python stack entered through
``pyodide.runPythonAsync`` (or ``callPromising``); webgrad's worker always enters
that way. Elsewhere, use ``await tensor.numpy_async()``.

Errors: JavaScript calls rarely throw; the GPU reports errors through the
device's ``uncapturederror`` event, and a loss through ``device.lost``. Both
callbacks feed the recorder (``_errors``, ``_lost``), which raises them at the
next read (a loss: at the next operation). Pipelines compile inside error scopes,
so a shader error is raised at once, with the compiler's messages.

Proxies: every JS object held here is a ``JsProxy`` owned by Python (freed with
the Python object). Dicts go to JS with ``to_js(..., create_pyproxies=False)``,
so a conversion never leaves a ``PyProxy`` behind; the only long-lived
``PyProxy`` objects are the error callbacks made at construction.
"""
from __future__ import annotations

import itertools

from .geometry import OPTIONAL_FEATURES, PACKED_DOT_FEATURE, is_cpu_adapter, use_f16
from .recorder import ARENA_SLOTS, UNIFORM_SLOT, DeviceError, DispatchTimer, Recorder, Window


def _js():
    """The Pyodide modules, imported late so this file imports natively too (for docs and linting)."""
    import js
    from pyodide import ffi

    return js, ffi


class BrowserDevice(Recorder):
    """WebGPU in the browser (Chromium, Firefox, Safari) through Pyodide."""

    def __init__(self, power_preference="high-performance"):
        super().__init__()
        js, ffi = _js()
        self._js, self._ffi = js, ffi
        gpu = getattr(js.navigator, "gpu", None)
        if gpu is None:
            raise DeviceError("webgpu: this browser has no WebGPU (navigator.gpu is missing); "
                              "use device='cpu', or a browser with WebGPU enabled")
        if not ffi.can_run_sync():
            raise DeviceError(
                "webgpu: the browser device waits for the GPU with pyodide.ffi.run_sync, which needs Python "
                "entered through pyodide.runPythonAsync (webgrad's worker does this); from other entry points "
                "use `await tensor.numpy_async()`")
        adapter = ffi.run_sync(gpu.requestAdapter(self._obj({"powerPreference": power_preference})))
        if adapter is None:
            raise DeviceError("webgpu: the browser found no WebGPU adapter; use device='cpu'")
        self.adapter_info = self._describe(adapter)
        have = adapter.limits
        wanted = {name: getattr(have, name) for name in (
            "maxStorageBufferBindingSize", "maxBufferSize", "maxComputeInvocationsPerWorkgroup",
            "maxComputeWorkgroupSizeX", "maxStorageBuffersPerShaderStage")}
        # geometry.OPTIONAL_FEATURES (Chrome may round the timestamps, to 100 us by default).
        features = [name for name in OPTIONAL_FEATURES if adapter.features.has(name)]
        self.timestamps = "timestamp-query" in features
        try:
            self.device = ffi.run_sync(adapter.requestDevice(self._obj({"requiredLimits": wanted,
                                                                        "requiredFeatures": features,
                                                                        "label": "webgrad"})))
        except Exception as err:
            raise DeviceError(f"webgpu: requestDevice failed: {err}") from err
        use_f16("shader-f16" in features)
        language = getattr(gpu, "wgslLanguageFeatures", None)
        self.packed_dot = bool(language is not None and language.has(PACKED_DOT_FEATURE))
        limits = self.device.limits
        self.limits = {
            "max_storage_buffer_binding_size": int(limits.maxStorageBufferBindingSize),
            "max_buffer_size": int(limits.maxBufferSize),
            "max_compute_workgroups_per_dimension": int(limits.maxComputeWorkgroupsPerDimension),
            "max_compute_invocations_per_workgroup": int(limits.maxComputeInvocationsPerWorkgroup),
            "max_storage_buffers_per_shader_stage": int(limits.maxStorageBuffersPerShaderStage),
        }
        self.queue = self.device.queue
        usage = js.GPUBufferUsage
        self._usage = usage.STORAGE | usage.COPY_SRC | usage.COPY_DST
        self._staging_usage = usage.MAP_READ | usage.COPY_DST
        self._map_read = js.GPUMapMode.READ
        # webgrad's worker defines webgradRecordDispatch(pass, pipeline, group, x, y, z)
        # (web/runtime/worker.js): a dispatch's three pass calls in one crossing of the FFI, about
        # 2.4 us in Chromium against 21 for three calls from here. Elsewhere, three calls.
        self._record_dispatch = getattr(js, "webgradRecordDispatch", None)
        self._arena = self._create_uniforms(UNIFORM_SLOT * ARENA_SLOTS, "uniform arena")
        # Asynchronous errors arrive through callbacks. The error handler's proxy lives as long as
        # the device (close() destroys it); the lost handler runs once and then destroys itself.
        self._on_error = ffi.create_proxy(self._uncaptured)
        self.device.onuncapturederror = self._on_error
        self.device.lost.then(ffi.create_once_callable(self._device_lost))

    def make_timer(self) -> DispatchTimer:
        """A timer for webgrad.profiler to attach as ``self.timer`` (needs ``self.timestamps``)."""
        usage = self._js.GPUBufferUsage
        query_set = self.device.createQuerySet(self._obj({"type": "timestamp", "count": 2 * DispatchTimer.CAPACITY}))
        resolved = self.device.createBuffer(self._obj({"size": 16 * DispatchTimer.CAPACITY,
                                                       "label": "profiler timestamps",
                                                       "usage": usage.QUERY_RESOLVE | usage.COPY_SRC}))
        return DispatchTimer(query_set, resolved, ("querySet", "beginningOfPassWriteIndex", "endOfPassWriteIndex"))

    # -- helpers ------------------------------------------------------------------
    def _obj(self, value):
        """A Python dict/list as a plain JS object/array (JsProxy values pass through)."""
        return self._ffi.to_js(value, dict_converter=self._js.Object.fromEntries, create_pyproxies=False)

    @staticmethod
    def _describe(adapter) -> dict:
        info = adapter.info
        fields = {name: str(getattr(info, name, "") or "") for name in
                  ("vendor", "architecture", "device", "description")}
        fallback = bool(getattr(info, "isFallbackAdapter", False) or getattr(adapter, "isFallbackAdapter", False))
        cpu = fallback or is_cpu_adapter(fields)
        return {**fields, "adapter_type": "CPU" if cpu else "GPU", "backend_type": "WebGPU (browser)",
                "is_fallback_adapter": fallback}

    def _uncaptured(self, event):
        error = event.error
        self._errors.append(f"{error.constructor.name}: {error.message}")

    def _device_lost(self, info):
        self._lost = f"{info.reason}: {info.message}"

    # -- the transport ------------------------------------------------------------
    def _create_buffer(self, size: int, label: str):
        return self.device.createBuffer(self._obj({"size": size, "usage": self._usage, "label": label}))

    def _write(self, buffer, offset: int, view: memoryview) -> None:
        self.queue.writeBuffer(buffer, offset, self._ffi.to_js(view))

    def _staged(self, pieces: list):
        """Copy each (buffer, offset, size) into one fresh MAP_READ buffer, back to back, and
        submit the copies: one map then reads them all."""
        total = sum(size for _, _, size in pieces)
        staging = self.device.createBuffer(self._obj({"size": total, "usage": self._staging_usage,
                                                      "label": "readback"}))
        encoder = self.device.createCommandEncoder(self._obj({"label": "readback"}))
        at = 0
        for buffer, offset, size in pieces:
            encoder.copyBufferToBuffer(buffer, offset, staging, at, size)
            at += size
        self.queue.submit(self._ffi.to_js([encoder.finish()]))
        return staging, total

    def _unstage(self, staging, pieces: list) -> list:
        try:
            mapped = staging.getMappedRange(0, sum(size for _, _, size in pieces))
            data = self._js.Uint8Array.new(mapped).to_bytes()
        finally:
            staging.unmap()
            staging.destroy()
        ends = list(itertools.accumulate(size for _, _, size in pieces))
        return [data[end - size:end] for end, (_, _, size) in zip(ends, pieces)]

    def _read(self, pieces: list) -> list:
        staging, total = self._staged(pieces)
        try:
            self._ffi.run_sync(staging.mapAsync(self._map_read, 0, total))
        except Exception:
            staging.destroy()
            raise
        return self._unstage(staging, pieces)

    async def _read_async(self, pieces: list) -> list:
        staging, total = self._staged(pieces)
        try:
            await staging.mapAsync(self._map_read, 0, total)
        except Exception:
            staging.destroy()
            raise
        return self._unstage(staging, pieces)

    def _wait(self) -> None:
        self._ffi.run_sync(self.queue.onSubmittedWorkDone())

    def _compile(self, source: str, entry: str, constants: dict, label: str):
        run_sync = self._ffi.run_sync
        self.device.pushErrorScope("validation")
        self.device.pushErrorScope("out-of-memory")
        module = self.device.createShaderModule(self._obj({"code": source, "label": label}))
        compute = {"module": module, "entryPoint": entry}
        if constants:
            compute["constants"] = dict(constants)
        pipe = self.device.createComputePipeline(self._obj({"layout": "auto", "label": label, "compute": compute}))
        memory = run_sync(self.device.popErrorScope())
        validation = run_sync(self.device.popErrorScope())
        error = validation or memory
        if error is not None:
            message = str(error.message)
            details = self._compilation_messages(module)
            if details.strip().split(": ", 1)[-1] in message:  # Chromium already quotes the compiler
                details = ""
            raise DeviceError(f"webgpu: compiling {label} failed: {message}{details}")
        return pipe, pipe.getBindGroupLayout(0)

    def _compilation_messages(self, module) -> str:
        try:
            info = self._ffi.run_sync(module.getCompilationInfo())
            lines = [f"\n  line {m.lineNum}:{m.linePos} {m.type}: {m.message}" for m in info.messages
                     if m.type == "error"]
            return "".join(lines)
        except Exception:  # the messages are a courtesy; the error itself is already known
            return ""

    def _create_uniforms(self, size: int, label: str):
        usage = self._js.GPUBufferUsage
        return self.device.createBuffer(self._obj({"size": size, "label": label,
                                                   "usage": usage.UNIFORM | usage.COPY_DST}))

    def _bind_group(self, layout, uniforms, offset: int, size: int, buffers, label: str):
        entries = [{"binding": 0, "resource": {"buffer": uniforms, "offset": offset, "size": size}}]
        for i, buf in enumerate(buffers):
            resource = {"buffer": buf} if type(buf) is not Window else \
                {"buffer": buf.buffer, "offset": buf.offset, "size": buf.size}
            entries.append({"binding": i + 1, "resource": resource})
        return self.device.createBindGroup(self._obj({"layout": layout, "entries": entries, "label": label}))

    def _new_encoder(self):
        return self.device.createCommandEncoder(self._obj({"label": "webgrad batch"}))

    def _begin_pass(self, encoder, timestamp_writes: dict | None):
        desc: dict = {"label": "webgrad pass"}
        if timestamp_writes is not None:
            desc["timestampWrites"] = timestamp_writes
        return encoder.beginComputePass(self._obj(desc))

    def _record(self, pass_, pipe, group, grid) -> None:
        if self._record_dispatch is not None:  # (a grid's missing dims arrive undefined: WebGPU's default 1)
            self._record_dispatch(pass_, pipe, group, *grid)
            return
        pass_.setPipeline(pipe)
        pass_.setBindGroup(0, group)
        pass_.dispatchWorkgroups(*grid)

    def _resolve_queries(self, encoder, timer: DispatchTimer, count: int) -> None:
        encoder.resolveQuerySet(timer.query_set, 0, 2 * count, timer.resolved, 0)

    def _submit(self, commands) -> None:
        self.queue.submit(self._ffi.to_js([commands]))

    def _close(self) -> None:
        self.device.onuncapturederror = None
        self._on_error.destroy()
        self.device.destroy()
