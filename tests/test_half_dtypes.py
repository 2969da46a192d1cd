"""float16 and bfloat16: names, casts and cpu storage, checked against torch and numpy.

float16 is numpy's float16; bfloat16 is float32 storage rounded to bfloat16 after
every op (see webgrad.dtypes). On WebGPU both take 2 bytes an element
(backend/webgpu/geometry.KIND), computed in f32 and rounded as they are stored: the
same values as on the cpu.
"""
from __future__ import annotations

import numpy as np
import pytest

import webgrad
from conftest import float16_stored_as, need_module, requires_webgpu

VALUES = np.array([1.0, 3.14159, -1e-3, 65504.0, 7e4, 3.3e38, 3.4e38, -np.inf, np.nan, 1e-42,
                   0.1, 2.0 ** -130], dtype=np.float32)


def torch_round(values, name):
    torch = need_module("torch")
    return torch.tensor(values).to(getattr(torch, name)).float().numpy()


@pytest.mark.parametrize("name", ["float16", "bfloat16"])
def test_cast_rounds_like_torch(name):
    dtype = getattr(webgrad, name)
    rng = np.random.default_rng(0)
    values = np.concatenate([VALUES, rng.standard_normal(2000).astype(np.float32) * 100])
    tensor = webgrad.tensor(values).to(dtype)
    assert tensor.dtype is dtype and tensor.element_size() == 2
    np.testing.assert_array_equal(tensor.float().numpy(), torch_round(values, name))


def test_names_and_methods():
    x = webgrad.tensor([1.5, -2.25])
    assert webgrad.half is webgrad.float16
    assert x.half().dtype is webgrad.float16 and x.bfloat16().dtype is webgrad.bfloat16
    assert x.to(webgrad.float16).dtype is webgrad.float16
    assert x.half().float().dtype is webgrad.float32
    assert x.bfloat16().double().dtype is webgrad.float64
    assert x.half().long().tolist() == [1, -2]
    assert webgrad.zeros(2, dtype="half").dtype is webgrad.float16
    assert webgrad.from_numpy(np.ones(2, np.float16)).dtype is webgrad.float16
    assert webgrad.float16.is_floating_point and webgrad.bfloat16.is_floating_point


def test_numpy_of_half_tensors():
    x = webgrad.tensor([0.1, 2.0])
    assert x.half().numpy().dtype == np.float16
    bf = x.bfloat16().numpy()  # numpy has no bfloat16: float32 holding the bfloat16 values
    assert bf.dtype == np.float32
    np.testing.assert_array_equal(bf, torch_round(np.array([0.1, 2.0], np.float32), "bfloat16"))


@pytest.mark.parametrize("name", ["float16", "bfloat16"])
def test_ops_compute_in_float32_and_round_like_torch(name):
    torch = need_module("torch")
    rng = np.random.default_rng(1)
    a, b = (rng.standard_normal((5, 7)).astype(np.float32) for _ in range(2))
    tdtype = getattr(torch, name)
    ta, tb = torch.tensor(a).to(tdtype), torch.tensor(b).to(tdtype)
    wa, wb = webgrad.tensor(a).to(getattr(webgrad, name)), webgrad.tensor(b).to(getattr(webgrad, name))
    for ours, theirs in [(wa + wb, ta + tb), (wa * wb, ta * tb), (wa.exp(), ta.exp()),
                         (wa / wb, ta / tb)]:
        assert ours.dtype is getattr(webgrad, name)
        np.testing.assert_array_equal(ours.float().numpy(), theirs.float().numpy())
    # Reductions and matmul accumulate differently; compare within a couple of ulps.
    ulp = 2.0 ** -8 if name == "bfloat16" else 2.0 ** -11
    for ours, theirs in [(wa.sum(1), ta.sum(1)), (wa @ wb.t(), ta @ tb.t())]:
        np.testing.assert_allclose(ours.float().numpy(), theirs.float().numpy(), rtol=4 * ulp, atol=4 * ulp)
    # Results stay exactly representable.
    out = (wa * 1.001).float().numpy()
    np.testing.assert_array_equal(out, torch_round(out, name))


