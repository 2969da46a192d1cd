"""``webgrad.nn.functional``: layers as plain functions, like ``torch.nn.functional``.

Everything here is composed of Tensor ops, so it differentiates through autograd
and runs unchanged on every backend. Convolution and pooling live in
``functional_conv.py``, the losses in ``functional_loss.py``; both are
re-exported here, so ``import webgrad.nn.functional as F`` sees them all.

``inplace=True`` (relu, elu, dropout, ...) writes the result into the input and
returns it, as in PyTorch, through the same differentiable in-place update as
``x.relu_()`` (a leaf that requires grad is refused, as in PyTorch).

Example:
    >>> import webgrad.nn.functional as F
    >>> F.relu(webgrad.tensor([-1.0, 2.0]))
    tensor([0., 2.])
"""
from __future__ import annotations

import math

from .. import creation, dtypes, ops
from ..autograd import no_grad
from ..ops._helpers import describe
from ..ops.registry import OpError, composite, input_check
from ..tensor import Tensor
from .functional_activation import elu_core, hardtanh_core, in_place
from .functional_norm import normalize
from .functional_sparse import embedding_bag, pad_nonconstant
from ..ops.autocasting import autocast_op

__all__ = [
    "relu", "relu6", "gelu", "silu", "elu", "leaky_relu", "hardtanh", "softplus", "logsigmoid",
    "mish", "softmax", "log_softmax", "sigmoid", "tanh", "dropout", "linear", "batch_norm",
    "layer_norm", "normalize", "embedding", "scaled_dot_product_attention", "one_hot", "pad", "embedding_bag",
    "bilinear",
]


# -- activations -------------------------------------------------------------------
@composite("F.relu")
def relu(input, inplace=False):
    """max(x, 0) elementwise.

    Example:
        >>> F.relu(webgrad.tensor([-1.0, 2.0]))
        tensor([0., 2.])
    """
    return in_place("relu", input, inplace, ops.relu)


def relu6(input, inplace=False):
    """min(max(x, 0), 6) elementwise; the gradient is 0 at 0 and at 6, as in PyTorch."""
    return hardtanh(input, 0.0, 6.0, inplace)


def hardtanh(input, min_val=-1.0, max_val=1.0, inplace=False):
    """Clamp to [min_val, max_val]; the gradient is 1 strictly inside and 0 elsewhere (bounds included)."""
    return in_place("hardtanh", input, inplace, lambda x: hardtanh_core(x, min_val, max_val))


@composite("F.gelu")
def gelu(input, approximate="none"):
    """Gaussian error linear unit: x * Phi(x), exact (erf) or with the tanh approximation.

    Example:
        >>> F.gelu(webgrad.tensor([1.0]))          # 0.8413
        >>> F.gelu(webgrad.tensor([1.0]), approximate="tanh")
    """
    if approximate == "none":
        return input * 0.5 * (1.0 + ops.erf(input * (1.0 / math.sqrt(2.0))))
    if approximate == "tanh":
        inner = math.sqrt(2.0 / math.pi) * (input + 0.044715 * input * input * input)
        return input * 0.5 * (1.0 + ops.tanh(inner))
    raise ValueError(f"gelu: approximate must be 'none' or 'tanh', got {approximate!r}")


def silu(input, inplace=False):
    """x * sigmoid(x) (also called swish)."""
    return in_place("silu", input, inplace, lambda x: x * ops.sigmoid(x))


def mish(input, inplace=False):
    """x * tanh(softplus(x))."""
    return in_place("mish", input, inplace, lambda x: x * ops.tanh(softplus(x)))


def elu(input, alpha=1.0, inplace=False):
    """x for x > 0, alpha * (exp(x) - 1) otherwise (gradient alpha at 0, as in PyTorch)."""
    return in_place("elu", input, inplace, lambda x: elu_core(x, alpha))


def leaky_relu(input, negative_slope=0.01, inplace=False):
    """x for x > 0, negative_slope * x otherwise.

    Example:
        >>> F.leaky_relu(webgrad.tensor([-2.0, 3.0]), 0.1)
        tensor([-0.2000,  3.0000])
    """
    return in_place("leaky_relu", input, inplace, lambda x: ops.where(x > 0, x, x * negative_slope))


