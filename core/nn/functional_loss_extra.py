"""Margin, embedding, distribution and sequence losses (re-exported by ``nn.functional``).

Like ``functional_loss.py``: composed of Tensor ops, ``reduction='mean' | 'sum' |
'none'`` (plus the legacy ``size_average``/``reduce`` flags), PyTorch's formulas
and its gradients at the kinks (``clamp_min(z, 0)`` passes the gradient at z = 0,
the multi-margin losses' ``z > 0`` test does not).

``ctc_loss`` runs the standard forward (alpha) recursion in log space, one step of
Tensor ops per time step; autograd differentiates it. PyTorch's gradient with respect
to ``log_probs`` is not the plain derivative: it adds ``exp(log_probs)`` (it assumes
the input came from ``log_softmax``, through which that term cancels). ctc_loss adds
the same term with a value-neutral ``mass - mass.detach()``, so the gradients agree
with PyTorch's both for ``log_probs`` and for the logits before a ``log_softmax``.
"""
from __future__ import annotations

import math
import warnings

from .. import creation, dtypes, ops
from ..ops._helpers import describe
from ..ops.registry import OpError
from ..tensor import Tensor
from .functional_loss import _reduce, _reduction
from .functional_norm import pairwise_distance
from ..ops.autocasting import autocast_op

__all__ = ["kl_div", "margin_ranking_loss", "hinge_embedding_loss", "soft_margin_loss",
           "multilabel_soft_margin_loss", "multi_margin_loss", "multilabel_margin_loss", "triplet_margin_loss",
           "triplet_margin_with_distance_loss", "cosine_embedding_loss", "poisson_nll_loss", "gaussian_nll_loss",
           "ctc_loss"]


def _softplus(x):
    """log(1 + exp(x)) without overflow."""
    return ops.log1p(ops.exp(-ops.abs(x))) + ops.maximum(x, 0.0)


def _xlogx(t):
    """t * log(t), 0 at t = 0 (PyTorch's xlogy(t, t))."""
    zero = t == 0
    return ops.where(zero, 0.0, t * ops.log(ops.where(zero, 1.0, t)))


@autocast_op("kl_div")
def kl_div(input, target, size_average=None, reduce=None, reduction="mean", log_target=False):
    """KL divergence of ``target`` from ``input`` (log-probabilities): target * (log target - input).

    ``reduction='batchmean'`` divides the sum by the batch size (the mathematical KL);
    ``'mean'`` divides by the element count and warns, as PyTorch.

    Example:
        >>> F.kl_div(webgrad.tensor([[-1.0, -0.5]]), webgrad.tensor([[0.3, 0.7]]), reduction="batchmean")
    """
    if reduction == "batchmean" and size_average is None and reduce is None:
        mode = "batchmean"
    else:
        mode = _reduction("kl_div", reduction, size_average, reduce)
    if log_target:
        loss = ops.exp(target) * (target - input)
    else:
        loss = _xlogx(target) - target * input
    if mode == "mean":
        warnings.warn("reduction: 'mean' divides the total loss by both the batch size and the support size."
                      "'batchmean' divides only by the batch size, and aligns with the KL div math definition."
                      "'mean' will be changed to behave the same as 'batchmean' in the next major release.",
                      stacklevel=2)
    if mode == "batchmean":
        return loss.sum() / input.shape[0] if input.ndim else loss.sum()
    return _reduce(loss, mode)


@autocast_op("margin_ranking_loss")
def margin_ranking_loss(input1, input2, target, margin=0.0, size_average=None, reduce=None, reduction="mean"):
    """max(0, -y * (x1 - x2) + margin) with y = 1 or -1.

    Example:
        >>> F.margin_ranking_loss(webgrad.tensor([1.0]), webgrad.tensor([2.0]), webgrad.tensor([1.0]))
        tensor(1.)
    """
    reduction = _reduction("margin_ranking_loss", reduction, size_average, reduce)
    if input1.ndim != input2.ndim or input1.ndim != target.ndim:
        raise OpError(f"margin_ranking_loss: all input tensors should have the same number of dimensions, got "
                      f"{describe(input1, input2, target)}")
    return _reduce(ops.clamp(-target * (input1 - input2) + margin, min=0.0), reduction)


