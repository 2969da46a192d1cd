"""Reductions. Primitives: sum, amax, amin, prod, argmax, argmin, and the fused
row kernels over one dim: softmax, log_softmax and cross_entropy (with its
gradient). Composed from them: mean, var, std, max/min with indices, logsumexp, norm.
"""
from __future__ import annotations

import builtins
import importlib
from collections import namedtuple

import numpy as np

from .. import dtypes
from ..kernels import Kernel
from ._helpers import normalize_dim, normalize_dims, real_only, reduce_dims, reject_complex, require_float
from .elementwise import cast, exp, log, sqrt, where
from .registry import Op, OpError, apply, defop, tracing_graph
from ..creation import full
from ..tensor import Tensor
from .elementwise import maximum, minimum
from .autocasting import autocast_op

ValuesIndices = namedtuple("ValuesIndices", ["values", "indices"])


def _reduced_shape(shape, dims, keepdim):
    if keepdim:
        return tuple(1 if i in dims else n for i, n in enumerate(shape))
    return tuple(n for i, n in enumerate(shape) if i not in dims)


def _reduce_infer(name, result_dtype=None):
    def infer(x, *, dims, keepdim):
        if name in ("amax", "amin"):
            reject_complex(name, x)  # no order, as in torch
            if builtins.any(x.shape[d] == 0 for d in dims):
                raise OpError(f"{name}: cannot reduce over a zero-size dimension of shape {tuple(x.shape)}")
        return _reduced_shape(x.shape, dims, keepdim), result_dtype or x.dtype
    return infer


def _expand_back(g, shape, dims, keepdim):
    """Broadcast a reduced gradient back over the reduced dims of an input of ``shape``."""
    if not keepdim:
        g = g.reshape(_reduced_shape(shape, dims, True))
    return g.expand(shape)


def _sum_vjp(g, x, *, out, dims, keepdim):
    return _expand_back(g, x.shape, dims, keepdim)  # (x's shape only: its data is not kept)


def _extreme_vjp(g, x, *, out, dims, keepdim):
    # Ties share the gradient evenly (PyTorch's amax/amin rule).
    mask = x == _expand_back(out, x.shape, dims, keepdim)
    count = _sum(mask, dims, True)
    return _expand_back(g, x.shape, dims, keepdim) * mask / count


def _prod_vjp(g, x, *, out, dims, keepdim):
    # d prod / d x_i = product of the others, computed without dividing by zero.
    is_zero = x == 0
    zeros = _sum(is_zero, dims, True)
    nonzero_prod = _prod(where(is_zero, 1, x), dims, True)
    at_zero = where(zeros == 1, nonzero_prod, 0)
    others = where(is_zero, at_zero, _expand_back(out, x.shape, dims, keepdim) / where(is_zero, 1, x))
    return _expand_back(g, x.shape, dims, keepdim) * others


def _arg_infer(name):
    def infer(x, *, dim, keepdim):
        if x.numel() == 0 and (dim is None or x.shape[dim] == 0):  # over a non-empty dim: an empty result
            raise OpError(f"{name}: cannot reduce an empty tensor of shape {tuple(x.shape)}")
        if dim is None:
            return ((1,) * x.ndim if keepdim else ()), dtypes.int64
        return _reduced_shape(x.shape, (dim,), keepdim), dtypes.int64
    return infer


def _arg_kernel(np_fn):
    def kernel(x, *, dim, keepdim):
        if dim is None:
            r = np_fn(x.reshape(-1))
            return np.asarray(r).reshape((1,) * x.ndim if keepdim else ())
        return np_fn(x, axis=dim, keepdims=keepdim)
    return kernel


SUM = defop("sum", kind="reduce", wgsl=Kernel("reduce.wgsl", "sum", "reduce.reduce"), infer=_reduce_infer("sum"),
            vjp=_sum_vjp,
            reads_inputs=False,
            numpy=lambda x, *, dims, keepdim: np.add.reduce(x, axis=dims, keepdims=keepdim))  # np.sum, less wrapping
AMAX = defop("amax", wgsl=Kernel("reduce.wgsl", "amax", "reduce.reduce"), infer=_reduce_infer("amax"), vjp=_extreme_vjp,
             kind="reduce", numpy=lambda x, *, dims, keepdim: np.amax(x, axis=dims, keepdims=keepdim))
