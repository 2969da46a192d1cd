"""webgrad.onnx.export lowers the traced IR op by op: RNNs, attention and indexing export and
run in onnxruntime, matching webgrad's own outputs; ops one by one through their emitters."""
from __future__ import annotations

import io
import sys
from pathlib import Path

import numpy as np
import pytest

import webgrad
import webgrad.nn.functional as F
from conftest import need_module
from webgrad import nn

onnx = need_module("onnx")
ort = need_module("onnxruntime")


def _roundtrip(model, args, feeds, names=None, dynamic=None, opset=None, atol=1e-5, device="cpu"):
    """Export ``model`` at ``args``, run the file on ``feeds`` (numpy) and compare with webgrad."""
    buffer = io.BytesIO()
    names = names or [f"x{i}" for i in range(len(args))]
    webgrad.onnx.export(model, tuple(args), buffer, input_names=names, dynamic_axes=dynamic, opset_version=opset)
    session = ort.InferenceSession(buffer.getvalue(), providers=["CPUExecutionProvider"])
    got = session.run(None, dict(zip(names, feeds)))
    if isinstance(model, nn.Module):
        model.eval()  # as exported (export restores the training flag)
    with webgrad.no_grad():
        want = model(*[webgrad.tensor(f, device=device) for f in feeds])
    want = _flat(want)
    assert len(got) == len(want)
    for g, w in zip(got, want):
        assert g.shape == tuple(w.shape)
        np.testing.assert_allclose(g, w.numpy(), rtol=1e-5, atol=atol)
    return onnx.load_from_string(buffer.getvalue())


def _flat(out):
    if isinstance(out, webgrad.Tensor):
        return [out]
    return [t for item in out for t in _flat(item)]


def _randn(*shape, seed=0):
    return np.random.default_rng(seed).standard_normal(shape).astype(np.float32)


@pytest.mark.parametrize("batch_first", [True, False])
def test_lstm_with_dynamic_batch(batch_first):
    webgrad.manual_seed(0)
    model = nn.LSTM(3, 5, num_layers=2, batch_first=batch_first)
    shape = (2, 4, 3) if batch_first else (4, 2, 3)
    more = (6, 4, 3) if batch_first else (4, 6, 3)
    axis = 0 if batch_first else 1
    proto = _roundtrip(model, [webgrad.tensor(_randn(*shape))], [_randn(*more, seed=1)],
                       dynamic={"x0": {axis: "batch"}})
    ops = {n.op_type for n in proto.graph.node}
    assert "LSTM" not in ops and "MatMul" in ops  # the traced primitives, not ONNX's LSTM op
    assert {i.name for i in proto.graph.initializer} >= {"weight_ih_l0", "weight_hh_l1"}  # named parameters


@pytest.mark.parametrize("make", [lambda: nn.LSTM(3, 4, bidirectional=True, proj_size=2, batch_first=True),
                                  lambda: nn.RNN(3, 4, nonlinearity="relu", batch_first=True)])
def test_bidirectional_and_plain_rnns(make):
    webgrad.manual_seed(4)
    _roundtrip(make(), [webgrad.tensor(_randn(2, 5, 3))], [_randn(3, 5, 3, seed=1)], dynamic={"x0": {0: "batch"}})


def test_gru_and_its_sequence_length_is_fixed():
    webgrad.manual_seed(1)
    model = nn.GRU(3, 4, num_layers=2)
    x = webgrad.tensor(_randn(5, 2, 3))
    _roundtrip(model, [x], [_randn(5, 3, 3, seed=2)], dynamic={"x0": {1: "batch"}})
    # The trace unrolls the loop over time steps: a dynamic sequence length cannot be followed.
    with pytest.raises(webgrad.onnx.ExportError, match="changes with the size of dynamic axis 'time'.*loop"):
        webgrad.onnx.export(model, (x,), io.BytesIO(), input_names=["x"], dynamic_axes={"x": {0: "time"}})


def test_scaled_dot_product_attention_with_masks():
    class Attend(nn.Module):
        def forward(self, q, k, v, mask):
            causal = F.scaled_dot_product_attention(q, k, v, is_causal=True)
            return causal + F.scaled_dot_product_attention(q, k, v, attn_mask=mask)

    q, k, v = (_randn(2, 2, 5, 4, seed=s) for s in range(3))
    mask = np.random.default_rng(3).random((5, 5)) > 0.3
    mask[:, 0] = True  # every row attends somewhere
    args = [webgrad.tensor(a) for a in (q, k, v, mask)]
    _roundtrip(Attend(), args, [q, k, v, mask])


