"""The fused layer-norm primitive: normalize each row over the trailing dims.

``layer_norm_core(x, ndims=k, eps=eps)`` views ``x`` as rows (the leading dims)
of n elements (the product of the last k dims) and returns, per row,

    y = (x - mean) * rstd,    rstd = 1 / sqrt(var + eps)    (biased var)

and ``layer_norm(x, weight, bias, ndims=k, eps=eps)`` the same followed by ``y * weight + bias``
in the same kernel (``F.layer_norm``'s usual case). The input gradient is

    gx = rstd * (g - mean(g) - y * mean(g * y))          (g * weight in place of g with the affine)

one kernel in a plain backward (``layer_norm_backward``, the statistics found again from x), and
Tensor ops under ``create_graph``, so gradients of gradients work. With the affine, backward reads
x (and weight) only and computes y again where the weight's gradient needs it: as torch's layer
norm keeps its input, not its normalized output, a transformer's step keeps one tensor per layer
norm instead of two.
"""
from __future__ import annotations

import numpy as np

from .. import dtypes
from ..backend.numpy.blas import cpu_threads
from ..kernels import Kernel
from ._helpers import describe, require_float
from .registry import OpError, apply, defop
from ..autograd import is_grad_enabled


def _row_dims(ndim, ndims):
    return tuple(range(ndim - ndims, ndim))


def _normalized_rows(x, ndims, eps):
    """(y, rstd): x's rows of the last ``ndims`` dims normalized, in float64 (float32 sums over
    long rows lose digits), and each row's 1 / sqrt(var + eps). In place on one copy: a fresh
    array per step (each a new mapping, faulted in page by page) made this several times slower."""
    n = int(np.prod(x.shape[x.ndim - ndims:]))
    rows = x.astype(np.float64, order="C").reshape(-1, n)
    mean = rows.sum(axis=1, keepdims=True)
    mean /= n
    rows -= mean
    var = np.einsum("ij,ij->i", rows, rows)[:, None]
    var /= n
    var += eps
    rstd = 1.0 / np.sqrt(var)
    rows *= rstd
    return rows, rstd


def _layer_norm_numpy(x, *, ndims, eps, weight=None, bias=None):
    """The result rounded once to x's dtype, the affine part in float64 too."""
    if x.size == 0:
        return x.copy()
    rows, _ = _normalized_rows(x, ndims, eps)
    if weight is not None:
        rows *= weight.reshape(-1)
        rows += bias.reshape(-1)
    return rows.astype(x.dtype).reshape(x.shape)


def _layer_norm_infer(x, *, ndims, eps):
    return x.shape, x.dtype


def _layer_norm_vjp(g, x, *, out, ndims, eps):
    if not is_grad_enabled():  # a plain backward: one kernel
        return apply(LAYER_NORM_BACKWARD, g, x, ndims=ndims, eps=eps)
    # create_graph: in Tensor ops, rstd recomputed from x, so the second derivative sees its
    # dependence on x
    dims = _row_dims(x.ndim, ndims)
    rstd = (x.var(dims, keepdim=True, correction=0) + eps).rsqrt()
    return rstd * (g - g.mean(dims, keepdim=True) - out * (g * out).mean(dims, keepdim=True))


def _backward_numpy(g, x, *, ndims, eps):
    """gx of layer_norm_core for the incoming gradient g, the statistics again from x (float64)."""
    if x.size == 0:
        return np.zeros_like(x)
    y, rstd = _normalized_rows(x, ndims, eps)
    n = y.shape[1]
    rows = g.astype(np.float64, order="C").reshape(y.shape)
    mean_g = rows.sum(axis=1, keepdims=True)
    mean_g /= n
    mean_gy = np.einsum("ij,ij->i", rows, y)[:, None]
    mean_gy /= n
    rows -= mean_g
    y *= mean_gy
    rows -= y
    rows *= rstd
    return rows.astype(x.dtype).reshape(x.shape)


def _backward_infer(g, x, *, ndims, eps):
    return x.shape, x.dtype


