"""``webgrad.save`` and ``webgrad.load``: checkpoints as safetensors files, never pickles.

A flat state dict of cpu tensors is written as an ordinary safetensors file
(``safetensors`` and PyTorch read it), and any safetensors file loads here.
Anything else torch.save users save — ``{"model": sd, "optimizer":
opt.state_dict(), "iter_num": 5}``, lists, tuples, numbers, strings, None,
numpy arrays — is stored as tensors named by their path ("model.fc.weight")
plus one JSON record of the structure under ``__metadata__["webgrad"]``, so
``load`` gives the same structure back. A whole ``nn.Module`` (``torch.save(model, f)``)
is stored as its architecture record (``webgrad.nn.arch``, the one the model store
writes) plus its state dict, and ``load(f, weights_only=False)`` builds it again;
with ``weights_only=True`` (PyTorch's default) such a file is refused, as PyTorch
refuses a pickled module. The file format itself lives in
``webgrad._safetensors``. This module imports neither torch nor safetensors (it
runs in Pyodide) and never unpickles anything.
"""
from __future__ import annotations

import io
import json
import os
import platform
import re
import tempfile
import time
import zlib

import numpy as np

from . import _safetensors as fmt
from .nn import arch
from .nn.modules.module import Module
from .tensor import Tensor

TREE_KEY = "webgrad"
TREE_VERSION = 2  # 2 added numpy arrays and the saved device of each tensor
_READABLE_VERSIONS = (1, 2)
MAX_HEADER_BYTES = fmt.MAX_HEADER_BYTES
# Temporary files: ".<name>.<host>-<pid>.<random>.tmp" next to the target. A save
# removes the ones a killed save to the same path left, once their process is gone
# (same host) or they are older than this (another host on a shared disk, or no way
# to ask whether the process lives, as in Pyodide).
TEMP_MAX_AGE_S = 24 * 3600
_HOST = f"{zlib.crc32(platform.node().encode('utf-8', 'replace')):08x}"


class UnpicklingError(Exception):
    """Raised, as PyTorch raises ``pickle.UnpicklingError``, by a weights-only load of a file
    holding a whole module (the same name; webgrad itself never unpickles anything)."""


# ----------------------------------------------------------------------------- save