def test_causal_attention_with_dynamic_batch_and_length():
    class TinyGPT(nn.Module):
        def __init__(self):
            super().__init__()
            self.tok, self.pos = nn.Embedding(10, 8), nn.Embedding(16, 8)
            self.head = nn.Linear(8, 10)

        def forward(self, idx):  # arange(time) becomes a Range, the causal mask is computed from two
            h = self.tok(idx) + self.pos(webgrad.arange(idx.shape[1]))
            return self.head(F.scaled_dot_product_attention(h, h, h, is_causal=True) + h)

    webgrad.manual_seed(3)
    idx = np.random.default_rng(0).integers(0, 10, (3, 7))
    proto = _roundtrip(TinyGPT(), [webgrad.tensor(idx[:2, :5])], [idx], dynamic={"x0": {0: "batch", 1: "time"}})
    assert "Range" in {n.op_type for n in proto.graph.node}


def test_the_char_lm_demo_exports_with_dynamic_batch_and_length():
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # `demos` is not installed
    from demos.char_lm import TinyGPT

    webgrad.manual_seed(6)
    tokens = np.random.default_rng(0).integers(0, 20, (3, 7))
    _roundtrip(TinyGPT(20, context=16), [webgrad.tensor(tokens[:2, :5])], [tokens],
               dynamic={"x0": {0: "batch", 1: "time"}})


def test_multihead_attention_and_transformer_layer_with_dynamic_batch(device):
    webgrad.manual_seed(2)
    mha = nn.MultiheadAttention(8, 2, batch_first=True)

    class SelfAttention(nn.Module):
        def __init__(self):
            super().__init__()
            self.mha = mha

        def forward(self, x):
            return self.mha(x, x, x)

    x = _randn(2, 5, 8)
    _roundtrip(SelfAttention(), [webgrad.tensor(x)], [_randn(3, 5, 8, seed=4)], dynamic={"x0": {0: "batch"}})
    layer = nn.TransformerEncoderLayer(8, 2, 16, dropout=0.1, batch_first=True).to(device)
    _roundtrip(layer, [webgrad.tensor(x, device=device)], [_randn(4, 5, 8, seed=5)], dynamic={"x0": {0: "batch"}},
               device=device)
    encoder = nn.TransformerEncoder(nn.TransformerEncoderLayer(8, 2, 16, norm_first=True), num_layers=2)
    _roundtrip(encoder, [webgrad.tensor(_randn(5, 2, 8))], [_randn(5, 3, 8, seed=6)], dynamic={"x0": {1: "batch"}})


def test_indexing_exports():
    table = webgrad.tensor([2, 0, 3])

    class Index(nn.Module):
        def forward(self, x, rows):
            picked = x[rows, 1:]  # an index tensor given as an input
            fixed = x[:, table]  # a constant index tensor
            last = x[-1, ::2]  # an int and a step
            gathered = webgrad.gather(x, 1, rows.abs().reshape(-1, 1).expand(-1, 2))
            written = x * 1
            written[[0, 2], ::2] = -5.0  # a list and a step: ScatterND at positions known here
            return picked, fixed * 2, last[None] + 1, gathered, written

    x = _randn(4, 4)
    rows = np.array([3, 0, -1], np.int64)  # a negative index counts from the end
    proto = _roundtrip(Index(), [webgrad.tensor(x), webgrad.tensor(rows)], [x, rows])
    assert {"Gather", "GatherElements", "ScatterND"} <= {n.op_type for n in proto.graph.node}


def test_index_put_in_forward_with_dynamic_batch(device):
    class Build(nn.Module):
        def __init__(self):
            super().__init__()
            self.fc = nn.Linear(3, 3)

        def forward(self, x):
            h = webgrad.zeros(x.shape[0], 4, device=x.device)  # its shape follows the batch: ConstantOfShape
            h[:, 1] = self.fc(x)[:, 0]  # a write into a tensor made here: index_put
            h[:, 2:] = 1.0
            return h * 2

    x = _randn(2, 3)
    proto = _roundtrip(Build().to(device), [webgrad.tensor(x, device=device)], [_randn(5, 3, seed=1)],
                       dynamic={"x0": {0: "batch"}}, device=device)
    assert {"Pad", "Where"} <= {n.op_type for n in proto.graph.node}


