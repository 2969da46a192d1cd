"""Spatial layers against torch: transposed and 3-D convolution, 1-D/3-D/adaptive/power pools,
unpooling, interpolate, pixel/channel shuffles, fold/unfold, affine_grid and grid_sample.

Each case is one function written for either library (``F`` is torch's or webgrad's
functional namespace). Forward values and the gradients along a fixed output weight
are compared with torch on every device; gradients are also checked against float64
finite differences on the cpu. Modules: constructor arguments, repr and state_dict keys
as torch's, and the same output once torch's weights are loaded.
"""
from __future__ import annotations

import numpy as np
import pytest

import webgrad
import webgrad.nn.functional as WF
from conftest import gradcheck
from torch_reference import lazy_torch
from webgrad import nn

torch = lazy_torch()


def _first(out):
    return out[0] if isinstance(out, tuple) else out


# name, fn(F, *inputs), input shapes (the first input of a pool is kept away from ties by the generator)
CASES = [
    ("conv3d", lambda F, x, w, b: F.conv3d(x, w, b, stride=(1, 2, 1), padding=1, groups=2),
     [(2, 4, 4, 5, 3), (6, 2, 2, 3, 2), (6,)]),
    ("conv3d_same_dilated", lambda F, x, w: F.conv3d(x, w, padding="same", dilation=(2, 1, 1)),
     [(1, 2, 5, 4, 4), (3, 2, 2, 3, 3)]),
    ("conv_transpose1d", lambda F, x, w, b: F.conv_transpose1d(x, w, b, stride=3, padding=2, output_padding=1,
                                                               groups=2, dilation=2),
     [(2, 4, 5), (4, 3, 3), (6,)]),
    ("conv_transpose2d", lambda F, x, w, b: F.conv_transpose2d(x, w, b, stride=(2, 1), padding=(1, 0),
                                                               output_padding=(1, 0)),
     [(2, 3, 4, 5), (3, 2, 3, 2), (2,)]),
    ("conv_transpose2d_output_padding_over_padding", lambda F, x, w: F.conv_transpose2d(
        x, w, stride=3, padding=0, output_padding=2, dilation=2), [(1, 2, 3, 3), (2, 2, 2, 2)]),
    ("conv_transpose2d_unbatched", lambda F, x, w: F.conv_transpose2d(x, w, groups=2), [(4, 3, 3), (4, 1, 2, 2)]),
    ("conv_transpose3d", lambda F, x, w, b: F.conv_transpose3d(x, w, b, stride=(2, 1, 2), padding=(1, 0, 1),
                                                               output_padding=(1, 0, 0), groups=2),
     [(1, 4, 3, 2, 3), (4, 1, 3, 2, 2), (2,)]),
    ("max_pool1d", lambda F, x: F.max_pool1d(x, 3, 2, 1, ceil_mode=True, return_indices=True), [(2, 3, 10)]),
    ("max_pool3d", lambda F, x: F.max_pool3d(x, (2, 3, 2), (1, 2, 2), (1, 1, 0), dilation=(1, 1, 2),
                                             return_indices=True), [(2, 2, 4, 5, 6)]),
    ("avg_pool1d", lambda F, x: F.avg_pool1d(x, 3, 2, 1, ceil_mode=True, count_include_pad=False), [(2, 3, 10)]),
    ("avg_pool2d_one_element_tuples", lambda F, x: F.avg_pool2d(x, (3,), padding=(1,)), [(1, 2, 6, 7)]),
    ("avg_pool3d", lambda F, x: F.avg_pool3d(x, 3, 2, 1, ceil_mode=True, count_include_pad=False),
     [(1, 2, 5, 6, 4)]),
    ("avg_pool3d_divisor", lambda F, x: F.avg_pool3d(x, (2, 2, 3), divisor_override=5), [(1, 2, 4, 4, 6)]),
    ("adaptive_avg_pool1d", lambda F, x: F.adaptive_avg_pool1d(x, 4), [(2, 3, 7)]),
    ("adaptive_avg_pool3d", lambda F, x: F.adaptive_avg_pool3d(x, (2, None, 3)), [(1, 2, 5, 3, 7)]),
    ("adaptive_max_pool1d", lambda F, x: F.adaptive_max_pool1d(x, 3, return_indices=True), [(2, 3, 8)]),
    ("adaptive_max_pool2d", lambda F, x: F.adaptive_max_pool2d(x, (3, 2), return_indices=True), [(2, 3, 7, 5)]),
    ("adaptive_max_pool3d", lambda F, x: F.adaptive_max_pool3d(x, 2, return_indices=True), [(1, 2, 5, 3, 4)]),
    ("lp_pool2d", lambda F, x: F.lp_pool2d(x, 2.0, (2, 3), stride=2), [(1, 2, 6, 7)]),
    ("lp_pool1d", lambda F, x: F.lp_pool1d(x, 2.0, 2), [(2, 3, 8)]),
    ("max_unpool2d", lambda F, x: F.max_unpool2d(*F.max_pool2d(x, 3, 3, 1, return_indices=True), 3, 3, 1,
                                                 output_size=(7, 8)), [(1, 2, 7, 8)]),
    ("max_unpool3d", lambda F, x: F.max_unpool3d(*F.max_pool3d(x, 2, return_indices=True), 2), [(1, 2, 4, 4, 4)]),
    ("interpolate_nearest", lambda F, x: F.interpolate(x, scale_factor=(1.7, 0.6)), [(1, 2, 5, 6)]),
    ("interpolate_nearest_exact", lambda F, x: F.interpolate(x, size=(7, 4), mode="nearest-exact"), [(1, 2, 5, 6)]),
    ("interpolate_linear", lambda F, x: F.interpolate(x, scale_factor=2.5, mode="linear"), [(2, 3, 5)]),
    ("interpolate_linear_corners", lambda F, x: F.interpolate(x, size=3, mode="linear", align_corners=True),
     [(2, 3, 7)]),
    ("interpolate_bilinear", lambda F, x: F.interpolate(x, scale_factor=(1.5, 0.7), mode="bilinear",
                                                        recompute_scale_factor=True), [(1, 2, 5, 6)]),
    ("interpolate_bilinear_scale", lambda F, x: F.interpolate(x, scale_factor=(1.5, 0.7), mode="bilinear"),
     [(1, 2, 5, 6)]),
    ("interpolate_bicubic", lambda F, x: F.interpolate(x, size=(8, 3), mode="bicubic"), [(1, 2, 5, 6)]),
    ("interpolate_bicubic_corners", lambda F, x: F.interpolate(x, size=(8, 9), mode="bicubic", align_corners=True),
     [(1, 2, 5, 6)]),
    ("interpolate_bilinear_antialias", lambda F, x: F.interpolate(x, size=(3, 4), mode="bilinear", antialias=True),
     [(1, 2, 9, 11)]),
    ("interpolate_bicubic_antialias", lambda F, x: F.interpolate(x, size=(4, 14), mode="bicubic", antialias=True,
                                                                 align_corners=True), [(1, 2, 9, 11)]),
    ("interpolate_trilinear", lambda F, x: F.interpolate(x, size=(3, 5, 2), mode="trilinear"), [(1, 2, 4, 3, 5)]),
    ("interpolate_area", lambda F, x: F.interpolate(x, scale_factor=0.5, mode="area"), [(1, 2, 7, 6)]),
    ("pixel_shuffle", lambda F, x: F.pixel_shuffle(x, 2), [(2, 8, 3, 2)]),
    ("pixel_unshuffle", lambda F, x: F.pixel_unshuffle(x, 3), [(2, 2, 6, 3)]),
    ("channel_shuffle", lambda F, x: F.channel_shuffle(x, 3), [(2, 6, 2, 2)]),
    ("unfold", lambda F, x: F.unfold(x, (2, 3), dilation=(1, 2), padding=1, stride=(2, 1)), [(2, 3, 5, 6)]),
    ("fold", lambda F, x: F.fold(x, (5, 6), (2, 3), dilation=(1, 2), padding=1, stride=(2, 1)), [(2, 18, 12)]),
    ("affine_grid", lambda F, t: F.affine_grid(t, (2, 3, 4, 5), align_corners=False), [(2, 2, 3)]),
    ("affine_grid_3d", lambda F, t: F.affine_grid(t, (2, 3, 2, 4, 3), align_corners=True), [(2, 3, 4)]),
]
GRID_CASES = [(mode, padding_mode, align_corners, spatial) for spatial in (2, 3)
              for mode in (("bilinear", "nearest", "bicubic") if spatial == 2 else ("bilinear", "nearest"))
              for padding_mode in ("zeros", "border", "reflection") for align_corners in (False, True)]


