"""Indexing. Primitives: take (rows of dim 0 by an index tensor of any shape,
each in [0, rows): negative indices are an error, as in index_select), its
adjoint index_add, gather and its adjoint scatter_add, the in-place
copy/setitem and index_put (setitem's out-of-place, differentiable form).
``x[key]`` is composed from basic slicing and ``take`` following numpy's (and so
PyTorch's) rules for ints, slices, None, Ellipsis, integer tensors and boolean
masks. ``update_`` is the one way every in-place op (``add_``, ``x[key] = v``,
``copy_``...) writes, with or without autograd.
"""
from __future__ import annotations

import math

import numpy as np

from .. import autograd, dtypes
from ..kernels import Kernel
from ._helpers import broadcast_shapes, describe, normalize_dim
from ..backend import get_backend
from .registry import OpError, apply, apply_inplace, defop, input_check, writing_into
from ..creation import arange, scalar_tensor, tensor, zeros
from ..tensor import Tensor
from .elementwise import cast, logical_or, where
from .movement import _inverse, clone, expand, permute, reshape, slice_dims, unslice
from .autocasting import autocast_op

_INDEX_DTYPES = ("int64", "int32")


def _check_index(op_name, index):
    if index.dtype.name not in _INDEX_DTYPES:
        raise OpError(f"{op_name}: index must be an int64 or int32 tensor, got {describe(index)}")


# -- take / index_add ---------------------------------------------------------
def _take_infer(x, index):
    _check_index("index", index)
    if x.ndim == 0:
        raise OpError(f"index: cannot index a 0-d tensor with a tensor ({describe(x, index)})")
    return tuple(index.shape) + tuple(x.shape[1:]), x.dtype


def _take_kernel(x, index):
    _check_range("take", index, x.shape[0], 0)
    return x[index]


def _index_add_kernel(base, index, src):
    _check_range("index_add", index, base.shape[0], 0)
    if index.size > 1 and base.size and not any(base.strides) and not base.flat[0]:
        return _rows_summed(base, index, src)  # onto a broadcast 0: an embedding's gradient
    out = np.array(base, copy=True)
    np.add.at(out, index, src)
    return out


def _rows_summed(base, index, src):
    """``np.add.at(zeros, index, src)`` by sorting: the rows of each index added up by one
    ``reduceat`` (np.add.at costs ~10 ns an element: 0.55 ms for a 512-token batch of width
    64, 0.14 ms this way). Deterministic; reduceat may add a long run pairwise, so the last
    bits can differ from np.add.at's one-by-one sum (and from WebGPU's scan, which follows it)."""
    flat = index.reshape(-1)
    order = np.argsort(flat, kind="stable")
    ordered = flat[order]
    starts = np.flatnonzero(np.concatenate(([True], ordered[1:] != ordered[:-1])))
    out = np.zeros(base.shape, base.dtype)
    out.reshape(base.shape[0], -1)[ordered[starts]] = np.add.reduceat(src.reshape(flat.size, -1)[order], starts, axis=0)
    return out


TAKE = defop("take", kind="index", infer=_take_infer, numpy=_take_kernel,
             wgsl=Kernel("index.wgsl", "gather", "index.take"),
             vjp=lambda g, x, index, *, out: (index_add(_zeros_like(x), index, g), None))
INDEX_ADD = defop("index_add", kind="index", infer=lambda base, index, src: (base.shape, base.dtype),
                  wgsl=Kernel("index.wgsl", "scatter_add", "index.index_add"),
                  numpy=_index_add_kernel,
                  vjp=lambda g, base, index, src, *, out: (g, None, take(g, index)))


def take(x, index):
    return apply(TAKE, x, index)


def index_add(base, index, src):
    return apply(INDEX_ADD, base, index, src)


def _zeros_like(x):
    """A broadcast 0: the scatters copy their base anyway, so no zero tensor is made first
    (an embedding's gradient would otherwise allocate and fill its table's size twice)."""
    return zeros((), dtype=x.dtype, device=x.device).expand(*x.shape)


