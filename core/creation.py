"""Creation ops: ``tensor``, ``zeros``, ``ones``, ``full``, ``arange``,
``linspace``, ``eye``, random tensors and the ``*_like`` forms."""
from __future__ import annotations

import math

import numpy as np

from . import dtypes
from .backend import get_backend, normalize_device
from .backend.scalars import ScalarCache
from .ops.registry import allocate
from .tensor import Tensor
from . import random as wg_random
from .random import numpy_generator_for


def _make(array: np.ndarray, dtype, device, requires_grad=False) -> Tensor:
    device = normalize_device(device)
    data = allocate(get_backend(device), "from_numpy", array, dtype)
    t = Tensor._make(data, array.shape, dtype, device)
    if requires_grad:
        t.requires_grad = True
    return t


def _infer_dtype(data, array: np.ndarray):
    """Python floats give the default float dtype, ints int64, bools bool; numpy
    arrays keep their dtype (float64 stays float64, as in PyTorch)."""
    if isinstance(data, np.ndarray) or isinstance(data, np.generic):
        return dtypes.from_numpy(array.dtype)
    if array.dtype.kind == "f":
        return dtypes.get_default_dtype()
    if array.dtype.kind in "iu":
        return dtypes.int64
    if array.dtype.kind == "b":
        return dtypes.bool_
    if array.dtype.kind == "c":  # Python complex numbers: the default complex dtype, as in torch
        return dtypes.complex128 if dtypes.get_default_dtype() is dtypes.float64 else dtypes.complex64
    if array.size == 0:
        return dtypes.get_default_dtype()
    raise TypeError(f"tensor: could not infer a dtype from {type(data).__name__} "
                    f"(numpy saw {array.dtype}); pass numbers, nested lists or a numpy array")


def tensor(data, dtype=None, device=None, requires_grad=False) -> Tensor:
    """Copy ``data`` (a number, nested lists, a numpy array or a Tensor) into a new tensor.

    Example:
        >>> webgrad.tensor([[1.0, 2.0], [3.0, 4.0]], requires_grad=True)
    """
    if isinstance(data, Tensor):
        data = data.detach()._host()
    elif isinstance(data, (list, tuple)) and any(isinstance(v, Tensor) for v in _flat(data)):
        data = _nested_tensors_to_array(data)
    try:
        array = np.array(data)
    except ValueError as err:
        raise ValueError(f"tensor: data is ragged (sublists of different lengths): {err}") from None
    if array.dtype == object:
        raise TypeError(f"tensor: could not convert {type(data).__name__} to a tensor; "
                        f"expected numbers, nested lists of equal lengths or a numpy array")
    dtype = dtypes.to_dtype(dtype) if dtype is not None else _infer_dtype(data, array)
    return _make(array.astype(dtype.np, order="C", copy=True), dtype, device, requires_grad)


def _flat(items):
    for v in items:
        if isinstance(v, (list, tuple)):
            yield from _flat(v)
        else:
            yield v


def _nested_tensors_to_array(data):
    if isinstance(data, (list, tuple)):
        return [_nested_tensors_to_array(v) for v in data]
    return data.detach()._host() if isinstance(data, Tensor) else data


def as_tensor(data, dtype=None, device=None) -> Tensor:
    if isinstance(data, Tensor):
        return data.to(device=device, dtype=dtype) if (device or dtype) else data
    return tensor(data, dtype=dtype, device=device)


def from_numpy(array: np.ndarray) -> Tensor:
    """Wrap a numpy array as a cpu tensor sharing its memory."""
    if not isinstance(array, np.ndarray):
        raise TypeError(f"from_numpy: expected a numpy.ndarray, got {type(array).__name__}")
    dtype = dtypes.from_numpy(array.dtype)
    if array.dtype != dtype.np:
        raise TypeError(f"from_numpy: numpy dtype {array.dtype} is not supported; convert it to "
                        f"one of {', '.join(d.name for d in dtypes.ALL)} first")
    return Tensor._make(array, array.shape, dtype, "cpu")


def _cached_scalar(value, dtype, device) -> Tensor:
    array = np.array(value, dtype=dtype.np)
    t = _make(array, dtype, device)
    # A trace takes it as a constant, one per number (its stored bytes: -0.0 is not 0.0): the
    # cache may drop it mid-trace (it starts over when full) and hand out another tensor for
    # the same number, and nothing ever writes it, so there is nothing to guard.
    t._cached_scalar = (dtype.name, str(device), array.tobytes())
    return t


SCALARS = ScalarCache(_cached_scalar)


def scalar_tensor(value, dtype, device) -> Tensor:
    """A 0-d tensor for a Python number inside an op, cached (these are never handed to
    the user)."""
    return SCALARS.get(value, dtype, device)


def _size(op_name, size):
    if len(size) == 1 and isinstance(size[0], (tuple, list)):
        size = tuple(size[0])
    for s in size:
        if not isinstance(s, (int, np.integer)) or isinstance(s, bool) or s < 0:
            raise ValueError(f"{op_name}: sizes must be non-negative ints, got {tuple(size)}")
    return tuple(int(s) for s in size)


