"""Sorting and searching: argsort (the primitive: a stable sorting permutation
along the last dim, sort.wgsl on WebGPU), and composed from it and other ops:
sort, topk, searchsorted, bucketize. ``unique`` reads the data back to the host,
as ``nonzero`` does: its output size depends on the values, so a readback is
needed anyway, and numpy then does the work.

Values of sort/topk are ``gather``s of the input by the permutation, so their
gradient is gather's (each value's gradient goes back to where it came from).
"""
from __future__ import annotations

import numpy as np

from .. import dtypes
from ..kernels import Kernel
from ._helpers import describe, normalize_dim, real_only
from .movement import movedim, narrow
from .reduce import ValuesIndices
from .registry import OpError, apply, defop
from ..creation import scalar_tensor, tensor
from ..tensor import Tensor


def _argsort_numpy(x, *, descending):
    if x.ndim == 0:
        return np.zeros((), dtype=np.int64)
    if not descending:
        return np.argsort(x, axis=-1, kind="stable")
    # Stable descending: sort the reversed row ascending, then reverse that order back;
    # equal values keep their original order and NaN comes first, as in PyTorch.
    n = x.shape[-1]
    return np.flip(n - 1 - np.argsort(np.flip(x, -1), axis=-1, kind="stable"), -1)


ARGSORT = defop("argsort", kind="other", infer=real_only("argsort", lambda x, *, descending: (x.shape, dtypes.int64)),
                numpy=_argsort_numpy,
                wgsl=Kernel("sort.wgsl", "argsort", "scan.argsort"))


def argsort(x, dim=-1, descending=False, stable=False):
    """Indices that sort ``x`` along ``dim`` (always stable: ties keep their order).

    Example:
        >>> webgrad.tensor([3.0, 1.0, 2.0]).argsort()
        tensor([1, 2, 0])
    """
    d = normalize_dim("argsort", dim, x.ndim)
    if x.ndim == 0:
        return apply(ARGSORT, x, descending=bool(descending))
    return movedim(apply(ARGSORT, movedim(x, d, -1), descending=bool(descending)), -1, d)


def sort(x, dim=-1, descending=False, stable=False):
    """``(values, indices)`` of ``x`` sorted along ``dim``; NaN sorts as the largest value.

    Example:
        >>> values, indices = webgrad.tensor([3.0, 1.0, 2.0]).sort(descending=True)
    """
    indices = argsort(x, dim, descending)
    if x.ndim == 0:
        return ValuesIndices(x.clone(), indices)
    return ValuesIndices(x.gather(normalize_dim("sort", dim, x.ndim), indices), indices)


def topk(x, k, dim=-1, largest=True, sorted=True):  # noqa: A002  (torch's argument name)
    """The ``k`` largest (or smallest) elements along ``dim``, as ``(values, indices)``,
    in sorted order (also with ``sorted=False``, which allows any order).

    Example:
        >>> logits = webgrad.tensor([0.1, 2.0, -1.0, 0.7])
        >>> logits.topk(2).indices
        tensor([1, 3])
    """
    d = normalize_dim("topk", dim, x.ndim)
    size = x.shape[d] if x.ndim else 1
    if not isinstance(k, (int, np.integer)) or isinstance(k, bool) or not 0 <= k <= size:
        raise OpError(f"topk: k ({k!r}) must be an int in [0, {size}] for dimension {dim} of shape {tuple(x.shape)}")
    indices = argsort(x, d, descending=largest)
    if x.ndim == 0:
        return ValuesIndices(x.clone(), indices)
    indices = narrow(indices, d, 0, int(k)).contiguous()
    return ValuesIndices(x.gather(d, indices), indices)


def searchsorted(sorted_sequence, values, *, out_int32=False, right=False, side=None, sorter=None):
    """Insertion points of ``values`` into the last dim of ``sorted_sequence`` that keep it
    sorted: the first index whose element is >= the value (``right=True``: > the value).

    Composed on any device from a comparison and a sum: ``#{k : seq[k] < v}`` (or <=),
    which costs len(seq) steps per value.

    Example:
        >>> webgrad.searchsorted(webgrad.tensor([1, 3, 5, 7]), webgrad.tensor([3, 6]))
        tensor([1, 3])
    """
    if side is not None:
        if side not in ("left", "right"):
            raise OpError(f"searchsorted: side must be 'left' or 'right', got {side!r}")
        if right and side == "left":
            raise OpError("searchsorted: side='left' contradicts right=True; pass only one of them")
        right = side == "right"
    seq = sorted_sequence
    if not isinstance(seq, Tensor):
        raise TypeError(f"searchsorted: sorted_sequence must be a Tensor, got {type(seq).__name__}")
    if seq.ndim == 0:
        raise OpError("searchsorted: sorted_sequence must have at least one dim, got a 0-d tensor")
    if sorter is not None:
        seq = seq.gather(-1, sorter)
    scalar = not isinstance(values, Tensor)
    if scalar:
        values = scalar_tensor(values, dtypes.result_type([], [], [values]), seq.device)
    if seq.ndim == 1:
        cmp_seq, cmp_values = seq, values.unsqueeze(-1)
    else:
        if values.ndim != seq.ndim or tuple(values.shape[:-1]) != tuple(seq.shape[:-1]):
            raise OpError(f"searchsorted: the leading dims of sorted_sequence and values must match "
                          f"(got {describe(seq, values)}); pass a 1-D sorted_sequence to search every value in it")
        cmp_seq, cmp_values = seq.unsqueeze(-2), values.unsqueeze(-1)
    before = (cmp_seq <= cmp_values) if right else (cmp_seq < cmp_values)
    out = before.sum(-1)
    return out.int() if out_int32 else out


def bucketize(input, boundaries, *, out_int32=False, right=False):  # noqa: A002
    """The bucket of each element of ``input`` among the 1-D sorted ``boundaries``:
    i with boundaries[i-1] < x <= boundaries[i] (``right=True``: boundaries[i-1] <= x < boundaries[i])."""
    if boundaries.ndim != 1:
        raise OpError(f"bucketize: boundaries must be 1-D, got shape {tuple(boundaries.shape)}")
    return searchsorted(boundaries, input, out_int32=out_int32, right=right)


def unique(x, sorted=True, return_inverse=False, return_counts=False, dim=None):  # noqa: A002
    """The distinct values of ``x`` (sorted), optionally with the inverse indices that
    rebuild ``x`` and each value's count; with ``dim``, the distinct slices along it.

    Reads ``x`` back to the host (the result's size depends on the values) and
    returns tensors on ``x``'s device.

    Example:
        >>> webgrad.unique(webgrad.tensor([3, 1, 3, 2]), return_counts=True)
        (tensor([1, 2, 3]), tensor([1, 1, 2]))
    """
    array = x.detach()._host()
    if dim is None:
        values, inverse, counts = np.unique(array.reshape(-1), return_inverse=True, return_counts=True)
        inverse = inverse.reshape(x.shape)
    else:
        d = normalize_dim("unique", dim, x.ndim)
        values, inverse, counts = np.unique(array, return_inverse=True, return_counts=True, axis=d)
        inverse = inverse.reshape(-1)
    out = [tensor(values.astype(x.dtype.np), dtype=x.dtype, device=x.device)]
    if return_inverse:
        out.append(tensor(inverse.astype(np.int64), dtype=dtypes.int64, device=x.device))
    if return_counts:
        out.append(tensor(counts.astype(np.int64), dtype=dtypes.int64, device=x.device))
    return out[0] if len(out) == 1 else tuple(out)

