"""Save and load tensors in the safetensors format, with numpy only.

A file is: 8 bytes little-endian header length N, N bytes of UTF-8 JSON header
``{"name": {"dtype": "F32", "shape": [2, 3], "data_offsets": [0, 24]}, ...,
"__metadata__": {str: str}}``, then the raw little-endian tensor bytes. A flat
state dict saved here is an ordinary safetensors file (``safetensors.torch``
reads it), and any safetensors file with supported dtypes loads here.

Nested checkpoints such as ``{"model": ..., "optimizer": ..., "epoch": 3}`` are
stored flat ("model.fc.weight") and their shape, plus every plain value, is
kept as one JSON string under ``__metadata__["webgrad"]`` so ``load`` gives the
same structure back. This module never imports torch or safetensors (it runs
in Pyodide) and never unpickles anything.
"""
from __future__ import annotations

import json
import os
import struct
import tempfile

import numpy as np

from . import dtypes

MAX_HEADER_BYTES = 100 * 1024 * 1024
TREE_KEY = "webgrad"
TREE_VERSION = 1
_BY_SAFETENSORS_NAME = {d.safetensors_name: d for d in dtypes.ALL}
_CONVERT_HINT = (
    "convert it once in PyTorch: `import torch; from safetensors.torch import save_file; "
    "save_file(torch.load({source!r}, weights_only=True), {target!r})` (for a full "
    "checkpoint, save its model's state_dict() instead)"
)


# ----------------------------------------------------------------------------- save

