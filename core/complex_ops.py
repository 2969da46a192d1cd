"""Complex tensors (``webgrad.complex64``/``cfloat``, ``complex128``/``cdouble``): what a user
needs around ``webgrad.fft``: ``real``, ``imag``, ``abs``, ``angle``, ``conj``,
``view_as_real``, ``view_as_complex``, ``complex``, ``polar``, ``is_complex``, and through the
ordinary ops ``+ - * /``, ``sum``, ``mean``, ``cumsum``, ``cumprod``, ``norm``, the holomorphic
functions (exp, log, sqrt, sin... ops/elementwise.py's ``complex_too``), printing and ``.numpy()``.
Orderings (<, max, sort, relu, floor...) refuse complex tensors, as torch's do.

Where they live: complex tensors are cpu tensors (numpy complex arrays); WGSL has no complex
type. An op here given a tensor on another device (a WebGPU tensor into ``webgrad.fft.rfft``)
reads it back once with ``.cpu()`` (differentiable: its gradient goes back to the device),
and the complex result is a cpu tensor. Functions whose result is real (``irfft``, ``istft``,
``abs`` of a complex tensor...) give it on the cpu as well; move it with ``.to(device)``.

Gradients: cotangents of complex tensors follow JAX's convention (for z = x + iy and a real
loss L, the gradient held for z is dL/dx - i dL/dy, the conjugate of PyTorch's), so the vjps
of holomorphic ops (+, *, /, sum, fft) need no conjugation and webgrad's real vjps serve as
they are. The gradient reaching a real tensor is the same in both conventions, so programs
with real inputs and a real loss (``rfft(x).abs().sum()``) match PyTorch exactly; only the
``.grad`` of a complex leaf is the conjugate of PyTorch's.
"""
from __future__ import annotations

import math

import numpy as np

from . import autograd, dtypes
from .ops import stack, where
from .ops.registry import Op, OpError
from .tensor import Tensor


def _no_infer(*args, **kwargs):
    raise RuntimeError("internal: complex ops run through webgrad.complex.run, not the op registry")


def cpu_op(name, vjp):
    """An op on cpu numpy data, outside the registry (complex tensors have no WGSL kernels)."""
    return Op(name, infer=_no_infer, vjp=vjp)


def on_cpu(x):
    """``x`` as a cpu tensor: the one documented copy for tensors on other devices."""
    return x if x.device == "cpu" else x.cpu()


def run(op, kernel, inputs, **attrs):
    """Run ``kernel`` (numpy arrays -> numpy array) on the inputs' cpu data; record ``op`` for
    autograd when an input requires grad."""
    inputs = tuple(on_cpu(t) for t in inputs)
    # _host, not _data: a host read is what makes webgrad.compile break the graph here.
    array = np.asarray(kernel(*[t._host() for t in inputs], **attrs))
    dtype = dtypes.from_numpy(array.dtype)
    if array.dtype.kind == "c" and array.dtype != np.complex128:
        dtype = dtypes.complex64
    elif array.dtype.kind == "f" and array.dtype == np.float32:
        dtype = dtypes.float32
    out = Tensor._make(np.ascontiguousarray(array.astype(dtype.np, copy=False)), array.shape, dtype, "cpu")
    if op.vjp is not None and autograd.is_grad_enabled() and any(t.requires_grad for t in inputs):
        autograd.record(op, inputs, attrs, out)
    return out


def complex_dtype_of(dtype):
    """float32 -> complex64, float64 -> complex128 (complex dtypes map to themselves)."""
    if dtype.is_complex:
        return dtype
    return dtypes.complex128 if dtype is dtypes.float64 else dtypes.complex64


def real_dtype_of(dtype):
    if dtype is dtypes.complex128:
        return dtypes.float64
    return dtypes.float32 if dtype.is_complex else dtype


def _require_complex(name, z):
    if not isinstance(z, Tensor):
        raise TypeError(f"{name}: expected a Tensor, got {type(z).__name__}")
    if not z.dtype.is_complex:
        raise OpError(f"{name}: expected a complex tensor, got {z.dtype.name} of shape {tuple(z.shape)}")


# -- real <-> complex ----------------------------------------------------------------------
# vjps in JAX's convention (module docstring): a real input p of z(p) gets Re(c * dz/dp).
def to_complex(x):
    """``x`` as a complex tensor (real part x; float64 -> complex128, others complex64); its
    gradient is the real part (no ComplexWarning from a cast)."""
    if x.dtype.is_complex:
        return x
    target = complex_dtype_of(x.dtype if x.dtype.is_floating_point else dtypes.get_default_dtype())
    return run(_AS_COMPLEX, lambda a: a.astype(target.np), (x,))


_to_complex = to_complex


