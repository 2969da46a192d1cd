"""The safetensors file format, with numpy only: dtypes, header checks, layout.

A file is: 8 bytes little-endian header length N, N bytes of UTF-8 JSON header
``{"name": {"dtype": "F32", "shape": [2, 3], "data_offsets": [0, 24]}, ...,
"__metadata__": {str: str}}``, then the raw little-endian tensor bytes.
``webgrad.serialize`` builds save/load on top of this module.
"""
from __future__ import annotations

import json
import os
import re
import struct

import numpy as np

from . import dtypes

MAX_HEADER_BYTES = 100 * 1024 * 1024
# JSON deeper than this is refused before parsing: in Pyodide the parser's C recursion
# overflows the WebAssembly stack (~20k levels) and kills the worker instead of raising.
MAX_JSON_DEPTH = 500
MAX_DIMS = 32  # numpy's limit on some platforms (Pyodide's too); torch files never come close
# For an empty tensor, the largest extent (its non-zero dims times item size) accepted:
# numpy's limit on every platform webgrad runs on, Pyodide's 32-bit wasm included.
MAX_EXTENT_BYTES = 2**31 - 1
# Tensors per file, unless load(..., max_tensors=N) or WEBGRAD_MAX_TENSORS says otherwise (the
# server's upload limit reads the same variable). Each tensor costs tens of microseconds and
# some hundred bytes to check and make, so a small file of 100,000 empty tensors would take
# seconds; real checkpoints, optimizer state included, hold a few thousand at most.
DEFAULT_MAX_TENSORS = 10_000
MAX_TENSORS_ENV = "WEBGRAD_MAX_TENSORS"

# File dtype -> (numpy dtype of the raw little-endian data, webgrad dtype it loads as).
# Integer widths webgrad has no dtype for widen to int64, as webgrad.from_numpy does.
FILE_DTYPES: dict[str, tuple[np.dtype, dtypes.DType]] = {
    "F64": (np.dtype("<f8"), dtypes.float64),
    "F32": (np.dtype("<f4"), dtypes.float32),
    "F16": (np.dtype("<f2"), dtypes.float16),
    "BF16": (np.dtype("<u2"), dtypes.bfloat16),  # the top 16 bits of a float32
    "I64": (np.dtype("<i8"), dtypes.int64),
    "I32": (np.dtype("<i4"), dtypes.int32),
    "I16": (np.dtype("<i2"), dtypes.int16),
    "I8": (np.dtype("i1"), dtypes.int8),
    "U32": (np.dtype("<u4"), dtypes.int64),
    "U16": (np.dtype("<u2"), dtypes.int64),
    "U8": (np.dtype("u1"), dtypes.uint8),
    "BOOL": (np.dtype("?"), dtypes.bool_),
}
# numpy dtype -> file dtype, for numpy arrays saved as themselves.
NUMPY_FILE_DTYPES = {raw.newbyteorder("="): name for name, (raw, _) in FILE_DTYPES.items()
                     if name != "BF16"}

_CONVERT_HINT = (
    "convert it once in PyTorch: `import torch; from safetensors.torch import save_file; "
    "save_file(torch.load({source!r}, weights_only=True), {target!r})` (for a full "
    "checkpoint, save its model's state_dict() instead)"
)


def fail(source: str, message: str):
    raise ValueError(f"load: {source}: {message}")


# ----------------------------------------------------------------------------- writing

def tensor_bytes(tensor, name: str) -> tuple[str, np.ndarray]:
    """A tensor's file dtype and its data as a little-endian C-order array."""
    if str(tensor.device) != "cpu":
        tensor = tensor.to("cpu")
    array = np.asarray(tensor.detach().numpy())
    if array.shape != tuple(tensor.shape):
        raise ValueError(f"save: tensor {name!r} has shape {tuple(tensor.shape)} but its "
                         f"data has shape {array.shape}")
    if tensor.dtype is dtypes.bfloat16:
        return "BF16", dtypes.bfloat16_bits(array).astype("<u2").reshape(array.shape)
    file_dtype = tensor.dtype.safetensors_name
    return file_dtype, np.asarray(array, dtype=FILE_DTYPES[file_dtype][0], order="C")