def save(obj, f, metadata: dict[str, str] | None = None) -> None:
    """Write a state dict, a checkpoint or any nesting of tensors and plain values.

    To a path the write is atomic: a temporary file next to ``f`` is written,
    synced and renamed over it, so a crash or an error never leaves a
    half-written file, and the next save to that path removes temporaries that
    a killed save left behind.

    Args:
        obj: a Tensor, numpy array, str, int, float, bool or None, a whole
            ``nn.Module`` whose architecture can be recorded (``webgrad.nn.arch``;
            otherwise a TypeError names its class), or dicts (str or int keys),
            lists and tuples of them. An optimizer itself cannot be saved: save
            its ``state_dict()``.
        f: a path (conventionally ``*.safetensors``) or a binary file object.
        metadata: extra str -> str pairs for ``__metadata__`` (e.g. ``{"format": "pt"}``).

    Example:
        >>> webgrad.save({"model": model.state_dict(), "optimizer": optimizer.state_dict(),
        ...               "iter_num": 5}, "ckpt.safetensors")
        >>> checkpoint = webgrad.load("ckpt.safetensors", map_location="cpu")
        >>> model.load_state_dict(checkpoint["model"])
    """
    header, arrays = _encode(obj, metadata)
    if hasattr(f, "write"):
        if isinstance(f, io.TextIOBase):
            raise TypeError("save: the file object is open in text mode; open it with 'wb'")
        _write(f, header, arrays)
        return
    # Through a symlink, replace the file it points to, not the link itself.
    path = os.path.realpath(os.fspath(f))
    directory, base = os.path.split(path)
    if not os.path.isdir(directory):
        raise FileNotFoundError(f"save: directory {directory!r} does not exist; create it first")
    remove_stale_temporaries(path)
    fd, temp_path = tempfile.mkstemp(dir=directory, prefix=f".{base}.{_HOST}-{os.getpid()}.",
                                     suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as file:
            _write(file, header, arrays)
            file.flush()
            os.fsync(file.fileno())
        _copy_permissions(path, temp_path)
        os.replace(temp_path, path)
    except BaseException:
        try:
            os.remove(temp_path)
        except OSError:
            pass
        raise
    _fsync_directory(directory)


def save_bytes(obj, metadata: dict[str, str] | None = None) -> bytes:
    """Encode ``obj`` as the bytes of a safetensors file (see ``save``).

    Example:
        >>> blob = webgrad.serialize.save_bytes({"bias": webgrad.zeros(3)})
        >>> webgrad.serialize.load_bytes(blob)["bias"].shape
        webgrad.Size([3])
    """
    header, arrays = _encode(obj, metadata)
    return b"".join([header] + [array.tobytes() for array in arrays])


def _write(file, header: bytes, arrays) -> None:
    file.write(header)
    for array in arrays:
        # An ndarray is a buffer; numpy's stubs say so (__buffer__) only for Python >= 3.12.
        file.write(array.reshape(-1).view(np.uint8))  # type: ignore[arg-type]


def _encode(obj, metadata) -> tuple[bytes, list[np.ndarray]]:
    """Return the length-prefixed header and the arrays in file order."""
    entries: dict[str, tuple] = {}
    tree = _encode_node(obj, "", entries, Tensor)
    # A flat state dict of cpu tensors needs no record: it is a plain safetensors file.
    is_plain = isinstance(obj, dict) and all(isinstance(k, str) for k in obj) and all(
        isinstance(v, Tensor) and str(v.device) == "cpu" for v in obj.values())

    header_metadata = {}
    if metadata is not None:
        if not isinstance(metadata, dict) or not all(
                isinstance(k, str) and isinstance(v, str) for k, v in metadata.items()):
            raise TypeError("save: metadata must be a dict of str -> str")
        if TREE_KEY in metadata:
            raise ValueError(f"save: metadata key {TREE_KEY!r} is reserved for webgrad")
        header_metadata.update(metadata)
    if not is_plain:
        header_metadata[TREE_KEY] = json.dumps({"version": TREE_VERSION, "tree": tree})
    return fmt.encode(entries, header_metadata)


def _encode_node(value, name: str, entries: dict, tensor_type):
    """Turn one value into a tree node, collecting (file dtype, array) into ``entries``."""
    if isinstance(value, (tensor_type, np.ndarray)):
        name = name or "tensor"  # a lone tensor saved at the top level
        if name in entries:
            raise ValueError(f"save: two entries flatten to the same tensor name {name!r}; "
                             "rename one of the keys")
        if name == "__metadata__":
            raise ValueError(f"save: {name!r} cannot be used as a tensor name")
        if isinstance(value, np.ndarray):
            entries[name] = fmt.array_bytes(value, name)
            return {"ndarray": name}
        entries[name] = fmt.tensor_bytes(value, name)
        device = str(value.device)
        return {"tensor": name} if device == "cpu" else {"tensor": name, "device": device}
    if isinstance(value, dict):
        items = []
        for key, child in value.items():
            if isinstance(key, bool) or not isinstance(key, (str, int)):
                raise TypeError(f"save: key {key!r} under {name or 'the top level'!r} must be "
                                f"a str or int, got {type(key).__name__}")
            items.append([key, _encode_node(child, _join(name, key), entries, tensor_type)])
        return {"dict": items}
    if isinstance(value, (list, tuple)):
        kind = "list" if isinstance(value, list) else "tuple"
        return {kind: [_encode_node(child, _join(name, i), entries, tensor_type)
                       for i, child in enumerate(value)]}
    if value is None or isinstance(value, (str, bool, int, float)):
        return {"value": value}
    if isinstance(value, (np.bool_, np.integer, np.floating)):
        return {"value": value.item()}
    where = f"{name!r}" if name else "the object"
    if isinstance(value, Module):
        return {"module": _encode_module(value, name, entries, tensor_type)}
    if callable(getattr(value, "state_dict", None)):
        raise TypeError(f"save: cannot save {where}, a {type(value).__name__} object; save its "
                        f"state instead: webgrad.save(obj.state_dict(), path), e.g. "
                        f"webgrad.save(model.state_dict(), 'model.safetensors'), and restore it "
                        f"with model.load_state_dict(webgrad.load('model.safetensors'))")
    raise TypeError(f"save: cannot save {where} of type {type(value).__name__}; only Tensors, "
                    "numpy arrays, dicts, lists, tuples, str, int, float, bool and None can be "
                    "saved (webgrad never pickles objects; save a model's state_dict())")


def _encode_module(module, name: str, entries: dict, tensor_type) -> dict:
    """A whole module: its architecture record, its state dict and its train/eval and frozen flags."""
    try:
        record = arch.describe_checked(module)
    except arch.ArchitectureError as exc:
        raise TypeError(f"save: cannot save the module {type(module).__name__} "
                        f"({'at ' + repr(name) if name else 'the object'}) whole: its architecture cannot be "
                        f"recorded ({exc}); save its state instead: webgrad.save(model.state_dict(), path)") from exc
    state = {key: value for key, value in module.state_dict().items()}
    return {"architecture": record,
            "state": _encode_node(state, _join(name, "state") if name else "state", entries, tensor_type),
            "eval": [key for key, child in module.named_modules() if not child.training],
            "frozen": [key for key, p in module.named_parameters() if not p.requires_grad]}


def _join(prefix: str, key) -> str:
    return f"{prefix}.{key}" if prefix else str(key)


# ----------------------------------------------------------------------------- files

def remove_stale_temporaries(path) -> list[str]:
    """Remove the temporary files that killed saves to ``path`` left; return their names.

    Only files named as ``save`` names its own are touched, and only when the
    process that wrote one is gone (same host) or the file is older than
    ``TEMP_MAX_AGE_S``, so a save running concurrently keeps its file.
    """
    directory, base = os.path.split(os.path.realpath(os.fspath(path)))
    pattern = re.compile(r"\." + re.escape(base) + r"\.([0-9a-f]{8})-([0-9]+)\.[a-z0-9_]+\.tmp")
    removed: list[str] = []
    try:
        candidates = list(os.scandir(directory))
    except OSError:
        return removed
    for entry in candidates:
        match = pattern.fullmatch(entry.name)
        if match is None:
            continue
        try:
            if not entry.is_file(follow_symlinks=False):
                continue
            age = time.time() - entry.stat(follow_symlinks=False).st_mtime
        except OSError:
            continue
        host, pid = match.group(1), int(match.group(2))
        dead = host == _HOST and pid != os.getpid() and not _process_alive(pid)
        if dead or age > TEMP_MAX_AGE_S:
            try:
                os.remove(entry.path)
                removed.append(entry.name)
            except OSError:
                pass  # another saver removed it first, or no permission: not ours to fight over
    return removed


def _process_alive(pid: int) -> bool:
    """False only when this host certainly has no process ``pid``."""
    if os.name == "nt" or not hasattr(os, "kill"):
        return True  # os.kill(pid, 0) would terminate it on Windows; rely on the age limit
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except Exception:  # PermissionError: alive, another user's; anything else: cannot tell
        return True
    return True


def _copy_permissions(target: str, temp_path: str) -> None:
    """mkstemp makes 0600 files; give the new file what a plain open() would."""
    try:
        if os.path.exists(target):
            mode = os.stat(target).st_mode & 0o777
        else:
            umask = os.umask(0)
            os.umask(umask)
            mode = 0o666 & ~umask
            if umask == 0o777:  # Pyodide answers 0o777, yet its open() makes 0o666 files: do as open() does
                mode = 0o666
        os.chmod(temp_path, mode)
    except (OSError, AttributeError, NotImplementedError):
        pass  # Some platforms (Pyodide's file system) have no real permissions.


def _fsync_directory(directory: str) -> None:
    """Make the rename durable; not possible on every platform (e.g. Windows)."""
    try:
        fd = os.open(directory, os.O_RDONLY)
    except (OSError, AttributeError):
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


# ----------------------------------------------------------------------------- load

def load(f, map_location=None, weights_only=None, *, max_tensors: int | None = None):
    """Read a file written by ``webgrad.save``, safetensors or PyTorch tools.

    Everything in the file is checked before any tensor is made; a malformed
    file raises ``ValueError`` naming the file and the bad field. PyTorch
    pickle checkpoints (``.pt``/``.pth``) are refused, never unpickled.

    Args:
        f: a path or a binary file object.
        map_location: where tensors go (default: cpu). A device (``"webgpu"``,
            ``webgrad.device("cpu")``); a dict from the device a tensor was saved
            on to the one to use (others go to cpu); or a callable
            ``fn(tensor, saved_device)`` returning a Tensor, or None to keep the
            cpu tensor. A device without a tensor's dtype (WebGPU has no
            float64) gets it as float32.
        weights_only: True or None (the default, as PyTorch's): tensors and plain
            values only; a file holding a whole module raises ``webgrad.serialize.UnpicklingError``
            as PyTorch raises ``pickle.UnpicklingError``. False: a whole module is rebuilt from its architecture
            record (running its own classes' stored source, unless classes of the
            same names are defined in ``__main__``, which are used instead, as
            pickle would) with the saved weights, dtypes, train/eval mode and frozen
            parameters; its tensors go where ``map_location`` says (default: cpu).
        max_tensors: refuse a file describing more tensors than this (default: the
            environment variable ``WEBGRAD_MAX_TENSORS``, else 10,000), before any is
            checked or made, so a small hostile file of 100,000 empty tensors costs little.

    Returns:
        The structure that was saved (tuples stay tuples, numpy arrays stay
        arrays), or for a plain safetensors file a dict of name -> Tensor in
        the order of the file's header. F16/BF16 load as float16/bfloat16;
        I8/U8/I16 as int8/uint8/int16; U16/U32 as int64.

    Example:
        >>> webgrad.save({"fc.weight": webgrad.ones(2, 3)}, "model.safetensors")
        >>> list(webgrad.load("model.safetensors", map_location="cpu"))
        ['fc.weight']
    """
    if hasattr(f, "read"):
        data = f.read()
        if isinstance(data, str):
            raise TypeError("load: the file object is open in text mode; open it with 'rb'")
        name = getattr(f, "name", None)
        source = name if isinstance(name, str) else "<file object>"
    else:
        source = os.fspath(f)
        with open(source, "rb") as file:
            data = file.read()
    return load_bytes(data, source, map_location=map_location, weights_only=weights_only, max_tensors=max_tensors)


def load_bytes(data, source: str = "<bytes>", *, map_location=None, weights_only=None,
               max_tensors: int | None = None):
    """Decode the bytes of a safetensors file (see ``load``); ``source`` names it in errors."""
    if weights_only is not None and not isinstance(weights_only, bool):
        raise TypeError(f"load: weights_only must be True, False or None, got {weights_only!r}")
    place = _placement(map_location)
    limit = fmt.max_tensors_limit(max_tensors)
    data = memoryview(data).cast("B")
    header, data_start = fmt.read_header(data, source, limit)
    metadata = header.pop("__metadata__", None)
    fmt.check_metadata(metadata, source)
    entries = {name: fmt.check_entry(name, entry, source) for name, entry in header.items()}
    fmt.check_coverage(entries, len(data) - data_start, source)
    tree = _read_tree(metadata, entries, source)
    if tree is not None and weights_only is not False and _holds_module(tree):
        raise UnpicklingError(
            f"Weights only load failed: {source} holds a whole module (saved with webgrad.save(model, f)), "
            "which is rebuilt by running its architecture record (including any code of its own classes). "
            "Re-run webgrad.load with weights_only=False if you trust the source of this file, "
            "or save and load model.state_dict() instead.")

    # Checked: from here on nothing about the file can fail.
    arrays = {name: fmt.read_array(data, data_start, *entry) for name, entry in entries.items()}
    if tree is None:
        return {name: _make_tensor(array, entries[name][0], "cpu", place)
                for name, array in arrays.items()}
    return _decode_node(tree, arrays, entries, place)


def _make_tensor(array, file_dtype: str, saved_device: str, place):
    values = fmt.tensor_values(array, file_dtype)
    tensor = Tensor._make(values, values.shape, fmt.FILE_DTYPES[file_dtype][1], "cpu")
    return place(tensor, saved_device)


def _placement(map_location):
    """map_location -> fn(cpu tensor, saved device) -> tensor."""
    if map_location is None:
        return lambda tensor, saved: tensor
    if isinstance(map_location, str):  # webgrad.device is a str too
        return lambda tensor, saved: _to_device(tensor, map_location)
    if isinstance(map_location, dict):
        table = {str(k): v for k, v in map_location.items()}
        return lambda tensor, saved: _to_device(tensor, table[saved]) if saved in table else tensor
    if callable(map_location):
        def call(tensor, saved):
            result = map_location(tensor, saved)
            if result is None:
                return tensor
            if not hasattr(result, "shape") or not hasattr(result, "device"):
                raise TypeError(f"load: map_location returned {type(result).__name__}; it must "
                                "return a Tensor (e.g. tensor.to('webgpu')) or None")
            return result
        return call
    raise TypeError(f"load: map_location must be a device (e.g. 'cpu'), a dict, a callable or "
                    f"None, got {type(map_location).__name__}")


def _to_device(tensor, device):
    try:
        return tensor.to(device)
    except TypeError:
        # The device lacks this dtype (WebGPU: float64): convert, as
        # load_state_dict would for the model's float32 parameters anyway.
        if not tensor.is_floating_point():
            raise
        return tensor.float().to(device)


# ----------------------------------------------------------------------------- tree

def _read_tree(metadata, entries: dict, source: str):
    """Parse and check the nesting record; None for a plain flat file."""
    if not metadata or TREE_KEY not in metadata:
        return None
    where = f"'__metadata__' entry {TREE_KEY!r}"
    record = fmt.parse_json(metadata[TREE_KEY], source, where)
    if not isinstance(record, dict) or record.get("version") not in _READABLE_VERSIONS \
            or "tree" not in record:
        fmt.fail(source, f"{where} must be {{'version': {TREE_VERSION}, 'tree': ...}}; "
                         "written by a newer webgrad?")
    used: set[str] = set()
    _check_node(record["tree"], entries, used, where, source)
    unused = sorted(set(entries) - used)
    if unused:
        fmt.fail(source, f"{where} does not place tensor {unused[0]!r}")
    return record["tree"]


def _check_node(node, entries: dict, used: set, where: str, source: str) -> None:
    # An explicit stack, so a deeply nested (hostile) tree cannot overflow recursion.
    stack = [node]
    while stack:
        node = stack.pop()
        if not isinstance(node, dict) or not node:
            fmt.fail(source, f"{where}: bad node {node!r}")
        kind, value = next(iter(node.items()))
        extra = set(node) - {kind}
        if kind == "tensor" and extra <= {"device"}:
            if not isinstance(node.get("device", "cpu"), str):
                fmt.fail(source, f"{where}: bad tensor node {node!r}")
            _use_tensor(value, entries, used, where, source)
        elif extra:
            fmt.fail(source, f"{where}: bad node {node!r}")
        elif kind == "ndarray":
            _use_tensor(value, entries, used, where, source)
            if entries[value][0] == "BF16":
                fmt.fail(source, f"{where}: numpy array {value!r} cannot be bfloat16")
        elif kind == "dict":
            if not isinstance(value, list) or not all(
                    isinstance(item, list) and len(item) == 2 and isinstance(item[0], (str, int))
                    and not isinstance(item[0], bool) for item in value):
                fmt.fail(source, f"{where}: bad dict node {node!r}")
            stack.extend(child for _, child in value)
        elif kind in ("list", "tuple"):
            if not isinstance(value, list):
                fmt.fail(source, f"{where}: bad {kind} node {node!r}")
            stack.extend(value)
        elif kind == "module":
            if not isinstance(value, dict) or set(value) != {"architecture", "state", "eval", "frozen"} \
                    or not isinstance(value["architecture"], dict) or not all(
                        isinstance(v, list) and all(isinstance(k, str) for k in v)
                        for v in (value["eval"], value["frozen"])):
                fmt.fail(source, f"{where}: bad module node")
            stack.append(value["state"])
        elif kind == "value":
            if value is not None and not isinstance(value, (str, int, float)):
                fmt.fail(source, f"{where}: bad value node {node!r}")
        else:
            fmt.fail(source, f"{where}: unknown node kind {kind!r}")


def _holds_module(tree) -> bool:
    stack = [tree]
    while stack:
        kind, value = next(iter(stack.pop().items()))
        if kind == "module":
            return True
        if kind == "dict":
            stack.extend(child for _, child in value)
        elif kind in ("list", "tuple"):
            stack.extend(value)
    return False


def _decode_module(value: dict, state: dict):
    """Build a saved module again and give it its weights (load with weights_only=False)."""
    record = value["architecture"]
    try:
        with arch.quiet_construction():
            module = arch.build(record, trust_code=True, classes=arch.main_definitions(record))
    except arch.ArchitectureError as exc:
        raise RuntimeError(f"load: the saved module cannot be rebuilt: {exc}") from exc
    module.load_state_dict(state, assign=True)
    devices = {str(t.device) for t in state.values()}
    if len(devices) == 1 and devices != {"cpu"}:
        module.to(devices.pop())
    eval_names, frozen = set(value["eval"]), set(value["frozen"])
    for key, child in module.named_modules():
        child.training = key not in eval_names
    for key, parameter in module.named_parameters():
        if key in frozen:
            parameter.requires_grad_(False)
    return module


def _use_tensor(name, entries: dict, used: set, where: str, source: str) -> None:
    if not isinstance(name, str) or name not in entries:
        fmt.fail(source, f"{where}: names tensor {name!r}, which is not in the file")
    if name in used:
        fmt.fail(source, f"{where}: places tensor {name!r} twice")
    used.add(name)


def _decode_node(node, arrays: dict, entries: dict, place):
    """Rebuild the saved structure (the tree was checked by _check_node)."""
    kind, value = next(iter(node.items()))
    if kind == "tensor":
        return _make_tensor(arrays[value], entries[value][0], node.get("device", "cpu"), place)
    if kind == "ndarray":
        return arrays[value]
    if kind == "value":
        return value
    if kind == "module":
        return _decode_module(value, _decode_node(value["state"], arrays, entries, place))
    if kind == "dict":
        return {key: _decode_node(child, arrays, entries, place) for key, child in value}
    children = [_decode_node(child, arrays, entries, place) for child in value]
    return children if kind == "list" else tuple(children)
