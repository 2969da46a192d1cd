"""webgrad.store against a real server on loopback: push, pull, list, delete, info,
architecture records (rebuild without the model's code), trust_code, and the errors."""
from __future__ import annotations

import json
import linecache
import sys
import warnings
from pathlib import Path

import numpy as np
import pytest

import webgrad
from webgrad import nn
from webgrad import store
from webgrad.nn import arch
from conftest import run_async

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # `server` is not installed

from conftest import assert_close, need_module, to_numpy  # noqa: E402

HIDDEN = 12  # used by the classes below: their recorded source must carry it along


def relu_twice(x):
    return nn.functional.relu(x) * 2


class Block(nn.Module):
    def __init__(self, width):
        super().__init__()
        self.fc = nn.Linear(width, width)

    def forward(self, x):
        return relu_twice(self.fc(x))


class Net(nn.Module):
    """A user-defined model: rebuilt from its recorded source only with trust_code=True."""

    def __init__(self, n_in, n_out=3):
        super().__init__()
        self.inp = nn.Linear(n_in, HIDDEN)
        self.block = Block(HIDDEN)
        self.out = nn.Linear(HIDDEN, n_out)

    def forward(self, x):
        return self.out(self.block(self.inp(x)))


@pytest.fixture(scope="module")
def base(tmp_path_factory):
    need_module("starlette")
    need_module("uvicorn")
    from server.app import Settings, create_app
    from server.testing import running_server

    settings = Settings(data_dir=tmp_path_factory.mktemp("store-data"))
    with running_server(create_app(settings)) as url:
        yield url


@pytest.fixture
def fresh(base):
    """The base URL with no models stored."""
    for record in store.list(url=base):
        store.delete(record["name"], url=base)
    return base


def predictions(model, x):
    with webgrad.no_grad():
        return to_numpy(model.eval()(x))


def test_push_pull_list_delete_round_trip(fresh, device):
    webgrad.manual_seed(1)
    model = nn.Sequential(nn.Linear(64, 32), nn.ReLU(), nn.Linear(32, 10)).to(device)
    labels = list("0123456789")
    info = store.push(model, "digits-mlp", {"labels": labels, "author": "test", "accuracy": np.float32(0.5),
                                            "confusion": webgrad.eye(2)}, url=fresh, input_size=(1, 64))
    assert info["name"] == "digits-mlp" and info["revision"] == 1
    assert info["input_shape"] == [1, 64] and info["output_shape"] == [1, 10]
    assert info["labels"] == labels
    assert info["metadata"] == {"labels": labels, "author": "test", "accuracy": 0.5, "confusion": [[1, 0], [0, 1]]}
    assert info["has_architecture"] and info["code"] == []
    assert info["url"] == f"{fresh}/api/models/digits-mlp"

    pulled = store.pull("digits-mlp", url=fresh, device=device)
    assert isinstance(pulled, nn.Sequential) and not pulled.training
    assert repr(pulled) == repr(model)
    x = webgrad.randn(5, 64, device=device)
    np.testing.assert_array_equal(predictions(pulled, x), predictions(model, x))
    assert all(p.device == model[0].weight.device for p in pulled.parameters())

    assert [r["name"] for r in store.list(url=fresh)] == ["digits-mlp"]
    assert store.info("digits-mlp", url=fresh)["output_shape"] == [1, 10]
    store.push(model, "digits-mlp", url=fresh)
    assert store.info("digits-mlp", url=fresh)["revision"] == 2
    store.delete("digits-mlp", url=fresh)
    assert store.list(url=fresh) == []