@autocast_op("hinge_embedding_loss")
def hinge_embedding_loss(input, target, margin=1.0, size_average=None, reduce=None, reduction="mean"):
    """x where y = 1, max(0, margin - x) where y = -1.

    Example:
        >>> F.hinge_embedding_loss(webgrad.tensor([0.3, 2.0]), webgrad.tensor([-1.0, 1.0]), reduction="none")
        tensor([0.7000, 2.0000])
    """
    reduction = _reduction("hinge_embedding_loss", reduction, size_average, reduce)
    margin_part = ops.where(target != 1, ops.clamp(margin - input, min=0.0), 0.0)
    self_part = ops.where(target != -1, input, 0.0)
    return _reduce(margin_part + self_part, reduction)


@autocast_op("soft_margin_loss")
def soft_margin_loss(input, target, size_average=None, reduce=None, reduction="mean"):
    """log(1 + exp(-y * x)), computed without overflow."""
    reduction = _reduction("soft_margin_loss", reduction, size_average, reduce)
    return _reduce(_softplus(-input * target), reduction)


def multilabel_soft_margin_loss(input, target, weight=None, size_average=None, reduce=None, reduction="mean"):
    """Per sample, the mean over classes of -(y log sigmoid(x) + (1 - y) log sigmoid(-x)), weighted per class.

    Example:
        >>> F.multilabel_soft_margin_loss(webgrad.randn(2, 3), webgrad.tensor([[1.0, 0.0, 1.0], [0.0, 0.0, 1.0]]))
    """
    reduction = _reduction("multilabel_soft_margin_loss", reduction, size_average, reduce)
    loss = target * _softplus(-input) + (1.0 - target) * _softplus(input)
    if weight is not None:
        loss = loss * weight
    class_dim = input.ndim - 1
    loss = loss.sum(class_dim) / input.shape[class_dim]
    return _reduce(loss, reduction)


def _class_index_targets(op_name, input, target):
    if not isinstance(target, Tensor) or target.dtype.name not in ("int64", "int32"):
        raise OpError(f"{op_name}: target must be an int64 tensor, got "
                      f"{describe(target) if isinstance(target, Tensor) else type(target).__name__}")


@autocast_op("multi_margin_loss")
def multi_margin_loss(input, target, p=1, margin=1.0, weight=None, size_average=None, reduce=None,
                      reduction="mean"):
    """Per sample, sum over i != y of max(0, margin - x[y] + x[i]) ** p, divided by the class count.

    Example:
        >>> F.multi_margin_loss(webgrad.tensor([[0.1, 0.2, 0.4, 0.8]]), webgrad.tensor([3]))   # 0.3250
    """
    reduction = _reduction("multi_margin_loss", reduction, size_average, reduce)
    if p not in (1, 2):
        raise ValueError(f"multi_margin_loss: only p == 1 and p == 2 supported, got {p}")
    _class_index_targets("multi_margin_loss", input, target)
    unbatched = input.ndim <= 1
    x = input.reshape(1, -1) if unbatched else input
    y = target.reshape(-1)
    if x.ndim != 2 or y.shape[0] != x.shape[0]:
        raise OpError(f"multi_margin_loss: expected input (N, C) and target (N,), got {describe(input, target)}")
    classes = x.shape[1]
    picked = x.gather(1, y.unsqueeze(1))
    z = margin - picked + x
    hinge = ops.where(z > 0, z, 0.0)  # PyTorch's backward tests z > 0
    if p == 2:
        hinge = hinge * hinge
    if weight is not None:
        hinge = hinge * ops.take(weight, y).unsqueeze(1)
    is_target = creation.arange(classes, device=x.device) == y.unsqueeze(1)
    loss = ops.where(is_target, 0.0, hinge).sum(1) / classes
    if unbatched and reduction == "none":
        loss = loss.reshape(())
    return _reduce(loss, reduction)