def array_bytes(array: np.ndarray, name: str) -> tuple[str, np.ndarray]:
    """A numpy array's file dtype and data; only dtypes the file format has."""
    file_dtype = NUMPY_FILE_DTYPES.get(array.dtype.newbyteorder("="))
    if file_dtype is None:
        raise TypeError(f"save: numpy array {name!r} has dtype {array.dtype}, which a "
                        f"safetensors file cannot hold; convert it to one of "
                        f"{', '.join(str(d) for d in NUMPY_FILE_DTYPES)}")
    return file_dtype, np.asarray(array, dtype=FILE_DTYPES[file_dtype][0], order="C")


def encode(entries: dict, metadata: dict) -> tuple[bytes, list[np.ndarray]]:
    """The length-prefixed header and the arrays in file order for
    ``entries`` (name -> (file dtype, array)), header in the caller's order."""
    # Widest dtypes first (as safetensors does), so every tensor starts aligned
    # to its item size; the JSON keeps the caller's order, which load() returns.
    layout = sorted(entries, key=lambda name: -entries[name][1].itemsize)
    offsets, position = {}, 0
    for name in layout:
        offsets[name] = [position, position + entries[name][1].nbytes]
        position += entries[name][1].nbytes
    header: dict = {"__metadata__": metadata} if metadata else {}
    for name, (file_dtype, array) in entries.items():
        header[name] = {"dtype": file_dtype, "shape": list(array.shape), "data_offsets": offsets[name]}
    header_bytes = json.dumps(header, separators=(",", ":")).encode("utf-8")
    header_bytes += b" " * (-len(header_bytes) % 8)
    return struct.pack("<Q", len(header_bytes)) + header_bytes, [entries[n][1] for n in layout]


# ----------------------------------------------------------------------------- reading

def max_tensors_limit(max_tensors: int | None) -> int:
    """The tensor-count limit to use: ``max_tensors``, else ``$WEBGRAD_MAX_TENSORS``, else the default."""
    if max_tensors is None:
        text = os.environ.get(MAX_TENSORS_ENV, "").strip()
        if not text:
            return DEFAULT_MAX_TENSORS
        try:
            max_tensors = int(text)
        except ValueError:
            raise ValueError(f"load: the environment variable {MAX_TENSORS_ENV}={text!r} must be a whole "
                             "number of tensors") from None
    elif isinstance(max_tensors, bool) or not isinstance(max_tensors, int):
        raise TypeError(f"load: max_tensors must be an int or None, got {type(max_tensors).__name__}")
    if max_tensors < 0:
        raise ValueError(f"load: max_tensors must be >= 0, got {max_tensors}")
    return max_tensors


def _too_many_tensors(source: str, limit: int):
    fail(source, f"header describes more than {limit} tensors, the limit per file; if you trust the file, "
                 f"raise it with webgrad.load(..., max_tensors=N) or the environment variable {MAX_TENSORS_ENV}")


def read_header(data: memoryview, source: str, max_tensors: int = DEFAULT_MAX_TENSORS) -> tuple[dict, int]:
    """The checked header (a dict) and where the data starts; at most ``max_tensors`` tensors."""
    size = len(data)
    _refuse_pickle(data, source)
    if size < 8:
        fail(source, f"file is {size} bytes, shorter than the 8-byte header length; "
                     "not a safetensors file")
    (header_length,) = struct.unpack("<Q", data[:8])
    if header_length > MAX_HEADER_BYTES:
        fail(source, f"header length {header_length} exceeds the {MAX_HEADER_BYTES}-byte "
                     "limit; not a safetensors file or corrupted")
    if 8 + header_length > size:
        fail(source, f"header length {header_length} is bigger than the file "
                     f"({size - 8} bytes after the length); file truncated or not safetensors")
    try:
        text = bytes(data[8:8 + header_length]).decode("utf-8")
    except UnicodeDecodeError as error:
        fail(source, f"header is not valid UTF-8 ({error})")
    # Every tensor is one JSON object, plus __metadata__ and the header itself: stop parsing
    # past that many, so refusing a file of very many tensors costs little time or memory.
    try:
        header = parse_json(text, source, "header", max_objects=max_tensors + 2)
    except _TooManyObjects:
        _too_many_tensors(source, max_tensors)
    if not isinstance(header, dict):
        fail(source, f"the header must be a JSON object (name -> tensor), got a JSON {_json_kind(header)}")
    if len(header) - ("__metadata__" in header) > max_tensors:
        _too_many_tensors(source, max_tensors)
    return header, 8 + header_length


