"""The WebGPU backend as a whole (natively through wgpu-py): the op table under
artificially small device limits, gradients of every differentiable op against
the cpu, large tensors that need a folded grid (tensors past one binding: test_webgpu_large.py), memory
that stays flat while training, completeness of kernels, and the digits models
trained on webgpu against the same run on numpy.

Under CI=true a missing adapter fails in conftest; elsewhere this file skips.
"""
from __future__ import annotations

import re

import numpy as np
import pytest

import webgrad
from webgrad.kernels import Program
from conftest import requires_webgpu
from op_cases import CASES, tolerance
from test_ops import test_forward

pytestmark = requires_webgpu


def _stays_float32(case) -> bool:
    """A case webgpu can run: no float64 input and no float64 result (test_forward
    checks that those raise a clear TypeError on webgpu instead)."""
    arrays = case.make_inputs()
    if any(a.dtype == np.float64 for a in arrays):
        return False
    outputs = case.fn(*[webgrad.tensor(a) for a in arrays])
    outputs = outputs if isinstance(outputs, (tuple, list)) else [outputs]
    return all(out.dtype is not webgrad.float64 for out in outputs)


DIFFERENTIABLE = [c for c in CASES if c.grad and _stays_float32(c)]


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.name)
def test_op_table_with_small_limits(case):
    """Every op again with 1 MiB bindings and 4 workgroups per grid dimension, so
    grid folding and the limit checks run on every test run."""
    with webgrad.webgpu.override_limits(max_storage_buffer_binding_size=1 << 20,
                                        max_compute_workgroups_per_dimension=4):
        test_forward(case, "webgpu")


def _gradients(case, arrays, device, dtype):
    inputs = [webgrad.tensor(a.astype(dtype) if a.dtype.kind == "f" else a, device=device,
                             requires_grad=a.dtype.kind == "f") for a in arrays]
    outputs = case.fn(*inputs)
    outputs = list(outputs) if isinstance(outputs, (tuple, list)) else [outputs]
    rng = np.random.default_rng(1)
    total = None
    for out in outputs:
        if out.dtype.is_floating_point and out.requires_grad:
            weight = webgrad.tensor(rng.uniform(0.5, 1.5, tuple(out.shape)), dtype=out.dtype, device=device)
            term = (out * weight).sum()
            total = term if total is None else total + term
    if total is None:
        return None
    total.backward()
    return [None if t.grad is None else t.grad.cpu().numpy().astype(np.float64) for t in inputs]


@pytest.mark.parametrize("case", DIFFERENTIABLE, ids=lambda c: c.name)
def test_gradient_matches_cpu(case):
    """Backward on webgpu (float32) against the float64 cpu gradients, which the
    finite-difference checks in test_gradcheck.py vouch for."""
    arrays = case.make_inputs()
    expected = _gradients(case, arrays, "cpu", np.float64)
    got = _gradients(case, arrays, "webgpu", np.float32)
    if expected is None:
        assert got is None
        return
    rtol, atol = tolerance(case.op, webgrad.float32)
    for k, (g, e) in enumerate(zip(got, expected)):
        assert (g is None) == (e is None), f"{case.name}: gradient {k} present on one device only"
        if e is not None:
            scale = max(1.0, float(np.abs(e).max(initial=0)))
            np.testing.assert_allclose(g, e, rtol=max(rtol, 1e-4), atol=max(atol, 1e-4) * scale,
                                       err_msg=f"{case.name}: gradient of input {k}")


def test_tensor_over_65535_workgroups():
    """65,535 x 64 + 1 elements: more workgroups than one grid dimension holds."""
    n = 65535 * 64 + 1
    x = webgrad.arange(n, dtype=webgrad.float32, device="webgpu")
    y = (x * 0.0 + 1.5).sum()  # each partial sum stays exact in float32
    assert y.item() == pytest.approx(1.5 * n, rel=1e-6)
    tail = (x + 1)[-3:].tolist()
    assert tail == [float(n - 2), float(n - 1), float(n)]