# The vjp of a plain backward: each row read four times (two statistics, the two sums, the write)
# instead of about twenty composed ops, each writing a temporary of the input's size.
LAYER_NORM_BACKWARD = defop("layer_norm_backward", kind="reduce", infer=_backward_infer, numpy=_backward_numpy,
                            wgsl=Kernel("layer_norm.wgsl", "layer_norm_backward", "layer_norm.layer_norm_backward"))


# Fused: one kernel reads each row three times (sum, squared deviations, write)
# instead of the six or so composed ops that each write a full-size temporary.
LAYER_NORM_CORE = defop("layer_norm_core", kind="reduce", infer=_layer_norm_infer, numpy=_layer_norm_numpy,
                        wgsl=Kernel("layer_norm.wgsl", "layer_norm", "layer_norm.layer_norm"),
                        vjp=_layer_norm_vjp)


def _affine_infer(x, weight, bias, *, ndims, eps):
    return x.shape, x.dtype


def _affine_numpy(x, weight, bias, *, ndims, eps):
    return _layer_norm_numpy(x, ndims=ndims, eps=eps, weight=weight, bias=bias)


def _affine_vjp(g, x, weight, bias, *, out, ndims, eps, needs):
    lead = tuple(range(x.ndim - ndims))
    # y again, rather than kept from forward: for the weight, and for gx's Tensor ops under create_graph
    y = layer_norm_core(x, ndims=ndims, eps=eps) if needs[1] or is_grad_enabled() else None
    gx = _layer_norm_vjp(g * weight, x, out=y, ndims=ndims, eps=eps) if needs[0] else None
    gw = _sum_rows(g * y, lead) if needs[1] else None
    gb = _sum_rows(g, lead) if needs[2] else None
    return gx, gw, gb


def _sum_rows(t, lead):
    return t.sum(lead) if lead else t  # a single row (ndims == x.ndim): nothing to add up


LAYER_NORM = defop("layer_norm", kind="reduce", infer=_affine_infer, numpy=_affine_numpy,
                   wgsl=Kernel("layer_norm.wgsl", "layer_norm", "layer_norm.layer_norm"), vjp=_affine_vjp)


def layer_norm_core(x, *, ndims, eps=1e-5):
    """(x - mean) / sqrt(var + eps) over the last ``ndims`` dims (biased var), one fused kernel.

    Args:
        x: a floating-point tensor with at least ``ndims`` dims.
        ndims: how many trailing dims form one row (at least 1).
        eps: added to the variance before the square root.

    Example:
        >>> webgrad.ops.layer_norm_core(webgrad.tensor([[1.0, 3.0]]), ndims=1)   # about [[-1., 1.]]
    """
    require_float("layer_norm", x)
    if not 1 <= ndims <= x.ndim:
        raise OpError(f"layer_norm: cannot normalize over the last {ndims} dims of {describe(x)}; "
                      f"ndims must be between 1 and {x.ndim}")
    return apply(LAYER_NORM_CORE, x, ndims=int(ndims), eps=float(eps))


def layer_norm(x, weight, bias, *, ndims, eps=1e-5):
    """``layer_norm_core(x) * weight + bias`` in one kernel; weight and bias have the shape of
    the last ``ndims`` dims and x's dtype.

    Example:
        >>> w, b = webgrad.tensor([2.0, 2.0]), webgrad.tensor([0.0, 1.0])
        >>> webgrad.ops.layer_norm(webgrad.tensor([[1.0, 3.0]]), w, b, ndims=1)   # about [[-2., 3.]]
    """
    require_float("layer_norm", x)
    if not 1 <= ndims <= x.ndim:
        raise OpError(f"layer_norm: cannot normalize over the last {ndims} dims of {describe(x)}; "
                      f"ndims must be between 1 and {x.ndim}")
    rows = tuple(x.shape[x.ndim - ndims:])
    for name, t in (("weight", weight), ("bias", bias)):
        if tuple(t.shape) != rows or t.dtype is not x.dtype or t.device != x.device:
            raise OpError(f"layer_norm: {name} must have the normalized shape {rows}, dtype and device of "
                          f"input {describe(x)}, got {describe(t)}")
    return apply(LAYER_NORM, x, weight, bias, ndims=int(ndims), eps=float(eps))


