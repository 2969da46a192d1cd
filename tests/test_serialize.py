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
    if isinstance(value, np.ndarray):
        return ("ndarray", value.dtype.str, value.shape, value.tolist())
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
    from webgrad import _safetensors

    imported = set()
    for module in (serialize, _safetensors):
        tree = ast.parse(open(module.__file__, encoding="utf-8").read())
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                imported.update(alias.name.split(".")[0] for alias in node.names)
            elif isinstance(node, ast.ImportFrom) and node.level == 0:
                imported.add(node.module.split(".")[0])
    assert imported <= {"__future__", "io", "json", "os", "platform", "re", "struct", "tempfile", "time",
                        "zlib", "numpy"}, imported


# ----------------------------------------------------------------------------- save errors

def test_save_rejects_unsupported_value_naming_the_key(tmp_path):
    with pytest.raises(TypeError, match=r"model\.layer"):
        webgrad.save({"model": {"layer": object()}}, tmp_path / "x.safetensors")
    with pytest.raises(TypeError, match="set"):
        webgrad.save({"tags": {"a", "b"}}, tmp_path / "x.safetensors")
    with pytest.raises(TypeError, match="'raw'.*complex128"):
        webgrad.save({"raw": np.zeros(3, dtype=complex)}, tmp_path / "x.safetensors")
    with pytest.raises(TypeError, match="'names'.*object"):
        webgrad.save({"names": np.array(["a", None])}, tmp_path / "x.safetensors")
    assert os.listdir(tmp_path) == []


def test_save_rejects_bad_keys(tmp_path):
    with pytest.raises(TypeError, match="key"):
        webgrad.save({(1, 2): webgrad.tensor([1.0])}, tmp_path / "x.safetensors")
    with pytest.raises(TypeError, match="key True"):
        webgrad.save({True: webgrad.tensor([1.0])}, tmp_path / "x.safetensors")


def test_save_refuses_an_optimizer_and_says_to_save_its_state_dict(tmp_path):
    # (A whole module is saved through its architecture record: tests/test_api_gaps.py.)
    model = webgrad.nn.Linear(2, 3)
    optimizer = webgrad.optim.SGD(model.parameters(), lr=0.1)
    for obj, where in [(optimizer, "the object"), ({"opt": [optimizer]}, "'opt.0'")]:
        with pytest.raises(TypeError) as info:
            webgrad.save(obj, tmp_path / "x.safetensors")
        message = str(info.value)
        assert where in message and "state_dict()" in message, message
    assert os.listdir(tmp_path) == []


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


# ----------------------------------------------------------------------------- odd but valid files

# Malformed files: tests/hostile/test_load_corpus.py.

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


# ----------------------------------------------------------------------------- any structure (torch.save-like)

def test_any_structure_round_trips_with_its_types(tmp_path):
    obj = {
        "tensor": webgrad.tensor([[1.5, -2.0]]),
        "tuple": (1, 2.5, ("nested", None), []),
        "list": [True, False, None, "", 0, -(2**70)],
        "floats": [float("inf"), -0.0, 1e-300],
        "int keys": {0: "a", 7: {"x": webgrad.tensor(3)}},
        "arrays": {name: np.arange(6).astype(name).reshape(2, 3) for name in
                   ["float16", "float32", "float64", "int8", "uint8", "int16", "uint16", "int32",
                    "uint32", "int64", "bool"]},
        "empty": {}, "empty_tuple": (),
        "numpy scalars": [np.float32(0.5), np.int64(-3), np.bool_(True)],
    }
    path = tmp_path / "anything.safetensors"
    webgrad.save(obj, path)
    loaded = webgrad.load(path)
    assert plain(loaded) == plain({**obj, "numpy scalars": [0.5, -3, True]})
    assert isinstance(loaded["tuple"], tuple) and isinstance(loaded["tuple"][2], tuple)
    assert type(loaded["numpy scalars"][2]) is bool
    for name, array in obj["arrays"].items():
        assert isinstance(loaded["arrays"][name], np.ndarray)
        assert loaded["arrays"][name].dtype == array.dtype
        np.testing.assert_array_equal(loaded["arrays"][name], array)
    assert np.isnan(serialize.load_bytes(serialize.save_bytes([float("nan")]))[0])


@pytest.mark.parametrize("obj", [webgrad.tensor([1.0, 2.0]), [webgrad.tensor(1)], (webgrad.ones(2), 3),
                                 5, "text", None, np.ones((2, 2), np.float32)])
def test_top_level_values_other_than_dicts(obj):
    assert plain(serialize.load_bytes(serialize.save_bytes(obj))) == plain(obj)