def test_float64_is_refused_and_int64_is_stored_narrow():
    with pytest.raises(TypeError, match="float64"):
        webgrad.zeros(3, dtype=webgrad.float64, device="webgpu")
    index = webgrad.tensor(np.array([2, 0, 1], dtype=np.int64)).to("webgpu")
    assert index.dtype is webgrad.int64
    table = webgrad.arange(12.0).reshape(3, 4).to("webgpu")
    np.testing.assert_array_equal(table[index].numpy(), np.arange(12.0).reshape(3, 4)[[2, 0, 1]])
    with pytest.raises(OverflowError, match="32-bit"):
        webgrad.tensor([2 ** 40]).to("webgpu")


@pytest.mark.parametrize("name", ["int8", "uint8", "int16"])
def test_small_ints_take_their_own_width(name):
    """int8/uint8 are one byte on the device and int16 two (packed in u32 words); every result
    wraps as on the cpu (torch's two's complement), and writes into a few elements of a word
    leave its other elements alone (threads share words)."""
    dtype = getattr(webgrad, name)
    values = np.array([-300, -129, -128, -1, 0, 1, 127, 128, 255, 256, 40000, 70000, 3], dtype=np.int64)
    cpu = webgrad.tensor(values).to(dtype)
    gpu = webgrad.tensor(values, device="webgpu").to(dtype)
    assert gpu._data.nbytes == values.size * dtype.itemsize
    np.testing.assert_array_equal(gpu.cpu().numpy(), cpu.numpy())
    ops = [lambda x: x + x, lambda x: x * 3 - 7, lambda x: x.sum(), lambda x: x.float() / 3, lambda x: x > 0,
           lambda x: x[1::2], lambda x: x.flip(0), lambda x: webgrad.cat([x, x[1:4]]), lambda x: x.cumsum(0),
           lambda x: x.max(), lambda x: x.sort().values, lambda x: x[:12].reshape(3, 4).t().contiguous(),
           lambda x: x.abs(), lambda x: x[webgrad.tensor([5, 0, 5, 12], device=x.device)]]
    for f in ops:
        want, got = f(cpu), f(gpu)
        assert got.dtype is want.dtype
        np.testing.assert_array_equal(got.cpu().numpy(), want.numpy())
    for x in (cpu, gpu):
        x[1::3] = 5
        x[::4] += 100
        x[2:5].mul_(-3)
    np.testing.assert_array_equal(gpu.cpu().numpy(), cpu.numpy())
    drawn = webgrad.randint(0, 100, (1000,), dtype=dtype, device="webgpu").cpu().numpy()
    assert drawn.dtype == dtype.np and drawn.min() >= 0 and drawn.max() < 100


def test_mixing_devices_is_a_clear_error():
    with pytest.raises(RuntimeError, match="same device"):
        webgrad.ones(2, device="webgpu") + webgrad.ones(2)


def test_adapter_info_and_memory_stats():
    assert webgrad.webgpu.is_available()
    info = webgrad.webgpu.adapter_info()
    assert info.get("device") or info.get("description")
    stats = webgrad.webgpu.memory_stats()
    assert set(stats) == {"bytes_in_use", "bytes_pooled", "peak_bytes"}


def test_synchronize_waits_for_the_recorded_work(monkeypatch):
    """torch.cuda.synchronize's contract: the recorded work is submitted, then waited for (a
    user timing GPU work with it measured only the recording while it merely submitted)."""
    monkeypatch.setattr(webgrad.accelerator, "allow_software_adapter", True)  # llvmpipe counts here
    device = webgrad.backend.get_backend("webgpu").device
    waits = []
    real_wait = type(device)._wait
    monkeypatch.setattr(device, "_wait", lambda: (waits.append(device._encoder is None), real_wait(device)))
    x = webgrad.ones(1000, device="webgpu")
    y = x * 2  # recorded, not yet submitted
    assert device._encoder is not None
    for synchronize in (webgrad.webgpu.synchronize, webgrad.accelerator.synchronize):
        waits.clear()
        synchronize()
        assert waits == [True]  # one wait, after the submit
    assert y.sum().item() == 2000.0


