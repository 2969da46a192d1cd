"""Shape/dtype rules shared by op declarations, and turning Python scalars into
tensors. Every user-facing error an op raises is built here or in its ``infer``."""
from __future__ import annotations

from .. import dtypes
from .registry import OpError


def describe(*tensors) -> str:
    return " and ".join(f"{tuple(t.shape)} {t.dtype.name}" for t in tensors)


def broadcast_shapes(op_name: str, *shapes) -> tuple:
    if len(shapes) == 2 and shapes[0] == shapes[1]:  # the common case, on every op's hot path
        return tuple(shapes[0])
    ndim = max(len(s) for s in shapes)
    out = []
    for i in range(ndim):
        size = 1
        for s in shapes:
            d = s[i - ndim + len(s)] if i - ndim + len(s) >= 0 else 1
            if d != 1:
                if size != 1 and size != d:
                    shown = " and ".join(str(tuple(x)) for x in shapes)
                    raise OpError(f"{op_name}: shapes {shown} cannot be broadcast together "
                                  f"(dimension {i - ndim}: {size} vs {d})")
                size = d
        out.append(size)
    return tuple(out)


def normalize_dim(op_name: str, dim, ndim: int) -> int:
    if not isinstance(dim, int) or isinstance(dim, bool):
        raise TypeError(f"{op_name}: dim must be an int, got {dim!r}")
    lo, hi = (-1, 0) if ndim == 0 else (-ndim, ndim - 1)
    if not lo <= dim <= hi:
        raise IndexError(f"{op_name}: dimension out of range (expected to be in range of "
                         f"[{lo}, {hi}], but got {dim})")
    return dim % ndim if ndim else 0


def normalize_dims(op_name: str, dim, ndim: int) -> tuple:
    """``None`` means every dim; an int or a sequence of ints otherwise."""
    if dim is None:
        return tuple(range(ndim))
    if isinstance(dim, int):
        dim = (dim,)
    dims = tuple(sorted(normalize_dim(op_name, d, ndim) for d in dim))
    if len(set(dims)) != len(dims):
        raise ValueError(f"{op_name}: dim {dim} appears more than once")
    if ndim == 0:
        return ()  # a 0-d tensor accepts dim 0 or -1 (as PyTorch does) but has nothing to reduce
    return dims


def reduce_dims(op_name: str, dim, ndim: int) -> tuple:
    """The dims a reduction (sum, mean, amax, var...) runs over: as normalize_dims,
    except that an empty list means every dim, as in PyTorch."""
    return normalize_dims(op_name, None if dim == () or dim == [] else dim, ndim)


def same_dtype_infer(x, *rest, **attrs):
    return x.shape, x.dtype


def broadcast_infer(op_name: str):
    def infer(x, y, **attrs):
        return broadcast_shapes(op_name, x.shape, y.shape), x.dtype
    return infer


def compare_infer(op_name: str):
    def infer(x, y, **attrs):
        return broadcast_shapes(op_name, x.shape, y.shape), dtypes.bool_
    return infer


def reject_complex(op_name: str, x) -> None:
    """A float function that is not holomorphic (or not built for complex) given a complex tensor."""
    if x.dtype.is_complex:
        raise OpError(f"{op_name}: not defined for complex tensors here, got {describe(x)}; apply it to .real "
                      f"and .imag, or .abs(), as the formula needs")


def real_only(op_name: str, infer):
    """``infer``, refusing complex operands: orderings (<, max, relu, floor...) have no meaning
    for them, as in torch."""
    def checked(*tensors, **attrs):
        for t in tensors:
            reject_complex(op_name, t)
        return infer(*tensors, **attrs)
    return checked


def require_float(op_name: str, *tensors) -> None:
    for t in tensors:
        if not t.dtype.is_floating_point:
            raise OpError(f"{op_name}: expected a floating point tensor, got {describe(t)}; "
                          f"convert with .float()")