def test_save_to_and_load_from_file_objects(tmp_path):
    checkpoint = {"model": sample_state(), "iter_num": 5}
    buffer = io.BytesIO()
    webgrad.save(checkpoint, buffer)
    buffer.seek(0)
    assert plain(webgrad.load(buffer)) == plain(checkpoint)
    path = tmp_path / "ckpt.safetensors"
    with open(path, "wb") as file:
        webgrad.save(checkpoint, file)
    with open(path, "rb") as file:
        assert plain(webgrad.load(file, weights_only=True)) == plain(checkpoint)
    assert buffer.getvalue() == path.read_bytes()
    with open(path, encoding="latin-1") as text, pytest.raises(TypeError, match="text mode.*'rb'"):
        webgrad.load(text)
    with open(tmp_path / "t.txt", "w") as text, pytest.raises(TypeError, match="text mode.*'wb'"):
        webgrad.save(checkpoint, text)


def test_plain_state_dict_has_no_structure_record(tmp_path):
    path = tmp_path / "model.safetensors"
    webgrad.save(webgrad.nn.Linear(3, 2).state_dict(), path)
    (length,) = struct.unpack("<Q", path.read_bytes()[:8])
    assert "__metadata__" not in json.loads(path.read_bytes()[8:8 + length])


def test_weights_only_is_accepted_and_checked(tmp_path):
    path = tmp_path / "m.safetensors"
    webgrad.save({"w": webgrad.ones(2)}, path)
    for value in (True, False, None):
        assert list(webgrad.load(path, weights_only=value)) == ["w"]
    with pytest.raises(TypeError, match="weights_only"):
        webgrad.load(path, weights_only="yes")


# ----------------------------------------------------------------------------- map_location

def test_map_location_forms(tmp_path, device):
    path = tmp_path / "ckpt.safetensors"
    webgrad.save({"w": webgrad.tensor([1.0, 2.0]), "n": webgrad.tensor(4), "epoch": 2}, path)

    def devices(loaded):
        return {str(loaded["w"].device), str(loaded["n"].device)}

    assert devices(webgrad.load(path)) == {"cpu"}
    assert devices(webgrad.load(path, map_location=device)) == {device}
    if hasattr(webgrad, "device"):
        assert devices(webgrad.load(path, map_location=webgrad.device(device))) == {device}
    assert devices(webgrad.load(path, map_location={"cpu": device})) == {device}
    assert devices(webgrad.load(path, map_location={"cuda:0": device})) == {"cpu"}
    seen = []
    loaded = webgrad.load(path, map_location=lambda t, saved: seen.append(saved) or t.to(device))
    assert devices(loaded) == {device} and seen == ["cpu", "cpu"]
    assert devices(webgrad.load(path, map_location=lambda t, saved: None)) == {"cpu"}
    assert loaded["w"].tolist() == [1.0, 2.0] and loaded["epoch"] == 2
    with pytest.raises(TypeError, match="map_location returned int"):
        webgrad.load(path, map_location=lambda t, saved: 3)
    with pytest.raises(TypeError, match="map_location must be"):
        webgrad.load(path, map_location=3.5)


def test_saved_device_is_recorded_for_dict_map_location(device):
    blob = serialize.save_bytes({"w": webgrad.tensor([1.0], device=device)})
    assert str(webgrad.serialize.load_bytes(blob)["w"].device) == "cpu"
    moved = serialize.load_bytes(blob, map_location={device: "cpu", "cpu": device})
    assert str(moved["w"].device) == ("cpu" if device != "cpu" else device)


def test_map_location_to_a_device_without_the_dtype_converts_to_float32(device):
    blob = serialize.save_bytes({"d": webgrad.tensor([0.1], dtype=webgrad.float64),
                                 "h": webgrad.tensor([0.5]).half(), "b": webgrad.tensor([0.5]).bfloat16()})
    loaded = serialize.load_bytes(blob, map_location=device)
    expected = {"d": webgrad.float64 if device == "cpu" else webgrad.float32, "h": webgrad.float16,
                "b": webgrad.bfloat16}
    for name, tensor in loaded.items():
        assert str(tensor.device) == device
        assert tensor.dtype is expected[name], name
    assert abs(loaded["d"].item() - 0.1) < 1e-7


# ----------------------------------------------------------------------------- half and narrow dtypes

NARROW = {"float16": np.float16, "int8": np.int8, "uint8": np.uint8, "int16": np.int16,
          "uint16": np.uint16, "uint32": np.uint32}


