"""webgrad.ao.quantization.quantize_dynamic: torch's int8 dynamic quantization of Linear,
checked against torch's own quantized model (weights bit for bit, outputs to float rounding)."""
from __future__ import annotations

import warnings

import numpy as np
import pytest

import webgrad
from conftest import assert_close, need_module, requires_webgpu
from webgrad import nn

torch = need_module("torch")
quantization = webgrad.ao.quantization


def _twins(seed=0):
    torch.manual_seed(seed)
    theirs = torch.nn.Sequential(torch.nn.Linear(64, 96), torch.nn.ReLU(), torch.nn.Linear(96, 10))
    ours = nn.Sequential(nn.Linear(64, 96), nn.ReLU(), nn.Linear(96, 10))
    ours.load_state_dict({k: webgrad.tensor(v.detach().numpy()) for k, v in theirs.state_dict().items()})
    return theirs, ours


def _torch_quantized(model, per_channel):
    spec = {torch.nn.Linear: torch.ao.quantization.per_channel_dynamic_qconfig} if per_channel else {torch.nn.Linear}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # torch.ao.quantization's deprecation notices
        return torch.ao.quantization.quantize_dynamic(model, spec, dtype=torch.qint8)


@pytest.mark.parametrize("per_channel", [False, True], ids=["per_tensor", "per_channel"])
def test_quantize_dynamic_matches_torch(device, per_channel):
    theirs, ours = _twins()
    tq = _torch_quantized(theirs, per_channel)
    spec = {nn.Linear: quantization.per_channel_dynamic_qconfig} if per_channel else {nn.Linear}
    wq = quantization.quantize_dynamic(ours, spec, dtype=webgrad.qint8).to(device)
    assert isinstance(ours[0], nn.Linear)  # a copy was quantized, the model is untouched
    assert repr(wq[0]).startswith("DynamicQuantizedLinear(\n  in_features=64, out_features=96, dtype=webgrad.qint8")
    for i in (0, 2):
        weight = tq[i].weight()
        assert wq[i]._packed_params.weight.dtype is webgrad.int8
        assert wq[i]._packed_params.weight._data.nbytes == weight.int_repr().numel()  # one byte each, on any device
        np.testing.assert_array_equal(wq[i]._packed_params.weight.cpu().numpy(), weight.int_repr().numpy())
        scales = weight.q_per_channel_scales().numpy() if per_channel else weight.q_scale()
        np.testing.assert_allclose(wq[i]._packed_params.weight_scale.cpu().numpy(), scales, rtol=1e-7)
        assert_close(wq[i].weight(), weight.dequantize().numpy(), rtol=1e-6, atol=1e-7)
    x = np.random.default_rng(1).standard_normal((16, 64)).astype(np.float32) * 2
    want = tq(torch.tensor(x)).numpy()
    got = wq(webgrad.tensor(x, device=device))
    assert got.dtype is webgrad.float32 and got.device == device
    assert_close(got, want, rtol=1e-5, atol=1e-5)
    assert np.abs(want - theirs(torch.tensor(x)).detach().numpy()).max() > 1e-3  # the comparison sees quantization


def test_top1_agrees_with_float_on_digits(device):
    webgrad.manual_seed(0)
    x, y = webgrad.datasets.digits(split="train", device=device)
    tx, _ = webgrad.datasets.digits(split="test", device=device)
    model = nn.Sequential(nn.Linear(64, 128), nn.ReLU(), nn.Linear(128, 10)).to(device)
    opt = webgrad.optim.Adam(model.parameters(), lr=1e-2)
    for _ in range(60):
        opt.zero_grad()
        nn.functional.cross_entropy(model(x), y).backward()
        opt.step()
    with webgrad.no_grad():
        float_top1 = model(tx).argmax(-1).cpu().numpy()
        quantized_top1 = quantization.quantize_dynamic(model)(tx).argmax(-1).cpu().numpy()
    assert (float_top1 == quantized_top1).mean() >= 0.99


def test_state_dict_saves_and_loads(tmp_path):
    _, ours = _twins()
    q = quantization.quantize_dynamic(ours, {nn.Linear}, dtype=webgrad.qint8)
    assert list(q.state_dict()) == [f"{i}.{k}" for i in (0, 2) for k in (
        "scale", "zero_point", "_packed_params.weight", "_packed_params.weight_scale", "_packed_params.bias")]
    path = tmp_path / "q.safetensors"
    webgrad.save(q.state_dict(), path)
    _, fresh = _twins(seed=1)
    restored = quantization.quantize_dynamic(fresh)
    restored.load_state_dict(webgrad.load(path))
    x = webgrad.randn(5, 64)
    np.testing.assert_array_equal(restored(x).numpy(), q(x).numpy())
    # A bad value leaves the quantized model as it was.
    bad = dict(webgrad.load(path), **{"0._packed_params.weight": webgrad.zeros(3, 3, dtype=webgrad.int8)})
    with pytest.raises(RuntimeError, match="size mismatch for 0._packed_params.weight"):
        restored.load_state_dict(bad)
    np.testing.assert_array_equal(restored(x).numpy(), q(x).numpy())