def index_select(x, dim, index):
    if x.ndim == 0:  # a 0-d tensor acts as one element along dim 0 (PyTorch keeps it 0-d)
        normalize_dim("index_select", dim, 1)
        return index_select(x.reshape(1), 0, index.reshape(-1)).reshape(())
    d = normalize_dim("index_select", dim, x.ndim)
    _check_index("index_select", index)
    if index.ndim > 1:
        raise OpError(f"index_select: index must be 0-D or 1-D, got {describe(index)}")
    if index.device == "cpu":  # free on the host, and names this op (a device flags it in take)
        _check_range("index_select", index._host(), x.shape[d], d)
    return take(x.movedim(d, 0), index.reshape(-1)).movedim(0, d)


# -- gather / scatter_add -----------------------------------------------------
def _gather_infer(x, index, *, dim):
    _check_index("gather", index)
    if index.ndim != x.ndim:
        raise OpError(f"gather: index must have as many dims as input ({describe(x, index)})")
    for d in range(x.ndim):
        if d != dim and index.shape[d] > x.shape[d]:
            raise OpError(f"gather: index {tuple(index.shape)} is larger than input "
                          f"{tuple(x.shape)} at dimension {d}")
    return index.shape, x.dtype


def _full_index(index, dim):
    grids = list(np.ogrid[tuple(slice(0, n) for n in index.shape)])
    grids[dim] = index
    return tuple(grids)


def _check_range(op_name, index, n, dim):
    """numpy would wrap negative values silently; PyTorch rejects them here (take and
    index_add serve index_select, embedding and index_add, which reject them too;
    x[key] wraps its negative indices itself before calling take)."""
    if index.size and (index.min() < 0 or index.max() >= n):
        bad = index.min() if index.min() < 0 else index.max()
        raise IndexError(f"{op_name}: index {bad} is out of bounds for dimension {dim} with size {n} "
                         f"(indices must be in [0, {n}))")


def _gather_kernel(x, index, *, dim):
    _check_range("gather", index, x.shape[dim], dim)
    return x[_full_index(index, dim)]


def _scatter_add_kernel(x, index, src, *, dim):
    _check_range("scatter_add", index, x.shape[dim], dim)
    out = np.array(x, copy=True)
    np.add.at(out, _full_index(index, dim), src[tuple(slice(0, n) for n in index.shape)])
    return out


def _scatter_add_infer(x, index, src, *, dim):
    _gather_infer(x, index, dim=dim)
    if src.ndim != index.ndim or any(s < i for s, i in zip(src.shape, index.shape)):
        raise OpError(f"scatter_add: src {tuple(src.shape)} must be at least as large as index "
                      f"{tuple(index.shape)} in every dimension")
    return x.shape, x.dtype


def _scatter_add_vjp(g, x, index, src, *, out, dim):
    gs = gather(g, dim, index)
    if tuple(gs.shape) != tuple(src.shape):
        gs = unslice(gs, src.shape, [(0, n, 1) for n in index.shape])
    return g, None, gs


GATHER = defop("gather", infer=_gather_infer, numpy=_gather_kernel, wgsl=Kernel("index.wgsl", "gather", "index.gather"),
               kind="index", vjp=lambda g, x, index, *, out, dim: (scatter_add(_zeros_like(x), dim, index, g), None))
SCATTER_ADD = defop("scatter_add", kind="index", infer=_scatter_add_infer, numpy=_scatter_add_kernel,
                    wgsl=Kernel("index.wgsl", "scatter_add", "index.scatter_add"),
                    vjp=_scatter_add_vjp)


def gather(x, dim, index):
    """``out[i][j] = x[index[i][j]][j]`` for dim 0, and so on, as in ``torch.gather``."""
    if x.ndim == 0:  # a 0-d tensor acts as one element along dim 0; the result has index's shape
        normalize_dim("gather", dim, 1)
        return apply(GATHER, x.reshape(1), index.reshape(-1), dim=0).reshape(tuple(index.shape))
    if index.numel() == 0:  # PyTorch accepts any empty index, of any shape and integer dtype
        return zeros(tuple(index.shape), dtype=x.dtype, device=x.device) + x.sum() * 0
    return apply(GATHER, x, index, dim=normalize_dim("gather", dim, x.ndim))