def test_cnn_and_transformer_rebuild_give_identical_predictions(fresh):
    cnn = nn.Sequential(nn.Conv2d(1, 4, 3, padding=1), nn.BatchNorm2d(4), nn.ReLU(), nn.MaxPool2d(2),
                        nn.Flatten(), nn.Dropout(0.2), nn.Linear(64, 10))
    cnn.train()
    cnn(webgrad.randn(8, 1, 8, 8))  # moves BatchNorm's running statistics: buffers must travel too
    info = store.push(cnn, "cnn", url=fresh, input_size=(1, 1, 8, 8))
    assert info["input_shape"] == [1, 1, 8, 8] and info["output_shape"] == [1, 10]
    assert cnn.training, "push must leave the model's training flag alone"
    x = webgrad.randn(3, 1, 8, 8)
    np.testing.assert_array_equal(predictions(store.pull("cnn", url=fresh), x), predictions(cnn, x))

    lm = nn.Sequential(nn.Embedding(20, 16),
                       nn.TransformerEncoder(nn.TransformerEncoderLayer(16, 2, 32, dropout=0.0, batch_first=True), 2),
                       nn.Linear(16, 20))
    tokens = webgrad.tensor([[1, 5, 7, 2]])
    info = store.push(lm, "lm", url=fresh, input_data=tokens)
    assert info["input_shape"] == [1, 4] and info["input_dtype"] == "int64" and info["output_shape"] == [1, 4, 20]
    assert_close(store.pull("lm", url=fresh)(tokens), predictions(lm, tokens), rtol=1e-6, atol=1e-6)


def test_float64_model_comes_back_float64(fresh):
    model = nn.Sequential(nn.Linear(3, 4), nn.Tanh(), nn.Linear(4, 1)).double()
    store.push(model, "double", url=fresh, input_data=webgrad.randn(1, 3, dtype=webgrad.float64),
               architecture=True)
    pulled = store.pull("double", url=fresh)
    assert {p.dtype for p in pulled.parameters()} == {webgrad.float64}
    x = webgrad.randn(2, 3, dtype=webgrad.float64)
    np.testing.assert_array_equal(predictions(pulled, x), predictions(model, x))
    assert store.info("double", url=fresh)["input_dtype"] == "float64"


def test_pull_by_model_url_and_weights_url(fresh):
    model = nn.Linear(3, 2)
    store.push(model, "by-url", url=fresh)
    x = webgrad.randn(4, 3)
    for given in (f"{fresh}/api/models/by-url", f"{fresh}/api/models/by-url/weights", f"{fresh}/api/models/by-url/"):
        np.testing.assert_array_equal(predictions(store.pull(given), x), predictions(model, x))
    assert store.info(f"{fresh}/api/models/by-url")["input_shape"] == [1, 3]  # guessed from the first Linear
    with pytest.raises(ValueError, match="not a model URL"):
        store.pull(f"{fresh}/models/by-url")


def test_state_dict_push_gives_a_state_dict_back(fresh):
    state = {"weight": webgrad.randn(4, 3), "bias": webgrad.zeros(4)}
    info = store.push(state, "weights-only", url=fresh, input_size=(1, 3))
    assert not info["has_architecture"] and info["input_shape"] == [1, 3]
    pulled = store.pull("weights-only", url=fresh)
    assert sorted(pulled) == ["bias", "weight"]
    assert_close(pulled["weight"], to_numpy(state["weight"]))
    model = nn.Sequential(nn.Linear(3, 3))
    store.push(model, "mod", url=fresh)
    assert sorted(store.pull("mod", url=fresh, weights_only=True)) == ["0.bias", "0.weight"]


def test_user_class_needs_trust_code(fresh):
    model = Net(5, n_out=2)
    info = store.push(model, "net", url=fresh, input_size=(2, 5))
    assert info["code"] == ["Block", "Net"] and info["output_shape"] == [2, 2]
    with pytest.raises(arch.ArchitectureError, match="trust_code=True") as caught:
        store.pull("net", url=fresh)
    assert "Net" in str(caught.value) and "weights_only=True" in str(caught.value)
    pulled = store.pull("net", url=fresh, trust_code=True)
    assert type(pulled).__name__ == "Net" and type(pulled) is not Net  # built from the stored source
    x = webgrad.randn(3, 5)
    np.testing.assert_array_equal(predictions(pulled, x), predictions(model, x))
    # A pulled model can be pushed again (its source is found in linecache) and pulled once more.
    store.push(pulled, "net-again", url=fresh)
    np.testing.assert_array_equal(predictions(store.pull("net-again", url=fresh, trust_code=True), x),
                                  predictions(model, x))


