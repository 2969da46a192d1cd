"""embedding_bag and the non-constant ``pad`` modes (re-exported by ``nn.functional``).

Both gather with host-built index tensors (``take`` / ``index_select``), so they
run on every backend and their gradients are the gathers' scatter-adds.
"""
from __future__ import annotations

from .. import creation, dtypes, ops
from ..ops._helpers import describe
from ..ops.registry import OpError
from ..tensor import Tensor

__all__ = ["embedding_bag"]

_PAD_MODES = ("reflect", "replicate", "circular")


def _source_index(mode, i, n):
    if mode == "replicate":
        return min(max(i, 0), n - 1)
    if mode == "circular":
        return i % n
    j = -i if i < 0 else i  # reflect: mirror about the edge elements, which are not repeated
    return 2 * (n - 1) - j if j >= n else j


def pad_nonconstant(input, pad, mode):
    """``F.pad`` for 'reflect', 'replicate' and 'circular': the last len(pad)//2 dims (1 to 3), PyTorch's rules."""
    if mode not in _PAD_MODES:
        raise NotImplementedError(f"pad: unknown padding mode {mode!r}; expected 'constant', 'reflect', "
                                  f"'replicate' or 'circular'")
    pad = [int(p) for p in pad]
    dims = len(pad) // 2
    if len(pad) % 2 or not 1 <= dims <= 3 or input.ndim not in (dims + 1, dims + 2):
        raise NotImplementedError(
            f"Padding size {len(pad)} is not supported for {input.ndim}D input tensor.\n"
            "Supported combinations for non-constant padding:\n"
            "  - 2D or 3D input: padding size = 2 (pads last dimension)\n"
            "  - 3D or 4D input: padding size = 4 (pads last 2 dimensions)\n"
            "  - 4D or 5D input: padding size = 6 (pads last 3 dimensions)")
    out = input
    for k in range(dims):
        dim = input.ndim - 1 - k
        lo, hi = pad[2 * k], pad[2 * k + 1]
        n = input.shape[dim]
        if not (lo or hi):
            continue
        if mode == "reflect" and (lo >= n or hi >= n):
            raise RuntimeError(f"Argument #4: Padding size should be less than the corresponding input dimension, "
                               f"but got: padding ({lo}, {hi}) at dimension {dim} of input {list(input.shape)}")
        if mode == "circular" and (lo > n or hi > n):
            raise RuntimeError(f"Padding value causes wrapping around more than once (padding ({lo}, {hi}) at "
                               f"dimension {dim} of size {n})")
        if n == 0 or n + lo + hi < 0:
            raise RuntimeError(f"pad: cannot pad dimension {dim} of input {describe(input)} by ({lo}, {hi})")
        if mode == "circular":  # PyTorch crops a negative side first, then wraps within what is left
            start, kept = max(-lo, 0), n - max(-lo, 0) - max(-hi, 0)
            index = [start + i % kept for i in range(-max(lo, 0), kept + max(hi, 0))] if kept > 0 else []
        else:
            index = [_source_index(mode, i, n) for i in range(-lo, n + hi)]
        out = ops.index_select(out, dim, creation.tensor(index, dtype=dtypes.int64, device=input.device))
    return out


def _bags(op_name, input, offsets, include_last_offset):
    """Each bag's list of positions into the flattened ``input``."""
    if input.ndim == 2:
        if offsets is not None:
            raise ValueError("embedding_bag: if input is 2D, then offsets has to be None, as input is treated is "
                             "a mini-batch of fixed length sequences.")
        rows, width = input.shape
        return [list(range(r * width, (r + 1) * width)) for r in range(rows)]
    if input.ndim != 1:
        raise ValueError(f"embedding_bag: input has to be 1D or 2D Tensor, but got Tensor of dimension {input.ndim}")
    if offsets is None:
        raise ValueError("embedding_bag: offsets has to be a 1D Tensor but got None")
    starts = [int(v) for v in (offsets.detach().cpu().reshape(-1).tolist() if isinstance(offsets, Tensor)
                               else offsets)]
    total = input.shape[0]
    if starts and starts[0] != 0:
        raise ValueError(f"embedding_bag: offsets[0] has to be 0, i.e., the first sequence in the mini-batch has "
                         f"to start from position 0. However, got {starts[0]}")
    if any(b < a for a, b in zip(starts, starts[1:])) or (starts and starts[-1] > total):
        raise ValueError(f"embedding_bag: offsets {starts} must be non-decreasing and at most {total}")
    ends = starts[1:] + ([] if include_last_offset else [total])
    if include_last_offset:
        starts = starts[:-1]
    return [list(range(a, b)) for a, b in zip(starts, ends)]