def test_promotion():
    h, b = webgrad.ones(2).half(), webgrad.ones(2).bfloat16()
    assert (h + b).dtype is webgrad.float32  # as torch: neither holds the other
    assert (h + webgrad.ones(2)).dtype is webgrad.float32
    assert (b + webgrad.ones(2, dtype=webgrad.float64)).dtype is webgrad.float64
    assert (h + 1.5).dtype is webgrad.float16
    assert (b * webgrad.tensor([2, 3])).dtype is webgrad.bfloat16


def test_gradient_in_half_precision():
    x = webgrad.tensor([1.0, 2.0, 3.0]).half().requires_grad_()
    (x * x).sum().backward()
    assert x.grad.dtype is webgrad.float16
    np.testing.assert_array_equal(x.grad.float().numpy(), [2.0, 4.0, 6.0])


@requires_webgpu
@pytest.mark.parametrize("name,storage", [("float16", "f16"), ("float16", "f16p"), ("bfloat16", "bf16")],
                         ids=["float16-f16", "float16-without-shader-f16", "bfloat16"])
def test_webgpu_half_computes_the_cpus_values(name, storage):
    """float16 is stored as f16 where the adapter has 'shader-f16' (llvmpipe does, SwiftShader in
    Chromium does not), else packed two to a u32 word (forced here); bfloat16 is always packed.
    Either way: casts
    round exactly as torch; exactly rounded ops (+ * /) equal the cpu's bit for bit;
    transcendental ones, products, reductions, softmax and an optimizer step on half weights
    agree within a few ulps (f32 approximations can tip a rounding)."""
    from webgrad.backend.webgpu import geometry

    if name == "float16" and storage == "f16" and geometry.KIND["float16"] != "f16":
        pytest.skip("this adapter lacks 'shader-f16'")  # llvmpipe has it
    with float16_stored_as(storage if name == "float16" else geometry.KIND["float16"]):
        _half_computes_the_cpus_values(name, storage)


def _half_computes_the_cpus_values(name, storage):
    dtype = getattr(webgrad, name)
    rng = np.random.default_rng(2)
    values = np.concatenate([VALUES, rng.standard_normal(500).astype(np.float32) * 100])
    on_gpu = webgrad.tensor(values, device="webgpu").to(dtype)
    assert on_gpu.dtype is dtype and on_gpu.device.type == "webgpu"
    assert on_gpu._data.kind == storage and on_gpu._data.nbytes == values.size * 2
    np.testing.assert_array_equal(on_gpu.float().cpu().numpy(), torch_round(values, name))
    np.testing.assert_array_equal(webgrad.tensor(values).to(dtype).to("webgpu").float().cpu().numpy(),
                                  torch_round(values, name))

    a, b = (rng.standard_normal((6, 9)).astype(np.float32) for _ in range(2))
    cpu = [webgrad.tensor(a).to(dtype), webgrad.tensor(b).to(dtype)]
    gpu = [t.to("webgpu") for t in cpu]
    exact = [lambda x, y: x + y, lambda x, y: x * y * 1.1 - 0.3, lambda x, y: x / y,
             lambda x, y: webgrad.where(x > 0, x, y), lambda x, y: x.float()]
    for f in exact:
        ours, want = f(*gpu), f(*cpu)
        assert ours.dtype is want.dtype
        np.testing.assert_array_equal(ours.float().cpu().numpy(), want.float().numpy())
    ulp = 2.0 ** -8 if name == "bfloat16" else 2.0 ** -11
    close = [lambda x, y: x.exp(), lambda x, y: x.sigmoid(), lambda x, y: x @ y.t(), lambda x, y: x.sum(1),
             lambda x, y: x.softmax(-1), lambda x, y: x.mean(0),
             lambda x, y: webgrad.nn.functional.layer_norm(x, (9,)), lambda x, y: x.cumsum(1)]
    for f in close:
        ours, want = f(*gpu), f(*cpu)
        assert ours.dtype is want.dtype is dtype
        got = ours.float().cpu().numpy()
        np.testing.assert_array_equal(got, torch_round(got, name))  # stored values are the dtype's
        np.testing.assert_allclose(got, want.float().numpy(), rtol=4 * ulp, atol=4 * ulp)
    for make in (lambda d: webgrad.full((5,), 0.1, dtype=dtype, device=d),
                 lambda d: webgrad.randn(50, dtype=dtype, device=d) * 3):
        got = make("webgpu").float().cpu().numpy()
        np.testing.assert_array_equal(got, torch_round(got, name))

    # An optimizer step writes half weights in place: they stay the dtype's values.
    weights = [webgrad.tensor(a[0]).to(dtype).to(d).requires_grad_() for d in ("cpu", "webgpu")]
    for w in weights:
        (w * w).sum().backward()
        webgrad.optim.Adam([w], lr=0.01).step()
    got = weights[1].detach().float().cpu().numpy()
    np.testing.assert_array_equal(got, torch_round(got, name))
    np.testing.assert_allclose(got, weights[0].detach().float().numpy(), rtol=2 * ulp, atol=2 * ulp)