@autocast_op("scatter_add")
def scatter_add(x, dim, index, src):
    """Out-of-place ``torch.scatter_add``: ``out[index[i][j]][j] += src[i][j]`` for dim 0."""
    if x.ndim == 0:  # a 0-d tensor acts as one element along dim 0
        normalize_dim("scatter_add", dim, 1)
        return apply(SCATTER_ADD, x.reshape(1), index.reshape(-1), src.reshape(-1), dim=0).reshape(())
    return apply(SCATTER_ADD, x, index, src, dim=normalize_dim("scatter_add", dim, x.ndim))


# -- x[key] -----------------------------------------------------------------------
def _to_index_tensor(item, device):
    if isinstance(item, Tensor):
        return item if item.device == device else item.to(device)
    return tensor(np.asarray(item) if not isinstance(item, np.ndarray) else item, device=device)


class _NewAxis:
    """A 0-d bool mask: a new axis of size 1 (True) or 0 (False), as in PyTorch."""

    def __init__(self, index):
        self.index = index


def _normalize_key(x, key):
    """Expand Ellipsis, turn lists/arrays into tensors and masks into index tensors."""
    if not isinstance(key, tuple):
        key = (key,)
    items = []
    for item in key:
        if isinstance(item, range):  # x[range(n), y], as the PyTorch tutorials write
            item = list(item)
        if isinstance(item, (list, np.ndarray)) or (isinstance(item, Tensor) and item.device != x.device):
            item = _to_index_tensor(item, x.device)  # cpu index tensors index any device, as in PyTorch
        if isinstance(item, (bool, np.bool_)):
            raise OpError("index: a Python bool as an index is not supported; use a bool tensor mask")
        items.append(item)
    consumed = sum(i.ndim if isinstance(i, Tensor) and i.dtype is dtypes.bool_ else
                   0 if i is None or i is Ellipsis else 1 for i in items)
    if sum(i is Ellipsis for i in items) > 1:
        raise OpError("index: an index can only have a single ellipsis ('...')")
    if consumed > x.ndim:
        raise IndexError(f"index: too many indices for tensor of dimension {x.ndim} "
                         f"(shape {tuple(x.shape)}, got {consumed})")
    expanded, dim = [], 0
    for item in items:
        if item is Ellipsis:
            expanded += [slice(None)] * (x.ndim - consumed)
            dim += x.ndim - consumed
        elif isinstance(item, Tensor) and item.dtype is dtypes.bool_ and item.ndim == 0:
            selected = np.arange(int(bool(item.item())), dtype=np.int64)  # [0] or []
            expanded.append(_NewAxis(_to_index_tensor(selected, x.device)))
        elif isinstance(item, Tensor) and item.dtype is dtypes.bool_:
            covered = tuple(x.shape[dim:dim + item.ndim])
            if tuple(item.shape) != covered:
                raise IndexError(f"index: the mask of shape {tuple(item.shape)} does not match the "
                                 f"indexed tensor's shape {covered} at dimension {dim}")
            positions = np.nonzero(item._host())
            expanded += [_to_index_tensor(p.astype(np.int64), x.device) for p in positions]
            dim += item.ndim
        else:
            if isinstance(item, Tensor) and item.dtype.name not in _INDEX_DTYPES:
                raise OpError(f"index: tensors used as indices must be int64, int32 or bool "
                              f"tensors, got {describe(item)}")
            expanded.append(item)
            dim += item is not None
    if not any(i is Ellipsis for i in items):
        expanded += [slice(None)] * (x.ndim - consumed)
    return expanded


