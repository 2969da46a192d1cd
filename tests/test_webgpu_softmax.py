"""The fused softmax, log_softmax and cross-entropy kernels (softmax.wgsl) against
the numpy backend.

Covers every dim of 1-d to 4-d inputs, 0-d and empty tensors, strided views
(transposed, permuted, stepped, flipped, broadcast) read in place, views with
too many unmergeable dims (refused), both thread layouts forced (one thread
per row, a team per row) and the launcher's own choice, rows long enough to hit
llvmpipe's loop-trip limit, folded grids, small workgroups, NaN and infinities,
and gradients (first and second order) on webgpu against cpu. Cross entropy
(loss and gradient kernels) runs through the same layouts, grids and long rows,
with ignored and out-of-range labels.
"""

import numpy as np
import pytest

import webgrad
from conftest import requires_webgpu
from webgrad.backend.webgpu import softmax as gpu_softmax

pytestmark = requires_webgpu

OPS = ("softmax", "log_softmax")
rng = np.random.default_rng(0)


def sample(shape, scale=3.0):
    return (rng.standard_normal(shape) * scale).astype(np.float32)


def check(fn, array, rtol=1e-5, atol=1e-6):
    """Run ``fn`` on a cpu and a webgpu tensor made from ``array`` and compare."""
    cpu, gpu = webgrad.tensor(array, device="cpu"), webgrad.tensor(array, device="webgpu")
    expected, got = fn(cpu), fn(gpu)
    assert got.device == "webgpu"
    assert got.shape == expected.shape and got.dtype == expected.dtype, (got, expected)
    if expected.numel():
        np.testing.assert_allclose(got.numpy(), expected.numpy(), rtol=rtol, atol=atol)


def method(name, dim, view=None):
    return lambda t: getattr(t if view is None else view(t), name)(dim)


# -- thread layouts: force one thread per row, small teams, a workgroup per row ----
@pytest.fixture(params=[None, 1, 4, 128], ids=["chosen", "thread-per-row", "team-of-4", "workgroup-per-row"])
def lanes(request, monkeypatch):
    chosen = request.param
    if chosen is not None:
        monkeypatch.setattr(gpu_softmax, "choose_lanes", lambda rows, inner, kept, stride, workgroup, *rest:
                            min(chosen, workgroup))
    return chosen


SHAPES = [((5,), 0), ((7, 13), 0), ((7, 13), 1), ((7, 13), -1), ((2, 3, 4), 0), ((2, 3, 4), 1), ((2, 3, 4), 2),
          ((2, 3, 4, 5), 2), ((1, 9), 0), ((9, 1), 1), ((3, 517), 1), ((517, 3), 0), ((3, 5000), 1), ((2, 300, 20), 1)]


@pytest.mark.parametrize("shape,dim", SHAPES)
@pytest.mark.parametrize("name", OPS)
def test_every_dim_and_layout(name, shape, dim, lanes):
    check(method(name, dim), sample(shape), atol=1e-5)


@pytest.mark.parametrize("name", OPS)
def test_zero_dim_and_empty(name):
    check(method(name, 0), sample(()))
    check(method(name, -1), sample(()))
    for shape, dim in (((0,), 0), ((3, 0), 1), ((3, 0), 0), ((0, 4), 1)):
        check(method(name, dim), np.zeros(shape, dtype=np.float32))


# -- strided inputs, never copied ---------------------------------------------------
VIEWS = {
    "transposed": lambda t: t.transpose(0, 2),
    "permuted": lambda t: t.permute(2, 0, 1),
    "stepped-slice": lambda t: t[1::2, ::3],
    "negative-step": lambda t: t.flip(1),
    "broadcast": lambda t: t[:, :1].expand(7, 6, 5),
    "broadcast-new-dim": lambda t: t[None].expand(4, 7, 13, 5),
}


@pytest.mark.parametrize("view", VIEWS)
@pytest.mark.parametrize("name", OPS)
def test_strided_views(name, view, lanes):
    base = sample((7, 13, 5))
    for dim in (0, 1, -1):
        check(method(name, dim, VIEWS[view]), base, atol=1e-5)


def test_strided_view_is_read_in_place(monkeypatch):
    from webgrad.backend.webgpu.backend import WebGPUBackend

    copies = []
    original = WebGPUBackend.contiguous
    monkeypatch.setattr(WebGPUBackend, "contiguous", lambda self, data: copies.append(data) or original(self, data))
    base = webgrad.tensor(sample((64, 64)), device="webgpu")
    view = base[::2, 1::3].transpose(0, 1)
    view.softmax(0)
    view.log_softmax(1)
    base[None].expand(3, 64, 64).permute(2, 0, 1).softmax(1)
    webgrad.webgpu.synchronize()
    assert copies == []