def test_buffers_return_to_the_pool_when_tensors_die():
    webgrad.webgpu.synchronize()
    before = webgrad.webgpu.memory_stats()["bytes_in_use"]
    x = webgrad.ones(1000, device="webgpu")
    assert webgrad.webgpu.memory_stats()["bytes_in_use"] > before
    del x
    assert webgrad.webgpu.memory_stats()["bytes_in_use"] == before


def test_torch_cuda_memory_api():
    """memory_allocated / max_memory_allocated / reset_peak_memory_stats / memory_reserved /
    empty_cache / memory_summary, as torch.cuda's: a float16 tensor takes half a float32 one's
    bytes (stored as f16, or packed where the adapter lacks 'shader-f16')."""
    wg = webgrad.webgpu
    webgrad.ones(1, device="webgpu").half()  # the fill value, cached for later calls
    wg.synchronize()
    wg.empty_cache()
    base = wg.memory_allocated()
    wg.reset_peak_memory_stats()
    assert wg.max_memory_allocated() == base
    x = webgrad.ones(1 << 16, device="webgpu")  # 256 KiB, a whole bucket
    assert wg.memory_allocated() == base + (1 << 18)
    half = x.half()
    assert wg.memory_allocated() == base + (1 << 18) + 2 * (1 << 16)
    del x, half
    assert wg.memory_allocated() == base
    assert wg.max_memory_allocated() >= base + (1 << 18) + 2 * (1 << 16)
    assert wg.memory_reserved() >= wg.max_memory_allocated() - base  # the freed buffers are pooled
    wg.reset_peak_memory_stats()
    assert wg.max_memory_allocated() == base
    wg.empty_cache()  # right after freeing buffers that recorded, unsubmitted work still reads
    assert wg.memory_reserved() == base
    assert webgrad.ones(3, device="webgpu").sum().item() == 3.0  # the next submit must not meet a destroyed buffer
    summary = wg.memory_summary()
    assert "peak allocated" in summary and "MiB" in summary


def test_profiler_memory_timeline_agrees_with_the_memory_api():
    wg = webgrad.webgpu
    model = webgrad.nn.Sequential(webgrad.nn.Linear(256, 512), webgrad.nn.ReLU(),
                                  webgrad.nn.Linear(512, 10)).to("webgpu")
    optimizer = webgrad.optim.Adam(model.parameters())
    x, y = webgrad.randn(128, 256, device="webgpu"), webgrad.randint(0, 10, (128,), device="webgpu")
    wg.synchronize()
    wg.reset_peak_memory_stats()
    with webgrad.profiler.profile(profile_memory=True) as prof:
        for _ in range(2):
            optimizer.zero_grad()
            webgrad.nn.functional.cross_entropy(model(x), y).backward()
            optimizer.step()
    wg.synchronize()
    assert prof.memory_stats()["webgpu"] == wg.max_memory_allocated() > wg.memory_allocated() > 0


def _mlp_steps(device, steps, record_memory=None):
    webgrad.manual_seed(0)
    model = webgrad.nn.Sequential(webgrad.nn.Linear(16, 32), webgrad.nn.ReLU(), webgrad.nn.Dropout(0.1),
                                  webgrad.nn.Linear(32, 4)).to(device)
    optimizer = webgrad.optim.Adam(model.parameters(), lr=1e-2)
    rng = np.random.default_rng(0)
    x = webgrad.tensor(rng.standard_normal((8, 16)), dtype=webgrad.float32, device=device)
    y = webgrad.tensor(rng.integers(0, 4, 8), device=device)
    losses = []
    for step in range(steps):
        loss = webgrad.nn.functional.cross_entropy(model(x), y)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        if record_memory is not None:
            record_memory(step)
    losses.append(loss.item())
    return losses


def test_memory_is_flat_over_1000_training_steps():
    seen = {}

    def record(step):
        if step in (20, 999):
            webgrad.webgpu.synchronize()
            seen[step] = webgrad.webgpu.memory_stats()

    _mlp_steps("webgpu", 1000, record)
    assert seen[999]["bytes_in_use"] == seen[20]["bytes_in_use"]
    assert seen[999]["bytes_in_use"] + seen[999]["bytes_pooled"] <= seen[20]["bytes_in_use"] + seen[20]["bytes_pooled"]