def _json_kind(value) -> str:
    if isinstance(value, list):
        return "array"
    if isinstance(value, str):
        return "string"
    if value is None or isinstance(value, bool):
        return json.dumps(value)
    return "number"


_JSON_STRING = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*"', re.DOTALL)


def _nesting_depth(text: str) -> int:
    """The deepest bracket nesting of ``text``, brackets inside strings not counted."""
    if text.count("[") + text.count("{") <= MAX_JSON_DEPTH:
        return 0  # cannot be too deep: the common case costs two counts
    codes = np.frombuffer(_JSON_STRING.sub('""', text).encode("utf-8"), dtype=np.uint8)
    opens = (codes == ord("[")) | (codes == ord("{"))
    brackets = opens | (codes == ord("]")) | (codes == ord("}"))
    # +1 / -1 per bracket only, not per character: a wide flat header of many megabytes
    # then needs a few bytes per character here, not 16 (two int64 arrays of its length).
    steps = opens[brackets].astype(np.int64) * 2 - 1
    return int(np.cumsum(steps).max(initial=0))


def parse_json(text: str, source: str, where: str, max_objects: int | None = None):
    """Parse ``text``; refuse duplicate keys and deep nesting. Raises ``_TooManyObjects`` once
    more than ``max_objects`` JSON objects were read, if given."""
    if _nesting_depth(text) > MAX_JSON_DEPTH:
        fail(source, f"{where} is not valid JSON (nested too deeply: more than {MAX_JSON_DEPTH} levels)")
    hook = _reject_duplicate_keys
    if max_objects is not None:
        seen = 0

        def hook(pairs):
            nonlocal seen
            seen += 1
            if seen > max_objects:
                raise _TooManyObjects()
            return _reject_duplicate_keys(pairs)
    try:
        return json.loads(text, object_pairs_hook=hook)
    except _DuplicateKeyError as error:
        fail(source, f"{where} has duplicate key {error.args[0]!r}")
    except (ValueError, RecursionError) as error:
        # The message alone: a RecursionError's text differs between Python builds.
        reason = "nested too deeply" if isinstance(error, RecursionError) else str(error)
        fail(source, f"{where} is not valid JSON ({reason})")


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
        fail(source, f"this is a PyTorch pickle checkpoint ({kind}), not a safetensors "
                     f"file. webgrad never unpickles files, since unpickling can run "
                     f"arbitrary code; {hint}")


class _DuplicateKeyError(Exception):
    pass


class _TooManyObjects(Exception):
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


def check_metadata(metadata, source: str) -> None:
    if metadata is None:
        return
    if not isinstance(metadata, dict):
        fail(source, f"'__metadata__' must be an object of str -> str, "
                     f"got {type(metadata).__name__}")
    for key, value in metadata.items():
        if not isinstance(value, str):
            fail(source, f"'__metadata__' entry {key!r} must be a string, "
                         f"got {type(value).__name__}")