def test_class_defined_from_a_string_is_recorded_through_linecache(fresh):
    source = ("import webgrad\nclass Tiny(webgrad.nn.Module):\n    def __init__(self, k):\n"
              "        super().__init__()\n        self.lin = webgrad.nn.Linear(k, 1)\n"
              "    def forward(self, x):\n        return self.lin(x).tanh()\n")
    filename = "<playground-test>"
    namespace: dict = {"__name__": "__main__"}
    exec(compile(source, filename, "exec"), namespace)
    model = namespace["Tiny"](4)
    with pytest.warns(UserWarning, match="source of class Tiny is not available"):
        info = store.push(model, "tiny", url=fresh)
    assert not info["has_architecture"]  # the weights still went up
    with pytest.raises(arch.ArchitectureError, match="source of class Tiny"):
        store.push(model, "tiny", url=fresh, architecture=True)

    linecache.cache[filename] = (len(source), None, source.splitlines(True), filename)  # as the playground does
    try:
        assert store.push(model, "tiny", url=fresh, architecture=True)["code"] == ["Tiny"]
    finally:
        del linecache.cache[filename]
    x = webgrad.randn(2, 4)
    np.testing.assert_array_equal(predictions(store.pull("tiny", url=fresh, trust_code=True), x),
                                  predictions(model, x))


def test_class_from_an_earlier_playground_run(fresh):
    """The playground registers each run's code under one file name: a class defined in
    run 1 and pushed in run 2 keeps the source it was defined with."""
    filename = "<playground-runs>"
    first = ("import webgrad\nclass Earlier(webgrad.nn.Module):\n    def __init__(self):\n"
             "        super().__init__()\n        self.lin = webgrad.nn.Linear(3, 2)\n"
             "    def forward(self, x):\n        return self.lin(x) * 3\n")
    second = "class Earlier:\n    pass\nmodel = Earlier()\n"
    namespace: dict = {"__name__": "__main__"}
    try:
        for source in (first, second):
            linecache.cache[filename] = (len(source), None, source.splitlines(True), filename)
            if source is first:
                exec(compile(source, filename, "exec"), namespace)
                model = namespace["Earlier"]()
        assert store.push(model, "earlier", url=fresh, architecture=True)["code"] == ["Earlier"]
    finally:
        del linecache.cache[filename]
    x = webgrad.randn(2, 3)
    np.testing.assert_array_equal(predictions(store.pull("earlier", url=fresh, trust_code=True), x),
                                  predictions(model, x))


def test_changes_after_construction(fresh):
    grown = nn.Sequential(nn.Linear(4, 8))
    grown.append(nn.ReLU())
    grown.append(nn.Linear(8, 2))
    grown[1] = nn.Tanh()
    store.push(grown, "grown", url=fresh, architecture=True)  # containers are recorded by their children
    assert repr(store.pull("grown", url=fresh)) == repr(grown)

    swapped = Net(5)
    swapped.out = nn.Linear(HIDDEN, 7)  # not what Net(5) builds: the record would rebuild the wrong model
    with pytest.warns(UserWarning, match="pushing the weights only"):
        store.push(swapped, "swapped", url=fresh)
    assert isinstance(store.pull("swapped", url=fresh), dict)
    with pytest.raises(arch.ArchitectureError, match="changed after it was constructed"):
        store.push(swapped, "swapped", url=fresh, architecture=True)


def test_unrecordable_constructor_argument(fresh):
    class Scaled(nn.Module):
        def __init__(self, scale):
            super().__init__()
            self.scale = scale
            self.lin = nn.Linear(2, 2)

    with pytest.raises(arch.ArchitectureError, match="argument 0 of Scaled.*ndarray"):
        store.push(Scaled(np.ones(2)), "scaled", url=fresh, architecture=True)


def test_push_leaves_the_random_stream_alone(fresh):
    model = Net(5)
    webgrad.manual_seed(7)
    expected = to_numpy(webgrad.randn(3))
    webgrad.manual_seed(7)
    store.push(model, "rng", url=fresh, input_size=(1, 5))
    webgrad.summary(model, input_size=(1, 5))
    np.testing.assert_array_equal(to_numpy(webgrad.randn(3)), expected)


def test_default_url_from_environment(fresh, monkeypatch):
    store.push(nn.Linear(1, 1), "env", url=fresh)
    monkeypatch.setenv("WEBGRAD_STORE", fresh + "/")
    assert store.default_url() == fresh
    assert [r["name"] for r in store.list()] == ["env"]
    monkeypatch.delenv("WEBGRAD_STORE")
    assert store.default_url() == "http://127.0.0.1:8000"


