"""WebGPU index, random and optimizer kernels (index.wgsl, random.wgsl, optim.wgsl)
against the numpy backend."""
from __future__ import annotations


import numpy as np
import pytest

import webgrad
from conftest import requires_webgpu
import webgrad.nn.functional as F
from webgrad.backend.webgpu import index as index_launchers
from webgrad.ops.indexing import gather, index_add, index_select, scatter_add, take
from webgrad.optim import SGD, Adam, AdamW, RMSprop


pytestmark = requires_webgpu


@pytest.fixture(params=["columns", "scan", "atomic"])
def scatter_path(request, monkeypatch):
    """Run a test once per scatter strategy by moving the switch-over points."""
    if request.param != "columns":
        monkeypatch.setattr(index_launchers, "COLUMNS_MAX_SPAN", 0)
    if request.param == "atomic":
        monkeypatch.setattr(index_launchers, "SCAN_MAX_RATIO", 0)
        monkeypatch.setattr(index_launchers, "SCAN_MAX_WORK", 0)
    elif request.param == "scan":
        monkeypatch.setattr(index_launchers, "SCAN_MAX_WORK", 1 << 60)
    return request.param


def pair(array, **kwargs):
    """The same data on cpu and on webgpu."""
    return webgrad.tensor(array, **kwargs), webgrad.tensor(array, device="webgpu", **kwargs)


def close(gpu, cpu, atol=1e-5):
    assert gpu.device == "webgpu"
    np.testing.assert_allclose(gpu.detach().numpy(), cpu.detach().numpy(), rtol=1e-5, atol=atol)


rng = np.random.default_rng(0)


# -- take / index_select / embedding --------------------------------------------------
@pytest.mark.parametrize("index", [np.array([2, 0, 4, 4, 1]), np.array([[1, 3], [0, 0], [4, 2]]),
                                   np.array(3), np.zeros((0,), dtype=np.int64)])
def test_take_matches_cpu(index):
    x_cpu, x_gpu = pair(rng.standard_normal((5, 3, 2)).astype(np.float32))
    i_cpu, i_gpu = pair(index)
    out_gpu, out_cpu = take(x_gpu, i_gpu), take(x_cpu, i_cpu)
    assert out_gpu.shape == out_cpu.shape
    if out_cpu.numel():  # the backend cannot read back an empty webgpu tensor yet
        close(out_gpu, out_cpu)


def test_take_reads_strided_inputs_and_other_dtypes():
    x = rng.standard_normal((4, 6)).astype(np.float32)
    x_cpu, x_gpu = pair(x)
    i_cpu, i_gpu = pair(np.array([3, 1, 1, 0]))
    close(take(x_gpu.permute(1, 0), i_gpu), take(x_cpu.permute(1, 0), i_cpu))            # permuted
    close(take(x_gpu.flip(0), i_gpu), take(x_cpu.flip(0), i_cpu))    # negative strides
    close(take(x_gpu[:, 1::2], i_gpu), take(x_cpu[:, 1::2], i_cpu))  # sliced
    expanded_cpu, expanded_gpu = i_cpu.reshape(1, 4).expand(3, 4), i_gpu.reshape(1, 4).expand(3, 4)
    close(take(x_gpu, expanded_gpu), take(x_cpu, expanded_cpu))      # broadcast index
    for dtype in (webgrad.int32, webgrad.int64, webgrad.bool):
        values = rng.integers(0, 2, size=(4, 3))
        v_cpu, v_gpu = pair(values, dtype=dtype)
        np.testing.assert_array_equal(take(v_gpu, i_gpu).numpy(), take(v_cpu, i_cpu).numpy())


