"""Shape and movement ops. Primitives: reshape, permute, expand, slice (basic,
positive steps), its adjoint unslice, cat, flip (a copy, as in PyTorch), and copy.
Views share their base's version counter, so an in-place change through either
is noticed by autograd. Everything else here is composed from those.
"""
from __future__ import annotations

import builtins
import math

import numpy as np

from ..kernels import Elementwise, Kernel, View
from ._helpers import describe, normalize_dim, normalize_dims
from ..backend import get_backend
from .registry import Op, OpError, apply, defop
from ..creation import ones
from .elementwise import promote, where
from ..autograd import is_grad_enabled
from .autocasting import autocast_op


def _as_view(out, x, kind, arg):
    """``out`` shares x's memory: same version counter, and ``_view_of`` records how
    it was made, so an in-place change of out can be written through x (indexing.update_)."""
    out._version_counter = x._version_counter
    if out is not x:
        out._view_of = (x, kind, arg)
    return out


def _shape_args(op_name, shape):
    """Accept f(2, 3), f((2, 3)) and f([2, 3])."""
    if len(shape) == 1 and isinstance(shape[0], (tuple, list)) or (
            len(shape) == 1 and type(shape[0]).__name__ == "Size"):
        shape = tuple(shape[0])
    if all([type(s) is int for s in shape]):  # the common case: nothing to check or convert
        return shape
    for s in shape:
        if not isinstance(s, (int, np.integer)) or isinstance(s, bool):
            raise TypeError(f"{op_name}: sizes must be ints, got {shape!r}")
    return tuple(int(s) for s in shape)