# -- completeness: every op has both kernels; every WGSL entry point is used -----------
def test_every_op_has_a_numpy_and_a_wgsl_kernel():
    from webgrad.ops.registry import OPS

    missing = [name for name, op in OPS.items() if "numpy" not in op.impls or "wgsl" not in op.impls]
    assert not missing, f"ops without a numpy or wgsl kernel: {missing}"


def _entry_points():
    from webgrad.backend.webgpu import source

    entries = set()
    for file in source.all_files():
        for name in re.findall(r"@compute[^\n]*\n?\s*fn\s+(\w+)", source.read(file)):
            entries.add((file, name))
    return entries


def test_every_wgsl_entry_point_compiles_and_runs():
    """Drive every kernel family once, then check every entry point of every
    .wgsl file has a compiled pipeline, so no shader is dead or broken."""
    from webgrad.backend.webgpu import backend as make_backend
    from webgrad.backend.webgpu import matmul as matmul_module

    dev = "webgpu"
    x = webgrad.randn(4, 5, device=dev)
    idx = webgrad.tensor([0, 2, 1], device=dev)
    (x + x, -x, webgrad.where(x > 0, x, x * 2))
    for fn in ("sum", "prod", "amax", "amin", "argmax", "argmin"):
        getattr(x, fn)(dim=1)
    x.softmax(1), x.log_softmax(1)
    x.cumsum(1), x.cumprod(0), webgrad.ones(2, 9000, device=dev).cumsum(1)  # scan.wgsl, all passes
    x.sort(1), webgrad.arange(1500.0, device=dev).sort()  # sort.wgsl: rank sort and bitonic network
    webgrad.ops.layer_norm_core(x, ndims=1)
    rows = webgrad.randn(4, 5, device=dev, requires_grad=True)
    webgrad.nn.functional.layer_norm(rows, (5,)).sum().backward()  # layer_norm.wgsl: its backward
    planes = webgrad.randn(2, 3, 4, 4, device=dev, requires_grad=True)
    scale, shift = webgrad.ones(3, device=dev, requires_grad=True), webgrad.zeros(3, device=dev, requires_grad=True)
    (webgrad.nn.functional.batch_norm(planes, None, None, scale, shift, training=True) ** 2).sum().backward()
    image = webgrad.randn(1, 2, 5, 5, device=dev, requires_grad=True)
    kernel = webgrad.randn(3, 2, 3, 3, device=dev, requires_grad=True)
    webgrad.nn.functional.conv2d(image, kernel, padding=1).sum().backward()  # conv.wgsl: all three passes
    webgrad.nn.functional.max_pool2d(image, 2).sum().backward()  # pool.wgsl: select, backward_cells
    webgrad.nn.functional.max_pool2d(image, 3, 1).sum().backward()  # overlapping windows: backward
    logits = webgrad.randn(4, 5, device=dev, requires_grad=True)
    webgrad.nn.functional.cross_entropy(logits, webgrad.tensor([0, 4, 1, 2], device=dev)).backward()
    for variant in ("register", "tiled", "eight"):
        matmul_module.VARIANT = variant
        try:
            (x @ x.T).numpy()
        finally:
            matmul_module.VARIANT = None
    x[idx].numpy()
    x.gather(1, webgrad.zeros(4, 2, dtype=webgrad.int64, device=dev))
    webgrad.zeros(5, 5, device=dev).scatter_add(0, idx.reshape(3, 1).expand(3, 5), x[:3])  # a thread per column
    webgrad.zeros(5, 5, dtype=webgrad.int8, device=dev).scatter_add(  # packed: a thread per word of out
        0, idx.reshape(3, 1).expand(3, 5), webgrad.ones(3, 5, dtype=webgrad.int8, device=dev))
    big = webgrad.zeros(70000, 2, device=dev)  # many duplicates: the atomic scatter path
    big.index_select(0, webgrad.zeros(70000, dtype=webgrad.int64, device=dev)).sum().numpy()
    w = webgrad.zeros(70000, 2, device=dev, requires_grad=True)
    w.index_select(0, webgrad.zeros(70000, dtype=webgrad.int64, device=dev)).sum().backward()
    y = x.clone()
    y[x > 0] = 0.0
    webgrad.rand(3, device=dev), webgrad.randn(3, device=dev), webgrad.randint(0, 5, (3,), device=dev)
    webgrad.nn.functional.dropout(webgrad.ones(3, device=dev), 0.5)  # random.wgsl: bernoulli
    for optimizer in (lambda p: webgrad.optim.SGD(p, lr=0.1), lambda p: webgrad.optim.SGD(p, lr=0.1, momentum=0.9),
                      lambda p: webgrad.optim.Adam(p), lambda p: webgrad.optim.Adam(p, amsgrad=True),
                      lambda p: webgrad.optim.RMSprop(p), lambda p: webgrad.optim.RMSprop(p, centered=True),
                      lambda p: webgrad.optim.RMSprop(p, momentum=0.9),
                      lambda p: webgrad.optim.RMSprop(p, centered=True, momentum=0.9)):
        p = webgrad.zeros(3, device=dev, requires_grad=True)
        p.grad = webgrad.ones(3, device=dev)
        optimizer([p]).step()
    from webgrad.backend.webgpu import qlinear

    weights, scale = webgrad.zeros(3, 5, dtype=webgrad.int8, device=dev), webgrad.tensor(0.5, device=dev)
    small = qlinear.SMALL_X
    for limit in (small, 0):  # qlinear.wgsl: both ways of quantizing x, then the int8 product
        qlinear.SMALL_X = limit
        try:
            webgrad.ao.quantization.quantized_linear(x, weights, scale, None).numpy()
        finally:
            qlinear.SMALL_X = small
    webgrad.webgpu.synchronize()
    keys = list(make_backend().device._pipelines)
    # Every pipeline is cached by its Program record (kernels.Program), none by a hand-built key.
    assert all(isinstance(key, Program) for key in keys), [k for k in keys if not isinstance(k, Program)]
    compiled = {(key.file, key.entry) for key in keys}
    unused = sorted(e for e in _entry_points() if e not in compiled)
    assert not unused, f"WGSL entry points never compiled/run: {unused}"