AMIN = defop("amin", wgsl=Kernel("reduce.wgsl", "amin", "reduce.reduce"), infer=_reduce_infer("amin"), vjp=_extreme_vjp,
             kind="reduce", numpy=lambda x, *, dims, keepdim: np.amin(x, axis=dims, keepdims=keepdim))
PROD = defop("prod", wgsl=Kernel("reduce.wgsl", "prod", "reduce.reduce"), infer=_reduce_infer("prod"), vjp=_prod_vjp,
             kind="reduce", numpy=lambda x, *, dims, keepdim: np.prod(x, axis=dims, keepdims=keepdim))
ARGMAX = defop("argmax", kind="reduce", wgsl=Kernel("reduce.wgsl", "argmax", "reduce.arg_reduce"),
                infer=real_only("argmax", _arg_infer("argmax")), numpy=_arg_kernel(np.argmax))
ARGMIN = defop("argmin", kind="reduce", wgsl=Kernel("reduce.wgsl", "argmin", "reduce.arg_reduce"),
                infer=real_only("argmin", _arg_infer("argmin")), numpy=_arg_kernel(np.argmin))


def _sum(x, dims, keepdim):
    if x.dtype.category not in ("float", "complex"):  # bool and int sums accumulate in int64, like PyTorch
        x = cast(x, dtypes.int64)
    return apply(SUM, x, dims=dims, keepdim=keepdim)


def _prod(x, dims, keepdim):
    if x.dtype.category not in ("float", "complex"):
        x = cast(x, dtypes.int64)
    return apply(PROD, x, dims=dims, keepdim=keepdim)


def _keep(keepdim, keepdims):
    """PyTorch also takes numpy's spelling, ``keepdims=True``."""
    return keepdim if keepdims is None else bool(keepdims)


@autocast_op("sum")
def sum(x, dim=None, keepdim=False, *, dtype=None, keepdims=None):  # noqa: A001
    """Sum over ``dim`` (an int, a tuple of ints, or None for all)."""
    keepdim = _keep(keepdim, keepdims)
    if dtype is not None:  # the sum is done in that dtype (an int32 sum stays int32)
        x = cast(x, dtypes.to_dtype(dtype))
        if x.dtype is not dtypes.bool_:
            return apply(SUM, x, dims=reduce_dims("sum", dim, x.ndim), keepdim=keepdim)
    return _sum(x, reduce_dims("sum", dim, x.ndim), keepdim)


@autocast_op("prod")
def prod(x, dim=None, keepdim=False, *, dtype=None, keepdims=None):
    """Product over ``dim`` (an int, or None for all); ints and bools multiply in int64 unless ``dtype``."""
    keepdim = _keep(keepdim, keepdims)
    if dtype is not None:  # the product is done in that dtype
        x = cast(x, dtypes.to_dtype(dtype))
        if x.dtype is not dtypes.bool_:
            return apply(PROD, x, dims=normalize_dims("prod", dim, x.ndim), keepdim=keepdim)
    return _prod(x, normalize_dims("prod", dim, x.ndim), keepdim)


def mean(x, dim=None, keepdim=False, *, dtype=None, keepdims=None):
    keepdim = _keep(keepdim, keepdims)
    if dtype is not None:
        x = cast(x, dtypes.to_dtype(dtype))
    if not x.dtype.is_complex:
        require_float("mean", x)
    dims = reduce_dims("mean", dim, x.ndim)
    count = 1
    for d in dims:
        count *= x.shape[d]
    total = _sum(x, dims, keepdim)
    return total / count if count else total * float("nan")  # mean of nothing is nan


def amax(x, dim=None, keepdim=False, *, keepdims=None):
    keepdim = _keep(keepdim, keepdims)
    return apply(AMAX, x, dims=reduce_dims("amax", dim, x.ndim), keepdim=keepdim)


def amin(x, dim=None, keepdim=False, *, keepdims=None):
    keepdim = _keep(keepdim, keepdims)
    return apply(AMIN, x, dims=reduce_dims("amin", dim, x.ndim), keepdim=keepdim)


def argmax(x, dim=None, keepdim=False):
    d = None if dim is None else normalize_dim("argmax", dim, x.ndim)
    return apply(ARGMAX, x, dim=d if x.ndim else None, keepdim=keepdim)  # 0-d: dim 0 is all of it