@autocast_op("softplus")
def softplus(input, beta=1.0, threshold=20.0):  # noqa: F811  (torch names it so; F.threshold is below)
    """log(1 + exp(beta * x)) / beta, linear where beta * x > threshold; never overflows.

    Example:
        >>> F.softplus(webgrad.tensor([0.0]))   # log(2)
        tensor([0.6931])
    """
    z = input * beta if beta != 1 else input
    # log1p(exp(-|z|)) + max(z, 0) is exact and cannot overflow; maximum's tie rule
    # gives the right slope (1/2) at z = 0 where relu's would give 0.
    soft = ops.log1p(ops.exp(-ops.abs(z))) + ops.maximum(z, 0.0)
    if beta != 1:
        soft = soft / beta
    return ops.where(z > threshold, input, soft)


def logsigmoid(input):
    """log(sigmoid(x)), computed stably as -softplus(-x)."""
    return -softplus(-input)


def sigmoid(input):
    """1 / (1 + exp(-x))."""
    return ops.sigmoid(input)


def tanh(input):
    """Hyperbolic tangent."""
    return ops.tanh(input)


def _softmax_dim(name, ndim):
    # PyTorch's legacy rule when no dim is given.
    return 0 if ndim in (0, 1, 3) else 1


@autocast_op("softmax")
def softmax(input, dim=None, dtype=None):
    """exp(x) / sum(exp(x)) along ``dim``.

    Example:
        >>> F.softmax(webgrad.tensor([[1.0, 1.0]]), dim=-1)
        tensor([[0.5000, 0.5000]])
    """
    return ops.softmax(input, _softmax_dim("softmax", input.ndim) if dim is None else dim, dtype)


@autocast_op("log_softmax")
def log_softmax(input, dim=None, dtype=None):
    """log(softmax(x)) along ``dim``, computed without overflow."""
    return ops.log_softmax(input, _softmax_dim("log_softmax", input.ndim) if dim is None else dim, dtype)


# -- dropout -------------------------------------------------------------------
@composite("F.dropout")
def dropout(input, p=0.5, training=True, inplace=False):
    """Zero each element with probability ``p`` and scale the rest by 1 / (1 - p) (only when training).

    The mask is drawn from the global stream, so ``webgrad.manual_seed`` reproduces it.

    Example:
        >>> webgrad.manual_seed(0); F.dropout(webgrad.ones(4), p=0.5)
    """
    if not 0.0 <= p <= 1.0:
        raise ValueError(f"dropout probability has to be between 0 and 1, but got {p}")
    if not training or p == 0.0:
        return input
    if p == 1.0:
        return in_place("dropout", input, inplace, lambda x: x * 0.0)
    # torch's formula, input * (mask / (1 - p)) in the input's dtype: a multiply also costs less
    # than a where on numpy, whose per-element branch mispredicts on a random mask.
    dtype = input.dtype if input.dtype.is_floating_point else dtypes.get_default_dtype()
    noise = creation.scaled_bernoulli(input.shape, 1.0 - p, 1.0 / (1.0 - p), dtype, input.device)
    return in_place("dropout", input, inplace, lambda x: x * noise)


# -- linear ----------------------------------------------------------------------
@composite("F.linear", flops=lambda shapes, out: 2 * math.prod(out) * shapes[1][-1])
def linear(input, weight, bias=None):
    """x @ weight.T + bias, with weight of shape (out_features, in_features).

    Example:
        >>> F.linear(webgrad.ones(2, 3), webgrad.ones(4, 3)).shape
        webgrad.Size([2, 4])
    """
    if weight.ndim not in (1, 2):
        raise OpError(f"linear: weight must be 1-D or 2-D, got {describe(weight)}")
    if input.ndim == 0 or input.shape[-1] != weight.shape[-1]:
        raise OpError(f"linear: input {describe(input)} does not match weight {describe(weight)}: "
                      f"the input's last dimension must be in_features = {weight.shape[-1]}")
    fused = ops.linear(input, weight, bias)
    if fused is not None:
        return fused
    out = ops.matmul(input, weight.mT if weight.ndim == 2 else weight)
    return out if bias is None else out + bias


