"""``webgrad.fft``: torch.fft's discrete Fourier transforms, with torch's names, signatures,
``norm`` modes ("backward", "ortho", "forward") and dtypes (float32 -> complex64, float64 ->
complex128; integers count as the default float dtype).

Three 1-D transforms are ops (``fft``/``ifft``, ``rfft``, ``irfft``: numpy's pocketfft on the
cpu, gradients written with the transforms themselves, so they differentiate again); the 2-D
and N-D ones apply them dim by dim, ``hfft``/``ihfft`` are ``irfft``/``rfft`` of the conjugate.
Complex tensors live on the cpu: a tensor on another device is read back once with ``.cpu()``
(differentiably) and the results are cpu tensors (see core/complex_ops.py).

Example:
    >>> x = webgrad.randn(8, requires_grad=True)
    >>> webgrad.fft.rfft(x).abs().sum().backward()   # x.grad as torch gives it
"""
from __future__ import annotations

import numpy as np

from . import dtypes
from .complex_ops import complex_dtype_of, conj, cpu_op, on_cpu, real, real_dtype_of, run, to_complex
from .creation import tensor as _tensor
from .ops import cat, pad
from .ops.registry import OpError
from .tensor import Tensor

__all__ = ["fft", "ifft", "rfft", "irfft", "hfft", "ihfft", "fft2", "ifft2", "rfft2", "irfft2", "hfft2", "ihfft2",
           "fftn", "ifftn", "rfftn", "irfftn", "hfftn", "ihfftn", "fftfreq", "rfftfreq", "fftshift", "ifftshift"]

_SWAPPED = {"backward": "forward", "forward": "backward", "ortho": "ortho"}


def _norm(name, norm):
    norm = "backward" if norm is None else norm
    if norm not in _SWAPPED:
        raise OpError(f"{name}: Invalid normalization mode: {norm!r}; expected 'backward', 'ortho' or 'forward'")
    return norm


def _fit(g, dim, length):
    """``g`` cut or zero-padded along ``dim`` to ``length`` (undoing a transform's n=)."""
    size = g.shape[dim]
    if size > length:
        return g.narrow(dim, 0, length)
    if size < length:
        widths = [0, 0] * (g.ndim - 1 - dim) + [0, length - size]
        return pad(g, widths)
    return g


def _prepare(name, x, n, dim, want_real=False):
    if not isinstance(x, Tensor):
        raise TypeError(f"{name}: expected a Tensor, got {type(x).__name__}")
    if x.ndim == 0:
        raise OpError(f"{name}: expected a tensor with at least one dimension, got a 0-d tensor")
    if not -x.ndim <= dim < x.ndim:
        raise OpError(f"{name}: Dimension out of range (expected to be in range of [{-x.ndim}, {x.ndim - 1}], "
                      f"but got {dim})")
    if want_real and x.dtype.is_complex:
        raise OpError(f"{name}: expects a real input tensor, but got {x.dtype.name}")
    if not (x.dtype.is_floating_point or x.dtype.is_complex):
        x = x.to(dtypes.get_default_dtype())
    elif x.dtype in (dtypes.float16, dtypes.bfloat16):
        x = x.float()
    if n is not None and n < 1:
        raise OpError(f"{name}: Invalid number of data points ({n}) specified")
    return on_cpu(x), dim % x.ndim


# -- the three 1-D ops (vjps in webgrad.complex's convention) -------------------------------------
def _fft_vjp(g, x, *, out, n, dim, norm, inverse):
    back = (ifft if inverse else fft)(g, None, dim, norm)
    back = _fit(back, dim, x.shape[dim])
    return back if x.dtype.is_complex else real(back)


def _rfft_vjp(g, x, *, out, n, dim, norm):
    full = _fit(g, dim, n)  # the dropped half of the spectrum gets no gradient
    return _fit(real(fft(full, None, dim, norm)), dim, x.shape[dim])


def _irfft_vjp(g, z, *, out, n, dim, norm):
    half = n // 2 + 1
    # Each bin but the first (and the last for even n) stands twice in the Hermitian spectrum.
    weights = np.full(half, 2.0)
    weights[0] = 1.0
    if n % 2 == 0:
        weights[-1] = 1.0
    shape = [1] * g.ndim
    shape[dim] = half
    weight = _tensor(weights.reshape(shape), dtype=g.dtype)
    return _fit(conj(rfft(g, n, dim, _SWAPPED[norm])) * weight, dim, z.shape[dim])


