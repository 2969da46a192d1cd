"""The conv2d primitives (core/ops/conv.py, wgsl_kernels/conv.wgsl): forward and both
backward passes against torch on cpu and webgpu, over strides, asymmetric padding,
dilation, groups, batch/channel 1 and strided views; float64 finite differences for
first and second derivatives; on webgpu both the product path and the direct kernel."""
import numpy as np
import pytest

import webgrad
import webgrad.nn.functional as F
from webgrad.ops import conv
from conftest import assert_close, gradcheck, gradgradcheck, need_module, requires_webgpu

# (N, C, H, W), (O, kh, kw), stride, padding (top, bottom, left, right), dilation, groups
CASES = [
    ((2, 3, 7, 6), (4, 3, 3), (1, 1), (0, 0, 0, 0), (1, 1), 1),
    ((1, 1, 5, 5), (1, 2, 2), (1, 1), (0, 0, 0, 0), (1, 1), 1),            # batch 1, channels 1
    ((2, 4, 9, 8), (6, 3, 2), (2, 1), (1, 0, 2, 1), (1, 2), 2),            # asymmetric pad, groups
    ((3, 2, 8, 8), (3, 3, 3), (2, 3), (1, 1, 1, 1), (2, 1), 1),            # stride, dilation
    ((2, 4, 6, 6), (4, 3, 3), (1, 1), (1, 1, 1, 1), (1, 1), 4),            # depthwise
    ((2, 4, 6, 6), (8, 3, 3), (1, 1), (2, 0, 0, 2), (1, 1), 4),            # depthwise, multiplier 2
    ((1, 3, 1, 12), (2, 1, 4), (1, 3), (0, 0, 2, 1), (1, 2), 1),           # conv1d-shaped
    ((2, 2, 4, 4), (3, 4, 4), (1, 1), (0, 0, 0, 0), (1, 1), 1),            # kernel = input: 1x1 output
    ((2, 3, 5, 7), (2, 1, 1), (2, 2), (0, 1, 1, 0), (1, 1), 1),            # 1x1 kernel, strided
    ((2, 8, 6, 5), (4, 3, 3), (2, 1), (1, 2, 0, 1), (1, 1), 2),            # 4 input channels a group
    ((2, 3, 8, 8), (3, 2, 2), (2, 2), (0, 0, 0, 0), (1, 1), 3),            # depthwise, windows tile the input
    ((2, 3, 9, 7), (3, 2, 3), (3, 3), (1, 0, 0, 1), (1, 1), 3),            # depthwise, gaps between windows
    ((2, 3, 9, 9), (3, 3, 3), (2, 1), (1, 1, 0, 2), (2, 1), 3),            # depthwise, dilated, overlapping
]
DEPTHWISE = [case for case in CASES if case[-1] > 1 and case[-1] == case[0][1] == case[1][0]]


def _ids(case):
    x, (o, kh, kw), s, p, d, g = case
    return f"x{'x'.join(map(str, x))}-o{o}k{kh}{kw}-s{s[0]}{s[1]}-p{''.join(map(str, p))}-d{d[0]}{d[1]}-g{g}"


def _torch_conv(torch, x, w, stride, padding, dilation, groups):
    top, bottom, left, right = padding
    xp = torch.nn.functional.pad(x, (left, right, top, bottom))
    return torch.nn.functional.conv2d(xp, w, stride=stride, dilation=dilation, groups=groups)


