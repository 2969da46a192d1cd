"""webgrad.onnx.export: files checked by onnx and run in onnxruntime against webgrad's own outputs."""
from __future__ import annotations

import io
import sys

import numpy as np
import pytest

import webgrad
import webgrad.nn.functional as F
from conftest import need_module
from webgrad import nn

onnx = need_module("onnx")
ort = need_module("onnxruntime")


def _run(buffer, feeds):
    session = ort.InferenceSession(buffer.getvalue(), providers=["CPUExecutionProvider"])
    return session.run(None, feeds)


def _export(model, args, **kwargs):
    buffer = io.BytesIO()
    webgrad.onnx.export(model, args, buffer, **kwargs)
    return buffer


class CNN(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(1, 4, 3, padding=1)
        self.bn = nn.BatchNorm2d(4)
        self.pool = nn.MaxPool2d(2)
        self.conv2 = nn.Conv2d(4, 8, 3, stride=1)
        self.avg = nn.AvgPool2d(2, 1)
        self.fc = nn.Linear(8, 10)
        self.norm = nn.LayerNorm(10)
        self.dropout = nn.Dropout(0.5)

    def forward(self, x):
        x = self.pool(F.relu(self.bn(self.conv1(x))))
        x = self.avg(F.gelu(self.conv2(x)))
        x = x.view(x.size(0), -1)
        x = self.dropout(x)
        return F.log_softmax(self.norm(self.fc(x)) * 2 + 1, dim=1)


def test_mlp_with_dynamic_batch(device):
    model = nn.Sequential(nn.Linear(4, 16), nn.Tanh(), nn.Linear(16, 16), nn.Sigmoid(), nn.Linear(16, 3),
                          nn.Softmax(dim=-1)).to(device)
    buffer = _export(model, (webgrad.randn(2, 4, device=device),), input_names=["x"], output_names=["y"],
                     dynamic_axes={"x": {0: "batch"}, "y": {0: "batch"}})
    proto = onnx.load_from_string(buffer.getvalue())
    assert proto.graph.input[0].type.tensor_type.shape.dim[0].dim_param == "batch"
    x = np.random.default_rng(0).standard_normal((7, 4)).astype(np.float32)
    (got,) = _run(buffer, {"x": x})
    expected = model(webgrad.tensor(x, device=device)).detach().cpu().numpy()
    assert got.shape == (7, 3)
    np.testing.assert_allclose(got, expected, rtol=1e-5, atol=1e-6)


def test_cnn_in_eval_mode(device):
    webgrad.manual_seed(0)
    model = CNN().to(device)
    for _ in range(3):  # running statistics that differ from the initial ones
        model(webgrad.randn(16, 1, 8, 8, device=device))
    assert model.training
    buffer = _export(model, webgrad.randn(1, 1, 8, 8, device=device), input_names=["image"],
                     output_names=["logp"], dynamic_axes={"image": [0], "logp": [0]}, opset_version=17)
    assert model.training  # restored after tracing in eval mode
    x = np.random.default_rng(1).standard_normal((5, 1, 8, 8)).astype(np.float32)
    (got,) = _run(buffer, {"image": x})
    expected = model.eval()(webgrad.tensor(x, device=device)).detach().cpu().numpy()
    np.testing.assert_allclose(got, expected, rtol=1e-4, atol=1e-5)


def test_embedding_flatten_and_two_outputs(tmp_path):
    class TwoHeads(nn.Module):
        def __init__(self):
            super().__init__()
            self.embed = nn.Embedding(10, 4)
            self.flat = nn.Flatten()
            self.a = nn.Linear(12, 2)
            self.b = nn.Sequential(nn.Linear(12, 3), nn.LeakyReLU(0.2))

        def forward(self, idx):
            h = self.flat(self.embed(idx))
            return self.a(h), webgrad.cat([self.b(h), h.permute(1, 0)[:1].transpose(0, 1)], dim=1)

    model = TwoHeads()  # the slice of a permuted tensor exports too (it once stopped the export)
    path = tmp_path / "two.onnx"
    webgrad.onnx.export(model, (webgrad.tensor([[1, 2, 3]]),), str(path), input_names=["idx"],
                        output_names=["a", "b"], dynamic_axes={"idx": {0: "n"}, "a": {0: "n"}, "b": {0: "n"}})
    idx = np.array([[0, 9, 4], [3, 3, 3]], np.int64)
    session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    got_a, got_b = session.run(None, {"idx": idx})
    want_a, want_b = model(webgrad.tensor(idx))
    np.testing.assert_allclose(got_a, want_a.detach().numpy(), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(got_b, want_b.detach().numpy(), rtol=1e-5, atol=1e-6)


def test_uncovered_op_is_named():
    class Running(nn.Module):
        def forward(self, x):
            return x.cumprod(dim=-1)  # no ONNX op computes a running product

    class Odd(nn.Module):
        def __init__(self):
            super().__init__()
            self.fc = nn.Linear(3, 3)
            self.inner = Running()

        def forward(self, x):
            return self.inner(self.fc(x).abs())

    with pytest.raises(webgrad.onnx.ExportError,
                       match=r"'cumprod' \(in Odd\.inner, at .*test_onnx\.py:\d+\).*does not cover"):
        _export(Odd(), webgrad.randn(2, 3))
    with pytest.raises(webgrad.onnx.ExportError, match="LayerNorm needs opset_version >= 17"):
        _export(nn.LayerNorm(3), webgrad.randn(2, 3), opset_version=15)


def test_missing_onnx_package_names_it(monkeypatch):
    monkeypatch.setitem(sys.modules, "onnx", None)  # what Pyodide looks like: no onnx wheel
    with pytest.raises(ImportError, match="needs the 'onnx' package: pip install onnx"):
        _export(nn.Linear(2, 2), webgrad.randn(1, 2))
