"""webgrad.nn.functional against torch.nn.functional (forward and gradients) on
every device, and against float64 central finite differences (on the cpu).

The torch comparisons run once per (device, dtype) pair the device has: float64
stays on the cpu (WGSL has no f64), so webgpu runs the float32 rows;
test_float64_is_refused_on_webgpu checks that refusal.
"""
import contextlib
import math

import numpy as np
import pytest

import webgrad
import webgrad.nn.functional as F
from conftest import DEVICES, requires_webgpu, supports_dtype
from torch_reference import lazy_torch, torch_value
from webgrad.ops import registry
from webgrad.ops.registry import OpError

torch = lazy_torch()  # torch's side runs live, or comes recorded where torch is missing (Pyodide)
TF = torch.nn.functional

# Forward atol per dtype; gradients are checked at 10x (see check_against_torch).
# float32 on webgpu (llvmpipe) matches torch's cpu kernels within these, so no op
# needs a looser tolerance there.
DTYPES = {"float32": (np.float32, 1e-5), "float64": (np.float64, 1e-10)}

DEVICE_DTYPES = [pytest.param(d, t, id=f"{d}-{t}") for d in DEVICES for t in DTYPES
                 if supports_dtype(d, webgrad.dtypes.from_name(t))]
on_devices = pytest.mark.parametrize("device,dtype", DEVICE_DTYPES)


def _rng(seed=0):
    return np.random.default_rng(seed)


def _wg(a, device="cpu", requires_grad=False):
    return webgrad.tensor(a, device=device, requires_grad=requires_grad)


def _th(a, requires_grad=False):
    return torch.tensor(a, requires_grad=requires_grad)


def _np(t):
    return t.detach().numpy()


def check_against_torch(ours, theirs, arrays, *, device, atol, rtol=1e-5, grad=True):
    """Same forward values and (for float arrays) same gradients of sum(out * w);
    webgrad's inputs are made on ``device`` and its results stay there."""
    floats = [isinstance(a, np.ndarray) and a.dtype.kind == "f" for a in arrays]

    def torch_side(_):  # the forward value, then the gradients of the float inputs
        th_in = [_th(a, grad and f) for a, f in zip(arrays, floats)]
        ref = theirs(*th_in)
        if not grad:
            return (_np(ref),)
        (ref * _th(_weights(_np(ref)))).sum().backward()
        return (_np(ref), *[y.grad.numpy() for y, f in zip(th_in, floats) if f])
    ref, *ref_grads = torch_value(torch_side)
    wg_in = [_wg(a, device, grad and f) for a, f in zip(arrays, floats)]
    out = ours(*wg_in)
    assert out.device == device
    np.testing.assert_allclose(_np(out), ref, atol=atol, rtol=rtol)
    if not grad:
        return
    (out * _wg(_weights(ref), device)).sum().backward()
    for x, y in zip([x for x, f in zip(wg_in, floats) if f], ref_grads):
        assert x.grad is not None, "no gradient reached an input"
        assert x.grad.device == device
        np.testing.assert_allclose(x.grad.numpy(), y, atol=atol * 10, rtol=rtol * 10)


def _weights(ref: np.ndarray) -> np.ndarray:
    return _rng(7).standard_normal(ref.shape).astype(ref.dtype)


def gradcheck(fn, *arrays, eps=1e-6, rtol=1e-5, atol=1e-8):
    """Central finite differences in float64 along a random direction, for every array input."""
    rng = _rng(3)
    inputs = [_wg(np.asarray(a, np.float64), requires_grad=True) for a in arrays]
    out = fn(*inputs)
    w = rng.standard_normal(tuple(out.shape))
    (out * _wg(w)).sum().backward()
    for i, a in enumerate(arrays):
        direction = rng.standard_normal(np.shape(a))

        def f(shifted, i=i):
            args = [_wg(np.asarray(b, np.float64)) for b in arrays]
            args[i] = _wg(shifted)
            return float((fn(*args).numpy() * w).sum())
        numeric = (f(a + eps * direction) - f(a - eps * direction)) / (2 * eps)
        analytic = float((inputs[i].grad.numpy() * direction).sum())
        assert abs(numeric - analytic) <= atol + rtol * abs(numeric), (i, numeric, analytic)


@requires_webgpu
def test_float64_is_refused_on_webgpu():
    x = webgrad.ones(1, 2, 4, 4, device="webgpu")
    with pytest.raises(TypeError, match="float64"):
        F.conv2d(x, webgrad.ones(3, 2, 3, 3, device="webgpu").double())


# -- activations -------------------------------------------------------------------
ACTIVATIONS = [
    ("relu", F.relu, TF.relu),
    ("relu6", F.relu6, TF.relu6),
    ("hardtanh", lambda x: F.hardtanh(x, -0.5, 0.7), lambda x: TF.hardtanh(x, -0.5, 0.7)),
    ("gelu", F.gelu, TF.gelu),
    ("gelu_tanh", lambda x: F.gelu(x, approximate="tanh"), lambda x: TF.gelu(x, approximate="tanh")),
    ("silu", F.silu, TF.silu),
    ("mish", F.mish, TF.mish),
    ("elu", lambda x: F.elu(x, 0.7), lambda x: TF.elu(x, 0.7)),
    ("leaky_relu", lambda x: F.leaky_relu(x, 0.1), lambda x: TF.leaky_relu(x, 0.1)),
    ("softplus", F.softplus, TF.softplus),
    ("softplus_beta", lambda x: F.softplus(x, beta=2.0, threshold=3.0),
     lambda x: TF.softplus(x, beta=2.0, threshold=3.0)),
    ("logsigmoid", F.logsigmoid, TF.logsigmoid),
    ("sigmoid", F.sigmoid, torch.sigmoid),
    ("tanh", F.tanh, torch.tanh),
    ("softmax", lambda x: F.softmax(x, dim=1), lambda x: TF.softmax(x, dim=1)),
    ("log_softmax", lambda x: F.log_softmax(x, dim=-1), lambda x: TF.log_softmax(x, dim=-1)),
]


