"""Loss functions, composed of Tensor ops (re-exported by ``nn.functional``).

Each takes ``reduction='mean' | 'sum' | 'none'`` and matches PyTorch's numbers,
including its less obvious rules: a weighted mean divides by the summed weights
of the counted targets, ignored targets count for nothing, and label smoothing
mixes in the mean of all classes' log-probabilities.
"""
from __future__ import annotations

import math
import warnings

from .. import ops
from ..ops._helpers import describe
from ..ops.registry import OpError, composite, input_check
from ..tensor import Tensor
from ..ops.autocasting import autocast_op

__all__ = ["cross_entropy", "nll_loss", "mse_loss", "l1_loss", "smooth_l1_loss", "huber_loss",
           "binary_cross_entropy", "binary_cross_entropy_with_logits"]

_INT_NAMES = ("int64", "int32")


def _reduction(op_name, reduction, size_average=None, reduce=None):
    """Validate ``reduction``; map PyTorch's legacy size_average/reduce flags onto it."""
    if size_average is not None or reduce is not None:
        size_average = True if size_average is None else size_average
        reduce = True if reduce is None else reduce
        reduction = "none" if not reduce else ("mean" if size_average else "sum")
    if reduction not in ("mean", "sum", "none"):
        raise ValueError(f"{op_name}: reduction must be 'mean', 'sum' or 'none', got {reduction!r}")
    return reduction


def _reduce(loss, reduction):
    if reduction == "mean":
        return loss.mean()
    return loss.sum() if reduction == "sum" else loss


def _check_tensor(op_name, name, value):
    if not isinstance(value, Tensor):
        raise TypeError(f"{op_name}: {name} must be a Tensor, got {type(value).__name__}")


# -- classification ----------------------------------------------------------------
@input_check
def _class_targets(op_name, input, target, weight, ignore_index):
    """Validate an (N, C, d1, ...) input against class-index targets (N, d1, ...)."""
    expected = tuple(input.shape[:1]) + tuple(input.shape[2:])
    if target.dtype.name not in _INT_NAMES or tuple(target.shape) != expected:
        raise OpError(f"{op_name}: target {describe(target)} does not fit input {describe(input)}: "
                      f"expected int64 class indices of shape {expected}"
                      + (f" or float class probabilities of shape {tuple(input.shape)}"
                         if op_name == "cross_entropy" else ""))
    classes = input.shape[1]
    if weight is not None and tuple(weight.shape) != (classes,):
        raise OpError(f"{op_name}: weight of shape {tuple(weight.shape)} must have one entry per "
                      f"class ({classes},) for input {describe(input)}")
    if target.device == "cpu" and target.numel():
        # Checked where it is free; numpy would otherwise wrap negative indices silently.
        values = target._host()
        bad = values[(values != ignore_index) & ((values < 0) | (values >= classes))]
        if bad.size:
            raise IndexError(f"{op_name}: target {int(bad[0])} is out of bounds for {classes} classes "
                             f"(input {describe(input)})")


def _picked_and_weights(logp, target, weight, ignore_index):
    """-log p[target] per position and each position's weight (0 where ignored)."""
    valid = target != ignore_index
    safe = ops.where(valid, target, 0)
    picked = logp.gather(1, safe.unsqueeze(1)).squeeze(1)
    if weight is None:
        w = ops.where(valid, 1.0, 0.0).type(logp.dtype)
    else:
        w = ops.where(valid, ops.take(weight, safe), 0.0)
    return -picked * w, w, valid


def _unbatch(input, target, reduction):
    """Treat an unbatched (C,) input as a batch of one."""
    if input.ndim != 1:
        return input, target, False
    return input.unsqueeze(0), target.unsqueeze(0), reduction == "none"


@composite("F.nll_loss")
def nll_loss(input, target, weight=None, size_average=None, ignore_index=-100, reduce=None,
             reduction="mean"):
    """Negative log-likelihood of class-index targets, given log-probabilities (N, C, d1, ...).

    Example:
        >>> logp = F.log_softmax(webgrad.randn(3, 5), dim=1)
        >>> F.nll_loss(logp, webgrad.tensor([1, 0, 4]))
    """
    reduction = _reduction("nll_loss", reduction, size_average, reduce)
    _check_tensor("nll_loss", "input", input)
    _check_tensor("nll_loss", "target", target)
    if input.ndim == 0:
        raise OpError(f"nll_loss: input must have a class dimension, got {describe(input)}")
    input, target, squeeze = _unbatch(input, target, reduction)
    _class_targets("nll_loss", input, target, weight, ignore_index)
    loss, w, _ = _picked_and_weights(input, target, weight, ignore_index)
    if reduction == "mean":
        return loss.sum() / w.sum()
    if reduction == "sum":
        return loss.sum()
    return loss.squeeze(0) if squeeze else loss