_FFT = cpu_op("fft", _fft_vjp)
_RFFT = cpu_op("rfft", _rfft_vjp)
_IRFFT = cpu_op("irfft", _irfft_vjp)


def _complex_kernel(fn, dtype):
    return lambda a, **attrs: fn(a, attrs["n"], attrs["dim"], attrs["norm"]).astype(dtype.np)


def _c2c(name, x, n, dim, norm, inverse):
    x, dim = _prepare(name, x, n, dim)
    norm = _norm(name, norm)
    numpy_fn = np.fft.ifft if inverse else np.fft.fft
    kernel = _complex_kernel(numpy_fn, complex_dtype_of(x.dtype))
    return run(_FFT, kernel, (x,), n=n if n is not None else x.shape[dim], dim=dim, norm=norm, inverse=inverse)


def fft(input, n=None, dim=-1, norm=None):  # noqa: A002
    """The 1-D discrete Fourier transform along ``dim`` (the input cut or zero-padded to ``n``)."""
    return _c2c("fft_fft", input, n, dim, norm, False)


def ifft(input, n=None, dim=-1, norm=None):  # noqa: A002
    """The inverse of ``fft``."""
    return _c2c("fft_ifft", input, n, dim, norm, True)


def rfft(input, n=None, dim=-1, norm=None):  # noqa: A002
    """The FFT of a real signal: the n // 2 + 1 non-negative frequencies."""
    x, dim = _prepare("fft_rfft", input, n, dim, want_real=True)
    norm = _norm("fft_rfft", norm)
    kernel = _complex_kernel(np.fft.rfft, complex_dtype_of(x.dtype))
    return run(_RFFT, kernel, (x,), n=n if n is not None else x.shape[dim], dim=dim, norm=norm)


def irfft(input, n=None, dim=-1, norm=None):  # noqa: A002
    """The inverse of ``rfft``: a real signal of length ``n`` (default 2 * (m - 1)) from the
    m non-negative frequencies (the imaginary parts of the zero and Nyquist bins are ignored)."""
    z, dim = _prepare("fft_irfft", input, n, dim)
    n = 2 * (z.shape[dim] - 1) if n is None else n
    if n < 1:
        raise OpError(f"fft_irfft: Invalid number of data points ({n}) specified")
    norm = _norm("fft_irfft", norm)
    z = to_complex(z)
    out_dtype = real_dtype_of(z.dtype)
    kernel = _complex_kernel(np.fft.irfft, out_dtype)
    return run(_IRFFT, kernel, (z,), n=n, dim=dim, norm=norm)


def hfft(input, n=None, dim=-1, norm=None):  # noqa: A002
    """The FFT of a signal with Hermitian symmetry given by its first half: real, length n."""
    return irfft(conj(_as_complex(input)), n, dim, _SWAPPED[_norm("fft_hfft", norm)])


def ihfft(input, n=None, dim=-1, norm=None):  # noqa: A002
    """The inverse of ``hfft``: the n // 2 + 1 first bins of the inverse FFT of a real signal."""
    return conj(rfft(input, n, dim, _SWAPPED[_norm("fft_ihfft", norm)]))


_as_complex = to_complex


# -- 2-D and N-D: one dim at a time -------------------------------------------------------------
def _dims_and_sizes(name, x, s, dim):
    if dim is None:
        dims = list(range(x.ndim - len(s), x.ndim)) if s is not None else list(range(x.ndim))
    else:
        dims = [dim] if isinstance(dim, int) else list(dim)
        dims = [d % x.ndim if -x.ndim <= d < x.ndim else d for d in dims]
        if any(not 0 <= d < x.ndim for d in dims):
            raise OpError(f"{name}: dims {tuple(dim)} out of range for a tensor of {x.ndim} dims")
        if len(set(dims)) != len(dims):
            raise OpError(f"{name}: FFT dims must be unique, got {tuple(dim)}")
    sizes = [None] * len(dims) if s is None else [None if k == -1 else k for k in s]
    if len(sizes) != len(dims):
        raise OpError(f"{name}: When given, dim and shape arguments must have the same length "
                      f"(s={tuple(s)}, dim={tuple(dims)})")
    return dims, sizes


def _c2c_n(name, x, s, dim, norm, inverse):
    if not isinstance(x, Tensor):
        raise TypeError(f"{name}: expected a Tensor, got {type(x).__name__}")
    dims, sizes = _dims_and_sizes(name, x, s, dim)
    out = _as_complex(x)
    for d, k in zip(dims, sizes):
        out = _c2c(name, out, k, d, norm, inverse)
    return out


