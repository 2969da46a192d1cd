"""webgrad.export natively: every lowering of the op table runs through the bundle's own WGSL
(wgpu) and matches webgrad on cpu; the demo models match exactly at batch 1 and 17; float16
and int8 weights shrink the bundle and keep the predictions; a model that cannot be lowered,
a damaged bundle and bad input each get an error naming what was wrong, and nothing is lost.
(The same table runs in Chromium through /lite.js in tests/browser/test_lite.py.)"""
from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np
import pytest

import webgrad
import webgrad.nn as nn
from conftest import IN_CI
from lite_ops import CASES, export_case

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from demos import char_lm, classify_2d, digits  # noqa: E402


@pytest.fixture(scope="module")
def gpu():
    try:
        webgrad.backend.get_backend("webgpu").device  # noqa: B018  (makes the device)
    except Exception as error:  # noqa: BLE001
        if IN_CI:
            raise
        pytest.skip(f"no WebGPU adapter: {error}")


def _worst(got, want) -> float:
    """Largest |got - want| / (1 + |want|) over outputs; shapes must agree."""
    worst = 0.0
    for g, w in zip(got, want):
        assert g.shape == w.shape, (g.shape, w.shape)
        if w.size:
            worst = max(worst, float(np.max(np.abs(g.astype(np.float64) - w) / (1 + np.abs(w)))))
    return worst


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_op_table_through_the_bundles_wgsl(case, tmp_path, gpu):
    runs = export_case(case, tmp_path / "bundle")
    bundle = webgrad.lite.load(tmp_path / "bundle")
    for inputs, want in runs:
        got = bundle.predict(*inputs)
        assert _worst(got, want) <= case.tol, (case.name, [x.shape for x in inputs])


def _demo_models():
    webgrad.manual_seed(0)
    rng = np.random.default_rng(0)
    tokens = rng.integers(0, 20, (17, 16))
    return {
        "digits-mlp": (digits.make_model("mlp"), rng.random((17, 64), np.float32)),
        "digits-cnn": (digits.make_model("cnn"), rng.random((17, 1, 8, 8), np.float32)),
        "classify-2d": (classify_2d.make_model(), rng.uniform(-1, 1, (17, 2)).astype(np.float32)),
        "char-lm": (char_lm.TinyGPT(20, context=16), tokens),
    }


@pytest.mark.parametrize("name", ["digits-mlp", "digits-cnn", "classify-2d", "char-lm"])
def test_demo_models_predict_as_natively_at_batch_1_and_17(name, tmp_path, gpu):
    model, data = _demo_models()[name]
    model.eval()
    webgrad.export(model, (webgrad.tensor(data[:2]),), tmp_path / name)
    bundle = webgrad.lite.load(tmp_path / name)
    for batch in (1, 17):
        with webgrad.no_grad():
            want = model(webgrad.tensor(data[:batch])).numpy()
        got, = bundle.predict(data[:batch])
        assert got.shape == want.shape
        assert np.max(np.abs(got - want)) <= 1e-5, name


def test_char_lm_greedy_decoding_of_20_tokens_matches(tmp_path, gpu):
    """The bundle has the context's fixed length: the prompt is padded on the right, and with the
    causal mask the logits at the last real position are those of the unpadded window."""
    model, _ = _demo_models()["char-lm"]
    model.eval()
    context = model.context
    webgrad.export(model, (webgrad.tensor(np.zeros((1, context), np.int64)),), tmp_path / "lm")
    bundle = webgrad.lite.load(tmp_path / "lm")
    native, lite = [3, 1, 4], [3, 1, 4]
    with webgrad.no_grad():
        for _ in range(20):
            window = native[-context:]
            native.append(int(model(webgrad.tensor([window]))[0, -1].argmax().item()))
            window = lite[-context:]
            padded = np.array([window + [0] * (context - len(window))])
            lite.append(int(bundle.predict(padded)[0][0, len(window) - 1].argmax()))
    assert lite == native


def _trained_digits():
    demo = digits.DigitsDemo("mlp", seed=0)
    demo.train(150)
    demo.model.eval()
    return demo


def _tensor_bytes(folder: Path) -> int:
    """Bytes of the weights' data (the safetensors header aside)."""
    data = (folder / "weights.safetensors").read_bytes()
    return len(data) - 8 - int.from_bytes(data[:8], "little")


def test_int8_and_float16_weights_shrink_the_bundle_and_keep_predictions(tmp_path, gpu):
    demo = _trained_digits()
    x = demo.x_test.numpy()
    with webgrad.no_grad():
        want = demo.model(demo.x_test).numpy()
    sizes, top1 = {}, {}
    for weights in ("float32", "float16", "int8"):
        info = webgrad.export(demo.model, (demo.x_test[:2],), tmp_path / weights, weights=weights)
        assert info.weights == weights and info.kernels >= 2 and "matmul" in info.ops
        sizes[weights] = _tensor_bytes(tmp_path / weights)
        got, = webgrad.lite.load(tmp_path / weights).predict(x)
        top1[weights] = float(np.mean(got.argmax(1) == want.argmax(1)))
    assert sizes["float32"] / sizes["int8"] >= 3.5, sizes
    assert sizes["float32"] / sizes["float16"] >= 1.9, sizes
    assert top1["float32"] == 1.0
    assert top1["float16"] >= 0.99 and top1["int8"] >= 0.99, top1


class _Inner(nn.Module):
    def forward(self, x):
        return x.cumsum(1)


class _Outer(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 4)
        self.scan = _Inner()

    def forward(self, x):
        return self.scan(self.fc(x))