@composite("F.cross_entropy")
def cross_entropy(input, target, weight=None, size_average=None, ignore_index=-100, reduce=None,
                  reduction="mean", label_smoothing=0.0):
    """Cross entropy of logits (N, C, d1, ...) against class indices (N, d1, ...) or class probabilities.

    Matches ``torch.nn.functional.cross_entropy`` exactly, including ``weight``,
    ``ignore_index`` and ``label_smoothing``.

    Example:
        >>> logits = webgrad.randn(3, 5, requires_grad=True)
        >>> F.cross_entropy(logits, webgrad.tensor([1, 0, 4])).backward()
    """
    reduction = _reduction("cross_entropy", reduction, size_average, reduce)
    _check_tensor("cross_entropy", "input", input)
    _check_tensor("cross_entropy", "target", target)
    if input.ndim == 0 or not input.dtype.is_floating_point:
        raise OpError(f"cross_entropy: input must be floating point logits with a class dimension, "
                      f"got {describe(input)}")
    if not 0.0 <= label_smoothing <= 1.0:
        raise ValueError(f"cross_entropy: label_smoothing must be between 0.0 and 1.0, got {label_smoothing}")
    if weight is not None and weight.dtype is not input.dtype:
        raise OpError(f"cross_entropy: weight {describe(weight)} must have the input's dtype {input.dtype.name}")
    if target.dtype.is_floating_point and tuple(target.shape) == tuple(input.shape):
        return _cross_entropy_probabilities(input, target, weight, reduction, label_smoothing)
    input, target, squeeze = _unbatch(input, target, reduction)
    _class_targets("cross_entropy", input, target, weight, ignore_index)
    if weight is None:  # the common case: one fused kernel forward (reduction included), one backward
        loss = ops.cross_entropy(input, target, ignore_index, label_smoothing, reduction)
        return loss.squeeze(0) if squeeze else loss
    loss, counted = _weighted_cross_entropy(input, target, weight, ignore_index, label_smoothing)
    if reduction == "mean":  # the count summed in the loss's dtype: no int64 sum cast for the division
        return loss.sum() / counted.sum(dtype=loss.dtype)
    if reduction == "sum":
        return loss.sum()
    return loss.squeeze(0) if squeeze else loss


def _weighted_cross_entropy(input, target, weight, ignore_index, label_smoothing):
    """Per-position loss and target weight (0 where ignored), with class weights."""
    logp = ops.log_softmax(input, 1)
    loss, w, valid = _picked_and_weights(logp, target, weight, ignore_index)
    if label_smoothing > 0.0:
        # PyTorch: (1 - s) * nll + s / C * sum_c(-w_c * log p_c), ignored positions zeroed,
        # and a mean divides both parts by the same summed target weights.
        per_class = logp * weight.reshape((1, -1) + (1,) * (logp.ndim - 2))
        smooth = ops.where(valid, -per_class.sum(1), 0.0)
        loss = loss * (1.0 - label_smoothing) + smooth * (label_smoothing / input.shape[1])
    return loss, w


