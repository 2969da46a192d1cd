"""Tensors larger than one storage binding on WebGPU (backend/webgpu/large.py).

Most tests lower the adapter's ``maxStorageBufferBindingSize`` to 64 KiB with
``override_limits``, so every splitting path runs on small tensors against the cpu;
``check_bindings`` would raise if any kernel still bound such a tensor whole, so a
passing run is also proof that each op on the way split. One test trains a real
embedding of 144 MiB, past llvmpipe's 128 MiB binding limit.

Under CI=true a missing adapter fails in conftest; elsewhere this file skips.
"""
from __future__ import annotations

import numpy as np
import pytest

import webgrad
from webgrad import nn
from conftest import requires_webgpu

pytestmark = requires_webgpu
SMALL = 64 * 1024  # bytes per binding in the tests below


@pytest.fixture
def small_bindings():
    with webgrad.webgpu.override_limits(max_storage_buffer_binding_size=SMALL) as limits:
        yield limits


def _train_embedding(device, optimizer, steps=3):
    """A 3000 x 24 table (288 KB) and a head, trained on fixed batches; the final weights."""
    webgrad.manual_seed(0)
    table, head = nn.Embedding(3000, 24), nn.Linear(24, 5)
    table.to(device)
    head.to(device)
    params = [*table.parameters(), *head.parameters()]
    opt = optimizer(params)
    rng = np.random.default_rng(0)
    for _ in range(steps):
        index = webgrad.tensor(rng.integers(0, 3000, (16, 7)), device=device)
        target = webgrad.tensor(rng.integers(0, 5, (16,)), device=device)
        loss = nn.functional.cross_entropy(head(table(index).mean(1)), target)
        opt.zero_grad()
        loss.backward()
        opt.step()
    return table.weight.detach().cpu().numpy(), loss.item()


@pytest.mark.parametrize("optimizer", [
    lambda p: webgrad.optim.Adam(p, lr=0.01),
    lambda p: webgrad.optim.SGD(p, lr=0.1, momentum=0.9, weight_decay=1e-3),
    lambda p: webgrad.optim.AdamW(p, lr=0.01),
], ids=["adam", "sgd_momentum", "adamw"])
def test_embedding_larger_than_a_binding_trains_like_cpu(small_bindings, optimizer):
    want, want_loss = _train_embedding("cpu", optimizer)
    got, got_loss = _train_embedding("webgpu", optimizer)
    assert want.nbytes > 4 * SMALL  # the table, its gradient and the optimizer state all split
    np.testing.assert_allclose(got, want, atol=2e-6)
    assert got_loss == pytest.approx(want_loss, rel=1e-5)


def test_random_draws_split_into_windows_give_the_same_numbers(small_bindings):
    """Each window draws its own part of one Philox stream: the numbers equal one whole draw."""
    with webgrad.webgpu.override_limits(max_storage_buffer_binding_size=1 << 27):
        webgrad.manual_seed(3)
        whole = webgrad.randn(100_000, device="webgpu").numpy()
        webgrad.manual_seed(3)
        ints = webgrad.randint(0, 1000, (100_000,), device="webgpu").numpy()
    webgrad.manual_seed(3)
    np.testing.assert_array_equal(webgrad.randn(100_000, device="webgpu").numpy(), whole)
    webgrad.manual_seed(3)
    np.testing.assert_array_equal(webgrad.randint(0, 1000, (100_000,), device="webgpu").numpy(), ints)
    webgrad.manual_seed(3)
    table = webgrad.empty(400, 250, device="webgpu").normal_()
    assert abs(float(table.mean())) < 0.02 and abs(float(table.std()) - 1) < 0.02