def test_async_twins(fresh):
    model = nn.Linear(3, 2)

    async def scenario():
        await store.push_async(model, "async", url=fresh)
        names = [r["name"] for r in await store.list_async(fresh)]
        pulled = await store.pull_async("async", fresh)
        info = await store.info_async("async", fresh)
        await store.delete_async("async", fresh)
        return names, pulled, info

    names, pulled, info = run_async(scenario())
    assert names == ["async"] and info["name"] == "async" and repr(pulled) == repr(model)
    assert store.list(url=fresh) == []


# ----------------------------------------------------------------------------- what the input is

class TinyLM(nn.Module):
    """A language model whose position table limits how far it sees (like demos/char_lm.py's)."""

    def __init__(self, vocab, context=8, width=8):
        super().__init__()
        self.token = nn.Embedding(vocab, width)
        self.position = nn.Embedding(context, width)
        self.head = nn.Linear(width, vocab)

    def forward(self, tokens):
        return self.head(self.token(tokens) + self.position(webgrad.arange(tokens.shape[1])))


def test_recorded_input_kind_from_shape_dtype_and_hints(fresh):
    """The widget picks its UI from info["input"]: inferred from the input's shape and dtype,
    with the metadata hints, for each kind of model the demos push."""
    mlp = nn.Sequential(nn.Linear(64, 16), nn.ReLU(), nn.Linear(16, 10))
    info = store.push(mlp, "digits", {"labels": list("0123456789")}, url=fresh, input_size=(1, 64))
    assert info["input"] == {"kind": "image", "height": 8, "width": 8, "channels": 1}
    cnn = nn.Sequential(nn.Conv2d(1, 2, 3, padding=1), nn.Flatten(), nn.Linear(2 * 8 * 6, 3))
    info = store.push(cnn, "cnn", url=fresh, input_size=(1, 1, 8, 6))
    assert info["input"] == {"kind": "image", "height": 8, "width": 6, "channels": 1}
    plane = nn.Sequential(nn.Linear(2, 8), nn.Tanh(), nn.Linear(8, 2))
    info = store.push(plane, "plane", {"x_range": [-2, 2], "y_range": [-1.5, 1.5]}, url=fresh, input_size=(1, 2))
    assert info["input"] == {"kind": "points", "dims": 2, "x_range": [-2, 2], "y_range": [-1.5, 1.5]}
    curve = nn.Sequential(nn.Linear(1, 8), nn.Tanh(), nn.Linear(8, 1))
    info = store.push(curve, "curve", url=fresh, input_size=(1, 1))
    assert info["input"] == {"kind": "points", "dims": 1, "x_range": [-1.0, 1.0], "y_range": None}
    tabular = nn.Linear(5, 1)
    assert store.push(tabular, "tabular", url=fresh)["input"] == {"kind": "vector", "size": 5, "names": None}
    assert store.info("tabular", url=fresh)["input"]["kind"] == "vector"  # kept by the server, given by info()


def test_token_model_records_int64_input_and_its_vocabulary(fresh):
    chars = list("abcdefg")
    lm = TinyLM(len(chars), context=8)
    info = store.push(lm, "lm", {"labels": chars, "context": 8}, url=fresh, input_size=(1, 8),
                      dtypes=[webgrad.int64])
    assert info["input_dtype"] == "int64" and info["input_shape"] == [1, 8] and info["output_shape"] == [1, 8, 7]
    assert info["input"] == {"kind": "tokens", "vocab": chars, "vocab_size": 7, "context": 8}
    # Without input_size: an Embedding first means token ids; the vocabulary from metadata["vocab"].
    info = store.push(lm, "lm", {"vocab": chars}, url=fresh)
    assert info["input_dtype"] == "int64" and info["input_shape"] is None
    assert info["input"] == {"kind": "tokens", "vocab": chars, "vocab_size": 7, "context": None}
    # push_async takes dtypes too.
    info = run_async(store.push_async(lm, "lm", {"vocab": chars, "context": 8}, fresh, input_size=(1, 3),
                                      dtypes=[webgrad.int32]))
    assert info["input_dtype"] == "int32" and info["input"]["kind"] == "tokens"
    tokens = webgrad.tensor([[1, 2, 3]], dtype=webgrad.int32)
    assert_close(store.pull("lm", url=fresh, trust_code=True)(tokens), predictions(lm, tokens))