def argmin(x, dim=None, keepdim=False):
    d = None if dim is None else normalize_dim("argmin", dim, x.ndim)
    return apply(ARGMIN, x, dim=d if x.ndim else None, keepdim=keepdim)


def _extreme(name, x, dim, keepdim, arg_fn):
    if dim is None:
        return apply(AMAX if name == "max" else AMIN, x, dims=tuple(range(x.ndim)), keepdim=False)
    d = normalize_dim(name, dim, x.ndim)
    indices = arg_fn(x, d, True)
    if x.ndim == 0:  # the one element is the max (or min); gather needs a dim
        return ValuesIndices(x.clone(), indices)
    values = x.gather(d, indices)  # gradient flows to the chosen element, as in PyTorch
    if not keepdim:
        values, indices = values.squeeze(d), indices.squeeze(d)
    return ValuesIndices(values, indices)


def max(x, dim=None, keepdim=False, *, keepdims=None):  # noqa: A001
    """``max(x)`` is the largest element; ``max(x, dim)`` gives ``(values, indices)``.
    ``max(x, y)`` with a tensor ``y`` is ``maximum``."""
    keepdim = _keep(keepdim, keepdims)
    if isinstance(dim, Tensor):
        return maximum(x, dim)
    return _extreme("max", x, dim, keepdim, argmax)


def min(x, dim=None, keepdim=False, *, keepdims=None):  # noqa: A001
    keepdim = _keep(keepdim, keepdims)
    if isinstance(dim, Tensor):
        return minimum(x, dim)
    return _extreme("min", x, dim, keepdim, argmin)


def all(x, dim=None, keepdim=False, *, keepdims=None):  # noqa: A001
    keepdim = _keep(keepdim, keepdims)
    return _all_any("all", AMIN, x, dim, keepdim, True)


def any(x, dim=None, keepdim=False, *, keepdims=None):  # noqa: A001
    keepdim = _keep(keepdim, keepdims)
    return _all_any("any", AMAX, x, dim, keepdim, False)


def _all_any(name, extreme, x, dim, keepdim, empty_value):  # dim=() reduces nothing here, as in PyTorch
    dims = normalize_dims(name, dim, x.ndim)
    if builtins.any(x.shape[d] == 0 for d in dims):
        # Reducing over nothing: all() is True and any() is False, in the reduced shape.
        return full(_reduced_shape(x.shape, dims, keepdim), empty_value, dtype=dtypes.bool_,
                    device=x.device)
    return apply(extreme, cast(x, dtypes.bool_), dims=dims, keepdim=keepdim)


def var(x, dim=None, unbiased=None, keepdim=False, *, correction=None, keepdims=None):
    """Variance; ``correction=1`` (the default, or ``unbiased=True``) divides by N - 1.
    ``var(x, True)`` is the unbiased flag, as in PyTorch."""
    keepdim = _keep(keepdim, keepdims)
    if isinstance(dim, bool):
        dim, unbiased = None, dim
    if x.dtype.is_complex:  # mean |x - mean|^2, real, as torch: the parts' variances add up
        return (var(x.real, dim, unbiased, keepdim, correction=correction)
                + var(x.imag, dim, unbiased, keepdim, correction=correction))
    require_float("var", x)
    if correction is None:
        correction = 0 if unbiased is False else 1
    dims = reduce_dims("var", dim, x.ndim)
    count = 1
    for d in dims:
        count *= x.shape[d]
    centered = x - mean(x, dims, True)
    return _sum(centered * centered, dims, keepdim) / builtins.max(count - correction, 0)


def std(x, dim=None, unbiased=None, keepdim=False, *, correction=None, keepdims=None):
    return sqrt(var(x, dim, unbiased, keepdim, correction=correction, keepdims=keepdims))


@autocast_op("logsumexp")
def logsumexp(x, dim, keepdim=False, *, keepdims=None):
    """log(sum(exp(x))) computed without overflow; -inf over an empty dim."""
    keepdim = _keep(keepdim, keepdims)
    require_float("logsumexp", x)
    dims = normalize_dims("logsumexp", dim, x.ndim)
    if builtins.any(x.shape[d] == 0 for d in dims):
        return full(_reduced_shape(x.shape, dims, keepdim), float("-inf"), dtype=x.dtype, device=x.device)
    peak = amax(x, dims, True).detach()
    peak = where(peak.abs() == float("inf"), 0.0, peak)
    out = log(_sum(exp(x - peak), dims, True)) + peak
    return out if keepdim else out.squeeze(dims)