@pytest.mark.parametrize("name", OPS)
def test_many_dims_merge_and_too_many_are_refused(name):
    check(method(name, 4), sample((2,) * 12))                          # the other dims merge into two
    reverse = tuple(range(8, -1, -1))  # ascending strides: no two neighbours merge
    check(method(name, 0, lambda t: t.permute(*reverse)), sample((2,) * 9))  # 8 other dims: the limit
    many = webgrad.tensor(sample((2,) * 10), device="webgpu").permute(*range(9, -1, -1))
    with pytest.raises(ValueError, match=f"{name}: webgpu handles at most 8"):
        getattr(many, name)(0)


# -- long rows: llvmpipe ends an invocation after ~65535 loop trips ------------------
@pytest.mark.parametrize("name", OPS)
def test_long_rows(name):
    """Rows far past what one thread may walk must still be done whole: the
    launcher gives them more threads. The ends of the rows are checked too,
    where a stopped invocation would leave stale memory."""
    for shape, dim in (((2, 300000), 1), ((1 << 20,), 0), ((100000, 2), 0)):
        data = sample(shape)
        cpu = getattr(webgrad.tensor(data), name)(dim).numpy()
        gpu = getattr(webgrad.tensor(data, device="webgpu"), name)(dim).numpy()
        np.testing.assert_allclose(gpu, cpu, rtol=1e-4, atol=1e-9 if name == "softmax" else 1e-4)
        tail = np.take(gpu, range(-3, 0), axis=dim)
        np.testing.assert_allclose(tail, np.take(cpu, range(-3, 0), axis=dim), rtol=1e-4, atol=1e-9)
    total = webgrad.ones(3, 200000, device="webgpu").softmax(1).sum(1)
    np.testing.assert_allclose(total.numpy(), 1.0, rtol=1e-4)


def test_long_rows_get_more_threads_on_a_cpu_adapter(monkeypatch):
    """A row that would exceed the loop limit with one thread is shared; short
    rows keep one thread (no barriers)."""
    seen = []
    original = gpu_softmax.loop_trips
    monkeypatch.setattr(gpu_softmax, "loop_trips", lambda inner, lanes, rounds: seen.append((inner, lanes)) or
                        original(inner, lanes, rounds))
    monkeypatch.setattr(gpu_softmax.gpu_reduce, "is_cpu_adapter", lambda backend: True)
    webgrad.zeros(4, 100, device="webgpu").softmax(1)
    webgrad.zeros(2, 100000, device="webgpu").softmax(1)
    assert seen[0] == (100, 1)
    assert seen[-1][0] == 100000 and seen[-1][1] > 1
    assert gpu_softmax.loop_trips(100000, seen[-1][1], 1) <= gpu_softmax.LOOP_TRIP_LIMIT


# -- grids and workgroup sizes -------------------------------------------------------
@pytest.mark.parametrize("shape,dim", [((40, 300), 1), ((600, 130), 1), ((3000, 7), 1), ((3, 300, 20), 1)])
def test_folded_grid(shape, dim, lanes):
    with webgrad.webgpu.override_limits(max_compute_workgroups_per_dimension=4):
        for name in OPS:
            check(method(name, dim), sample(shape), atol=1e-5)


def test_small_workgroups(lanes):
    with webgrad.webgpu.override_limits(max_compute_invocations_per_workgroup=32):
        for name in OPS:
            check(method(name, 1), sample((5, 300)), atol=1e-5)
            check(method(name, 0), sample((300, 5)), atol=1e-5)