def test_out_of_range_index_is_reported_at_the_next_read():
    """The device never reads out of bounds: an out-of-range index reads 0 and sets
    a flag that the next readback raises as an IndexError naming the op (checking
    on the host at each op would stall the queue), after which all works again."""
    x = webgrad.tensor([[1.0, 2.0], [3.0, 4.0]], device="webgpu")
    out = take(x, webgrad.tensor([1, 7, -2, -9], device="webgpu"))
    with pytest.raises(IndexError, match="out of bounds in take"):
        out.numpy()
    np.testing.assert_array_equal(take(x, webgrad.tensor([1, 0], device="webgpu")).numpy(), [[3, 4], [1, 2]])
    with pytest.raises(IndexError, match="out of bounds in take"):  # take does not wrap negatives (getitem does)
        take(x, webgrad.tensor([-1], device="webgpu")).numpy()
    bad = x[webgrad.tensor([7], device="webgpu")]
    with pytest.raises(IndexError, match="out of bounds"):
        bad.sum().item()
    # gather does not wrap negative indices (the cpu backend rejects them)
    index = webgrad.tensor([[0, -1], [2, 1]], device="webgpu")
    with pytest.raises(IndexError, match="out of bounds in gather"):
        gather(x, 1, index).numpy()
    # scatter_add skips an out-of-range index without touching memory, and reports it
    with pytest.raises(IndexError, match="out of bounds in scatter_add"):
        scatter_add(x, 1, index, webgrad.ones(2, 2, device="webgpu")).numpy()
    assert x.sum().item() == 10.0  # the flag was cleared


def test_a_read_after_an_index_op_is_one_round_trip():
    """The error flag comes back with the tensor (one map in the page, where each costs ms)."""
    device = webgrad.backend.get_backend("webgpu").device
    x = webgrad.tensor([[1.0, 2.0], [3.0, 4.0]], device="webgpu")
    picked = take(x, webgrad.tensor([1, 0], device="webgpu"))
    reads = device.reads
    np.testing.assert_array_equal(picked.numpy(), [[3, 4], [1, 2]])
    assert device.reads == reads + 1
    empty = take(x, webgrad.tensor([7], device="webgpu"))[:0]  # no bytes of its own to read
    with pytest.raises(IndexError, match="out of bounds in take"):
        empty.numpy()
    assert device.reads == reads + 2


@pytest.mark.parametrize("dim", [0, 1, -1])
def test_index_select_matches_cpu(dim):
    x_cpu, x_gpu = pair(rng.standard_normal((4, 5, 3)).astype(np.float32))
    i_cpu, i_gpu = pair(np.array([2, 0, 2]))
    close(index_select(x_gpu, dim, i_gpu), index_select(x_cpu, dim, i_cpu))


def test_embedding_lookup_and_gradient_with_duplicates(scatter_path):
    weight = rng.standard_normal((10, 4)).astype(np.float32)
    ids = np.array([[1, 3, 3, 9], [0, 1, 1, 1]])
    grads = []
    for device in ("cpu", "webgpu"):
        w = webgrad.tensor(weight, device=device, requires_grad=True)
        out = F.embedding(webgrad.tensor(ids, device=device), w)
        (out * out).sum().backward()
        grads.append((out, w.grad))
    close(grads[1][0], grads[0][0])
    close(grads[1][1], grads[0][1])


# -- index_add / gather / scatter_add -------------------------------------------------
@pytest.mark.parametrize("index", [np.array([0, 3, 3, 1, 3, 0]), np.array([[2, 2], [2, 3]])])
def test_index_add_accumulates_duplicates(index, scatter_path):
    base_cpu, base_gpu = pair(rng.standard_normal((4, 3)).astype(np.float32))
    i_cpu, i_gpu = pair(index)
    src_cpu, src_gpu = pair(rng.standard_normal(index.shape + (3,)).astype(np.float32))
    close(index_add(base_gpu, i_gpu, src_gpu), index_add(base_cpu, i_cpu, src_cpu))
    # a broadcast (stride-0) src and an integer base
    row_cpu, row_gpu = pair(np.arange(3, dtype=np.float32))
    close(index_add(base_gpu, i_gpu, row_gpu.expand(*index.shape, 3)),
          index_add(base_cpu, i_cpu, row_cpu.expand(*index.shape, 3)))
    ints_cpu, ints_gpu = pair(np.arange(12).reshape(4, 3), dtype=webgrad.int32)
    src_int_cpu, src_int_gpu = pair(rng.integers(-5, 5, size=index.shape + (3,)), dtype=webgrad.int32)
    np.testing.assert_array_equal(index_add(ints_gpu, i_gpu, src_int_gpu).numpy(),
                                  index_add(ints_cpu, i_cpu, src_int_cpu).numpy())