# -- batch norm (training) ---------------------------------------------------------------------
# F.batch_norm with batch statistics normalizes each channel (dim 1) over every other dim. Two
# primitives forward and two backward, instead of about thirty composed ops each writing a temporary
# of the input's size (a ResNet block's BatchNorm2d, 16x64x32x32 on numpy: 8.0 -> 3.5 ms a forward
# and backward; torch 2.2):
#
#   stats = batch_norm_stats(x)                  (2, C): each channel's mean and biased variance
#   y     = batch_norm(x, stats, w, b, eps)      (x - mean) * rstd * w + b,  rstd = 1 / sqrt(var + eps)
#
# ``stats`` is an input of batch_norm so that the forward reduces once and F.batch_norm updates the
# running statistics from the same numbers. batch_norm's derivative is that of normalizing by x's own
# statistics (stats must be batch_norm_stats(x), which F.batch_norm guarantees): with xhat the
# normalized x, n the values per channel, sg = sum(g) and sgx = sum(g * xhat) over a channel,
#
#   gx = w * rstd * (g - sg / n - xhat * sgx / n),   gw = sgx,   gb = sg
#
# In a plain backward that is two kernels, batch_norm_grad_sums (the (2, C) sums [sg, sgx]) and
# batch_norm_backward (gx); under create_graph, Tensor ops from x, so gradients of gradients work.
# Statistics are float32 (float64 for a float64 x), summed in float64 across images.
def _per_channel(x):
    """x as (N, C, S): S the product of the dims after the channel dim."""
    return x.reshape(x.shape[0], x.shape[1], -1)


def _stats_dtype(dtype):
    return np.float64 if np.dtype(dtype) == np.float64 else np.float32


# Images a block of the numpy kernels' loops covers: its temporaries (about this many elements)
# stay in cache, and a batch of single values (BatchNorm1d) is not a Python loop per image.
_BLOCK_ELEMENTS = 1 << 16


def _channel_shares(x3, run):
    """``run(c0, c1)`` over the cpu threads' shares of the channels, or once over all of them."""
    spans = cpu_threads.spans(x3.shape[1], x3.size)
    cpu_threads.map(lambda span: run(*span), spans)