def _inputs(shapes, seed):
    rng = np.random.default_rng(seed)
    # Distinct values (a shuffled range, scaled) keep pools and nearest samples away from ties.
    return [(rng.permutation(int(np.prod(s))).reshape(s) / max(1, int(np.prod(s))) * 4 - 2
             + rng.uniform(-1e-3, 1e-3, s)) for s in shapes]


def _compare(fn, arrays, device, torch_ref, dtype=None):
    dtype = dtype or (webgrad.float64 if device == "cpu" else webgrad.float32)
    ours = [webgrad.tensor(a, dtype=dtype, device=device, requires_grad=True) for a in arrays]
    out = fn(WF, *ours)
    first = _first(out)
    weight = np.random.default_rng(7).standard_normal(tuple(first.shape))

    def theirs(torch):
        xs = [torch.tensor(a, requires_grad=True) for a in arrays]
        result = fn(torch.nn.functional, *xs)
        outs = result if isinstance(result, tuple) else (result,)
        grads = torch.autograd.grad((outs[0] * torch.tensor(weight)).sum(), xs, allow_unused=True)
        grads = [np.zeros(x.shape) if g is None else g.numpy() for x, g in zip(xs, grads)]
        return tuple(o.detach().numpy() for o in outs) + tuple(grads)

    expected = torch_ref(theirs)
    outs = out if isinstance(out, tuple) else (out,)
    tol = dict(rtol=1e-9, atol=1e-10) if dtype is webgrad.float64 else dict(rtol=2e-4, atol=2e-4)
    for got, want in zip(outs, expected[:len(outs)]):
        assert tuple(got.shape) == want.shape
        np.testing.assert_allclose(got.detach().numpy().astype(np.float64), want, **tol)
    grads = webgrad.autograd.grad((first * webgrad.tensor(weight, dtype=dtype, device=device)).sum(), ours,
                                  allow_unused=True)
    for got, want in zip(grads, expected[len(outs):]):
        got = np.zeros(want.shape) if got is None else got.numpy().astype(np.float64)
        np.testing.assert_allclose(got, want, **tol)


