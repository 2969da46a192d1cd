"""webgrad: PyTorch-style tensors, autograd, nn and optim that run natively and
in the browser, with the heavy maths on WebGPU.

Example:
    >>> import webgrad
    >>> x = webgrad.tensor([1.0, 2.0, 3.0], requires_grad=True)
    >>> (x * x).sum().backward()
    >>> x.grad
    tensor([2., 4., 6.])
"""
import builtins as _builtins
import math as _math

from .dtypes import (  # noqa: F401
    DType, bfloat16, bool_ as bool, float16, float32, float64, get_default_dtype, int32, int64,
    set_default_dtype,
)
from .dtypes import float32 as float, float64 as double, int32 as int, int64 as long  # noqa: F401
from .dtypes import float16 as half  # noqa: F401
from .dtypes import int8, int16, int16 as short, qint8, uint8  # noqa: F401
from .memory_format import (  # noqa: F401
    channels_last, channels_last_3d, contiguous_format, memory_format, preserve_format,
)
from .dtypes import complex64, complex128, complex64 as cfloat, complex128 as cdouble  # noqa: F401
from .tensor import Size, Tensor  # noqa: F401
from .device_api import device  # noqa: F401
from .backend import default_device as get_default_device, set_default_device  # noqa: F401
from .creation import (  # noqa: F401
    arange, as_tensor, empty, empty_like, eye, from_numpy, full, full_like, linspace, ones,
    ones_like, rand, rand_like, randint, randint_like, randn, randn_like, randperm, tensor,
    zeros, zeros_like,
)
from .creation import BoolTensor, DoubleTensor, FloatTensor, IntTensor, LongTensor  # noqa: F401
from .ops import (  # noqa: F401
    abs, add, all, amax, amin, any, argmax, argmin, bmm, cat, ceil, chunk, clamp, clone,
    concatenate, cos, div, eq, erf, exp, flatten, flip, floor, gather, ge, gt, index_put, index_select,
    le, log, log1p, log_softmax, logical_and, logical_not, logical_or, logical_xor,
    logsumexp, lt, masked_fill, matmul, max, maximum, mean, min, minimum, mm, movedim, mul,
    narrow, ne, neg, nonzero, norm, permute, pow, prod, reciprocal, relu, remainder, repeat,
    reshape, round, rsqrt, scatter_add, sigmoid, sign, sin, softmax, split, sqrt, squeeze,
    stack, std, sub, sum, tanh, transpose, true_divide, unbind, unflatten, unsqueeze, var,
    where,
)
from .ops.registry import OpError  # noqa: F401
from .ops import isfinite, isinf, isnan, nan_to_num  # noqa: F401
from .ops import (  # noqa: F401
    acos, acosh, addcdiv, addcmul, allclose, asin, asinh, atan, atan2, atanh, clamp_max, clamp_min, copysign,
    cosh, deg2rad, digamma, equal, erfc, erfinv, exp2, expm1, float_power, floor_divide, fmod, frac, hypot,
    isclose, isneginf, isposinf, isreal, lerp, lgamma, log2, log10, logaddexp, logaddexp2, logit, mvlgamma,
    polygamma, positive, rad2deg, sinc, sinh, square, tan, trunc, xlogy,
)
from .ops import acos as arccos, acosh as arccosh, asin as arcsin, asinh as arcsinh  # noqa: F401
from .ops import atan as arctan, atan2 as arctan2, atanh as arctanh, trunc as fix  # noqa: F401
from .ops import i0  # noqa: F401
# torch's alias names of the elementwise ops
from .ops import abs as absolute, div as divide, mul as multiply, neg as negative, sub as subtract  # noqa: F401
from .ops import ge as greater_equal, gt as greater, le as less_equal, lt as less, ne as not_equal  # noqa: F401
from .ops import (  # noqa: F401
    bitwise_and, bitwise_left_shift, bitwise_not, bitwise_or, bitwise_right_shift, bitwise_xor,
)
from .ops import (  # noqa: F401
    argsort, bucketize, cumprod, cumsum, einsum, ger, outer, searchsorted, sort, topk, tril, triu, unique,
)
from .ops import multinomial  # noqa: F401
from .ops import (  # noqa: F401
    diagonal_scatter, index_copy, index_fill, masked_scatter, masked_select, scatter, scatter_reduce, select,
    select_scatter, slice_scatter, take_along_dim,
)
from .ops import (  # noqa: F401
    atleast_1d, atleast_2d, atleast_3d, broadcast_shapes, broadcast_tensors, broadcast_to, column_stack, diag,
    diag_embed, diagflat, diagonal, dstack, fliplr, flipud, hstack, meshgrid, moveaxis, ravel, roll, rot90,
    row_stack, split_with_sizes, swapaxes, swapdims, tensor_split, tile, trace, tril_indices, triu_indices,
    vstack,
)
from .ops import repeat_interleave  # noqa: F401
from .ops import (  # noqa: F401
    aminmax, bincount, count_nonzero, cummax, cummin, histc, kthvalue, logcumsumexp, median, mode, nanmean,
    nanmedian, nanquantile, nansum, quantile, std_mean, var_mean,
)
from .ops import diff, put  # noqa: F401
from .ops import bernoulli, normal, poisson  # noqa: F401
from .ops.index_ops import index_add, take  # noqa: F401  (torch's; webgrad.ops.take/index_add are the row primitives)
from .ops import (  # noqa: F401
    addbmm, addmm, addmv, addr, baddbmm, chain_matmul, cross, dot, inner, kron, mv, tensordot, vdot,
)
from .determinism import (  # noqa: F401
    are_deterministic_algorithms_enabled, is_deterministic_algorithms_warn_only_enabled, use_deterministic_algorithms,
)
from .autograd import enable_grad, no_grad, set_grad_enabled, functional_grad as grad  # noqa: F401
from .autograd import is_grad_enabled  # noqa: F401
from .autograd import inference_mode, is_inference_mode_enabled  # noqa: F401
from .random import Generator, initial_seed, manual_seed, seed  # noqa: F401
from . import autograd, dtypes, random  # noqa: F401
from .autograd import functional as _autograd_functional  # noqa: F401,E402  (webgrad.autograd.functional, as torch's)
# Eager (it is light): importing the submodule later would shadow the function of the same name.
from .summary import summary  # noqa: F401

