"""webgrad.fft, complex tensors and webgrad.stft/istft against torch: values and dtypes
(float32 -> complex64, float64 -> complex128), n=/s=/dim=/norm=, gradients of real-input,
real-loss programs (vs finite differences in float64 and vs torch), printing and errors.

A case is one function of the library (webgrad or torch: the same names), so the same
lambda runs on both sides."""
from __future__ import annotations

import warnings

import numpy as np
import pytest

import webgrad
from conftest import assert_close, gradcheck


def _signal(*shape, seed=0):
    return np.random.default_rng(seed).standard_normal(shape)


def _spectrum(*shape, seed=1):
    rng = np.random.default_rng(seed)
    return rng.standard_normal(shape) + 1j * rng.standard_normal(shape)


WINDOW = np.hanning(18)[1:-1]  # 16 taps, nonzero everywhere (so istft can divide by its square)
WINDOW12 = np.hanning(14)[1:-1]

FORWARD = [
    ("fft", lambda L, x, z: L.fft.fft(x)),
    ("fft_n_pad", lambda L, x, z: L.fft.fft(x, 11, norm="ortho")),
    ("fft_n_cut_dim0", lambda L, x, z: L.fft.fft(x, 2, dim=0, norm="forward")),
    ("ifft_complex", lambda L, x, z: L.fft.ifft(z, 6)),
    ("rfft", lambda L, x, z: L.fft.rfft(x)),
    ("rfft_odd_ortho", lambda L, x, z: L.fft.rfft(x, 7, norm="ortho")),
    ("irfft", lambda L, x, z: L.fft.irfft(z)),
    ("irfft_n_forward", lambda L, x, z: L.fft.irfft(z, 9, norm="forward")),
    ("hfft", lambda L, x, z: L.fft.hfft(z, 10)),
    ("ihfft", lambda L, x, z: L.fft.ihfft(x, norm="ortho").conj()),
    ("fft2", lambda L, x, z: L.fft.fft2(x)),
    ("ifft2_s", lambda L, x, z: L.fft.ifft2(z, s=(4, 5))),
    ("rfft2", lambda L, x, z: L.fft.rfft2(x, norm="ortho")),
    ("irfft2", lambda L, x, z: L.fft.irfft2(z)),
    ("fftn_all", lambda L, x, z: L.fft.fftn(x)),
    ("fftn_s_dim", lambda L, x, z: L.fft.fftn(x, s=(2, 5), dim=(0, 1), norm="forward")),
    ("ifftn", lambda L, x, z: L.fft.ifftn(z, dim=(-1,))),
    ("rfftn", lambda L, x, z: L.fft.rfftn(x)),
    ("irfftn_s", lambda L, x, z: L.fft.irfftn(z, s=(3, 8))),
    ("hfftn_s_dim", lambda L, x, z: L.fft.hfftn(z, s=(4, 6), dim=(0, 1), norm="ortho")),
    ("hfft2", lambda L, x, z: L.fft.hfft2(z)),
    ("ihfftn", lambda L, x, z: L.fft.ihfftn(x, norm="forward").conj() * 1),
    ("ihfft2", lambda L, x, z: L.fft.ihfft2(x).conj() * 1),
    ("fftshift", lambda L, x, z: L.fft.fftshift(x)),
    ("ifftshift_dim", lambda L, x, z: L.fft.ifftshift(z, dim=1)),
    ("fftfreq", lambda L, x, z: L.fft.fftfreq(7, 0.5)),
    ("rfftfreq", lambda L, x, z: L.fft.rfftfreq(8)),
    ("real_imag_abs_angle", lambda L, x, z: (z.real, z.imag, z.abs(), z.angle(), L.angle(x))),
    ("conj_view_as_real", lambda L, x, z: (L.view_as_real(z.conj() * 1), L.conj(x))),
    ("view_as_complex", lambda L, x, z: L.view_as_complex(L.stack([x, x * 2], -1))),
    ("complex_polar", lambda L, x, z: (L.complex(x, x * 3), L.polar(x.abs(), x))),
    ("arithmetic", lambda L, x, z: (z + z * 2, z - 1, z * x[:, :5], z / (x[:, :5] + 3), (z * (1 - 2j)).sum(),
                                    z.mean(), z.sum(0), -z)),
    ("stft", lambda L, x, z: L.stft(x, 8, hop_length=2, return_complex=True)),
    ("stft_window_constant", lambda L, x, z: L.stft(x, 16, hop_length=3, win_length=12, window=x.new_tensor(WINDOW12),
                                                    pad_mode="constant", normalized=True, return_complex=True)),
    ("stft_two_sided_no_center", lambda L, x, z: L.stft(x[0], 8, center=False, onesided=False, return_complex=True)),
    ("stft_as_real", lambda L, x, z: L.stft(x, 8, pad_mode="replicate", return_complex=False)),
    ("istft", lambda L, x, z: L.istft(L.stft(x, 16, hop_length=4, window=x.new_tensor(WINDOW), return_complex=True),
                                      16, hop_length=4, window=x.new_tensor(WINDOW), length=x.shape[-1])),
]