def test_an_op_that_cannot_be_lowered_names_op_and_module_and_writes_nothing(tmp_path):
    old = tmp_path / "bundle"
    webgrad.export(nn.Linear(4, 2), (webgrad.randn(2, 4),), old)
    before = {p.name: p.read_bytes() for p in old.rglob("*") if p.is_file()}
    with pytest.raises(webgrad.onnx.ExportError, match=r"'cumsum'.*_Outer\.scan"):
        webgrad.export(_Outer(), (webgrad.randn(2, 4),), old)
    assert {p.name: p.read_bytes() for p in old.rglob("*") if p.is_file()} == before  # the old bundle intact
    with pytest.raises(webgrad.onnx.ExportError):
        webgrad.export(_Outer(), (webgrad.randn(2, 4),), tmp_path / "fresh")
    assert not (tmp_path / "fresh").exists()
    assert [p.name for p in tmp_path.iterdir()] == ["bundle"]  # no temporary folder left behind


def test_bad_arguments_are_refused():
    with pytest.raises(ValueError, match="weights must be one of"):
        webgrad.export(nn.Linear(2, 2), (webgrad.randn(1, 2),), "x", weights="int4")
    with pytest.raises(TypeError, match="example input 0 must be a Tensor"):
        webgrad.export(nn.Linear(2, 2), (np.zeros((1, 2)),), "x")


@pytest.fixture
def mlp_bundle(tmp_path):
    webgrad.manual_seed(0)
    webgrad.export(digits.make_model("mlp"), (webgrad.randn(2, 64),), tmp_path / "b")
    return tmp_path / "b"


@pytest.mark.parametrize("damage", ["model.json:truncate", "model.json:format", "model.json:escape",
                                    "weights.safetensors:truncate",
                                    "weights.safetensors:missing", "kernel:missing", "kernel:garbage"])
def test_a_damaged_bundle_is_refused_naming_the_file(mlp_bundle, damage):
    what, how = damage.split(":")
    path = mlp_bundle / ("kernels/0.wgsl" if what == "kernel" else what)
    if how == "truncate":
        data = path.read_bytes()
        path.write_bytes(data[: len(data) // 2])
    elif how == "missing":
        path.unlink()
    elif how in ("format", "escape"):  # another format; a kernel outside the bundle's folder
        meta = json.loads(path.read_text())
        if how == "format":
            meta["format"] = "something-else"
        else:
            meta["kernels"][0] = "../../etc/passwd"
        path.write_text(json.dumps(meta))
    else:
        path.write_text("this is not WGSL")
    with pytest.raises(webgrad.lite.BundleError, match=path.name.replace(".", r"\.")):
        webgrad.lite.load(mlp_bundle)


def test_bad_input_names_the_expected_shape(mlp_bundle, gpu):
    bundle = webgrad.lite.load(mlp_bundle)
    with pytest.raises(ValueError, match=r"shape \(batch, 64\)"):
        bundle.predict(np.zeros((2, 63), np.float32))
    out, = bundle.predict(np.full((1, 64), np.nan, np.float32))  # NaN is passed through
    assert np.isnan(out).all()


def test_out_of_range_tokens_are_refused(tmp_path, gpu):
    webgrad.export(nn.Embedding(5, 3), (webgrad.tensor(np.zeros((2, 4), np.int64)),), tmp_path / "e")
    bundle = webgrad.lite.load(tmp_path / "e")
    with pytest.raises(ValueError, match=r"\[0, 5\)"):
        bundle.predict(np.array([[0, 1, 2, 5]]))
    with pytest.raises(ValueError, match="whole numbers"):
        bundle.predict(np.array([[0, 1, 2, 0.5]]))


def test_the_readme_export_block_runs_as_written(tmp_path, monkeypatch, gpu):
    readme = (Path(__file__).resolve().parents[1] / "README.md").read_text()
    section = readme[readme.index("## Ship a model without Python"):]
    block = section[section.index("```python\n") + 10:section.index("```\n", section.index("```python\n") + 10)]
    monkeypatch.chdir(tmp_path)
    webgrad.manual_seed(0)
    model = digits.make_model("mlp")
    scope = {"webgrad": webgrad, "model": model, "example": webgrad.randn(2, 64), "x": np.ones((3, 64), np.float32)}
    exec(block, scope)  # noqa: S102  (the README's own lines)
    assert scope["info"].weights == "int8" and (tmp_path / "digits-lite" / "model.json").exists()


class _Bidirectional(nn.Module):
    """Tokens through an encoder layer without a mask: every position sees every other."""

    def __init__(self):
        super().__init__()
        self.embed = nn.Embedding(10, 8)
        self.encode = nn.TransformerEncoderLayer(8, 2, 16, dropout=0.0, batch_first=True)

    def forward(self, tokens):
        return self.encode(self.embed(tokens))


def test_token_inputs_say_whether_a_shorter_row_may_be_padded(tmp_path):
    """The widget pads a short row of token ids on the right only where outputs at t depend on
    ids <= t alone: the export tests that by changing later ids, and records it per input."""
    webgrad.manual_seed(0)
    tokens = webgrad.tensor(np.arange(16).reshape(2, 8) % 10)
    for model, causal in [(char_lm.TinyGPT(10, context=8), True), (_Bidirectional(), False)]:
        model.eval()
        webgrad.export(model, (tokens,), tmp_path / type(model).__name__)
        spec, = json.loads((tmp_path / type(model).__name__ / "model.json").read_text())["inputs"]
        assert spec["causal"] is causal and spec["index_rows"] == 10
    webgrad.export(nn.Linear(3, 2), (webgrad.randn(2, 3),), tmp_path / "floats")
    assert "causal" not in json.loads((tmp_path / "floats" / "model.json").read_text())["inputs"][0]
