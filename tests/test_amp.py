"""webgrad.amp: autocast keeps float32 compute (documented), GradScaler follows torch's cpu scaler step by step."""
from __future__ import annotations

import warnings

import numpy as np
import pytest

import webgrad
from conftest import assert_close, need_module
from webgrad import nn

torch = need_module("torch")


def test_autocast_keeps_dtype_and_values(device):
    model = nn.Linear(4, 3).to(device)
    x = webgrad.randn(2, 4, device=device)
    plain = model(x)
    with webgrad.autocast(device_type="cpu", dtype=webgrad.bfloat16):
        assert webgrad.amp.is_autocast_enabled("cpu") and webgrad.amp.get_autocast_dtype("cpu") is webgrad.bfloat16
        inside = model(x)
    assert not webgrad.amp.is_autocast_enabled()
    assert inside.dtype is webgrad.float32
    assert_close(inside, plain.detach().cpu().numpy())

    @webgrad.amp.autocast("cpu", enabled=False)
    def run():
        return webgrad.amp.is_autocast_enabled("cpu")
    assert run() is False


def test_autocast_devices_and_bad_dtype():
    with pytest.warns(UserWarning, match="no CUDA"):
        with webgrad.amp.autocast("cuda"):
            assert not webgrad.amp.is_autocast_enabled("cuda")
    with pytest.raises(RuntimeError, match="target dtype is not supported"):
        webgrad.amp.autocast("cpu", dtype=webgrad.int64)
    with pytest.raises(RuntimeError, match="device_type 'tpu'"):
        webgrad.amp.autocast("tpu")


def test_grad_scaler_matches_torch_cpu():
    rng = np.random.default_rng(0)
    w0 = rng.standard_normal(3).astype(np.float32)
    grads = [rng.standard_normal(3).astype(np.float32) for _ in range(6)]
    grads[2] = np.array([np.inf, 1.0, 0.0], np.float32)  # a step that must be skipped
    grads[4] = np.array([np.nan, 1.0, 0.0], np.float32)

    def run(lib):
        w = lib.tensor(w0, requires_grad=True)
        opt = lib.optim.SGD([w], lr=0.1)
        scaler = lib.amp.GradScaler("cpu", init_scale=8.0, growth_interval=2)
        scales, results = [], []
        for g in grads:
            opt.zero_grad()
            loss = scaler.scale((w * lib.tensor(g)).sum())
            loss.backward()
            scaler.step(opt)
            scaler.update()
            scales.append(scaler.get_scale())
            results.append(w.detach().numpy().copy())
        return scales, results, scaler.state_dict()
    t_scales, t_w, t_state = run(torch)
    w_scales, w_w, w_state = run(webgrad)
    assert w_scales == t_scales
    assert np.allclose(np.array(w_w), np.array(t_w), atol=1e-6)
    assert w_state == {k: (v if not hasattr(v, "item") else v.item()) for k, v in t_state.items()}


def test_grad_scaler_disabled_and_cuda_pass_through():
    w = webgrad.tensor([1.0, 2.0], requires_grad=True)
    opt = webgrad.optim.SGD([w], lr=0.5)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        off = webgrad.amp.GradScaler(enabled=False)
    with pytest.warns(UserWarning, match="no CUDA"):
        cuda = webgrad.amp.GradScaler()  # PyTorch's default device is "cuda"
    with pytest.warns(UserWarning, match="no CUDA"):  # torch.cuda.amp.* as scripts spell them
        with webgrad.cuda.amp.autocast(dtype=webgrad.float16):
            assert not webgrad.amp.is_autocast_enabled()
        assert not webgrad.cuda.amp.GradScaler(enabled=True).is_enabled()
    for scaler in (off, cuda):
        loss = (w * w).sum()
        assert scaler.scale(loss) is loss
        loss.backward()
        scaler.step(opt)
        scaler.update()
        opt.zero_grad()
        assert scaler.state_dict() == {} and scaler.get_scale() == 1.0 and not scaler.is_enabled()
    assert np.allclose(w.detach().numpy(), [0.0, 0.0])


def test_grad_scaler_unscale_then_clip_and_errors():
    w = webgrad.tensor([3.0, 4.0], requires_grad=True)
    opt = webgrad.optim.SGD([w], lr=1.0)
    scaler = webgrad.amp.GradScaler("webgpu", init_scale=1024.0)
    scaler.scale((w * w).sum()).backward()
    scaler.unscale_(opt)
    assert np.allclose(w.grad.numpy(), [6.0, 8.0])
    with pytest.raises(RuntimeError, match="already been called"):
        scaler.unscale_(opt)
    scaler.step(opt)
    with pytest.raises(RuntimeError, match="step\\(\\) has already been called"):
        scaler.step(opt)
    scaler.update()
    restored = webgrad.amp.GradScaler("cpu")
    restored.load_state_dict(scaler.state_dict())
    assert restored.get_scale() == 1024.0