@pytest.mark.parametrize("name", sorted(NARROW))
def test_narrow_safetensors_numpy_files_load(tmp_path, name):
    safetensors_numpy = need_module("safetensors.numpy")
    info = np.finfo if name == "float16" else np.iinfo
    array = np.array([[info(NARROW[name]).min, 0, 1], [info(NARROW[name]).max, 7, 3]], dtype=NARROW[name])
    path = tmp_path / f"{name}.safetensors"
    safetensors_numpy.save_file({"x": array}, str(path))
    loaded = webgrad.load(path)["x"]
    kept = {"float16": webgrad.float16, "int8": webgrad.int8, "uint8": webgrad.uint8, "int16": webgrad.int16}
    assert loaded.dtype is kept.get(name, webgrad.int64)  # uint16/uint32: no such dtype here, widened
    np.testing.assert_array_equal(loaded.numpy(), array)


def test_torch_half_bfloat16_and_int8_files_load(tmp_path, device):
    torch = need_module("torch")
    safetensors_torch = need_module("safetensors.torch")
    torch.manual_seed(0)
    state = {"h": torch.randn(3, 4).half(), "b": torch.randn(5).bfloat16(),
             "q": torch.randint(-128, 128, (6,), dtype=torch.int8),
             "u": torch.randint(0, 256, (2, 2), dtype=torch.uint8),
             "s": torch.randint(-(2**15), 2**15, (3,), dtype=torch.int16)}
    path = tmp_path / "hf.safetensors"
    safetensors_torch.save_file(state, str(path))
    loaded = webgrad.load(path, map_location=device)
    for name, expected in state.items():
        np.testing.assert_array_equal(loaded[name].float().cpu().numpy(), expected.float().numpy())
    if device == "cpu":
        assert loaded["h"].dtype is webgrad.float16 and loaded["b"].dtype is webgrad.bfloat16
    assert loaded["q"].dtype is webgrad.int8 and loaded["u"].dtype is webgrad.uint8


def test_half_tensors_saved_here_load_in_torch(tmp_path):
    torch = need_module("torch")
    safetensors_torch = need_module("safetensors.torch")
    values = webgrad.randn(4, 3)
    path = tmp_path / "half.safetensors"
    webgrad.save({"h": values.half(), "b": values.bfloat16()}, path)
    loaded = safetensors_torch.load_file(str(path))
    assert loaded["h"].dtype == torch.float16 and loaded["b"].dtype == torch.bfloat16
    reference = torch.from_numpy(values.numpy())
    assert torch.equal(loaded["h"], reference.half()) and torch.equal(loaded["b"], reference.bfloat16())
    again = webgrad.load(path)
    assert again["b"].dtype is webgrad.bfloat16
    np.testing.assert_array_equal(again["b"].numpy(), values.bfloat16().numpy())


# ----------------------------------------------------------------------------- checkpoint round trip

def _train(model, optimizer, steps, device, seed):
    rng = np.random.default_rng(seed)
    losses = []
    for _ in range(steps):
        x = webgrad.tensor(rng.standard_normal((8, 4)).astype(np.float32), device=device)
        y = webgrad.tensor(rng.integers(0, 3, 8), device=device)
        loss = webgrad.nn.functional.cross_entropy(model(x), y)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
    return losses


def _model_and_optimizer(device):
    nn = webgrad.nn
    model = nn.Sequential(nn.Linear(4, 16), nn.BatchNorm1d(16), nn.ReLU(), nn.Linear(16, 3)).to(device)
    optimizer = webgrad.optim.AdamW(model.parameters(), lr=1e-2, betas=(0.8, 0.95), weight_decay=0.1)
    return model, optimizer


def test_checkpoint_round_trip_continues_training_identically(tmp_path, device):
    webgrad.manual_seed(0)
    model, optimizer = _model_and_optimizer(device)
    first = _train(model, optimizer, 3, device, seed=1)
    path = tmp_path / "ckpt.safetensors"
    webgrad.save({"model": model.state_dict(), "optimizer": optimizer.state_dict(), "iter_num": 3,
                  "config": {"betas": (0.8, 0.95)}}, path)
    uninterrupted = _train(model, optimizer, 3, device, seed=2)

    webgrad.manual_seed(123)  # a different initialisation, all of it overwritten by the load
    fresh_model, fresh_optimizer = _model_and_optimizer(device)
    checkpoint = webgrad.load(path, map_location=device)
    assert checkpoint["iter_num"] == 3 and checkpoint["config"]["betas"] == (0.8, 0.95)
    fresh_model.load_state_dict(checkpoint["model"])
    fresh_optimizer.load_state_dict(checkpoint["optimizer"])
    resumed = _train(fresh_model, fresh_optimizer, 3, device, seed=2)
    assert len(first) == 3
    np.testing.assert_allclose(resumed, uninterrupted, rtol=1e-6, atol=1e-7)