def test_metadata_input_overrides_the_guess(fresh):
    model = nn.Linear(2, 1)
    info = store.push(model, "m", {"input": {"kind": "vector", "names": ["height", "weight"]}}, url=fresh)
    assert info["input"] == {"kind": "vector", "size": 2, "names": ["height", "weight"]}
    info = store.push(model, "m", {"input": {"kind": "points", "x_range": [0, 10]}}, url=fresh)
    assert info["input"] == {"kind": "points", "dims": 2, "x_range": [0, 10], "y_range": [-1.0, 1.0]}
    with pytest.raises(ValueError, match=r"metadata\['input'\] must be a dict whose 'kind' is one of image"):
        store.push(model, "m", {"input": {"kind": "sound"}}, url=fresh)
    with pytest.raises(ValueError, match=r"\(points\): x_range and y_range must be \[low, high\]"):
        store.push(model, "m", {"input": {"kind": "points", "x_range": [1, 0]}}, url=fresh)
    with pytest.raises(ValueError, match=r"\(image\): height, width and channels must be positive ints"):
        store.push(model, "m", {"input": {"kind": "image", "height": 8}}, url=fresh)
    with pytest.raises(ValueError, match="1 input shapes but 2 dtypes"):
        store.push(model, "m", url=fresh, input_size=(1, 2), dtypes=[webgrad.int64, webgrad.int64])


def test_widget_python_half_takes_token_ids_and_generates(fresh):
    """What <webgrad-model> runs in the worker: int32 ids from the page reach a token model as
    its recorded dtype (an Embedding refuses floats), and generate() samples from the last
    position's logits within the recorded context."""
    from webgrad.web import widget

    chars = list("ab cd")
    lm = TinyLM(len(chars), context=4)
    store.push(lm, "lm", {"vocab": chars, "context": 4}, url=fresh, input_size=(1, 4), dtypes=[webgrad.int64])
    run_async(widget.load("lm", f"{fresh}/api/models/lm", True))
    try:
        ids = np.array([[0, 1, 2]], dtype="<i4")
        out = widget.predict("lm", ids.tobytes(), [1, 3], "int32")
        expected = predictions(lm, webgrad.tensor(ids.astype(np.int64)))
        assert out["shape"] == [1, 3, 5]
        got = np.asarray(out["outputs"], dtype="<f4").reshape(1, 3, 5)
        np.testing.assert_allclose(got, expected, rtol=1e-5, atol=1e-6)
        written = widget.generate("lm", "ab", 30, 0.9, seed=3)  # 32 tokens > context 4: the window slides
        assert len(written["text"]) == 30 and set(written["text"]) <= set(chars)
        assert written["text"] == "".join(chars[i] for i in written["tokens"])
        assert widget.generate("lm", "ab", 30, 0.9, seed=3) == written  # seeded: the same text again
        with pytest.raises(widget.WidgetError, match="temperature must be > 0"):
            widget.generate("lm", "ab", 5, 0)
        with pytest.raises(widget.WidgetError, match="values come as float32 or int32, not 'int8'"):
            widget.predict("lm", b"", [1, 0], "int8")
    finally:
        widget.dispose("lm")
    store.push(nn.Linear(3, 2), "linear", url=fresh)
    run_async(widget.load("linear", f"{fresh}/api/models/linear"))
    with pytest.raises(widget.WidgetError, match="this model's input is vector, not tokens"):
        widget.generate("linear", "ab", 5)
    widget.dispose("linear")


# ----------------------------------------------------------------------------- errors

def test_unreachable_server_names_the_url_and_the_fix():
    from server.testing import free_port

    url = f"http://127.0.0.1:{free_port()}"
    for call in (lambda: store.list(url=url), lambda: store.pull("x", url=url),
                 lambda: store.push(nn.Linear(1, 1), "x", url=url)):
        with pytest.raises(store.StoreConnectionError, match="make serve") as caught:
            call()
        assert url in str(caught.value) and "WEBGRAD_STORE" in str(caught.value)