def test_elementwise_views_and_broadcasts_split(small_bindings):
    rng = np.random.default_rng(1)
    a = rng.standard_normal((300, 200)).astype(np.float32)
    b = rng.standard_normal(200).astype(np.float32)
    x, bias = webgrad.tensor(a, device="webgpu"), webgrad.tensor(b, device="webgpu")
    np.testing.assert_allclose((x * 2 + bias).numpy(), a * 2 + b, rtol=1e-6)
    np.testing.assert_allclose(x.t().exp().numpy(), np.exp(a.T), rtol=1e-6)  # a transposed view
    np.testing.assert_allclose(x[::3, 7:].numpy(), a[::3, 7:])  # strided read back
    mask = x > 0
    np.testing.assert_allclose(webgrad.where(mask, x, bias).numpy(), np.where(a > 0, a, b))
    y = x.clone()
    y[:, :100] = 0.0  # a strided write into a large tensor
    want = a.copy()
    want[:, :100] = 0
    np.testing.assert_array_equal(y.numpy(), want)
    half = x.half()  # a 2-byte kind: windows still start on 256 bytes
    np.testing.assert_array_equal(half.float().numpy(), a.astype(np.float16).astype(np.float32))
    np.testing.assert_allclose(half.sum(0).float().numpy(), a.astype(np.float16).sum(0, dtype=np.float32),
                               rtol=2e-3, atol=2e-3)  # f16 read in windows, summed in f32
    small = (x * 50).to(webgrad.int8)  # packed kinds: two or four to a word, written by atomics
    small[::2, 1::3] = -7
    want = np.trunc(a * 50).astype(np.int64).astype(np.int8)
    want[::2, 1::3] = -7
    np.testing.assert_array_equal(small.numpy(), want)
    np.testing.assert_array_equal((small + 1).numpy(), want + np.int8(1))
    brain = x.bfloat16() * 3
    np.testing.assert_array_equal(brain.numpy(), (webgrad.tensor(a).bfloat16() * 3).numpy())
    np.testing.assert_array_equal(webgrad.zeros(300, 200, device="webgpu").numpy(), np.zeros((300, 200)))


