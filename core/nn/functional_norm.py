"""Normalizations and distances beyond batch/layer norm (re-exported by ``nn.functional``).

group_norm and instance_norm view the input as rows and reuse the fused
``layer_norm_core`` kernel; rms_norm, local_response_norm and the distances are
composed of Tensor ops. All differentiate through autograd on every backend.
"""
from __future__ import annotations

import math

from .. import creation, dtypes, ops
from ..autograd import no_grad
from ..ops._helpers import describe
from ..ops.registry import OpError
from ..type_info import finfo
from ..ops.autocasting import autocast_op

__all__ = ["group_norm", "instance_norm", "rms_norm", "local_response_norm", "normalize", "cosine_similarity",
           "pairwise_distance", "pdist", "cdist"]


def _affine(out, weight, bias, shape):
    if weight is not None:
        out = out * weight.reshape(shape)
    if bias is not None:
        out = out + bias.reshape(shape)
    return out


def _check_channels(op_name, input, channels, **params):
    for name, t in params.items():
        if t is not None and tuple(t.shape) != (channels,):
            raise OpError(f"{op_name}: {name} of shape {tuple(t.shape)} does not match the {channels} "
                          f"channels of input {describe(input)}")


@autocast_op("group_norm")
def group_norm(input, num_groups, weight=None, bias=None, eps=1e-5):
    """Normalize each group of ``C // num_groups`` channels (with all their positions) per sample.

    Example:
        >>> F.group_norm(webgrad.randn(2, 4, 3), 2).shape
        webgrad.Size([2, 4, 3])
    """
    if input.ndim < 2:
        raise OpError(f"group_norm: expected input of at least 2 dims (N, C, ...), got {describe(input)}")
    n, channels = input.shape[0], input.shape[1]
    if num_groups <= 0 or channels % num_groups:
        raise OpError(f"group_norm: expected the number of channels in input {describe(input)} to be "
                      f"divisible by num_groups, but got num_groups={num_groups}")
    _check_channels("group_norm", input, channels, weight=weight, bias=bias)
    per_group = input.numel() // max(n * num_groups, 1)
    if input.numel() == 0:
        out = input * 1.0
    else:
        rows = input.reshape(n, num_groups, per_group)
        out = ops.layer_norm_core(rows, ndims=1, eps=eps).reshape(input.shape)
    return _affine(out, weight, bias, (channels,) + (1,) * (input.ndim - 2))


def instance_norm(input, running_mean=None, running_var=None, weight=None, bias=None, use_input_stats=True,
                  momentum=0.1, eps=1e-5):
    """Normalize each channel of each sample over its positions (N, C, ...); optionally track running stats.

    With ``use_input_stats`` the running statistics (if given) are updated in place
    with the batch mean of the per-instance mean and unbiased variance, as PyTorch.

    Example:
        >>> F.instance_norm(webgrad.randn(2, 3, 5)).mean(-1)   # about 0
    """
    if input.ndim < 3:
        raise OpError(f"instance_norm: expected input of at least 3 dims (N, C, L, ...), got {describe(input)}")
    n, channels = input.shape[0], input.shape[1]
    _check_channels("instance_norm", input, channels, running_mean=running_mean, running_var=running_var,
                    weight=weight, bias=bias)
    stat_shape = (channels,) + (1,) * (input.ndim - 2)
    positions = math.prod(input.shape[2:])
    if use_input_stats:
        if positions <= 1:
            raise ValueError(f"instance_norm: expected more than 1 spatial element when training, got input "
                             f"of shape {tuple(input.shape)}")
        rows = input.reshape(n, channels, positions)
        out = ops.layer_norm_core(rows, ndims=1, eps=eps).reshape(input.shape)
        if (running_mean is not None or running_var is not None) and n > 0:
            with no_grad():
                flat = rows.detach()
                if running_mean is not None:
                    running_mean.copy_(running_mean * (1 - momentum) + flat.mean(-1).mean(0) * momentum)
                if running_var is not None:
                    unbiased = flat.var(-1, correction=1).mean(0)
                    running_var.copy_(running_var * (1 - momentum) + unbiased * momentum)
    else:
        if running_mean is None or running_var is None:
            raise OpError("instance_norm: running_mean and running_var are required when use_input_stats=False")
        out = (input - running_mean.reshape(stat_shape)) * ops.rsqrt(running_var.reshape(stat_shape) + eps)
    return _affine(out, weight, bias, stat_shape)


