"""The browser implementation of the device interface: WebGPU through
``js.navigator.gpu`` inside Pyodide (in a Web Worker or on a page).

Same methods and the same rules as ``NativeDevice`` in ``device.py``: one open
command encoder with one compute pass, uniform parameters gathered in one arena
buffer written just before submit, and ``write_buffer`` submits first when the
open encoder already uses the buffer (``queue.writeBuffer`` would otherwise run
before the recorded dispatches).

Blocking readback waits for ``GPUBuffer.mapAsync`` with ``pyodide.ffi.run_sync``.
That needs JavaScript Promise Integration *and* a Python stack entered through
``pyodide.runPythonAsync`` (or ``callPromising``); webgrad's worker always enters
that way. Elsewhere, use ``await tensor.numpy_async()``.

Proxies: every JS object held here is a ``JsProxy`` owned by Python (freed with
the Python object). Dicts go to JS with ``to_js(..., create_pyproxies=False)``,
so a conversion never leaves a ``PyProxy`` behind; the only long-lived
``PyProxy`` objects are the error callbacks made at construction.
"""
from __future__ import annotations

from .device import ARENA_SLOTS, UNIFORM_SLOT, BindGroupCache, DeviceError, DispatchTimer, UniformArena

# Adapter names of WebGPU implementations that run on the CPU.
CPU_ADAPTERS = ("swiftshader", "llvmpipe", "lavapipe", "softpipe", "warp")
_RECENT = 8  # labels of the dispatches since the last read kept to name the op in asynchronous errors


def _js():
    """The Pyodide modules, imported late so this file imports natively too (for docs and linting)."""
    import js
    from pyodide import ffi

    return js, ffi