def _arrays(case, rng):
    x_shape, (o, kh, kw), _, _, _, groups = case
    x = rng.standard_normal(x_shape).astype(np.float32)
    w = rng.standard_normal((o, x_shape[1] // groups, kh, kw)).astype(np.float32)
    return x, w


@pytest.mark.parametrize("case", CASES, ids=_ids)
def test_forward_and_both_gradients_match_torch(case, device):
    torch = need_module("torch")
    rng = np.random.default_rng(1)
    x, w = _arrays(case, rng)
    _, _, stride, padding, dilation, groups = case
    tx, tw = torch.tensor(x, requires_grad=True), torch.tensor(w, requires_grad=True)
    expected = _torch_conv(torch, tx, tw, stride, padding, dilation, groups)
    g = rng.standard_normal(tuple(expected.shape)).astype(np.float32)
    expected.backward(torch.tensor(g))

    X = webgrad.tensor(x, device=device, requires_grad=True)
    W = webgrad.tensor(w, device=device, requires_grad=True)
    out = webgrad.ops.conv2d_core(X, W, stride, padding, dilation, groups)
    assert_close(out, expected.detach().numpy(), rtol=1e-4, atol=1e-4)
    out.backward(webgrad.tensor(g, device=device))
    assert_close(X.grad, tx.grad.numpy(), rtol=1e-4, atol=1e-4)
    assert_close(W.grad, tw.grad.numpy(), rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("block_elements", [1, 150])
@pytest.mark.parametrize("case", CASES, ids=_ids)
def test_numpy_passes_in_blocks_of_images(case, block_elements, monkeypatch):
    """The numpy kernels go a few images at a time (one each, or blocks with a shorter last
    one): the same results as torch."""
    monkeypatch.setattr(conv, "BLOCK_ELEMENTS", block_elements)
    test_forward_and_both_gradients_match_torch(case, "cpu")


@pytest.mark.parametrize("layout", ["transposed", "sliced"])
def test_strided_views_are_read_in_place(layout, device):
    torch = need_module("torch")
    rng = np.random.default_rng(2)
    base_x = rng.standard_normal((3, 6, 5, 2)).astype(np.float32)   # permuted to (2, 3, 6, 5)
    base_w = rng.standard_normal((4, 3, 6, 3)).astype(np.float32)   # sliced to (4, 3, 3, 3)
    X = webgrad.tensor(base_x, device=device)
    W = webgrad.tensor(base_w, device=device)
    if layout == "transposed":
        x, w = X.permute(3, 0, 1, 2), W[:, :, ::2, :]
        tx, tw = torch.tensor(base_x).permute(3, 0, 1, 2), torch.tensor(base_w)[:, :, ::2, :]
    else:
        x, w = X.permute(3, 0, 1, 2)[:, 1:, 1:, 1:], W[1:, 1:, 3:, :]  # views with offsets
        tx = torch.tensor(base_x).permute(3, 0, 1, 2)[:, 1:, 1:, 1:]
        tw = torch.tensor(base_w)[1:, 1:, 3:]
    if device == "webgpu":  # the kernel reads the views' strides, no copy first
        assert not x._data.is_contiguous() and not w._data.is_contiguous()
    expected = _torch_conv(torch, tx, tw, (1, 2), (1, 0, 0, 1), (1, 1), 1)
    assert_close(webgrad.ops.conv2d_core(x, w, (1, 2), (1, 0, 0, 1), (1, 1), 1), expected.numpy(),
                 rtol=1e-4, atol=1e-4)
    n, o, ho, wo = expected.shape
    g = webgrad.tensor(rng.standard_normal((ho, n, wo, o)).astype(np.float32), device=device).permute(1, 3, 0, 2)
    tg = torch.tensor(g.numpy())
    geometry = dict(stride=(1, 2), padding=(1, 0, 0, 1), dilation=(1, 1), groups=1)
    t_gx, t_gw = torch.autograd.grad(_torch_conv(torch, tx.requires_grad_(), tw.requires_grad_(), (1, 2),
                                                 (1, 0, 0, 1), (1, 1), 1), [tx, tw], tg)
    gx = conv.conv2d_backward_input(g, w, input_hw=tuple(x.shape[2:]), **geometry)
    gw = conv.conv2d_backward_weight(g, x, kernel_hw=tuple(w.shape[2:]), **geometry)
    assert_close(gx, t_gx.numpy(), rtol=1e-4, atol=1e-4)
    assert_close(gw, t_gw.numpy(), rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("case", DEPTHWISE, ids=_ids)
def test_depthwise_box_filters_match_torch(case, device):
    """Taps equal within each channel (avg_pool2d's): numpy sums the windows before it scales."""
    torch = need_module("torch")
    rng = np.random.default_rng(4)
    x, w = _arrays(case, rng)
    w = np.broadcast_to(rng.standard_normal((w.shape[0], 1, 1, 1)), w.shape).astype(np.float32)
    _, _, stride, padding, dilation, groups = case
    tx = torch.tensor(x, requires_grad=True)
    expected = _torch_conv(torch, tx, torch.tensor(w), stride, padding, dilation, groups)
    g = rng.standard_normal(tuple(expected.shape)).astype(np.float32)
    expected.backward(torch.tensor(g))
    X = webgrad.tensor(x, device=device, requires_grad=True)
    out = webgrad.ops.conv2d_core(X, webgrad.tensor(w, device=device), stride, padding, dilation, groups)
    assert_close(out, expected.detach().numpy(), rtol=1e-4, atol=1e-4)
    out.backward(webgrad.tensor(g, device=device))
    assert_close(X.grad, tx.grad.numpy(), rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("case", [CASES[2], CASES[3], CASES[5], *DEPTHWISE], ids=_ids)
def test_gradients_match_finite_differences_float64(case):
    rng = np.random.default_rng(3)
    x, w = _arrays(case, rng)
    _, _, stride, padding, dilation, groups = case
    X = webgrad.tensor(x, dtype=webgrad.float64, requires_grad=True)
    W = webgrad.tensor(w, dtype=webgrad.float64, requires_grad=True)

    def fn(a, b):
        return webgrad.ops.conv2d_core(a, b, stride, padding, dilation, groups)

    gradcheck(fn, [X, W])
    gradgradcheck(fn, [X, W])


def test_backward_primitives_have_exact_vjps_float64():
    """conv2d_backward_input / _weight as functions of their own inputs (double backward)."""
    rng = np.random.default_rng(4)
    geometry = dict(stride=(2, 1), padding=(1, 0, 2, 1), dilation=(1, 2), groups=2)
    x = webgrad.tensor(rng.standard_normal((2, 4, 7, 6)), dtype=webgrad.float64, requires_grad=True)
    w = webgrad.tensor(rng.standard_normal((6, 2, 3, 2)), dtype=webgrad.float64, requires_grad=True)
    out_shape = tuple(conv.conv2d(x, w, **geometry).shape)
    g = webgrad.tensor(rng.standard_normal(out_shape), dtype=webgrad.float64, requires_grad=True)
    gradcheck(lambda g_, w_: conv.conv2d_backward_input(g_, w_, input_hw=(7, 6), **geometry), [g, w])
    gradcheck(lambda g_, x_: conv.conv2d_backward_weight(g_, x_, kernel_hw=(3, 2), **geometry), [g, x])


@requires_webgpu
def test_webgpu_gradients_equal_cpu_through_F_conv2d_and_conv1d():
    rng = np.random.default_rng(5)
    results = {}
    for device in ("cpu", "webgpu"):
        x2 = webgrad.tensor(rng.standard_normal((2, 3, 8, 8)).astype(np.float32), device=device, requires_grad=True)
        w2 = webgrad.tensor(rng.standard_normal((5, 3, 3, 3)).astype(np.float32), device=device, requires_grad=True)
        b2 = webgrad.tensor(rng.standard_normal(5).astype(np.float32), device=device, requires_grad=True)
        x1 = webgrad.tensor(rng.standard_normal((2, 4, 11)).astype(np.float32), device=device, requires_grad=True)
        w1 = webgrad.tensor(rng.standard_normal((6, 2, 3)).astype(np.float32), device=device, requires_grad=True)
        y2 = F.conv2d(x2, w2, b2, stride=2, padding="valid")
        y1 = F.conv1d(x1, w1, padding="same", dilation=2, groups=2)
        ((y2 * y2).sum() + (y1.tanh()).sum()).backward()
        results[device] = [t.detach().numpy() for t in (y2, y1, x2.grad, w2.grad, b2.grad, x1.grad, w1.grad)]
        rng = np.random.default_rng(5)  # the same draws for the second device
    for got, want in zip(results["webgpu"], results["cpu"]):
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)


def _force_path(monkeypatch, path):
    from webgrad.backend.webgpu import conv as gpu_conv

    for name in ("GEMM_MIN_CHANNELS", "SWIFTSHADER_GEMM_MIN_CHANNELS"):
        monkeypatch.setattr(gpu_conv, name, 1 if path == "product" else 1 << 30)
    monkeypatch.setattr(gpu_conv, "PRODUCT_MIN_MACS", 1)


def test_product_rows_follow_the_adapter():
    """SwiftShader takes a pass as a product from 16 rows per group, other adapters from 4."""
    from webgrad.backend.webgpu import conv as gpu_conv

    def backend(**info):
        return type("Backend", (), {"device": type("Device", (), {"adapter_info": info})})

    assert gpu_conv.gemm_min_channels(backend(vendor="google", architecture="swiftshader")) == 16
    assert gpu_conv.gemm_min_channels(backend(device="llvmpipe (LLVM 15.0.6, 256 bits)", adapter_type="CPU")) == 4
    assert gpu_conv.gemm_min_channels(backend(device="NVIDIA H200", adapter_type="DiscreteGPU")) == 4


def test_direct_kernels_take_up_to_four_pixels_of_a_row():
    from webgrad.backend.webgpu import conv as gpu_conv

    assert [gpu_conv.pixels(width) for width in (0, 1, 2, 3, 4, 7, 24)] == [1, 1, 2, 2, 4, 4, 4]


@requires_webgpu
@pytest.mark.parametrize("path", ["product", "direct"])
@pytest.mark.parametrize("case", CASES, ids=_ids)
def test_webgpu_product_and_direct_paths_match_torch(case, path, monkeypatch):
    """Each webgpu pass is a product over im2col columns where the geometry allows (backward
    input: stride 1, padding within the kernel's reach) or conv.wgsl's direct kernel: both
    agree with torch on every case."""
    _force_path(monkeypatch, path)
    test_forward_and_both_gradients_match_torch(case, "webgpu")


@requires_webgpu
def test_webgpu_weight_gradient_over_a_long_batch_stays_right(monkeypatch):
    """backward_weight's product sums over N*Ho*Wo; past a CPU adapter's loop-trip limit
    (llvmpipe stops an invocation silently) the pass takes the direct kernel instead."""
    _force_path(monkeypatch, "product")
    _weight_gradient_matches_cpu(7, (256, 4, 32, 32), (256, 4, 32, 32), (3, 3), 1e-3, 1e-2,
                                 stride=(1, 1), padding=(1, 1, 1, 1), dilation=(1, 1), groups=1)


def _weight_gradient_matches_cpu(seed, x_shape, g_shape, kernel_hw, rtol, atol, **geometry):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal(x_shape).astype(np.float32)
    g = rng.standard_normal(g_shape).astype(np.float32)
    got = conv.conv2d_backward_weight(webgrad.tensor(g, device="webgpu"), webgrad.tensor(x, device="webgpu"),
                                      kernel_hw=kernel_hw, **geometry)
    want = conv.conv2d_backward_weight(webgrad.tensor(g), webgrad.tensor(x), kernel_hw=kernel_hw, **geometry)
    assert_close(got, want.numpy(), rtol=rtol, atol=atol)


@requires_webgpu
@pytest.mark.parametrize("path, counts", [("direct", (1, 1, 1)), ("product", (4, 5, 5)), ("default", (1, 1, 1))])
def test_dispatches_per_pass_on_webgpu(path, counts, monkeypatch):
    """Direct: one dispatch a pass. Product: pad (fill, copy), columns, product; backward input
    also flips the weights, backward weight also lays g out by group. By default a pass this
    small stays direct."""
    from webgrad.backend.webgpu import backend

    if path != "default":
        _force_path(monkeypatch, path)
    x = webgrad.randn(4, 3, 12, 12, device="webgpu")
    w = webgrad.randn(8, 3, 3, 3, device="webgpu")
    geometry = dict(stride=(1, 1), padding=(1, 1, 1, 1), dilation=(1, 1), groups=1)
    g = webgrad.randn(4, 8, 12, 12, device="webgpu")
    device = backend().device
    for count, run in zip(counts, (lambda: conv.conv2d(x, w, **geometry),
                                   lambda: conv.conv2d_backward_input(g, w, input_hw=(12, 12), **geometry),
                                   lambda: conv.conv2d_backward_weight(g, x, kernel_hw=(3, 3), **geometry))):
        before = device.dispatches
        run()
        assert device.dispatches - before == count


def test_backward_primitives_refuse_a_gradient_of_the_wrong_size():
    geometry = dict(stride=(1, 1), padding=(0, 0, 0, 0), dilation=(1, 1), groups=1)
    g = webgrad.ones(1, 2, 4, 4)  # a (5, 5) input and a 3x3 kernel give 3x3
    with pytest.raises(ValueError, match=r"conv2d_backward_weight: the output gradient.*\(3, 3\)"):
        conv.conv2d_backward_weight(g, webgrad.ones(1, 2, 5, 5), kernel_hw=(3, 3), **geometry)
    with pytest.raises(ValueError, match=r"conv2d_backward_input: the output gradient.*\(3, 3\)"):
        conv.conv2d_backward_input(g, webgrad.ones(2, 2, 3, 3), input_hw=(5, 5), **geometry)


@pytest.mark.parametrize("bad, message", [
    (dict(w_shape=(2, 3, 3, 3)), "does not fit input"),
    (dict(stride=(0, 1)), "stride and dilation must be positive"),
    (dict(padding=(0, 0, -1, 0)), "padding non-negative"),
    (dict(w_shape=(2, 2, 9, 3)), "smaller than the dilated kernel"),
    (dict(padding=(0, 0, 0)), "4 paddings"),
    (dict(dtype=webgrad.float64), "same floating dtype"),
    (dict(dtype=webgrad.int32), "same floating dtype"),
])
def test_conv2d_core_bad_arguments_name_the_op(bad, message):
    x = webgrad.ones(1, 2, 5, 5)
    w = webgrad.ones(*bad.get("w_shape", (2, 2, 3, 3)), dtype=bad.get("dtype", webgrad.float32))
    with pytest.raises(ValueError, match=f"conv2d.*{message}|{message}"):
        webgrad.ops.conv2d_core(x, w, bad.get("stride", (1, 1)), bad.get("padding", (0, 0, 0, 0)), (1, 1), 1)


@requires_webgpu
@pytest.mark.parametrize("kernel, g_hw", [((2, 3), (3, 5)), ((2, 2), (3, 7))], ids=["k2x3", "k2x2"])
@pytest.mark.parametrize("lanes", [1, 4, 64])
def test_webgpu_weight_gradient_with_any_team_size(lanes, kernel, g_hw, monkeypatch):
    """backward_weight splits the batch over a team of lanes on a GPU (one lane on a CPU adapter,
    which takes three kernel columns a thread where they divide the kernel's width)."""
    from webgrad.backend.webgpu import conv as gpu_conv

    monkeypatch.setattr(gpu_conv, "choose_lanes", lambda *args: lanes)
    _weight_gradient_matches_cpu(6, (5, 4, 6, 7), (5, 6, *g_hw), kernel, 1e-4, 1e-4,
                                 stride=(2, 1), padding=(1, 0, 1, 1), dilation=(1, 2), groups=2)


@pytest.mark.parametrize("shape, size", [((2, 3, 8, 6), (2, 3)), ((5, 4, 4), 2), ((1, 2, 6, 6), (3, 6))], ids=str)
def test_adaptive_avg_pool2d_with_equal_windows_matches_torch(shape, size, device):
    """Windows that tile the input take the one-reduction path (the digits CNN's 4x4 -> 2x2)."""
    torch = need_module("torch")
    x = np.random.default_rng(7).standard_normal(shape).astype(np.float32)
    tx = torch.tensor(x, requires_grad=True)
    expected = torch.nn.functional.adaptive_avg_pool2d(tx, size)
    expected.backward(torch.ones_like(expected))
    X = webgrad.tensor(x, device=device, requires_grad=True)
    out = F.adaptive_avg_pool2d(X, size)
    assert_close(out, expected.detach().numpy())
    out.sum().backward()
    assert_close(X.grad, tx.grad.numpy())