def _creation(op_name, size, dtype, device, requires_grad, make):
    size = _size(op_name, size)
    dtype = dtypes.to_dtype(dtype) if dtype is not None else dtypes.get_default_dtype()
    device = normalize_device(device)
    t = Tensor._make(make(get_backend(device), size, dtype), size, dtype, device)
    if requires_grad:
        t.requires_grad = True
    return t


def full(size, fill_value, dtype=None, device=None, requires_grad=False) -> Tensor:
    if dtype is None:
        dtype = dtypes.result_type([], [], [fill_value])
    return _creation("full", (size,) if isinstance(size, int) else tuple(size), dtype, device,
                     requires_grad, lambda b, s, d: allocate(b, "full", s, fill_value, d))


def zeros(*size, dtype=None, device=None, requires_grad=False) -> Tensor:
    return _creation("zeros", size, dtype, device, requires_grad, lambda b, s, d: allocate(b, "full", s, 0, d))


def ones(*size, dtype=None, device=None, requires_grad=False) -> Tensor:
    return _creation("ones", size, dtype, device, requires_grad, lambda b, s, d: allocate(b, "full", s, 1, d))


def empty(*size, dtype=None, device=None, requires_grad=False) -> Tensor:
    return zeros(*size, dtype=dtype, device=device, requires_grad=requires_grad)


def _from_generator(generator, draw):
    """A ``make`` for ``_creation`` drawing on the host from ``generator``'s own stream
    (then uploading), so a seeded Generator gives the same numbers on every device."""
    rng = numpy_generator_for(generator)
    return lambda b, s, d: allocate(b, "from_numpy", np.asarray(draw(rng, s)).astype(d.np), d)


def rand(*size, generator=None, dtype=None, device=None, requires_grad=False) -> Tensor:
    """Uniform samples in [0, 1); reproducible with ``webgrad.manual_seed`` (or ``generator``)."""
    make = (_from_generator(generator, lambda rng, s: rng.random(s)) if generator is not None
            else lambda b, s, d: allocate(b, "uniform", s, 0.0, 1.0, d, draw=True))
    return _creation("rand", size, dtype, device, requires_grad, make)


def randn(*size, generator=None, dtype=None, device=None, requires_grad=False) -> Tensor:
    """Standard normal samples; reproducible with ``webgrad.manual_seed`` (or ``generator``)."""
    make = (_from_generator(generator, lambda rng, s: rng.standard_normal(s)) if generator is not None
            else lambda b, s, d: allocate(b, "normal", s, 0.0, 1.0, d, draw=True))
    return _creation("randn", size, dtype, device, requires_grad, make)


def scaled_bernoulli(size, p, scale, dtype, device) -> Tensor:
    """``scale`` with probability ``p``, else 0, drawn in one pass on ``device`` from the global
    stream (``webgrad.manual_seed``): dropout's mask, already divided by the keep probability."""
    return _creation("bernoulli", tuple(size), dtype, device, False,
                     lambda b, s, d: allocate(b, "bernoulli", s, p, scale, d, draw=True))


def randint(low, high=None, size=None, dtype=None, device=None, *, generator=None) -> Tensor:
    """Integers in [low, high), like ``torch.randint(low, high, size)``."""
    if size is None and isinstance(high, (tuple, list)):  # randint(high, size)
        high, size = None, high
    if high is None:
        low, high = 0, low
    if size is None:
        raise TypeError("randint: size is required, e.g. randint(0, 10, (3,))")
    if high <= low:
        raise ValueError(f"randint: high ({high}) must be greater than low ({low})")
    make = (_from_generator(generator, lambda rng, s: rng.integers(low, high, size=s)) if generator is not None
            else lambda b, s, d: allocate(b, "randint", s, low, high, d, draw=True))
    return _creation("randint", (tuple(size),), dtype or dtypes.int64, device, False, make)


def randperm(n, dtype=None, device=None, *, generator=None) -> Tensor:
    perm = wg_random.numpy_generator_for(generator).permutation(n)
    return tensor(perm, dtype=dtype or dtypes.int64, device=device)


def arange(start, end=None, step=1, dtype=None, device=None, requires_grad=False) -> Tensor:
    if end is None:
        start, end = 0, start
    if step == 0:
        raise ValueError("arange: step must be nonzero")
    if dtype is None:
        dtype = dtypes.result_type([], [], [start, end, step])
    count = max(0, math.ceil((end - start) / step))
    return _creation("arange", (count,), dtype, device, requires_grad,
                     lambda b, s, d: allocate(b, "arange", start, step, count, d))


def linspace(start, end, steps, dtype=None, device=None, requires_grad=False) -> Tensor:
    array = np.linspace(start, end, steps)
    return tensor(array, dtype=dtype or dtypes.get_default_dtype(), device=device,
                  requires_grad=requires_grad)