@autocast_op("bilinear")
def bilinear(input1, input2, weight, bias=None):
    """y_k = x1 · weight[k] · x2 + bias_k over the last dims, weight of shape (out, in1, in2).

    Example:
        >>> F.bilinear(webgrad.ones(2, 3), webgrad.ones(2, 4), webgrad.ones(5, 3, 4)).shape
        webgrad.Size([2, 5])
    """
    if weight.ndim != 3 or input1.shape[-1:] != weight.shape[1:2] or input2.shape[-1:] != weight.shape[2:3] \
            or tuple(input1.shape[:-1]) != tuple(input2.shape[:-1]):
        raise OpError(f"bilinear: inputs {describe(input1, input2)} do not fit weight {describe(weight)} "
                      f"(expected (..., in1), (..., in2) and (out, in1, in2))")
    out_features, in1, in2 = weight.shape
    batch = tuple(input1.shape[:-1])
    rows = math.prod(batch)
    pairs = input1.reshape(rows, in1, 1) * input2.reshape(rows, 1, in2)   # every x1_i x2_j
    out = ops.matmul(pairs.reshape(rows, in1 * in2), weight.reshape(out_features, in1 * in2).mT)
    out = out.reshape(batch + (out_features,))
    return out if bias is None else out + bias


# -- normalization -------------------------------------------------------------
@composite("F.batch_norm")
def batch_norm(input, running_mean, running_var, weight=None, bias=None, training=False,
               momentum=0.1, eps=1e-5):
    """Normalize over every dim but the channel dim 1, with batch or running statistics.

    When ``training``, batch statistics are used and ``running_mean``/``running_var``
    (if given) are updated in place: new = (1 - momentum) * old + momentum * batch,
    with the unbiased batch variance for ``running_var``, exactly as PyTorch.

    Example:
        >>> x = webgrad.randn(8, 3)
        >>> F.batch_norm(x, None, None, training=True).mean(0)   # about 0
    """
    if input.numel() == 0 and input.ndim < 2:
        return input * 1.0  # PyTorch: an empty input gives an empty result whatever its rank
    if input.ndim < 2:
        raise OpError(f"batch_norm: expected input of at least 2 dims (N, C, ...), got {describe(input)}")
    channels = input.shape[1]
    for name, t in (("running_mean", running_mean), ("running_var", running_var), ("weight", weight),
                    ("bias", bias)):
        if t is not None and tuple(t.shape) != (channels,):
            raise OpError(f"batch_norm: {name} of shape {tuple(t.shape)} does not match the "
                          f"{channels} channels of input {describe(input)}")
    stat_shape = (1, channels) + (1,) * (input.ndim - 2)
    if input.numel() == 0:  # PyTorch: an empty batch gives an empty result and leaves the running stats
        return input * 1.0
    if training:
        count = input.numel() // channels
        if count <= 1:
            raise ValueError(f"batch_norm: expected more than 1 value per channel when training, "
                             f"got input of shape {tuple(input.shape)}")
        with no_grad():  # the statistics of batch_norm, which differentiates through them itself
            stats = ops.batch_norm_stats(input)
            if running_mean is not None:
                running_mean.copy_(running_mean * (1 - momentum) + stats[0].to(running_mean.dtype) * momentum)
            if running_var is not None:
                unbiased = stats[1].to(running_var.dtype) * (count / (count - 1))
                running_var.copy_(running_var * (1 - momentum) + unbiased * momentum)
        like = {"dtype": input.dtype, "device": input.device}
        weight = creation.ones(channels, **like) if weight is None else weight
        bias = creation.zeros(channels, **like) if bias is None else bias
        return ops.batch_norm(input, stats, weight, bias, eps=eps)
    if running_mean is None or running_var is None:
        raise OpError("batch_norm: running_mean and running_var are required when training=False")
    mean, var = running_mean.reshape(stat_shape), running_var.reshape(stat_shape)
    out = (input - mean) * ops.rsqrt(var + eps)
    if weight is not None:
        out = out * weight.reshape(stat_shape)
    if bias is not None:
        out = out + bias.reshape(stat_shape)
    return out