def _row_max(x, axis):
    """``np.max(x, axis, keepdims=True)``. Along a short last axis numpy pays ~100 ns a row
    (0.24 ms for attention's (16, 4, 32, 32) scores, 0.18 ms for 2048 rows of 10 logits): for
    256 rows or more of up to 64 elements, the rows are transposed and the max taken down the
    columns in one vectorized pass (3-15x less natively, 2-3x in Pyodide; past 64 elements the
    copy costs more than it saves, and under 256 rows Pyodide's per-call cost does)."""
    n = x.shape[-1] if x.ndim else 0
    if axis is None or axis % x.ndim != x.ndim - 1 or not 1 < n <= 64 or x.size < 256 * n:
        return np.max(x, axis=axis, keepdims=True)
    return np.ascontiguousarray(x.reshape(-1, n).T).max(0).reshape(x.shape[:-1] + (1,))


def _softmax_numpy(x, *, dim):
    if x.size == 0:  # np.max refuses an empty dim; softmax of nothing is nothing
        return x.copy()
    axis = dim if x.ndim else None  # a 0-d tensor is one row of one element
    e = np.exp(x - _row_max(x, axis))  # float32 stays float32
    return e / np.sum(e, axis=axis, keepdims=True)


def _log_softmax_numpy(x, *, dim):
    if x.size == 0:
        return x.copy()
    axis = dim if x.ndim else None
    shifted = x - _row_max(x, axis)
    return shifted - np.log(np.sum(np.exp(shifted), axis=axis, keepdims=True))


def _softmax_infer(x, *, dim):
    return x.shape, x.dtype


# Fused: one kernel reads each row three times (max, sum of exp, write) instead of
# five to seven composed ops each writing a full-size temporary.
SOFTMAX = defop("softmax", kind="reduce", infer=_softmax_infer, numpy=_softmax_numpy,
                wgsl=Kernel("softmax.wgsl", "softmax", "softmax.softmax"),
                vjp=lambda g, x, *, out, dim: out * (g - (g * out).sum(dim, keepdim=True)))
LOG_SOFTMAX = defop("log_softmax", kind="reduce", infer=_softmax_infer, numpy=_log_softmax_numpy,
                    wgsl=Kernel("softmax.wgsl", "log_softmax", "softmax.softmax"),
                    vjp=lambda g, x, *, out, dim: g - out.exp() * g.sum(dim, keepdim=True))


@autocast_op("softmax")
def softmax(x, dim, dtype=None):
    """exp(x) / sum(exp(x)) along ``dim``, computed without overflow (one fused kernel)."""
    if dtype is not None:
        x = cast(x, dtypes.to_dtype(dtype))
    require_float("softmax", x)
    return apply(SOFTMAX, x, dim=normalize_dim("softmax", dim, x.ndim))


@autocast_op("log_softmax")
def log_softmax(x, dim, dtype=None):
    """log(softmax(x)) along ``dim``: x - max - log(sum(exp(x - max))), one fused kernel."""
    if dtype is not None:
        x = cast(x, dtypes.to_dtype(dtype))
    require_float("log_softmax", x)
    return apply(LOG_SOFTMAX, x, dim=normalize_dim("log_softmax", dim, x.ndim))


# Cross entropy of class-index labels, per position, fused: the loss reads each row
# of logits once for its max, once for its sum of exps, and the gradient writes
# g * (softmax - (1 - s) * onehot - s / C) in the same kernel, instead of
# log_softmax + gather + where + scatter_add chains. Dim 1 is the class dim of
# (N, C, d1, ...) logits; labels are (N, d1, ...); ignored positions give 0.
def _class_labels(x, labels, ignore_index):
    """Which positions count, and their labels (0 where ignored) shaped to index dim 1."""
    classes = x.shape[1]
    valid = labels != ignore_index
    safe = np.where(valid, labels, 0)
    bad = (safe < 0) | (safe >= classes)
    if bad.any():
        raise IndexError(f"cross_entropy: target {int(safe[bad][0])} is out of bounds for {classes} classes")
    return valid, np.expand_dims(safe, 1)