def test_reductions_split(small_bindings):
    rng = np.random.default_rng(3)
    a = rng.standard_normal((400, 90)).astype(np.float32)
    x = webgrad.tensor(a, device="webgpu")
    np.testing.assert_allclose(x.sum().item(), a.sum(dtype=np.float64), rtol=1e-5)
    np.testing.assert_allclose(x.sum(0).numpy(), a.sum(0), rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(x.mean(1, keepdim=True).numpy(), a.mean(1, keepdims=True), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(x.t().amax(1).numpy(), a.max(0))  # dim 0 of a transposed view
    np.testing.assert_allclose(x.amin().item(), a.min())
    np.testing.assert_allclose(webgrad.linalg.vector_norm(x).item(), np.linalg.norm(a), rtol=1e-5)
    table = nn.Embedding(3000, 24, device="webgpu")
    table(webgrad.tensor([[1, 2999]], device="webgpu")).sum().backward()
    total = nn.utils.clip_grad_norm_(table.parameters(), max_norm=0.5)  # over a gradient past one binding
    assert total.item() == pytest.approx(np.sqrt(48), rel=1e-6)
    assert webgrad.linalg.vector_norm(table.weight.grad).item() == pytest.approx(0.5, rel=1e-5)


@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
def test_embedding_rows_and_gradient_match_numpy(small_bindings, dtype):
    """Rows and gradient of a table in windows; a bfloat16 one is indexed as stored (2 bytes each)."""
    rng = np.random.default_rng(2)
    rows = 10000 if dtype == "bfloat16" else 5000  # past the binding either way
    table = webgrad.tensor(rng.standard_normal((rows, 16)).astype(np.float32), device="webgpu")
    table = table.to(getattr(webgrad, dtype)).requires_grad_()
    w = table.detach().float().numpy()
    index = rng.integers(0, rows, (40, 3))
    index[0, :] = rows - 1  # the last row, and duplicates
    out = nn.functional.embedding(webgrad.tensor(index, device="webgpu"), table)
    np.testing.assert_array_equal(out.detach().float().numpy(), w[index])
    (out * 3).sum().backward()
    want = np.zeros_like(w)
    np.add.at(want, index, 3.0)
    assert table.grad.dtype is table.dtype and table._data.nbytes == w.size * table.dtype.itemsize
    np.testing.assert_allclose(table.grad.float().numpy(), want)


def test_ops_that_do_not_split_name_the_limit(small_bindings):
    x = webgrad.ones(300, 100, device="webgpu")
    with pytest.raises(MemoryError, match=r"cumsum.*maxStorageBufferBindingSize \(65536 bytes\)"):
        x.cumsum(0).numpy()


def test_tensor_larger_than_a_buffer_is_a_clear_error():
    with webgrad.webgpu.override_limits(max_buffer_size=1 << 20):
        with pytest.raises(MemoryError, match=r"maxBufferSize \(1048576 bytes\)"):
            webgrad.zeros(1 << 19, device="webgpu")  # 2 MiB of float32


def test_embedding_of_144_mib_trains_past_the_real_binding_limit():
    """Past llvmpipe's real 128 MiB limit: no override, so the adapter itself would refuse a
    whole binding. Two SGD steps; the touched rows move as numpy says, the rest stay."""
    with webgrad.webgpu.override_limits() as limits:  # (nothing overridden: the adapter's own)
        binding = limits["max_storage_buffer_binding_size"]
    rows, dim = (binding // 4 // 64) * 9 // 8, 64  # 1.125 x the binding
    webgrad.manual_seed(0)
    table = nn.Embedding(rows, dim, device="webgpu")
    index_np = np.array([[0, 5, rows - 1], [5, rows // 2, rows - 1]])
    picked = np.unique(index_np)
    before = table.weight.detach()[webgrad.tensor(picked, device="webgpu")].numpy()
    opt = webgrad.optim.SGD(table.parameters(), lr=0.25)
    index = webgrad.tensor(index_np, device="webgpu")
    for _ in range(2):
        opt.zero_grad()
        (table(index) ** 2).sum().backward()
        opt.step()
    counts = np.array([(index_np == r).sum() for r in picked], dtype=np.float32)[:, None]
    want = before * (1 - 0.5 * counts) ** 2  # d/dw of w^2 per use, twice
    after = table.weight.detach()[webgrad.tensor(picked, device="webgpu")].numpy()
    np.testing.assert_allclose(after, want, rtol=1e-5, atol=1e-6)
    untouched = table.weight.detach()[1:5].numpy()
    assert np.isfinite(untouched).all() and np.abs(untouched).sum() > 0
    assert table.weight.nbytes > binding


def test_products_with_a_large_operand_split(small_bindings):
    """An output layer over a large vocabulary (tied to the embedding, so W.t() is read by
    columns) forward and backward: B's columns, the gradient's rows, and the inner dim."""
    rng = np.random.default_rng(4)
    w = rng.standard_normal((3000, 16)).astype(np.float32)
    h = rng.standard_normal((8, 16)).astype(np.float32)
    g = rng.standard_normal((8, 3000)).astype(np.float32)
    table = webgrad.tensor(w, device="webgpu", requires_grad=True)
    hidden = webgrad.tensor(h, device="webgpu", requires_grad=True)
    logits = hidden @ table.t()
    np.testing.assert_allclose(logits.detach().numpy(), h @ w.T, rtol=1e-5, atol=1e-5)
    logits.backward(webgrad.tensor(g, device="webgpu"))
    np.testing.assert_allclose(table.grad.numpy(), g.T @ h, rtol=1e-5, atol=1e-4)
    np.testing.assert_allclose(hidden.grad.numpy(), g @ w, rtol=1e-5, atol=1e-4)
    wide = webgrad.tensor(rng.standard_normal((4, 5000)).astype(np.float32), device="webgpu")
    np.testing.assert_allclose((wide @ wide.t()).numpy(), wide.numpy() @ wide.numpy().T, rtol=1e-4)


def test_compiled_step_over_a_large_table_matches_cpu(small_bindings):
    """Under webgrad.compile the graph's fused chains and reductions (the weight penalty, the
    gradient norm of clip_grad_norm_) meet the large table too: they split like the eager ops."""
    def train(device, compiled):
        webgrad.manual_seed(0)
        table = nn.Embedding(2000, 32).to(device)
        opt = webgrad.optim.Adam(table.parameters(), lr=0.05)
        index = webgrad.tensor([[3, 1999, 3], [1000, 7, 1999]], device=device)

        def step():
            opt.zero_grad()
            loss = (table(index) ** 2).sum() + 0.01 * (table.weight ** 2).mean()
            loss.backward()
            nn.utils.clip_grad_norm_(table.parameters(), 1.0)
            opt.step()
            return loss
        step = webgrad.compile(step) if compiled else step
        losses = [step().item() for _ in range(4)]
        return table.weight.detach().cpu().numpy(), losses

    want, want_losses = train("cpu", False)
    got, got_losses = train("webgpu", True)
    np.testing.assert_allclose(got, want, atol=1e-6)
    np.testing.assert_allclose(got_losses, want_losses, rtol=1e-5)