def test_sizes_that_follow_dynamic_axes():
    def f(x):  # x: (batch, time, 4), both dynamic
        steps = x[:, 1:] - x[:, :-1]  # slice stops: time and time - 1
        doubled = webgrad.cat([x[:, 0], x[:, -1]], 0).reshape(-1, 2, 2)  # shape (2 * batch, 2, 2)
        spread = x[:, :1].expand(-1, x.shape[1], -1)  # expand to (batch, time, 4)
        first = x[:1, 0]  # expanded to (batch, 4) and to (2, 4): equal nodes at batch 2 only
        same = first.expand(x.shape[0], 4).sum(0) + first.expand(2, 4).sum(0)
        return steps, doubled, (x - spread).reshape(-1), same  # batch * time * 4 is left to ONNX (-1)

    proto = _roundtrip(f, [webgrad.tensor(_randn(2, 5, 4))], [_randn(3, 7, 4, seed=1)],
                       dynamic={"x0": {0: "batch", 1: "time"}})
    shapes = [[d.dim_param or d.dim_value for d in o.type.tensor_type.shape.dim] for o in proto.graph.output]
    assert shapes[:2] == [["batch", "time - 1", 4], ["2*batch", 2, 2]]


def test_a_model_that_returns_its_loss():
    class Classifier(nn.Module):
        def __init__(self):
            super().__init__()
            self.fc = nn.Linear(4, 5)

        def forward(self, x, y):
            logits = self.fc(x)
            return (F.cross_entropy(logits, y, ignore_index=2, label_smoothing=0.1),
                    F.cross_entropy(logits.unsqueeze(-1), y.unsqueeze(-1), reduction="none"))

    webgrad.manual_seed(5)
    x, y = _randn(6, 4), np.array([0, 2, 4, 1, 2, 3], np.int64)
    _roundtrip(Classifier(), [webgrad.tensor(x), webgrad.tensor(y)], [x, y])


def test_random_draws_are_refused():
    model = nn.Sequential(nn.Linear(3, 3), nn.Dropout(0.5))
    with pytest.raises(webgrad.onnx.ExportError, match="draws random numbers.*eval mode"):
        webgrad.onnx.export(model, (webgrad.randn(2, 3),), io.BytesIO(), training=True)
    assert model.training


def test_in_place_write_into_an_input_is_refused():
    def f(x):
        x[0] = 1.0
        return x * 2

    with pytest.raises(webgrad.onnx.ExportError, match="'setitem'.*writes in place into .*model input"):
        webgrad.onnx.export(f, (webgrad.randn(2, 3),), io.BytesIO())


LAYERS = [  # what the exporter once recorded layer by layer, now through their ops
    (lambda: nn.Conv1d(2, 3, 3, padding=1, stride=2), (2, 8)),
    (lambda: nn.Sequential(nn.Conv2d(2, 4, 3, groups=2, dilation=2), nn.AdaptiveAvgPool2d(1), nn.Flatten()), (2, 7, 7)),
    (lambda: nn.AdaptiveAvgPool2d((2, 3)), (2, 4, 6)),
    (lambda: nn.MaxPool2d(3, 2, padding=1, ceil_mode=True), (2, 6, 6)),
    (lambda: nn.AvgPool2d(3, 2, padding=1, count_include_pad=False, ceil_mode=True), (2, 6, 6)),
    (lambda: nn.Sequential(nn.Linear(3, 3), nn.BatchNorm1d(3), nn.GELU(approximate="tanh"), nn.LeakyReLU(0.1),
                           nn.Softmax(dim=1), nn.LogSoftmax(dim=-1)), (3,)),
]


@pytest.mark.parametrize("case", range(len(LAYERS)))
def test_layers_with_dynamic_batch(case):
    make, shape = LAYERS[case]
    webgrad.manual_seed(case)
    model = make()
    for _ in range(2):  # running statistics of their own
        model(webgrad.randn(4, *shape))
    _roundtrip(model, [webgrad.randn(2, *shape)], [_randn(5, *shape, seed=case)], dynamic={"x0": {0: "n"}})