@pytest.mark.parametrize("columns_max_span", [0, 1 << 14], ids=["scan", "columns"])
def test_index_add_scan_and_columns_are_bit_exact_with_numpy(monkeypatch, columns_max_span):
    monkeypatch.setattr(index_launchers, "SCAN_MAX_WORK", 1 << 60)
    monkeypatch.setattr(index_launchers, "COLUMNS_MAX_SPAN", columns_max_span)
    base_cpu, base_gpu = pair(np.zeros((3, 2), dtype=np.float32))
    index = rng.integers(0, 3, size=200)
    i_cpu, i_gpu = pair(index)
    src_cpu, src_gpu = pair((rng.standard_normal((200, 2)) * 1e3).astype(np.float32))
    np.testing.assert_array_equal(index_add(base_gpu, i_gpu, src_gpu).numpy(),
                                  index_add(base_cpu, i_cpu, src_cpu).numpy())


def test_scatter_scans_unless_the_scan_costs_far_more_than_atomics(monkeypatch):
    from webgrad.backend.webgpu import backend

    entries = []
    dispatch = type(backend()).dispatch_1d
    monkeypatch.setattr(type(backend()), "dispatch_1d",
                        lambda self, file, entry, *a: entries.append(entry) or dispatch(self, file, entry, *a))
    cases = [((300, 8), 5), ((300, 8), 20_000), ((20_000, 8), 40)]  # (base shape, index length)
    for dtype in (webgrad.float32, webgrad.float16):
        for shape, count in cases:
            index = webgrad.tensor(rng.integers(0, shape[0], size=count), device="webgpu")
            index_add(webgrad.zeros(*shape, device="webgpu", dtype=dtype), index,
                      webgrad.ones(count, 8, device="webgpu", dtype=dtype))
    scatters = [e for e in entries if e.startswith("scatter_add")]
    # float32, by columns up to COLUMNS_MAX_SPAN index values (8 threads walking 5, then 40 values);
    # float16 (two to a word): a short index scans; 48M scan steps vs 160k atomic adds: atomic; a long
    # base with a short index: atomic
    assert scatters == ["scatter_add_columns", "scatter_add_atomic", "scatter_add_columns",
                        "scatter_add", "scatter_add_atomic", "scatter_add_atomic"]


@pytest.mark.parametrize("dim", [0, 1, 2])
def test_gather_matches_cpu(dim):
    x = rng.standard_normal((4, 5, 3)).astype(np.float32)
    shape = [3, 4, 2]
    shape[dim] = 6
    index = rng.integers(-x.shape[dim], x.shape[dim], size=shape)
    index = np.where(index < 0, index + x.shape[dim], index)
    x_cpu, x_gpu = pair(x)
    i_cpu, i_gpu = pair(index)
    close(gather(x_gpu, dim, i_gpu), gather(x_cpu, dim, i_cpu))
    close(gather(x_gpu.flip(1), dim, i_gpu), gather(x_cpu.flip(1), dim, i_cpu))


@pytest.mark.parametrize("dim", [0, 1, 2])
def test_scatter_add_accumulates_duplicates(dim, scatter_path):
    x = rng.standard_normal((4, 5, 3)).astype(np.float32)
    shape = [3, 4, 2]
    shape[dim] = 7  # longer than x along dim: duplicates for sure
    index = rng.integers(0, x.shape[dim], size=shape)
    src = rng.standard_normal([n + 1 for n in shape]).astype(np.float32)  # larger than index
    x_cpu, x_gpu = pair(x)
    i_cpu, i_gpu = pair(index)
    s_cpu, s_gpu = pair(src)
    close(scatter_add(x_gpu, dim, i_gpu, s_gpu), scatter_add(x_cpu, dim, i_cpu, s_cpu))
    close(scatter_add(x_gpu.permute(2, 1, 0).permute(2, 1, 0), dim, i_gpu, s_gpu.flip(0)),
          scatter_add(x_cpu, dim, i_cpu, s_cpu.flip(0)))


