"""The op table of ``webgrad.export``: one small model per lowering, run by every bundle executor.

Each case builds a model and example inputs; ``export_case`` writes its bundle and returns the
inputs with the outputs webgrad computes for them on cpu (numpy). tests/test_lite.py runs the
table natively through the bundle's WGSL (wgpu); tests/browser/test_lite.py through /lite.js,
on WebGPU and on its CPU path. The batch is dynamic: each case runs at its example batch and at
another one from the same bundle.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import numpy as np

import webgrad
import webgrad.nn as nn
import webgrad.nn.functional as F


@dataclass
class Case:
    name: str
    build: Callable  # () -> (model, tuple of example tensors)
    tol: float = 1e-5


def _randn(*shape, seed=0):
    return webgrad.tensor(np.random.default_rng(seed).standard_normal(shape).astype(np.float32))


def _fn(fn):
    """A module running ``fn`` (the exporter names modules in errors; a function works too)."""
    class Fn(nn.Module):
        def forward(self, *xs):
            return fn(*xs)
    return Fn()


def _seeded(make):
    def build():
        webgrad.manual_seed(0)
        return make()
    return build


CASES = [
    # elementwise, one op each, and fused chains
    *[Case(f"unary_{name}", _seeded(lambda name=name: (_fn(getattr(webgrad, name)), (_randn(3, 5),))))
      for name in ("neg", "abs", "exp", "tanh", "sigmoid", "relu", "sin", "cos", "erf", "floor", "ceil", "round",
                   "sign", "reciprocal")],
    Case("unary_log_sqrt_rsqrt_log1p", _seeded(lambda: (
        _fn(lambda x: (x.abs() + 0.1).log() + x.abs().sqrt() + (x.abs() + 0.5).rsqrt() + x.abs().log1p()),
        (_randn(4, 6),)))),
    Case("binary_broadcast", _seeded(lambda: (
        _fn(lambda x, y: (x + y) * (x - y) / (y.abs() + 1) + webgrad.maximum(x, y) - webgrad.minimum(x, y * 2)),
        (_randn(3, 4, 5), _randn(3, 1, 5, seed=1))))),
    Case("pow_and_scalars", _seeded(lambda: (_fn(lambda x: (x.abs() + 0.5) ** 1.5 * 3 - 2 / (x * x + 1)),
                                             (_randn(2, 7),)))),
    Case("compare_where_cast", _seeded(lambda: (
        _fn(lambda x, y: webgrad.where(x > y, x, y * 0.5) + (x <= 0).float() + (x != y).float()
            + ((x >= 0) & (y < 0)).float() - (~(x == x)).float()),
        (_randn(3, 5), _randn(3, 5, seed=1))))),
    Case("gelu_silu_softplus", _seeded(lambda: (_fn(lambda x: F.gelu(x) + F.silu(x) + F.softplus(x) + F.elu(x)),
                                                (_randn(4, 8),)))),
    Case("clamp_leaky", _seeded(lambda: (_fn(lambda x: x.clamp(-0.5, 0.7) + F.leaky_relu(x, 0.1) + F.relu6(x * 4)),
                                         (_randn(4, 8),)))),
    # views read in place, and copies where a kernel needs order
    Case("views_transpose_slice_expand", _seeded(lambda: (
        _fn(lambda x: x.transpose(1, 2)[:, 1:3].reshape(x.shape[0], -1) + x[:, :1, :2].expand(x.shape[0], 3, 2)
            .reshape(x.shape[0], -1)), (_randn(2, 3, 4),)))),
    Case("cat_and_flatten", _seeded(lambda: (_fn(lambda x, y: webgrad.cat([x.flatten(1), y * 2, x[:, 0]], 1)),
                                             (_randn(3, 2, 2), _randn(3, 5, seed=1))))),
    # products
    Case("linear", _seeded(lambda: (nn.Linear(7, 5), (_randn(3, 7),)))),
    Case("linear_no_bias_3d", _seeded(lambda: (nn.Linear(6, 4, bias=False), (_randn(2, 3, 6),)))),
    # int8 weights as stored; a bundle keeps activations float32 where eager quantizes them (128 levels)
    Case("quantized_linear", _seeded(lambda: (
        webgrad.ao.quantization.quantize_dynamic(nn.Sequential(nn.Linear(7, 5))), (_randn(3, 7),))), tol=0.03),
    Case("quantized_linear_per_channel_3d", _seeded(lambda: (
        webgrad.ao.quantization.quantize_dynamic(nn.Sequential(nn.Linear(6, 4, bias=False)),
                                                 {nn.Linear: webgrad.ao.quantization.per_channel_dynamic_qconfig}),
        (_randn(2, 3, 6),))), tol=0.03),
    Case("bmm_broadcast", _seeded(lambda: (_fn(lambda x, y: x @ y), (_randn(2, 3, 4, 5), _randn(2, 1, 5, 6, seed=1))))),
    Case("matmul_vector", _seeded(lambda: (_fn(lambda x: x @ webgrad.arange(5.0)), (_randn(3, 5),)))),
    Case("conv2d", _seeded(lambda: (nn.Conv2d(3, 4, 3, padding=1), (_randn(2, 3, 6, 6),)))),
    Case("conv2d_stride_dilation_groups", _seeded(lambda: (
        nn.Conv2d(4, 6, 3, stride=2, padding=2, dilation=2, groups=2), (_randn(2, 4, 7, 9),)))),
    Case("max_pool2d", _seeded(lambda: (nn.MaxPool2d(3, stride=2, padding=1), (_randn(2, 3, 7, 6),)))),
    Case("avg_pool2d", _seeded(lambda: (nn.AvgPool2d(2), (_randn(2, 3, 6, 6),)))),
    # rows
    Case("softmax", _seeded(lambda: (_fn(lambda x: x.softmax(-1) + x.softmax(1)), (_randn(2, 5, 7),)))),
    Case("log_softmax", _seeded(lambda: (nn.LogSoftmax(dim=1), (_randn(4, 9),)))),
    Case("layer_norm", _seeded(lambda: (nn.LayerNorm(6), (_randn(2, 3, 6),)))),
    Case("layer_norm_no_bias", _seeded(lambda: (nn.LayerNorm(6, bias=False), (_randn(2, 3, 6),)))),
    Case("reductions", _seeded(lambda: (
        _fn(lambda x: webgrad.cat([x.sum(1), x.mean(1), x.amax(1), x.amin(1), x.prod(1),
                                   x.argmax(1).float(), x.argmin(1).float()], 1)), (_randn(3, 4, 2),)))),
    Case("reduce_last_dims", _seeded(lambda: (_fn(lambda x: x.sum((1, 2)) + x.transpose(1, 2).amax(-1).sum(-1)),
                                              (_randn(3, 4, 5),)))),
    # indexing
    Case("embedding", _seeded(lambda: (nn.Embedding(11, 4),
                                       (webgrad.tensor(np.array([[1, 2, 10], [0, 5, 3]], np.int64)),)))),
    # what modules compose: batch norm in eval, adaptive pooling, 1-d convolution, padding, statistics
    Case("batch_norm_cnn", _seeded(lambda: (
        nn.Sequential(nn.Conv2d(3, 4, 3), nn.BatchNorm2d(4), nn.ReLU(), nn.AdaptiveAvgPool2d(1), nn.Flatten(),
                      nn.Dropout(0.5), nn.Linear(4, 2)), (_randn(2, 3, 6, 6),)))),
    Case("batch_norm_1d_gelu_layer_norm", _seeded(lambda: (
        nn.Sequential(nn.Linear(3, 4), nn.BatchNorm1d(4), nn.GELU(), nn.LayerNorm(4)), (_randn(3, 3),)))),
    Case("batch_norm_batch_statistics", _seeded(lambda: (  # no running statistics: each batch's own, in eval too
        nn.Sequential(nn.Conv2d(3, 4, 3), nn.BatchNorm2d(4, track_running_stats=False)), (_randn(2, 3, 6, 6),)))),
    Case("conv1d", _seeded(lambda: (nn.Conv1d(3, 4, 3, padding=1), (_randn(2, 3, 7),)))),
    Case("pad_unsqueeze", _seeded(lambda: (_fn(lambda x: F.pad(x, (1, 2)).unsqueeze(1) * 2), (_randn(2, 3),)))),
    Case("mean_var_std_norm", _seeded(lambda: (
        _fn(lambda x: x.mean(-1, keepdim=True) + x.var(-1, keepdim=True) + x.std(-1, keepdim=True)
            + x.norm(dim=-1, keepdim=True)), (_randn(2, 5),)))),
    Case("stack_chunk_index", _seeded(lambda: (
        _fn(lambda x: webgrad.stack(x.chunk(2, -1), 1).sum(1) + x[:, [0, 2, 1]] + x[:, 1:2]), (_randn(2, 6),)))),
    # recurrent and attention layers (the state made in forward follows the batch)
    Case("lstm", _seeded(lambda: (nn.LSTM(4, 5, batch_first=True), (_randn(2, 3, 4),)))),
    Case("gru", _seeded(lambda: (nn.GRU(4, 5, batch_first=True), (_randn(2, 3, 4),)))),
    Case("multihead_attention", _seeded(lambda: (
        _fn(lambda x, m=nn.MultiheadAttention(8, 2, batch_first=True): m(x, x, x)[0]), (_randn(2, 3, 8),)))),
    # whole models
    Case("mlp", _seeded(lambda: (nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 3), nn.Softmax(-1)),
                                 (_randn(5, 8),)))),
    Case("cnn", _seeded(lambda: (nn.Sequential(nn.Conv2d(1, 4, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
                                               nn.Flatten(), nn.Linear(4 * 4 * 4, 10)), (_randn(2, 1, 8, 8),)))),
    Case("transformer_layer", _seeded(lambda: (
        nn.TransformerEncoderLayer(16, 4, 32, dropout=0.0, batch_first=True), (_randn(2, 5, 16),))), tol=1e-4),
]


def other_batch(inputs, batch: int = 3) -> list:
    """The inputs at another batch size: rows repeated (and cut) from the example's."""
    out = []
    for x in inputs:
        reps = -(-batch // x.shape[0])
        out.append(np.concatenate([x] * reps, axis=0)[:batch])
    return out


def expected(model, inputs) -> list:
    """The model's outputs on cpu (numpy), for numpy ``inputs``."""
    with webgrad.no_grad():
        out = model(*[webgrad.tensor(x) for x in inputs])
    return [o.detach().numpy() for o in _flat(out)]


def _flat(out) -> list:
    if isinstance(out, (tuple, list)):
        return [t for item in out for t in _flat(item)]
    return [out]


def export_case(case: Case, folder, weights: str = "float32"):
    """Write the case's bundle into ``folder``; returns [(inputs, expected outputs)] at its example batch
    and at another batch size."""
    model, example = case.build()
    if hasattr(model, "eval"):
        model.eval()
    webgrad.export(model, example, folder, weights=weights)
    inputs = [x.numpy() for x in example]
    runs = [inputs, other_batch(inputs, 1), other_batch(inputs, 7)]
    return [(xs, expected(model, xs)) for xs in runs]