@autocast_op("multilabel_margin_loss")
def multilabel_margin_loss(input, target, size_average=None, reduce=None, reduction="mean"):
    """Per sample, sum over target classes j and non-target classes i of max(0, 1 - (x[j] - x[i])), over C.

    ``target`` holds class indices per sample, ended by the first -1.

    Example:
        >>> F.multilabel_margin_loss(webgrad.tensor([[0.1, 0.2, 0.4, 0.8]]), webgrad.tensor([[3, 0, -1, 1]]))
        tensor(0.8500)
    """
    reduction = _reduction("multilabel_margin_loss", reduction, size_average, reduce)
    _class_index_targets("multilabel_margin_loss", input, target)
    if tuple(input.shape) != tuple(target.shape) or input.ndim > 2:
        raise OpError(f"multilabel_margin_loss: inconsistent target size {tuple(target.shape)} for input of "
                      f"size {tuple(input.shape)}")
    unbatched = input.ndim <= 1
    x = input.reshape(1, -1) if unbatched else input
    y = target.reshape(x.shape).long()
    classes = x.shape[1]
    valid = ops.cumprod((y >= 0).long(), 1) > 0            # entries before the first -1
    safe = ops.where(valid, y, 0)
    classes_range = creation.arange(classes, device=x.device)
    is_target = ((safe.unsqueeze(-1) == classes_range) & valid.unsqueeze(-1)).any(1)    # (N, C)
    picked = x.gather(1, safe)                                                        # x[j] per entry
    z = 1.0 - picked.unsqueeze(2) + x.unsqueeze(1)                                     # (N, j, i)
    counted = valid.unsqueeze(2) & ops.logical_not(is_target).unsqueeze(1) & (z > 0)
    loss = ops.where(counted, z, 0.0).sum((1, 2)) / classes
    if unbatched and reduction == "none":
        loss = loss.reshape(())
    return _reduce(loss, reduction)


def _triplet(dist_pos, dist_neg, dist_swap, margin, swap, reduction):
    if swap:
        dist_neg = ops.minimum(dist_neg, dist_swap)
    return _reduce(ops.clamp(margin + dist_pos - dist_neg, min=0.0), reduction)


@autocast_op("triplet_margin_loss")
def triplet_margin_loss(anchor, positive, negative, margin=1.0, p=2, eps=1e-6, swap=False, size_average=None,
                        reduce=None, reduction="mean"):
    """max(d(a, p) - d(a, n) + margin, 0) with the p-norm pairwise distance d.

    Example:
        >>> a, pos, neg = webgrad.randn(4, 8), webgrad.randn(4, 8), webgrad.randn(4, 8)
        >>> F.triplet_margin_loss(a, pos, neg)
    """
    reduction = _reduction("triplet_margin_loss", reduction, size_average, reduce)
    if not anchor.ndim == positive.ndim == negative.ndim:
        raise OpError(f"triplet_margin_loss: the anchor, positive and negative tensors must have the same number "
                      f"of dimensions, got {describe(anchor, positive, negative)}")
    if margin <= 0:
        raise ValueError(f"triplet_margin_loss: margin must be greater than 0, got {margin}")
    d_pos = pairwise_distance(anchor, positive, p, eps)
    d_neg = pairwise_distance(anchor, negative, p, eps)
    d_swap = pairwise_distance(positive, negative, p, eps) if swap else None
    return _triplet(d_pos, d_neg, d_swap, margin, swap, reduction)


def triplet_margin_with_distance_loss(anchor, positive, negative, *, distance_function=None, margin=1.0,
                                      swap=False, reduction="mean"):
    """triplet_margin_loss with any ``distance_function(x1, x2)`` (pairwise_distance by default)."""
    reduction = _reduction("triplet_margin_with_distance_loss", reduction)
    if margin <= 0:
        raise ValueError(f"triplet_margin_with_distance_loss: margin must be greater than 0, got {margin}")
    distance = pairwise_distance if distance_function is None else distance_function
    d_pos, d_neg = distance(anchor, positive), distance(anchor, negative)
    d_swap = distance(positive, negative) if swap else None
    return _triplet(d_pos, d_neg, d_swap, margin, swap, reduction)


@autocast_op("cosine_embedding_loss")
def cosine_embedding_loss(input1, input2, target, margin=0.0, size_average=None, reduce=None, reduction="mean"):
    """1 - cos(x1, x2) where y = 1, max(0, cos(x1, x2) - margin) where y = -1.

    Example:
        >>> F.cosine_embedding_loss(webgrad.randn(3, 5), webgrad.randn(3, 5), webgrad.tensor([1, -1, 1]))
    """
    reduction = _reduction("cosine_embedding_loss", reduction, size_average, reduce)
    if input1.ndim not in (1, 2) or tuple(input1.shape) != tuple(input2.shape):
        raise OpError(f"cosine_embedding_loss: expected two 1-D or 2-D inputs of one shape, got "
                      f"{describe(input1, input2)}")
    dim = input1.ndim - 1
    eps = 1e-12  # PyTorch's, added to each squared magnitude
    prod = (input1 * input2).sum(dim)
    mag1 = (input1 * input1).sum(dim) + eps
    mag2 = (input2 * input2).sum(dim) + eps
    cos = prod / ops.sqrt(mag1 * mag2)
    loss = ops.where(target == 1, 1.0 - cos, 0.0) + ops.where(target == -1, ops.clamp(cos - margin, min=0.0), 0.0)
    return _reduce(loss, reduction)