# -- gradients --------------------------------------------------------------------------
def _grads(fn, *arrays):
    """fn's output and the gradients of sum(fn * weights) on both devices."""
    results = []
    for device in ("cpu", "webgpu"):
        inputs = [webgrad.tensor(a, device=device, requires_grad=True) for a in arrays]
        out = fn(*inputs)
        weights = webgrad.tensor(np.linspace(-1, 1, out.numel(), dtype=np.float32).reshape(tuple(out.shape)),
                                 device=device)
        (out * weights).sum().backward()
        results.append([out] + [t.grad for t in inputs])
    for gpu, cpu in zip(results[1], results[0]):
        close(gpu, cpu)


def test_gradients_through_take_gather_scatter_and_getitem(scatter_path):
    x = rng.standard_normal((5, 4)).astype(np.float32)
    src = rng.standard_normal((3, 4)).astype(np.float32)

    def index(device, values):
        return webgrad.tensor(np.array(values), device=device)

    _grads(lambda t: take(t, index(t.device, [[4, 0], [4, 4]])), x)
    _grads(lambda t: gather(t, 1, index(t.device, [[0, 0, 3]] * 5)), x)
    _grads(lambda t: gather(t, 0, index(t.device, [[1, 1, 0, 4], [1, 2, 2, 2]])), x)
    _grads(lambda t, s: scatter_add(t, 0, index(t.device, [[0, 1, 1, 4]] * 3), s), x, src)
    _grads(lambda t: t[index(t.device, [3, 3, 1]), 1:], x)
    _grads(lambda t: t[:, index(t.device, [[0, 3], [3, 3]])], x)


# -- x[key] and x[key] = value ---------------------------------------------------------
GETITEM_KEYS = [
    lambda d: webgrad.tensor([2, 0, -1], device=d),
    lambda d: (slice(None), webgrad.tensor([[1, 0], [3, 3]], device=d)),
    lambda d: (webgrad.tensor([0, 2], device=d), slice(1, None), webgrad.tensor([1, 0], device=d)),
    lambda d: (webgrad.tensor([0, 2], device=d), webgrad.tensor([[1], [3]], device=d)),
    lambda d: (1, webgrad.tensor([3, 0], device=d)),
    lambda d: (Ellipsis, [0, 0, 1]),
    lambda d: (None, webgrad.tensor([1], device=d), None),
    lambda d: webgrad.tensor(np.arange(60).reshape(3, 4, 5) % 3 == 0, device=d),
    lambda d: (webgrad.tensor([True, False, True], device=d), 2),
    lambda d: (slice(None), webgrad.tensor(np.eye(4, 5, dtype=bool), device=d)),
]


@pytest.mark.parametrize("key", GETITEM_KEYS)
def test_getitem_with_index_tensors_and_masks(key):
    x_cpu, x_gpu = pair(np.arange(60, dtype=np.float32).reshape(3, 4, 5))
    close(x_gpu[key("webgpu")], x_cpu[key("cpu")])
    close(x_gpu.flip(2)[key("webgpu")], x_cpu.flip(2)[key("cpu")])  # a strided source


SETITEM_CASES = [
    (lambda d: webgrad.tensor(np.arange(60).reshape(3, 4, 5) % 4 == 1, device=d), lambda d: -1.0),
    (lambda d: webgrad.tensor([2, 0], device=d), lambda d: webgrad.ones(4, 5, device=d) * 7),
    (lambda d: (slice(None), webgrad.tensor([3, 1], device=d)), lambda d: webgrad.arange(5.0, device=d)),
    (lambda d: (webgrad.tensor([0, 2, 1], device=d), webgrad.tensor([1, 1, 0], device=d), 4),
     lambda d: webgrad.tensor([10.0, 20.0, 30.0], device=d)),
    (lambda d: (webgrad.tensor([True, False, True], device=d), slice(None, None, 2)), lambda d: 5.0),
    (lambda d: ([1], Ellipsis, [4, 0]), lambda d: webgrad.tensor([[8.0], [9.0]], device=d)),
]