def check_entry(name: str, entry, source: str):
    """Validate one tensor's header entry; return (file dtype, shape, offsets)."""
    where = f"tensor {name!r}"
    if not isinstance(entry, dict):
        fail(source, f"{where}: entry must be an object, got {type(entry).__name__}")
    for field in ("dtype", "shape", "data_offsets"):
        if field not in entry:
            fail(source, f"{where}: missing field {field!r}")
    file_dtype, shape, offsets = entry["dtype"], entry["shape"], entry["data_offsets"]
    if not isinstance(file_dtype, str):
        fail(source, f"{where}: field 'dtype' must be a string, got {file_dtype!r}")
    if file_dtype not in FILE_DTYPES:
        fail(source, f"{where}: unsupported dtype {file_dtype!r}; webgrad reads "
                     f"{', '.join(FILE_DTYPES)} (convert it first, e.g. with "
                     "tensor.float() in PyTorch)")
    if not isinstance(shape, list) or not all(_is_int(d) for d in shape):
        fail(source, f"{where}: field 'shape' must be a list of integers, got {shape!r}")
    if len(shape) > MAX_DIMS:
        fail(source, f"{where}: field 'shape' has {len(shape)} dimensions; at most "
                     f"{MAX_DIMS} are supported")
    if any(d < 0 for d in shape):
        fail(source, f"{where}: field 'shape' has a negative dimension: {shape}")
    itemsize = FILE_DTYPES[file_dtype][0].itemsize
    numel = 1
    for d in shape:
        numel *= d
    if numel == 0:
        # No data bounds an empty tensor's other dimensions, but numpy still refuses
        # an array whose non-zero dimensions would not fit in memory.
        extent = itemsize
        for d in shape:
            extent *= max(d, 1)
        if extent > MAX_EXTENT_BYTES:
            fail(source, f"{where}: field 'shape' {shape} is too large: an empty tensor whose "
                         f"other dimensions span {extent} bytes of {file_dtype}, over the "
                         f"{MAX_EXTENT_BYTES}-byte limit")
    if not isinstance(offsets, list) or len(offsets) != 2 or not all(_is_int(o) for o in offsets):
        fail(source, f"{where}: field 'data_offsets' must be [begin, end] integers, "
                     f"got {offsets!r}")
    begin, end = offsets
    if begin < 0 or end < 0:
        fail(source, f"{where}: field 'data_offsets' {offsets} is negative")
    if begin > end:
        fail(source, f"{where}: field 'data_offsets' {offsets} has begin > end")
    if end - begin != numel * itemsize:
        fail(source, f"{where}: field 'data_offsets' {offsets} spans {end - begin} bytes but "
                     f"shape {shape} of {file_dtype} needs {numel * itemsize}")
    return file_dtype, tuple(shape), (begin, end)


def check_coverage(entries: dict, data_length: int, source: str) -> None:
    """The tensors must tile the data region exactly: no overlap, gap or spare bytes."""
    position, previous = 0, None
    ordered = sorted(entries.items(), key=lambda item: item[1][2])
    for name, (_, _, (begin, end)) in ordered:
        if end > data_length:
            fail(source, f"tensor {name!r}: field 'data_offsets' [{begin}, {end}] goes past "
                         f"the end of the data ({data_length} bytes); file truncated")
        if begin < position:
            fail(source, f"tensor {name!r}: field 'data_offsets' [{begin}, {end}] overlaps "
                         f"tensor {previous!r}, which ends at {position}")
        if begin > position:
            after = f"tensor {previous!r}" if previous else "the start of the data"
            fail(source, f"tensor {name!r}: field 'data_offsets' [{begin}, {end}] leaves a "
                         f"gap of {begin - position} unused bytes after {after}")
        position, previous = end, name
    if position != data_length:
        after = f"tensor {previous!r}" if previous else "the header (no tensors)"
        fail(source, f"{data_length - position} trailing bytes after {after} are not part of "
                     "any tensor; file corrupted")


def read_array(data: memoryview, start: int, file_dtype: str, shape, offsets) -> np.ndarray:
    """A writable native-order copy of one checked tensor's data, as its file dtype
    (BF16 as its uint16 bits)."""
    raw_dtype = FILE_DTYPES[file_dtype][0]
    begin, end = offsets
    array = np.frombuffer(data, dtype=raw_dtype, count=(end - begin) // raw_dtype.itemsize,
                          offset=start + begin)
    return array.reshape(shape).astype(raw_dtype.newbyteorder("="), copy=True)


def tensor_values(array: np.ndarray, file_dtype: str) -> np.ndarray:
    """Raw file data -> the values of the webgrad dtype it loads as."""
    if file_dtype == "BF16":
        return dtypes.bfloat16_values(array).reshape(array.shape)
    target = FILE_DTYPES[file_dtype][1].np
    return array if array.dtype == target else array.astype(target)
