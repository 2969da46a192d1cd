"""Elementwise maths beyond the op table: the composites of ops/pointwise.py, webgrad.special,
and PyTorch's values and gradients at special points (step functions, x ** 0 at 0, NaN
through abs/relu/maximum, ties), each compared with torch on every device.

The primitives themselves (tan, asin, ..., erfinv, atan2, fmod, copysign, trunc) have
rows in tests/op_cases.py.
"""
from __future__ import annotations

import math

import numpy as np
import pytest

import webgrad

RNG = np.random.default_rng(22)


def _uniform(low, high, *shape):
    return RNG.uniform(low, high, shape).astype(np.float32)


def _compare(device, torch_ref, ours, theirs, inputs, rtol=2e-5, atol=2e-6, grad=True):
    """Forward values and, for float inputs, gradients of sum(out * weights)."""
    tensors = [webgrad.tensor(a, device=device, requires_grad=grad and a.dtype.kind == "f") for a in inputs]
    out = ours(*tensors)
    weights = np.linspace(0.5, 1.5, max(out.numel(), 1)).reshape(tuple(out.shape)).astype(np.float32)

    def torch_side(torch):
        ts = [torch.tensor(a, requires_grad=grad and a.dtype.kind == "f") for a in inputs]
        result = theirs(torch, *ts)
        grads = []
        if grad and result.requires_grad:
            wanted = [t for t in ts if t.requires_grad]
            found = torch.autograd.grad((result * torch.tensor(weights)).sum(), wanted, allow_unused=True)
            grads = [np.zeros(t.shape, np.float32) if g is None else g.numpy() for t, g in zip(wanted, found)]
        return (result.detach().numpy(), *grads)

    expected = torch_ref(torch_side)
    np.testing.assert_allclose(out.detach().numpy(), expected[0], rtol=rtol, atol=atol, equal_nan=True)
    assert out.dtype.name == str(expected[0].dtype).replace("bool", "bool")
    if grad and len(expected) > 1:
        (out * webgrad.tensor(weights, device=device)).sum().backward()
        got = [t.grad.numpy() if t.grad is not None else np.zeros(t.shape, np.float32)
               for t in tensors if t.requires_grad]
        for g, e in zip(got, expected[1:]):
            np.testing.assert_allclose(g, e, rtol=rtol * 10, atol=atol * 10, equal_nan=True)


X = _uniform(-2, 2, 3, 4)
Y = _uniform(-2, 2, 3, 4)
P = _uniform(0.3, 3, 3, 4)
Q = _uniform(0.05, 0.95, 3, 4)
BESSEL_X = np.array([-25.0, -3.0, -0.5, 0.0, 0.7, 4.0, 12.0, 19.5, 22.0, 30.0], dtype=np.float32)  # both branches
GAMMA_X = np.array([-3.7, -1.2, -0.4, 0.1, 0.5, 1.0, 1.5, 2.0, 3.3, 7.9, 12.5, 40.0], dtype=np.float32)