def _cross_entropy_numpy(x, labels, *, ignore_index, smoothing):
    valid, safe = _class_labels(x, labels, ignore_index)
    logp = _log_softmax_numpy(x, dim=1)
    loss = -np.take_along_axis(logp, safe, 1).squeeze(1)
    if smoothing:
        loss = (1.0 - smoothing) * loss - smoothing * logp.mean(1)
    return np.where(valid, loss, 0).astype(x.dtype)


def _cross_entropy_total_numpy(x, labels, *, ignore_index, smoothing, mean):
    total = _cross_entropy_numpy(x, labels, ignore_index=ignore_index, smoothing=smoothing).sum()
    if mean:
        with np.errstate(invalid="ignore", divide="ignore"):  # every position ignored: nan, as torch
            total = total / np.count_nonzero(labels != ignore_index)
    return np.asarray(total, dtype=x.dtype)


def _cross_entropy_backward_numpy(x, labels, g, *, ignore_index, smoothing, mean=False):
    valid, safe = _class_labels(x, labels, ignore_index)
    classes = np.arange(x.shape[1]).reshape((1, -1) + (1,) * (x.ndim - 2))
    hit = (classes == safe).astype(x.dtype)
    grad = _softmax_numpy(x, dim=1) - (1.0 - smoothing) * hit - smoothing / x.shape[1]
    if mean:  # g is the mean's gradient: each counted position gets g / count
        g = g / builtins.max(np.count_nonzero(valid), 1)
    return (grad * np.expand_dims(np.where(valid, g, 0), 1)).astype(x.dtype)


def _cross_entropy_backward_vjp(u, x, labels, g, *, out, ignore_index, smoothing, mean=False):
    """Second derivatives: out = g * valid * (softmax(x) - (1 - s) * onehot - s / C), with g
    per position, or one value for a total (divided by the count for a mean)."""
    prob = softmax(x, 1)
    valid = labels != ignore_index
    scale = 1.0 / _sum(valid, tuple(range(valid.ndim)), False).clamp(min=1).to(x.dtype) if mean else 1.0
    u_prob = _sum(u * prob, (1,), False)
    grad_x = where(valid, g * scale, 0.0).unsqueeze(1) * prob * (u - u_prob.unsqueeze(1))
    picked = u.gather(1, where(valid, labels, 0).unsqueeze(1)).squeeze(1)
    grad_g = u_prob - (1.0 - smoothing) * picked - (smoothing / x.shape[1]) * _sum(u, (1,), False)
    return grad_x, None, where(valid, grad_g, 0.0) * scale  # (summed to g's shape by the engine)


def _cross_entropy_total_vjp(g, x, labels, *, out, ignore_index, smoothing, mean):
    return apply(CROSS_ENTROPY_BACKWARD, x, labels, g, ignore_index=ignore_index, smoothing=smoothing,
                 mean=mean), None


CROSS_ENTROPY = defop("cross_entropy", kind="reduce", infer=lambda x, labels, **_: (labels.shape, x.dtype),
                      numpy=_cross_entropy_numpy, wgsl=Kernel("softmax.wgsl", "cross_entropy", "softmax.cross_entropy"),
                      vjp=lambda g, x, labels, *, out, **attrs: (apply(CROSS_ENTROPY_BACKWARD, x, labels, g, **attrs),
                                                                None))
# The loss summed, or averaged over the counted positions, in one op each way (eager mode: a
# trace holds the per-position loss and the reductions its passes and exporters know). WebGPU
# adds the positions up in one workgroup: 2 * 2**22 / 256 loop trips at most, under llvmpipe's
# ~65535 per invocation; more positions take the composed path.
TOTAL_MAX_POSITIONS = 2**22
CROSS_ENTROPY_TOTAL = defop("cross_entropy_total", kind="reduce", infer=lambda x, labels, **_: ((), x.dtype),
                            numpy=_cross_entropy_total_numpy, vjp=_cross_entropy_total_vjp,
                            wgsl=Kernel("softmax.wgsl", "cross_entropy", "softmax.cross_entropy"))
