"""Batch norm's primitives on WebGPU (batch_norm.wgsl) against the numpy backend and float64.

Covers channels longer than a workgroup (each thread walking many values), folded grids (more
channels than a grid dimension holds), small workgroups, a large mean next to a small spread,
strided and float16 inputs, the CPU adapter's loop limit, and a whole training step of
BatchNorm2d / BatchNorm1d (outputs, running statistics, gradients) against cpu.
"""

import numpy as np
import pytest

import webgrad
import webgrad.nn.functional as F
from conftest import requires_webgpu
from webgrad import nn
from webgrad.backend.webgpu import batch_norm as gpu_batch_norm
from webgrad.backend.webgpu.backend import WebGPUBackend

gpu = requires_webgpu
rng = np.random.default_rng(0)


def sample(shape, scale=3.0, shift=0.0):
    return (rng.standard_normal(shape) * scale + shift).astype(np.float32)


def reference(x, w, b, eps=1e-5):
    """float64 batch statistics, normalization and affine."""
    wide = x.astype(np.float64)
    axes = (0,) + tuple(range(2, x.ndim))
    shape = (1, -1) + (1,) * (x.ndim - 2)
    mean, var = wide.mean(axes), wide.var(axes)
    y = (wide - mean.reshape(shape)) / np.sqrt(var.reshape(shape) + eps) * w.reshape(shape) + b.reshape(shape)
    return np.stack([mean, var]), y


def check(x, eps=1e-5, view=None, rtol=1e-4, atol=1e-4):
    channels = x.shape[1] if view is None else view(x).shape[1]
    w, b = sample((channels,)), sample((channels,))
    t = webgrad.tensor(x, device="webgpu")
    t = t if view is None else view(t)
    stats = webgrad.ops.batch_norm_stats(t)
    y = webgrad.ops.batch_norm(t, stats, webgrad.tensor(w, device="webgpu"), webgrad.tensor(b, device="webgpu"),
                               eps=eps)
    want_stats, want_y = reference(x if view is None else view(x), w, b, eps)
    np.testing.assert_allclose(stats.numpy(), want_stats, rtol=rtol, atol=atol)
    np.testing.assert_allclose(y.numpy(), want_y, rtol=rtol, atol=atol)


@gpu
@pytest.mark.parametrize("shape", [(16, 8, 9, 9), (300, 5), (2, 3, 1000), (1, 1, 5, 5), (3, 70, 4)])
def test_against_float64(shape):
    check(sample(shape))


@gpu
def test_strided_input():
    check(sample((5, 3, 6, 4)), view=lambda a: a.transpose(0, 3, 2, 1) if isinstance(a, np.ndarray)
          else a.permute(0, 3, 2, 1))


@gpu
def test_folded_grid_and_small_workgroups():
    with webgrad.webgpu.override_limits(max_compute_workgroups_per_dimension=4,
                                        max_compute_invocations_per_workgroup=48):
        check(sample((4, 19, 30)))  # 19 channels on a 4 x 4 grid, 32 threads a channel


@gpu
def test_large_mean_small_spread():
    """Two-pass variance after subtracting each channel's first value: E[x^2] - mean^2 in float32
    would be ~10% off here. (The float32 mean itself limits how far this goes, as in torch.)"""
    check(sample((8, 3, 50), scale=0.1, shift=100.0), rtol=1e-3, atol=1e-3)


@gpu
def test_long_channels_get_more_threads_on_a_cpu_adapter(monkeypatch):
    monkeypatch.setattr(gpu_batch_norm.gpu_reduce, "is_cpu_adapter", lambda backend: True)
    monkeypatch.setattr(gpu_batch_norm.gpu_reduce, "LOOP_TRIP_LIMIT", 100)
    seen = []
    original = WebGPUBackend.dispatch
    monkeypatch.setattr(WebGPUBackend, "dispatch", lambda self, file, entry, types, expr, constants, *rest:
                        seen.append((entry, constants)) or original(self, file, entry, types, expr, constants, *rest))
    check(sample((4, 2, 800)))  # 3200 values a channel: 64 threads, each within 100 trips
    assert ("batch_stats", {"WG": 64}) in seen
    seen.clear()
    check(sample((4, 2, 10)))
    assert ("batch_stats", {"WG": gpu_batch_norm.CPU_WORKGROUP}) in seen


@gpu
def test_a_channel_past_the_cpu_adapters_loop_limit_is_refused(monkeypatch):
    monkeypatch.setattr(gpu_batch_norm.gpu_reduce, "is_cpu_adapter", lambda backend: True)
    monkeypatch.setattr(gpu_batch_norm.gpu_reduce, "LOOP_TRIP_LIMIT", 10)
    with pytest.raises(ValueError, match=r"batch_norm_stats: 6000 values per channel \(\(20, 2, 300\)\).*loop limit"):
        webgrad.ops.batch_norm_stats(webgrad.zeros(20, 2, 300, device="webgpu"))


@gpu
@pytest.mark.parametrize("make, shape", [(lambda: nn.BatchNorm2d(6), (8, 6, 5, 5)),
                                         (lambda: nn.BatchNorm1d(4, affine=False), (12, 4)),
                                         (lambda: nn.BatchNorm1d(3, momentum=None), (5, 3, 7))])
def test_training_step_matches_cpu(make, shape):
    x, g = sample(shape, shift=2.0), sample(shape)
    results = {}
    for device in ("cpu", "webgpu"):
        webgrad.manual_seed(0)
        layer = make().to(device)
        if layer.weight is not None:
            with webgrad.no_grad():
                layer.weight.copy_(webgrad.tensor(np.linspace(0.5, 2, shape[1], dtype=np.float32)))
        t = webgrad.tensor(x, device=device, requires_grad=True)
        for _ in range(2):  # the running statistics move twice
            y = layer(t)
        y.backward(webgrad.tensor(g, device=device))
        grads = [t.grad] + [p.grad for p in layer.parameters()]
        results[device] = [y, layer.running_mean, layer.running_var] + grads
    for want, got in zip(results["cpu"], results["webgpu"]):
        np.testing.assert_allclose(got.detach().numpy(), want.detach().numpy(), rtol=1e-4, atol=1e-5)


@gpu
def test_float16_input_is_computed_in_float32():
    x = sample((6, 4, 3, 3), shift=1.0)
    y = {}
    for device in ("cpu", "webgpu"):
        t = webgrad.tensor(x, device=device, dtype=webgrad.float16, requires_grad=True)
        out = F.batch_norm(t, None, None, training=True)
        (out.float() ** 2).sum().backward()
        y[device] = out, t.grad
    for want, got in zip(y["cpu"], y["webgpu"]):
        assert got.dtype is webgrad.float16
        np.testing.assert_allclose(got.float().detach().numpy(), want.float().detach().numpy(), rtol=2e-3, atol=2e-3)