COMPOSITES = {
    "log2": (lambda x: webgrad.log2(x), lambda t, x: t.log2(x), [P]),
    "log10": (lambda x: x.log10(), lambda t, x: t.log10(x), [P]),
    "exp2": (lambda x: webgrad.exp2(x), lambda t, x: t.exp2(x), [X]),
    "logaddexp": (lambda x, y: webgrad.logaddexp(x, y), lambda t, x, y: t.logaddexp(x, y), [X, Y]),
    "logaddexp_ties": (lambda x, y: x.logaddexp(y), lambda t, x, y: t.logaddexp(x, y),
                       [np.array([1.0, -3.0, 0.5], np.float32), np.array([1.0, -3.0, 2.0], np.float32)]),
    "logaddexp_infinities": (lambda x, y: x.logaddexp(y), lambda t, x, y: t.logaddexp(x, y),
                             [np.array([np.inf, -np.inf, -np.inf, 3.0], np.float32),
                              np.array([np.inf, -np.inf, 1.0, np.inf], np.float32)]),
    "logaddexp2": (lambda x, y: x.logaddexp2(y), lambda t, x, y: t.logaddexp2(x, y), [X, Y]),
    "frac": (lambda x: x.frac(), lambda t, x: t.frac(x), [X * 3]),
    "lerp_scalar": (lambda a, b: webgrad.lerp(a, b, 0.3), lambda t, a, b: t.lerp(a, b, 0.3), [X, Y]),
    "lerp_scalar_high": (lambda a, b: a.lerp(b, 0.8), lambda t, a, b: t.lerp(a, b, 0.8), [X, Y]),
    "lerp_tensor": (lambda a, b, w: webgrad.lerp(a, b, w), lambda t, a, b, w: t.lerp(a, b, w), [X, Y, Q]),
    "addcmul": (lambda a, b, c: webgrad.addcmul(a, b, c, value=0.5), lambda t, a, b, c: t.addcmul(a, b, c, value=0.5),
                [X, Y, P]),
    "addcdiv": (lambda a, b, c: a.addcdiv(b, c, value=-2), lambda t, a, b, c: t.addcdiv(a, b, c, value=-2), [X, Y, P]),
    "clamp_min": (lambda x: webgrad.clamp_min(x, 0.3), lambda t, x: t.clamp_min(x, 0.3), [X]),
    "clamp_max": (lambda x: x.clamp_max(-0.3), lambda t, x: t.clamp_max(x, -0.3), [X]),
    "hypot": (lambda x, y: webgrad.hypot(x, y), lambda t, x, y: t.hypot(x, y), [X, Y]),
    "square": (lambda x: webgrad.square(x), lambda t, x: t.square(x), [X]),
    "deg2rad": (lambda x: x.deg2rad(), lambda t, x: t.deg2rad(x), [X * 90]),
    "rad2deg": (lambda x: webgrad.rad2deg(x), lambda t, x: t.rad2deg(x), [X]),
    "logit": (lambda x: webgrad.logit(x), lambda t, x: t.logit(x), [Q]),
    "logit_eps": (lambda x: x.logit(0.2), lambda t, x: t.logit(x, 0.2), [Q]),
    "xlogy": (lambda x, y: webgrad.xlogy(x, y), lambda t, x, y: t.xlogy(x, y), [X, P]),
    "xlogy_zero": (lambda x, y: x.xlogy(y), lambda t, x, y: t.xlogy(x, y),
                   [np.array([0.0, 0.0, 1.0, 0.0], np.float32), np.array([2.0, np.nan, 3.0, -1.0], np.float32)]),
    "xlog1py": (lambda x, y: webgrad.special.xlog1py(x, y), lambda t, x, y: t.special.xlog1py(x, y), [X, P]),
    "sinc": (lambda x: webgrad.sinc(x), lambda t, x: t.sinc(x),
             [np.array([0.0, 0.3, -1.5, 2.0, 1e-3], np.float32)]),
    "lgamma": (lambda x: webgrad.lgamma(x), lambda t, x: t.lgamma(x), [GAMMA_X]),
    "digamma": (lambda x: x.digamma(), lambda t, x: t.digamma(x), [GAMMA_X]),
    "polygamma1": (lambda x: webgrad.polygamma(1, x), lambda t, x: t.polygamma(1, x), [GAMMA_X]),
    "polygamma2": (lambda x: x.polygamma(2), lambda t, x: t.polygamma(2, x), [GAMMA_X]),
    "mvlgamma": (lambda x: webgrad.mvlgamma(x, 3), lambda t, x: t.mvlgamma(x, 3), [P + 1.5]),
    "ndtr": (lambda x: webgrad.special.ndtr(x), lambda t, x: t.special.ndtr(x), [X * 3]),
    "ndtri": (lambda x: webgrad.special.ndtri(x), lambda t, x: t.special.ndtri(x), [Q]),
    "log_ndtr": (lambda x: webgrad.special.log_ndtr(x), lambda t, x: t.special.log_ndtr(x),
                 [np.array([-40.0, -12.0, -5.0, -1.0, 0.0, 2.0, 6.0], np.float32)]),
    "entr": (lambda x: webgrad.special.entr(x), lambda t, x: t.special.entr(x), [P]),
    "entr_edges": (lambda x: webgrad.special.entr(x), lambda t, x: t.special.entr(x),
                   [np.array([-1.0, 0.0, np.nan, np.inf], np.float32)]),
    "zeta": (lambda x, q: webgrad.special.zeta(x, q), lambda t, x, q: t.special.zeta(x, q), [P + 1.2, P]),
    # negative q with integer s (summed directly past the poles) and off the domain
    "zeta_edges": (lambda x, q: webgrad.special.zeta(x, q), lambda t, x, q: t.special.zeta(x, q),
                   [np.array([2.0, 3.0, 5.0, 4.0, 2.5, 0.5, 1.0, 3.0], np.float32),
                    np.array([-0.5, -5.5, -30.7, -7.9, -1.5, 2.0, 3.0, -2.0], np.float32)]),
    "erfinv_special": (lambda x: webgrad.special.erfinv(x), lambda t, x: t.special.erfinv(x), [Q * 2 - 1]),
    "expit": (lambda x: webgrad.special.expit(x), lambda t, x: t.special.expit(x), [X]),
    "erfcx": (lambda x: webgrad.special.erfcx(x), lambda t, x: t.special.erfcx(x),
              [np.array([-3.0, -0.5, 0.0, 1.0, 4.0, 8.5, 9.5, 30.0, 1e4], np.float32)]),
    "i0": (lambda x: webgrad.i0(x), lambda t, x: t.i0(x), [BESSEL_X]),
    "i0e": (lambda x: webgrad.special.i0e(x), lambda t, x: t.special.i0e(x), [BESSEL_X]),
    "i1": (lambda x: webgrad.special.i1(x), lambda t, x: t.special.i1(x), [BESSEL_X]),
    "i1e": (lambda x: webgrad.special.i1e(x), lambda t, x: t.special.i1e(x), [BESSEL_X]),
    "round_decimals": (lambda x: webgrad.round(x, decimals=2), lambda t, x: t.round(x, decimals=2), [X]),
    "special_round": (lambda x: webgrad.special.round(x), lambda t, x: t.special.round(x), [X * 3]),
    "div_trunc": (lambda x, y: x.div(y, rounding_mode="trunc"), lambda t, x, y: t.div(x, y, rounding_mode="trunc"),
                  [X * 3, P]),
    "div_floor": (lambda x, y: webgrad.div(x, y, rounding_mode="floor"),
                  lambda t, x, y: t.div(x, y, rounding_mode="floor"), [X * 3, P]),
}
LOOSE = {"erfcx": (5e-5, 1e-6), "i0": (5e-5, 1e-5), "i1": (5e-5, 1e-5), "i0e": (5e-5, 1e-6), "i1e": (5e-5, 1e-6),
         "lgamma": (1e-5, 2e-5), "digamma": (1e-5, 2e-5), "polygamma1": (5e-5, 1e-5), "polygamma2": (5e-5, 1e-5),
         "mvlgamma": (1e-5, 2e-5), "zeta": (5e-5, 1e-5), "zeta_edges": (5e-5, 1e-5), "ndtri": (5e-5, 1e-5),
         "log_ndtr": (2e-5, 1e-5)}