def _resolve_key(x, key):
    """``x[key]`` as basic slicing then advanced indexing: one normalized (start, stop,
    step) per dim of x, the shape after slicing (ints dropped, None added), and the
    advanced items as (position in that shape, index tensor, dim size)."""
    items = _normalize_key(x, key)
    slices, out_shape, adv = [], [], []  # adv: (position in out_shape, index tensor, size)
    dim = 0
    for item in items:
        if item is None or isinstance(item, _NewAxis):
            if isinstance(item, _NewAxis):
                adv.append((len(out_shape), item.index, 1))
            out_shape.append(1)
            continue
        n = x.shape[dim]
        if isinstance(item, slice):
            start, stop, step = item.indices(n)
            if step <= 0:
                raise ValueError(f"index: step must be greater than zero, got {item.step}")
            slices.append((start, stop, step))
            out_shape.append(len(range(start, stop, step)))
        elif isinstance(item, Tensor) and item.ndim > 0:
            _check_bounds(item, n, dim)
            slices.append((0, n, 1))
            adv.append((len(out_shape), item, n))
            out_shape.append(n)
        else:
            # Ints (and 0-d int tensors) select and drop their dim before any
            # advanced indexing, as in PyTorch; numpy would treat them as advanced
            # indices and so could move the result dims (x[1, :, idx]).
            i = _int_index(item, n, dim)
            slices.append((i, i + 1, 1))
        dim += 1
    return slices, out_shape, adv


def getitem(x, key):
    slices, out_shape, adv = _resolve_key(x, key)
    y = reshape(slice_dims(x, slices), tuple(out_shape))
    if not adv:
        if y is not x:  # x[:] and x[...] are x itself
            y._view_of = (x, "getitem", key)  # an in-place change of y is one of x (see update_)
        return y
    positions = [p for p, _, _ in adv]
    rest = [p for p in range(y.ndim) if p not in positions]
    y = permute(y, *(positions + rest))
    y = reshape(y, (math.prod(n for _, _, n in adv),) + tuple(y.shape[len(adv):]))
    batch = broadcast_shapes("index", *[tuple(t.shape) for _, t, _ in adv])
    flat, stride, bad = None, 1, None
    for _, t, n in reversed(adv):
        if t.numel():
            t = where(t < 0, t + n, t)  # -n..-1 -> 0..n-1; anything else stays out of [0, n)
            if len(adv) > 1 and t.device != "cpu":
                # The cpu has checked each index already (_check_bounds). A device can't
                # without a readback, and an out-of-range index of one dim could combine
                # into an in-range flat index: mark those positions -1, which take flags.
                outside = logical_or(t < 0, t >= n)
                bad = outside if bad is None else logical_or(bad, outside)
        term = t * stride if stride != 1 else t
        flat = term if flat is None else flat + term
        stride *= n
    if bad is not None:
        flat = where(bad, -1, flat)
    out = take(y, flat.expand(batch) if tuple(flat.shape) != batch else flat)
    contiguous = positions == list(range(positions[0], positions[0] + len(positions)))
    if contiguous and positions[0] > 0:
        nb, p = len(batch), positions[0]
        order = list(range(nb, nb + p)) + list(range(nb)) + list(range(nb + p, out.ndim))
        out = permute(out, *order)
    return out


@input_check
def _check_bounds(index, n, dim):
    """Index tensors are checked per dim before they are wrapped (-1 -> n - 1) and
    combined into one flat index, where a bad value could land in range."""
    if index.numel() == 0 or index.device != "cpu":
        # A GPU checks in its kernels and reports at the next read (reading the index
        # back here would stall the queue on every indexing op); getitem keeps a
        # wrapped index that is still out of range out of range for take.
        return
    values = index._host()
    lo, hi = int(values.min()), int(values.max())
    if hi >= n or lo < -n:
        raise IndexError(f"index {hi if hi >= n else lo} is out of bounds for dimension {dim} "
                         f"with size {n}")


def _int_index(item, n, dim):
    try:
        i = int(item.__index__())
    except (AttributeError, TypeError):
        raise TypeError(f"index: only integers, slices, None, Ellipsis, and int or bool tensors "
                        f"are valid indices, got {type(item).__name__}") from None
    if not -n <= i < n:
        raise IndexError(f"index {i} is out of bounds for dimension {dim} with size {n}")
    return i % n if n else i


# -- writing ------------------------------------------------------------------------
def _numpy_key(key):
    items = key if isinstance(key, tuple) else (key,)
    out = tuple(i._host() if isinstance(i, Tensor) else i for i in items)
    return out if isinstance(key, tuple) else out[0]