@pytest.fixture
def widening_copies(monkeypatch) -> list:
    """(kind, size) of each array WebGPU converts to another kind: a kernel's widened copies of
    its inputs, or a result computed in f32 rounded into a narrow kind."""
    from webgrad.backend.webgpu import elementwise

    copies: list = []
    convert = elementwise.converted

    def counted(backend, array, kind):
        if array.kind != kind:
            copies.append((array.kind, array.numel()))
        return convert(backend, array, kind)

    monkeypatch.setattr(elementwise, "converted", counted)
    return copies


def assert_read_as_stored(copies, want, got, kind, ulps):
    """No array of a narrow kind was widened on the way (``copies``: widening_copies), and each
    webgpu result in ``got`` is the cpu's in ``want`` to ``ulps`` units in the last place of
    ``kind`` (relative to the result's largest value)."""
    assert not [n for k, n in copies if k != "f32"], copies
    ulp = 2.0 ** (-8 if kind == "bf16" else -11)
    for g, w in zip(got, want):
        np.testing.assert_allclose(g, w, rtol=ulps * ulp, atol=ulps * ulp * np.abs(w).max())


@requires_webgpu
@pytest.mark.parametrize("kind", ["f16", "f16p", "bf16"])
def test_webgpu_half_kernels_read_their_inputs_as_stored(widening_copies, kind):
    """Reductions, softmax, cross entropy, layer norm, cat, flip and a slice's gradient read f16,
    bfloat16 and packed float16 as stored (and softmax and layer norm write f16): no float32 copy
    of the input is made, only small results (a reduction's, the loss gradient per row) are
    converted; the cpu's values."""
    from webgrad.backend.webgpu import geometry

    if kind == "f16" and geometry.KIND["float16"] != "f16":
        pytest.skip("this adapter lacks 'shader-f16'")
    dtype = webgrad.bfloat16 if kind == "bf16" else webgrad.float16
    rng = np.random.default_rng(4)
    a = rng.standard_normal((64, 100)).astype(np.float32)
    labels = webgrad.tensor(rng.integers(0, 100, 64))
    results = []
    with float16_stored_as("f16p" if kind == "f16p" else geometry.KIND["float16"]):
        for device in ("cpu", "webgpu"):
            x = webgrad.tensor(a, device=device).to(dtype).requires_grad_()
            F = webgrad.nn.functional
            outs = [x.softmax(-1), x.log_softmax(0), F.layer_norm(x, (100,)), x.sum(1), x.amax(0),
                    F.cross_entropy(x, labels.to(x.device)), webgrad.cat([x, x[:, :7]], 1), x.flip((0,)),
                    x[3:40, ::2]]  # the last three: copies, and a slice's gradient (unslice)
            sum(o.float().sum() for o in outs).backward()
            assert device == "cpu" or x._data.kind == kind
            results.append([o.detach().float().cpu().numpy() for o in outs] + [x.grad.float().cpu().numpy()])
    assert all(n < a.size for k, n in widening_copies if k != "f32"), widening_copies  # no input-sized copy
    ulp = 2.0 ** (-8 if kind == "bf16" else -11)
    for got, want in zip(results[1], results[0]):
        np.testing.assert_allclose(got, want, rtol=4 * ulp, atol=4 * ulp)