def rms_norm(input, normalized_shape, weight=None, eps=None):
    """x / sqrt(mean(x²) + eps) over the last dims ``normalized_shape``, times ``weight``.

    ``eps=None`` takes the machine epsilon of the input's dtype, as PyTorch.

    Example:
        >>> F.rms_norm(webgrad.tensor([[3.0, 4.0]]), (2,))   # [[0.8485, 1.1314]]
    """
    normalized_shape = (normalized_shape,) if isinstance(normalized_shape, int) else tuple(normalized_shape)
    k = len(normalized_shape)
    if input.ndim < k or tuple(input.shape[input.ndim - k:]) != normalized_shape:
        raise OpError(f"rms_norm: normalized_shape {normalized_shape} must match the last dims of input "
                      f"{describe(input)}")
    if weight is not None and tuple(weight.shape) != normalized_shape:
        raise OpError(f"rms_norm: weight of shape {tuple(weight.shape)} must have normalized_shape "
                      f"{normalized_shape}")
    if eps is None:
        eps = finfo(input.dtype).eps
    dims = tuple(range(input.ndim - k, input.ndim))
    out = input * ops.rsqrt((input * input).mean(dims, keepdim=True) + eps) if k else input * 1.0
    return out if weight is None else out * weight


def local_response_norm(input, size, alpha=1e-4, beta=0.75, k=1.0):
    """x / (k + alpha * mean of x² over ``size`` neighbouring channels) ** beta, as PyTorch (zero-padded window).

    Example:
        >>> F.local_response_norm(webgrad.randn(2, 6, 4, 4), 3).shape
        webgrad.Size([2, 6, 4, 4])
    """
    if input.ndim < 3:
        raise OpError(f"local_response_norm: expected 3D or higher dimensional input, got {describe(input)}")
    if input.numel() == 0:
        return input * 1.0
    channels = input.shape[1]
    square = input * input
    lo, hi = size // 2, (size - 1) // 2
    widths = [0, 0] * (input.ndim - 2) + [lo, hi]
    padded = ops.pad(square, widths)
    total = ops.narrow(padded, 1, 0, channels)
    for i in range(1, size):
        total = total + ops.narrow(padded, 1, i, channels)
    div = (total * (alpha / size) + k) ** beta
    return input / div


def vector_norm(x, p, dim, keepdim=False):
    """The p-norm along ``dim`` for any p PyTorch takes (0 counts nonzeros, -inf is the smallest |x|)."""
    if p == 0:  # a count: constant, so its gradient is 0 (the where keeps x in the graph, as PyTorch)
        count = (x != 0).sum(dim, keepdim=keepdim).type(x.dtype)
        return ops.where(creation.tensor(True, device=x.device), count, x.sum(dim, keepdim=keepdim))
    if p == float("-inf"):
        return ops.amin(x.abs(), dim, keepdim)
    return ops.norm(x, p, dim, keepdim)


def normalize(input, p=2.0, dim=1, eps=1e-12, out=None):
    """x / max(||x||_p, eps) along ``dim``.

    Example:
        >>> F.normalize(webgrad.tensor([[3.0, 4.0]]))
        tensor([[0.6000, 0.8000]])
    """
    result = input / ops.clamp(vector_norm(input, p, dim, keepdim=True), min=eps)
    return result if out is None else out.copy_(result)


@autocast_op("cosine_similarity")
def cosine_similarity(x1, x2, dim=1, eps=1e-8):
    """x1 · x2 / (max(||x1||, eps) * max(||x2||, eps)) along ``dim`` (the inputs broadcast).

    Example:
        >>> F.cosine_similarity(webgrad.tensor([[1.0, 0.0]]), webgrad.tensor([[1.0, 1.0]]))   # 0.7071
    """
    x1, x2 = ops.promote("cosine_similarity", x1, x2)
    shape = _broadcast_shape("cosine_similarity", x1, x2)
    x1, x2 = x1.expand(*shape), x2.expand(*shape)
    n1 = ops.clamp(ops.norm(x1, 2, dim, keepdim=True), min=eps)
    n2 = ops.clamp(ops.norm(x2, 2, dim, keepdim=True), min=eps)
    return ((x1 / n1) * (x2 / n2)).sum(dim)