# torch: zero gradients for the roundings (compared below), no derivative for zeta, NaN/inf ones at the edges.
NO_GRAD = {"div_trunc", "div_floor", "special_round", "zeta", "zeta_edges", "entr_edges",
           "logaddexp_infinities"}


@pytest.mark.parametrize("name", sorted(COMPOSITES))
def test_composite_matches_torch(name, device, torch_ref):
    ours, theirs, inputs = COMPOSITES[name]
    rtol, atol = LOOSE.get(name, (2e-5, 2e-6))
    _compare(device, torch_ref, ours, theirs, inputs, rtol, atol, grad=name not in NO_GRAD)


def test_float_power_and_integer_division_match_torch(torch_ref):
    x = np.array([-7, -3, 4, 9], dtype=np.int64)
    ours = [webgrad.float_power(webgrad.tensor(x), 2).numpy(),
            webgrad.div(webgrad.tensor(x), 2, rounding_mode="trunc").numpy(),
            webgrad.tensor(x).div(-2, rounding_mode="floor").numpy(),
            webgrad.fmod(webgrad.tensor(x), 3).numpy()]
    expected = torch_ref(lambda torch: (torch.float_power(torch.tensor(x), 2).numpy(),
                                        torch.div(torch.tensor(x), 2, rounding_mode="trunc").numpy(),
                                        torch.tensor(x).div(-2, rounding_mode="floor").numpy(),
                                        torch.fmod(torch.tensor(x), 3).numpy()))
    for a, b in zip(ours, expected):
        np.testing.assert_array_equal(a, b)
        assert a.dtype == b.dtype


