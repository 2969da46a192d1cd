"""Order statistics and friends, composed from sort, gather, where and the reductions:
median/nanmedian, quantile/nanquantile, kthvalue, mode, nanmean/nansum, cummax/cummin,
logcumsumexp, count_nonzero, aminmax, var_mean/std_mean, bincount and histc.

Values are picked with ``gather`` at the chosen indices, so gradients reach exactly
the chosen elements, as in PyTorch. The sort is stable with NaN last, which gives
torch's lower median and its NaN rules. cummax/cummin compare each position with
every earlier one (memory n x n per row along ``dim``).
"""
from __future__ import annotations

import math
from collections import namedtuple

from .. import dtypes
from ._helpers import describe, normalize_dim, require_float
from .elementwise import cast, exp, isnan, log, where
from .movement import movedim, reshape
from .reduce import ValuesIndices, amax, amin, mean, std, sum, var
from .registry import OpError
from .scan import cumsum
from .sorting import sort
from ..creation import arange, full, tensor, zeros
from ..tensor import Tensor
from .indexing import index_add

MinMax = namedtuple("MinMax", ["min", "max"])


def _pick(x, d, position, keepdim):
    """(values, indices) of the elements at sorted ``position`` (a tensor shaped like x
    reduced over d, keepdim) along d."""
    values, order = sort(x, d, stable=True)
    indices = order.gather(d, position)
    picked = x.gather(d, indices)
    if not keepdim:
        picked, indices = picked.squeeze(d), indices.squeeze(d)
    return ValuesIndices(picked, indices)