@pytest.mark.parametrize("name, fn, shapes", CASES, ids=[c[0] for c in CASES])
def test_spatial_matches_torch(name, fn, shapes, device, torch_ref):
    _compare(fn, _inputs(shapes, 0), device, torch_ref)


@pytest.mark.parametrize("name, fn, shapes", CASES, ids=[c[0] for c in CASES])
def test_spatial_finite_differences(name, fn, shapes):
    inputs = [webgrad.tensor(a, dtype=webgrad.float64, requires_grad=True) for a in _inputs(shapes, 1)]
    gradcheck(lambda *xs: _first(fn(WF, *xs)), inputs)


@pytest.mark.parametrize("mode, padding_mode, align_corners, spatial", GRID_CASES)
def test_grid_sample_matches_torch(mode, padding_mode, align_corners, spatial, device, torch_ref):
    rng = np.random.default_rng(spatial)
    image = rng.standard_normal((2, 3, 4, 5) if spatial == 2 else (2, 2, 3, 4, 5))
    grid = rng.uniform(-1.3, 1.3, (2, 3, 4, 2) if spatial == 2 else (2, 2, 3, 2, 3))

    def fn(F, x, g):
        return F.grid_sample(x, g, mode=mode, padding_mode=padding_mode, align_corners=align_corners)

    _compare(fn, [image, grid], device, torch_ref)
    if device == "cpu" and mode != "nearest":
        inputs = [webgrad.tensor(a, requires_grad=True) for a in (image, grid)]
        gradcheck(lambda x, g: fn(WF, x, g), inputs)


MODULES = [
    ("Conv3d", (2, 4, 3), dict(padding=1, padding_mode="reflect", groups=2), (), (1, 2, 4, 5, 4)),
    ("Conv2d", (2, 3, (2, 3)), dict(padding="same", padding_mode="circular", dilation=2), (), (1, 2, 6, 7)),
    ("Conv1d", (2, 3, 3), dict(padding=2, padding_mode="replicate", bias=False), (), (2, 2, 6)),
    ("ConvTranspose1d", (2, 4, 3), dict(stride=2, padding=1, output_padding=1, groups=2), (), (2, 2, 5)),
    ("ConvTranspose2d", (2, 3, 3), dict(stride=2, padding=1), ((9, 10),), (1, 2, 5, 5)),
    ("ConvTranspose3d", (2, 3, (2, 3, 2)), dict(stride=(2, 1, 3), padding=1, dilation=2), (), (1, 2, 3, 4, 3)),
    ("MaxPool1d", (3,), dict(stride=2, padding=1), (), (2, 3, 9)),
    ("MaxPool3d", (2,), dict(ceil_mode=True), (), (1, 2, 5, 4, 5)),
    ("AvgPool1d", (3,), dict(stride=2, count_include_pad=False, padding=1), (), (2, 3, 9)),
    ("AvgPool3d", (2,), dict(divisor_override=3), (), (1, 2, 4, 4, 4)),
    ("AdaptiveAvgPool1d", (3,), {}, (), (2, 3, 7)),
    ("AdaptiveAvgPool3d", ((2, 3, 1),), {}, (), (1, 2, 5, 4, 3)),
    ("AdaptiveMaxPool1d", (3,), {}, (), (2, 3, 7)),
    ("AdaptiveMaxPool2d", ((2, 3),), {}, (), (1, 2, 5, 7)),
    ("AdaptiveMaxPool3d", (2,), {}, (), (1, 2, 5, 4, 3)),
    ("LPPool1d", (2, 3), {}, (), (2, 3, 7)),
    ("LPPool2d", (2, 2), dict(stride=1), (), (1, 2, 4, 5)),
    ("Upsample", (), dict(scale_factor=2, mode="bilinear"), (), (1, 2, 3, 4)),
    ("Upsample", (), dict(size=(4, 5, 3), mode="trilinear", align_corners=True), (), (1, 1, 2, 3, 2)),
    ("UpsamplingNearest2d", (), dict(scale_factor=3), (), (1, 2, 3, 2)),
    ("UpsamplingBilinear2d", (), dict(size=(5, 7)), (), (1, 2, 3, 2)),
    ("PixelShuffle", (2,), {}, (), (1, 8, 2, 3)),
    ("PixelUnshuffle", (2,), {}, (), (1, 2, 4, 6)),
    ("ChannelShuffle", (2,), {}, (), (1, 4, 2, 3)),
    ("Unfold", (2,), dict(padding=1, stride=2), (), (1, 2, 4, 5)),
    ("Fold", ((4, 5), 2), dict(padding=1, stride=2), (), (1, 8, 9)),
]