# -- reshape ----------------------------------------------------------------------
def _resolve_shape(x, shape):
    if shape.count(-1) > 1:
        raise OpError(f"reshape: only one dimension can be -1, got {shape}")
    known = math.prod(s for s in shape if s != -1)
    if -1 in shape:
        if known == 0 or x.numel() % known:
            raise OpError(f"reshape: shape {shape} is invalid for input of size {x.numel()} "
                          f"(shape {tuple(x.shape)})")
        shape = tuple(x.numel() // known if s == -1 else s for s in shape)
    if any(s < 0 for s in shape) or math.prod(shape) != x.numel():
        raise OpError(f"reshape: shape {shape} is invalid for input of size {x.numel()} "
                      f"(shape {tuple(x.shape)})")
    return shape


RESHAPE = defop("reshape", wgsl=View("reshape"), infer=lambda x, *, shape: (shape, x.dtype),
                vjp=lambda g, x, *, out, shape: g.reshape(x.shape),
                numpy=lambda x, *, shape: x.reshape(shape))


def reshape(x, *shape):
    shape = _resolve_shape(x, _shape_args("reshape", shape))
    if shape == tuple(x.shape):
        return x
    out = apply(RESHAPE, x, shape=shape)
    if out is not x and not get_backend(x.device).shares_memory(out._data, x._data):
        return out  # the layout needed a copy: a tensor of its own, as with torch.reshape
    return _as_view(out, x, "reshape", shape)


def view(x, *shape):
    return reshape(x, *shape)


def flatten(x, start_dim=0, end_dim=-1):
    if x.ndim == 0:
        return reshape(x, 1)
    s, e = normalize_dim("flatten", start_dim, x.ndim), normalize_dim("flatten", end_dim, x.ndim)
    if s > e:
        raise OpError(f"flatten: start_dim {start_dim} comes after end_dim {end_dim}")
    return reshape(x, x.shape[:s] + (math.prod(x.shape[s:e + 1]),) + x.shape[e + 1:])


def unflatten(x, dim, sizes):
    d = normalize_dim("unflatten", dim, x.ndim)
    sizes = tuple(sizes)
    if -1 in sizes:
        known = math.prod(s for s in sizes if s != -1)
        sizes = tuple(x.shape[d] // known if s == -1 else s for s in sizes)
    if math.prod(sizes) != x.shape[d]:
        raise OpError(f"unflatten: sizes {sizes} do not multiply to dimension {dim} of size {x.shape[d]}")
    return reshape(x, x.shape[:d] + sizes + x.shape[d + 1:])


def squeeze(x, dim=None):
    if dim is None:
        dims = [i for i, n in enumerate(x.shape) if n == 1]
    else:
        dims = [d for d in normalize_dims("squeeze", dim, x.ndim) if x.shape[d] == 1]
    return reshape(x, tuple(n for i, n in enumerate(x.shape) if i not in dims))


def unsqueeze(x, dim):
    d = normalize_dim("unsqueeze", dim, x.ndim + 1)
    return reshape(x, x.shape[:d] + (1,) + x.shape[d:])


# -- permute ----------------------------------------------------------------------
def _inverse(perm):
    inv = [0] * len(perm)
    for i, p in enumerate(perm):
        inv[p] = i
    return tuple(inv)


def _unpermute(g, dims):
    """``g.permute`` by dims' inverse. A g that is itself a view permuted by ``dims`` gives back
    the tensor it views (a transpose of a transpose, as torch's): matmul's vjp makes a transposed
    weight's gradient that way (linalg.py), so it stays an array of its own, kept as ``.grad``."""
    if g._view_of is not None and g._view_of[1:] == ("permute", tuple(dims)) and not is_grad_enabled():
        return g._view_of[0]
    return g.permute(_inverse(dims))


PERMUTE = defop("permute", wgsl=View("permute"), infer=lambda x, *, dims: (tuple(x.shape[d] for d in dims), x.dtype),
                vjp=lambda g, x, *, out, dims: _unpermute(g, dims),
                numpy=lambda x, *, dims: x.transpose(dims))


def permute(x, *dims):
    dims = _shape_args("permute", dims)
    ndim = len(x.shape)
    norm = tuple([d % ndim if -ndim <= d < ndim else normalize_dim("permute", d, ndim) for d in dims])
    if len(norm) != ndim or sorted(norm) != list(range(ndim)):
        raise OpError(f"permute: dims {dims} are not a permutation of the {x.ndim} dims of "
                      f"a tensor of shape {tuple(x.shape)}")
    if norm == tuple(range(ndim)):
        return x
    return _as_view(apply(PERMUTE, x, dims=norm), x, "permute", norm)


def transpose(x, dim0, dim1):
    if x.ndim == 0:
        return x
    a, b = normalize_dim("transpose", dim0, x.ndim), normalize_dim("transpose", dim1, x.ndim)
    perm = list(range(x.ndim))
    perm[a], perm[b] = perm[b], perm[a]
    return permute(x, *perm)


def movedim(x, source, destination):
    source = [source] if isinstance(source, int) else source
    destination = [destination] if isinstance(destination, int) else destination
    src = [normalize_dim("movedim", d, x.ndim) for d in source]
    dst = [normalize_dim("movedim", d, x.ndim) for d in destination]
    order = [d for d in range(x.ndim) if d not in src]
    for d, s in sorted(zip(dst, src)):
        order.insert(d, s)
    return permute(x, *order)


# -- expand -----------------------------------------------------------------------
def _expand_infer(x, *, shape):
    lead = len(shape) - x.ndim
    if lead < 0:
        raise OpError(f"expand: cannot expand shape {tuple(x.shape)} to fewer dims {shape}")
    for i, n in enumerate(x.shape):
        if n != 1 and n != shape[lead + i]:
            raise OpError(f"expand: the expanded size {shape[lead + i]} must match the existing "
                          f"size {n} at dimension {i} (shape {tuple(x.shape)} to {shape})")
    return shape, x.dtype


EXPAND = defop("expand", wgsl=View("expand"), infer=_expand_infer,
               vjp=lambda g, x, *, out, shape: g,  # autograd sums g back to x's shape
               numpy=lambda x, *, shape: np.broadcast_to(x, shape))


def expand(x, *shape):
    shape = _shape_args("expand", shape)
    lead = len(shape) - x.ndim
    shape = tuple(x.shape[i - lead] if s == -1 and i >= lead else s for i, s in enumerate(shape))
    if shape == tuple(x.shape):
        return x
    return _as_view(apply(EXPAND, x, shape=shape), x, "expand", shape)


def repeat(x, *sizes):
    sizes = _shape_args("repeat", sizes)
    if len(sizes) < x.ndim:
        raise OpError(f"repeat: need at least {x.ndim} sizes for shape {tuple(x.shape)}, got {sizes}")
    x = reshape(x, (1,) * (len(sizes) - x.ndim) + tuple(x.shape))
    interleaved = []
    for r, n in zip(sizes, x.shape):
        interleaved += [r, n]
    y = expand(reshape(x, tuple(v for n in x.shape for v in (1, n))), *interleaved)
    return reshape(y, tuple(r * n for r, n in zip(sizes, x.shape)))


# -- slicing ----------------------------------------------------------------------
def _slice_shape(shape, slices):
    return tuple(len(range(start, stop, step)) for (start, stop, step) in slices) + tuple(shape[len(slices):])


def _numpy_slices(slices):
    return tuple(builtins.slice(*s) for s in slices)


def _unslice_kernel(g, *, shape, slices):
    out = np.zeros(shape, dtype=g.dtype)
    out[_numpy_slices(slices)] = g
    return out


SLICE = defop("slice", wgsl=View("slice"), infer=lambda x, *, slices: (_slice_shape(x.shape, slices), x.dtype),
              vjp=lambda g, x, *, out, slices: unslice(g, tuple(x.shape), slices),
              numpy=lambda x, *, slices: x[_numpy_slices(slices)])
UNSLICE = defop("unslice", kind="index", wgsl=Kernel("unary.wgsl", "unary", "movement.unslice"),
                infer=lambda g, *, shape, slices: (shape, g.dtype),
                vjp=lambda gg, g, *, out, shape, slices: apply(SLICE, gg, slices=slices),
                numpy=_unslice_kernel)


def slice_dims(x, slices):
    """Basic slicing: ``slices`` is one normalized (start, stop, step) per leading dim."""
    slices = tuple(slices)
    if all(s == (0, n, 1) for s, n in zip(slices, x.shape)):
        return x
    return _as_view(apply(SLICE, x, slices=slices), x, "slice", slices)


def unslice(g, shape, slices):
    """The adjoint of slicing: zeros of ``shape`` with ``g`` placed at ``slices``."""
    return apply(UNSLICE, g, shape=tuple(shape), slices=tuple(slices))


def narrow(x, dim, start, length):
    """``length`` elements of ``dim`` from ``start`` (negative counts from the end), as a view."""
    d = normalize_dim("narrow", dim, x.ndim)
    n = x.shape[d]
    start, length = int(start), int(length)
    if not -n <= start <= n:
        raise IndexError(f"narrow: start {start} is out of range for dimension {d} of size {n} "
                         f"(shape {tuple(x.shape)}); expected -{n} <= start <= {n}")
    start = start + n if start < 0 else start
    if length < 0 or start + length > n:
        raise RuntimeError(f"narrow: start ({start}) + length ({length}) exceeds dimension {d} of size {n} "
                           f"(shape {tuple(x.shape)}), or length is negative")
    return slice_dims(x, [(0, m, 1) for m in x.shape[:d]] + [(start, start + length, 1)])


# -- cat / stack / split ------------------------------------------------------------
def _cat_infer(*xs, dim):
    first = xs[0]
    for t in xs[1:]:
        if t.ndim != first.ndim or any(a != b for i, (a, b) in enumerate(zip(t.shape, first.shape)) if i != dim):
            raise OpError(f"cat: sizes must match except in dimension {dim}; got "
                          f"{', '.join(str(tuple(x.shape)) for x in xs)}")
    shape = list(first.shape)
    shape[dim] = builtins.sum(t.shape[dim] for t in xs)
    return tuple(shape), first.dtype


def _cat_vjp(g, *xs, out, dim):
    grads, start = [], 0
    for t in xs:
        grads.append(narrow(g, dim, start, t.shape[dim]))
        start += t.shape[dim]
    return tuple(grads)


CAT = defop("cat", wgsl=Kernel("unary.wgsl", "unary", "movement.cat"), infer=_cat_infer, vjp=_cat_vjp,
            reads_inputs=False,
            kind="index", numpy=lambda *xs, dim: np.concatenate(xs, axis=dim))


@autocast_op("cat")
def cat(tensors, dim=0):
    tensors = list(tensors)
    if not tensors:
        raise OpError("cat: expected a non-empty list of tensors")
    # PyTorch skips 1-D empty tensors in cat (legacy behaviour people rely on).
    tensors = [t for t in tensors if not (t.ndim == 1 and t.shape[0] == 0)] or tensors[:1]
    if tensors[0].ndim == 0:
        raise OpError("cat: zero-dimensional tensors cannot be concatenated; use stack")
    d = normalize_dim("cat", dim, tensors[0].ndim)
    tensors = promote("cat", *tensors) if len({t.dtype for t in tensors}) > 1 else tensors
    if len(tensors) == 1:
        return tensors[0]
    return apply(CAT, *tensors, dim=d)


concatenate = cat


@autocast_op("stack")
def stack(tensors, dim=0):
    tensors = list(tensors)
    if not tensors:
        raise OpError("stack: expected a non-empty list of tensors")
    shapes = {tuple(t.shape) for t in tensors}
    if len(shapes) > 1:
        raise OpError(f"stack: expects each tensor to be equal size, got "
                      f"{', '.join(str(tuple(t.shape)) for t in tensors)}")
    d = normalize_dim("stack", dim, tensors[0].ndim + 1)
    return cat([unsqueeze(t, d) for t in tensors], d)


def split(x, split_size_or_sections, dim=0):
    d = normalize_dim("split", dim, x.ndim)
    n = x.shape[d]
    if isinstance(split_size_or_sections, int):
        step = split_size_or_sections
        if step <= 0:
            raise OpError(f"split: split_size must be positive, got {step}")
        sizes = [builtins.min(step, n - i) for i in range(0, n, step)] or [0]
    else:
        sizes = list(split_size_or_sections)
        if builtins.sum(sizes) != n:
            raise OpError(f"split: sections {sizes} do not sum to dimension {dim} of size {n}")
    out, start = [], 0
    for s in sizes:
        out.append(narrow(x, d, start, s))
        start += s
    return tuple(out)


def chunk(x, chunks, dim=0):
    d = normalize_dim("chunk", dim, x.ndim)
    size = -(-x.shape[d] // chunks) if chunks > 0 else 0
    if size <= 0:
        if chunks <= 0:
            raise OpError(f"chunk: chunks must be positive, got {chunks}")
        return (x,)
    return split(x, size, d)


def unbind(x, dim=0):
    d = normalize_dim("unbind", dim, x.ndim)
    return tuple(squeeze(t, d) for t in split(x, 1, d))


# -- pad / flip / copy ------------------------------------------------------------
def pad(x, pad, mode="constant", value=0.0):
    """Pad the last dims: ``pad=(left, right, top, bottom, ...)``; negative values crop."""
    if mode != "constant":
        raise NotImplementedError(f"pad: mode {mode!r} is not supported; use mode='constant'")
    pad = tuple(pad)
    if len(pad) % 2 or len(pad) // 2 > x.ndim:
        raise OpError(f"pad: padding {pad} must have an even length of at most 2 * {x.ndim}")
    crops, widths = [], []
    for i in range(x.ndim):
        j = x.ndim - 1 - i  # pad pairs start from the last dim
        lo, hi = (pad[2 * j], pad[2 * j + 1]) if 2 * j < len(pad) else (0, 0)
        n = x.shape[i]
        crops.append((builtins.max(-lo, 0), n - builtins.max(-hi, 0), 1))
        widths.append((builtins.max(lo, 0), builtins.max(hi, 0)))
    if any(c[1] < c[0] for c in crops):
        raise OpError(f"pad: negative padding {pad} removes more than shape {tuple(x.shape)}")
    x = slice_dims(x, crops)
    if not any(lo or hi for lo, hi in widths):
        return x
    shape = tuple(n + lo + hi for n, (lo, hi) in zip(x.shape, widths))
    place = [(lo, lo + n, 1) for n, (lo, hi) in zip(x.shape, widths)]
    if value == 0:
        return unslice(x, shape, place)
    # Select, not (x - value) + value: that is nan for value=-inf and rounds x for finite values.
    inside = unslice(ones(x.shape, dtype=x.dtype, device=x.device), shape, place) > 0
    return where(inside, unslice(x, shape, place), value)


# torch.flip copies, so an in-place change of the result must not reach x: on the
# device a reversed-stride view, copied (the "flip" launcher). Typed (Op) as its vjp names FLIP itself.
FLIP: Op = defop("flip", wgsl=Kernel("unary.wgsl", "unary", "movement.flip"),
                 infer=lambda x, *, dims: (x.shape, x.dtype),
                 kind="index", reads_inputs=False,
                 vjp=lambda g, x, *, out, dims: apply(FLIP, g, dims=dims),
                 numpy=lambda x, *, dims: np.flip(x, dims).copy())  # np.flip is a view; torch.flip copies


def flip(x, dims):
    return apply(FLIP, x, dims=normalize_dims("flip", dims, x.ndim))


COPY = defop("copy", wgsl=Elementwise("a"), infer=lambda x: (x.shape, x.dtype), vjp=lambda g, x, *, out: g,
             reads_inputs=False,
             numpy=lambda x: np.array(x, copy=True, order="C"))


def clone(x):
    return apply(COPY, x)


def contiguous(x):
    if get_backend(x.device).is_contiguous(x._data):
        return x
    return apply(COPY, x)


__all__ = ["describe"]