def _flat(out):
    return list(out) if isinstance(out, tuple) else [out]


def _resolved(t):
    return t.resolve_conj().resolve_neg() if hasattr(t, "resolve_conj") else t


def _dtype_name(array):
    return {np.dtype(np.complex64): "complex64", np.dtype(np.complex128): "complex128",
            np.dtype(np.float32): "float32", np.dtype(np.float64): "float64"}[array.dtype]


@pytest.mark.parametrize("name, fn", FORWARD, ids=[c[0] for c in FORWARD])
@pytest.mark.parametrize("dtype", ["float64", "float32"])
def test_matches_torch(name, fn, dtype, torch_ref):
    x, z = _signal(3, 24).astype(dtype), _spectrum(3, 5).astype("complex128" if dtype == "float64" else "complex64")
    ours = _flat(fn(webgrad, webgrad.tensor(x), webgrad.tensor(z)))
    expected = torch_ref(lambda torch: tuple(_resolved(t).numpy() for t in _flat(fn(torch, torch.tensor(x),
                                                                                     torch.tensor(z)))))
    assert len(ours) == len(expected)
    for out, ref in zip(ours, expected):
        tolerance = (1e-9, 1e-10) if ref.dtype in (np.float64, np.complex128) else (1e-4, 1e-4)
        assert_close(out, ref, *tolerance, dtype=_dtype_name(ref), msg=name)


GRADIENTS = [
    ("rfft_abs", lambda L, x: L.fft.rfft(x).abs().sum()),
    ("fft_real_imag", lambda L, x: (L.fft.fft(x, 30, norm="ortho").real ** 2).sum() + L.fft.fft(x).imag.sum()),
    ("irfft_of_product", lambda L, x: (L.fft.irfft(L.fft.rfft(x) * L.fft.rfft(x.flip(-1)), 24) * x).sum()),
    # (rotated so that no bin sits on angle's branch cut, the negative real axis)
    ("fft2_angle", lambda L, x: (L.fft.fft2(x) * (1 + 1j)).angle().sum()),
    ("view_as_real", lambda L, x: (L.view_as_real(L.fft.rfft(x, 9)) ** 3).sum()),
    ("complex_polar_ifft", lambda L, x: L.fft.ifft(L.complex(x, x * 2) * L.polar(x.abs() + 1, x)).abs().sum()),
    ("hfft_ihfft", lambda L, x: (L.fft.hfft(L.fft.ihfft(x), 24) ** 2).sum()),
    ("power_mean", lambda L, x: (L.fft.fftn(x) * L.fft.fftn(x).conj()).mean().real),
    ("rfftn_irfftn", lambda L, x: (L.fft.irfftn(L.fft.rfftn(x, norm="forward") ** 2, s=(3, 24)) * x).sum()),
    ("divide", lambda L, x: (L.fft.rfft(x) / (L.fft.rfft(x * x) + 3)).abs().sum()),
    ("stft_magnitude", lambda L, x: L.stft(x, 16, hop_length=4, window=L.tensor(WINDOW),
                                           return_complex=True).abs().pow(2).sum()),
    ("istft_roundtrip", lambda L, x: (L.istft(L.stft(x, 16, hop_length=4, window=L.tensor(WINDOW), return_complex=True)
                                              * 2, 16, hop_length=4, window=L.tensor(WINDOW), length=24) ** 2).sum()),
]


@pytest.mark.parametrize("name, fn", GRADIENTS, ids=[c[0] for c in GRADIENTS])
def test_gradients_match_finite_differences(name, fn):
    x = webgrad.tensor(_signal(3, 24), requires_grad=True)
    gradcheck(lambda t: fn(webgrad, t), [x], elementwise_limit=0)


def _gradient_matches_torch(fn, torch_ref, shape, tolerance, msg):
    """d fn(lib, x)/dx at the same real x in webgrad and torch."""
    x = webgrad.tensor(_signal(*shape), requires_grad=True)
    fn(webgrad, x).backward()

    def torch_grad(torch):
        t = torch.tensor(_signal(*shape), requires_grad=True)
        fn(torch, t).backward()
        return t.grad.numpy()
    assert_close(x.grad, torch_ref(torch_grad), *tolerance, msg=msg)


@pytest.mark.parametrize("name, fn", GRADIENTS, ids=[c[0] for c in GRADIENTS])
def test_gradients_match_torch(name, fn, torch_ref):
    _gradient_matches_torch(fn, torch_ref, (3, 24), (1e-8, 1e-9), name)