def test_missing_model_is_named(fresh):
    for call in (store.pull, store.info, store.delete):
        with pytest.raises(store.ModelNotFoundError, match="no model named 'ghost'"):
            call("ghost", url=fresh)


def test_server_messages_pass_through(fresh):
    with pytest.raises(store.StoreError, match="HTTP 400.*invalid model name"):
        store.push(nn.Linear(1, 1), "bad name!", url=fresh)


def test_bad_arguments(fresh):
    with pytest.raises(ValueError, match="reserved"):
        store.push(nn.Linear(1, 1), "m", {"webgrad": 1}, url=fresh)
    with pytest.raises(TypeError, match="labels"):
        store.push(nn.Linear(1, 1), "m", {"labels": "0123"}, url=fresh)
    with pytest.raises(TypeError, match="nn.Module or a state dict"):
        store.push([1, 2], "m", url=fresh)
    with pytest.raises(TypeError, match="maps str to Tensor"):
        store.push({"w": np.ones(2)}, "m", url=fresh)
    with pytest.raises(TypeError, match="metadata must hold JSON values.*got a object"):
        store.push(nn.Linear(1, 1), "m", {"when": object()}, url=fresh)
    with pytest.raises(ValueError, match="NaN or infinity"):
        store.push(nn.Linear(1, 1), "m", {"loss": float("nan")}, url=fresh)
    with pytest.raises(ValueError, match="architecture must be"):
        store.push(nn.Linear(1, 1), "m", url=fresh, architecture="yes")
    with pytest.raises(TypeError, match="name must be"):
        store.pull("", url=fresh)
    assert store.list(url=fresh) == []  # nothing was written by a refused call


def upload(base, name, metadata):
    import httpx

    from server.testing import safetensors_bytes

    files = {"weights": ("m.safetensors", safetensors_bytes(), "application/octet-stream")}
    answer = httpx.put(f"{base}/api/models/{name}", files=files, data={"metadata": json.dumps(metadata)},
                       headers={"X-Webgrad-Client": "1"})
    assert answer.status_code in (200, 201), answer.text


@pytest.mark.parametrize("module, message", [
    ({"class": "os:system", "args": ["true"], "kwargs": {}}, "outside webgrad"),
    ({"class": "nn.Linear", "args": [{"function": "os.system"}], "kwargs": {}}, "outside webgrad"),
    ({"class": "nn.NoSuchLayer", "args": [], "kwargs": {}}, "unknown class"),
    ({"class": "webgrad.serialize:save"}, "outside webgrad's layers"),
    ({"class": "webgrad.nn.nowhere:Layer"}, "no module 'webgrad.nn.nowhere'"),
    ({"class": "webgrad.nn.parameter:Parameter", "args": [], "kwargs": {}}, "not an nn.Module"),
    ({"class": "nn.Linear", "args": [{"function": "webgrad.serialize.save"}], "kwargs": {}}, "outside webgrad's ops"),
    ({"class": "nn.Linear", "args": [{"function": "webgrad.nn.functional.nothing"}], "kwargs": {}}, "unknown function"),
    ({"class": "nn.Linear", "args": [{"tuple": [1], "dict": {}}], "kwargs": {}}, "malformed"),
    ({"class": "nn.Linear", "args": [1], "kwargs": {}}, "constructing Linear failed"),
    ({"class": "nn.Linear"}, "weights"),  # builds, but the stored weights do not fit
    ({"clas": "nn.Linear"}, "malformed"),
    ("not a node", "malformed"),
])
def test_malformed_or_hostile_architecture_is_refused(fresh, module, message):
    record = {"format": arch.FORMAT, "version": arch.VERSION, "module": module, "code": [], "imports": {}}
    upload(fresh, "hostile", {"webgrad": {"version": 1, "architecture": record}})
    with pytest.raises((arch.ArchitectureError, RuntimeError), match=message):
        store.pull("hostile", url=fresh)


def test_models_uploaded_by_other_tools(fresh):
    for metadata in ({}, {"webgrad": 5}, {"webgrad": {"architecture": None}}):
        upload(fresh, "foreign", metadata)
        info = store.info("foreign", url=fresh)
        assert not info["has_architecture"] and info["input_shape"] is None
        assert sorted(store.pull("foreign", url=fresh)) == ["bias", "weight"]