@pytest.mark.parametrize("key, value", SETITEM_CASES)
def test_setitem_with_index_tensors_and_masks(key, value):
    x_cpu, x_gpu = pair(np.arange(60, dtype=np.float32).reshape(3, 4, 5))
    x_cpu[key("cpu")] = value("cpu")
    x_gpu[key("webgpu")] = value("webgpu")
    close(x_gpu, x_cpu)


def test_setitem_through_a_strided_view_and_from_itself():
    x_cpu, x_gpu = pair(np.arange(24, dtype=np.float32).reshape(4, 6))
    view_cpu, view_gpu = x_cpu.permute(1, 0)[1:], x_gpu.permute(1, 0)[1:]      # shape (5, 4), strides (1, 6), offset 1
    view_cpu[webgrad.tensor([0, 4])] = -1.0
    view_gpu[webgrad.tensor([0, 4], device="webgpu")] = -1.0
    close(x_gpu, x_cpu)
    x_cpu[webgrad.tensor([3, 0])] = x_cpu[1:3]               # value read from the same buffer
    x_gpu[webgrad.tensor([3, 0], device="webgpu")] = x_gpu[1:3]
    close(x_gpu, x_cpu)
    ints_cpu, ints_gpu = pair(np.arange(6), dtype=webgrad.int64)
    ints_cpu[ints_cpu > 2] = 0
    ints_gpu[ints_gpu > 2] = 0
    np.testing.assert_array_equal(ints_gpu.numpy(), ints_cpu.numpy())


# -- grid folding -----------------------------------------------------------------------
def test_index_kernels_fold_large_grids(monkeypatch):
    """8 workgroups per dimension = 2048 threads: every launch below folds into (x, y)."""
    x = rng.standard_normal((60, 50)).astype(np.float32)
    index = rng.integers(0, 60, size=(90,))
    x_cpu, x_gpu = pair(x)
    i_cpu, i_gpu = pair(index)
    g_index = rng.integers(0, 50, size=(60, 70))
    g_cpu, g_gpu = pair(g_index)
    src_cpu, src_gpu = pair(rng.standard_normal((60, 70)).astype(np.float32))
    rows_cpu, rows_gpu = pair(rng.standard_normal((90, 50)).astype(np.float32))
    with webgrad.webgpu.override_limits(max_compute_workgroups_per_dimension=8):
        close(take(x_gpu, i_gpu), take(x_cpu, i_cpu))
        close(gather(x_gpu, 1, g_gpu), gather(x_cpu, 1, g_cpu))
        for columns, ratio, work in ((1 << 14, 0, 0), (0, 0, 1 << 60), (0, 0, 0)):  # columns, scan, atomic
            monkeypatch.setattr(index_launchers, "COLUMNS_MAX_SPAN", columns)
            monkeypatch.setattr(index_launchers, "SCAN_MAX_RATIO", ratio)
            monkeypatch.setattr(index_launchers, "SCAN_MAX_WORK", work)
            close(scatter_add(x_gpu, 1, g_gpu, src_gpu), scatter_add(x_cpu, 1, g_cpu, src_cpu), atol=1e-4)
            close(index_add(x_gpu, i_gpu, rows_gpu), index_add(x_cpu, i_cpu, rows_cpu), atol=1e-4)
        mask = x > 0.3
        y_cpu, y_gpu = pair(x)
        y_cpu[webgrad.tensor(mask)] = 0.0
        y_gpu[webgrad.tensor(mask, device="webgpu")] = 0.0
        close(y_gpu, y_cpu)
        webgrad.manual_seed(5)
        folded = webgrad.rand(40000, device="webgpu").numpy()
    webgrad.manual_seed(5)
    np.testing.assert_array_equal(webgrad.rand(40000, device="webgpu").numpy(), folded)