@composite("F.layer_norm")
def layer_norm(input, normalized_shape, weight=None, bias=None, eps=1e-5):
    """Normalize over the last ``len(normalized_shape)`` dims (biased variance), then scale and shift.

    Example:
        >>> F.layer_norm(webgrad.randn(2, 5), (5,)).mean(-1)   # about 0
    """
    normalized_shape = (normalized_shape,) if isinstance(normalized_shape, int) else tuple(normalized_shape)
    k = len(normalized_shape)
    if k == 0 or tuple(input.shape[input.ndim - k:]) != normalized_shape or input.ndim < k:
        raise OpError(f"layer_norm: normalized_shape {normalized_shape} must match the last dims of "
                      f"input {describe(input)}")
    for name, t in (("weight", weight), ("bias", bias)):
        if t is not None and tuple(t.shape) != normalized_shape:
            raise OpError(f"layer_norm: {name} of shape {tuple(t.shape)} must have normalized_shape "
                          f"{normalized_shape}")
    if weight is not None and bias is None:  # LayerNorm(bias=False): a zero bias, so one kernel still
        bias = creation.zeros(normalized_shape, dtype=weight.dtype, device=weight.device)
    if (weight is not None and weight.dtype is bias.dtype is input.dtype
            and weight.device == bias.device == input.device):
        return ops.layer_norm(input, weight, bias, ndims=k, eps=eps)  # one kernel; backward keeps input only
    out = ops.layer_norm_core(input, ndims=k, eps=eps)  # one fused kernel; the affine part below
    if weight is not None:
        out = out * weight
    if bias is not None:
        out = out + bias
    return out


# -- embedding -------------------------------------------------------------------
@input_check
def _check_embedding_indices(indices, count):
    """On the cpu (webgrad.compile runs this again before every replay: an input check)."""
    values = indices._host()
    bad = values[(values < 0) | (values >= count)]
    if bad.size:
        raise IndexError(f"embedding: index {int(bad[0])} is out of range for {count} "
                         f"embeddings (expected 0 <= index < {count})")


def embedding(input, weight, padding_idx=None, max_norm=None, norm_type=2.0, scale_grad_by_freq=False,
              sparse=False):
    """Rows of ``weight`` picked by the integer tensor ``input``; ``padding_idx``'s row gets no gradient.

    Example:
        >>> F.embedding(webgrad.tensor([[0, 2]]), webgrad.randn(3, 4)).shape
        webgrad.Size([1, 2, 4])
    """
    if max_norm is not None or scale_grad_by_freq or sparse:
        raise NotImplementedError("embedding: max_norm, scale_grad_by_freq and sparse are not supported")
    if not isinstance(input, Tensor) or input.dtype.name not in ("int64", "int32"):
        got = describe(input) if isinstance(input, Tensor) else type(input).__name__
        raise OpError(f"embedding: indices must be an int64 or int32 tensor, got {got}")
    if weight.ndim != 2:
        raise OpError(f"embedding: weight must be 2-D (num_embeddings, embedding_dim), got {describe(weight)}")
    if input.device == "cpu" and input.numel():  # free on the host; a device flags it in take
        _check_embedding_indices(input, weight.shape[0])
    out = ops.take(weight, input)
    if padding_idx is not None:
        if padding_idx < 0:
            padding_idx += weight.shape[0]
        # Route the padding rows' gradient to a detached copy: same values, no gradient.
        is_pad = (input == padding_idx).unsqueeze(-1)
        out = ops.where(is_pad, out.detach(), out)
    return out


