"""The fused layer_norm_core primitive (layer_norm.wgsl) against the numpy backend.

Covers one and several normalized dims, 1-d to 4-d inputs, empty tensors,
strided views (transposed, permuted, stepped, flipped, broadcast) read in place
or copied when the normalized dims do not merge, both thread layouts forced
(one thread per row, a team per row) and the launcher's own choice, rows long
enough to hit llvmpipe's loop-trip limit, folded grids, small workgroups, a
large mean next to a small spread, and gradients (first and second order)
against cpu and float64 finite differences.
"""

import numpy as np
import pytest

import webgrad
from conftest import requires_webgpu
import webgrad.nn.functional as F
from webgrad.backend.webgpu import layer_norm as gpu_layer_norm

rng = np.random.default_rng(0)


def sample(shape, scale=3.0, shift=0.0):
    return (rng.standard_normal(shape) * scale + shift).astype(np.float32)


def reference(array, ndims, eps=1e-5):
    """float64 numpy layer norm (biased variance), no affine."""
    wide = array.astype(np.float64)
    axes = tuple(range(wide.ndim - ndims, wide.ndim))
    centered = wide - wide.mean(axes, keepdims=True)
    return centered / np.sqrt((centered * centered).mean(axes, keepdims=True) + eps)


def layer_norm(ndims, view=None, eps=1e-5):
    return lambda t: webgrad.ops.layer_norm_core(t if view is None else view(t), ndims=ndims, eps=eps)


# -- cpu (numpy kernel) and gradients: run without an adapter ------------------------
@pytest.mark.parametrize("shape,ndims", [((3, 6), 1), ((2, 3, 4), 2), ((2, 3, 4), 3), ((5,), 1), ((4, 1), 1)])
def test_numpy_kernel_matches_float64_and_keeps_float32(shape, ndims):
    data = sample(shape, shift=1.0)
    out = layer_norm(ndims)(webgrad.tensor(data))
    assert out.dtype == webgrad.float32 and out.shape == shape
    np.testing.assert_allclose(out.numpy(), reference(data, ndims), rtol=1e-5, atol=1e-5)
    out64 = layer_norm(ndims)(webgrad.tensor(data.astype(np.float64)))
    assert out64.dtype == webgrad.float64


def test_empty_and_errors():
    assert layer_norm(1)(webgrad.zeros(0, 4)).shape == (0, 4)
    with pytest.raises(webgrad.OpError, match="layer_norm"):
        webgrad.ops.layer_norm_core(webgrad.tensor([1, 2]), ndims=1)
    with pytest.raises(webgrad.OpError, match="last 3 dims"):
        webgrad.ops.layer_norm_core(webgrad.ones(2, 4), ndims=3)


def _finite_difference_check(fn, array, eps=1e-6, rtol=1e-6, atol=1e-8):
    """Central differences in float64 along a random direction against backward."""
    x = webgrad.tensor(array, requires_grad=True)
    out = fn(x)
    weights = rng.standard_normal(tuple(out.shape))
    (out * webgrad.tensor(weights)).sum().backward()
    direction = rng.standard_normal(array.shape)

    def f(a):
        return float((fn(webgrad.tensor(a, requires_grad=True)).detach().numpy() * weights).sum())

    numeric = (f(array + eps * direction) - f(array - eps * direction)) / (2 * eps)
    analytic = float((x.grad.numpy() * direction).sum())
    assert abs(numeric - analytic) <= atol + rtol * abs(numeric), (numeric, analytic)


@pytest.mark.parametrize("shape,ndims", [((3, 6), 1), ((2, 3, 4), 2), ((7,), 1)])
def test_gradient_and_second_derivative_vs_finite_differences(shape, ndims):
    array = rng.standard_normal(shape)
    _finite_difference_check(layer_norm(ndims, eps=1e-3), array)

    def grad_norm(x):  # d/dx of sum(y^3 * w): exercises the vjp's own derivative
        w = webgrad.tensor(np.linspace(-1.0, 1.0, int(np.prod(shape))).reshape(shape))
        y = layer_norm(ndims, eps=1e-3)(x)
        (g,) = webgrad.autograd.grad((y * y * y * w).sum(), x, create_graph=True)
        return g * g
    _finite_difference_check(grad_norm, array, rtol=1e-5, atol=1e-7)


def test_functional_layer_norm_uses_the_primitive_and_the_affine_part():
    data = sample((4, 3, 5))
    weight, bias = sample((3, 5)), sample((3, 5))
    out = F.layer_norm(webgrad.tensor(data), (3, 5), webgrad.tensor(weight), webgrad.tensor(bias))
    np.testing.assert_allclose(out.numpy(), reference(data, 2) * weight + bias, rtol=1e-5, atol=1e-5)


# -- webgpu ---------------------------------------------------------------------------
gpu = requires_webgpu


def check(fn, array, rtol=1e-5, atol=1e-5):
    """Run ``fn`` on a cpu and a webgpu tensor made from ``array`` and compare."""
    cpu, dev = webgrad.tensor(array, device="cpu"), webgrad.tensor(array, device="webgpu")
    expected, got = fn(cpu), fn(dev)
    assert got.device == "webgpu"
    assert got.shape == expected.shape and got.dtype == expected.dtype, (got, expected)
    if expected.numel():
        np.testing.assert_allclose(got.numpy(), expected.numpy(), rtol=rtol, atol=atol)