def _cross_entropy_probabilities(input, target, weight, reduction, label_smoothing):
    class_dim = 0 if input.ndim == 1 else 1
    classes = input.shape[class_dim]
    if weight is not None and tuple(weight.shape) != (classes,):
        raise OpError(f"cross_entropy: weight of shape {tuple(weight.shape)} must have one entry per "
                      f"class ({classes},) for input {describe(input)}")
    if label_smoothing > 0.0:
        target = target * (1.0 - label_smoothing) + label_smoothing / classes
    terms = ops.log_softmax(input, class_dim) * target
    if weight is not None:
        terms = terms * weight.reshape((-1,) + (1,) * (input.ndim - class_dim - 1))
    loss = -terms.sum(class_dim)
    if reduction == "mean":  # over positions, not weights (PyTorch's rule for probability targets)
        return loss.sum() / (input.numel() // classes) if input.numel() else loss.sum() * float("nan")
    return loss.sum() if reduction == "sum" else loss


# -- regression --------------------------------------------------------------------
def _same_shape(op_name, input, target, strict=False):
    _check_tensor(op_name, "input", input)
    _check_tensor(op_name, "target", target)
    if tuple(input.shape) == tuple(target.shape):
        return
    if strict:
        raise ValueError(f"{op_name}: target {describe(target)} must have the same shape as input "
                         f"{describe(input)}")
    warnings.warn(f"{op_name}: using a target size {tuple(target.shape)} that is different to the input "
                  f"size {tuple(input.shape)}; they will be broadcast, which is likely not what you want",
                  stacklevel=3)


@composite("F.mse_loss")
def mse_loss(input, target, size_average=None, reduce=None, reduction="mean", weight=None):
    """Mean squared error (x - y)².

    Example:
        >>> F.mse_loss(webgrad.tensor([1.0, 2.0]), webgrad.tensor([1.0, 4.0]))
        tensor(2.)
    """
    reduction = _reduction("mse_loss", reduction, size_average, reduce)
    _same_shape("mse_loss", input, target)
    diff = input - target
    loss = diff * diff
    return _reduce(loss if weight is None else loss * weight, reduction)


@autocast_op("l1_loss")
def l1_loss(input, target, size_average=None, reduce=None, reduction="mean"):
    """Mean absolute error |x - y|.

    Example:
        >>> F.l1_loss(webgrad.tensor([1.0, 2.0]), webgrad.tensor([1.0, 4.0]))
        tensor(1.)
    """
    reduction = _reduction("l1_loss", reduction, size_average, reduce)
    _same_shape("l1_loss", input, target)
    return _reduce((input - target).abs(), reduction)


@autocast_op("smooth_l1_loss")
def smooth_l1_loss(input, target, size_average=None, reduce=None, reduction="mean", beta=1.0):
    """0.5 d² / beta where |d| < beta, else |d| - 0.5 beta.

    Example:
        >>> F.smooth_l1_loss(webgrad.tensor([0.0, 3.0]), webgrad.zeros(2), reduction="none")
        tensor([0.0000, 2.5000])
    """
    reduction = _reduction("smooth_l1_loss", reduction, size_average, reduce)
    _same_shape("smooth_l1_loss", input, target)
    if beta < 0:
        raise ValueError(f"smooth_l1_loss: beta must be non-negative, got {beta}")
    d = (input - target).abs()
    if beta == 0:
        return _reduce(d, reduction)
    return _reduce(ops.where(d < beta, d * d * (0.5 / beta), d - 0.5 * beta), reduction)


@autocast_op("huber_loss")
def huber_loss(input, target, reduction="mean", delta=1.0, weight=None):
    """0.5 d² where |d| < delta, else delta * (|d| - 0.5 delta)."""
    reduction = _reduction("huber_loss", reduction)
    _same_shape("huber_loss", input, target)
    d = (input - target).abs()
    loss = ops.where(d < delta, d * d * 0.5, (d - 0.5 * delta) * delta)
    return _reduce(loss if weight is None else loss * weight, reduction)


# -- binary ------------------------------------------------------------------------
_LOG_FLOOR = math.exp(-100.0)


def _clamped_log(x):
    """max(log(x), -100) as PyTorch's binary_cross_entropy, without nan gradients at x = 0."""
    positive = x > _LOG_FLOOR
    return ops.where(positive, ops.log(ops.where(positive, x, 1.0)), -100.0)


@autocast_op("binary_cross_entropy")
def binary_cross_entropy(input, target, weight=None, size_average=None, reduce=None, reduction="mean"):
    """-(y log x + (1 - y) log(1 - x)) for probabilities x; each log is clamped at -100 like PyTorch.

    Example:
        >>> F.binary_cross_entropy(webgrad.tensor([0.9, 0.2]), webgrad.tensor([1.0, 0.0]))
    """
    reduction = _reduction("binary_cross_entropy", reduction, size_average, reduce)
    _same_shape("binary_cross_entropy", input, target, strict=True)
    if input.device == "cpu" and input.numel():
        values = input.detach()._host()
        if not ((values >= 0) & (values <= 1)).all():
            raise ValueError("binary_cross_entropy: all elements of input should be between 0 and 1 "
                             "(apply sigmoid first, or use binary_cross_entropy_with_logits)")
    loss = -(target * _clamped_log(input) + (1.0 - target) * _clamped_log(1.0 - input))
    return _reduce(loss if weight is None else loss * weight, reduction)


@autocast_op("binary_cross_entropy_with_logits")
def binary_cross_entropy_with_logits(input, target, weight=None, size_average=None, reduce=None,
                                     reduction="mean", pos_weight=None):
    """sigmoid + binary cross entropy in one numerically stable step; ``pos_weight`` scales positives.

    Example:
        >>> F.binary_cross_entropy_with_logits(webgrad.tensor([2.0, -1.0]), webgrad.tensor([1.0, 0.0]))
    """
    reduction = _reduction("binary_cross_entropy_with_logits", reduction, size_average, reduce)
    _same_shape("binary_cross_entropy_with_logits", input, target, strict=True)
    # log(1 + exp(-x)) = log1p(exp(-|x|)) + max(-x, 0): never overflows; maximum's tie
    # rule keeps the gradient right at x = 0.
    softplus_neg = ops.log1p(ops.exp(-input.abs())) + ops.maximum(-input, 0.0)
    if pos_weight is None:
        loss = (1.0 - target) * input + softplus_neg
    else:
        loss = (1.0 - target) * input + ((pos_weight - 1.0) * target + 1.0) * softplus_neg
    return _reduce(loss if weight is None else loss * weight, reduction)