def one_hot(tensor, num_classes=-1):
    """int64 tensor with a trailing dim of ``num_classes``: 1 at each index, 0 elsewhere.

    Example:
        >>> F.one_hot(webgrad.tensor([0, 2]), 3)
        tensor([[1, 0, 0],
                [0, 0, 1]])
    """
    if tensor.dtype.name not in ("int64", "int32"):
        raise OpError(f"one_hot: expected an int64 tensor of class indices, got {describe(tensor)}")
    if num_classes == -1:
        num_classes = int(tensor.max().item()) + 1 if tensor.numel() else 0
    if tensor.device == "cpu" and tensor.numel():  # checked where it is free; a GPU flags it in scatter_add
        values = tensor._host()
        bad = values[(values < 0) | (values >= num_classes)]
        if bad.size:
            raise IndexError(f"one_hot: class value {int(bad[0])} is out of range for {num_classes} classes "
                             f"(expected 0 <= value < {num_classes})")
    # A scatter, not a compare with arange: an out-of-range value must raise, not give a row of zeros.
    index = tensor.long().unsqueeze(-1)
    out = creation.zeros(tuple(tensor.shape) + (num_classes,), dtype=index.dtype, device=tensor.device)
    return out.scatter_add(-1, index, creation.ones(index.shape, dtype=index.dtype, device=tensor.device))


def pad(input, pad, mode="constant", value=0.0):
    """Pad the last dims by ``pad=(left, right, top, bottom, ...)``; negative values crop.

    ``mode`` is 'constant' (with ``value``), or 'reflect', 'replicate' or 'circular'
    for the last 1 to 3 dims of a batched or unbatched input, as PyTorch.

    Example:
        >>> F.pad(webgrad.tensor([[[0.0, 1.0, 2.0]]]), (2, 1), mode="reflect")
        tensor([[[2., 1., 0., 1., 2., 1.]]])
    """
    if mode != "constant":
        if value is not None and value != 0:
            raise ValueError(f"Padding mode \"{mode}\" doesn't take in value argument.")
        return pad_nonconstant(input, pad, mode)
    return ops.pad(input, pad, mode, value if value is not None else 0.0)


# -- attention -------------------------------------------------------------------
def _attention_flops(shapes, out) -> int:
    """Q Kᵀ and the weights times V: batch * L * S scores, each E and Ev long."""
    (*_, e), (*_, s, _), (*_, ev) = shapes[:3]
    scores = math.prod(out) // ev * s
    return 2 * scores * e + 2 * scores * ev


@composite("F.scaled_dot_product_attention", flops=_attention_flops)
def scaled_dot_product_attention(query, key, value, attn_mask=None, dropout_p=0.0, is_causal=False,
                                 scale=None, enable_gqa=False):
    """softmax(Q Kᵀ * scale + mask) V over the last two dims, as ``torch.nn.functional``'s.

    A bool ``attn_mask`` marks with True the positions that may be attended to; a
    float mask is added to the scores. ``is_causal`` masks out future keys.

    Shape: query (..., L, E), key (..., S, E), value (..., S, Ev) -> (..., L, Ev).

    Example:
        >>> q = k = v = webgrad.randn(2, 4, 8)
        >>> F.scaled_dot_product_attention(q, k, v, is_causal=True).shape
        webgrad.Size([2, 4, 8])
    """
    if query.ndim < 2 or key.ndim < 2 or value.ndim < 2:
        raise OpError(f"scaled_dot_product_attention: query, key and value need at least 2 dims, "
                      f"got {describe(query, key, value)}")
    if query.shape[-1] != key.shape[-1] or key.shape[-2] != value.shape[-2]:
        raise OpError(f"scaled_dot_product_attention: query (..., L, E), key (..., S, E) and value "
                      f"(..., S, Ev) do not fit: {describe(query, key, value)}")
    length, source = query.shape[-2], key.shape[-2]
    if enable_gqa and query.ndim >= 3 and key.shape[-3] != query.shape[-3]:
        repeats = query.shape[-3] // key.shape[-3]
        key = key.unsqueeze(-3).expand(*key.shape[:-2], repeats, *key.shape[-2:]).flatten(-4, -3)
        value = value.unsqueeze(-3).expand(*value.shape[:-2], repeats, *value.shape[-2:]).flatten(-4, -3)
    scale = 1.0 / math.sqrt(query.shape[-1]) if scale is None else scale
    scores = ops.matmul(query, key.mT) * scale
    if is_causal:
        if attn_mask is not None:
            raise OpError("scaled_dot_product_attention: pass either attn_mask or is_causal=True, not both")
        attn_mask = _causal_mask(length, source, query.device)
    if attn_mask is not None:
        if attn_mask.dtype is dtypes.bool_:
            scores = ops.masked_fill(scores, ops.logical_not(attn_mask), float("-inf"))
        else:
            scores = scores + attn_mask
    weights = ops.softmax(scores, -1)
    if dropout_p > 0.0:
        weights = dropout(weights, dropout_p, training=True)
    return ops.matmul(weights, value)