def _assign_infer(dst, src, *positions, **attrs):
    target = tuple(dst.shape)
    if positions:
        target = tuple(positions[0].shape)
    elif "view" in attrs:
        target = tuple(attrs["view"][1])
    elif "key" in attrs:
        target = tuple(getitem(dst.detach(), attrs["key"]).shape)
    try:
        broadcast_shapes("setitem", src.shape, target)
        if broadcast_shapes("setitem", src.shape, target) != target:
            raise OpError("")
    except OpError:
        raise OpError(f"setitem: value of shape {tuple(src.shape)} cannot be broadcast to the "
                      f"indexed shape {target}") from None
    return dst.shape, dst.dtype


def _setitem_kernel(dst, src, *positions, key, view=None):
    # Select with the ints first (a view), then index the rest: PyTorch's order, the
    # same as getitem's, so the value is laid out as x[key] is (numpy's own rule
    # would move the advanced dims for keys like [1, :, idx]).
    items = _numpy_key(key if isinstance(key, tuple) else (key,))
    total = sum(0 if i is None or i is Ellipsis else
                np.ndim(i) if np.asarray(i).dtype == np.bool_ else 1 for i in items)
    basic, rest, dim = [slice(None)] * dst.ndim, [], 0
    for i in items:
        if isinstance(i, (int, np.integer, np.ndarray)) and not isinstance(i, (bool, np.bool_)) \
                and np.ndim(i) == 0 and np.asarray(i).dtype.kind in "iu":
            basic[dim] = int(i)
        else:
            rest.append(i)
        dim += dst.ndim - total if i is Ellipsis else 0 if i is None else \
            np.ndim(i) if np.asarray(i).dtype == np.bool_ else 1
    view = dst[tuple(basic) + (Ellipsis,)]  # the trailing ... keeps a 0-d result a view
    view[tuple(rest)] = src


def _copy_kernel(dst, src):
    np.copyto(dst, src, casting="unsafe")


def _index_put_kernel(x, value, *positions, key, view=None):
    out = np.array(x, copy=True, order="C")
    _setitem_kernel(out, value, key=key)
    return out


def _index_put_vjp(g, x, value, *positions, out, **where):
    zero = scalar_tensor(0, g.dtype, g.device)
    return apply(INDEX_PUT, g, zero, *positions, **where), getitem(g, where["key"])


# ``x[key] = value``. The numpy kernels index with the key itself. Other backends get
# it resolved here (``_where``): a basic key (ints, slices, None, ...) as ``view``,
# the (start, stop, step) of each dim of x and the indexed shape, which they write
# through; any other key as ``positions``, an extra int32 input shaped like x[key]
# holding 1 + the logical (row-major) position in x of each element it selects, 0
# where an index was out of range (the backend writes nothing then).
SETITEM = defop("setitem", wgsl=Kernel("index.wgsl", "put", "movement.setitem"),
                infer=_assign_infer, inplace=True, numpy=_setitem_kernel)
COPY_INTO = defop("copy_into", wgsl=Kernel("unary.wgsl", "unary", "movement.copy_into"),
                  infer=_assign_infer, inplace=True, numpy=_copy_kernel)
INDEX_PUT = defop("index_put", kind="index", wgsl=Kernel("index.wgsl", "put", "movement.index_put"),
                  infer=_assign_infer, numpy=_index_put_kernel, vjp=_index_put_vjp, reads_inputs=False)


def _is_basic(key) -> bool:
    items = key if isinstance(key, tuple) else (key,)
    return not any(isinstance(i, (Tensor, list, range)) or hasattr(i, "__array__") for i in items)


def _where(x, key):
    """(extra inputs, attrs) that tell x's backend where ``x[key]`` lies (see SETITEM)."""
    if x.device == "cpu":
        return (), {"key": key}
    if _is_basic(key):
        slices, shape, _ = _resolve_key(x, key)
        return (), {"key": key, "view": (tuple(slices), tuple(shape))}
    with autograd.no_grad():
        numbered = arange(1, x.numel() + 1, dtype=dtypes.int32, device=x.device).reshape(tuple(x.shape))
        return (getitem(numbered, key),), {"key": key}


def _value_tensor(dst, value):
    if isinstance(value, Tensor):
        if value.device != dst.device:
            value = value.to(dst.device)
        return cast(value, dst.dtype)
    if isinstance(value, (list, tuple, np.ndarray)):
        return tensor(np.asarray(value), dtype=dst.dtype, device=dst.device)
    return scalar_tensor(value, dst.dtype, dst.device)