def eye(n, m=None, dtype=None, device=None, requires_grad=False) -> Tensor:
    return tensor(np.eye(n, m), dtype=dtype or dtypes.get_default_dtype(), device=device,
                  requires_grad=requires_grad)


# The *_like functions take PyTorch's memory_format and ignore it: memory is always row-major
# here (see webgrad.memory_format).
def _like(fn, x, dtype, device, requires_grad, *args):
    return fn(*args, tuple(x.shape), dtype=dtype or x.dtype, device=device or x.device,
              requires_grad=requires_grad)


def zeros_like(x, dtype=None, device=None, requires_grad=False, *, memory_format=None) -> Tensor:
    return _like(zeros, x, dtype, device, requires_grad)


def ones_like(x, dtype=None, device=None, requires_grad=False, *, memory_format=None) -> Tensor:
    return _like(ones, x, dtype, device, requires_grad)


def empty_like(x, dtype=None, device=None, requires_grad=False, *, memory_format=None) -> Tensor:
    return _like(zeros, x, dtype, device, requires_grad)


def full_like(x, fill_value, dtype=None, device=None, requires_grad=False, *, memory_format=None) -> Tensor:
    return full(tuple(x.shape), fill_value, dtype=dtype or x.dtype, device=device or x.device,
                requires_grad=requires_grad)


def rand_like(x, dtype=None, device=None, requires_grad=False, *, memory_format=None) -> Tensor:
    return _like(rand, x, dtype, device, requires_grad)


def randn_like(x, dtype=None, device=None, requires_grad=False, *, memory_format=None) -> Tensor:
    return _like(randn, x, dtype, device, requires_grad)


def randint_like(x, low, high=None, dtype=None, device=None, *, memory_format=None) -> Tensor:
    return randint(low, high, tuple(x.shape), dtype=dtype or x.dtype, device=device or x.device)


# -- torch.Tensor(...) and the typed constructors (FloatTensor, LongTensor, ...) ----
def legacy_new(dtype, args, kwargs, caller="Tensor") -> Tensor:
    """``Tensor(data)`` copies data into a tensor of ``dtype``; ``Tensor(2, 3)`` (or a
    ``Size``) makes an uninitialized (here: zero) tensor of that shape; ``Tensor()``
    is empty; ``Tensor(other)`` shares ``other``'s data when the dtype matches."""
    unknown = set(kwargs) - {"device"}
    if unknown:
        raise TypeError(f"{caller}(): unexpected keyword {sorted(unknown)[0]!r}; only device= is accepted. "
                        f"For another dtype use webgrad.tensor(data, dtype=...)")
    device = kwargs.get("device")
    if not args:
        return zeros(0, dtype=dtype, device=device)
    if all(isinstance(a, (int, np.integer)) and not isinstance(a, bool) for a in args) or (
            len(args) == 1 and type(args[0]).__name__ == "Size"):
        return zeros(*args, dtype=dtype, device=device)
    if len(args) > 1:
        raise TypeError(f"{caller}(): expected sizes (ints) or one sequence of data, got {args!r}")
    data = args[0]
    if isinstance(data, Tensor):
        if data.dtype is not dtype:
            raise TypeError(f"{caller}(): expected a {dtype.name} tensor, got {data.dtype.name}; "
                            f"convert with .to(webgrad.{dtype.name})")
        return data.detach() if device is None else data.detach().to(device)
    if isinstance(data, (float, bool, np.floating)):
        raise TypeError(f"{caller}(): a single number is read as a size and must be an int, got {data!r}; "
                        f"for a 0-d tensor use webgrad.tensor({data!r})")
    return tensor(data, dtype=dtype, device=device)


class _TypedTensorMeta(type):
    """``isinstance(t, webgrad.LongTensor)`` checks the dtype, as in PyTorch."""

    dtype: dtypes.DType

    def __instancecheck__(cls, obj) -> bool:
        return isinstance(obj, Tensor) and obj.dtype is cls.dtype


def _typed_tensor(name: str, dtype) -> type:
    def __new__(cls, *args, **kwargs):
        return legacy_new(cls.dtype, args, kwargs, name)

    doc = (f"``webgrad.{name}(data)`` or ``{name}(*sizes)``: a {dtype.name} tensor (PyTorch's legacy "
           f"constructor). Prefer ``webgrad.tensor(data, dtype=webgrad.{dtype.name})``.")
    return _TypedTensorMeta(name, (), {"__new__": __new__, "dtype": dtype, "__doc__": doc})


FloatTensor = _typed_tensor("FloatTensor", dtypes.float32)
DoubleTensor = _typed_tensor("DoubleTensor", dtypes.float64)
LongTensor = _typed_tensor("LongTensor", dtypes.int64)
IntTensor = _typed_tensor("IntTensor", dtypes.int32)
BoolTensor = _typed_tensor("BoolTensor", dtypes.bool_)