# -- training on webgpu against numpy -----------------------------------------------------
def _digits_run(model_factory, device, epochs):
    from demos.digits_mlp import train

    webgrad.manual_seed(0)
    model = model_factory()
    return train(model, device=device, epochs=epochs, log=None)


@pytest.mark.parametrize("name", ["mlp", "cnn"])
def test_digits_on_webgpu_matches_numpy(name):
    from demos.digits_cnn import DigitsCNN
    from demos.digits_mlp import build_model

    factory, epochs = (build_model, 12) if name == "mlp" else (DigitsCNN, 12)
    losses_gpu, accuracy_gpu = _digits_run(factory, "webgpu", epochs)
    losses_cpu, accuracy_cpu = _digits_run(factory, "cpu", epochs)
    assert accuracy_gpu >= 0.95, f"{name} on webgpu: test accuracy {accuracy_gpu:.3f}"
    # Same seed, same data order: the loss curves agree until float32 rounding drifts.
    np.testing.assert_allclose(losses_gpu[:20], losses_cpu[:20], rtol=1e-3, atol=1e-4)
    assert abs(np.mean(losses_gpu[-20:]) - np.mean(losses_cpu[-20:])) < 0.05


def test_uncaptured_errors_are_caught_by_the_suite():
    """The conftest hook fails a test when wgpu logs an uncaptured error; check
    the hook sees what wgpu's logger emits."""
    import logging

    from conftest import _webgpu_errors

    logging.getLogger("wgpu").error("synthetic uncaptured error")
    assert any("synthetic" in r.getMessage() for r in _webgpu_errors.records)
    _webgpu_errors.records.clear()


def test_device_errors_name_the_kernel():
    from webgrad.backend.webgpu import backend as make_backend
    from webgrad.backend.webgpu.device import DeviceError

    with pytest.raises(DeviceError, match="broken.wgsl"):
        make_backend().device.pipeline(("broken",), "fn oops( {", "main", {}, "broken.wgsl:main")