def _median(op_name, x, dim, keepdim, ignore_nan):
    if dim is None:
        flat = reshape(x, (-1,))
        if flat.numel() == 0:
            return full((), float("nan"), dtype=x.dtype, device=x.device)
        value = _median(op_name, flat.detach(), 0, False, ignore_nan).values
        if x.dtype.category != "float":
            return value
        # Of all elements, the gradient is shared evenly by every element equal to the median
        # (every NaN when it is NaN), as in PyTorch.
        same = (flat == value) | (isnan(flat) & isnan(value))
        return sum(where(same, flat, 0.0)) / sum(same)
    if x.ndim == 0:
        return ValuesIndices(x.clone(), zeros((), dtype=dtypes.int64, device=x.device))
    d = normalize_dim(op_name, dim, x.ndim)
    n = x.shape[d]
    if n == 0:
        raise IndexError(f"{op_name}(): Expected reduction dim {d} to have non-zero size.")
    nans = isnan(x).sum(d, keepdim=True) if x.dtype.category == "float" else zeros(
        (1,), dtype=dtypes.int64, device=x.device)
    if ignore_nan:  # the lower median of the non-NaN values (NaN only when all are)
        position = where(nans == n, 0, (n - nans - 1) // 2)
    else:  # any NaN makes the median NaN: pick the first NaN (stable sort puts them last, in order)
        position = where(nans > 0, n - nans, (n - 1) // 2)
    position = position.expand(*[1 if i == d else s for i, s in enumerate(x.shape)]).contiguous()
    return _pick(x, d, position, keepdim)


def median(input, dim=None, keepdim=False):  # noqa: A002  (torch's names)
    """The lower median (of an even count, the smaller middle value): of all elements, or
    ``(values, indices)`` along ``dim``. NaN if a NaN is among them.

    Example:
        >>> webgrad.tensor([1.0, 4.0, 2.0, 3.0]).median()
        tensor(2.)
    """
    return _median("median", input, dim, keepdim, False)


def nanmedian(input, dim=None, keepdim=False):  # noqa: A002
    """``median`` ignoring NaN values."""
    return _median("nanmedian", input, dim, keepdim, True)


def kthvalue(input, k, dim=-1, keepdim=False):  # noqa: A002
    """``(values, indices)`` of the k-th smallest element along ``dim`` (k counts from 1)."""
    if input.ndim == 0:
        if k != 1:
            raise IndexError(f"kthvalue(): selected number k out of range for dimension 0 (k={k})")
        return ValuesIndices(input.clone(), zeros((), dtype=dtypes.int64, device=input.device))
    d = normalize_dim("kthvalue", dim, input.ndim)
    if not 1 <= k <= input.shape[d]:
        raise IndexError(f"kthvalue(): selected number k out of range for dimension {d} (k={k}, size "
                         f"{input.shape[d]})")
    shape = tuple(1 if i == d else s for i, s in enumerate(input.shape))
    return _pick(input, d, full(shape, k - 1, dtype=dtypes.int64, device=input.device), keepdim)


def mode(input, dim=-1, keepdim=False):  # noqa: A002
    """``(values, indices)`` of the most frequent value along ``dim`` (the smallest such
    value on ties; its last index), comparing every pair of the row."""
    if input.ndim == 0:
        return ValuesIndices(input.clone(), zeros((), dtype=dtypes.int64, device=input.device))
    d = normalize_dim("mode", dim, input.ndim)
    x = movedim(input, d, -1)
    n = x.shape[-1]
    counts = (x.unsqueeze(-1) == x.unsqueeze(-2)).sum(-1)  # how often each element's value occurs
    best = counts == counts.amax(-1, keepdim=True)
    low = amin(where(best, x, x.amax(-1, keepdim=True)), -1, keepdim=True).detach()
    positions = arange(n, device=x.device)
    index = amax(where(best & (x == low), positions, -1), -1, keepdim=True)
    values = x.gather(-1, index)
    values, index = movedim(values, -1, d), movedim(index, -1, d)
    if not keepdim:
        values, index = values.squeeze(d), index.squeeze(d)
    return ValuesIndices(values, index)


def _quantile(op_name, x, q, dim, keepdim, interpolation, ignore_nan):
    require_float(op_name, x)
    if interpolation not in ("linear", "lower", "higher", "midpoint", "nearest"):
        raise OpError(f"{op_name}(): interpolation must be one of linear, lower, higher, midpoint or nearest. "
                      f"Got {interpolation!r}")
    scalar_q = not isinstance(q, Tensor) or q.ndim == 0
    qs = q if isinstance(q, Tensor) else tensor(float(q), dtype=x.dtype, device=x.device)
    if qs.ndim > 1:
        raise OpError(f"{op_name}(): q must be a scalar or 1D tensor, got {describe(qs)}")
    qv = qs.detach()._host().reshape(-1)
    if ((qv < 0) | (qv > 1)).any():
        raise OpError(f"{op_name}() q values must be in the range [0, 1]")
    if dim is None:
        out = _quantile(op_name, reshape(x, (-1,)), q, 0, False, interpolation, ignore_nan)
        if keepdim:
            out = reshape(out, (() if scalar_q else (qs.numel(),)) + (1,) * x.ndim)
        return out
    x0 = x.reshape(1) if x.ndim == 0 else x
    d = normalize_dim(op_name, dim, x0.ndim)
    n = x0.shape[d]
    if n == 0:
        raise IndexError(f"{op_name}() input tensor must be non-empty")
    values, _ = sort(x0, d, stable=True)
    values = movedim(values, d, -1).unsqueeze(-2)  # (..., 1, n)
    nans = isnan(values).sum(-1, keepdim=True)  # (..., 1, 1)
    count = n - nans if ignore_nan else full(tuple(nans.shape), n, dtype=dtypes.int64, device=x.device)
    qcol = reshape(cast(qs, x.dtype).to(x.device), (-1, 1))  # (Q, 1)
    rank = qcol * cast(where(count > 0, count - 1, 0), x.dtype)  # (..., Q, 1)
    lower = rank.detach().floor()  # the ranks pick; only the linear weight carries q's gradient
    upper = rank.detach().ceil()
    if interpolation == "lower":
        upper = lower
    elif interpolation == "higher":
        lower = upper
    elif interpolation == "nearest":
        lower = upper = rank.detach().round()
    lo = values.expand(*rank.shape[:-1], n).gather(-1, cast(lower, dtypes.int64))
    hi = values.expand(*rank.shape[:-1], n).gather(-1, cast(upper, dtypes.int64))
    if interpolation == "linear":
        out = lo + (hi - lo) * (rank - lower)
    elif interpolation == "midpoint":
        out = lo + (hi - lo) * 0.5
    else:
        out = lo
    nan = float("nan")
    out = where(count == 0, nan, out) if ignore_nan else where(nans > 0, nan, out)
    out = out.squeeze(-1)  # (..., Q)
    out = movedim(out, -1, 0)  # (Q, ...)
    if keepdim and x.ndim:
        out = out.unsqueeze(d + 1)
    return out.squeeze(0) if scalar_q else out


def quantile(input, q, dim=None, keepdim=False, *, interpolation="linear"):  # noqa: A002
    """The ``q``-th quantiles (q in [0, 1], a number or a 1-D tensor) of all elements or along
    ``dim``, interpolating between the two nearest ranks as ``interpolation`` says
    (linear, lower, higher, midpoint, nearest). NaN where a NaN is among the values."""
    return _quantile("quantile", input, q, dim, keepdim, interpolation, False)


def nanquantile(input, q, dim=None, keepdim=False, *, interpolation="linear"):  # noqa: A002
    """``quantile`` ignoring NaN values."""
    return _quantile("nanquantile", input, q, dim, keepdim, interpolation, True)


def nansum(input, dim=None, keepdim=False, *, dtype=None):  # noqa: A002
    """``sum`` treating NaN as zero."""
    if input.dtype.category == "float":
        input = where(isnan(input), 0.0, input)
    return sum(input, dim, keepdim, dtype=dtype)


def nanmean(input, dim=None, keepdim=False, *, dtype=None):  # noqa: A002
    """``mean`` over the non-NaN values."""
    if dtype is not None:
        input = cast(input, dtypes.to_dtype(dtype))
    require_float("nanmean", input)
    keep = ~isnan(input)
    return nansum(input, dim, keepdim) / sum(keep, dim, keepdim)


def _cumulative_extreme(op_name, input, dim, largest):
    if input.ndim == 0:
        return ValuesIndices(input.clone(), zeros((), dtype=dtypes.int64, device=input.device))
    d = normalize_dim(op_name, dim, input.ndim)
    x = movedim(input, d, -1)
    n = x.shape[-1]
    if n == 0:
        return ValuesIndices(input.clone(), zeros(tuple(input.shape), dtype=dtypes.int64, device=input.device))
    positions = arange(n, device=x.device)
    earlier = positions.unsqueeze(0) <= positions.unsqueeze(1)  # [i, j]: j <= i
    xj = x.detach().unsqueeze(-2)  # (..., 1, n): x[j]
    if x.dtype.category == "float":
        missing = isnan(xj)
        fill = float("-inf") if largest else float("inf")
    else:
        missing = None
        fill = (amin if largest else amax)(x.detach())
    usable = earlier if missing is None else earlier & ~missing
    best = (amax if largest else amin)(where(usable, xj, fill), -1, keepdim=True)  # (..., n, 1)
    index = amax(where(usable & (xj == best), positions, -1), -1)  # the latest position of the best
    if missing is not None:  # a NaN wins from its first position on
        first_nan = amin(where(earlier & missing, positions, n), -1)
        index = where(first_nan < n, first_nan, index)
    values = x.gather(-1, index)
    return ValuesIndices(movedim(values, -1, d), movedim(index, -1, d))


def cummax(input, dim):  # noqa: A002
    """``(values, indices)``: the running maximum along ``dim`` and where it was (the latest on ties)."""
    return _cumulative_extreme("cummax", input, dim, True)


def cummin(input, dim):  # noqa: A002
    """``(values, indices)``: the running minimum along ``dim`` and where it was (the latest on ties)."""
    return _cumulative_extreme("cummin", input, dim, False)


def logcumsumexp(input, dim):  # noqa: A002
    """log(cumsum(exp(x))) along ``dim``, shifted by the row maximum to stay finite."""
    require_float("logcumsumexp", input)
    if input.ndim == 0:
        return input.clone()
    d = normalize_dim("logcumsumexp", dim, input.ndim)
    if input.shape[d] == 0:
        return input.clone()
    peak = amax(input, d, True).detach()
    peak = where(peak.abs() == float("inf"), 0.0, peak)
    return log(cumsum(exp(input - peak), d)) + peak


def count_nonzero(input, dim=None):  # noqa: A002
    """How many elements are not zero (over ``dim``, an int or a tuple, or all)."""
    return sum(input != 0, dim)


def aminmax(input, *, dim=None, keepdim=False):  # noqa: A002
    """``(min, max)`` in one call."""
    if dim is None and keepdim and input.ndim:
        dim = tuple(range(input.ndim))
    return MinMax(amin(input, dim, keepdim), amax(input, dim, keepdim))


def _unbiased_args(dim, unbiased, keepdim, correction):
    if isinstance(dim, bool):  # var_mean(x, True): the unbiased flag, not a dim
        dim, unbiased = None, dim
    return dim, unbiased, keepdim, correction


def var_mean(input, dim=None, unbiased=None, keepdim=False, *, correction=None):  # noqa: A002
    """``(var, mean)`` over ``dim``."""
    dim, unbiased, keepdim, correction = _unbiased_args(dim, unbiased, keepdim, correction)
    return var(input, dim, unbiased, keepdim, correction=correction), mean(input, dim, keepdim)


def std_mean(input, dim=None, unbiased=None, keepdim=False, *, correction=None):  # noqa: A002
    """``(std, mean)`` over ``dim``."""
    dim, unbiased, keepdim, correction = _unbiased_args(dim, unbiased, keepdim, correction)
    return std(input, dim, unbiased, keepdim, correction=correction), mean(input, dim, keepdim)


def bincount(input, weights=None, minlength=0):  # noqa: A002
    """How often each value 0, 1, ... occurs in a 1-D non-negative int tensor (summing
    ``weights`` instead of ones when given); reads the largest value back to size the result."""
    if input.ndim != 1 or input.dtype.category != "int":
        raise OpError(f"bincount: expected a 1-D tensor of non-negative ints, got {describe(input)}")
    host = input._host()
    if host.size and host.min() < 0:
        raise OpError("bincount: input must contain only non-negative integers")
    length = max(int(minlength), int(host.max()) + 1 if host.size else 0)
    if weights is None:
        counts = zeros(length, dtype=dtypes.int64, device=input.device)
        return index_add(counts, input, full((input.shape[0],), 1, dtype=dtypes.int64, device=input.device))
    if tuple(weights.shape) != tuple(input.shape):
        raise OpError(f"bincount: weights should be 1-d and have the same length as input ({describe(input, weights)})")
    dtype = weights.dtype if weights.dtype.category == "float" else dtypes.float64
    return index_add(zeros(length, dtype=dtype, device=input.device), input, cast(weights, dtype))


def histc(input, bins=100, min=0, max=0):  # noqa: A002
    """A histogram of ``bins`` equal-width bins over [min, max] (the data's own range when
    both are 0); values outside are ignored, the last bin includes ``max``."""
    require_float("histc", input)
    lo, hi = float(min), float(max)
    flat = reshape(input.detach(), (-1,))
    if lo == hi and flat.numel():
        host = flat._host()
        lo, hi = float(host.min()), float(host.max())
    if lo == hi:
        lo, hi = lo - 1, hi + 1
    if not (math.isfinite(lo) and math.isfinite(hi)):
        raise OpError(f"histc: range of [{lo}, {hi}] is not finite")
    if lo > hi:
        raise OpError("histc: max must be larger than min")
    inside = (flat >= lo) & (flat <= hi)
    slot = cast(((flat - lo) * (bins / (hi - lo))).floor(), dtypes.int64)
    slot = where(slot >= bins, bins - 1, slot)
    slot = where(inside, slot, 0)
    return index_add(zeros(bins, dtype=input.dtype, device=input.device), slot, cast(inside, input.dtype))