def test_specs_by_name_in_place_and_errors():
    _, ours = _twins()
    quantization.quantize_dynamic(ours, {"2": quantization.per_channel_dynamic_qconfig}, inplace=True)
    assert isinstance(ours[0], nn.Linear) and ours[2].per_channel
    assert ours[2]._packed_params.weight_scale.shape == (10,)
    with pytest.raises(ValueError, match="qint8"):
        quantization.quantize_dynamic(ours, {nn.Linear}, dtype=webgrad.float16)
    with pytest.raises(NotImplementedError, match="Conv2d"):
        quantization.quantize_dynamic(ours, {nn.Conv2d})
    with pytest.raises(RuntimeError, match="in_features = 96"):
        ours[2](webgrad.randn(2, 5))


def _operands(m, k, n, per_channel, bias, seed=0):
    rng = np.random.default_rng(seed)
    x = (rng.standard_normal((m, k)) * 2 + 0.5).astype(np.float32)
    weight = rng.integers(-128, 128, (n, k), dtype=np.int8)
    scale = (rng.random(n) * 0.01 + 1e-3).astype(np.float32) if per_channel else np.float32(0.004)
    return x, weight, scale, (rng.standard_normal(n).astype(np.float32) if bias else None)


def _exact(x, weight, scale, bias):
    """torch's arithmetic with the integer sums in int64 (the reference for every kernel)."""
    lo, hi = np.float32(min(x.min(initial=0), 0)), np.float32(max(x.max(initial=0), 0))
    s = (hi - lo) / np.float32(127)
    s = s if s > 0 else np.float32(1)
    zp = np.clip(np.rint(-lo / s), 0, 127)
    q = (np.clip(np.rint(x / s) + zp, 0, 127) - zp).astype(np.int64)
    out = (q @ weight.T.astype(np.int64)).astype(np.float32) * (s * scale)
    return out if bias is None else out + bias


@pytest.mark.parametrize("m, k, n, per_channel, bias", [
    (16, 64, 96, False, True),     # rows of whole vec4s
    (5, 37, 10, True, False),      # rows padded to 16, a narrow output
    (130, 1024, 70, True, True),   # several tiles each way
    (3, 1, 1, False, True),
    (2, 1500, 3, False, False),    # sums past float32's exact integers (k > 1032)
    (3, 0, 4, False, True),        # no in features: the bias
    (0, 5, 4, True, False),        # an empty batch
])
def test_quantized_linear_is_exact(device, m, k, n, per_channel, bias):
    """The op's integer sums are exact on every device (numpy: BLAS, float64 past k = 1032)."""
    x, weight, scale, b = _operands(m, k, n, per_channel, bias)
    args = [webgrad.tensor(a, device=device) for a in (x, weight, scale)]
    got = quantization.quantized_linear(*args, None if b is None else webgrad.tensor(b, device=device))
    np.testing.assert_allclose(got.numpy(), _exact(x, weight, scale, b), rtol=1e-6, atol=1e-6)


@pytest.fixture(params=[True, False], ids=["dot4I8Packed", "unpacked"])
def packed_dot(request, monkeypatch):
    from webgrad.backend.webgpu import qlinear

    monkeypatch.setattr(qlinear, "PACKED_DOT", request.param)
    return request.param


@requires_webgpu
@pytest.mark.parametrize("small", [True, False], ids=["one_dispatch", "reductions"])
def test_webgpu_kernels_match_numpy(packed_dot, small, monkeypatch):
    """Both ways of multiplying four int8 pairs, both ways of quantizing x, a strided x and a
    weight that starts mid-word: the same numbers as the numpy kernel, bit for bit."""
    from webgrad.backend.webgpu import qlinear

    if not small:
        monkeypatch.setattr(qlinear, "SMALL_X", 0)
    x, weight, scale, b = _operands(24, 48, 33, True, True, seed=3)
    want = quantization.quantized_linear(*(webgrad.tensor(a) for a in (x, weight, scale, b))).numpy()
    got = quantization.quantized_linear(*(webgrad.tensor(a, device="webgpu") for a in (x, weight, scale, b)))
    np.testing.assert_array_equal(got.numpy(), want)
    x3 = webgrad.tensor(np.ascontiguousarray(x.reshape(4, 6, 48).transpose(1, 0, 2)), device="webgpu")
    flat = webgrad.tensor(np.concatenate([np.zeros(5, np.int8), weight.reshape(-1)]), device="webgpu")
    got = quantization.quantized_linear(x3.transpose(0, 1), flat[5:].reshape(33, 48),
                                        webgrad.tensor(scale, device="webgpu"), None)
    unbiased = quantization.quantized_linear(*(webgrad.tensor(a) for a in (x, weight, scale)), None).numpy()
    np.testing.assert_array_equal(got.numpy(), unbiased.reshape(4, 6, 33))


@requires_webgpu
def test_webgpu_forward_keeps_the_weight_int8():
    """The forward multiplies the int8 weight as stored: no float32 copy of it (1 MiB here) is
    made, the peak above the model is the quantized input and the output."""
    model = quantization.quantize_dynamic(nn.Sequential(nn.Linear(1024, 256))).to("webgpu")
    x = webgrad.randn(8, 1024, device="webgpu")
    with webgrad.no_grad():
        model(x)
        webgrad.webgpu.synchronize()
        webgrad.webgpu.reset_peak_memory_stats()
        before = webgrad.webgpu.memory_allocated()
        out = model(x)
        peak = webgrad.webgpu.max_memory_allocated() - before
    assert out.shape == (8, 256)
    assert peak <= 8 * 1024 + 8 * 256 * 4 + 1024, peak  # x as int8 (and its scale), the output