def test_comparisons_match_torch(device, torch_ref):
    a = np.array([1.0, np.nan, np.inf, 1.0 + 1e-7, 2.0], np.float32)
    b = np.array([1.0, np.nan, np.inf, 1.0, 2.1], np.float32)
    x, y = webgrad.tensor(a, device=device), webgrad.tensor(b, device=device)
    ours = [webgrad.isclose(x, y).numpy(), x.isclose(y, equal_nan=True).numpy(),
            webgrad.isposinf(x).numpy(), webgrad.isneginf(-x).numpy(), webgrad.isreal(x).numpy(),
            np.array([webgrad.allclose(x, x, equal_nan=True), webgrad.equal(x, y), x.equal(x[:2])])]
    expected = torch_ref(lambda torch: (
        torch.isclose(torch.tensor(a), torch.tensor(b)).numpy(),
        torch.isclose(torch.tensor(a), torch.tensor(b), equal_nan=True).numpy(),
        torch.isposinf(torch.tensor(a)).numpy(), torch.isneginf(-torch.tensor(a)).numpy(),
        torch.isreal(torch.tensor(a)).numpy(),
        np.array([torch.allclose(torch.tensor(a), torch.tensor(a), equal_nan=True),
                  torch.equal(torch.tensor(a), torch.tensor(b)), torch.equal(torch.tensor(a), torch.tensor(a)[:2])])))
    for got, want in zip(ours, expected):
        np.testing.assert_array_equal(got, want)