# -- random -------------------------------------------------------------------------------
def _philox4x32(counter, key):
    """Reference Philox4x32-10 on the host (Random123), vectorized over counter[0]."""
    mask = np.uint64(0xFFFFFFFF)
    c = [np.asarray(v, dtype=np.uint64) for v in counter]
    k = [np.uint64(v) for v in key]
    for _ in range(10):
        p0, p1 = np.uint64(0xD2511F53) * c[0], np.uint64(0xCD9E8D57) * c[2]
        c = [(p1 >> np.uint64(32)) ^ c[1] ^ k[0], p1 & mask, (p0 >> np.uint64(32)) ^ c[3] ^ k[1], p0 & mask]
        k = [(k[0] + np.uint64(0x9E3779B9)) & mask, (k[1] + np.uint64(0xBB67AE85)) & mask]
    return np.stack(c, axis=-1)


def test_philox_reference_matches_random123_known_answers():
    got = _philox4x32([0x243F6A88, 0x85A308D3, 0x13198A2E, 0x03707344], [0xA4093822, 0x299F31D0])
    assert [int(v) for v in got] == [0xD16CFE09, 0x94FDCCEB, 0x5001E420, 0x24126EA1]
    assert [int(v) for v in _philox4x32([0, 0, 0, 0], [0, 0])] == [0x6627E8D5, 0xE169C58D, 0xBC57AC4C, 0x9B00DBD8]


