"""Running a bundle natively through its own WGSL (wgpu): ``webgrad.lite.load(path).predict(x)``.

The same steps /lite.js runs in a page, dispatched the same way (kernels.py's layout), on
webgrad's WebGPU device: a bundle's kernels are checked natively as well as in the browser.
Buffers are made once per batch size; weights once.
"""
from __future__ import annotations

import math

import numpy as np

from .bundle import read_bundle
from ..backend.lite.dims import at, from_json

WORKGROUP = 64
_NUMPY = {"float32": np.float32, "int32": np.int32, "bool": np.uint32, "int8": np.int8}


class Bundle:
    """A bundle loaded for native runs (see ``load``)."""

    def __init__(self, path):
        self.meta, arrays, self.sources = read_bundle(path)
        self.path = str(path)
        self.buffers = self.meta["buffers"]
        self.weights = {}
        for i, b in enumerate(self.buffers):
            if b["role"] == "weight":
                self.weights[i] = np.ascontiguousarray(arrays[b["weight"]].astype(_NUMPY[b["dtype"]]))
        self._device = None
        self._pipelines: dict = {}
        self._weight_gpu: dict = {}
        self._by_batch: dict = {}

    @property
    def inputs(self) -> list:
        return self.meta["inputs"]

    @property
    def outputs(self) -> list:
        return self.meta["outputs"]

    def batch_of(self, inputs) -> int | None:
        batch = self.meta.get("batch")
        if batch is None:
            return None
        return int(np.shape(inputs[batch["input"]])[batch["dim"]])

    def predict(self, *inputs) -> list:
        """The outputs (numpy arrays) for ``inputs`` (array-likes, one per bundle input)."""
        if len(inputs) != len(self.inputs):
            raise ValueError(f"lite: the bundle takes {len(self.inputs)} input(s), got {len(inputs)}")
        batch = self.batch_of(inputs)
        arrays = [self._check(spec, x, batch) for spec, x in zip(self.inputs, inputs)]
        wgpu_device = self._gpu()
        buffers = self._buffers(batch)
        for spec, array in zip(self.inputs, arrays):
            if array.size:
                wgpu_device.queue.write_buffer(buffers[spec["buffer"]], 0, array.tobytes())
        encoder = wgpu_device.create_command_encoder()
        keep = []
        for step in self.meta["steps"]:
            total = at(from_json(step["grid"], "grid"), batch or 0)
            if total == 0:
                continue
            params = np.array([at(from_json(p, "params"), batch or 0) for p in step["params"]] or [0], np.uint32)
            p = wgpu_device.create_buffer_with_data(data=params.tobytes(), usage=self._wgpu.BufferUsage.STORAGE)
            keep.append(p)
            pipe = self._pipeline(step["kernel"])
            resources = [p] + [buffers[k] for k in step["inputs"]] + [buffers[step["output"]]]
            entries = [{"binding": i, "resource": {"buffer": b, "offset": 0, "size": b.size}}
                       for i, b in enumerate(resources)]
            group = wgpu_device.create_bind_group(layout=pipe.get_bind_group_layout(0), entries=entries)
            compute = encoder.begin_compute_pass()
            compute.set_pipeline(pipe)
            compute.set_bind_group(0, group)
            compute.dispatch_workgroups(*grid(total))
            compute.end()
        wgpu_device.queue.submit([encoder.finish()])
        results = []
        for spec in self.outputs:
            shape = tuple(at(from_json(n, "shape"), batch or 0) for n in spec["shape"])
            count = math.prod(shape)
            raw = wgpu_device.queue.read_buffer(buffers[spec["buffer"]], 0, max(4, 4 * count)) if count else b""
            out = np.frombuffer(raw, _NUMPY[spec["dtype"]], count).reshape(shape)
            results.append(out.astype(bool) if spec["dtype"] == "bool" else out.copy())
        return results

    def _check(self, spec, x, batch) -> np.ndarray:
        array = np.asarray(x)
        shape = tuple(at(from_json(n, "shape"), batch or 0) for n in spec["shape"])
        if array.shape != shape:
            raise ValueError(f"lite: input {spec['name']!r} must have shape {_shape_text(spec['shape'])}, "
                             f"got {array.shape}")
        if spec["dtype"] == "int32":
            if array.dtype.kind == "f" and not np.all(np.isfinite(array) & (array == np.round(array))):
                raise ValueError(f"lite: input {spec['name']!r} holds indices: whole numbers, got {array.dtype}")
            array = array.astype(np.int64)
            rows = spec.get("index_rows")
            if rows is not None and array.size and (array.min() < 0 or array.max() >= rows):
                raise ValueError(f"lite: input {spec['name']!r} indexes {rows} rows; its values must lie in "
                                 f"[0, {rows}), got {array.min()}..{array.max()}")
        return np.ascontiguousarray(array, dtype=_NUMPY[spec["dtype"]])

    # -- the device ----------------------------------------------------------------------
    def _gpu(self):
        if self._device is None:
            import wgpu

            from ..backend.webgpu import backend

            self._wgpu = wgpu
            self._device = backend().device.device
        return self._device

    def _pipeline(self, kernel: int):
        pipe = self._pipelines.get(kernel)
        if pipe is None:
            module = self._device.create_shader_module(code=self.sources[kernel], label=f"lite kernel {kernel}")
            pipe = self._pipelines[kernel] = self._device.create_compute_pipeline(
                layout="auto", compute={"module": module, "entry_point": "main"})
        return pipe

    def _buffers(self, batch) -> dict:
        made = self._by_batch.get(batch)
        if made is not None:
            return made
        usage = self._wgpu.BufferUsage
        made = {}
        for i, b in enumerate(self.buffers):
            if b["role"] == "weight":
                if i not in self._weight_gpu:
                    data = self.weights[i].tobytes()
                    data += b"\0" * (-len(data) % 4) + (b"\0" * 4 if not data else b"")
                    self._weight_gpu[i] = self._device.create_buffer_with_data(data=data, usage=usage.STORAGE)
                made[i] = self._weight_gpu[i]
            else:
                count = math.prod(at(from_json(n, "shape"), batch or 0) for n in b["shape"])
                size = max(4, 4 * math.ceil(count * (1 if b["dtype"] == "int8" else 4) / 4))
                made[i] = self._device.create_buffer(size=size, usage=usage.STORAGE | usage.COPY_SRC | usage.COPY_DST)
        self._by_batch = {batch: made}  # one batch size's buffers at a time
        return made


def grid(total: int) -> tuple:
    """Workgroups for ``total`` threads of 64, folded into y past 65535 (kernels.py's layout)."""
    groups = max(1, math.ceil(total / WORKGROUP))
    x = min(groups, 65535)
    return x, math.ceil(groups / x), 1


def _shape_text(shape) -> str:
    return "(" + ", ".join("batch" if isinstance(n, list) and n == [1, 0] else
                           (f"{n[0]}*batch{n[1]:+d}" if isinstance(n, list) else str(n)) for n in shape) + ")"


def load(path) -> Bundle:
    """A bundle folder written by ``webgrad.export``, to run natively (on wgpu): ``.predict(*inputs)``."""
    return Bundle(path)