HOLOMORPHIC = ["exp", "log", "log1p", "expm1", "sqrt", "rsqrt", "reciprocal", "sin", "cos", "tan", "sinh", "cosh",
               "tanh", "sigmoid", "asin", "acos", "atan", "asinh", "acosh", "atanh"]


@pytest.mark.parametrize("name", HOLOMORPHIC)
def test_holomorphic_functions_of_complex_tensors_match_torch(name, torch_ref):
    """exp, log, sqrt, the trigonometric functions... of a complex tensor are complex, as torch's
    (they once cast it to a real one, dropping the imaginary part)."""
    z = _spectrum(3, 5) * 1.5
    for dtype, tolerance in (("complex128", (1e-10, 1e-12)), ("complex64", (1e-5, 1e-6))):
        ours = getattr(webgrad, name)(webgrad.tensor(z.astype(dtype)))
        expected = torch_ref(lambda torch, dtype=dtype: getattr(torch, name)(torch.tensor(z.astype(dtype))).numpy())
        assert_close(ours, expected, *tolerance, dtype=dtype, msg=name)

    def program(lib, x):  # real input, real loss: the gradient is the same in both conventions
        out = getattr(lib, name)(lib.complex(x, x.flip(-1) * 0.5 + 0.3))
        return (out.abs() ** 2 + out.real * 0.5 + out.imag).sum()
    _gradient_matches_torch(program, torch_ref, (3, 5), (1e-8, 1e-10), name)
    gradcheck(lambda t: program(webgrad, t), [webgrad.tensor(_signal(3, 5), requires_grad=True)], elementwise_limit=0)


def test_a_complex_tensor_is_refused_by_float_functions_that_are_not_holomorphic_and_by_orderings():
    z = webgrad.tensor(_spectrum(4))
    for call, name in ((webgrad.erf, "erf"), (webgrad.log2, "log2"), (webgrad.lgamma, "lgamma"),
                       (webgrad.floor, "floor"), (webgrad.round, "round"), (webgrad.nn.functional.relu, "relu"),
                       (lambda t: t.clamp(0, 1), "lt"), (lambda t: webgrad.maximum(t, t), "maximum"),
                       (lambda t: t > 0, "gt"), (lambda t: t.max(), "amax"), (lambda t: t.argmin(), "argmin"),
                       (lambda t: webgrad.sort(t), "argsort"), (lambda t: t.topk(2), "argsort")):
        with pytest.raises(webgrad.OpError, match=rf"{name}: not defined for complex tensors here, got \(4,\) "
                                                  r"complex128; apply it to \.real and \.imag"):
            call(z)
    with webgrad.no_grad():
        z.exp_()  # in place, into the complex tensor itself
    assert_close(z, np.exp(_spectrum(4)), 1e-12, 1e-12, dtype="complex128")


def test_running_sums_and_products_of_complex_tensors_stay_complex():
    z = _spectrum(2, 6)
    assert_close(webgrad.tensor(z).cumsum(1), np.cumsum(z, 1), 1e-12, 1e-12, dtype="complex128")
    assert_close(webgrad.tensor(z).cumprod(1), np.cumprod(z, 1), 1e-12, 1e-12, dtype="complex128")
    gradcheck(lambda t: (webgrad.complex(t, t * t).cumprod(1).cumsum(0).abs() ** 2).sum(),
              [webgrad.tensor(_signal(2, 6), requires_grad=True)], elementwise_limit=0)


def test_norms_of_complex_tensors_are_their_moduli_norms():
    z = _spectrum(3, 4)
    m = np.abs(z)
    for kwargs, expected in (({}, np.sqrt((m ** 2).sum())), ({"p": 1}, m.sum()), ({"p": float("inf")}, m.max()),
                             ({"p": 3, "dim": 1}, (m ** 3).sum(1) ** (1 / 3)), ({"p": 0}, np.count_nonzero(z))):
        assert_close(webgrad.tensor(z).norm(**kwargs), expected, 1e-12, 1e-12, dtype="float64", msg=str(kwargs))
    gradcheck(lambda t: webgrad.complex(t, t.flip(0) - 0.5).norm(), [webgrad.tensor(_signal(6), requires_grad=True)],
              elementwise_limit=0)


def test_variance_of_complex_tensors_is_real():
    z = _spectrum(3, 4)
    for kwargs, ddof, axis in (({}, 1, None), ({"dim": 1}, 1, 1), ({"dim": 0, "correction": 0}, 0, 0)):
        assert_close(webgrad.tensor(z).var(**kwargs), np.var(z, axis=axis, ddof=ddof), 1e-12, 1e-12,
                     dtype="float64", msg=str(kwargs))
        assert_close(webgrad.tensor(z).std(**kwargs), np.std(z, axis=axis, ddof=ddof), 1e-12, 1e-12,
                     dtype="float64", msg=str(kwargs))
    # (the cast of a real tensor to complex passes back its gradient's real part, with no ComplexWarning)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        gradcheck(lambda t: webgrad.complex(t, t.flip(0)).std() + (t.to(webgrad.complex128) * (2 + 3j)).real.sum(),
                  [webgrad.tensor(_signal(6), requires_grad=True)], elementwise_limit=0)


