"""The malformed-file corpus: every file must be refused with a ValueError naming
the file and the bad field, before any tensor is made.

``MALFORMED`` is the one list: tests/browser/test_hostile_load.py runs the same
files through ``webgrad.load`` inside Pyodide and expects the same messages.
"""
from __future__ import annotations

import io
import json
import pickle
import struct
import zipfile

import numpy as np
import pytest

import webgrad
from webgrad import serialize


def raw(header, data: bytes = b"") -> bytes:
    """The bytes of a safetensors-like file from a header (dict or raw bytes) and data."""
    header_bytes = header if isinstance(header, bytes) else json.dumps(header).encode()
    return struct.pack("<Q", len(header_bytes)) + header_bytes + data


def f32_entry(begin, end, shape=None):
    shape = [(end - begin) // 4] if shape is None else shape
    return {"dtype": "F32", "shape": shape, "data_offsets": [begin, end]}


def with_entry(**fields):
    """A file with one F32 tensor 'w' of 4 bytes whose entry has ``fields`` changed
    (a value of None deletes the field)."""
    entry = f32_entry(0, 4)
    for field, value in fields.items():
        if value is None:
            del entry[field]
        else:
            entry[field] = value
    return raw({"w": entry}, b"\0" * 4)


def empty_with_shape(shape, dtype="F32"):
    """A zero-size tensor 'w' (no data) with the given shape."""
    return raw({"w": {"dtype": dtype, "shape": shape, "data_offsets": [0, 0]}})


def many_empty_tensors(count: int) -> bytes:
    """A file of ``count`` zero-size tensors: a few dozen bytes each, nothing to read."""
    return raw({f"t{i}": {"dtype": "F32", "shape": [0], "data_offsets": [0, 0]} for i in range(count)})


def with_tree(tree: str) -> bytes:
    return raw({"__metadata__": {"webgrad": tree}, "w": f32_entry(0, 4)}, b"\0" * 4)


def tree_json(node) -> str:
    return json.dumps({"version": 2, "tree": node})


def sample_file() -> bytes:
    return serialize.save_bytes({"a": webgrad.ones(2, 3), "step": webgrad.tensor(3),
                                 "mask": webgrad.tensor([True, False])})


def zip_checkpoint() -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        archive.writestr("archive/data.pkl", pickle.dumps({"weight": 1}, protocol=2))
    return buffer.getvalue()


_W = json.dumps(f32_entry(0, 4))

# (test id, file bytes (a function, so building runs inside the test), message fragments)
MALFORMED = [
    ("shorter-than-8-bytes", lambda: b"\x01\x02\x03", ["shorter than the 8-byte header length"]),
    ("empty-file", lambda: b"", ["file is 0 bytes"]),
    ("header-length-bigger-than-file", lambda: struct.pack("<Q", 1000) + b"{}",
     ["header length 1000", "bigger than the file"]),
    ("header-length-over-limit", lambda: struct.pack("<Q", 200 * 1024 * 1024) + b"{}",
     ["header length", "limit"]),
    ("header-length-2**64-1", lambda: b"\xff" * 8 + b"{}", ["header length", "limit"]),
    ("header-not-utf8", lambda: raw(b'{"\xff\xfe": 1}'), ["header", "UTF-8"]),
    ("header-not-json", lambda: raw(b'{"w": {"dtype": '), ["header", "not valid JSON"]),
    ("header-nested-too-deeply", lambda: raw(b"[" * 100_000 + b"]" * 100_000),
     ["header", "not valid JSON", "nested too deeply"]),
    ("header-not-an-object", lambda: raw(b"[1, 2, 3]"), ["header must be a JSON object", "array"]),
    # An array of entries is what an upload of it answered 500 to (the server counted its items as pairs).
    ("header-an-array-of-entries", lambda: raw(json.dumps([["w", f32_entry(0, 4)]]).encode(), b"\0" * 4),
     ["header must be a JSON object", "array"]),
    ("header-a-string", lambda: raw(b'"w"'), ["header must be a JSON object", "string"]),
    ("header-a-number", lambda: raw(b"3"), ["header must be a JSON object", "number"]),
    ("header-null", lambda: raw(b"null"), ["header must be a JSON object", "null"]),
    # One more zero-size tensor than the default limit (no WEBGRAD_MAX_TENSORS in the tests).
    ("too-many-tensors", lambda: many_empty_tensors(10_001),
     ["more than 10000 tensors", "max_tensors=", "WEBGRAD_MAX_TENSORS"]),
    ("duplicate-keys", lambda: raw(f'{{"w": {_W}, "w": {_W}}}'.encode(), b"\0" * 4),
     ["duplicate key 'w'"]),
    ("entry-not-an-object", lambda: raw({"w": [0, 4]}, b"\0" * 4), ["tensor 'w'", "must be an object"]),
    *[(f"missing-{field}", lambda field=field: with_entry(**{field: None}),
       ["tensor 'w'", f"missing field '{field}'"]) for field in ("dtype", "shape", "data_offsets")],
    *[(f"wrong-type-{field}-{value!r}", lambda field=field, value=value: with_entry(**{field: value}),
       ["tensor 'w'", f"field '{field}'"])
      for field, value in [("dtype", 5), ("shape", "1"), ("shape", [1.0]), ("shape", [True]),
                           ("data_offsets", [0]), ("data_offsets", [0, 4, 8]),
                           ("data_offsets", "0,4"), ("data_offsets", [0, 4.0])]],
    ("negative-dimension", lambda: with_entry(shape=[-1, -1]),
     ["tensor 'w'", "field 'shape'", "negative"]),
    # Zero-size tensors need no data, so only the shape check stands between them and numpy.
    *[(f"empty-huge-{label}", lambda shape=shape: empty_with_shape(shape),
       ["tensor 'w'", "field 'shape'", "too large"])
      for label, shape in [("[0,2**63]", [0, 2**63]), ("[0,2**40,2**40]", [0, 2**40, 2**40]),
                           ("[2**62,0]", [2**62, 0]), ("[0,2**31,2**31]", [0, 2**31, 2**31])]],
    ("empty-70-dims", lambda: empty_with_shape([0] * 70), ["tensor 'w'", "field 'shape'", "70 dimensions"]),
    ("ones-70-dims", lambda: raw({"w": f32_entry(0, 4, shape=[1] * 70)}, b"\0" * 4),
     ["tensor 'w'", "field 'shape'", "70 dimensions"]),
    ("huge-dims-with-data", lambda: with_entry(shape=[2**40, 2**40]),
     ["tensor 'w'", "field 'data_offsets'", "needs"]),
    *[(f"unknown-dtype-{dtype!r}", lambda dtype=dtype: with_entry(dtype=dtype, shape=[2]),
       ["tensor 'w'", f"unsupported dtype {dtype!r}", "F32", "BF16"])
      for dtype in ["F8_E4M3", "U64", "C64", "float32", "f32", ""]],
    ("offsets-out-of-range", lambda: raw({"a": f32_entry(0, 4), "w": f32_entry(4, 12)}, b"\0" * 8),
     ["tensor 'w'", "field 'data_offsets'", "past the end"]),
    ("negative-offsets", lambda: with_entry(data_offsets=[-4, 0], shape=[1]),
     ["tensor 'w'", "field 'data_offsets'", "negative"]),
    ("begin-after-end", lambda: raw({"w": f32_entry(8, 4, shape=[1])}, b"\0" * 8),
     ["tensor 'w'", "field 'data_offsets'", "begin > end"]),
    ("overlapping-tensors", lambda: raw({"a": f32_entry(0, 8), "b": f32_entry(4, 12)}, b"\0" * 12),
     ["tensor 'b'", "overlaps tensor 'a'"]),
    ("gap-between-tensors", lambda: raw({"a": f32_entry(0, 4), "b": f32_entry(8, 12)}, b"\0" * 12),
     ["tensor 'b'", "gap of 4 unused bytes", "tensor 'a'"]),
    ("gap-before-first-tensor", lambda: raw({"a": f32_entry(4, 8)}, b"\0" * 8),
     ["tensor 'a'", "gap of 4 unused bytes", "start of the data"]),
    ("byte-size-not-numel-times-itemsize", lambda: with_entry(data_offsets=[0, 4], shape=[3]),
     ["tensor 'w'", "spans 4 bytes", "needs 12"]),
    ("f16-odd-byte-count", lambda: raw({"w": {"dtype": "F16", "shape": [2], "data_offsets": [0, 3]}}, b"\0" * 3),
     ["tensor 'w'", "spans 3 bytes", "F16 needs 4"]),
    ("truncated-data", lambda: sample_file()[:-2], ["past the end", "truncated"]),
    ("trailing-bytes", lambda: sample_file() + b"\0\0\0", ["3 trailing bytes", "tensor 'mask'"]),
    ("trailing-bytes-without-tensors", lambda: raw({}, b"\0"), ["1 trailing bytes"]),
    *[(f"bad-metadata-{metadata!r}", lambda metadata=metadata: raw(
        {"__metadata__": metadata, "w": f32_entry(0, 4)}, b"\0" * 4), ["'__metadata__'", fragment])
      for metadata, fragment in [({"format": 1}, "'format'"), ({"format": None}, "'format'"),
                                 (["pt"], "list"), ("pt", "str")]],
    ("tree-not-json", lambda: with_tree("not json"), ["'webgrad'", "not valid JSON"]),
    ("tree-nested-too-deeply", lambda: with_tree("[" * 100_000 + "]" * 100_000),
     ["'webgrad'", "nested too deeply"]),
    ("tree-newer-version", lambda: with_tree(json.dumps({"version": 99, "tree": {}})),
     ["'webgrad'", "newer webgrad"]),
    ("tree-names-missing-tensor", lambda: with_tree(tree_json({"dict": [["w", {"tensor": "nope"}]]})),
     ["'webgrad'", "'nope'"]),
    ("tree-misses-a-tensor", lambda: with_tree(tree_json({"dict": []})),
     ["'webgrad'", "does not place tensor 'w'"]),
    ("tree-uses-tensor-twice", lambda: with_tree(tree_json(
        {"dict": [["w", {"tensor": "w"}], ["v", {"tensor": "w"}]]})), ["'webgrad'", "twice"]),
    ("tree-tensor-and-array-share", lambda: with_tree(tree_json(
        {"list": [{"tensor": "w"}, {"ndarray": "w"}]})), ["'webgrad'", "twice"]),
    ("tree-unknown-node", lambda: with_tree(tree_json({"pickle": 1})), ["'webgrad'", "unknown node kind"]),
    ("tree-bad-device", lambda: with_tree(tree_json({"tensor": "w", "device": 5})),
     ["'webgrad'", "bad tensor node"]),
    ("tree-extra-field", lambda: with_tree(tree_json({"list": [], "tensor": "w"})), ["'webgrad'", "bad node"]),
    ("tree-empty-node", lambda: with_tree(tree_json({"list": [{}, {"tensor": "w"}]})), ["'webgrad'", "bad node"]),
    ("tree-bad-dict-key", lambda: with_tree(tree_json({"dict": [[True, {"tensor": "w"}]]})),
     ["'webgrad'", "bad dict node"]),
    ("tree-bad-value", lambda: with_tree(tree_json({"list": [{"value": [1]}, {"tensor": "w"}]})),
     ["'webgrad'", "bad value node"]),
    # PyTorch checkpoints: refused before anything is unpickled (more in tests/test_serialize.py).
    ("pickle-protocol-2", lambda: pickle.dumps({"weight": [1.0]}, protocol=2),
     ["PyTorch pickle checkpoint", "pickle protocol 2", "never unpickles"]),
    ("pickle-protocol-5", lambda: pickle.dumps({"weight": [1.0]}, protocol=5), ["pickle protocol 5"]),
    ("torch-zip-checkpoint", zip_checkpoint, ["PyTorch pickle checkpoint", "zip archive"]),
]


@pytest.fixture(autouse=True)
def default_tensor_limit(monkeypatch):
    """The corpus expects the default tensor-count limit, whatever the shell set."""
    monkeypatch.delenv("WEBGRAD_MAX_TENSORS", raising=False)


def expect_error(path, *fragments) -> str:
    with pytest.raises(ValueError) as info:
        webgrad.load(path)
    message = str(info.value)
    assert str(path) in message
    for fragment in fragments:
        assert fragment in message, f"{fragment!r} not in {message!r}"
    return message


@pytest.mark.parametrize("make_bytes, fragments", [case[1:] for case in MALFORMED],
                         ids=[case[0] for case in MALFORMED])
def test_malformed_file_is_refused(tmp_path, make_bytes, fragments):
    path = tmp_path / "bad.safetensors"
    path.write_bytes(make_bytes())
    message = expect_error(path, *fragments)
    assert message.startswith(f"load: {path}: ")
    # The same refusal from bytes and from a file object, naming their source.
    with pytest.raises(ValueError, match="load: <bytes>: "):
        serialize.load_bytes(path.read_bytes())
    with open(path, "rb") as file, pytest.raises(ValueError) as info:
        webgrad.load(file)
    assert str(info.value) == message


def test_corpus_ids_are_unique():
    ids = [case[0] for case in MALFORMED]
    assert len(ids) == len(set(ids))


def test_no_tensor_is_created_before_validation_finishes(tmp_path, monkeypatch):
    created = []
    real_make = serialize._make_tensor
    monkeypatch.setattr(serialize, "_make_tensor", lambda *args: created.append(args) or real_make(*args))
    header = {"a": f32_entry(0, 4), "b": f32_entry(4, 8)}
    path = tmp_path / "bad.safetensors"
    path.write_bytes(raw(header, b"\0" * 9))  # one trailing byte
    expect_error(path, "trailing")
    assert created == []
    path.write_bytes(raw(header, b"\0" * 8))  # and the patch does see tensors being made
    webgrad.load(path)
    assert len(created) == 2


@pytest.mark.parametrize("shape", [[0], [0, 5], [3, 0, 2**20], [0] * 32, [1] * 32])
def test_edge_shapes_that_are_fine_load(tmp_path, shape):
    numel = int(np.prod(shape))
    path = tmp_path / "edge.safetensors"
    path.write_bytes(raw({"w": f32_entry(0, 4 * numel, shape=shape)}, b"\0" * (4 * numel)))
    loaded = webgrad.load(path)["w"]
    assert list(loaded.shape) == shape and loaded.numel() == numel