@autocast_op("poisson_nll_loss")
def poisson_nll_loss(input, target, log_input=True, full=False, size_average=None, eps=1e-8, reduce=None,
                     reduction="mean"):
    """exp(x) - y * x (``log_input``) or x - y * log(x + eps), plus Stirling's term for y > 1 when ``full``.

    Example:
        >>> F.poisson_nll_loss(webgrad.tensor([0.5, 1.0]), webgrad.tensor([1.0, 2.0]))
    """
    reduction = _reduction("poisson_nll_loss", reduction, size_average, reduce)
    if log_input:
        loss = ops.exp(input) - target * input
    else:
        loss = input - target * ops.log(input + eps)
    if full:
        big = target > 1
        safe = ops.where(big, target, 2.0)
        stirling = safe * ops.log(safe) - safe + 0.5 * ops.log(2.0 * math.pi * safe)
        loss = loss + ops.where(big, stirling, 0.0)
    return _reduce(loss, reduction)


def gaussian_nll_loss(input, target, var, full=False, eps=1e-6, reduction="mean"):
    """0.5 * (log(var) + (x - y)² / var) (+ 0.5 log(2π) when ``full``), var clamped at ``eps``.

    ``var`` is a tensor of the input's shape, of its shape less the last dim (one
    variance per sample), of that with a trailing 1, or a float. As PyTorch, the
    clamp does not reach the gradient.

    Example:
        >>> F.gaussian_nll_loss(webgrad.randn(4, 2), webgrad.randn(4, 2), webgrad.ones(4, 2))
    """
    reduction = _reduction("gaussian_nll_loss", reduction)
    if not isinstance(var, Tensor):
        if var < 0:
            raise ValueError("gaussian_nll_loss: var has negative entry/entries")
        var = creation.full(tuple(input.shape), float(var), dtype=input.dtype, device=input.device)
    if tuple(var.shape) != tuple(input.shape):
        if tuple(input.shape[:-1]) == tuple(var.shape):
            var = var.unsqueeze(-1)
        elif not (tuple(input.shape[:-1]) == tuple(var.shape[:-1]) and var.shape[-1] == 1):
            raise ValueError(f"gaussian_nll_loss: var of shape {tuple(var.shape)} does not fit input of shape "
                             f"{tuple(input.shape)}")
    if var.device == "cpu" and var.numel() and bool((var.detach() < 0).any().item()):
        raise ValueError("gaussian_nll_loss: var has negative entry/entries")
    var = var + (ops.clamp(var.detach(), min=eps) - var.detach())
    diff = input - target
    loss = 0.5 * (ops.log(var) + diff * diff / var)
    if full:
        loss = loss + 0.5 * math.log(2 * math.pi)
    return _reduce(loss, reduction)


# -- CTC ---------------------------------------------------------------------------
_NEG = -1e30  # "log 0" that stays finite: exp of it is 0, and an all-unreachable logsumexp stays NaN-free


def _int_list(name, values, count):
    if isinstance(values, Tensor):
        values = values.detach().cpu().tolist()
    values = [int(v) for v in (values if isinstance(values, (list, tuple)) else [values])]
    if len(values) != count:
        raise OpError(f"ctc_loss: {name} must have {count} entries (one per batch element), got {len(values)}")
    return values


