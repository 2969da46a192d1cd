"""webgrad.ao.quantization.quantize_dynamic: torch's int8 dynamic quantization of Linear,
checked against torch's own quantized model (weights bit for bit, outputs to float rounding)."""
from __future__ import annotations

import warnings

import numpy as np
import pytest

import webgrad
from conftest import IN_CI, assert_close, need_module, requires_webgpu
from webgrad import nn
from webgrad.backend.numpy import int8_gemm

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


@pytest.fixture(params=["int8_gemm", "blas"])
def cpu_path(request, monkeypatch):
    """The numpy backend's int8 products: the C kernel (built by scripts/install-deps), or
    BLAS on float32 copies (Pyodide, no build)."""
    if request.param == "blas":
        monkeypatch.setattr(int8_gemm, "_lib", None)
        monkeypatch.setattr(int8_gemm, "_tried", True)
    else:
        _need_int8_gemm()
    return request.param


def _need_int8_gemm():
    if not int8_gemm.available():
        message = (f"the int8 kernel is not built for this machine ({int8_gemm.library_path()}); "
                   f"`python -m webgrad.backend.numpy.int8_gemm` builds it")
        pytest.fail(message) if IN_CI else pytest.skip(message)


@pytest.mark.parametrize("m, k, n, per_channel, bias", [
    (16, 64, 96, False, True),     # rows of whole vec4s
    (5, 37, 10, True, False),      # rows padded to 16, a narrow output
    (130, 1024, 70, True, True),   # several tiles each way
    (3, 1, 1, False, True),
    (2, 1500, 3, False, False),    # sums past float32's exact integers (k > 1032)
    (3, 0, 4, False, True),        # no in features: the bias
    (0, 5, 4, True, False),        # an empty batch
])
def test_quantized_linear_is_exact(device, cpu_path, m, k, n, per_channel, bias):
    """The op's integer sums are exact on every device and both cpu paths (the C kernel; BLAS,
    float64 past k = 1032)."""
    x, weight, scale, b = _operands(m, k, n, per_channel, bias)
    args = [webgrad.tensor(a, device=device) for a in (x, weight, scale)]
    got = quantization.quantized_linear(*args, None if b is None else webgrad.tensor(b, device=device))
    np.testing.assert_allclose(got.numpy(), _exact(x, weight, scale, b), rtol=1e-6, atol=1e-6)


def _with_int8_gemm(lib, fn, *args):
    """``fn(*args)`` with the numpy backend's int8 kernel set to ``lib`` (None: the BLAS path)."""
    saved = int8_gemm._lib, int8_gemm._tried
    int8_gemm._lib, int8_gemm._tried = lib, True
    try:
        return fn(*args)
    finally:
        int8_gemm._lib, int8_gemm._tried = saved


def _odd_operands():
    """Batch dims, a transposed x, both scale kinds, no bias, k past 1032, k not a multiple of 4,
    n past one panel pair, x without negatives or positives, and x with an infinity or NaN."""
    for seed, (m, k, n) in enumerate([(9, 33, 40), (64, 1024, 70), (3, 1500, 17), (17, 7, 3), (1, 130, 65)]):
        for per_channel in (False, True):
            x, weight, scale, b = _operands(m, k, n, per_channel, bias=seed % 2 == 0, seed=seed)
            yield x, weight, scale, b
            yield np.abs(x).reshape(1, m, k), weight, scale, None
            yield -np.abs(x).T.copy().T, weight, scale, b
    x, weight, scale, b = _operands(6, 20, 9, True, True)
    for bad in (np.inf, -np.inf, np.nan):
        x[2, 3] = bad
        yield x, weight, scale, b


def test_cpu_int8_kernel_gives_the_bits_of_the_blas_path():
    """The C kernel (what a quantized model runs on the cpu natively) and the BLAS path agree bit for
    bit, and it is the C kernel that runs."""
    _need_int8_gemm()
    calls = int8_gemm.stats["calls"]
    for x, weight, scale, b in _odd_operands():
        args = [webgrad.tensor(a) for a in (x, weight, scale)] + [None if b is None else webgrad.tensor(b)]
        got = quantization.quantized_linear(*args).numpy()
        want = _with_int8_gemm(None, quantization.quantized_linear, *args).numpy()
        np.testing.assert_array_equal(got, want)
    assert int8_gemm.stats["calls"] > calls


@pytest.mark.parametrize("cpu", ["x86_64_v3", "baseline"])
def test_each_cpu_build_of_the_int8_kernel_is_exact(tmp_path, cpu):
    """The AVX2 (x86-64-v3) and plain C builds, besides the one this machine runs (AVX-512 VNNI
    here): each gives the exact integer sums."""
    import platform
    import subprocess
    import sys

    if cpu == "x86_64_v3" and platform.machine() not in ("x86_64", "AMD64"):
        pytest.skip("an x86 build")
    need_module("ziglang")
    path = tmp_path / "qgemm.so"
    flags = [f"-mcpu={cpu}" if flag == "-march=native" else flag for flag in int8_gemm.FLAGS]
    subprocess.run([sys.executable, "-m", "ziglang", "cc", *flags, "-o", str(path), str(int8_gemm.SOURCE)],
                   check=True, capture_output=True)
    lib = int8_gemm.open_library(path)
    assert lib.qgemm_variant().decode() == ("avx2" if cpu == "x86_64_v3" else "portable")
    for x, weight, scale, b in list(_odd_operands())[:-3]:
        x2 = x.reshape(-1, x.shape[-1])
        got = _with_int8_gemm(lib, int8_gemm.linear, x2, weight, scale, b)
        np.testing.assert_array_equal(got, _exact(x2, weight, scale, b))


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
