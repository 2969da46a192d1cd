"""webgrad.save / webgrad.load: safetensors round trips, interop, validation, atomicity."""
from __future__ import annotations

import ast
import io
import json
import os
import pickle
import struct
import zipfile

import numpy as np
import pytest

import webgrad
from webgrad import serialize
from conftest import need_module

# ----------------------------------------------------------------------------- helpers

SAMPLE_ARRAYS = {
    "fc.weight": np.arange(6, dtype=np.float32).reshape(2, 3) / 7,
    "fc.bias": np.array([0.5, -1.25, 3e-8, np.inf], dtype=np.float64),
    "counts": np.array([[1, -2], [2**31 - 1, -(2**31)]], dtype=np.int32),
    "step": np.array(2**40 + 3, dtype=np.int64),  # 0-d
    "mask": np.array([True, False, True]),
    "empty": np.zeros((0, 3), dtype=np.float32),
    "empty_int": np.zeros((0,), dtype=np.int64),
}


def sample_state():
    return {name: webgrad.from_numpy(array.copy()) for name, array in SAMPLE_ARRAYS.items()}


def to_numpy(tensor) -> np.ndarray:
    return tensor.detach().numpy()


def assert_tensor_equal(tensor, expected: np.ndarray):
    assert isinstance(tensor, webgrad.Tensor)
    actual = to_numpy(tensor)
    assert tuple(tensor.shape) == expected.shape
    assert tensor.dtype.np == expected.dtype
    np.testing.assert_array_equal(actual, expected)


def plain(value):
    """A structure with every tensor replaced by (dtype name, shape, values)."""
    if isinstance(value, webgrad.Tensor):
        return ("tensor", value.dtype.name, tuple(value.shape), to_numpy(value).tolist())
    if isinstance(value, dict):
        return {key: plain(child) for key, child in value.items()}
    if isinstance(value, (list, tuple)):
        return type(value)(plain(child) for child in value)
    return value


def raw(header, data: bytes = b"") -> bytes:
    """The bytes of a safetensors-like file from a header (dict or raw bytes) and data."""
    header_bytes = header if isinstance(header, bytes) else json.dumps(header).encode()
    return struct.pack("<Q", len(header_bytes)) + header_bytes + data


def expect_error(path, *fragments):
    with pytest.raises(ValueError) as info:
        webgrad.load(path)
    message = str(info.value)
    assert str(path) in message
    for fragment in fragments:
        assert fragment in message, f"{fragment!r} not in {message!r}"
    return message