# -- special values -------------------------------------------------------------------
@pytest.mark.filterwarnings("ignore:invalid value encountered")
@pytest.mark.parametrize("name", OPS)
def test_nan_and_infinities(name, lanes):
    data = sample((5, 300))
    data[1, 17] = np.nan
    data[2, :] = -np.inf
    data[3, 5] = np.inf
    data[4, :150] = -np.inf  # half the row is -inf: softmax 0 there, log_softmax -inf
    cpu = getattr(webgrad.tensor(data), name)(1).numpy()
    gpu = getattr(webgrad.tensor(data, device="webgpu"), name)(1).numpy()
    np.testing.assert_allclose(gpu, cpu, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("name", OPS)
def test_large_values(name, lanes):
    check(method(name, 1), sample((6, 50), scale=300.0), rtol=1e-5, atol=1e-5)


def test_int_input_is_refused_on_both_backends():
    for device in ("cpu", "webgpu"):
        with pytest.raises(webgrad.OpError, match="softmax"):
            webgrad.tensor([1, 2], device=device).softmax(0)


# -- gradients computed on webgpu equal those on cpu ------------------------------
GRADS = {
    "softmax-last": lambda t: (t.softmax(-1) * webgrad.arange(5, device=t.device).float()).sum(),
    "softmax-first": lambda t: (t.softmax(0) ** 2).sum(),
    "log_softmax-last": lambda t: t.log_softmax(-1)[:, 0].sum(),
    "log_softmax-transposed": lambda t: (t.T.log_softmax(1) * t.T).sum(),
}


@pytest.mark.parametrize("name", GRADS)
def test_gradients_match_cpu(name):
    data = sample((7, 5), scale=1.0)
    cpu = webgrad.tensor(data, device="cpu", requires_grad=True)
    gpu = webgrad.tensor(data, device="webgpu", requires_grad=True)
    GRADS[name](cpu).backward()
    GRADS[name](gpu).backward()
    assert gpu.grad.device == "webgpu"
    np.testing.assert_allclose(gpu.grad.numpy(), cpu.grad.numpy(), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("name", OPS)
def test_second_derivative_matches_cpu(name):
    data = sample((4, 6), scale=1.0)
    grads = {}
    for device in ("cpu", "webgpu"):
        x = webgrad.tensor(data, device=device, requires_grad=True)
        y = getattr(x, name)(1)
        (g,) = webgrad.autograd.grad((y * y).sum(), x, create_graph=True)
        (gg,) = webgrad.autograd.grad((g * g).sum(), x)
        grads[device] = gg.numpy()
    np.testing.assert_allclose(grads["webgpu"], grads["cpu"], rtol=1e-4, atol=1e-5)


# -- cross entropy: the loss and gradient kernels ---------------------------------------
def check_cross_entropy(shape, rtol=1e-5, atol=1e-5, **options):
    """F.cross_entropy (reduction 'none') and its gradient under random weights, cpu vs webgpu."""
    logits = sample(shape, scale=2.0)
    labels = rng.integers(0, shape[1], (shape[0],) + shape[2:])
    labels.flat[::3] = options.get("ignore_index", -100)
    weights = sample(labels.shape, scale=1.0)
    results = {}
    for device in ("cpu", "webgpu"):
        x = webgrad.tensor(logits, device=device, requires_grad=True)
        loss = webgrad.nn.functional.cross_entropy(x, webgrad.tensor(labels, device=device), reduction="none",
                                                   **options)
        (loss * webgrad.tensor(weights, device=device)).sum().backward()
        results[device] = (loss.detach().numpy(), x.grad.numpy())
    for got, expected in zip(results["webgpu"], results["cpu"]):
        np.testing.assert_allclose(got, expected, rtol=rtol, atol=atol)


CE_SHAPES = [(7, 13), (5, 1), (2, 4, 3), (3, 517), (40, 3, 2)]


@pytest.mark.parametrize("shape", CE_SHAPES, ids=str)
def test_cross_entropy_every_layout(shape, lanes):
    check_cross_entropy(shape)
    check_cross_entropy(shape, label_smoothing=0.25, ignore_index=0)


def test_cross_entropy_folded_grid_small_workgroups_and_long_rows(lanes):
    with webgrad.webgpu.override_limits(max_compute_workgroups_per_dimension=8):  # elementwise ops still fit
        check_cross_entropy((2000, 3), label_smoothing=0.1)
    with webgrad.webgpu.override_limits(max_compute_invocations_per_workgroup=32):
        check_cross_entropy((5, 300), label_smoothing=0.1)


def test_cross_entropy_rows_longer_than_one_thread_may_walk():
    check_cross_entropy((2, 300000), rtol=1e-4, atol=1e-6, label_smoothing=0.1)


def test_cross_entropy_label_out_of_range_raises_at_the_next_read():
    """On the device the check is a flag read with the next readback (no stall per op)."""
    x = webgrad.zeros(3, 4, device="webgpu")
    loss = webgrad.nn.functional.cross_entropy(x, webgrad.tensor([0, 4, 1], device="webgpu"), reduction="none")
    with pytest.raises(IndexError, match="out of bounds in cross_entropy"):
        loss.numpy()
    ok = webgrad.nn.functional.cross_entropy(x, webgrad.tensor([0, -100, 3], device="webgpu"), reduction="none")
    np.testing.assert_allclose(ok.numpy(), [np.log(4), 0.0, np.log(4)], rtol=1e-6)  # the flag was cleared
    with pytest.raises(IndexError, match="target 4 is out of bounds for 4 classes"):
        webgrad.nn.functional.cross_entropy(x.cpu(), webgrad.tensor([0, 4, 1]))


def test_cross_entropy_second_derivative_matches_cpu():
    """The gradient kernel's own vjp, reached through x and through the upstream gradient."""
    data = sample((4, 6), scale=1.0)
    labels = np.array([1, 5, -100, 0])
    grads = {}
    for device in ("cpu", "webgpu"):
        x = webgrad.tensor(data, device=device, requires_grad=True)
        loss = webgrad.nn.functional.cross_entropy(x, webgrad.tensor(labels, device=device), reduction="none",
                                                   label_smoothing=0.2)
        (g,) = webgrad.autograd.grad((loss * loss).sum(), x, create_graph=True)
        (gg,) = webgrad.autograd.grad((g * g).sum(), x)
        grads[device] = gg.numpy()
    np.testing.assert_allclose(grads["webgpu"], grads["cpu"], rtol=1e-4, atol=1e-5)