def test_architecture_record_is_json_and_versioned():
    record = arch.public(arch.describe(nn.Sequential(nn.Conv2d(1, 2, (3, 3)), nn.GELU(approximate="tanh"))))
    text = json.dumps(record)
    assert json.loads(text)["module"]["children"][0][1] == {"class": "nn.Conv2d", "args": [1, 2, {"tuple": [3, 3]}],
                                                            "kwargs": {}}
    with pytest.raises(arch.ArchitectureError, match="version 99"):
        arch.build({**record, "version": 99})
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert repr(arch.build(json.loads(text))) == repr(arch.build(record))


LAYERS = [
    lambda: nn.LSTM(3, 4, num_layers=2, bidirectional=True, batch_first=True, proj_size=2),
    lambda: nn.GRU(3, 4, dropout=0.1, num_layers=2),
    lambda: nn.RNN(3, 4, nonlinearity="relu", bias=False),
    lambda: nn.LSTMCell(3, 4),
    lambda: nn.Transformer(d_model=16, nhead=2, num_encoder_layers=1, num_decoder_layers=1, dim_feedforward=32),
    lambda: nn.TransformerEncoder(nn.TransformerEncoderLayer(16, 2, 32, activation=nn.functional.gelu,
                                                             norm_first=True), 2, norm=nn.LayerNorm(16)),
    lambda: nn.Embedding(10, 4, padding_idx=0),
    lambda: nn.Sequential(nn.BatchNorm1d(3, momentum=None), nn.LayerNorm((3,), eps=1e-3), nn.GELU("tanh"),
                          nn.Softmax(dim=-1), nn.Unflatten(1, (3, 1)), nn.Dropout2d(0.3)),
    lambda: nn.Sequential(nn.AvgPool2d(2), nn.AdaptiveAvgPool2d((1, 1)), nn.Conv1d(2, 2, 3, dilation=2, groups=2)),
    lambda: nn.ModuleDict({"encoder": nn.ModuleList([nn.Linear(2, 2), nn.ReLU()]), "head": nn.Identity(7)}),
    lambda: nn.Linear(2, 3, dtype=webgrad.float64),
]


@pytest.mark.parametrize("build", LAYERS)
def test_builtin_layers_rebuild_from_their_record(build):
    model = build()
    record = json.loads(json.dumps(arch.describe_checked(model)))
    rebuilt = arch.build(record)
    assert repr(rebuilt) == repr(model)
    assert {k: (tuple(v.shape), v.dtype) for k, v in rebuilt.state_dict().items()} == \
        {k: (tuple(v.shape), v.dtype) for k, v in model.state_dict().items()}


def test_push_says_what_it_replaced_and_overwrite_false_refuses(fresh, capsys):
    model = nn.Sequential(nn.Linear(4, 2))
    first = store.push(model, "kept", url=fresh)
    assert first["replaced"] is None and capsys.readouterr().err == ""

    second = store.push(model, "kept", url=fresh)
    assert second["revision"] == 2 and second["replaced"]["revision"] == 1
    assert "replaced 'kept' revision 1" in capsys.readouterr().err

    with pytest.raises(store.StoreError, match=r"already has a model named 'kept' \(revision 2.*overwrite=True"):
        store.push(nn.Sequential(nn.Linear(4, 3)), "kept", url=fresh, overwrite=False)
    assert store.info("kept", url=fresh)["revision"] == 2  # nothing changed
    assert store.push(model, "new-one", url=fresh, overwrite=False)["replaced"] is None


# ----------------------------------------------------------------------------- the web bundle

def fetch(url: str) -> bytes:
    import urllib.request

    with urllib.request.urlopen(url, timeout=60) as answer:
        return answer.read()


class CumulativeNet(nn.Module):
    """A model with an op the web bundle does not lower (cumsum): it runs in Python only."""

    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 3)

    def forward(self, x):
        return self.fc(x.cumsum(dim=1))