# -- PyTorch's values and gradients at special points -------------------------------------------
SPECIAL_GRADIENTS = {
    "step_functions": (lambda x: x.floor() + x.ceil() + x.round() + x.sign() + x.trunc() + x.frac(),
                       lambda t, x: x.floor() + x.ceil() + x.round() + x.sign() + x.trunc() + x.frac(),
                       [np.array([1.5, -0.5, 0.0, 2.0, np.nan], np.float32)]),
    "pow_zero_exponent": (lambda x: x ** 0, lambda t, x: x ** 0, [np.array([0.0, 2.0, -1.0], np.float32)]),
    "pow_tensor_zero_exponent": (lambda x, y: x ** y, lambda t, x, y: x ** y,
                                 [np.array([0.0, 2.0], np.float32), np.array([0.0, 0.0], np.float32)]),
    "abs_nan": (lambda x: x.abs(), lambda t, x: x.abs(), [np.array([np.nan, 0.0, -2.0], np.float32)]),
    "relu_nan": (lambda x: x.relu(), lambda t, x: x.relu(), [np.array([np.nan, 0.0, -2.0, 3.0], np.float32)]),
    "maximum_ties_nan_inf": (lambda x, y: webgrad.maximum(x, y), lambda t, x, y: t.maximum(x, y),
                             [np.array([1.0, np.nan, np.inf, 2.0, np.nan, -np.inf], np.float32),
                              np.array([1.0, 1.0, np.inf, np.nan, np.nan, 0.0], np.float32)]),
    "minimum_ties_nan_inf": (lambda x, y: webgrad.minimum(x, y), lambda t, x, y: t.minimum(x, y),
                             [np.array([1.0, np.nan, np.inf, 2.0, np.nan, -np.inf], np.float32),
                              np.array([1.0, 1.0, np.inf, np.nan, np.nan, 0.0], np.float32)]),
    "floor_divide": (lambda x: x // 2, lambda t, x: t.div(x, 2, rounding_mode="floor"), [X]),
}


@pytest.mark.parametrize("name", sorted(SPECIAL_GRADIENTS))
def test_special_point_gradients_match_torch(name, device, torch_ref):
    ours, theirs, inputs = SPECIAL_GRADIENTS[name]
    _compare(device, torch_ref, ours, theirs, inputs)


def test_step_functions_require_grad_like_torch():
    x = webgrad.tensor([1.5, -0.5], requires_grad=True)
    for fn in (webgrad.floor, webgrad.ceil, webgrad.round, webgrad.sign, webgrad.trunc, webgrad.frac):
        assert fn(x).requires_grad


def test_nan_powers_on_device(device, torch_ref):
    a = np.array([np.nan, np.nan, 1.0, -1.0, 0.5, 2.0, -2.0], np.float32)
    b = np.array([np.inf, 0.0, np.nan, np.inf, np.inf, -np.inf, np.inf], np.float32)
    ours = (webgrad.tensor(a, device=device) ** webgrad.tensor(b, device=device)).numpy()
    expected = torch_ref(lambda torch: (torch.tensor(a) ** torch.tensor(b)).numpy())
    np.testing.assert_array_equal(ours, expected)


def test_two_python_numbers_make_a_tensor(torch_ref):
    ours = [webgrad.add(2, 3), webgrad.mul(2, 3.0), webgrad.div(3, 2), webgrad.sub(2, 1.5)]
    expected = torch_ref(lambda torch: tuple(t.numpy() for t in (torch.add(2, 3), torch.mul(2, 3.0),
                                                                  torch.div(3, 2), torch.sub(2, 1.5))))
    for got, want in zip(ours, expected):
        assert isinstance(got, webgrad.Tensor)
        np.testing.assert_allclose(got.numpy(), want)
        assert got.dtype.name == str(want.dtype)


def test_tensor_methods_and_aliases():
    x = webgrad.tensor([0.25, -0.5])
    assert webgrad.arcsin is webgrad.asin and webgrad.arctan2 is webgrad.atan2 and webgrad.fix is webgrad.trunc
    np.testing.assert_allclose(x.arcsin().numpy(), np.arcsin(x.numpy()), rtol=1e-6)
    np.testing.assert_allclose(x.remainder(0.2).numpy(), np.remainder(x.numpy(), np.float32(0.2)), rtol=1e-5)
    np.testing.assert_allclose(x.true_divide(2).numpy(), x.numpy() / 2)
    assert [t.item() for t in x.unbind()] == [0.25, -0.5]
    y = x.clone()
    y.trunc_()
    assert y.tolist() == [0.0, -0.0]
    assert x.positive() is x


def test_errors_match_torch():
    with pytest.raises(webgrad.OpError, match="frac"):
        webgrad.frac(webgrad.tensor([1, 2]))
    with pytest.raises(webgrad.OpError, match="bool"):
        webgrad.positive(webgrad.tensor([True]))
    with pytest.raises(ValueError, match="rounding_mode"):
        webgrad.div(webgrad.tensor([1.0]), 2, rounding_mode="ceil")
    with pytest.raises(RuntimeError, match="division by zero"):
        webgrad.fmod(webgrad.tensor([1, 2]), 0)


def test_erfinv_round_trips_in_float64():
    y = np.linspace(-0.999999, 0.999999, 101)
    x = webgrad.erfinv(webgrad.tensor(y, dtype=webgrad.float64)).numpy()
    np.testing.assert_allclose(np.vectorize(math.erf)(x), y, rtol=1e-14, atol=1e-15)


def test_new_primitives_export_to_onnx():
    """Each new primitive's ONNX emitter computes what webgrad does (onnxruntime runs the file)."""
    from conftest import need_module

    ort = need_module("onnxruntime")
    import io

    def model(x, y):
        z = x.clamp(-0.9, 0.9)
        return (z.tan() + z.asin() + z.acos() + z.atan() + z.sinh() + z.cosh() + z.asinh() + (z * 0.5 + 1.5).acosh()
                + z.atanh() + z.expm1() + z.erfc() + z.erfinv() + (x * 3).trunc() + webgrad.fmod(x, y)
                + webgrad.atan2(x, y) + webgrad.copysign(x, y))

    x = _uniform(-1, 1, 2, 5)
    y = np.array([[0.7, -0.6, 1.3, -1.1, 0.9]] * 2, np.float32)
    buffer = io.BytesIO()
    webgrad.onnx.export(model, (webgrad.tensor(x), webgrad.tensor(y)), buffer, input_names=["x", "y"])
    session = ort.InferenceSession(buffer.getvalue(), providers=["CPUExecutionProvider"])
    (got,) = session.run(None, {"x": x, "y": y})
    np.testing.assert_allclose(got, model(webgrad.tensor(x), webgrad.tensor(y)).numpy(), rtol=1e-5, atol=1e-5)


def test_bitwise_operators_match_torch(device, torch_ref):
    a = np.array([5, -3, 12, 0, 7], dtype=np.int64)
    b = np.array([3, 1, 6, 2, 0], dtype=np.int64)
    x, y = webgrad.tensor(a, device=device), webgrad.tensor(b, device=device)
    m = x > 0
    ours = [x & y, x | y, x ^ y, ~x, x << y, x >> y, 6 & x, 6 | x, 6 ^ x, 1 << y, 100 >> y, ~m, m & (y > 1), m ^ True]
    expected = torch_ref(lambda torch: tuple(r.numpy() for r in (lambda x, y, m: [
        x & y, x | y, x ^ y, ~x, x << y, x >> y, 6 & x, 6 | x, 6 ^ x, 1 << y, 100 >> y, ~m, m & (y > 1), m ^ True])(
        torch.tensor(a), torch.tensor(b), torch.tensor(a) > 0)))
    for got, want in zip(ours, expected):
        np.testing.assert_array_equal(got.numpy(), want)
        assert got.dtype.name == str(want.dtype)
    with pytest.raises(webgrad.OpError, match="bitwise_and"):
        webgrad.tensor([1.0]) & webgrad.tensor([1.0])
    with pytest.raises(webgrad.OpError, match="bitwise_not"):
        ~webgrad.tensor([1.0])


SMALL_INTS = ["uint8", "int8", "int16"]


@pytest.mark.parametrize("name", SMALL_INTS)
def test_small_integer_dtypes_match_torch(name, device, torch_ref):
    values = np.array([-300, -129, -1, 0, 5, 127, 200, 70000], dtype=np.int64)
    x = webgrad.tensor(values, device=device)
    small = x.to(getattr(webgrad, name))
    others = ["bool", "uint8", "int8", "int16", "int32", "int64", "float32"]
    ours = [small.numpy(), (small + small).numpy(), (small * 3).numpy(), (small // 7).numpy(), small.sum().numpy(),
            np.array([str((small + webgrad.ones(1, dtype=getattr(webgrad, o), device=device)).dtype.name)
                      for o in others])]

    def torch_side(torch):
        t = torch.tensor(values).to(getattr(torch, name))
        return (t.numpy(), (t + t).numpy(), (t * 3).numpy(), (t // 7).numpy(), t.sum().numpy(),
                np.array([str((t + torch.ones(1, dtype=getattr(torch, o))).dtype).removeprefix("torch.")
                          for o in others]))

    for got, want in zip(ours, torch_ref(torch_side)):
        np.testing.assert_array_equal(got, want)
    assert webgrad.tensor([1]).byte().dtype is webgrad.uint8 and webgrad.tensor([1]).char().dtype is webgrad.int8
    assert webgrad.tensor([1]).short().dtype is webgrad.short is webgrad.int16


LAYOUTS = [((2, 3, 4, 4), "channels_last"), ((2, 1, 4, 4), "channels_last"), ((2, 3, 1, 1), "channels_last"),
           ((2, 3, 4), "channels_last"), ((2, 3, 2, 2, 2), "channels_last_3d"), ((2, 3, 4, 4), "contiguous_format")]


@pytest.mark.parametrize("shape, layout", LAYOUTS, ids=[f"{s}-{f}" for s, f in LAYOUTS])
def test_memory_formats_are_accepted_and_is_contiguous_matches_torch(shape, layout, device, torch_ref):
    fmt = getattr(webgrad, layout)
    x = webgrad.arange(int(np.prod(shape)), dtype=webgrad.float32, device=device).reshape(shape)
    copies = [x.contiguous(memory_format=fmt), x.clone(memory_format=webgrad.preserve_format), x.to(memory_format=fmt),
              webgrad.zeros_like(x, memory_format=fmt) + x, webgrad.empty_like(x, memory_format=fmt) * 0 + x]
    for c in copies:  # row-major whatever was asked
        np.testing.assert_array_equal(c.numpy(), x.numpy())
        assert c.is_contiguous()
    expected = torch_ref(lambda torch: np.array(torch.zeros(shape).is_contiguous(memory_format=getattr(torch, layout))))
    assert x.is_contiguous(memory_format=fmt) == bool(expected)
    assert not x.transpose(0, 1).is_contiguous() or shape[1] == 1
    with pytest.raises(TypeError, match="memory_format"):
        x.contiguous(memory_format="channels_last")


def test_in_place_forms_match_torch(torch_ref):
    x0 = np.array([1.0, -2.0, 3.0], np.float32)

    def run(lib, x):
        y = x * 1
        y.lerp_(x * 0, 0.25)
        y.addcmul_(x, x, value=2)
        y.addcdiv_(x, x * x + 1, value=-1)
        y.fmod_(2.5)
        y.atan2_(x * 0 + 2)
        y.clamp_min_(-0.5)
        y.tan_()
        y.sum().backward()
        return y.detach().numpy(), x.grad.numpy()

    x = webgrad.tensor(x0, requires_grad=True)
    ours = run(webgrad, x)
    expected = torch_ref(lambda torch: run(torch, torch.tensor(x0, requires_grad=True)))
    for got, want in zip(ours, expected):
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
    a = webgrad.tensor([5, 6])
    a &= 3
    a <<= 2
    a |= 1
    a ^= 2
    a >>= 1
    assert a.tolist() == torch_ref(lambda torch: _integer_in_place(torch.tensor([5, 6])).tolist())


def _integer_in_place(b):
    b &= 3
    b <<= 2
    b |= 1
    b ^= 2
    b >>= 1
    return b.numpy()


def test_alias_names():
    x, y = webgrad.tensor([3.0, -1.0]), webgrad.tensor([2.0, 2.0])
    assert webgrad.divide(x, y, rounding_mode="floor").tolist() == [1.0, -1.0]
    assert x.divide(y, rounding_mode="floor").tolist() == [1.0, -1.0]
    assert webgrad.multiply(x, y).tolist() == [6.0, -2.0] == x.multiply(y).tolist()
    assert webgrad.subtract(x, y, alpha=2).tolist() == [-1.0, -5.0] == x.subtract(y, alpha=2).tolist()
    assert webgrad.negative(x).tolist() == [-3.0, 1.0] and webgrad.absolute(x).tolist() == [3.0, 1.0]
    assert x.greater(y).tolist() == [True, False] and webgrad.less_equal(x, y).tolist() == [False, True]
    assert webgrad.not_equal(x, y).tolist() == [True, True] and x.greater_equal(y).tolist() == [True, False]