@on_devices
@pytest.mark.parametrize("name,ours,theirs", ACTIVATIONS, ids=[a[0] for a in ACTIVATIONS])
def test_activation_matches_torch(name, ours, theirs, device, dtype):
    np_dtype, atol = DTYPES[dtype]
    x = (_rng().standard_normal((3, 5)) * 3).astype(np_dtype)
    x[np.abs(x) < 1e-3] = 0.5  # away from kinks
    check_against_torch(ours, theirs, [x], device=device, atol=atol)


@pytest.mark.parametrize("name,ours", [(a[0], a[1]) for a in ACTIVATIONS if a[0] in
                                       ("gelu", "gelu_tanh", "silu", "softplus_beta", "elu", "softmax")])
def test_activation_finite_differences(name, ours):
    gradcheck(ours, _rng(1).standard_normal((2, 4)) * 2)


@on_devices
def test_softplus_is_stable_and_has_the_right_slope_at_zero(device, dtype):
    x = _wg(np.array([-1000.0, 0.0, 1000.0], DTYPES[dtype][0]), device, True)
    y = F.softplus(x)
    np.testing.assert_allclose(_np(y), [0.0, math.log(2.0), 1000.0])
    y.sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), [0.0, 0.5, 1.0])


@on_devices
def test_softmax_default_dim_follows_torch(device, dtype):
    np_dtype, atol = DTYPES[dtype]
    x = _rng().standard_normal((2, 3, 4)).astype(np_dtype)
    np.testing.assert_allclose(_np(F.softmax(_wg(x, device))), TF.softmax(_th(x), dim=0).numpy(), atol=atol)


# -- dropout (seeded, so these hold on every device; torch's random stream differs) ------
def test_dropout_scales_kept_values_and_is_reproducible(device):
    x = _wg(np.ones((200, 50), np.float32), device, True)
    webgrad.manual_seed(3)
    y = F.dropout(x, p=0.3)
    webgrad.manual_seed(3)
    y2 = F.dropout(x, p=0.3)
    values = _np(y)
    np.testing.assert_array_equal(values, _np(y2))
    np.testing.assert_allclose(np.unique(values), [0.0, 1.0 / 0.7], rtol=1e-6)
    assert abs((values == 0).mean() - 0.3) < 0.02
    y.sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), values)  # d(x * mask / (1-p)) / dx


@pytest.mark.parametrize("dtype", ["float32", "float16", "bfloat16"])
def test_dropout_masks_keep_one_minus_p_in_every_float_dtype(device, dtype):
    """The mask is drawn in one pass in the input's dtype (a compare of the generator's words
    on numpy, of Philox draws on WebGPU): kept values are exactly 1 / (1 - p), at rate 1 - p."""
    x = webgrad.ones(100_000, dtype=getattr(webgrad, dtype), device=device)
    for p, scale in ((0.2, 1.25), (0.75, 4.0)):
        webgrad.manual_seed(0)
        y = F.dropout(x, p=p)
        assert y.dtype is x.dtype
        values = _np(y.float())
        assert set(np.unique(values)) == {0.0, scale}
        assert abs((values == 0).mean() - p) < 0.006  # 4 standard deviations at most


def test_dropout_off_and_edge_probabilities(device):
    x = _wg(_rng().standard_normal((4, 4)).astype(np.float32), device)
    assert F.dropout(x, 0.5, training=False) is x
    assert F.dropout(x, 0.0) is x
    np.testing.assert_array_equal(_np(F.dropout(x, 1.0)), np.zeros((4, 4)))
    with pytest.raises(ValueError, match="between 0 and 1"):
        F.dropout(x, 1.5)


# -- linear ------------------------------------------------------------------------
@on_devices
@pytest.mark.parametrize("bias", [True, False])
def test_linear_matches_torch(device, dtype, bias):
    np_dtype, atol = DTYPES[dtype]
    rng = _rng()
    arrays = [rng.standard_normal(s).astype(np_dtype) for s in ((2, 3, 4), (5, 4), (5,))]
    if not bias:
        arrays = arrays[:2]
    check_against_torch(F.linear, TF.linear, arrays, device=device, atol=atol)


def test_linear_error_names_shapes():
    with pytest.raises(OpError, match=r"linear: input \(2, 3\) float32 .* weight \(5, 4\) float32"):
        F.linear(webgrad.ones(2, 3), webgrad.ones(5, 4))