def update_(op_name, x, compute, *inputs, write=None, cast=False, direct=False):
    """``x.<op_name>(...)``, an op's in-place form: store ``compute(x, *inputs)``,
    its out-of-place result, in x's memory (or, where no gradient is tracked, let
    ``write(*inputs)`` store it directly). An input that is a view of x is copied
    first: the write would change it under its own feet. As in PyTorch, a result of
    a higher dtype category than x (int += 1.5) is an error, unless ``cast``.
    ``direct``: compute is one op on x (or a chain on its result), which may then write
    straight into x's memory where no gradient is tracked (``registry.writing_into``).

    With gradients tracked (x or an input requires grad), the result is computed
    from x's value and history, then x takes the result's place in the graph, so
    ``h[:, t] = f(h[:, t - 1])`` or ``out += identity`` differentiate as in PyTorch; the
    value before the write is copied (a snapshot) only where a vjp reads it. A leaf that
    requires grad can't change in place."""
    inputs = tuple(clone(t) if isinstance(t, Tensor) and t._version_counter is x._version_counter else t
                   for t in inputs)
    tracked = autograd.is_grad_enabled() and (
        x.requires_grad or any(isinstance(t, Tensor) and t.requires_grad for t in inputs))
    if not tracked:
        if write is not None:
            write(*inputs)
            return x
        if not direct:
            return _store(op_name, x, compute(x, *inputs), cast)
        with writing_into(x):
            result = compute(x, *inputs)
        return x if result is x else _store(op_name, x, result, cast)
    if x._node is None:
        autograd.check_inplace_allowed(op_name, x)  # a leaf that requires grad: refused
    view = _view_of_base(op_name, x)
    if view is not None and view[0]._node is None:
        autograd.check_inplace_allowed(op_name, view[0])  # a view of such a leaf: refused too
    # The value before the write is copied only where the graph needs it: x's own node keeps
    # its output (snapshot, now), or the new ops keep their input (keep_saved_values, after).
    old = autograd.snapshot(x) if view is not None or autograd.output_is_saved(x) else x
    mark = autograd.recording_mark()
    result = compute(old, *inputs)
    if old.requires_grad and not result.requires_grad:
        # Overwritten with constants (fill_, zero_, copy_ of plain data): as in PyTorch,
        # x stays in the graph and passes a zero gradient back.
        result = where(scalar_tensor(True, dtypes.bool_, x.device), result, old)
    if result is x:  # nothing changed (floor_ of an integral value's tensor...)
        return x
    if old is x:
        autograd.keep_saved_values(x, result, mark)
    if view is not None:
        # x shares its base's memory: write the new value into base, whose history
        # must see it, then x is re-derived from base (PyTorch rebases views the same way).
        _, write, reread = view
        _check_same_dtype(op_name, x, result, cast)
        write(result)
        autograd.take_place(x, reread())
        return x
    with autograd.no_grad():
        _store(op_name, x, result, cast)
    autograd.take_place(x, result)
    return x


def _view_of_base(op_name, x):
    """(base, write, reread) when x is a view of a base tensor: ``write(v)`` puts v
    into base where x lies, differentiably; ``reread()`` derives x from base again.
    None when x owns its memory (a reshape that had to copy is no view)."""
    if x._view_of is None:
        return None
    base, kind, arg = x._view_of
    if not get_backend(x.device).shares_memory(x._data, base._data):
        return None
    if kind == "getitem":
        return base, (lambda v: setitem(base, arg, v)), (lambda: getitem(base, arg))
    if kind == "reshape":
        return base, (lambda v: copy_(base, reshape(v, base.shape))), (lambda: reshape(base, arg))
    if kind == "permute":
        return base, (lambda v: copy_(base, permute(v, _inverse(arg)))), (lambda: permute(base, arg))
    if kind == "slice":
        key = tuple(slice(start, stop, step) for start, stop, step in arg)
        return base, (lambda v: setitem(base, key, v)), (lambda: slice_dims(base, arg))
    raise RuntimeError(f"{op_name}: in-place change of a view made by {kind} (shape {tuple(x.shape)}), "
                       f"where several elements share one memory location; use the out-of-place form (y = y + v)")