class BrowserDevice:
    """WebGPU in the browser (Chromium, Firefox, Safari) through Pyodide."""

    def __init__(self, power_preference="high-performance"):
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
        # 'timestamp-query' lets webgrad.profiler time each dispatch on the GPU (Chrome may round
        # the timestamps, to 100 us by default).
        features = [name for name in ("timestamp-query",) if adapter.features.has(name)]
        self.timestamps = bool(features)
        try:
            self.device = ffi.run_sync(adapter.requestDevice(self._obj({"requiredLimits": wanted,
                                                                        "requiredFeatures": features,
                                                                        "label": "webgrad"})))
        except Exception as err:
            raise DeviceError(f"webgpu: requestDevice failed: {err}") from err
        limits = self.device.limits
        self.limits = {
            "max_storage_buffer_binding_size": int(limits.maxStorageBufferBindingSize),
            "max_buffer_size": int(limits.maxBufferSize),
            "max_compute_workgroups_per_dimension": int(limits.maxComputeWorkgroupsPerDimension),
            "max_compute_invocations_per_workgroup": int(limits.maxComputeInvocationsPerWorkgroup),
        }
        self.queue = self.device.queue
        usage = js.GPUBufferUsage
        self._usage = usage.STORAGE | usage.COPY_SRC | usage.COPY_DST
        self._staging_usage = usage.MAP_READ | usage.COPY_DST
        self._map_read = js.GPUMapMode.READ
        self._arena = self.device.createBuffer(self._obj({
            "size": UNIFORM_SLOT * ARENA_SLOTS, "label": "uniform arena",
            "usage": usage.UNIFORM | usage.COPY_DST}))
        self._uniforms = UniformArena()
        self.bind_groups = BindGroupCache()
        self._encoder = None
        self._pass = None
        self._used = set()          # ids of buffers the open encoder touches
        self._pipelines = {}
        self._recent = []           # labels of the dispatches since the last read, for asynchronous errors
        self._errors = []           # uncaptured device errors, raised at the next read
        self._lost = None
        self.dispatches = 0         # counters the profiler reads
        self.submits = 0
        self.reads = 0
        self.timer: DispatchTimer | None = None  # set by webgrad.profiler to time dispatches
        # Asynchronous errors arrive through callbacks. The error handler's proxy lives as long as
        # the device (close() destroys it); the lost handler runs once and then destroys itself.
        self._on_error = ffi.create_proxy(self._uncaptured)
        self.device.onuncapturederror = self._on_error
        self.device.lost.then(ffi.create_once_callable(self._device_lost))

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
        names = " ".join(fields.values()).lower()
        cpu = fallback or any(name in names for name in CPU_ADAPTERS)
        return {**fields, "adapter_type": "CPU" if cpu else "GPU", "backend_type": "WebGPU (browser)",
                "is_fallback_adapter": fallback}

    def _uncaptured(self, event):
        error = event.error
        self._errors.append(f"{error.constructor.name}: {error.message}")

    def _device_lost(self, info):
        self._lost = f"{info.reason}: {info.message}"

    def _raise_if_lost(self, where: str) -> None:
        if self._lost is not None:
            raise DeviceError(f"webgpu: the device was lost ({self._lost}) before {where}; call "
                              f"webgrad.webgpu.reset() to start a new one (tensors on the lost device are gone), "
                              f"restart the runtime, or use device='cpu'")

    def _check(self, where: str) -> None:
        """Raise the errors the GPU reported since the last read, naming the ops recorded since."""
        recent, self._recent = ", ".join(self._recent) or "no dispatch", []
        self._raise_if_lost(where)
        if self._errors:
            errors, self._errors = self._errors, []
            raise DeviceError(f"webgpu: {where}: the GPU reported {len(errors)} error(s) while running "
                              f"[{recent}]: " + " | ".join(errors))

    # -- buffers ------------------------------------------------------------------
    def create_buffer(self, size: int, label: str):
        self._raise_if_lost(f"allocating {label}")
        try:
            return self.device.createBuffer(self._obj({"size": size, "usage": self._usage, "label": label}))
        except Exception as err:
            raise DeviceError(f"webgpu: could not allocate {size} bytes for {label}: {err}") from err

    def write_buffer(self, buffer, offset: int, data) -> None:
        if id(buffer) in self._used:
            self.submit()
        view = memoryview(data).cast("B")
        if view.nbytes:
            self.queue.writeBuffer(buffer, offset, self._ffi.to_js(view))

    def _staged(self, buffer, offset: int, size: int):
        """Copy ``size`` bytes at ``offset`` into a fresh MAP_READ buffer and submit."""
        self.submit()
        staging = self.device.createBuffer(self._obj({"size": size, "usage": self._staging_usage,
                                                      "label": "readback"}))
        encoder = self.device.createCommandEncoder(self._obj({"label": "readback"}))
        encoder.copyBufferToBuffer(buffer, offset, staging, 0, size)
        self.queue.submit(self._ffi.to_js([encoder.finish()]))
        self.reads += 1
        return staging

    def _unstage(self, staging, size: int) -> bytes:
        try:
            mapped = staging.getMappedRange(0, size)
            data = self._js.Uint8Array.new(mapped).to_bytes()
        finally:
            staging.unmap()
            staging.destroy()
        return data

    def read(self, buffer, offset: int, size: int) -> memoryview:
        if size == 0:
            self.submit()
            return memoryview(b"")
        staging = self._staged(buffer, offset, size)
        try:
            self._ffi.run_sync(staging.mapAsync(self._map_read, 0, size))
        except Exception as err:
            staging.destroy()
            self._check("read")
            raise DeviceError(f"webgpu: reading {size} bytes back failed: {err}") from err
        data = self._unstage(staging, size)
        self._check("read")
        return memoryview(data)

    def wait(self) -> None:
        """Submit and block until the GPU has finished all work (the profiler's op-boundary sync)."""
        self.submit()
        self._ffi.run_sync(self.queue.onSubmittedWorkDone())
        self._check("wait")

    async def read_async(self, buffer, offset: int, size: int):
        if size == 0:
            self.submit()
            return memoryview(b"")
        staging = self._staged(buffer, offset, size)
        try:
            await staging.mapAsync(self._map_read, 0, size)
        except Exception as err:
            staging.destroy()
            self._check("read")
            raise DeviceError(f"webgpu: reading {size} bytes back failed: {err}") from err
        data = self._unstage(staging, size)
        self._check("read")
        return memoryview(data)

    # -- kernels ------------------------------------------------------------------
    def pipeline(self, key, source: str, entry: str, constants: dict, label: str):
        found = self._pipelines.get(key)
        if found is None:
            found = self._compile(source, entry, constants, label)
            self._pipelines[key] = found
        return found

    def _compile(self, source, entry, constants, label):
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

    def dispatch(self, pipeline, buffers, uniform: bytes, grid, label: str) -> None:
        """Record one dispatch. ``buffers`` bind to 1, 2, ...; ``uniform`` to 0."""
        self._raise_if_lost(label)  # the lost callback ran while Python waited on the GPU
        if not self._uniforms.has_room():
            self.submit()
        offset = self._uniforms.add(uniform, label)
        pipe, layout = pipeline
        entries = [{"binding": 0, "resource": {"buffer": self._arena, "offset": offset, "size": len(uniform)}}]
        for i, buf in enumerate(buffers):
            entries.append({"binding": i + 1, "resource": {"buffer": buf}})
            self._used.add(id(buf))
        try:
            group = self.bind_groups.get(layout, offset, len(uniform), buffers, lambda: self.device.createBindGroup(
                self._obj({"layout": layout, "entries": entries, "label": label})))
            if self._encoder is None:
                self._encoder = self.device.createCommandEncoder(self._obj({"label": "webgrad batch"}))
            timer = self.timer
            if self._pass is None:
                desc: dict = {"label": "webgrad pass"}
                if timer is not None:
                    desc["timestampWrites"] = timer.pass_args(self.dispatches, str(pipe.label or label))
                self._pass = self._encoder.beginComputePass(self._obj(desc))
            self._pass.setPipeline(pipe)
            self._pass.setBindGroup(0, group)
            self._pass.dispatchWorkgroups(*grid)
            if timer is not None:  # profiling: one pass per dispatch, so its timestamps time it alone
                self._pass.end()
                self._pass = None
        except Exception as err:
            raise DeviceError(f"webgpu: {label}: {err}") from err
        self._recent.append(label)
        del self._recent[:-_RECENT]
        self.dispatches += 1
        if timer is not None and timer.full():
            self.submit()

    def submit(self) -> None:
        if self._encoder is None:
            return
        if self._pass is not None:
            self._pass.end()
        timer, staging, size = self.timer, None, 0
        if timer is not None and timer.pending:
            size = 16 * len(timer.pending)
            staging = self.device.createBuffer(self._obj({"size": size, "usage": self._staging_usage,
                                                          "label": "profiler timestamps"}))
            self._encoder.resolveQuerySet(timer.query_set, 0, 2 * len(timer.pending), timer.resolved, 0)
            self._encoder.copyBufferToBuffer(timer.resolved, 0, staging, 0, size)
        commands = self._encoder.finish()
        self.queue.writeBuffer(self._arena, 0, self._ffi.to_js(memoryview(self._uniforms.take())))
        try:
            self.queue.submit(self._ffi.to_js([commands]))
        except Exception as err:
            raise DeviceError(f"webgpu: submit failed: {err}") from err
        finally:
            self._encoder = self._pass = None
            self._used.clear()
        self.submits += 1
        if staging is not None and timer is not None:
            self._ffi.run_sync(staging.mapAsync(self._map_read, 0, size))
            timer.add(self._unstage(staging, size))

    def make_timer(self) -> DispatchTimer:
        """A timer for webgrad.profiler to attach as ``self.timer`` (needs ``self.timestamps``)."""
        usage = self._js.GPUBufferUsage
        query_set = self.device.createQuerySet(self._obj({"type": "timestamp", "count": 2 * DispatchTimer.CAPACITY}))
        resolved = self.device.createBuffer(self._obj({"size": 16 * DispatchTimer.CAPACITY,
                                                       "label": "profiler timestamps",
                                                       "usage": usage.QUERY_RESOLVE | usage.COPY_SRC}))
        return DispatchTimer(query_set, resolved, ("querySet", "beginningOfPassWriteIndex", "endOfPassWriteIndex"))

    def close(self) -> None:
        """Destroy the device and the callbacks' proxies (the object is unusable afterwards)."""
        self.device.onuncapturederror = None
        self._on_error.destroy()
        self.device.destroy()