@pytest.mark.parametrize("device", DEVICES)
def test_linear_is_one_op_eagerly_and_composes_in_a_trace(device):
    """Eagerly F.linear is one op (one autograd node: x @ w.T + b in one kernel); while a graph is
    traced (webgrad.compile, the exporters) it is the product and the add the graph passes know.
    Both give the same values and gradients; a bias of another shape takes the composed path."""
    rng = _rng()
    x0, w0, b0 = (rng.standard_normal(s).astype(np.float32) for s in ((2, 3, 4), (5, 4), (5,)))
    results = []
    tracer = type("Tracer", (registry.Observer,), {"traces_graph": True})()
    for observer in (None, tracer):
        x, w, b = (webgrad.tensor(a, device=device, requires_grad=True) for a in (x0, w0, b0))
        with registry.observing(observer) if observer else contextlib.nullcontext():
            y = F.linear(x, w, b)
            (y * y).sum().backward()
        assert y._node.name() == ("AddBackward" if observer else "LinearBackward")
        results.append([_np(t) for t in (y.detach(), x.grad, w.grad, b.grad)])
    for fused, composed in zip(*results):
        np.testing.assert_allclose(fused, composed, rtol=1e-6, atol=1e-6)
    broadcast_bias = webgrad.ones(3, 1, device=device, requires_grad=True)
    assert F.linear(webgrad.ones(3, 4, device=device), webgrad.ones(5, 4, device=device),
                    broadcast_bias)._node.name() == "AddBackward"


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("reduction", ["mean", "sum"])
def test_reduced_cross_entropy_is_one_op_each_way_eagerly_and_composes_in_a_trace(device, reduction):
    """Eagerly a mean (or sum) cross entropy is one op forward and one backward (the count of
    positions not ignored taken inside); a trace holds the per-position loss, the sums and the
    division its passes and exporters know. Both give the same loss and gradients (the op
    table checks them against torch's formula)."""
    rng = _rng()
    x0, labels = rng.standard_normal((6, 5)).astype(np.float32), np.array([0, 4, -100, 2, 1, -100])
    results = []
    tracer = type("Tracer", (registry.Observer,), {"traces_graph": True})()
    for observer in (None, tracer):
        x = webgrad.tensor(x0, device=device, requires_grad=True)
        ops: list = []
        counter = type("Counter", (registry.Observer,),
                       {"op_end": lambda self, t, op, *a, ops=ops: ops.append(op.name)})()
        with registry.observing(observer) if observer else contextlib.nullcontext(), registry.observing(counter):
            target = webgrad.tensor(labels, device=device)
            loss = F.cross_entropy(x, target, reduction=reduction, label_smoothing=0.1)
            (loss * 3).backward()
        if observer is None:
            assert ops == ["cross_entropy_total", "mul", "mul", "cross_entropy_backward"], ops
        else:
            assert "cross_entropy_total" not in ops and "cross_entropy" in ops, ops
        results.append((_np(loss.detach()), _np(x.grad)))
    for fused, composed in zip(*results):
        np.testing.assert_allclose(fused, composed, rtol=1e-6, atol=1e-7)


def test_cross_entropy_over_more_positions_than_one_workgroup_sums_composes(monkeypatch):
    from webgrad.ops import reduce

    monkeypatch.setattr(reduce, "TOTAL_MAX_POSITIONS", 4)  # WebGPU's one-workgroup total: 2**22 positions
    x = webgrad.randn(6, 5, requires_grad=True)
    labels = webgrad.tensor([0, 1, 2, 3, 4, 0])
    assert F.cross_entropy(x, labels)._node.name() == "DivBackward"
    assert F.cross_entropy(x[:4], labels[:4])._node.name() == "CrossEntropyTotalBackward"


