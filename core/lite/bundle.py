"""Writing a bundle (``export``) and reading one back with every field checked (``read_bundle``).

A bundle is written into a fresh folder beside ``path`` and moved into place only when
complete, so a failed export leaves nothing half-written (and an old bundle at ``path``
intact). Reading refuses a file that is missing, truncated or inconsistent with a message
naming the file and the field.
"""
from __future__ import annotations

import json
import os
import shutil
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from .. import __version__, _safetensors
from ..autograd import no_grad
from ..creation import tensor
from ..onnx._traced import ExportError, flatten_outputs, parameter_names, trace
from ..tensor import Tensor
from ..backend.lite.dims import from_json, to_json
from ..backend.lite.lower import lower

FORMAT = "webgrad-lite"
VERSION = 1
WEIGHTS = ("float32", "float16", "int8")
MODEL_FILE, WEIGHTS_FILE = "model.json", "weights.safetensors"
BUFFER_DTYPES = ("float32", "int32", "bool", "int8")
STEP_OPS = ("elementwise", "matmul", "conv2d", "max_pool2d", "softmax", "log_softmax", "layer_norm", "reduce",
            "take")
_FILE_DTYPE = {"float32": "F32", "int32": "I32", "bool": "U32", "int8": "I8"}


@dataclass
class Exported:
    """What ``webgrad.export`` wrote: ``path``, the graph's ``ops``, how many ``kernels``, the
    bundle's ``bytes`` in all and per file (``files``)."""
    path: str
    ops: list
    kernels: int
    bytes: int
    files: dict = field(default_factory=dict)
    weights: str = "float32"

    def __repr__(self) -> str:
        return (f"Exported({self.path!r}: {len(self.ops)} ops, {self.kernels} kernels, {self.bytes} bytes, "
                f"weights {self.weights})")


def export(model, example_inputs, path, *, dynamic_batch: bool = True, weights: str = "float32",
           input_names=None, output_names=None, labels=None, metadata=None) -> Exported:
    """Trace ``model(*example_inputs)`` in eval mode and write its forward as a web bundle in the folder
    ``path`` (see ``webgrad.lite``). ``weights``: "float32", "float16" (half the bytes, widened at
    load) or "int8" (per-output-channel symmetric int8 for the weights of matmuls and convolutions,
    dequantized in the kernels). With ``dynamic_batch`` the bundle runs at any size of every
    input's first dim. ``labels`` (class names) and ``metadata`` (a JSON object) travel with it.
    Raises ExportError naming the op and module path of anything that cannot be lowered."""
    if weights not in WEIGHTS:
        raise ValueError(f"webgrad.export: weights must be one of {WEIGHTS}, got {weights!r}")
    args = (example_inputs,) if isinstance(example_inputs, Tensor) else tuple(example_inputs)
    for i, a in enumerate(args):
        if not isinstance(a, Tensor):
            raise TypeError(f"webgrad.export: example input {i} must be a Tensor, got {type(a).__name__}")
        if dynamic_batch and a.ndim == 0:
            raise ValueError(f"webgrad.export: example input {i} is 0-d, so it has no batch dim; "
                             f"pass dynamic_batch=False")
    if metadata is not None:
        json.dumps(metadata)  # a clear TypeError now, not a half-written bundle later
    was_training = getattr(model, "training", False)
    if hasattr(model, "eval"):
        model.eval()
    try:
        traced, outs = trace(model, args, {"batch": [(i, 0) for i in range(len(args))]} if dynamic_batch else {})
    except ExportError as error:  # the shared tracer speaks for onnx.export
        raise ExportError(str(error).replace("onnx.export", "webgrad.export")) from None
    finally:
        if hasattr(model, "train"):
            model.train(was_training)
    causal = [_causal(model, args, i) for i in range(len(args))]
    lowered = lower(traced, parameter_names(model), weights)
    input_names = list(input_names or (["input"] if len(args) == 1 else [f"input_{i}" for i in range(len(args))]))
    output_names = list(output_names or (["output"] if len(outs) == 1 else [f"output_{i}" for i in range(len(outs))]))
    if len(input_names) != len(args) or len(output_names) != len(outs):
        raise ValueError(f"webgrad.export: {len(input_names)} input_names for {len(args)} inputs, "
                         f"{len(output_names)} output_names for {len(outs)} outputs")
    kernels: list = []
    steps = []
    for step in lowered.steps:
        if step.wgsl not in kernels:
            kernels.append(step.wgsl)
        steps.append({"op": step.op, "inputs": [b.id for b in step.inputs], "output": step.output.id,
                      "kernel": kernels.index(step.wgsl), "params": [to_json(p) for p in step.params],
                      "grid": to_json(step.grid), "attrs": _json(step.attrs)})
    tensors = {}
    for b in lowered.buffers:
        if b.role == "weight":
            data = b.data
            if weights == "float16" and b.dtype == "float32":
                tensors[b.name] = ("F16", data.astype("<f2"))
            else:
                tensors[b.name] = (_FILE_DTYPE[b.dtype], np.ascontiguousarray(data, dtype=data.dtype.newbyteorder("<")))
    model_json = {
        "format": FORMAT, "version": VERSION,
        "name": type(model).__name__ if hasattr(model, "named_modules") else getattr(model, "__name__", "model"),
        "batch": {"input": 0, "dim": 0} if dynamic_batch else None,
        "inputs": [_io(name, b, lowered.index_ranges.get(b.id), c)
                   for name, b, c in zip(input_names, lowered.inputs, causal)],
        "outputs": [_io(name, b) for name, b in zip(output_names, lowered.outputs)],
        "buffers": [_buffer_json(b) for b in lowered.buffers],
        "weights": {"file": WEIGHTS_FILE, "encoding": weights},
        "kernels": [f"kernels/{i}.wgsl" for i in range(len(kernels))],
        "steps": steps,
        "labels": list(labels) if labels is not None else None,
        "metadata": metadata or {},
        "ops": sorted(lowered.ops),
        "created_by": "webgrad " + __version__,
    }
    files = {MODEL_FILE: json.dumps(model_json, indent=1).encode()}
    header, arrays = _safetensors.encode(tensors, {"format": FORMAT})
    files[WEIGHTS_FILE] = header + b"".join(a.tobytes() for a in arrays)
    for i, text in enumerate(kernels):
        files[f"kernels/{i}.wgsl"] = text.encode()
    _write_folder(Path(path), files)
    return Exported(str(path), sorted(lowered.ops), len(kernels), sum(len(v) for v in files.values()),
                    {name: len(data) for name, data in files.items()}, weights)