def test_fft_of_a_device_tensor_reads_it_back_once_and_its_gradient_returns(device):
    x = webgrad.tensor(_signal(2, 16).astype(np.float32), device=device, requires_grad=True)
    spectrum = webgrad.fft.rfft(x)
    assert spectrum.device == "cpu" and spectrum.dtype is webgrad.complex64  # complex tensors live on the cpu
    spectrum.abs().sum().backward()
    assert x.grad.device == device
    reference = webgrad.tensor(_signal(2, 16), requires_grad=True)
    webgrad.fft.rfft(reference).abs().sum().backward()
    assert_close(x.grad.cpu(), reference.grad.numpy().astype(np.float32), 1e-4, 1e-5)


def test_complex_dtypes_names_and_promotion():
    assert webgrad.cfloat is webgrad.complex64 and webgrad.cdouble is webgrad.complex128
    z = webgrad.tensor(_spectrum(3).astype(np.complex64))
    assert z.dtype is webgrad.complex64 and z.is_complex() and webgrad.is_complex(z)
    assert not z.dtype.is_floating_point and z.dtype.is_complex
    assert (z * webgrad.ones(3)).dtype is webgrad.complex64
    assert (z * webgrad.ones(3, dtype=webgrad.float64)).dtype is webgrad.complex128
    assert z.real.dtype is webgrad.float32 and z.abs().dtype is webgrad.float32
    assert webgrad.fft.rfft(webgrad.arange(4)).dtype is webgrad.complex64  # integers count as float32
    np.testing.assert_allclose(z.numpy(), _spectrum(3).astype(np.complex64))


def test_printing_matches_torch():
    z = webgrad.tensor(np.array([6 + 0j, -2 + 2j, -2 - 0.5j]), dtype=webgrad.complex64)
    assert repr(z) == "tensor([ 6.+0.0000j, -2.+2.0000j, -2.-0.5000j])"
    assert repr(webgrad.tensor(np.array(1 + 1j))) == "tensor(1.+1.j, dtype=webgrad.complex128)"


@pytest.mark.parametrize("call, message", [
    (lambda: webgrad.fft.rfft(webgrad.tensor(_spectrum(4))), r"fft_rfft: expects a real input tensor"),
    (lambda: webgrad.fft.fft(webgrad.ones(4), norm="sideways"), r"fft_fft: Invalid normalization mode"),
    (lambda: webgrad.fft.fft(webgrad.ones(4), 0), r"fft_fft: Invalid number of data points \(0\)"),
    (lambda: webgrad.fft.fft(webgrad.ones(4), dim=2), r"fft_fft: Dimension out of range"),
    (lambda: webgrad.fft.fftn(webgrad.ones(4, 4), s=(2, 2, 2), dim=(0, 1)), r"fft_fftn: .*same length"),
    (lambda: webgrad.stft(webgrad.ones(64), 16), r"stft requires the return_complex parameter"),
    (lambda: webgrad.stft(webgrad.ones(64), 16, window=webgrad.ones(8), return_complex=True),
     r"stft: expected a 1D window tensor of size equal to win_length=16"),
    (lambda: webgrad.istft(webgrad.ones(9, 4), 16), r"istft requires a complex-valued input tensor"),
    (lambda: webgrad.view_as_complex(webgrad.ones(3, 3)), r"view_as_complex: .*last dimension of size"),
    (lambda: webgrad.complex(webgrad.ones(2), webgrad.ones(2, dtype=webgrad.float64)), r"complex: Expected object"),
])
def test_errors_name_the_op(call, message):
    with pytest.raises(webgrad.OpError, match=message):
        call()


def test_second_derivatives_match_torch(torch_ref):
    """The transforms' gradients are written with the transforms, so they differentiate again."""
    def hessian_vector(lib, make):
        t = make(_signal(2, 8))
        loss = (lib.fft.irfft(lib.fft.rfft(t) ** 2, 8) ** 2).sum() + lib.fft.fft(t).abs().sum()
        (g,) = lib.autograd.grad(loss, [t], create_graph=True)
        (g ** 2).sum().backward()
        return t.grad
    ours = hessian_vector(webgrad, lambda a: webgrad.tensor(a, requires_grad=True))
    assert_close(ours, torch_ref(lambda torch: hessian_vector(torch, lambda a: torch.tensor(a, requires_grad=True))
                                 .numpy()), 1e-8, 1e-9)