# Typed (Op): CROSS_ENTROPY's vjp above names it before it is defined. ``g``: one per position, or
# one value (a total's gradient; with ``mean``, divided by the count of positions not ignored).
CROSS_ENTROPY_BACKWARD: Op = defop("cross_entropy_backward", infer=lambda x, labels, g, **_: (x.shape, x.dtype),
                                   kind="reduce", numpy=_cross_entropy_backward_numpy,
                                   wgsl=Kernel("softmax.wgsl", "cross_entropy_backward", "softmax.cross_entropy"),
                                   vjp=_cross_entropy_backward_vjp)


@autocast_op("cross_entropy")
def cross_entropy(x, labels, ignore_index=-100, smoothing=0.0, reduction="none"):
    """Unweighted cross entropy of logits ``x`` (N, C, d1, ...) against class indices
    ``labels`` (N, d1, ...), per position (0 where ``labels == ignore_index``), or its
    ``"sum"`` or ``"mean"`` over the positions not ignored: logsumexp(x) - (1 - s) * x[label]
    - s * mean(x) along dim 1. Callers validate shapes (``nn.functional.cross_entropy``); one
    fused kernel each way."""
    attrs = {"ignore_index": int(ignore_index), "smoothing": float(smoothing)}
    if reduction != "none" and 0 < labels.numel() <= TOTAL_MAX_POSITIONS and not tracing_graph():
        return apply(CROSS_ENTROPY_TOTAL, x, labels, mean=reduction == "mean", **attrs)
    loss = apply(CROSS_ENTROPY, x, labels, **attrs)
    if reduction == "sum":
        return _sum(loss, tuple(range(loss.ndim)), False)
    if reduction == "mean":  # the count summed in the loss's dtype: no int64 sum cast for the division
        return _sum(loss, tuple(range(loss.ndim)), False) / sum(labels != ignore_index, dtype=loss.dtype)
    return loss


@autocast_op("norm")
def norm(x, p="fro", dim=None, keepdim=False, out=None, dtype=None):
    """The p-norm over ``dim`` (all elements when None): p a number (inf, -inf: the largest
    and smallest |x|; 0: how many are nonzero), ``'fro'`` (the 2-norm) or ``'nuc'`` (the sum
    of singular values of the matrices in the last two dims, or ``dim``)."""
    if out is not None:
        raise TypeError("norm: out= is not supported; use the returned tensor")
    if dtype is not None:
        x = cast(x, dtypes.to_dtype(dtype))
    if x.dtype.is_complex and p != "nuc":  # every other norm is its moduli's (the nuclear one is the SVD's)
        x = x.abs()
    require_float("norm", x)
    if p == "nuc":
        # webgrad.linalg (its SVD) is built on ops, so ops reaches it by name at call time, the way
        # webgrad's own __getattr__ loads subpackages, not by an import that would close a circle.
        linalg = importlib.import_module("webgrad.linalg")
        return linalg.matrix_norm(x, "nuc", dim=(-2, -1) if dim is None else dim, keepdim=keepdim)
    if isinstance(p, str) and p != "fro":
        raise OpError(f"norm: p must be a number, 'fro' or 'nuc', got {p!r}")
    if p == 1:
        return sum(x.abs(), dim, keepdim)
    if p == float("inf"):
        return amax(x.abs(), dim, keepdim)
    if p == float("-inf"):
        return amin(x.abs(), dim, keepdim)
    if p == 0:  # how many are nonzero, in x's dtype; a zero gradient (the where keeps x in the graph)
        count = cast(sum(x != 0, dim, keepdim), x.dtype)
        return where(full((), True, dtype=dtypes.bool_, device=x.device), count, sum(x, dim, keepdim))
    if p == 2 or p == "fro":
        total, root = _sum(x * x, reduce_dims("norm", dim, x.ndim), keepdim), sqrt
    else:
        total, root = sum(x.abs() ** p, dim, keepdim), (lambda t: t ** (1.0 / p))
    # The root's slope is infinite at 0, which would make the gradient of a zero
    # vector's norm 0 * inf = nan; PyTorch defines it as 0. The inner where keeps the
    # root away from 0, the outer one picks 0 there (and passes no gradient). The test
    # is != 0, not > 0: a NaN total must stay NaN (clip_grad_norm_ relies on seeing it).
    nonzero = total != 0
    return where(nonzero, root(where(nonzero, total, 1.0)), 0.0)