@requires_webgpu
@pytest.mark.parametrize("path", ["direct", "product"])
@pytest.mark.parametrize("kind", ["f16", "f16p", "bf16"])
def test_webgpu_half_conv2d_reads_its_inputs_as_stored(monkeypatch, widening_copies, kind, path):
    """conv2d forward and both backward passes, and max pooling both ways, read f16, bfloat16 and
    packed float16 as stored (conv: direct kernel, and the im2col product on matmul.wgsl's
    readers): no float32 copy of x, w or the gradients (a packed result is computed in f32, then
    rounded), the cpu's values."""
    from webgrad.backend.webgpu import conv, geometry

    if kind == "f16" and geometry.KIND["float16"] != "f16":
        pytest.skip("this adapter lacks 'shader-f16'")
    dtype = webgrad.bfloat16 if kind == "bf16" else webgrad.float16
    monkeypatch.setattr(conv, "PRODUCT_MIN_MACS", 0 if path == "product" else 1 << 62)
    rng = np.random.default_rng(5)
    x, w = rng.standard_normal((2, 8, 9, 9)).astype(np.float32), rng.standard_normal((8, 4, 3, 3)).astype(np.float32)
    results = []
    with float16_stored_as("f16p" if kind == "f16p" else geometry.KIND["float16"]):
        for device in ("cpu", "webgpu"):
            xs, ws = (webgrad.tensor(a, device=device).to(dtype).requires_grad_() for a in (x, w))
            out = webgrad.nn.functional.conv2d(xs, ws, padding=1, groups=2)
            pooled = webgrad.nn.functional.max_pool2d(out, 2)
            weights = webgrad.arange(pooled.numel(), device=device).reshape(pooled.shape).cos()
            (pooled.float() * weights).sum().backward()
            assert out.dtype is dtype and pooled.dtype is dtype and xs.grad.dtype is dtype
            assert device == "cpu" or xs._data.kind == kind
            results.append([t.detach().float().cpu().numpy() for t in (out, pooled, xs.grad, ws.grad)])
    assert_read_as_stored(widening_copies, *results, kind, ulps=4)


@requires_webgpu
@pytest.mark.parametrize("variant", ["register", "tiled", "eight"])
@pytest.mark.parametrize("kind", ["bf16", "f16p"])
def test_webgpu_matmul_reads_packed_16_bit_floats(monkeypatch, widening_copies, kind, variant):
    """bfloat16, and float16 packed two to a word (an adapter without 'shader-f16'), are multiplied as
    stored, by every kernel variant and through vec4 and element reads: the only conversion is the
    f32 result rounded into the packed kind, and the values are the cpu's."""
    from webgrad.backend.webgpu import geometry, matmul as gpu_matmul

    monkeypatch.setattr(gpu_matmul, "VARIANT", variant)
    dtype = webgrad.bfloat16 if kind == "bf16" else webgrad.float16
    rng = np.random.default_rng(6)
    a, b = rng.standard_normal((24, 40)).astype(np.float32), rng.standard_normal((8, 40)).astype(np.float32)
    results = []
    with float16_stored_as("f16p" if kind == "f16p" else geometry.KIND["float16"]):
        for device in ("cpu", "webgpu"):
            x, w = webgrad.tensor(a, device=device).to(dtype), webgrad.tensor(b, device=device).to(dtype)
            outs = [x @ w.t(), x[:, 1:38] @ w[:, 1:38].t(), x.t()[3:7].t() @ w[:, 3:7].t()]  # vec4 and element reads
            if device == "webgpu":
                assert x._data.kind == kind and all(o.dtype is dtype for o in outs)
            results.append([o.float().cpu().numpy() for o in outs])
    assert_read_as_stored(widening_copies, *results, kind, ulps=2)


@requires_webgpu
@pytest.mark.parametrize("kind", ["f16", "f16p", "bf16"])
@pytest.mark.parametrize("name, kwargs", [("Adam", {"lr": 0.01}), ("AdamW", {"lr": 0.01, "amsgrad": True}),
                                          ("SGD", {"lr": 0.1, "momentum": 0.9, "nesterov": True}),
                                          ("RMSprop", {"lr": 0.01, "centered": True}), ("Adadelta", {})])