def _causal_mask(length, source, device=None):
    """A (length, source) bool mask, True on and below the diagonal (where attending is allowed)."""
    rows = creation.arange(length, device=device).unsqueeze(-1)
    cols = creation.arange(source, device=device)
    return cols <= rows


from .functional_conv import (  # noqa: E402,F401
    adaptive_avg_pool2d, avg_pool2d, conv1d, conv2d, max_pool2d,
    conv3d,
)
from .functional_conv_transpose import conv_transpose1d, conv_transpose2d, conv_transpose3d  # noqa: E402,F401
__all__ += ["conv3d", "conv_transpose1d", "conv_transpose2d", "conv_transpose3d"]
from .functional_pool import (  # noqa: E402,F401
    adaptive_avg_pool1d, adaptive_avg_pool3d, adaptive_max_pool1d, adaptive_max_pool2d, adaptive_max_pool3d,
    avg_pool1d, avg_pool3d, lp_pool1d, lp_pool2d, lp_pool3d, max_pool1d, max_pool3d, max_unpool1d, max_unpool2d,
    max_unpool3d,
)
from . import functional_pool as _functional_pool  # noqa: E402
__all__ += _functional_pool.__all__
from .functional_spatial import (  # noqa: E402,F401
    affine_grid, channel_shuffle, fold, grid_sample, interpolate, native_channel_shuffle, pixel_shuffle,
    pixel_unshuffle, unfold, upsample, upsample_bilinear, upsample_nearest,
)
from . import functional_spatial as _functional_spatial  # noqa: E402
__all__ += _functional_spatial.__all__
from .functional_loss import (  # noqa: E402,F401
    binary_cross_entropy, binary_cross_entropy_with_logits, cross_entropy, l1_loss, mse_loss,
    nll_loss, smooth_l1_loss, huber_loss,
)

__all__ += ["adaptive_avg_pool2d", "avg_pool2d", "conv1d", "conv2d", "max_pool2d", "binary_cross_entropy",
            "binary_cross_entropy_with_logits", "cross_entropy", "l1_loss", "mse_loss", "nll_loss",
            "smooth_l1_loss", "huber_loss"]

from .functional_activation import (  # noqa: E402,F401,F811
    celu, celu_, elu_, glu, hardshrink, hardsigmoid, hardswish, hardtanh_, leaky_relu_, prelu, relu_, rrelu,
    rrelu_, selu, selu_, softmin, softshrink, softsign, tanhshrink, threshold, threshold_,
)
from . import functional_activation as _activation  # noqa: E402

__all__ += _activation.__all__
from .functional_norm import (  # noqa: E402,F401
    cdist, cosine_similarity, group_norm, instance_norm, local_response_norm, pairwise_distance, pdist, rms_norm,
)
from . import functional_norm as _norm  # noqa: E402

__all__ += [n for n in _norm.__all__ if n not in ("normalize", "cdist")]
from .functional_loss_extra import (  # noqa: E402,F401
    cosine_embedding_loss, ctc_loss, gaussian_nll_loss, hinge_embedding_loss, kl_div, margin_ranking_loss,
    multi_margin_loss, multilabel_margin_loss, multilabel_soft_margin_loss, poisson_nll_loss, soft_margin_loss,
    triplet_margin_loss, triplet_margin_with_distance_loss,
)
from . import functional_loss_extra as _loss_extra  # noqa: E402

__all__ += _loss_extra.__all__
from .functional_dropout import (  # noqa: E402,F401
    alpha_dropout, dropout1d, dropout2d, dropout3d, feature_alpha_dropout,
)
from . import functional_dropout as _dropout  # noqa: E402

__all__ += _dropout.__all__