def f32_entry(begin, end, shape=None):
    shape = [(end - begin) // 4] if shape is None else shape
    return {"dtype": "F32", "shape": shape, "data_offsets": [begin, end]}


# ----------------------------------------------------------------------------- round trips

def test_flat_round_trip_keeps_dtypes_values_and_order(tmp_path):
    path = tmp_path / "model.safetensors"
    webgrad.save(sample_state(), path)
    loaded = webgrad.load(path)
    assert list(loaded) == list(SAMPLE_ARRAYS)
    for name, expected in SAMPLE_ARRAYS.items():
        assert_tensor_equal(loaded[name], expected)
        assert str(loaded[name].device) == "cpu"


def test_loaded_tensors_are_writable_copies(tmp_path):
    path = tmp_path / "model.safetensors"
    webgrad.save(sample_state(), path)
    array = to_numpy(webgrad.load(path)["fc.weight"])
    assert array.flags.writeable
    array[0, 0] = 42.0  # must not fail or touch anything shared


def test_nested_checkpoint_round_trip(tmp_path):
    checkpoint = {
        "model": {"fc.weight": webgrad.from_numpy(SAMPLE_ARRAYS["fc.weight"].copy()),
                  "fc.bias": webgrad.from_numpy(SAMPLE_ARRAYS["fc.bias"].copy())},
        "optimizer": {
            "state": {0: {"step": webgrad.from_numpy(np.array(3, dtype=np.int64)),
                          "exp_avg": webgrad.from_numpy(np.ones((2, 3), np.float32))}},
            "param_groups": [{"lr": 1e-3, "betas": (0.9, 0.999), "params": [0, 1],
                              "amsgrad": False, "name": None}],
        },
        "epoch": 7,
        "history": [[0.5, 0.25], []],
        "note": "héllo",
        "tensors_in_a_list": [webgrad.from_numpy(np.array([True, False]))],
    }
    path = tmp_path / "checkpoint.safetensors"
    webgrad.save(checkpoint, path)
    assert plain(webgrad.load(path)) == plain(checkpoint)


def test_nested_file_is_readable_as_flat_safetensors(tmp_path):
    safetensors_numpy = need_module("safetensors.numpy")
    path = tmp_path / "checkpoint.safetensors"
    webgrad.save({"model": {"fc.weight": webgrad.from_numpy(np.ones(2, np.float32))},
                  "epoch": 1}, path)
    flat = safetensors_numpy.load_file(str(path))
    assert list(flat) == ["model.fc.weight"]


def test_save_bytes_and_load_bytes_round_trip():
    blob = serialize.save_bytes(sample_state())
    loaded = serialize.load_bytes(blob)
    for name, expected in SAMPLE_ARRAYS.items():
        assert_tensor_equal(loaded[name], expected)


def test_header_and_tensors_are_aligned(tmp_path):
    path = tmp_path / "model.safetensors"
    webgrad.save(sample_state(), path)
    raw = path.read_bytes()
    (header_length,) = struct.unpack("<Q", raw[:8])
    assert header_length % 8 == 0
    header = json.loads(raw[8:8 + header_length])
    for name, entry in header.items():
        itemsize = webgrad.from_numpy(SAMPLE_ARRAYS[name]).dtype.itemsize
        assert entry["data_offsets"][0] % itemsize == 0, name


def test_tensor_that_requires_grad_is_saved(tmp_path):
    weight = webgrad.tensor([[1.0, 2.0]], requires_grad=True)
    path = tmp_path / "grad.safetensors"
    webgrad.save({"weight": weight}, path)
    assert_tensor_equal(webgrad.load(path)["weight"], np.array([[1.0, 2.0]], np.float32))


def test_non_contiguous_tensor_round_trip(tmp_path):
    transposed = webgrad.from_numpy(np.arange(6, dtype=np.float32).reshape(2, 3)).transpose(0, 1)
    path = tmp_path / "t.safetensors"
    webgrad.save({"t": transposed}, path)
    assert_tensor_equal(webgrad.load(path)["t"], np.arange(6, dtype=np.float32).reshape(2, 3).T)


def test_tensor_on_another_device_is_moved_to_cpu(tmp_path, monkeypatch):
    tensor = webgrad.tensor([1.0, 2.0])
    expected = to_numpy(tensor).copy()
    tensor.device = "webgpu"  # pretend; only .to("cpu") may touch it now
    moves = []

    def fake_to(self, *args, **kwargs):
        moves.append((args, kwargs))
        return webgrad.from_numpy(expected.copy())

    monkeypatch.setattr(webgrad.Tensor, "to", fake_to)
    webgrad.save({"w": tensor}, tmp_path / "gpu.safetensors")
    monkeypatch.undo()
    assert moves == [(("cpu",), {})]
    assert_tensor_equal(webgrad.load(tmp_path / "gpu.safetensors")["w"], expected)


def test_save_through_symlink_replaces_the_target(tmp_path):
    real = tmp_path / "real.safetensors"
    link = tmp_path / "link.safetensors"
    webgrad.save({"old": webgrad.tensor([1.0])}, real)
    link.symlink_to(real)
    webgrad.save({"new": webgrad.tensor([2.0])}, link)
    assert link.is_symlink()
    assert list(webgrad.load(real)) == ["new"]


def test_save_into_missing_directory(tmp_path):
    with pytest.raises(FileNotFoundError, match="does not exist"):
        webgrad.save({"w": webgrad.tensor([1.0])}, tmp_path / "missing" / "x.safetensors")


def test_metadata_argument_is_written(tmp_path):
    path = tmp_path / "model.safetensors"
    webgrad.save({"w": webgrad.tensor([1.0])}, path, metadata={"format": "pt"})
    (length,) = struct.unpack("<Q", path.read_bytes()[:8])
    header = json.loads(path.read_bytes()[8:8 + length])
    assert header["__metadata__"] == {"format": "pt"}
    assert list(webgrad.load(path)) == ["w"]


def test_empty_state_dict_round_trip(tmp_path):
    path = tmp_path / "empty.safetensors"
    webgrad.save({}, path)
    assert webgrad.load(path) == {}


def test_serialize_imports_only_numpy_and_stdlib():
    """It must run in Pyodide: no torch, no safetensors, no pickle."""
    tree = ast.parse(open(serialize.__file__, encoding="utf-8").read())
    imported = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            imported.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0:
            imported.add(node.module.split(".")[0])
    assert imported <= {"__future__", "json", "os", "struct", "tempfile", "numpy"}, imported


# ----------------------------------------------------------------------------- save errors

def test_save_rejects_unsupported_value_naming_the_key(tmp_path):
    with pytest.raises(TypeError, match=r"model\.layer"):
        webgrad.save({"model": {"layer": object()}}, tmp_path / "x.safetensors")
    with pytest.raises(TypeError, match="set"):
        webgrad.save({"tags": {"a", "b"}}, tmp_path / "x.safetensors")
    with pytest.raises(TypeError, match="ndarray"):
        webgrad.save({"raw": np.zeros(3)}, tmp_path / "x.safetensors")
    assert os.listdir(tmp_path) == []


def test_save_rejects_non_dict_and_bad_keys(tmp_path):
    with pytest.raises(TypeError, match="dict"):
        webgrad.save([webgrad.tensor([1.0])], tmp_path / "x.safetensors")
    with pytest.raises(TypeError, match="key"):
        webgrad.save({(1, 2): webgrad.tensor([1.0])}, tmp_path / "x.safetensors")


def test_save_rejects_names_that_collide_after_flattening(tmp_path):
    clash = {"a.b": webgrad.tensor([1.0]), "a": {"b": webgrad.tensor([2.0])}}
    with pytest.raises(ValueError, match="'a.b'"):
        webgrad.save(clash, tmp_path / "x.safetensors")


# ----------------------------------------------------------------------------- interop

def test_our_file_loads_in_safetensors_numpy(tmp_path):
    safetensors_numpy = need_module("safetensors.numpy")
    path = tmp_path / "model.safetensors"
    webgrad.save(sample_state(), path)
    loaded = safetensors_numpy.load_file(str(path))
    assert set(loaded) == set(SAMPLE_ARRAYS)
    for name, expected in SAMPLE_ARRAYS.items():
        assert loaded[name].dtype == expected.dtype
        np.testing.assert_array_equal(loaded[name], expected)


def test_safetensors_numpy_file_loads_here(tmp_path):
    safetensors_numpy = need_module("safetensors.numpy")
    path = tmp_path / "numpy.safetensors"
    safetensors_numpy.save_file(dict(SAMPLE_ARRAYS), str(path))
    loaded = webgrad.load(path)
    assert set(loaded) == set(SAMPLE_ARRAYS)
    for name, expected in SAMPLE_ARRAYS.items():
        assert_tensor_equal(loaded[name], expected)


def test_our_file_loads_in_safetensors_torch(tmp_path):
    torch = need_module("torch")
    safetensors_torch = need_module("safetensors.torch")
    path = tmp_path / "model.safetensors"
    webgrad.save(sample_state(), path)
    loaded = safetensors_torch.load_file(str(path))
    assert set(loaded) == set(SAMPLE_ARRAYS)
    for name, expected in SAMPLE_ARRAYS.items():
        assert loaded[name].dtype == torch.from_numpy(expected).dtype
        np.testing.assert_array_equal(loaded[name].numpy(), expected)


def test_safetensors_torch_file_loads_here(tmp_path):
    torch = need_module("torch")
    safetensors_torch = need_module("safetensors.torch")
    model = torch.nn.Sequential(torch.nn.Linear(4, 3), torch.nn.ReLU(), torch.nn.Linear(3, 2))
    state = {k: v.detach() for k, v in model.state_dict().items()}
    state["flags"] = torch.tensor([True, False])
    state["step"] = torch.tensor(5)
    path = tmp_path / "torch.safetensors"
    safetensors_torch.save_file(state, str(path), metadata={"format": "pt"})
    loaded = webgrad.load(path)
    assert set(loaded) == set(state)
    for name, expected in state.items():
        assert_tensor_equal(loaded[name], expected.numpy())


# ----------------------------------------------------------------------------- malformed files

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


def with_tree(tree: str) -> bytes:
    return raw({"__metadata__": {"webgrad": tree}, "w": f32_entry(0, 4)}, b"\0" * 4)


def tree_json(node) -> str:
    return json.dumps({"version": 1, "tree": node})


_W = json.dumps(f32_entry(0, 4))

# (test id, file bytes (a function, so building runs inside the test), message fragments)
MALFORMED = [
    ("shorter-than-8-bytes", lambda: b"\x01\x02\x03", ["shorter than the 8-byte header length"]),
    ("header-length-bigger-than-file", lambda: struct.pack("<Q", 1000) + b"{}",
     ["header length 1000", "bigger than the file"]),
    ("header-length-over-limit", lambda: struct.pack("<Q", 200 * 1024 * 1024) + b"{}",
     ["header length", "limit"]),
    ("header-not-utf8", lambda: raw(b'{"\xff\xfe": 1}'), ["header", "UTF-8"]),
    ("header-not-json", lambda: raw(b'{"w": {"dtype": '), ["header", "not valid JSON"]),
    ("header-nested-too-deeply", lambda: raw(b"[" * 100_000 + b"]" * 100_000),
     ["header", "not valid JSON"]),
    ("header-not-an-object", lambda: raw(b"[1, 2, 3]"), ["header must be a JSON object", "list"]),
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
    *[(f"unknown-dtype-{dtype!r}", lambda dtype=dtype: with_entry(dtype=dtype, shape=[2]),
       ["tensor 'w'", f"unsupported dtype {dtype!r}", "F32"])
      for dtype in ["F16", "BF16", "U8", "float32", ""]],
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
    ("truncated-data", lambda: serialize.save_bytes(sample_state())[:-2], ["past the end", "truncated"]),
    ("trailing-bytes", lambda: serialize.save_bytes(sample_state()) + b"\0\0\0",
     ["3 trailing bytes", "tensor 'mask'"]),
    ("trailing-bytes-without-tensors", lambda: raw({}, b"\0"), ["1 trailing bytes"]),
    *[(f"bad-metadata-{metadata!r}", lambda metadata=metadata: raw(
        {"__metadata__": metadata, "w": f32_entry(0, 4)}, b"\0" * 4), ["'__metadata__'", fragment])
      for metadata, fragment in [({"format": 1}, "'format'"), ({"format": None}, "'format'"),
                                 (["pt"], "list"), ("pt", "str")]],
    ("tree-not-json", lambda: with_tree("not json"), ["'webgrad'", "not valid JSON"]),
    ("tree-newer-version", lambda: with_tree(json.dumps({"version": 99, "tree": {}})),
     ["'webgrad'", "newer webgrad"]),
    ("tree-names-missing-tensor", lambda: with_tree(tree_json({"dict": [["w", {"tensor": "nope"}]]})),
     ["'webgrad'", "'nope'"]),
    ("tree-misses-a-tensor", lambda: with_tree(tree_json({"dict": []})),
     ["'webgrad'", "does not place tensor 'w'"]),
    ("tree-uses-tensor-twice", lambda: with_tree(tree_json(
        {"dict": [["w", {"tensor": "w"}], ["v", {"tensor": "w"}]]})), ["'webgrad'", "twice"]),
    ("tree-unknown-node", lambda: with_tree(tree_json({"pickle": 1})), ["'webgrad'", "unknown node kind"]),
]


@pytest.mark.parametrize("make_bytes, fragments", [case[1:] for case in MALFORMED],
                         ids=[case[0] for case in MALFORMED])
def test_malformed_file_is_refused(tmp_path, make_bytes, fragments):
    path = tmp_path / "bad.safetensors"
    path.write_bytes(make_bytes())
    expect_error(path, *fragments)


def test_no_tensor_is_created_before_validation_finishes(tmp_path, monkeypatch):
    created = []
    real_from_numpy = webgrad.from_numpy
    monkeypatch.setattr(webgrad, "from_numpy", lambda a: created.append(a) or real_from_numpy(a))
    header = {"a": f32_entry(0, 4), "b": f32_entry(4, 8)}
    path = tmp_path / "bad.safetensors"
    path.write_bytes(raw(header, b"\0" * 9))  # one trailing byte
    expect_error(path, "trailing")
    assert created == []


def test_header_padded_to_pickle_like_length_is_not_mistaken(tmp_path):
    """A header of 640 bytes starts the file with b'\\x80\\x02', like a pickle."""
    header = json.dumps({"w": f32_entry(0, 4)}).encode()
    header += b" " * (0x0280 - len(header))
    path = tmp_path / "padded.safetensors"
    path.write_bytes(raw(header, b"\0" * 4))
    assert path.read_bytes()[:2] == b"\x80\x02"
    assert_tensor_equal(webgrad.load(path)["w"], np.zeros(1, np.float32))


# ----------------------------------------------------------------------------- pickles

def expect_pickle_refused(path):
    target = str(path.with_suffix(".safetensors"))
    return expect_error(path, "PyTorch pickle checkpoint",
                        f"save_file(torch.load({str(path)!r}, weights_only=True), {target!r})")


class _Trap:
    """Unpickling this would create a file; proves load never unpickles."""

    def __init__(self, marker):
        self.marker = marker

    def __reduce__(self):
        return (open, (self.marker, "w"))


@pytest.mark.parametrize("protocol", [2, 3, 4, 5])
def test_hand_made_pickle_is_refused_and_not_unpickled(tmp_path, protocol):
    marker = tmp_path / "unpickled.txt"
    path = tmp_path / "model.pt"
    path.write_bytes(pickle.dumps({"weight": _Trap(str(marker))}, protocol=protocol))
    expect_pickle_refused(path)
    assert not marker.exists()


def test_hand_made_zip_checkpoint_is_refused(tmp_path):
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        archive.writestr("archive/data.pkl", pickle.dumps({"weight": 1}, protocol=2))
    path = tmp_path / "model.pt"
    path.write_bytes(buffer.getvalue())
    expect_pickle_refused(path)


def test_hand_made_legacy_torch_file_is_refused(tmp_path):
    magic = pickle.dumps(0x1950A86A20F9469CFC6C, protocol=2)
    path = tmp_path / "legacy.pt"
    path.write_bytes(magic + pickle.dumps(1001, protocol=2))
    assert "legacy" in expect_pickle_refused(path)


@pytest.mark.parametrize("zip_format", [True, False])
def test_torch_save_checkpoint_is_refused(tmp_path, zip_format):
    torch = need_module("torch")
    path = tmp_path / "model.pt"
    torch.save({"weight": torch.ones(2)}, path, _use_new_zipfile_serialization=zip_format)
    expect_pickle_refused(path)


# ----------------------------------------------------------------------------- atomic save

def _fail(*args, **kwargs):
    raise OSError("simulated disk failure")


class _FailingFile(io.FileIO):
    """Writes the first chunk, then fails, like a disk filling up mid-write."""

    def write(self, data):
        if self.tell() > 0:
            raise OSError("simulated disk full")
        return super().write(data)


@pytest.mark.parametrize("failure", ["write", "fsync", "replace"])
def test_failed_save_leaves_old_file_untouched(tmp_path, monkeypatch, failure):
    path = tmp_path / "model.safetensors"
    webgrad.save({"old": webgrad.tensor([1.0, 2.0])}, path)
    before = path.read_bytes()
    if failure == "write":
        monkeypatch.setattr(os, "fdopen", lambda fd, mode: _FailingFile(fd, "wb"))
    else:
        monkeypatch.setattr(os, failure, _fail)
    with pytest.raises(OSError, match="simulated"):
        webgrad.save(sample_state(), path)
    monkeypatch.undo()
    assert path.read_bytes() == before
    assert os.listdir(tmp_path) == ["model.safetensors"]


def test_failed_first_save_leaves_nothing(tmp_path, monkeypatch):
    monkeypatch.setattr(os, "replace", _fail)
    with pytest.raises(OSError):
        webgrad.save(sample_state(), tmp_path / "model.safetensors")
    monkeypatch.undo()
    assert os.listdir(tmp_path) == []


def test_type_error_leaves_old_file_untouched(tmp_path):
    path = tmp_path / "model.safetensors"
    webgrad.save({"old": webgrad.tensor([1.0])}, path)
    before = path.read_bytes()
    with pytest.raises(TypeError):
        webgrad.save({"new": object()}, path)
    assert path.read_bytes() == before
    assert os.listdir(tmp_path) == ["model.safetensors"]


def test_saved_file_gets_normal_permissions(tmp_path):
    reference = tmp_path / "reference"
    reference.write_bytes(b"")
    path = tmp_path / "model.safetensors"
    webgrad.save({"w": webgrad.tensor([1.0])}, path)
    assert (path.stat().st_mode & 0o777) == (reference.stat().st_mode & 0o777)