# One row per emitter family: each function is exported alone and run in onnxruntime.
x = _randn(3, 4)
xi = np.array([[5, -3, 0, 7], [-8, 2, 9, -1], [4, 4, -6, 3]], np.int64)
OPS = {
    "unary": (lambda a: (a.abs().exp().log1p().sqrt().rsqrt() + a.sin() * a.cos() + a.erf() + a.sign()
                         + a.floor() + a.ceil() + a.round() + a.reciprocal() + a.sigmoid().tanh()), [x]),
    "binary": (lambda a: (a ** 2 + webgrad.maximum(a, -a * 0.5) - webgrad.minimum(a, 0.1) / 3
                          + a % 0.7 + a // 0.3), [x]),
    "integer": (lambda a: (a % 4) + a // 3 + a.abs() * 2 - a.sign() + a.cumsum(-1), [xi]),
    "compare": (lambda a: webgrad.where(((a > 0) & (a <= 1)) | (a == a[0]) ^ (a != 0.5), a, -a)
                + (a < -1).float() + (a >= 2).float() + (~(a > 0)).float() + a.isfinite().float()
                + a.isnan().float() + a.isinf().float(), [x]),
    "reduce": (lambda a: (a.sum(1), a.amax(0), a.amin(1, keepdim=True), a.prod(0), a.argmax(1), a.argmin(),
                          a.mean(), F.softmax(a, 0), F.log_softmax(a, -1), a.argsort(-1)), [x]),
    "movement": (lambda a: (a.reshape(2, 6).permute(1, 0), a[None].expand(2, 3, 4), webgrad.flip(a, [0, 1]),
                            F.pad(a, (1, 2)), webgrad.cat([a, a * 2], 1), a.t().contiguous()), [x]),
    "layer_norm": (lambda a: F.layer_norm(a, (4,)), [x]),
    "conv_pool": (lambda a: (F.max_pool2d(F.conv2d(a, webgrad.ones(2, 1, 2, 2), stride=1, padding=1), 2,
                                          ceil_mode=True), F.avg_pool2d(a, 2), F.conv1d(a[0], webgrad.ones(3, 5, 2))),
                  [_randn(1, 1, 5, 5)]),
    "scatter": (lambda a: (webgrad.zeros(3, 4).scatter_add(0, webgrad.tensor([[0, 1, 2, 0]]),
                                                           webgrad.cat([a, a[:, :1]], 1)),  # src's corner
                           webgrad.ops.index_add(webgrad.zeros(5, 4), webgrad.tensor([4, 0, 4]), a)), [x]),
}


@pytest.mark.parametrize("name", sorted(OPS))
def test_op_families(name):
    fn, feeds = OPS[name]
    _roundtrip(fn, [webgrad.tensor(f) for f in feeds], feeds)


@pytest.mark.parametrize("opset", [13, 18])  # ReduceMax & co take their axes as an input from opset 18
def test_reductions_at_other_opsets(opset):
    fn, feeds = OPS["reduce"]
    _roundtrip(fn, [webgrad.tensor(f) for f in feeds], feeds, opset=opset)


def test_a_model_that_runs_no_op():
    _roundtrip(nn.Sequential(nn.Identity(), nn.Dropout()), [webgrad.randn(2, 3)], [_randn(4, 3)],
               dynamic={"x0": {0: "batch"}})


# The functional ops with no emitter, each for its reason; a new op gets an emitter or a line here.
NOT_EXPORTED = {
    "conv2d_backward_input": "a gradient", "conv2d_backward_weight": "a gradient",
    "max_pool2d_backward": "a gradient", "cross_entropy_backward": "a gradient", "relu_backward": "a gradient",
    "layer_norm_backward": "a gradient", "batch_norm_grad_sums": "a gradient", "batch_norm_backward": "a gradient",
    "cumprod": "no ONNX op computes a running product",
    "quantized_linear": "int8 tensors have no ONNX mapping here (webgrad.export keeps them)",
    "linear": "a trace runs F.linear as its matmul and add (Observer.traces_graph): no graph holds it",
    "cross_entropy_total": "a trace runs a mean or sum cross entropy as the per-position loss and its reductions",
}


def test_every_forward_op_has_an_emitter():
    import webgrad.ao  # noqa: F401  (declares quantized_linear)
    import webgrad.optim  # noqa: F401  (its update ops are declared there; in-place, so never exported)
    from webgrad.onnx._emitters import EMITTERS
    from webgrad.ops.registry import OPS

    missing = {name for name, op in OPS.items() if not op.inplace and op not in EMITTERS}
    assert missing == set(NOT_EXPORTED)


@pytest.mark.parametrize("opset", [14, 17])
def test_batch_norm_exported_in_training_mode_normalizes_by_each_batch(opset):
    webgrad.manual_seed(0)
    # without running statistics (whose in-place updates an ONNX graph cannot hold)
    model = nn.Sequential(nn.Conv2d(2, 3, 3), nn.BatchNorm2d(3, track_running_stats=False))
    buffer = io.BytesIO()
    webgrad.onnx.export(model, (webgrad.tensor(_randn(4, 2, 6, 6)),), buffer, input_names=["x"], training=True,
                        opset_version=opset)
    assert "BatchNormalization" in {n.op_type for n in onnx.load_from_string(buffer.getvalue()).graph.node}
    x = _randn(4, 2, 6, 6, seed=1) * 3 + 5
    got = ort.InferenceSession(buffer.getvalue(), providers=["CPUExecutionProvider"]).run(None, {"x": x})[0]
    with webgrad.no_grad():
        want = model(webgrad.tensor(x))  # still training: this batch's own statistics
    np.testing.assert_allclose(got, want.numpy(), rtol=1e-4, atol=1e-5)
    assert abs(float(got.mean())) < 1e-3  # bias starts at 0: normalized by this batch, not the first