def _json(value):
    if isinstance(value, dict):
        return {k: _json(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_json(v) for v in value]
    if isinstance(value, (bool, float, str)) or value is None:
        return value
    if isinstance(value, (int, np.integer)) or hasattr(value, "scale"):
        return to_json(value)
    if isinstance(value, np.floating):
        return float(value)
    return str(value)


def _io(name: str, buffer, index_rows=None, causal=None) -> dict:
    entry = {"name": name, "buffer": buffer.id, "dtype": buffer.dtype, "shape": [to_json(n) for n in buffer.shape]}
    if index_rows is not None:
        entry["index_rows"] = to_json(index_rows)
    if causal is not None:
        entry["causal"] = causal
    return entry


def _causal(model, args, i: int):
    """For a row of token ids (an integer input of shape (batch, length)): whether every output at
    position t depends only on the ids up to t, tested by changing the ids after t (then a shorter row
    may be padded on the right to the bundle's fixed length, as the widget does). None otherwise."""
    x = args[i]
    if x.dtype.category != "int" or x.ndim != 2 or x.shape[1] < 2:
        return None
    ids = x.detach().numpy()
    with no_grad():
        base = _numpy_outputs(model(*args))
        for t in sorted({0, x.shape[1] // 2, x.shape[1] - 2}):
            changed = ids.copy()
            changed[:, t + 1:] = (changed[:, t + 1:] + 1) % max(2, int(ids.max()) + 1)  # other valid ids after t
            outs = _numpy_outputs(model(*args[:i], tensor(changed, dtype=x.dtype, device=x.device), *args[i + 1:]))
            for a, b in zip(base, outs):
                if a.ndim < 2 or a.shape[1] != x.shape[1] or not np.allclose(a[:, :t + 1], b[:, :t + 1], 1e-5, 1e-6):
                    return False
    return True


def _numpy_outputs(out) -> list:
    return [t.detach().numpy() for t in flatten_outputs(out)]


def _buffer_json(b) -> dict:
    entry = {"dtype": b.dtype, "shape": [to_json(n) for n in b.shape], "role": b.role}
    if b.role == "weight":
        entry["weight"] = b.name
        if b.scale is not None:
            entry["scale"] = b.scale.id
    return entry


def _write_folder(path: Path, files: dict) -> None:
    """Write ``files`` (relative name -> bytes) as the folder ``path``, all or nothing."""
    path = path.absolute()
    path.parent.mkdir(parents=True, exist_ok=True)
    if path.exists() and not path.is_dir():
        raise FileExistsError(f"webgrad.export: {path} exists and is not a folder")
    fresh = Path(tempfile.mkdtemp(prefix=f".{path.name}.", dir=path.parent))
    try:
        for name, data in files.items():
            target = fresh / name
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(data)
        if path.exists():
            old = Path(tempfile.mkdtemp(prefix=f".{path.name}.old.", dir=path.parent))
            os.replace(path, old / "bundle")
            os.replace(fresh, path)
            shutil.rmtree(old, ignore_errors=True)
        else:
            os.replace(fresh, path)
    except BaseException:
        shutil.rmtree(fresh, ignore_errors=True)
        raise


# -- reading ---------------------------------------------------------------------------
class BundleError(ValueError):
    """A bundle file that is missing, truncated or inconsistent: the message names the file."""


def read_bundle(path) -> tuple[dict, dict, list]:
    """(model.json, {weight name: array}, [kernel sources]) of the bundle folder ``path``, checked."""
    path = Path(path)
    meta = _read_json(path / MODEL_FILE)
    _check_model(meta, str(path / MODEL_FILE))
    source = str(path / WEIGHTS_FILE)
    try:
        data = (path / WEIGHTS_FILE).read_bytes()
    except OSError as error:
        raise BundleError(f"{source}: cannot be read ({error.strerror})") from None
    try:
        header, start = _safetensors.read_header(memoryview(data), source)
        header.pop("__metadata__", None)
        entries = {name: _safetensors.check_entry(name, entry, source) for name, entry in header.items()}
        _safetensors.check_coverage(entries, len(data) - start, source)
    except ValueError as error:
        raise BundleError(str(error)) from None
    arrays = {name: _safetensors.read_array(memoryview(data), start, *entry) for name, entry in entries.items()}
    for i, b in enumerate(meta["buffers"]):
        if b["role"] == "weight":
            array = arrays.get(b["weight"])
            where = f"{source}: tensor {b['weight']!r} (buffer {i} of {MODEL_FILE})"
            if array is None:
                raise BundleError(f"{where} is missing")
            if list(array.shape) != b["shape"]:
                raise BundleError(f"{where} has shape {list(array.shape)}, model.json says {b['shape']}")
    kernels = []
    for name in meta["kernels"]:
        try:
            kernels.append((path / name).read_text())
        except (OSError, UnicodeDecodeError) as error:
            raise BundleError(f"{path / name}: cannot be read ({error})") from None
        if "fn main(" not in kernels[-1]:
            raise BundleError(f"{path / name}: not a bundle kernel (no entry point main); the file is damaged")
    return meta, arrays, kernels


def _read_json(file: Path) -> dict:
    try:
        text = file.read_text()
    except OSError as error:
        raise BundleError(f"{file}: cannot be read ({error.strerror})") from None
    try:
        value = json.loads(text)
    except ValueError as error:
        raise BundleError(f"{file}: not valid JSON ({error}); the file is truncated or damaged") from None
    if not isinstance(value, dict):
        raise BundleError(f"{file}: expected a JSON object")
    return value


def _check_model(meta: dict, file: str) -> None:
    def need(ok, what):
        if not ok:
            raise BundleError(f"{file}: {what}")
    need(meta.get("format") == FORMAT, f"field 'format' must be {FORMAT!r}, got {meta.get('format')!r}")
    need(meta.get("version") == VERSION, f"field 'version' {meta.get('version')!r} is not {VERSION} "
                                         f"(a bundle from another webgrad; export it again)")
    for key in ("inputs", "outputs", "buffers", "steps", "kernels"):
        need(isinstance(meta.get(key), list), f"field {key!r} must be a list")
    for name in meta["kernels"]:  # files of the bundle's own folder, never elsewhere
        need(isinstance(name, str) and not name.startswith("/") and ":" not in name
             and ".." not in name.split("/"), f"kernel file {name!r} is not a file of the bundle's folder")
    count = len(meta["buffers"])
    for i, b in enumerate(meta["buffers"]):
        need(isinstance(b, dict) and b.get("dtype") in BUFFER_DTYPES and isinstance(b.get("shape"), list)
             and b.get("role") in ("input", "weight", "step"), f"buffers[{i}] is malformed")
        for n in b["shape"]:
            _dim(n, f"{file}: buffers[{i}].shape")
    for i, s in enumerate(meta["steps"]):
        need(isinstance(s, dict) and s.get("op") in STEP_OPS, f"steps[{i}].op {s.get('op')!r} is unknown")
        need(isinstance(s.get("inputs"), list) and all(isinstance(k, int) and 0 <= k < count for k in s["inputs"])
             and isinstance(s.get("output"), int) and 0 <= s["output"] < count, f"steps[{i}] names a missing buffer")
        need(isinstance(s.get("kernel"), int) and 0 <= s["kernel"] < len(meta["kernels"]),
             f"steps[{i}].kernel is not one of the kernels")
        need(isinstance(s.get("params"), list), f"steps[{i}].params must be a list")
        for n in [*s["params"], s.get("grid")]:
            _dim(n, f"{file}: steps[{i}]")
    for key in ("inputs", "outputs"):
        for i, io in enumerate(meta[key]):
            need(isinstance(io, dict) and isinstance(io.get("buffer"), int) and 0 <= io["buffer"] < count,
                 f"{key}[{i}] names a missing buffer")


def _dim(n, where: str):
    try:
        return from_json(n, where)
    except ValueError as error:
        raise BundleError(str(error)) from None