def test_webgpu_optimizers_update_half_parameters_as_stored(monkeypatch, widening_copies, kind, name, kwargs):
    """An optimizer updates float16 and bfloat16 parameters and states in place as stored (f32
    arithmetic, each value rounded once): no widened copies, the same bits as the widened run."""
    import importlib

    from webgrad.backend.webgpu import geometry

    if kind == "f16" and geometry.KIND["float16"] != "f16":
        pytest.skip("this adapter lacks 'shader-f16'")
    dtype = webgrad.bfloat16 if kind == "bf16" else webgrad.float16
    rng = np.random.default_rng(7)
    start, grads = rng.standard_normal(37).astype(np.float32), rng.standard_normal((3, 37)).astype(np.float32)

    def trained():
        with float16_stored_as("f16p" if kind == "f16p" else geometry.KIND["float16"]):
            w = webgrad.tensor(start, device="webgpu").to(dtype).requires_grad_()
            opt = getattr(webgrad.optim, name)([w], **kwargs)
            for g in grads:
                w.grad = webgrad.tensor(g, device="webgpu").to(dtype)
                opt.step()
            assert w._data.kind == kind
            return w.detach().float().cpu().numpy()

    as_stored = trained()
    assert not [n for k, n in widening_copies if k != "f32"], widening_copies
    backend = importlib.import_module("webgrad.backend.webgpu.backend")
    monkeypatch.delitem(backend._NARROW_AWARE, "optim.optim_step")  # the update on widened copies
    np.testing.assert_array_equal(as_stored, trained())
    assert [n for k, n in widening_copies if k != "f32"]  # that run did widen


@requires_webgpu
@pytest.mark.parametrize("scatter", ["scan", "atomic"])
@pytest.mark.parametrize("kind", ["f16", "f16p", "bf16", "i8", "u8", "i16"])
def test_webgpu_indexing_reads_narrow_kinds_as_stored(monkeypatch, widening_copies, kind, scatter):
    """An embedding lookup and its gradient, index_select, gather, index_add and scatter_add read
    and write the 16-bit floats and small integers as stored (index.wgsl moves their bits; the
    scatters sum in f32 or i32 and round or wrap as they store), through the deterministic scan
    and the atomic scatter: no widened copy of the table, the cpu's values (integers exactly)."""
    from webgrad.backend.webgpu import geometry, index

    if kind == "f16" and geometry.KIND["float16"] != "f16":
        pytest.skip("this adapter lacks 'shader-f16'")
    if scatter == "atomic":
        monkeypatch.setattr(index, "SCAN_MAX_WORK", 0)
        monkeypatch.setattr(index, "SCAN_MAX_RATIO", 0)
    floating = kind in ("f16", "f16p", "bf16")
    dtype = {"f16": webgrad.float16, "f16p": webgrad.float16, "bf16": webgrad.bfloat16, "i8": webgrad.int8,
             "u8": webgrad.uint8, "i16": webgrad.int16}[kind]
    rng = np.random.default_rng(8)
    table = (rng.standard_normal((13, 6)) * 20).astype(np.float32)
    rows, columns = rng.integers(0, 13, (4, 5)), rng.integers(0, 6, (13, 3))  # rows repeat: sums in the gradient
    added = (rng.standard_normal((20, 6)) * 20).astype(np.float32)
    results = []
    with float16_stored_as("f16p" if kind == "f16p" else geometry.KIND["float16"]):
        for device in ("cpu", "webgpu"):
            x = webgrad.tensor(table, device=device).to(dtype)
            i, j = webgrad.tensor(rows, device=device), webgrad.tensor(columns, device=device)
            src = webgrad.tensor(added, device=device).to(dtype)
            outs = [x.index_select(0, i.flatten()), x.gather(1, j), x.index_add(0, i.flatten(), src),
                    x.scatter_add(1, j, src[:13, :3]), x[::2][i[:2] // 2]]  # the last: a strided table
            if floating:
                x.requires_grad_()
                looked_up = webgrad.nn.functional.embedding(i, x)
                weights = webgrad.arange(looked_up.numel(), device=device).reshape(looked_up.shape).cos()
                (looked_up.float() * weights).sum().backward()
                outs += [looked_up, x.grad]
            if device == "webgpu":
                assert x._data.kind == kind and all(o.dtype is dtype for o in outs)
            results.append([o.detach().float().cpu().numpy() for o in outs])
    if floating:
        assert_read_as_stored(widening_copies, *results, kind, ulps=4)
    else:
        assert not [n for k, n in widening_copies if k != "i32"], widening_copies
        for got, want in zip(*results[::-1]):
            np.testing.assert_array_equal(got, want)