from .type_info import finfo, iinfo  # noqa: F401
from .sparse import sparse_coo_tensor, spmm  # noqa: F401

clip = clamp
__version__ = "0.1.0"
# torch's constants (torch.pi, torch.inf, ...); newaxis indexes like None.
pi, e, inf, nan, newaxis = _math.pi, _math.e, _math.inf, _math.nan, None


# The builtins by module path: here `bool` and `int` are webgrad's dtypes.
def is_tensor(obj) -> _builtins.bool:
    return isinstance(obj, Tensor)


def numel(x) -> _builtins.int:
    return x.numel()


def __getattr__(name):
    # Subpackages load on first use so `import webgrad` stays fast (and light in Pyodide).
    import importlib

    if name in ("nn", "optim", "data", "utils", "webgpu", "serialize", "profiler", "backends",
                "cuda", "cpu", "accelerator", "mps", "store", "datasets", "display", "amp", "onnx", "graph",
                "lite", "special", "distributions", "sparse", "distributed", "linalg", "fft", "ao"):
        return importlib.import_module(f"webgrad.{name}")
    if name in ("det", "logdet", "slogdet", "inverse", "pinverse", "matrix_power", "cholesky", "cholesky_solve",
                "cholesky_inverse", "svd", "qr"):  # torch.linalg's
        return getattr(importlib.import_module("webgrad.linalg"), "torch_" + name)
    if name in ("real", "imag", "conj", "angle", "complex", "polar", "view_as_real", "view_as_complex",
                "is_complex"):  # complex tensors (core/complex_ops.py)
        return getattr(importlib.import_module("webgrad.complex_ops"), name)
    if name in ("stft", "istft"):  # core/spectral.py, on webgrad.fft
        return getattr(importlib.import_module("webgrad.spectral"), name)
    if name in ("cdist", "pdist", "cosine_similarity", "pairwise_distance"):  # distances (core/nn/functional_norm.py)
        return getattr(importlib.import_module("webgrad.nn.functional_norm"), name)
    if name == "compile":  # graph mode (core/graph/), like torch.compile
        return importlib.import_module("webgrad.graph").compile
    if name == "export":  # a model's forward as a web bundle (core/lite/), for /lite.js
        return importlib.import_module("webgrad.lite").export
    if name == "autocast":
        return importlib.import_module("webgrad.amp").autocast
    if name in ("save", "load"):
        return getattr(importlib.import_module("webgrad.serialize"), name)
    raise AttributeError(f"module 'webgrad' has no attribute {name!r}")
