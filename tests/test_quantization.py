"""webgrad.ao.quantization.quantize_dynamic: torch's int8 dynamic quantization of Linear,
checked against torch's own quantized model (weights bit for bit, outputs to float rounding)."""
from __future__ import annotations

import warnings

import numpy as np
import pytest

import webgrad
from conftest import assert_close, need_module
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