def test_state_dict_of_a_model_on_any_device_reads_in_safetensors_torch(tmp_path, device):
    torch = need_module("torch")
    safetensors_torch = need_module("safetensors.torch")
    model = webgrad.nn.Sequential(webgrad.nn.Linear(3, 2), webgrad.nn.BatchNorm1d(2)).to(device)
    path = tmp_path / "model.safetensors"
    webgrad.save(model.state_dict(), path)
    loaded = safetensors_torch.load_file(str(path))
    assert sorted(loaded) == sorted(model.state_dict())
    reference = torch.nn.Sequential(torch.nn.Linear(3, 2), torch.nn.BatchNorm1d(2))
    reference.load_state_dict(loaded)  # torch takes it as its own
    for key, value in model.state_dict().items():
        np.testing.assert_array_equal(loaded[key].numpy(), value.cpu().numpy())


# ----------------------------------------------------------------------------- tensor count

def empty_tensors(count: int) -> bytes:
    return raw({f"t{i}": {"dtype": "F32", "shape": [0], "data_offsets": [0, 0]} for i in range(count)})


def test_tensor_count_is_bounded_by_the_keyword_and_the_environment(tmp_path, monkeypatch):
    monkeypatch.delenv("WEBGRAD_MAX_TENSORS", raising=False)
    path = tmp_path / "five.safetensors"
    path.write_bytes(empty_tensors(5))
    assert len(webgrad.load(path)) == 5 and len(webgrad.load(path, max_tensors=5)) == 5
    with pytest.raises(ValueError) as info:
        webgrad.load(path, max_tensors=4)
    message = str(info.value)
    assert message.startswith(f"load: {path}: header describes more than 4 tensors"), message
    assert "max_tensors=" in message and "WEBGRAD_MAX_TENSORS" in message
    with pytest.raises(ValueError, match="load: <bytes>: header describes more than 0 tensors"):
        serialize.load_bytes(path.read_bytes(), max_tensors=0)
    monkeypatch.setenv("WEBGRAD_MAX_TENSORS", "4")
    expect_error(path, "more than 4 tensors")
    assert len(webgrad.load(path, max_tensors=5)) == 5  # the keyword wins over the environment
    monkeypatch.setenv("WEBGRAD_MAX_TENSORS", "5")
    assert len(webgrad.load(path)) == 5
    monkeypatch.setenv("WEBGRAD_MAX_TENSORS", "lots")
    with pytest.raises(ValueError, match="WEBGRAD_MAX_TENSORS='lots' must be a whole number"):
        webgrad.load(path)


@pytest.mark.parametrize("value, error", [("3", TypeError), (2.0, TypeError), (True, TypeError), (-1, ValueError)])
def test_max_tensors_must_be_a_count(tmp_path, value, error):
    with pytest.raises(error, match="max_tensors"):
        serialize.load_bytes(empty_tensors(1), max_tensors=value)


def test_metadata_and_nesting_do_not_count_as_tensors(tmp_path):
    path = tmp_path / "nested.safetensors"
    webgrad.save({"model": {"w": webgrad.ones(2)}, "step": webgrad.tensor(3), "epoch": 7}, path, metadata={"a": "b"})
    loaded = webgrad.load(path, max_tensors=2)
    assert loaded["epoch"] == 7 and loaded["model"]["w"].tolist() == [1.0, 1.0]
    with pytest.raises(ValueError, match="more than 1 tensors"):
        webgrad.load(path, max_tensors=1)


def test_refusing_very_many_tensors_is_cheap(tmp_path, monkeypatch):
    """A 3 MB file of 50,000 empty tensors once took seconds and ~15x its size in memory to
    load; refused at the default limit, it checks no entry and stays within a few copies of
    its text."""
    import tracemalloc

    from webgrad import _safetensors

    monkeypatch.delenv("WEBGRAD_MAX_TENSORS", raising=False)
    data = empty_tensors(50_000)
    checked = []
    real_check = _safetensors.check_entry
    monkeypatch.setattr(_safetensors, "check_entry", lambda *args: checked.append(args) or real_check(*args))
    tracemalloc.start()
    try:
        with pytest.raises(ValueError, match="more than 10000 tensors"):
            serialize.load_bytes(data, "many.safetensors")
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert checked == []
    assert peak < 10 * len(data), peak / len(data)