def _image_blocks(x3, c0, c1):
    n, s = x3.shape[0], x3.shape[2]
    step = max(1, _BLOCK_ELEMENTS // max(1, (c1 - c0) * s))
    return [(i, min(n, i + step)) for i in range(0, n, step)]


def _centered_block(x3, i0, i1, c0, c1, mean, dtype):
    """x3[i0:i1, c0:c1] - mean (the channels' means, c1 - c0 of them), as a new array of ``dtype``."""
    return np.subtract(x3[i0:i1, c0:c1], mean.astype(dtype)[:, None], dtype=dtype)


def _stats_numpy(x):
    x3 = _per_channel(x)
    dtype = _stats_dtype(x.dtype)
    count = x3.shape[0] * x3.shape[2]
    out = np.zeros((2, x3.shape[1]), dtype)
    if count == 0:
        return out

    def run(c0, c1):
        # rows of S summed pairwise in the input's precision, then across images in float64
        mean = x3[:, c0:c1].sum(axis=2, dtype=dtype).sum(axis=0, dtype=np.float64) / count
        squares = np.zeros(c1 - c0)
        for i0, i1 in _image_blocks(x3, c0, c1):
            d = _centered_block(x3, i0, i1, c0, c1, mean, dtype)
            np.square(d, out=d)
            squares += d.sum(axis=2).sum(axis=0, dtype=np.float64)
        out[0, c0:c1], out[1, c0:c1] = mean, squares / count
    _channel_shares(x3, run)
    return out


def _stats_infer(x):
    return (2, x.shape[1]), dtypes.float64 if x.dtype is dtypes.float64 else dtypes.float32


def _scale(stats, eps):
    """Each channel's rstd = 1 / sqrt(var + eps), in float64."""
    return 1.0 / np.sqrt(stats[1].astype(np.float64) + eps)


def _batch_norm_numpy(x, stats, w, b, *, eps):
    x3 = _per_channel(x)
    dtype = _stats_dtype(x.dtype)
    out = np.empty(x3.shape, dtype)
    mean, scale = stats[0], (_scale(stats, eps) * w).astype(dtype)[:, None]
    shift = b.astype(dtype)[:, None]

    def run(c0, c1):
        for i0, i1 in _image_blocks(x3, c0, c1):
            block = out[i0:i1, c0:c1]
            np.subtract(x3[i0:i1, c0:c1], mean[c0:c1, None].astype(dtype), out=block, dtype=dtype)
            block *= scale[c0:c1]
            block += shift[c0:c1]
    _channel_shares(x3, run)
    return out.astype(x.dtype, copy=False).reshape(x.shape)


def _batch_norm_infer(x, stats, w, b, *, eps):
    return x.shape, x.dtype


def _grad_sums_numpy(g, x, stats, *, eps):
    """(2, C): [sum(g), sum(g * xhat)] per channel."""
    g3, x3 = _per_channel(g), _per_channel(x)
    dtype = _stats_dtype(x.dtype)
    out = np.zeros((2, x3.shape[1]), dtype)
    rstd = _scale(stats, eps)

    def run(c0, c1):
        out[0, c0:c1] = g3[:, c0:c1].sum(axis=2, dtype=dtype).sum(axis=0, dtype=np.float64)
        dot = np.zeros(c1 - c0)
        for i0, i1 in _image_blocks(x3, c0, c1):
            d = _centered_block(x3, i0, i1, c0, c1, stats[0][c0:c1], dtype)
            d *= g3[i0:i1, c0:c1]
            dot += d.sum(axis=2).sum(axis=0, dtype=np.float64)
        out[1, c0:c1] = dot * rstd[c0:c1]
    if x3.size:
        _channel_shares(x3, run)
    return out


def _grad_sums_infer(g, x, stats, *, eps):
    return stats.shape, stats.dtype


def _backward_batch_numpy(g, x, stats, w, sums, *, eps):
    """gx = w * rstd * (g - sg / n - xhat * sgx / n), per block: k * g - a * (x - mean) - c."""
    g3, x3 = _per_channel(g), _per_channel(x)
    dtype = _stats_dtype(x.dtype)
    count = max(1, x3.shape[0] * x3.shape[2])
    rstd = _scale(stats, eps)
    k = rstd * w
    a, c = (k * rstd * sums[1] / count).astype(dtype)[:, None], (k * sums[0] / count).astype(dtype)[:, None]
    k = k.astype(dtype)[:, None]
    out = np.empty(x3.shape, dtype)

    def run(c0, c1):
        for i0, i1 in _image_blocks(x3, c0, c1):
            block = out[i0:i1, c0:c1]
            np.subtract(x3[i0:i1, c0:c1], stats[0][c0:c1, None].astype(dtype), out=block, dtype=dtype)
            block *= -a[c0:c1]
            block += np.multiply(g3[i0:i1, c0:c1], k[c0:c1], dtype=dtype)
            block -= c[c0:c1]
    _channel_shares(x3, run)
    return out.astype(x.dtype, copy=False).reshape(x.shape)


def _backward_batch_infer(g, x, stats, w, sums, *, eps):
    return x.shape, x.dtype


def _batch_norm_vjp(g, x, stats, w, b, *, out, eps, needs):
    if not is_grad_enabled():  # a plain backward: two kernels
        sums = apply(BATCH_NORM_GRAD_SUMS, g, x, stats, eps=eps)
        gx = apply(BATCH_NORM_BACKWARD, g, x, stats, w, sums, eps=eps) if needs[0] else None
        gw = sums[1].to(w.dtype) if needs[2] else None
        gb = sums[0].to(b.dtype) if needs[3] else None
        return gx, None, gw, gb
    # create_graph: the statistics again from x in Tensor ops, so second derivatives see them
    dims = (0,) + tuple(range(2, x.ndim))
    shape = (1, x.shape[1]) + (1,) * (x.ndim - 2)
    mean = x.mean(dims, keepdim=True)
    rstd = (x.var(dims, keepdim=True, correction=0) + eps).rsqrt()
    xhat = (x - mean) * rstd
    gy = g * w.reshape(shape)
    gx = rstd * (gy - gy.mean(dims, keepdim=True) - xhat * (gy * xhat).mean(dims, keepdim=True))
    return gx, None, (g * xhat).sum(dims).to(w.dtype), g.sum(dims).to(b.dtype)


BATCH_NORM_STATS = defop("batch_norm_stats", kind="other", infer=_stats_infer, numpy=_stats_numpy,
                         wgsl=Kernel("batch_norm.wgsl", "batch_stats", "batch_norm.stats"))
BATCH_NORM = defop("batch_norm", kind="other", infer=_batch_norm_infer, numpy=_batch_norm_numpy,
                   wgsl=Kernel("batch_norm.wgsl", "batch_normalize", "batch_norm.normalize"), vjp=_batch_norm_vjp)
BATCH_NORM_GRAD_SUMS = defop("batch_norm_grad_sums", kind="other", infer=_grad_sums_infer, numpy=_grad_sums_numpy,
                             wgsl=Kernel("batch_norm.wgsl", "batch_grad_sums", "batch_norm.grad_sums"))
BATCH_NORM_BACKWARD = defop("batch_norm_backward", kind="other", infer=_backward_batch_infer,
                            numpy=_backward_batch_numpy,
                            wgsl=Kernel("batch_norm.wgsl", "batch_backward", "batch_norm.backward"))


def _require_channels(name, x):
    require_float(name, x)
    if x.ndim < 2 or x.numel() == 0:
        raise OpError(f"{name}: expected a non-empty input of at least 2 dims (N, C, ...), got {describe(x)}")


def batch_norm_stats(x):
    """Each channel's (dim 1) mean and biased variance over every other dim, as a (2, C) tensor
    (float32; float64 for a float64 x). Not differentiable: it is batch_norm's statistics.

    Example:
        >>> webgrad.ops.batch_norm_stats(webgrad.tensor([[1.0, 2.0], [3.0, 6.0]]))
        tensor([[2., 4.],
                [1., 4.]])
    """
    _require_channels("batch_norm_stats", x)
    return apply(BATCH_NORM_STATS, x)


def batch_norm(x, stats, weight, bias, *, eps=1e-5):
    """``(x - mean) / sqrt(var + eps) * weight + bias`` per channel (dim 1), with ``stats`` =
    ``batch_norm_stats(x)``; its gradient is that of normalizing by x's own batch statistics
    (F.batch_norm when training). weight and bias are (C,).

    Example:
        >>> x = webgrad.tensor([[1.0, 2.0], [3.0, 6.0]])
        >>> webgrad.ops.batch_norm(x, webgrad.ops.batch_norm_stats(x), webgrad.ones(2), webgrad.zeros(2))
        tensor([[-1.0000, -1.0000],
                [ 1.0000,  1.0000]])
    """
    _require_channels("batch_norm", x)
    channels = x.shape[1]
    if tuple(stats.shape) != (2, channels) or stats.device != x.device:
        raise OpError(f"batch_norm: stats must be batch_norm_stats(input), (2, {channels}) on {x.device}, "
                      f"got {describe(stats)} for input {describe(x)}")
    for name, t in (("weight", weight), ("bias", bias)):
        if tuple(t.shape) != (channels,) or t.device != x.device or not t.dtype.is_floating_point:
            raise OpError(f"batch_norm: {name} must be a floating-point ({channels},) tensor on {x.device} "
                          f"for input {describe(x)}, got {describe(t)}")
    return apply(BATCH_NORM, x, stats, weight, bias, eps=float(eps))