def embedding_bag(input, weight, offsets=None, max_norm=None, norm_type=2, scale_grad_by_freq=False, mode="mean",
                  sparse=False, per_sample_weights=None, include_last_offset=False, padding_idx=None):
    """Sum, mean or max of the embedding rows of each bag, without building the per-index rows' tensor by hand.

    Bags are the rows of a 2-D ``input``, or the runs of a 1-D ``input`` that start
    at ``offsets``. ``per_sample_weights`` (mode 'sum' only) scales each row;
    indices equal to ``padding_idx`` are left out (and not counted by 'mean'). An
    empty bag gives zeros.

    Example:
        >>> F.embedding_bag(webgrad.tensor([1, 2, 4, 5, 4, 3]), webgrad.randn(10, 3), webgrad.tensor([0, 4]))
    """
    if max_norm is not None or scale_grad_by_freq or sparse:
        raise NotImplementedError("embedding_bag: max_norm, scale_grad_by_freq and sparse are not supported")
    if mode not in ("sum", "mean", "max"):
        raise ValueError(f"embedding_bag: mode has to be one of sum, mean or max, got {mode!r}")
    if not isinstance(input, Tensor) or input.dtype.name not in ("int64", "int32"):
        raise OpError(f"embedding_bag: input must be an int64 or int32 tensor of indices, got "
                      f"{describe(input) if isinstance(input, Tensor) else type(input).__name__}")
    if weight.ndim != 2:
        raise OpError(f"embedding_bag: weight must be 2-D (num_embeddings, embedding_dim), got {describe(weight)}")
    if per_sample_weights is not None:
        if mode != "sum":
            raise NotImplementedError(f"embedding_bag: per_sample_weights was not None. per_sample_weights is only "
                                      f"supported for mode='sum' (got mode='{mode}'). Please open a feature "
                                      f"request on GitHub.")
        if tuple(per_sample_weights.shape) != tuple(input.shape):
            raise ValueError(f"embedding_bag: per_sample_weights of shape {tuple(per_sample_weights.shape)} must "
                             f"have the shape of input {tuple(input.shape)}")
    count = weight.shape[0]
    if padding_idx is not None:
        if not -count <= padding_idx < count:
            raise ValueError(f"embedding_bag: padding_idx must be within num_embeddings ({count})")
        padding_idx %= count
    bags = _bags("embedding_bag", input, offsets, include_last_offset)
    values = [int(v) for v in input.detach().cpu().reshape(-1).tolist()]
    bad = [v for v in values if not 0 <= v < count]
    if bad:
        raise IndexError(f"embedding_bag: index {bad[0]} is out of range for {count} embeddings")
    width = max([len(b) for b in bags] + [1])
    slots = [[(b[j] if j < len(b) else 0) for j in range(width)] for b in bags]
    used = [[j < len(b) and values[b[j]] != padding_idx for j in range(width)] for b in bags]
    device = weight.device
    slot_t = creation.tensor(slots, dtype=dtypes.int64, device=device).reshape(len(bags), width)
    used_t = creation.tensor(used, dtype=dtypes.bool_, device=device).reshape(len(bags), width, 1)
    picked = ops.take(input.reshape(-1), slot_t)                       # (B, W) indices
    rows = ops.take(weight, picked)                                    # (B, W, D)
    if per_sample_weights is not None:
        rows = rows * ops.take(per_sample_weights.reshape(-1), slot_t).unsqueeze(-1)
    if mode == "max":
        best = ops.where(used_t, rows, float("-inf")).max(1).values
        return ops.where(used_t.any(1), best, 0.0)
    total = ops.where(used_t, rows, 0.0).sum(1)
    if mode == "sum":
        return total
    counted = used_t.sum(1).type(weight.dtype)
    return total / ops.clamp(counted, min=1.0)