def _broadcast_shape(op_name, a, b):
    n = max(a.ndim, b.ndim)
    sa, sb = (1,) * (n - a.ndim) + tuple(a.shape), (1,) * (n - b.ndim) + tuple(b.shape)
    if any(x != y and 1 not in (x, y) for x, y in zip(sa, sb)):
        raise OpError(f"{op_name}: the shapes of {describe(a, b)} do not broadcast")
    return tuple(max(x, y) if 0 not in (x, y) else 0 for x, y in zip(sa, sb))


def pairwise_distance(x1, x2, p=2.0, eps=1e-6, keepdim=False):
    """||x1 - x2 + eps||_p along the last dim.

    Example:
        >>> F.pairwise_distance(webgrad.zeros(2, 3), webgrad.ones(2, 3))   # about [1.7321, 1.7321]
    """
    out_dims = max(x1.ndim, x2.ndim)
    diff = x1 - x2 + eps
    if out_dims == 0:
        return vector_norm(diff.reshape(1), p, 0, keepdim=False) if not keepdim else diff.abs()
    return vector_norm(diff, p, -1, keepdim)


def _pair_indices(n, device):
    rows, cols = [], []
    for i in range(n):
        rows.extend([i] * (n - 1 - i))
        cols.extend(range(i + 1, n))
    return (creation.tensor(rows, dtype=dtypes.int64, device=device),
            creation.tensor(cols, dtype=dtypes.int64, device=device))


@autocast_op("pdist")
def pdist(input, p=2):
    """The p-norm distance between every pair of rows i < j of a 2-D input, as a flat tensor.

    Example:
        >>> F.pdist(webgrad.tensor([[0.0, 0.0], [3.0, 4.0], [0.0, 1.0]]))
        tensor([5.0000, 1.0000, 4.2426])
    """
    if input.ndim != 2:
        raise OpError(f"pdist: only supports 2D tensors, got {describe(input)}")
    if p < 0:
        raise OpError(f"pdist: only supports non-negative p values, got {p}")
    n = input.shape[0]
    if n < 2:
        return creation.zeros(0, dtype=input.dtype, device=input.device) + input.sum() * 0.0
    rows, cols = _pair_indices(n, input.device)
    diff = ops.index_select(input, 0, rows) - ops.index_select(input, 0, cols)
    return vector_norm(diff, p, -1)


@autocast_op("cdist")
def cdist(x1, x2, p=2.0, compute_mode="use_mm_for_euclid_dist_if_necessary"):
    """The p-norm distance between each row of x1 (..., P, M) and each row of x2 (..., R, M): (..., P, R).

    ``compute_mode`` is accepted for PyTorch compatibility; the distances are always
    computed from the differences (the exact way PyTorch calls ``donot_use_mm``).

    Example:
        >>> webgrad.cdist(webgrad.zeros(1, 2), webgrad.tensor([[3.0, 4.0]]))
        tensor([[5.]])
    """
    if compute_mode not in ("use_mm_for_euclid_dist_if_necessary", "use_mm_for_euclid_dist",
                            "donot_use_mm_for_euclid_dist"):
        raise ValueError(f"cdist: {compute_mode!r} is not a valid value for compute_mode")
    if x1.ndim < 2 or x2.ndim < 2:
        raise OpError(f"cdist: only supports at least 2D tensors, got {describe(x1, x2)}")
    if x1.shape[-1] != x2.shape[-1]:
        raise OpError(f"cdist: x1 and x2 must have the same number of columns, got {describe(x1, x2)}")
    if p < 0:
        raise OpError(f"cdist: only supports non-negative p values, got {p}")
    diff = x1.unsqueeze(-2) - x2.unsqueeze(-3)
    if diff.shape[-1] == 0:
        return diff.sum(-1) * 0.0
    return vector_norm(diff, p, -1)