def fftn(input, s=None, dim=None, norm=None):  # noqa: A002
    """The N-D FFT over ``dim`` (all dims, or the last len(s)), each cut or padded to ``s``."""
    return _c2c_n("fft_fftn", input, s, dim, norm, False)


def ifftn(input, s=None, dim=None, norm=None):  # noqa: A002
    return _c2c_n("fft_ifftn", input, s, dim, norm, True)


def fft2(input, s=None, dim=(-2, -1), norm=None):  # noqa: A002
    return _c2c_n("fft_fft2", input, s, dim, norm, False)


def ifft2(input, s=None, dim=(-2, -1), norm=None):  # noqa: A002
    return _c2c_n("fft_ifft2", input, s, dim, norm, True)


def rfftn(input, s=None, dim=None, norm=None):  # noqa: A002
    """``rfft`` over the last of ``dim``, then ``fft`` over the others."""
    dims, sizes = _dims_and_sizes("fft_rfftn", input, s, dim)
    out = rfft(input, sizes[-1], dims[-1], norm)
    for d, k in zip(dims[:-1], sizes[:-1]):
        out = _c2c("fft_rfftn", out, k, d, norm, False)
    return out


def irfftn(input, s=None, dim=None, norm=None):  # noqa: A002
    """``ifft`` over all of ``dim`` but the last, then ``irfft`` over it (default length 2 * (m - 1))."""
    dims, sizes = _dims_and_sizes("fft_irfftn", input, s, dim)
    out = _as_complex(input)
    for d, k in zip(dims[:-1], sizes[:-1]):
        out = _c2c("fft_irfftn", out, k, d, norm, True)
    return irfft(out, sizes[-1], dims[-1], norm)


def hfftn(input, s=None, dim=None, norm=None):  # noqa: A002
    """The N-D ``hfft``: a real signal from the half spectrum of a Hermitian-symmetric one."""
    return irfftn(conj(_as_complex(input)), s, dim, _SWAPPED[_norm("fft_hfftn", norm)])


def ihfftn(input, s=None, dim=None, norm=None):  # noqa: A002
    """The inverse of ``hfftn``."""
    return conj(rfftn(input, s, dim, _SWAPPED[_norm("fft_ihfftn", norm)]))


def hfft2(input, s=None, dim=(-2, -1), norm=None):  # noqa: A002
    return hfftn(input, s, dim, norm)


def ihfft2(input, s=None, dim=(-2, -1), norm=None):  # noqa: A002
    return ihfftn(input, s, dim, norm)


def rfft2(input, s=None, dim=(-2, -1), norm=None):  # noqa: A002
    return rfftn(input, s, dim, norm)


def irfft2(input, s=None, dim=(-2, -1), norm=None):  # noqa: A002
    return irfftn(input, s, dim, norm)


# -- frequencies and shifts ----------------------------------------------------------------------
def fftfreq(n, d=1.0, *, dtype=None, device=None, requires_grad=False):
    """The sample frequencies of an ``fft`` of length ``n`` and spacing ``d``:
    [0, 1, ..., (n - 1) // 2, -(n // 2), ..., -1] / (d * n)."""
    return _tensor(np.fft.fftfreq(n, d), dtype=dtype or dtypes.get_default_dtype(), device=device,
                   requires_grad=requires_grad)


def rfftfreq(n, d=1.0, *, dtype=None, device=None, requires_grad=False):
    """The sample frequencies of an ``rfft`` of length ``n``: [0, 1, ..., n // 2] / (d * n)."""
    return _tensor(np.fft.rfftfreq(n, d), dtype=dtype or dtypes.get_default_dtype(), device=device,
                   requires_grad=requires_grad)


def _roll(x, shifts, dims):
    for shift, d in zip(shifts, dims):
        size = x.shape[d]
        shift %= max(size, 1)
        if shift:
            x = cat([x.narrow(d, size - shift, shift), x.narrow(d, 0, size - shift)], d)
    return x


def _shift_dims(x, dim):
    if dim is None:
        return list(range(x.ndim))
    return [d % x.ndim for d in ([dim] if isinstance(dim, int) else dim)]


def fftshift(input, dim=None):  # noqa: A002
    """Moves the zero frequency to the middle of ``dim`` (all dims by default)."""
    dims = _shift_dims(input, dim)
    return _roll(input, [input.shape[d] // 2 for d in dims], dims)


def ifftshift(input, dim=None):  # noqa: A002
    """The inverse of ``fftshift``."""
    dims = _shift_dims(input, dim)
    return _roll(input, [-(input.shape[d] // 2) for d in dims], dims)