def save(obj, path, metadata: dict[str, str] | None = None) -> None:
    """Write a state dict (or a nested dict of tensors and plain values) to ``path``.

    The write is atomic: a temporary file next to ``path`` is written, synced
    and renamed over it, so a crash or an error never leaves a half-written
    file and an existing file is only replaced once the new one is complete.

    Args:
        obj: dict of str -> Tensor, or nested dicts/lists whose leaves are
            Tensors or plain values (str, int, float, bool, None).
        path: file to write, conventionally ``*.safetensors``.
        metadata: extra str -> str pairs for ``__metadata__`` (e.g. ``{"format": "pt"}``).

    Example:
        >>> import webgrad
        >>> webgrad.save({"weight": webgrad.tensor([[1.0, 2.0]])}, "model.safetensors")
        >>> webgrad.load("model.safetensors")["weight"].shape
        webgrad.Size([1, 2])
    """
    header, arrays = _encode(obj, metadata)
    # Through a symlink, replace the file it points to, not the link itself.
    path = os.path.realpath(os.fspath(path))
    directory = os.path.dirname(path)
    if not os.path.isdir(directory):
        raise FileNotFoundError(f"save: directory {directory!r} does not exist; create it first")
    fd, temp_path = tempfile.mkstemp(dir=directory, prefix="." + os.path.basename(path) + ".",
                                     suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as file:
            file.write(header)
            for array in arrays:
                # An ndarray is a buffer; numpy's stubs say so (__buffer__) only for Python >= 3.12.
                file.write(array.reshape(-1).view(np.uint8))  # type: ignore[arg-type]
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


def _encode(obj, metadata) -> tuple[bytes, list[np.ndarray]]:
    """Return the length-prefixed header and the arrays in file order."""
    from . import Tensor

    if not isinstance(obj, dict):
        raise TypeError(f"save: expected a dict of tensors (a state dict), got {type(obj).__name__}")
    tensors: dict[str, tuple] = {}
    tree = _encode_node(obj, "", tensors, Tensor)
    is_flat_state_dict = all(isinstance(k, str) for k in obj) and all(
        isinstance(v, Tensor) for v in obj.values())

    header_metadata = {}
    if metadata is not None:
        if not isinstance(metadata, dict) or not all(
                isinstance(k, str) and isinstance(v, str) for k, v in metadata.items()):
            raise TypeError("save: metadata must be a dict of str -> str")
        if TREE_KEY in metadata:
            raise ValueError(f"save: metadata key {TREE_KEY!r} is reserved for webgrad")
        header_metadata.update(metadata)
    if not is_flat_state_dict:
        header_metadata[TREE_KEY] = json.dumps({"version": TREE_VERSION, "tree": tree})

    # Widest dtypes first (as safetensors does), so every tensor starts aligned
    # to its item size; the JSON keeps the caller's order, which load() returns.
    layout = sorted(tensors, key=lambda name: -tensors[name][0].itemsize)
    offsets, position = {}, 0
    for name in layout:
        offsets[name] = [position, position + tensors[name][1].nbytes]
        position += tensors[name][1].nbytes

    header = {}
    if header_metadata:
        header["__metadata__"] = header_metadata
    for name, (dtype, array) in tensors.items():
        header[name] = {"dtype": dtype.safetensors_name, "shape": list(array.shape),
                        "data_offsets": offsets[name]}
    header_bytes = json.dumps(header, separators=(",", ":")).encode("utf-8")
    header_bytes += b" " * (-len(header_bytes) % 8)
    return struct.pack("<Q", len(header_bytes)) + header_bytes, [tensors[n][1] for n in layout]


def _encode_node(value, name: str, tensors: dict, tensor_type):
    """Turn one value into a tree node, collecting (dtype, array) into ``tensors``."""
    if isinstance(value, tensor_type):
        if name in tensors:
            raise ValueError(f"save: two entries flatten to the same tensor name {name!r}; "
                             "rename one of the keys")
        if name == "" or name == "__metadata__":
            raise ValueError(f"save: {name!r} cannot be used as a tensor name")
        tensors[name] = (value.dtype, _tensor_to_array(value, name))
        return {"tensor": name}
    if isinstance(value, dict):
        items = []
        for key, child in value.items():
            if isinstance(key, bool) or not isinstance(key, (str, int)):
                raise TypeError(f"save: key {key!r} under {name or 'the top level'!r} must be "
                                f"a str or int, got {type(key).__name__}")
            items.append([key, _encode_node(child, _join(name, key), tensors, tensor_type)])
        return {"dict": items}
    if isinstance(value, (list, tuple)):
        kind = "list" if isinstance(value, list) else "tuple"
        return {kind: [_encode_node(child, _join(name, i), tensors, tensor_type)
                       for i, child in enumerate(value)]}
    if value is None or isinstance(value, (str, bool, int, float)):
        return {"value": value}
    if isinstance(value, (np.bool_, np.integer, np.floating)):
        return {"value": value.item()}
    raise TypeError(f"save: cannot save {name!r} of type {type(value).__name__}; only "
                    "Tensors, dicts, lists, tuples, str, int, float, bool and None can be saved")


def _join(prefix: str, key) -> str:
    return f"{prefix}.{key}" if prefix else str(key)


def _tensor_to_array(tensor, name: str) -> np.ndarray:
    if str(tensor.device) != "cpu":
        tensor = tensor.to("cpu")
    dtype = tensor.dtype
    array = np.asarray(tensor.detach().numpy())
    # Little-endian, C order, exactly the tensor's dtype.
    array = np.asarray(array, dtype=dtype.np.newbyteorder("<"), order="C")
    if array.shape != tuple(tensor.shape):
        raise ValueError(f"save: tensor {name!r} has shape {tuple(tensor.shape)} but its "
                         f"data has shape {array.shape}")
    return array


def _copy_permissions(target: str, temp_path: str) -> None:
    """mkstemp makes 0600 files; give the new file what a plain open() would."""
    try:
        if os.path.exists(target):
            mode = os.stat(target).st_mode & 0o777
        else:
            umask = os.umask(0)
            os.umask(umask)
            mode = 0o666 & ~umask
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

def load(path):
    """Read a safetensors file written by webgrad, safetensors or PyTorch tools.

    Everything in the file is checked before any tensor is made; a malformed
    file raises ``ValueError`` naming the file and the bad field. PyTorch
    pickle checkpoints (``.pt``/``.pth``) are refused, never unpickled.

    Returns:
        The nested structure that was saved, or for a plain safetensors file a
        dict of name -> CPU Tensor in the order of the file's header.

    Example:
        >>> webgrad.save({"fc.weight": webgrad.ones(2, 3)}, "model.safetensors")
        >>> list(webgrad.load("model.safetensors"))
        ['fc.weight']
    """
    path = os.fspath(path)
    with open(path, "rb") as file:
        data = file.read()
    return load_bytes(data, source=path)


def load_bytes(data, source: str = "<bytes>"):
    """Decode the bytes of a safetensors file (see ``load``); ``source`` names it in errors."""
    data = memoryview(data).cast("B")
    header, data_start = _read_header(data, source)
    metadata = header.pop("__metadata__", None)
    _check_metadata(metadata, source)
    entries = {name: _check_entry(name, entry, source) for name, entry in header.items()}
    _check_coverage(entries, len(data) - data_start, source)
    tree = _read_tree(metadata, entries, source)

    from . import from_numpy

    tensors = {}
    for name, (dtype, shape, (begin, end)) in entries.items():
        count = (end - begin) // dtype.itemsize
        array = np.frombuffer(data, dtype=dtype.np.newbyteorder("<"), count=count,
                              offset=data_start + begin)
        array = array.reshape(shape).astype(dtype.np, copy=True)  # writable, native order
        tensors[name] = from_numpy(array)
    if tree is None:
        return tensors
    return _decode_node(tree, tensors)


def _fail(source: str, message: str):
    raise ValueError(f"load: {source}: {message}")


def _read_header(data: memoryview, source: str) -> tuple[dict, int]:
    size = len(data)
    _refuse_pickle(data, source)
    if size < 8:
        _fail(source, f"file is {size} bytes, shorter than the 8-byte header length; "
                      "not a safetensors file")
    (header_length,) = struct.unpack("<Q", data[:8])
    if header_length > MAX_HEADER_BYTES:
        _fail(source, f"header length {header_length} exceeds the {MAX_HEADER_BYTES}-byte "
                      "limit; not a safetensors file or corrupted")
    if 8 + header_length > size:
        _fail(source, f"header length {header_length} is bigger than the file "
                      f"({size - 8} bytes after the length); file truncated or not safetensors")
    try:
        text = bytes(data[8:8 + header_length]).decode("utf-8")
    except UnicodeDecodeError as error:
        _fail(source, f"header is not valid UTF-8 ({error})")
    try:
        header = json.loads(text, object_pairs_hook=_reject_duplicate_keys)
    except _DuplicateKeyError as error:
        _fail(source, f"header has duplicate key {error.args[0]!r}")
    except (ValueError, RecursionError) as error:
        _fail(source, f"header is not valid JSON ({error})")
    if not isinstance(header, dict):
        _fail(source, f"header must be a JSON object, got {type(header).__name__}")
    return header, 8 + header_length


def _refuse_pickle(data: memoryview, source: str) -> None:
    head = bytes(data[:16])
    # A real safetensors file has '{' right after the length; these checks only
    # fire when it does not, so a header length like 0x0280 is never mistaken.
    if len(head) > 8 and head[8:9] == b"{":
        return
    kind = None
    if head.startswith((b"PK\x03\x04", b"PK\x05\x06")):
        kind = "zip archive, as torch.save writes"
    elif head.startswith(b"\x80\x02\x8a\x0a\x6c\xfc\x9c\x46\xf9\x20\x6a\xa8\x50\x19"):
        kind = "legacy torch.save format"
    elif len(head) >= 2 and head[0] == 0x80 and 2 <= head[1] <= 5:
        kind = f"pickle protocol {head[1]}"
    if kind is not None:
        target = os.path.splitext(source)[0] + ".safetensors"
        hint = _CONVERT_HINT.format(source=source, target=target)
        _fail(source, f"this is a PyTorch pickle checkpoint ({kind}), not a safetensors "
                      f"file. webgrad never unpickles files, since unpickling can run "
                      f"arbitrary code; {hint}")


class _DuplicateKeyError(Exception):
    pass


def _reject_duplicate_keys(pairs):
    result = {}
    for key, value in pairs:
        if key in result:
            raise _DuplicateKeyError(key)
        result[key] = value
    return result


def _is_int(value) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _check_metadata(metadata, source: str) -> None:
    if metadata is None:
        return
    if not isinstance(metadata, dict):
        _fail(source, f"'__metadata__' must be an object of str -> str, "
                      f"got {type(metadata).__name__}")
    for key, value in metadata.items():
        if not isinstance(value, str):
            _fail(source, f"'__metadata__' entry {key!r} must be a string, "
                          f"got {type(value).__name__}")


def _check_entry(name: str, entry, source: str):
    """Validate one tensor's header entry; return (dtype, shape, offsets)."""
    where = f"tensor {name!r}"
    if not isinstance(entry, dict):
        _fail(source, f"{where}: entry must be an object, got {type(entry).__name__}")
    for field in ("dtype", "shape", "data_offsets"):
        if field not in entry:
            _fail(source, f"{where}: missing field {field!r}")
    dtype_name, shape, offsets = entry["dtype"], entry["shape"], entry["data_offsets"]
    if not isinstance(dtype_name, str):
        _fail(source, f"{where}: field 'dtype' must be a string, got {dtype_name!r}")
    if dtype_name not in _BY_SAFETENSORS_NAME:
        _fail(source, f"{where}: unsupported dtype {dtype_name!r}; webgrad reads "
                      f"{', '.join(_BY_SAFETENSORS_NAME)} (convert it first, e.g. with "
                      "tensor.float() in PyTorch)")
    if not isinstance(shape, list) or not all(_is_int(d) for d in shape):
        _fail(source, f"{where}: field 'shape' must be a list of integers, got {shape!r}")
    if any(d < 0 for d in shape):
        _fail(source, f"{where}: field 'shape' has a negative dimension: {shape}")
    if not isinstance(offsets, list) or len(offsets) != 2 or not all(_is_int(o) for o in offsets):
        _fail(source, f"{where}: field 'data_offsets' must be [begin, end] integers, "
                      f"got {offsets!r}")
    begin, end = offsets
    if begin < 0 or end < 0:
        _fail(source, f"{where}: field 'data_offsets' {offsets} is negative")
    if begin > end:
        _fail(source, f"{where}: field 'data_offsets' {offsets} has begin > end")
    dtype = _BY_SAFETENSORS_NAME[dtype_name]
    numel = 1
    for d in shape:
        numel *= d
    if end - begin != numel * dtype.itemsize:
        _fail(source, f"{where}: field 'data_offsets' {offsets} spans {end - begin} bytes but "
                      f"shape {shape} of {dtype_name} needs {numel * dtype.itemsize}")
    return dtype, tuple(shape), (begin, end)


def _check_coverage(entries: dict, data_length: int, source: str) -> None:
    """The tensors must tile the data region exactly: no overlap, gap or spare bytes."""
    position, previous = 0, None
    ordered = sorted(entries.items(), key=lambda item: item[1][2])
    for name, (_, _, (begin, end)) in ordered:
        if end > data_length:
            _fail(source, f"tensor {name!r}: field 'data_offsets' [{begin}, {end}] goes past "
                          f"the end of the data ({data_length} bytes); file truncated")
        if begin < position:
            _fail(source, f"tensor {name!r}: field 'data_offsets' [{begin}, {end}] overlaps "
                          f"tensor {previous!r}, which ends at {position}")
        if begin > position:
            after = f"tensor {previous!r}" if previous else "the start of the data"
            _fail(source, f"tensor {name!r}: field 'data_offsets' [{begin}, {end}] leaves a "
                          f"gap of {begin - position} unused bytes after {after}")
        position, previous = end, name
    if position != data_length:
        after = f"tensor {previous!r}" if previous else "the header (no tensors)"
        _fail(source, f"{data_length - position} trailing bytes after {after} are not part of "
                      "any tensor; file corrupted")


# ----------------------------------------------------------------------------- tree

def _read_tree(metadata, entries: dict, source: str):
    """Parse and check the nesting record; None for a plain flat file."""
    if not metadata or TREE_KEY not in metadata:
        return None
    where = f"'__metadata__' entry {TREE_KEY!r}"
    try:
        record = json.loads(metadata[TREE_KEY], object_pairs_hook=_reject_duplicate_keys)
    except (ValueError, RecursionError, _DuplicateKeyError) as error:
        _fail(source, f"{where} is not valid JSON ({error!r})")
    if not isinstance(record, dict) or record.get("version") != TREE_VERSION or "tree" not in record:
        _fail(source, f"{where} must be {{'version': {TREE_VERSION}, 'tree': ...}}; "
                      "written by a newer webgrad?")
    used: set[str] = set()
    _check_node(record["tree"], entries, used, where, source)
    if not isinstance(record["tree"], dict) or "dict" not in record["tree"]:
        _fail(source, f"{where}: the top level must be a dict")
    unused = sorted(set(entries) - used)
    if unused:
        _fail(source, f"{where} does not place tensor {unused[0]!r}")
    return record["tree"]


def _check_node(node, entries: dict, used: set, where: str, source: str) -> None:
    # An explicit stack, so a deeply nested (hostile) tree cannot overflow recursion.
    stack = [node]
    while stack:
        node = stack.pop()
        if not isinstance(node, dict) or len(node) != 1:
            _fail(source, f"{where}: bad node {node!r}")
        (kind, value), = node.items()
        if kind == "tensor":
            if not isinstance(value, str) or value not in entries:
                _fail(source, f"{where}: names tensor {value!r}, which is not in the file")
            if value in used:
                _fail(source, f"{where}: places tensor {value!r} twice")
            used.add(value)
        elif kind == "dict":
            if not isinstance(value, list) or not all(
                    isinstance(item, list) and len(item) == 2 and isinstance(item[0], (str, int))
                    and not isinstance(item[0], bool) for item in value):
                _fail(source, f"{where}: bad dict node {node!r}")
            stack.extend(child for _, child in value)
        elif kind in ("list", "tuple"):
            if not isinstance(value, list):
                _fail(source, f"{where}: bad {kind} node {node!r}")
            stack.extend(value)
        elif kind == "value":
            if value is not None and not isinstance(value, (str, int, float)):
                _fail(source, f"{where}: bad value node {node!r}")
        else:
            _fail(source, f"{where}: unknown node kind {kind!r}")


def _decode_node(node, tensors: dict):
    """Rebuild the saved structure (the tree was checked by _check_node)."""
    (kind, value), = node.items()
    if kind == "tensor":
        return tensors[value]
    if kind == "value":
        return value
    if kind == "dict":
        return {key: _decode_node(child, tensors) for key, child in value}
    children = [_decode_node(child, tensors) for child in value]
    return children if kind == "list" else tuple(children)