def test_a_batch_of_rows_times_a_matrix_is_one_blas_product(monkeypatch):
    """numpy's matmul of (..., m, k) by (k, n) runs one small product per leading index (4x
    slower for MultiheadAttention's (seq, batch, features) layout): cpu folds the rows into
    one product, copying a layout that does not fold as it is."""
    from webgrad.backend.numpy import wasm_gemm
    from webgrad.backend.numpy.blas import cpu_threads

    products = []
    for owner, name in ((cpu_threads, "matmul"), (wasm_gemm, "matmul"), (wasm_gemm, "numpy_matmul")):
        kernel = getattr(owner, name)  # natively the first, in Pyodide one of the others
        monkeypatch.setattr(owner, name, lambda x, y, *rest, f=kernel: products.append(x.shape) or f(x, y, *rest))
    rng = _rng()
    x0, w0, b0 = (rng.standard_normal(s).astype(np.float32) for s in ((6, 4, 8), (5, 8), (5,)))
    x = webgrad.tensor(x0).transpose(0, 1)  # (4, 6, 8), not contiguous
    np.testing.assert_allclose(_np(F.linear(x, webgrad.tensor(w0), webgrad.tensor(b0))),
                               x0.transpose(1, 0, 2) @ w0.T + b0, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(_np(x @ webgrad.tensor(w0.T)), x0.transpose(1, 0, 2) @ w0.T, rtol=1e-5, atol=1e-5)
    assert products == [(24, 8), (24, 8)]


@requires_webgpu
def test_linear_adds_its_bias_in_the_products_stores_on_webgpu():
    layer = webgrad.nn.Linear(4, 5).to("webgpu")
    x = webgrad.randn(2, 3, 4, device="webgpu")
    device = webgrad.backend.get_backend("webgpu").device
    before = device.dispatches
    y = layer(x)
    assert device.dispatches - before == 1
    expected = x.numpy() @ layer.weight.detach().numpy().T + layer.bias.detach().numpy()
    np.testing.assert_allclose(y.detach().numpy(), expected, rtol=1e-5, atol=1e-6)



# -- convolution -----------------------------------------------------------------------
CONV2D_CASES = [
    dict(),
    dict(stride=2, padding=1),
    dict(padding="same", dilation=2),
    dict(padding="valid", stride=(1, 2)),
    dict(groups=2, stride=(2, 1), padding=(1, 0), dilation=(1, 2)),
    dict(groups=4, padding=2),
]


@on_devices
@pytest.mark.parametrize("case", CONV2D_CASES, ids=str)
def test_conv2d_matches_torch(case, device, dtype):
    np_dtype, atol = DTYPES[dtype]
    rng = _rng()
    groups = case.get("groups", 1)
    x = rng.standard_normal((2, 4, 7, 6)).astype(np_dtype)
    w = rng.standard_normal((8, 4 // groups, 3, 2)).astype(np_dtype)
    b = rng.standard_normal(8).astype(np_dtype)
    check_against_torch(lambda *a: F.conv2d(*a, **case), lambda *a: TF.conv2d(*a, **case), [x, w, b],
                        device=device, atol=atol * 10)


@on_devices
def test_conv2d_unbatched_and_without_bias(device, dtype):
    np_dtype, atol = DTYPES[dtype]
    rng = _rng()
    x, w = rng.standard_normal((3, 5, 5)).astype(np_dtype), rng.standard_normal((2, 3, 3, 3)).astype(np_dtype)
    check_against_torch(lambda x, w: F.conv2d(x, w, padding=1), lambda x, w: TF.conv2d(x, w, padding=1), [x, w],
                        device=device, atol=atol)


def test_conv2d_finite_differences():
    rng = _rng(2)
    gradcheck(lambda x, w, b: F.conv2d(x, w, b, stride=2, padding=1, groups=2), rng.standard_normal((2, 4, 5, 5)),
              rng.standard_normal((4, 2, 3, 3)), rng.standard_normal(4))


@on_devices
@pytest.mark.parametrize("case", [dict(), dict(stride=2, padding=2), dict(padding="same", dilation=2, groups=2)],
                         ids=str)
def test_conv1d_matches_torch(case, device, dtype):
    np_dtype, atol = DTYPES[dtype]
    rng = _rng()
    groups = case.get("groups", 1)
    x, w, b = (rng.standard_normal(s).astype(np_dtype) for s in ((2, 4, 9), (6, 4 // groups, 3), (6,)))
    check_against_torch(lambda *a: F.conv1d(*a, **case), lambda *a: TF.conv1d(*a, **case), [x, w, b],
                        device=device, atol=atol)


def test_conv_errors_name_shapes():
    x, w = webgrad.ones(1, 3, 8, 8), webgrad.ones(4, 2, 3, 3)
    with pytest.raises(OpError, match=r"conv2d: weight of shape \(4, 2, 3, 3\) .* expects 2 input channels.*"
                                      r"input of shape \(1, 3, 8, 8\) with 3 channels"):
        F.conv2d(x, w)
    with pytest.raises(ValueError, match="'same' is not supported for strided"):
        F.conv2d(x, webgrad.ones(4, 3, 3, 3), stride=2, padding="same")
    with pytest.raises(OpError, match="same floating dtype"):
        F.conv2d(x.double(), webgrad.ones(4, 3, 3, 3))
    with pytest.raises(OpError, match="smaller than the dilated kernel"):
        F.conv2d(webgrad.ones(1, 3, 2, 2), webgrad.ones(4, 3, 3, 3))
    with pytest.raises(OpError, match="conv1d"):
        F.conv1d(webgrad.ones(1, 3, 8), webgrad.ones(4, 2, 3))


# -- pooling -----------------------------------------------------------------------------
MAX_POOL_CASES = [
    dict(kernel_size=2),
    dict(kernel_size=3, stride=2, padding=1),
    dict(kernel_size=3, stride=2, padding=1, ceil_mode=True),
    dict(kernel_size=(2, 3), stride=(1, 2), dilation=2, padding=(1, 1)),
    # Windows that never overlap (webgpu: a backward thread per window, max_pool2d_backward_cells)
    dict(kernel_size=2, ceil_mode=True),
    dict(kernel_size=2, stride=3, padding=1),                             # gaps between windows
    dict(kernel_size=2, stride=(3, 2), dilation=(2, 1), padding=(1, 0)),  # dilated, just disjoint
]


@on_devices
@pytest.mark.parametrize("case", MAX_POOL_CASES, ids=str)
def test_max_pool2d_matches_torch(case, device, dtype):
    np_dtype, atol = DTYPES[dtype]
    x = _rng().permutation(2 * 3 * 7 * 8).reshape(2, 3, 7, 8).astype(np_dtype) / 10  # no ties
    check_against_torch(lambda x: F.max_pool2d(x, **case), lambda x: TF.max_pool2d(x, **case), [x],
                        device=device, atol=atol)
    ours, our_indices = F.max_pool2d(_wg(x, device), return_indices=True, **case)
    ref, ref_indices = TF.max_pool2d(_th(x), return_indices=True, **case)
    np.testing.assert_array_equal(our_indices.numpy(), ref_indices.numpy())


@on_devices
def test_max_pool2d_gradient_goes_to_first_maximum_like_torch(device, dtype):
    np_dtype, atol = DTYPES[dtype]
    x = np.zeros((1, 1, 4, 4), np_dtype)
    x[0, 0, 1, 1] = x[0, 0, 1, 0] = 1.0  # a tie inside one window
    check_against_torch(lambda x: F.max_pool2d(x, 2), lambda x: TF.max_pool2d(x, 2), [x], device=device, atol=atol)


@on_devices
def test_max_pool2d_padding_never_wins_and_nan_propagates_like_torch(device, dtype):
    np_dtype, atol = DTYPES[dtype]
    x = np.full((1, 2, 3, 3), -np.inf, np_dtype)  # -inf everywhere: the padding ties but must not win
    x[0, 1] = np.arange(9).reshape(3, 3)
    x[0, 1, 2, 1] = np.nan
    check_against_torch(lambda x: F.max_pool2d(x, 3, 2, 1), lambda x: TF.max_pool2d(x, 3, 2, 1), [x],
                        device=device, atol=atol)


@requires_webgpu
def test_max_pool2d_is_one_dispatch_each_way_on_webgpu():
    x = webgrad.randn(4, 3, 9, 9, device="webgpu").permute(0, 1, 3, 2).requires_grad_()  # a strided view
    device = webgrad.backend.get_backend("webgpu").device
    before = device.dispatches
    y = F.max_pool2d(x, 3, 2, 1)
    assert device.dispatches - before == 1
    g = webgrad.ones_like(y)
    before = device.dispatches
    (grad,) = webgrad.autograd.grad(y, x, g)
    assert device.dispatches - before == 1
    xc = x.detach().cpu().requires_grad_()
    yc = F.max_pool2d(xc, 3, 2, 1)
    yc.sum().backward()
    np.testing.assert_array_equal(y.detach().numpy(), yc.detach().numpy())
    np.testing.assert_array_equal(grad.numpy(), xc.grad.numpy())
    before = device.dispatches  # avg_pool2d, every window divided by 3 * 3: the taps, a depthwise convolution
    F.avg_pool2d(x, 3, 2, 1, ceil_mode=True)
    assert device.dispatches - before == 2
    before = device.dispatches  # border windows count fewer elements: the division after
    F.avg_pool2d(x, 3, 2, 1, count_include_pad=False)
    assert device.dispatches - before == 3


@on_devices
def test_max_pool2d_double_backward_matches_torch(device, dtype):
    """The gradient of a gradient (as WGAN-GP takes through a discriminator) stays on the two kernels."""
    np_dtype, atol = DTYPES[dtype]
    x = (_rng().permutation(2 * 6 * 6).reshape(1, 2, 6, 6) / 7.0).astype(np_dtype)

    def torch_side(torch):
        theirs = torch.tensor(x, requires_grad=True)
        (g,) = torch.autograd.grad((TF.max_pool2d(theirs, 3, 2, 1) ** 2).sum(), theirs, create_graph=True)
        (gg,) = torch.autograd.grad((g * g * g).sum(), theirs)
        return g.detach().numpy(), gg.numpy()
    ref_g, ref_gg = torch_value(torch_side)
    ours = _wg(x, device, requires_grad=True)
    (g,) = webgrad.autograd.grad((F.max_pool2d(ours, 3, 2, 1) ** 2).sum(), ours, create_graph=True)
    (gg,) = webgrad.autograd.grad((g * g * g).sum(), ours)
    np.testing.assert_allclose(_np(g), ref_g, atol=atol, rtol=1e-5)
    np.testing.assert_allclose(_np(gg), ref_gg, atol=atol * 10, rtol=1e-5)


def test_max_pool2d_finite_differences():
    x = _rng().permutation(2 * 6 * 6).reshape(1, 2, 6, 6) / 7.0
    gradcheck(lambda x: F.max_pool2d(x, 3, 2, 1), x, eps=1e-4)


AVG_POOL_CASES = [
    dict(kernel_size=2),
    dict(kernel_size=3, stride=2, padding=1),
    dict(kernel_size=3, stride=2, padding=1, count_include_pad=False),
    dict(kernel_size=3, stride=2, padding=1, ceil_mode=True),
    dict(kernel_size=(2, 3), stride=(2, 1), padding=(1, 1), ceil_mode=True, count_include_pad=False),
    dict(kernel_size=2, divisor_override=3),
]


@on_devices
@pytest.mark.parametrize("case", AVG_POOL_CASES, ids=str)
def test_avg_pool2d_matches_torch(case, device, dtype):
    np_dtype, atol = DTYPES[dtype]
    x = _rng().standard_normal((2, 3, 7, 8)).astype(np_dtype)
    check_against_torch(lambda x: F.avg_pool2d(x, **case), lambda x: TF.avg_pool2d(x, **case), [x],
                        device=device, atol=atol)


def test_avg_pool2d_finite_differences():
    gradcheck(lambda x: F.avg_pool2d(x, 3, 2, 1, ceil_mode=True), _rng().standard_normal((1, 2, 6, 5)))


def test_pool_errors():
    with pytest.raises(ValueError, match="pad should be at most half"):
        F.max_pool2d(webgrad.ones(1, 1, 8, 8), 2, padding=2)
    with pytest.raises(OpError, match="max_pool2d: expected a 3-D"):
        F.max_pool2d(webgrad.ones(8, 8), 2)


@on_devices
@pytest.mark.parametrize("output_size", [1, 3, (4, None), (5, 4), (7, 8)], ids=str)
def test_adaptive_avg_pool2d_matches_torch(output_size, device, dtype):
    np_dtype, atol = DTYPES[dtype]
    x = _rng().standard_normal((2, 3, 7, 8)).astype(np_dtype)
    check_against_torch(lambda x: F.adaptive_avg_pool2d(x, output_size),
                        lambda x: TF.adaptive_avg_pool2d(x, output_size), [x], device=device, atol=atol)


# -- normalization ----------------------------------------------------------------------------
@on_devices
@pytest.mark.parametrize("shape", [(6, 3), (4, 3, 5), (2, 3, 4, 4)])
def test_batch_norm_training_matches_torch_and_updates_running_stats(shape, device, dtype):
    np_dtype, atol = DTYPES[dtype]
    rng = _rng()
    x = (rng.standard_normal(shape) * 2 + 1).astype(np_dtype)
    w, b = rng.standard_normal(3).astype(np_dtype), rng.standard_normal(3).astype(np_dtype)
    rm, rv = np.zeros(3, np_dtype), np.ones(3, np_dtype)
    our_rm, our_rv, ref_rm, ref_rv = _wg(rm, device), _wg(rv, device), _th(rm), _th(rv)
    check_against_torch(lambda x, w, b: F.batch_norm(x, our_rm, our_rv, w, b, True, 0.2),
                        lambda x, w, b: TF.batch_norm(x, ref_rm, ref_rv, w, b, True, 0.2), [x, w, b],
                        device=device, atol=atol)
    assert our_rm.device == our_rv.device == device
    np.testing.assert_allclose(our_rm.numpy(), ref_rm.numpy(), atol=atol)
    np.testing.assert_allclose(our_rv.numpy(), ref_rv.numpy(), atol=atol)


@on_devices
def test_batch_norm_eval_uses_running_stats(device, dtype):
    np_dtype, atol = DTYPES[dtype]
    rng = _rng()
    x, rm, rv = (a.astype(np_dtype) for a in (rng.standard_normal((4, 3, 2)), rng.standard_normal(3),
                                              rng.random(3) + 0.5))
    check_against_torch(lambda x: F.batch_norm(x, _wg(rm, device), _wg(rv, device)),
                        lambda x: TF.batch_norm(x, _th(rm), _th(rv)), [x], device=device, atol=atol)
    with pytest.raises(ValueError, match="more than 1 value per channel"):
        F.batch_norm(webgrad.ones(1, 3, device=device), None, None, training=True)


def test_batch_norm_finite_differences():
    rng = _rng()
    gradcheck(lambda x, w, b: F.batch_norm(x, None, None, w, b, training=True),
              rng.standard_normal((4, 3, 2)), rng.standard_normal(3), rng.standard_normal(3))


@on_devices
@pytest.mark.parametrize("normalized_shape", [(5,), (4, 5)], ids=str)
def test_layer_norm_matches_torch(normalized_shape, device, dtype):
    np_dtype, atol = DTYPES[dtype]
    rng = _rng()
    x = (rng.standard_normal((2, 3, 4, 5)) * 3 + 1).astype(np_dtype)
    w = rng.standard_normal(normalized_shape).astype(np_dtype)
    b = rng.standard_normal(normalized_shape).astype(np_dtype)
    check_against_torch(lambda x, w, b: F.layer_norm(x, normalized_shape, w, b),
                        lambda x, w, b: TF.layer_norm(x, normalized_shape, w, b), [x, w, b],
                        device=device, atol=atol * 10)


def test_layer_norm_finite_differences_and_errors():
    rng = _rng()
    gradcheck(lambda x, w, b: F.layer_norm(x, (4,), w, b), rng.standard_normal((3, 4)), rng.standard_normal(4),
              rng.standard_normal(4))
    with pytest.raises(OpError, match=r"layer_norm: normalized_shape \(3,\) .* \(2, 4\) float32"):
        F.layer_norm(webgrad.ones(2, 4), (3,))


# -- embedding and one_hot -------------------------------------------------------------------------
@on_devices
def test_embedding_matches_torch_and_skips_padding_row(device, dtype):
    np_dtype, atol = DTYPES[dtype]
    weight, idx = _rng().standard_normal((6, 3)).astype(np_dtype), np.array([[0, 2, 5], [2, 2, 1]])
    check_against_torch(lambda w: F.embedding(_wg(idx, device), w, padding_idx=2),
                        lambda w: TF.embedding(_th(idx), w, padding_idx=2), [weight], device=device, atol=atol)
    w = _wg(weight, device, True)
    F.embedding(_wg(idx, device), w, padding_idx=-4).sum().backward()
    np.testing.assert_array_equal(w.grad.numpy()[2], 0.0)
    np.testing.assert_array_equal(w.grad.numpy()[0], 1.0)
    with pytest.raises(OpError, match="embedding: indices must be an int64"):
        F.embedding(webgrad.ones(2, device=device), w)


def test_one_hot_matches_torch(device):
    idx = np.array([[0, 3], [2, 1]])
    np.testing.assert_array_equal(F.one_hot(_wg(idx, device)).numpy(), TF.one_hot(_th(idx)).numpy())
    np.testing.assert_array_equal(F.one_hot(_wg(idx, device), 6).numpy(), TF.one_hot(_th(idx), 6).numpy())
    assert F.one_hot(_wg(idx, device)).dtype is webgrad.int64


# -- attention --------------------------------------------------------------------------------------
def _attention_inputs(np_dtype=np.float64):
    rng = _rng()
    return [rng.standard_normal(s).astype(np_dtype) for s in ((2, 3, 4, 8), (2, 3, 5, 8), (2, 3, 5, 6))]


@on_devices
@pytest.mark.parametrize("kind", ["plain", "bool_mask", "float_mask", "causal", "scale"])
def test_scaled_dot_product_attention_matches_torch(kind, device, dtype):
    np_dtype, atol = DTYPES[dtype]
    q, k, v = _attention_inputs(np_dtype)
    kwargs_ours, kwargs_torch = {}, {}
    if kind == "bool_mask":
        mask = _rng(1).random((4, 5)) > 0.3
        mask[:, 0] = True  # every query sees at least one key
        kwargs_ours["attn_mask"], kwargs_torch["attn_mask"] = _wg(mask, device), _th(mask)
    elif kind == "float_mask":
        mask = _rng(1).standard_normal((2, 1, 4, 5)).astype(np_dtype)
        kwargs_ours["attn_mask"], kwargs_torch["attn_mask"] = _wg(mask, device), _th(mask)
    elif kind == "causal":
        kwargs_ours["is_causal"] = kwargs_torch["is_causal"] = True
    elif kind == "scale":
        kwargs_ours["scale"] = kwargs_torch["scale"] = 0.3
    check_against_torch(lambda q, k, v: F.scaled_dot_product_attention(q, k, v, **kwargs_ours),
                        lambda q, k, v: TF.scaled_dot_product_attention(q, k, v, **kwargs_torch),
                        [q, k, v], device=device, atol=atol * 10)


def test_scaled_dot_product_attention_finite_differences():
    rng = _rng()
    q, k, v = rng.standard_normal((2, 3, 4)), rng.standard_normal((2, 5, 4)), rng.standard_normal((2, 5, 3))
    gradcheck(lambda q, k, v: F.scaled_dot_product_attention(q, k, v, is_causal=True), q, k, v)


def test_scaled_dot_product_attention_dropout_is_seeded(device):
    q, k, v = (_wg(a, device) for a in _attention_inputs(np.float32))
    webgrad.manual_seed(5)
    a = F.scaled_dot_product_attention(q, k, v, dropout_p=0.5)
    webgrad.manual_seed(5)
    b = F.scaled_dot_product_attention(q, k, v, dropout_p=0.5)
    np.testing.assert_array_equal(a.numpy(), b.numpy())
    assert not np.allclose(a.numpy(), F.scaled_dot_product_attention(q, k, v).numpy())


# -- losses ------------------------------------------------------------------------------------------
def _ce_case(shape, ignore=True, seed=0):
    rng = _rng(seed)
    classes = shape[1]
    logits = rng.standard_normal(shape) * 2
    target = rng.integers(0, classes, (shape[0],) + shape[2:])
    if ignore:
        target.reshape(-1)[::4] = -100
        target.reshape(-1)[1] = 1
    return logits, target


CE_OPTIONS = [dict(), dict(weight=True), dict(label_smoothing=0.2), dict(weight=True, label_smoothing=0.3),
              dict(ignore_index=1, label_smoothing=0.1)]


@on_devices
@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
@pytest.mark.parametrize("options", CE_OPTIONS, ids=str)
@pytest.mark.parametrize("shape", [(5, 4), (3, 4, 5), (2, 3, 2, 3)], ids=str)
def test_cross_entropy_class_indices_match_torch(shape, options, reduction, device, dtype):
    np_dtype, atol = DTYPES[dtype]
    logits, target = _ce_case(shape, ignore="ignore_index" not in options)
    logits = logits.astype(np_dtype)
    kwargs = dict(options, reduction=reduction)
    weight = _rng(9).random(shape[1]).astype(np_dtype) + 0.1 if kwargs.pop("weight", False) else None
    check_against_torch(
        lambda x: F.cross_entropy(x, _wg(target, device), None if weight is None else _wg(weight, device), **kwargs),
        lambda x: TF.cross_entropy(x, _th(target), None if weight is None else _th(weight), **kwargs),
        [logits], device=device, atol=atol * 10)


@on_devices
@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
@pytest.mark.parametrize("options", [dict(), dict(weight=True, label_smoothing=0.25)], ids=str)
def test_cross_entropy_probability_targets_match_torch(options, reduction, device, dtype):
    np_dtype, atol = DTYPES[dtype]
    rng = _rng()
    logits, probs = rng.standard_normal((3, 4, 2)), rng.dirichlet(np.ones(4), (3, 2)).transpose(0, 2, 1)
    kwargs = dict(options, reduction=reduction)
    weight = rng.random(4).astype(np_dtype) + 0.1 if kwargs.pop("weight", False) else None
    check_against_torch(
        lambda x, p: F.cross_entropy(x, p, None if weight is None else _wg(weight, device), **kwargs),
        lambda x, p: TF.cross_entropy(x, p, None if weight is None else _th(weight), **kwargs),
        [logits.astype(np_dtype), probs.astype(np_dtype)], device=device, atol=atol)


@on_devices
def test_cross_entropy_unbatched_matches_torch(device, dtype):
    np_dtype, atol = DTYPES[dtype]
    logits = _rng().standard_normal(5).astype(np_dtype)
    for target in (np.int64(3), np.array(2)):
        check_against_torch(lambda x, t=target: F.cross_entropy(x, _wg(t, device), label_smoothing=0.1),
                            lambda x, t=target: TF.cross_entropy(x, _th(t), label_smoothing=0.1), [logits],
                            device=device, atol=atol)


def test_cross_entropy_finite_differences():
    logits, target = _ce_case((4, 3, 2))
    weight = _wg(np.array([0.5, 1.0, 2.0]))
    gradcheck(lambda x: F.cross_entropy(x, _wg(target), weight, label_smoothing=0.1), logits)


def test_cross_entropy_errors_name_shapes_and_dtypes(device):
    logits = webgrad.randn(4, 3, device=device)
    with pytest.raises(OpError, match=r"cross_entropy: target \(4, 2\) int64 does not fit input \(4, 3\) float32"):
        F.cross_entropy(logits, webgrad.zeros(4, 2, dtype=webgrad.int64, device=device))
    with pytest.raises(OpError, match=r"target \(4,\) float32 .* expected int64 class indices of shape \(4,\)"):
        F.cross_entropy(logits, webgrad.zeros(4, device=device))
    # The cpu checks targets up front; webgpu flags them on the device and raises at the next read,
    # naming the kernel that read them.
    for bad, cpu_message in ((3, "target 3 is out of bounds for 3 classes"), (-1, "target -1 is out of bounds")):
        with pytest.raises(IndexError, match=cpu_message if device == "cpu" else "index was out of bounds in"):
            F.cross_entropy(logits, webgrad.tensor([0, 1, 2, bad], device=device)).item()
    with pytest.raises(ValueError, match="reduction must be"):
        F.cross_entropy(logits, webgrad.tensor([0, 1, 2, 0], device=device), reduction="avg")
    with pytest.raises(OpError, match=r"weight of shape \(2,\)"):
        F.cross_entropy(logits, webgrad.tensor([0, 1, 2, 0], device=device), weight=webgrad.ones(2, device=device))


@on_devices
@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_nll_loss_matches_torch(reduction, device, dtype):
    np_dtype, atol = DTYPES[dtype]
    logits, target = _ce_case((4, 5, 3))
    weight = _rng(2).random(5).astype(np_dtype)
    check_against_torch(
        lambda x: F.nll_loss(F.log_softmax(x, 1), _wg(target, device), _wg(weight, device), reduction=reduction),
        lambda x: TF.nll_loss(TF.log_softmax(x, 1), _th(target), _th(weight), reduction=reduction),
        [logits.astype(np_dtype)], device=device, atol=atol)


REGRESSION_LOSSES = [
    ("mse_loss", F.mse_loss, TF.mse_loss),
    ("l1_loss", F.l1_loss, TF.l1_loss),
    ("smooth_l1_loss", lambda x, y, **k: F.smooth_l1_loss(x, y, beta=0.7, **k),
     lambda x, y, **k: TF.smooth_l1_loss(x, y, beta=0.7, **k)),
    ("huber_loss", lambda x, y, **k: F.huber_loss(x, y, delta=0.6, **k),
     lambda x, y, **k: TF.huber_loss(x, y, delta=0.6, **k)),
]


@on_devices
@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
@pytest.mark.parametrize("name,ours,theirs", REGRESSION_LOSSES, ids=[r[0] for r in REGRESSION_LOSSES])
def test_regression_losses_match_torch(name, ours, theirs, reduction, device, dtype):
    np_dtype, atol = DTYPES[dtype]
    rng = _rng()
    x, y = rng.standard_normal((3, 4)).astype(np_dtype), rng.standard_normal((3, 4)).astype(np_dtype)
    check_against_torch(lambda x, y: ours(x, y, reduction=reduction), lambda x, y: theirs(x, y, reduction=reduction),
                        [x, y], device=device, atol=atol)


@on_devices
@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_binary_cross_entropy_matches_torch(reduction, device, dtype):
    np_dtype, atol = DTYPES[dtype]
    rng = _rng()
    x, y, w = (a.astype(np_dtype) for a in (rng.random((3, 4)) * 0.9 + 0.05, rng.random((3, 4)), rng.random(4)))
    check_against_torch(lambda x, y: F.binary_cross_entropy(x, y, _wg(w, device), reduction=reduction),
                        lambda x, y: TF.binary_cross_entropy(x, y, _th(w), reduction=reduction), [x, y],
                        device=device, atol=atol)


@on_devices
def test_binary_cross_entropy_clamps_log_at_minus_100(device, dtype):
    np_dtype = DTYPES[dtype][0]
    x, y = np.array([0.0, 1.0, 0.0, 1.0], np_dtype), np.array([1.0, 0.0, 0.0, 1.0], np_dtype)
    ours = F.binary_cross_entropy(_wg(x, device, True), _wg(y, device), reduction="none")
    np.testing.assert_allclose(_np(ours), TF.binary_cross_entropy(_th(x), _th(y), reduction="none").numpy())
    np.testing.assert_allclose(_np(ours), [100.0, 100.0, 0.0, 0.0])
    with pytest.raises(ValueError, match="between 0 and 1"):  # checked on the cpu only: no readback on webgpu
        F.binary_cross_entropy(webgrad.tensor([1.5]), webgrad.tensor([1.0]))


@on_devices
@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
@pytest.mark.parametrize("weights", [False, True])
def test_binary_cross_entropy_with_logits_matches_torch(weights, reduction, device, dtype):
    np_dtype, atol = DTYPES[dtype]
    rng = _rng()
    x, y = (rng.standard_normal((3, 4)) * 4).astype(np_dtype), rng.random((3, 4)).astype(np_dtype)
    w, pw = (rng.random(4) + 0.5).astype(np_dtype), (rng.random(4) * 3).astype(np_dtype)
    kw_ours = dict(weight=_wg(w, device), pos_weight=_wg(pw, device)) if weights else {}
    kw_torch = dict(weight=_th(w), pos_weight=_th(pw)) if weights else {}
    check_against_torch(lambda x, y: F.binary_cross_entropy_with_logits(x, y, reduction=reduction, **kw_ours),
                        lambda x, y: TF.binary_cross_entropy_with_logits(x, y, reduction=reduction, **kw_torch),
                        [x, y], device=device, atol=atol * 10)


@on_devices
def test_binary_cross_entropy_with_logits_is_stable(device, dtype):
    np_dtype = DTYPES[dtype][0]
    x = _wg(np.array([-1000.0, 0.0, 1000.0], np_dtype), device, True)
    y = _wg(np.array([1.0, 0.5, 0.0], np_dtype), device)
    loss = F.binary_cross_entropy_with_logits(x, y, reduction="none")
    np.testing.assert_allclose(_np(loss), [1000.0, math.log(2.0), 1000.0])
    loss.sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), [-1.0, 0.0, 1.0])
    with pytest.raises(ValueError, match="same shape"):
        F.binary_cross_entropy_with_logits(webgrad.ones(3, device=device), webgrad.ones(3, 1, device=device))


def test_loss_finite_differences():
    rng = _rng()
    y = rng.random((2, 3))
    gradcheck(lambda x: F.binary_cross_entropy_with_logits(x, _wg(y), pos_weight=_wg(np.array([1.0, 2.0, 0.5]))),
              rng.standard_normal((2, 3)))
    gradcheck(lambda x: F.binary_cross_entropy(x, _wg(y)), rng.random((2, 3)) * 0.8 + 0.1)
    gradcheck(lambda x, t: F.smooth_l1_loss(x, t, beta=0.5), rng.standard_normal((2, 3)), rng.standard_normal((2, 3)))