@pytest.mark.parametrize("name, args, kwargs, forward_args, shape", MODULES, ids=[m[0] for m in MODULES])
def test_module_matches_torch(name, args, kwargs, forward_args, shape, torch_ref):
    ours = getattr(nn, name)(*args, **kwargs).double()
    x = _inputs([shape], 3)[0]

    def theirs(torch):
        module = getattr(torch.nn, name)(*args, **kwargs).double()
        torch.manual_seed(0)
        state = {k: torch.randn(v.shape, dtype=v.dtype) for k, v in module.state_dict().items()}
        module.load_state_dict(state)
        out = module(torch.tensor(x), *forward_args)
        keys = np.array(list(state), dtype=str)
        return (np.array(repr(module)), keys, _first(out).detach().numpy()) + tuple(v.numpy() for v in state.values())

    expected = torch_ref(theirs)
    assert repr(ours) == str(expected[0])
    assert list(ours.state_dict()) == [str(k) for k in expected[1]]
    ours.load_state_dict({k: webgrad.tensor(v) for k, v in zip(ours.state_dict(), expected[3:])})
    got = _first(ours(webgrad.tensor(x), *forward_args))
    np.testing.assert_allclose(got.detach().numpy(), expected[2], rtol=1e-9, atol=1e-10)


def test_conv_transpose_output_size_out_of_range_names_the_range():
    with pytest.raises(ValueError, match="valid sizes range from 9 to 10"):
        nn.ConvTranspose2d(2, 3, 3, stride=2, padding=1)(webgrad.randn(1, 2, 5, 5), output_size=(12, 12))


def test_interpolate_errors_follow_torch():
    x = webgrad.randn(1, 2, 4, 4)
    with pytest.raises(ValueError, match="only one of size or scale_factor"):
        WF.interpolate(x, size=3, scale_factor=2)
    with pytest.raises(ValueError, match="align_corners option can only be set"):
        WF.interpolate(x, size=3, align_corners=True)
    with pytest.raises(NotImplementedError, match="linear mode needs 3D input"):
        WF.interpolate(x, size=3, mode="linear")


@pytest.mark.parametrize("kernel, stride, padding", [(2, 2, 0), (3, 3, 1), (3, 1, 1), (2, 3, 0)])
def test_max_pool2d_gradient_with_inf_and_nan_in_g(kernel, stride, padding):
    """Disjoint windows take a faster backward (g times a 0/1 mask) that must not let an inf
    or NaN in g reach positions that were not the window's maximum; overlaps still add."""
    from conftest import need_module

    torch = need_module("torch")
    rng = np.random.default_rng(0)
    x = rng.standard_normal((2, 3, 7, 7)).astype(np.float32)
    out_shape = tuple(torch.nn.functional.max_pool2d(torch.from_numpy(x), kernel, stride, padding).shape)
    for special in (None, np.inf, np.nan):
        g = rng.standard_normal(out_shape).astype(np.float32)
        if special is not None:
            g[0, 1, 1, 1] = special
        xt = torch.tensor(x, requires_grad=True)
        torch.nn.functional.max_pool2d(xt, kernel, stride, padding).backward(torch.from_numpy(g))
        xw = webgrad.tensor(x, requires_grad=True)
        WF.max_pool2d(xw, kernel, stride, padding).backward(webgrad.tensor(g))
        np.testing.assert_allclose(xw.grad.numpy(), xt.grad.numpy(), rtol=1e-6, atol=1e-6,
                                   err_msg=f"g with {special}")  # overlaps: sums in another order