@autocast_op("ctc_loss")
def ctc_loss(log_probs, targets, input_lengths, target_lengths, blank=0, reduction="mean", zero_infinity=False):
    """Connectionist temporal classification loss of log-probabilities (T, N, C) or (T, C).

    ``targets`` are padded (N, S) or concatenated (sum(target_lengths),) class indices;
    the lengths are tensors or lists. ``'mean'`` divides each sample's loss by its
    target length, then averages over the batch, as PyTorch.

    Example:
        >>> lp = webgrad.randn(10, 2, 5).log_softmax(2)
        >>> F.ctc_loss(lp, webgrad.tensor([[1, 2], [3, 3]]), [10, 8], [2, 2])
    """
    reduction = _reduction("ctc_loss", reduction)
    unbatched = log_probs.ndim == 2
    if unbatched:
        log_probs, targets = log_probs.unsqueeze(1), targets.reshape(1, -1)
    if log_probs.ndim != 3:
        raise OpError(f"ctc_loss: log_probs must be (T, N, C) or (T, C), got {describe(log_probs)}")
    steps, batch, classes = log_probs.shape
    in_lens = _int_list("input_lengths", input_lengths, batch)
    tg_lens = _int_list("target_lengths", target_lengths, batch)
    flat = [int(v) for v in targets.detach().cpu().reshape(-1).tolist()]
    if targets.ndim == 1:
        starts = [sum(tg_lens[:i]) for i in range(batch)]
        rows = [flat[s:s + n] for s, n in zip(starts, tg_lens)]
    else:
        width = targets.shape[-1]
        rows = [flat[i * width:i * width + n] for i, n in enumerate(tg_lens)]
    if any(n > steps or n < 0 for n in in_lens):
        raise OpError(f"ctc_loss: input_lengths {in_lens} must lie in [0, {steps}]")
    for row in rows:
        if any(c == blank or not 0 <= c < classes for c in row):
            raise OpError(f"ctc_loss: targets must be class indices in [0, {classes}) other than blank={blank}")
    length = 2 * max(tg_lens + [0]) + 1
    ext = [[blank] * length for _ in range(batch)]
    skip = [[False] * length for _ in range(batch)]
    for n, row in enumerate(rows):
        for i, c in enumerate(row):
            ext[n][2 * i + 1] = c
            skip[n][2 * i + 1] = i > 0 and row[i - 1] != c
    device = log_probs.device
    ext_t = creation.tensor(ext, dtype=dtypes.int64, device=device)
    skip_t = creation.tensor(skip, dtype=dtypes.bool_, device=device)
    emit = log_probs.gather(2, ext_t.unsqueeze(0).expand(steps, batch, length))      # (T, N, L)
    position = creation.arange(length, device=device)
    neg = creation.full((batch, 1), _NEG, dtype=log_probs.dtype, device=device)
    alpha = ops.where(position < 2, emit[0], _NEG) if steps else creation.full(
        (batch, length), _NEG, dtype=log_probs.dtype, device=device)
    for t in range(1, steps):
        shift1 = ops.cat([neg, alpha[:, :-1]], 1)
        shift2 = ops.where(skip_t, ops.cat([neg, neg, alpha[:, :-2]], 1), _NEG) if length > 2 else None
        parts = [alpha, shift1] + ([shift2] if shift2 is not None else [])
        step = ops.logsumexp(ops.stack(parts, -1), -1) + emit[t]
        running = creation.tensor([[t < n] for n in in_lens], dtype=dtypes.bool_, device=device)
        alpha = ops.where(running, step, alpha)
    last = creation.tensor([[2 * n, max(2 * n - 1, 0)] for n in tg_lens], dtype=dtypes.int64, device=device)
    ends = alpha.gather(1, last)
    has_label = creation.tensor([[True, n > 0] for n in tg_lens], dtype=dtypes.bool_, device=device)
    nll = -ops.logsumexp(ops.where(has_label, ends, _NEG), 1)
    # No input steps: the empty target has probability 1, any other 0.
    started = creation.tensor([n > 0 for n in in_lens], dtype=dtypes.bool_, device=device)
    empty = creation.tensor([0.0 if n == 0 else -_NEG for n in tg_lens], dtype=log_probs.dtype, device=device)
    nll = ops.where(started, nll, empty)
    impossible = nll > -_NEG / 2
    # PyTorch's gradient with respect to log_probs is exp(log_probs) - posterior (it assumes they
    # come from log_softmax, through which the exp term cancels); add that term, value unchanged.
    running = creation.tensor([[t < n for n in in_lens] for t in range(steps)], dtype=dtypes.bool_,
                              device=device).reshape(steps, batch, 1)
    mass = ops.where(running, ops.exp(log_probs), 0.0).sum((0, 2))
    nll = nll + (mass - mass.detach())
    if zero_infinity:
        nll = ops.where(impossible, 0.0, nll)
    else:
        nll = ops.where(impossible, float("inf"), nll)
    if reduction == "mean":
        divisor = creation.tensor([max(n, 1) for n in tg_lens], dtype=log_probs.dtype, device=device)
        return (nll / divisor).mean()
    if reduction == "sum":
        return nll.sum()
    return nll.squeeze(0) if unbatched else nll