def test_rand_is_philox_on_the_device(monkeypatch):
    seed = 0xC0FFEE42
    monkeypatch.setattr(webgrad.random, "next_device_seed", lambda: seed)
    n = 1001
    u = webgrad.rand(n, device="webgpu").numpy()
    bits = _philox4x32([np.arange(-(-n // 4)), 0, 0, 0], [seed, 0]).reshape(-1)[:n]
    np.testing.assert_array_equal(u, (bits >> np.uint64(8)).astype(np.float32) * np.float32(2.0 ** -24))


def test_same_seed_same_numbers():
    draws = []
    for _ in range(2):
        webgrad.manual_seed(1234)
        draws.append([webgrad.rand(3, 7, device="webgpu").numpy(), webgrad.randn(1001, device="webgpu").numpy(),
                      webgrad.randint(-4, 9, (50,), device="webgpu").numpy()])
    for a, b in zip(*draws):
        np.testing.assert_array_equal(a, b)
    assert not np.array_equal(webgrad.rand(3, 7, device="webgpu").numpy(), draws[0][0])


def test_random_distributions():
    webgrad.manual_seed(0)
    z = webgrad.randn(100_000, device="webgpu").numpy()
    assert z.dtype == np.float32 and np.isfinite(z).all()
    assert abs(z.mean()) < 0.01 and abs(z.std() - 1) < 0.01
    assert abs((np.abs(z) < 1).mean() - 0.6827) < 0.01  # the shape too, not only two moments
    u = webgrad.rand(100_000, device="webgpu").numpy()
    assert u.min() >= 0 and u.max() < 1 and abs(u.mean() - 0.5) < 0.005
    assert np.histogram(u, bins=10, range=(0, 1))[0].min() > 9_500
    n = webgrad.randn(20_000, device="webgpu") * 2 + 3
    assert abs(n.numpy().mean() - 3) < 0.05
    assert abs(webgrad.empty(20_000, device="webgpu").normal_(3.0, 2.0).numpy().std() - 2) < 0.05
    r = webgrad.randint(-3, 5, (40_000,), device="webgpu")
    assert r.dtype is webgrad.int64
    counts = np.bincount(r.numpy() + 3, minlength=8)
    assert r.numpy().min() == -3 and r.numpy().max() == 4 and counts.min() > 4_500


def test_dropout_mask_never_touches_the_host(monkeypatch):
    from webgrad.backend.webgpu import backend

    x = webgrad.ones(1000, device="webgpu")
    upload = type(backend()).from_numpy
    uploads = []
    monkeypatch.setattr(type(backend()), "from_numpy", lambda self, a, d: uploads.append(a.size) or upload(self, a, d))
    monkeypatch.setattr(type(backend()), "to_numpy", lambda *a: pytest.fail("read back to the host"))
    webgrad.manual_seed(3)
    y = F.dropout(x, p=0.25)
    monkeypatch.undo()
    assert all(size == 1 for size in uploads)  # scalars (p, the scale) only, never a mask
    kept = y.numpy()
    assert set(np.unique(kept)) <= {0.0, np.float32(1 / 0.75)}
    assert abs((kept == 0).mean() - 0.25) < 0.06


# -- optimizers ----------------------------------------------------------------------------
OPTIMIZERS = [
    (SGD, {"lr": 0.1}),
    (SGD, {"lr": 0.1, "momentum": 0.9, "nesterov": True, "weight_decay": 0.01}),
    (SGD, {"lr": 0.05, "momentum": 0.8, "dampening": 0.2, "maximize": True}),
    (Adam, {"lr": 0.01}),
    (Adam, {"lr": 0.01, "amsgrad": True, "weight_decay": 0.1}),
    (AdamW, {"lr": 0.01, "betas": (0.3, 0.99)}),
    (RMSprop, {"lr": 0.01}),
    (RMSprop, {"lr": 0.01, "centered": True}),
    (RMSprop, {"lr": 0.01, "momentum": 0.9, "weight_decay": 0.1}),
    (RMSprop, {"lr": 0.01, "centered": True, "momentum": 0.5, "alpha": 0.3, "maximize": True}),
]


def _train(device, cls, options, params, grads):
    ps = [webgrad.tensor(p, device=device, requires_grad=True) for p in params]
    opt = cls(ps, **options)
    for step_grads in grads:
        for p, g in zip(ps, step_grads):
            p.grad = None if g is None else webgrad.tensor(g, device=device)
        opt.step()
    return ps, opt


@pytest.mark.parametrize("cls, options", OPTIMIZERS)
def test_optimizer_steps_match_cpu(cls, options):
    shapes = [(3, 4), (5,), (), (3000,)]
    params = [rng.standard_normal(s).astype(np.float32) for s in shapes]
    grads = [[rng.standard_normal(s).astype(np.float32) for s in shapes] for _ in range(5)]
    grads[2][1] = None  # one parameter skips a step
    cpu, cpu_opt = _train("cpu", cls, options, params, grads)
    with webgrad.webgpu.override_limits(max_compute_workgroups_per_dimension=8):
        gpu, gpu_opt = _train("webgpu", cls, options, params, grads)
    for p_gpu, p_cpu in zip(gpu, cpu):
        close(p_gpu, p_cpu)
    for s_gpu, s_cpu in zip(gpu_opt.state.values(), cpu_opt.state.values()):
        for name, value in s_cpu.items():
            if isinstance(value, webgrad.Tensor):
                close(s_gpu[name], value)


def test_optimizer_reads_a_broadcast_gradient_and_an_offset_parameter():
    from webgrad.backend import get_backend
    from webgrad.optim.updates import ADAM_STEP, apply_inplace

    attrs = {"lr": 0.01, "beta1": 0.9, "beta2": 0.999, "eps": 1e-8, "weight_decay": 0.0,
             "decoupled_weight_decay": False, "maximize": False, "step_size": 0.1, "bias_correction2_sqrt": 0.05}
    results = []
    for device in ("cpu", "webgpu"):
        storage = webgrad.tensor(np.arange(8, dtype=np.float32), device=device)
        param = storage[3:7]  # a contiguous view at offset 3
        exp_avg, exp_avg_sq = webgrad.zeros(4, device=device), webgrad.zeros(4, device=device)
        grad = webgrad.tensor([0.5], device=device).expand(4)
        apply_inplace(ADAM_STEP, param, exp_avg, exp_avg_sq, grad, **attrs)
        get_backend(device).synchronize()
        results.append((storage, exp_avg, exp_avg_sq))
    for gpu, cpu in zip(*results[::-1]):
        close(gpu, cpu)