def _check_same_dtype(op_name, x, result, cast):
    if not cast and dtypes.category_rank(result.dtype) > dtypes.category_rank(x.dtype):
        raise RuntimeError(f"{op_name}: result type {result.dtype.name} can't be cast to the "
                           f"tensor's dtype {x.dtype.name} (shape {tuple(x.shape)}); use the "
                           f"out-of-place form, e.g. x = x.{op_name.rstrip('_')}(...)")


def _store(op_name, x, result, cast):
    _check_same_dtype(op_name, x, result, cast)
    return apply_inplace(COPY_INTO, x, result)


def setitem(x, key, value):
    """``x[key] = value`` in place; differentiable for ``x`` and ``value`` as in PyTorch."""
    value = _value_tensor(x, value)
    positions, where = _where(x, key)
    update_("setitem", x, lambda old, v: apply(INDEX_PUT, old, v, *positions, **where), value,
            write=lambda v: apply_inplace(SETITEM, x, v, *positions, **where), cast=True)


@autocast_op("index_put")
def index_put(x, indices, values, accumulate=False):
    """Out-of-place ``x[indices] = values`` (``torch.index_put``); ``indices`` is a
    tuple of index tensors, or any key ``x[key]`` accepts."""
    if accumulate:
        return _index_put_accumulate(x, indices, _value_tensor(x, values))
    positions, where = _where(x, indices)
    return apply(INDEX_PUT, x, _value_tensor(x, values), *positions, **where)


def _index_put_accumulate(x, indices, values):
    """``x[indices] += values`` out of place, duplicates adding up: the index tensors (each
    for one leading dim of x, negative ones counting from the end) become one flat row
    index into x seen as (rows, rest...), for the row primitive index_add."""
    items = list(indices) if isinstance(indices, (tuple, list)) else [indices]
    index = []
    for item in items:
        t = _to_index_tensor(item, x.device) if not isinstance(item, Tensor) else item
        if t.dtype is dtypes.bool_:
            index += [_to_index_tensor(p.astype(np.int64), x.device) for p in np.nonzero(t._host())]
        else:
            _check_index("index_put", t)
            index.append(t)
    if len(index) > x.ndim:
        raise IndexError(f"index_put: too many indices ({len(index)}) for a tensor of shape {tuple(x.shape)}")
    lead, rest = tuple(x.shape[:len(index)]), tuple(x.shape[len(index):])
    batch = broadcast_shapes("index_put", *[tuple(t.shape) for t in index])
    flat, stride = None, 1
    for t, n in zip(reversed(index), reversed(lead)):
        _check_bounds(t, n, 0)
        t = where(t < 0, t + n, t)
        flat = t * stride if flat is None else flat + t * stride
        stride *= n
    flat = expand(flat, batch).reshape(-1)
    values = expand(values, batch + rest).reshape((-1,) + rest)
    rows = reshape(x, (math.prod(lead),) + rest)
    return reshape(index_add(rows, flat, values), tuple(x.shape))


def copy_(x, src):
    """Overwrite ``x``'s data with ``src`` (broadcast and cast to ``x``); gradients
    flow to ``src``, as in PyTorch."""
    src = _value_tensor(x, src)
    return update_("copy_", x, lambda old, v: expand(v, x.shape), src,
                   write=lambda v: apply_inplace(COPY_INTO, x, v), cast=True)


def nonzero(x, as_tuple=False):
    """Indices of the non-zero elements (reads the data back to the host)."""
    host = x._host()
    positions = np.nonzero(host) if host.ndim else (np.zeros(int(host != 0), dtype=np.int64),)
    if as_tuple:
        return tuple(tensor(p.astype(np.int64), device=x.device) for p in positions)
    if x.ndim == 0:  # PyTorch: shape (1, 0) for a nonzero 0-d tensor, (0, 0) for a zero one
        return tensor(np.zeros((len(positions[0]), 0), dtype=np.int64), device=x.device)
    return tensor(np.stack(positions, axis=1).astype(np.int64).reshape(-1, x.ndim), device=x.device)