def test_push_writes_the_web_bundle_and_the_server_serves_it(fresh, device, tmp_path):
    webgrad.manual_seed(3)
    model = nn.Sequential(nn.Linear(64, 16), nn.ReLU(), nn.Linear(16, 10)).to(device)
    labels = list("0123456789")
    info = store.push(model, "bundled", {"labels": labels, "accuracy": np.float32(0.25)}, url=fresh,
                      input_size=(1, 64))
    lite = info["lite"]
    assert info["lite_reason"] is None and lite["url"] == "/api/models/bundled/lite/"
    assert {"model.json", "weights.safetensors", "kernels/0.wgsl"} <= set(lite["files"])
    assert lite["bytes"] == sum(lite["files"].values())
    # Served as pushed: the same files webgrad.export writes for the model (dynamic batch, the labels).
    local = webgrad.export(model, (webgrad.zeros(1, 64, device=device),), tmp_path / "local", labels=labels)
    assert set(local.files) == set(lite["files"])
    served = {path: fetch(f"{fresh}/api/models/bundled/lite/{path}") for path in lite["files"]}
    meta = json.loads(served["model.json"])
    assert meta["labels"] == labels and meta["batch"] == {"input": 0, "dim": 0}
    assert meta["metadata"]["accuracy"] == 0.25 and meta["metadata"]["webgrad"]["input"]["kind"] == "image"
    assert "architecture" not in meta["metadata"]["webgrad"]  # no code runs from a bundle
    assert served["weights.safetensors"] == (tmp_path / "local" / "weights.safetensors").read_bytes()
    for path in local.files:
        if path != "model.json":
            assert served[path] == (tmp_path / "local" / path).read_bytes(), path
    # Listed too, and a re-push without a bundle says why it has none.
    assert store.list(url=fresh)[0]["lite"]["bytes"] == lite["bytes"]
    store.push(model.state_dict(), "bundled", url=fresh)
    again = store.info("bundled", url=fresh)
    assert again["lite"] is None and "state dict" in again["lite_reason"]


def test_a_model_the_bundle_cannot_lower_pushes_with_the_reason(fresh):
    model = CumulativeNet()
    info = store.push(model, "cumulative", url=fresh, input_size=(1, 4))
    assert info["lite"] is None
    assert "'cumsum'" in info["lite_reason"] and "does not lower" in info["lite_reason"]
    pulled = store.pull("cumulative", url=fresh, trust_code=True)  # the Python runtime still has it
    x = webgrad.randn(2, 4)
    np.testing.assert_array_equal(predictions(pulled, x), predictions(model, x))


def test_push_without_an_input_size_says_how_to_get_a_bundle(fresh):
    lm = nn.Sequential(nn.Embedding(10, 4), nn.Linear(4, 10))  # token ids of unknown length
    info = store.push(lm, "no-size", url=fresh)
    assert info["lite"] is None and "input_size=(1, ...)" in info["lite_reason"]
    # A Linear's input is guessed, and that is enough to export it.
    assert store.push(nn.Sequential(nn.Linear(3, 2)), "guessed", url=fresh)["lite"]["files"]["model.json"] > 0
    # Token ids with a length: the bundle takes int ids.
    tokens = store.push(lm, "with-size", url=fresh, input_size=(1, 8), dtypes=[webgrad.int64])
    meta = json.loads(fetch(f"{fresh}/api/models/with-size/lite/model.json"))
    assert tokens["lite"] is not None and meta["inputs"][0]["dtype"] == "int32" and meta["inputs"][0]["shape"][1] == 8
    # Asked for none: the widget runs the model in Python.
    assert "lite=False" in store.push(lm, "no-lite", url=fresh, input_size=(1, 8), dtypes=[webgrad.int64],
                                      lite=False)["lite_reason"]


def test_a_refused_push_leaves_the_old_model_and_its_bundle(fresh):
    model = nn.Sequential(nn.Linear(4, 2))
    first = store.push(model, "kept-bundle", url=fresh, input_size=(1, 4))
    old = fetch(f"{fresh}/api/models/kept-bundle/lite/weights.safetensors")
    with pytest.raises(store.StoreError, match="already has a model"):
        store.push(nn.Sequential(nn.Linear(4, 3)), "kept-bundle", url=fresh, input_size=(1, 4), overwrite=False)
    assert store.info("kept-bundle", url=fresh)["lite"] == first["lite"]
    assert fetch(f"{fresh}/api/models/kept-bundle/lite/weights.safetensors") == old