@pytest.fixture(params=[None, 1, 4, 128], ids=["chosen", "thread-per-row", "team-of-4", "workgroup-per-row"])
def lanes(request, monkeypatch):
    chosen = request.param
    if chosen is not None:
        monkeypatch.setattr(gpu_layer_norm, "choose_lanes", lambda rows, inner, kept, stride, workgroup, *rest:
                            min(chosen, workgroup))
    return chosen


SHAPES = [((5,), 1), ((7, 13), 1), ((7, 13), 2), ((2, 3, 4), 1), ((2, 3, 4), 2), ((2, 3, 4, 5), 2),
          ((9, 1), 1), ((1, 9), 1), ((3, 517), 1), ((517, 3), 1), ((3, 5000), 1), ((2, 30, 20), 2)]


@gpu
@pytest.mark.parametrize("shape,ndims", SHAPES)
def test_every_shape_and_layout(shape, ndims, lanes):
    check(layer_norm(ndims), sample(shape, shift=1.0))


@gpu
def test_empty():
    for shape in ((0,), (3, 0), (0, 4)):
        check(layer_norm(1), np.zeros(shape, dtype=np.float32))


VIEWS = {
    "transposed": lambda t: t.transpose(0, 2),
    "permuted": lambda t: t.permute(2, 0, 1),
    "stepped-slice": lambda t: t[1::2, ::3],
    "negative-step": lambda t: t.flip(2),
    "broadcast": lambda t: t[:, :1].expand(7, 6, 5),
    "broadcast-new-dim": lambda t: t[None].expand(4, 7, 13, 5),
}


@gpu
@pytest.mark.parametrize("view", VIEWS)
def test_strided_views(view, lanes):
    base = sample((7, 13, 5))
    for ndims in (1, 2):
        check(layer_norm(ndims, VIEWS[view]), base)


@gpu
def test_strided_view_with_one_row_dim_is_read_in_place(monkeypatch):
    from webgrad.backend.webgpu.backend import WebGPUBackend

    copies = []
    original = WebGPUBackend.contiguous
    monkeypatch.setattr(WebGPUBackend, "contiguous", lambda self, data: copies.append(data) or original(self, data))
    base = webgrad.tensor(sample((64, 64)), device="webgpu")
    layer_norm(1)(base[::2, 1::3].transpose(0, 1))
    layer_norm(2)(base[None].expand(3, 64, 64)[:, 1:])   # two normalized dims that merge
    webgrad.webgpu.synchronize()
    assert copies == []
    layer_norm(2)(base.T[None])                             # they do not merge: copied once
    assert len(copies) == 1


@gpu
def test_many_leading_dims_merge_and_too_many_are_refused():
    check(layer_norm(1), sample((2,) * 12))                            # the leading dims merge into one
    reverse = tuple(range(8, -1, -1))  # ascending strides: no two neighbours merge
    check(layer_norm(1, lambda t: t.permute(*reverse)), sample((2,) * 9))  # 8 leading dims: the limit
    many = webgrad.tensor(sample((2,) * 10), device="webgpu").permute(*range(9, -1, -1))
    with pytest.raises(ValueError, match="layer_norm: webgpu handles at most 8"):
        layer_norm(1)(many)


# -- long rows: llvmpipe ends an invocation after ~65535 loop trips ------------------
@gpu
def test_long_rows():
    """Rows far past what one thread may walk must still be done whole; the ends
    of the rows are checked too, where a stopped invocation would leave stale memory."""
    for shape in ((2, 100000), (1 << 20,), (3, 300000)):
        data = sample(shape, shift=2.0)
        expected = reference(data, 1)
        got = layer_norm(1)(webgrad.tensor(data, device="webgpu")).numpy()
        np.testing.assert_allclose(got, expected, rtol=1e-4, atol=1e-4)
        np.testing.assert_allclose(got[..., -3:], expected[..., -3:], rtol=1e-4, atol=1e-4)


@gpu
def test_long_rows_get_more_threads_on_a_cpu_adapter(monkeypatch):
    seen = []
    original = gpu_layer_norm.loop_trips
    monkeypatch.setattr(gpu_layer_norm, "loop_trips", lambda inner, lanes, rounds: seen.append((inner, lanes)) or
                        original(inner, lanes, rounds))
    monkeypatch.setattr(gpu_layer_norm.gpu_reduce, "is_cpu_adapter", lambda backend: True)
    layer_norm(1)(webgrad.zeros(4, 100, device="webgpu"))
    layer_norm(1)(webgrad.zeros(2, 100000, device="webgpu"))
    assert seen[0] == (100, 1)
    assert seen[-1][0] == 100000 and seen[-1][1] > 1
    assert gpu_layer_norm.loop_trips(100000, seen[-1][1], 1) <= gpu_layer_norm.LOOP_TRIP_LIMIT