_REAL = cpu_op("real", lambda g, z, *, out: _to_complex(g))
_IMAG = cpu_op("imag", lambda g, z, *, out: _to_complex(g) * -1j)
_CONJ = cpu_op("conj", lambda g, z, *, out: conj(g))
_AS_COMPLEX = cpu_op("as_complex", lambda g, x, *, out: real(g))
_COMPLEX = cpu_op("complex", lambda g, re, im, *, out: (real(g), -imag(g)))
_VIEW_AS_REAL = cpu_op("view_as_real", lambda g, z, *, out: complex(g[..., 0], -g[..., 1]))
_VIEW_AS_COMPLEX = cpu_op("view_as_complex", lambda g, x, *, out: stack([real(g), -imag(g)], -1))


def _abs_vjp(g, z, *, out):
    # c = g * conj(z) / |z|, and 0 where z = 0 (PyTorch's subgradient).
    nonzero = out != 0
    return _to_complex(g * where(nonzero, 1.0 / where(nonzero, out, 1.0), 0.0)) * conj(z)


def _angle_vjp(g, z, *, out):
    size2 = real(z * conj(z))
    nonzero = size2 != 0
    scale = where(nonzero, 1.0 / where(nonzero, size2, 1.0), 0.0)
    return _to_complex(g * scale) * conj(z) * -1j


_ABS = cpu_op("complex_abs", _abs_vjp)
_ANGLE = cpu_op("angle", _angle_vjp)


def real(z):
    """The real part (a real tensor). For a real tensor: itself, as in PyTorch."""
    if not z.dtype.is_complex:
        return z
    return run(_REAL, np.real, (z,))


def imag(z):
    """The imaginary part (a real tensor); real tensors have none, as in PyTorch."""
    if not z.dtype.is_complex:
        raise RuntimeError("imag is not implemented for tensors with non-complex dtypes.")
    return run(_IMAG, np.imag, (z,))


def conj(z):
    """The complex conjugate (real tensors are returned as they are)."""
    if not z.dtype.is_complex:
        return z
    return run(_CONJ, np.conj, (z,))


def abs(z):  # noqa: A001  (torch.abs for complex tensors; Tensor.abs sends complex ones here)
    _require_complex("abs", z)
    return run(_ABS, np.abs, (z,))


def angle(z):
    """The argument atan2(imag, real) of each element; for real tensors pi where negative, else 0."""
    if not z.dtype.is_complex:
        if not z.dtype.is_floating_point:
            z = z.float()
        return (z < 0).to(z.dtype) * math.pi + z * 0.0  # no gradient, as in torch
    return run(_ANGLE, np.angle, (z,))


def is_complex(z) -> bool:
    return z.dtype.is_complex


def complex(real, imag):  # noqa: A001  (torch.complex)
    """``real + 1j * imag`` from two real tensors of the same float dtype (float32 -> complex64)."""
    for name, t in (("real", real), ("imag", imag)):
        if not isinstance(t, Tensor) or t.dtype not in (dtypes.float32, dtypes.float64):
            raise OpError(f"complex: Expected both inputs to be Float or Double tensors but got "
                          f"{getattr(t, 'dtype', type(t).__name__)} for {name}")
    if real.dtype is not imag.dtype:
        raise OpError(f"complex: Expected object of scalar type {real.dtype.name} but got scalar type "
                      f"{imag.dtype.name} for second argument")
    return run(_COMPLEX, lambda re, im: (re + 1j * im).astype(complex_dtype_of(real.dtype).np), (real, imag))


def polar(abs, angle):  # noqa: A002
    """``abs * (cos(angle) + 1j * sin(angle))``."""
    return complex(abs * angle.cos(), abs * angle.sin())


def view_as_real(z):
    """A complex tensor (...,) as a real one (..., 2) of (real, imag) pairs (a copy here)."""
    _require_complex("view_as_real", z)
    return run(_VIEW_AS_REAL, lambda a: np.stack([a.real, a.imag], -1), (z,))


def view_as_complex(x):
    """A real tensor (..., 2) as a complex one (...,) (a copy here)."""
    if not isinstance(x, Tensor) or x.dtype not in (dtypes.float32, dtypes.float64):
        raise OpError(f"view_as_complex: is only supported for float and double tensors, "
                      f"but got a tensor of scalar type: {getattr(x, 'dtype', None)}")
    if x.ndim == 0 or x.shape[-1] != 2:
        raise OpError(f"view_as_complex: Tensor must have a last dimension of size 2, got shape {tuple(x.shape)}")
    return run(_VIEW_AS_COMPLEX,
               lambda a: (a[..., 0] + 1j * a[..., 1]).astype(complex_dtype_of(x.dtype).np), (x,))