# -- grids, workgroups, values ---------------------------------------------------------
@gpu
@pytest.mark.parametrize("shape,ndims", [((40, 300), 1), ((600, 130), 1), ((3000, 7), 1), ((3, 30, 20), 2)])
def test_folded_grid(shape, ndims, lanes):
    with webgrad.webgpu.override_limits(max_compute_workgroups_per_dimension=4):
        check(layer_norm(ndims), sample(shape))


@gpu
def test_small_workgroups(lanes):
    with webgrad.webgpu.override_limits(max_compute_invocations_per_workgroup=32):
        check(layer_norm(1), sample((5, 300)))
        check(layer_norm(2), sample((300, 5, 2)))


@gpu
def test_large_mean_small_spread(lanes):
    """Two-pass variance: no cancellation when |mean| is far above the spread."""
    data = sample((6, 200), scale=0.01, shift=1000.0)
    got = layer_norm(1)(webgrad.tensor(data, device="webgpu")).numpy()
    np.testing.assert_allclose(got, reference(data, 1), rtol=1e-4, atol=1e-4)


# -- gradients computed on webgpu equal those on cpu ------------------------------
GRADS = {
    "last": lambda t: (webgrad.ops.layer_norm_core(t, ndims=1) * webgrad.arange(5, device=t.device).float()).sum(),
    "two-dims": lambda t: (webgrad.ops.layer_norm_core(t, ndims=2) ** 3).sum(),
    "transposed": lambda t: (webgrad.ops.layer_norm_core(t.T, ndims=1) * t.T).sum(),
    "functional-affine": lambda t: (F.layer_norm(t, (5,), t[0] + 1, t[1]) ** 2).sum(),
}


@gpu
@pytest.mark.parametrize("name", GRADS)
def test_gradients_match_cpu(name):
    data = sample((7, 5), scale=1.0)
    cpu = webgrad.tensor(data, device="cpu", requires_grad=True)
    dev = webgrad.tensor(data, device="webgpu", requires_grad=True)
    GRADS[name](cpu).backward()
    GRADS[name](dev).backward()
    assert dev.grad.device == "webgpu"
    np.testing.assert_allclose(dev.grad.numpy(), cpu.grad.numpy(), rtol=1e-4, atol=1e-5)


@gpu
def test_second_derivative_matches_cpu():
    data = sample((4, 6), scale=1.0)
    grads = {}
    for device in ("cpu", "webgpu"):
        x = webgrad.tensor(data, device=device, requires_grad=True)
        y = webgrad.ops.layer_norm_core(x, ndims=1)
        (g,) = webgrad.autograd.grad((y * y * y).sum(), x, create_graph=True)
        (gg,) = webgrad.autograd.grad((g * g).sum(), x)
        grads[device] = gg.numpy()
    # float32 against the cpu's float64 statistics, on values up to several hundred: tolerance to scale
    scale = np.abs(grads["cpu"]).max()
    np.testing.assert_allclose(grads["webgpu"], grads["cpu"], rtol=1e-4, atol=1e-5 * scale)


# -- the fused backward (layer_norm_backward: a plain backward, no create_graph) -----------
def grad_of(ndims, view=None):
    """x's gradient of sum(layer_norm_core(view(x)) * w) for a fixed w: one layer_norm_backward."""
    def fn(t):
        x = t.detach().requires_grad_()
        y = layer_norm(ndims, view)(x)
        w = np.cos(np.arange(y.numel())).reshape(tuple(y.shape)).astype(np.float32)
        (y * webgrad.tensor(w, device=t.device, dtype=y.dtype)).sum().backward()
        return x.grad
    return fn


def test_fused_backward_matches_float64_finite_differences():
    _finite_difference_check(layer_norm(2, eps=1e-3), rng.standard_normal((3, 4, 5)))
    from webgrad.ops.normalization import LAYER_NORM_BACKWARD
    x = webgrad.randn(4, 6)
    y = layer_norm(1)(x.requires_grad_())
    with webgrad.profiler.profile() as prof:
        y.backward(webgrad.ones(4, 6))
    assert [e.name for e in prof.events() if e.name.startswith("layer_norm")] == [LAYER_NORM_BACKWARD.name]


@gpu
@pytest.mark.parametrize("shape,ndims", SHAPES)
def test_backward_every_shape_and_layout(shape, ndims, lanes):
    check(grad_of(ndims), sample(shape, shift=1.0), rtol=1e-4, atol=1e-4)


@gpu
@pytest.mark.parametrize("view", VIEWS)
def test_backward_strided_views(view, lanes):
    base = sample((7, 13, 5))
    for ndims in (1, 2):
        check(grad_of(ndims, VIEWS[view]), base, rtol=1e-4, atol=1e-4)


@gpu
def test_backward_float16_and_long_rows_on_a_cpu_adapter(monkeypatch):
    check(grad_of(1), sample((7, 13)).astype(np.float16), rtol=1e-2, atol=1e-2)
    monkeypatch.setattr(gpu_layer_norm.gpu_reduce, "is_cpu_adapter", lambda backend: True)
    check(grad_of(1), sample((2, 100000), shift=2.0), rtol=1e-3, atol=1e-3)
