"""The Tensor: data on a device, a dtype, and an optional autograd node.

Methods are one-line forwards to the functions in ``webgrad.ops`` so that the
function form (``webgrad.exp(x)``) and the method form (``x.exp()``) are the same
code. Nothing here knows which backend holds the data.
"""
from __future__ import annotations

import importlib
from typing import Any

import numpy as np

from . import autograd, dtypes
from .backend import get_backend, normalize_device
from .device_api import _INTERNED as _DEVICES, as_device, parse_to_arguments
from .hooks import RemovableHandle
from .memory_format import check as _check_memory_format, is_contiguous as _is_contiguous_in


class Size(tuple):
    """A tensor's shape: a tuple of ints, printed as ``webgrad.Size([2, 3])``."""

    def __repr__(self) -> str:
        return f"webgrad.Size({list(self)})"

    def numel(self) -> int:
        n = 1
        for s in self:
            n *= s
        return n


class Tensor:
    """An n-dimensional array with autograd, on the ``cpu`` or ``webgpu`` device.

    Create tensors with ``webgrad.tensor``, ``zeros``, ``randn`` and friends.
    """

    __slots__ = ("_data", "shape", "dtype", "device", "_requires_grad", "grad", "_node",
                 "_version_counter", "_retains_grad", "_view_of", "__weakref__", "__dict__")
    # The slots' types, for type checkers (annotations without values do not clash with __slots__).
    _data: Any  # the backend's storage: an np.ndarray on cpu, a device buffer on webgpu
    shape: Size
    dtype: dtypes.DType
    device: str
    _requires_grad: bool
    grad: Tensor | None
    _node: autograd.Node | None
    _version_counter: list[int]  # shared by tensors that share memory
    _retains_grad: bool
    _view_of: tuple[Tensor, str, Any] | None
    __array_priority__ = 1000  # numpy defers to our operators: ndarray + Tensor -> Tensor
    _cached_scalar: tuple | None = None  # creation.SCALARS' 0-d constants: (dtype, device, bytes)

    @classmethod
    def _make(cls, data, shape, dtype, device, requires_grad=False):
        t = object.__new__(cls)
        t._data = data
        t.shape = shape if type(shape) is Size else Size(shape)
        t.dtype = dtype
        t.device = _DEVICES.get(device) or as_device(device)  # always a webgrad.device (a str)
        t._requires_grad = requires_grad
        t.grad = None
        t._node = None
        t._version_counter = [0]
        t._retains_grad = False
        t._view_of = None  # (base, how, arg) for a view of base (see ops.movement._as_view)
        return t

    def __new__(cls, *args, **kwargs):
        """``webgrad.Tensor([1, 2])`` (float data), ``Tensor(2, 3)`` (a new tensor of that
        shape), as PyTorch's legacy constructor; prefer ``webgrad.tensor``/``zeros``."""
        from .creation import legacy_new

        return legacy_new(dtypes.get_default_dtype(), args, kwargs)

    def __init__(self, *args, **kwargs):
        pass  # everything happens in __new__

    # -- data: the same memory without autograd history -------------------------------
    @property
    def data(self) -> "Tensor":
        """The same memory as a tensor outside autograd (``p.data.add_(...)`` is not
        recorded), as in PyTorch; in-place changes through it do not bump this tensor's version."""
        return Tensor._make(self._data, self.shape, self.dtype, self.device)

    @data.setter
    def data(self, value: "Tensor") -> None:
        """``p.data = t``: p now holds t's data (shape, dtype, device), keeping its identity,
        ``requires_grad`` and ``.grad``."""
        if not isinstance(value, Tensor):
            raise TypeError(f"data: expected a Tensor, got {type(value).__name__}; wrap it with webgrad.tensor(...)")
        self._data, self.shape, self.dtype, self.device = value._data, value.shape, value.dtype, value.device
        self._view_of = None

    # -- autograd -------------------------------------------------------------
    @property
    def requires_grad(self) -> bool:
        return self._requires_grad

    @requires_grad.setter
    def requires_grad(self, value: bool) -> None:
        if value and not (self.dtype.is_floating_point or self.dtype.is_complex):
            raise RuntimeError(f"only tensors of floating point dtype can require gradients, "
                               f"got {self.dtype.name}")
        if not value and self._node is not None:
            raise RuntimeError("requires_grad can only be turned off on leaf tensors; "
                               "use .detach() for a non-leaf")
        self._requires_grad = bool(value)

    def requires_grad_(self, requires_grad: bool = True) -> "Tensor":
        self.requires_grad = requires_grad
        return self

    @property
    def is_leaf(self) -> bool:
        return self._node is None

    @property
    def grad_fn(self):
        return self._node

    def retain_grad(self) -> None:
        self._retains_grad = True

    def register_post_accumulate_grad_hook(self, hook):
        """Call ``hook(self)`` during backward once this leaf's ``.grad`` holds all of this
        backward's contribution (torch's hook: what DDP uses to reduce gradients early)."""
        if self._node is not None:
            raise RuntimeError("register_post_accumulate_grad_hook: only leaf tensors (parameters, tensors made "
                               "with requires_grad=True) collect a .grad; this tensor is the output of an op")
        hooks = self.__dict__.setdefault("_post_accumulate_grad_hooks", {})
        handle = RemovableHandle(hooks)
        hooks[handle.id] = hook
        return handle

    def backward(self, gradient=None, retain_graph=None, create_graph=False, inputs=None) -> None:
        """Accumulate d(self)/d(leaf) into every leaf's ``.grad`` (only ``inputs``' when given)."""
        autograd.backward(self, gradient, retain_graph, create_graph, inputs=inputs)

    def detach(self) -> "Tensor":
        t = Tensor._make(self._data, self.shape, self.dtype, self.device)
        t._version_counter = self._version_counter  # same memory, same version
        return t

    def detach_(self) -> "Tensor":
        self._node = None
        self._requires_grad = False
        return self

    @property
    def _version(self) -> int:
        return self._version_counter[0]

    def _bump_version(self) -> None:
        self._version_counter[0] += 1

    # -- basic properties -----------------------------------------------------
    @property
    def ndim(self) -> int:
        return len(self.shape)

    def dim(self) -> int:
        return len(self.shape)

    def numel(self) -> int:
        return self.shape.numel()

    def size(self, dim=None):
        if dim is None:
            return self.shape
        return self.shape[ops.normalize_dim("size", dim, self.ndim)]

    def element_size(self) -> int:
        return self.dtype.itemsize

    @property
    def itemsize(self) -> int:
        return self.dtype.itemsize

    @property
    def nbytes(self) -> int:
        """Bytes of the elements (torch's ``nbytes``: numel times the element size)."""
        return self.numel() * self.dtype.itemsize

    def is_floating_point(self) -> bool:
        return self.dtype.is_floating_point

    @property
    def is_cuda(self) -> bool:
        return False

    def nelement(self) -> int:
        return self.shape.numel()

    # torch's device and layout flags: a dense tensor on cpu or webgpu (SparseTensor overrides is_sparse).
    is_xpu = is_mps = is_meta = is_quantized = is_sparse = is_sparse_csr = is_nested = is_mkldnn = \
        is_vulkan = is_ipu = is_mtia = is_maia = property(lambda self: False)

    @property
    def is_cpu(self) -> bool:
        return self.device == "cpu"

    def is_inference(self) -> bool:
        return False  # webgrad has no inference tensors (inference_mode works like no_grad)

    def is_signed(self) -> bool:
        return self.dtype.category != "bool"

    def to_sparse(self, *args, **kwargs):
        """A sparse COO tensor of the nonzero entries (``webgrad.sparse``)."""
        return importlib.import_module("webgrad.sparse").to_sparse(self, *args, **kwargs)

    def to_dense(self, dtype=None, *, masked_grad=None) -> "Tensor":
        return self if dtype is None else self.type(dtype)  # already dense

    def is_conj(self) -> bool:
        return False

    def is_neg(self) -> bool:
        return False

    def __len__(self) -> int:
        if not self.shape:
            raise TypeError("len() of a 0-d tensor")
        return self.shape[0]

    # -- leaving the device ---------------------------------------------------
    def numpy(self) -> np.ndarray:
        """The data as a numpy array (shares memory on cpu, copies from a GPU)."""
        if self.requires_grad:
            raise RuntimeError("Can't call numpy() on a tensor that requires grad. "
                               "Use tensor.detach().numpy() instead.")
        return self._host()

    async def numpy_async(self) -> np.ndarray:
        """Like ``numpy()`` but awaitable; works where blocking reads cannot (browsers)."""
        backend = get_backend(self.device)
        if hasattr(backend, "to_numpy_async"):
            return self._as_host_dtype(await backend.to_numpy_async(self._data))
        return self.detach().numpy()

    def _host(self) -> np.ndarray:
        if _registry.OBSERVERS:  # e.g. inside webgrad.compile's trace: a graph break
            _registry.host_read(self)
        return self._as_host_dtype(get_backend(self.device).to_numpy(self._data))

    def _as_host_dtype(self, array: np.ndarray) -> np.ndarray:
        # Devices may store a narrower type (int64 as int32, bool as uint32 on WebGPU).
        array = array.reshape(self.shape)
        return array if array.dtype == self.dtype.np else array.astype(self.dtype.np)

    def item(self):
        if self.numel() != 1:
            raise RuntimeError(f"item(): a tensor with {self.numel()} elements (shape "
                               f"{tuple(self.shape)}) cannot be converted to a Python number")
        return self._host().reshape(()).item()

    def tolist(self):
        return self._host().tolist()

    def __float__(self) -> float:
        return float(self.item())

    def __int__(self) -> int:
        return int(self.item())

    def __index__(self) -> int:
        if self.dtype.category == "float":
            raise TypeError("only integer tensors can be used as an index")
        return int(self.item())

    def __bool__(self) -> bool:
        if self.numel() != 1:
            raise RuntimeError(f"Boolean value of a tensor with {self.numel()} elements is "
                               f"ambiguous; use .any() or .all()")
        return bool(self.item())

    def __array__(self, dtype=None, copy=None):
        array = self.detach().numpy()
        return array if dtype is None else array.astype(dtype)

    def __repr__(self) -> str:
        from .printing import tensor_repr

        return tensor_repr(self)

    def __hash__(self) -> int:
        return id(self)

    def __deepcopy__(self, memo) -> "Tensor":
        """A copy with its own memory on the same device (``copy.deepcopy(model.state_dict())``
        works on webgpu too); like PyTorch, only for leaves (use .detach().clone() otherwise)."""
        if id(self) in memo:
            return memo[id(self)]
        if not self.is_leaf:
            raise RuntimeError("deepcopy: only tensors created by the user (graph leaves) can be deep-copied; "
                               "use t.detach().clone() for a result of other ops")
        with autograd.no_grad():
            copied = ops.clone(self)
        copied._requires_grad = self._requires_grad
        memo[id(self)] = copied
        if self.grad is not None:
            copied.grad = self.grad.__deepcopy__(memo)
        return copied

    def __format__(self, spec: str) -> str:
        """``f"{loss:.4f}"`` formats the number of a one-element tensor; other tensors
        take only an empty spec (their repr), as in PyTorch."""
        if self.numel() == 1:
            return format(self.item(), spec)
        if not spec:
            return str(self)
        raise TypeError(f"unsupported format string {spec!r} for a tensor of shape {tuple(self.shape)}; "
                        f"only one-element tensors take a number format (use .item() or .tolist())")

    def __iter__(self):
        if not self.shape:
            raise TypeError("iteration over a 0-d tensor")
        return (self[i] for i in range(self.shape[0]))

    # -- dtype and device -----------------------------------------------------
    def to(self, *args, **kwargs) -> "Tensor":
        """``t.to("webgpu")``, ``t.to(webgrad.float64)``, ``t.to(other_tensor)``,
        ``t.to("cpu", webgrad.float64, non_blocking, copy)``: torch's three overloads, positional or
        keyword. ``non_blocking`` and ``memory_format`` are accepted (moves are synchronous here)."""
        device, dtype, copy = parse_to_arguments(args, kwargs)
        out = self
        if device is not None:
            device = normalize_device(device)
            if device != self.device:
                out = ops.to_device(out, device)
        if dtype is not None:
            out = out.type(dtype)
        if copy and out is self:
            out = self.clone()
        return out

    def type(self, dtype=None):
        """``t.type(webgrad.float64)`` converts; ``t.type()`` names the type, e.g. ``'webgrad.FloatTensor'``."""
        if dtype is None:
            return f"webgrad.{_LEGACY_NAMES.get(self.dtype.name, self.dtype.name)}"
        dtype = dtypes.to_dtype(getattr(dtype, "dtype", dtype))  # also webgrad.LongTensor and friends
        return self if dtype is self.dtype else ops.cast(self, dtype)

    def float(self) -> "Tensor":
        return self.type(dtypes.float32)

    def double(self) -> "Tensor":
        return self.type(dtypes.float64)

    def half(self) -> "Tensor":
        return self.type(dtypes.float16)

    def bfloat16(self) -> "Tensor":
        return self.type(dtypes.bfloat16)

    def long(self) -> "Tensor":
        return self.type(dtypes.int64)

    def int(self) -> "Tensor":
        return self.type(dtypes.int32)

    def bool(self) -> "Tensor":
        return self.type(dtypes.bool_)

    def byte(self) -> "Tensor":
        return self.type(dtypes.uint8)

    def char(self) -> "Tensor":
        return self.type(dtypes.int8)

    def short(self) -> "Tensor":
        return self.type(dtypes.int16)

    def cpu(self) -> "Tensor":
        return self.to("cpu")

    def cuda(self, device=None, non_blocking=False) -> "Tensor":
        """Raises, as PyTorch does without CUDA: use ``.to(device)`` with ``webgrad.accelerator``."""
        raise RuntimeError("cuda(): webgrad has no CUDA backend (webgrad.cuda.is_available() is False); use "
                           ".to(webgrad.accelerator.current_accelerator()) for WebGPU, or stay on 'cpu'")

    def clone(self, *, memory_format=None) -> "Tensor":
        """A copy; ``memory_format`` is accepted (memory is always row-major here, see webgrad.memory_format)."""
        _check_memory_format("clone", memory_format)
        return ops.clone(self)

    def contiguous(self, memory_format=None) -> "Tensor":
        """Row-major memory; ``memory_format`` is accepted (e.g. channels_last) without changing the layout."""
        _check_memory_format("contiguous", memory_format)
        return ops.contiguous(self)

    def is_contiguous(self, memory_format=None):  # -> bool (here `bool` names the method)
        return _is_contiguous_in(self.shape, get_backend(self.device).is_contiguous(self._data), memory_format)

    # -- in place ---------------------------------------------------------------
    def copy_(self, src) -> "Tensor":
        return ops.copy_(self, src)

    def fill_(self, value) -> "Tensor":
        return ops.copy_(self, value)

    def zero_(self) -> "Tensor":
        return ops.copy_(self, 0)

    def add_(self, other, alpha=1) -> "Tensor":
        return ops.update_("add_", self, lambda t, o: ops.add(t, o, alpha=alpha), other, direct=True)

    def sub_(self, other, alpha=1) -> "Tensor":
        return ops.update_("sub_", self, lambda t, o: ops.sub(t, o, alpha=alpha), other, direct=True)

    def mul_(self, other) -> "Tensor":
        return ops.update_("mul_", self, ops.mul, other, direct=True)

    def div_(self, other) -> "Tensor":
        return ops.update_("div_", self, ops.div, other, direct=True)

    def clamp_(self, min=None, max=None) -> "Tensor":
        return ops.update_("clamp_", self, ops.clamp, min, max)

    # Random refills (core/ops/random_ops.py): webgrad's stream, or generator=.
    def uniform_(self, *args, generator=None, **kwargs) -> "Tensor":
        return ops.random_ops.uniform_(self, *args, generator=generator, **kwargs)

    def normal_(self, mean=0.0, std=1.0, *, generator=None) -> "Tensor":
        return ops.random_ops.normal_(self, mean, std, generator=generator)

    def bernoulli_(self, p=0.5, *, generator=None): return ops.random_ops.bernoulli_(self, p, generator=generator)
    def exponential_(self, lambd=1.0, *, generator=None):
        return ops.random_ops.exponential_(self, lambd, generator=generator)
    def geometric_(self, p, *, generator=None): return ops.random_ops.geometric_(self, p, generator=generator)
    def cauchy_(self, median=0.0, sigma=1.0, *, generator=None):
        return ops.random_ops.cauchy_(self, median, sigma, generator=generator)
    def log_normal_(self, mean=1.0, std=2.0, *, generator=None):
        return ops.random_ops.log_normal_(self, mean, std, generator=generator)
    def random_(self, *args, generator=None, **kwargs):
        return ops.random_ops.random_(self, *args, generator=generator, **kwargs)
    def bernoulli(self, p=None, *, generator=None): return ops.bernoulli(self, p, generator=generator)

    def masked_fill_(self, mask, value) -> "Tensor":
        return ops.update_("masked_fill_", self, ops.masked_fill, mask, value)

    def pow_(self, exponent) -> "Tensor":
        return ops.update_("pow_", self, ops.pow, exponent)

    def __setitem__(self, key, value) -> None:
        ops.setitem(self, key, value)

    def __getitem__(self, key) -> "Tensor":
        return ops.getitem(self, key)

    # -- arithmetic operators ---------------------------------------------------
    def __add__(self, other): return ops.add(self, other)
    def __radd__(self, other): return ops.add(other, self)
    def __sub__(self, other): return ops.sub(self, other)
    def __rsub__(self, other): return ops.sub(other, self)
    def __mul__(self, other): return ops.mul(self, other)
    def __rmul__(self, other): return ops.mul(other, self)
    def __truediv__(self, other): return ops.div(self, other)
    def __rtruediv__(self, other): return ops.div(other, self)
    def __floordiv__(self, other): return ops.floor_divide(self, other)
    def __rfloordiv__(self, other): return ops.floor_divide(other, self)
    def __mod__(self, other): return ops.remainder(self, other)
    def __rmod__(self, other): return ops.remainder(other, self)
    def __pow__(self, other): return ops.pow(self, other)
    def __rpow__(self, other): return ops.pow(other, self)
    def __matmul__(self, other): return ops.matmul(self, other)
    def __rmatmul__(self, other): return ops.matmul(other, self)
    def __neg__(self): return ops.neg(self)
    def __pos__(self): return self
    def __abs__(self): return ops.abs(self)
    # Bitwise on bool and integer tensors (on bools the same as logical), an error on floats.
    def __invert__(self): return ops.bitwise_not(self)
    def __and__(self, other): return ops.bitwise_and(self, other)
    def __or__(self, other): return ops.bitwise_or(self, other)
    def __xor__(self, other): return ops.bitwise_xor(self, other)
    def __rand__(self, other): return ops.bitwise_and(other, self)
    def __ror__(self, other): return ops.bitwise_or(other, self)
    def __rxor__(self, other): return ops.bitwise_xor(other, self)
    def __lshift__(self, other): return ops.bitwise_left_shift(self, other)
    def __rshift__(self, other): return ops.bitwise_right_shift(self, other)
    def __rlshift__(self, other): return ops.bitwise_left_shift(other, self)
    def __rrshift__(self, other): return ops.bitwise_right_shift(other, self)
    def __iand__(self, other): return ops.update_("bitwise_and_", self, ops.bitwise_and, other)
    def __ior__(self, other): return ops.update_("bitwise_or_", self, ops.bitwise_or, other)
    def __ixor__(self, other): return ops.update_("bitwise_xor_", self, ops.bitwise_xor, other)
    def bitwise_and(self, other): return ops.bitwise_and(self, other)
    def bitwise_or(self, other): return ops.bitwise_or(self, other)
    def bitwise_xor(self, other): return ops.bitwise_xor(self, other)
    def bitwise_not(self): return ops.bitwise_not(self)
    def bitwise_left_shift(self, other): return ops.bitwise_left_shift(self, other)
    def bitwise_right_shift(self, other): return ops.bitwise_right_shift(self, other)
    def __eq__(self, other): return ops.eq(self, other)  # type: ignore[override]
    def __ne__(self, other): return ops.ne(self, other)  # type: ignore[override]
    def __lt__(self, other): return ops.lt(self, other)
    def __le__(self, other): return ops.le(self, other)
    def __gt__(self, other): return ops.gt(self, other)
    def __ge__(self, other): return ops.ge(self, other)

    def __iadd__(self, other): return self.add_(other)
    def __isub__(self, other): return self.sub_(other)
    def __imul__(self, other): return self.mul_(other)
    def __itruediv__(self, other): return self.div_(other)

    # -- elementwise ----------------------------------------------------------------
    def add(self, other, alpha=1): return ops.add(self, other, alpha=alpha)
    def sub(self, other, alpha=1): return ops.sub(self, other, alpha=alpha)
    def mul(self, other): return ops.mul(self, other)
    def div(self, other, *, rounding_mode=None): return ops.div(self, other, rounding_mode=rounding_mode)
    def pow(self, exponent): return ops.pow(self, exponent)
    def neg(self): return ops.neg(self)
    def abs(self): return _complex_ops().abs(self) if self.dtype.is_complex else ops.abs(self)
    def exp(self): return ops.exp(self)
    def log(self): return ops.log(self)
    def log1p(self): return ops.log1p(self)
    def sqrt(self): return ops.sqrt(self)
    def rsqrt(self): return ops.rsqrt(self)
    def sin(self): return ops.sin(self)
    def cos(self): return ops.cos(self)
    def tanh(self): return ops.tanh(self)
    def sigmoid(self): return ops.sigmoid(self)
    def relu(self): return ops.relu(self)
    def erf(self): return ops.erf(self)
    def reciprocal(self): return ops.reciprocal(self)
    def square(self): return ops.mul(self, self)
    def floor(self): return ops.floor(self)
    def ceil(self): return ops.ceil(self)
    def round(self, *, decimals=0): return ops.round(self, decimals=decimals)
    def sign(self): return ops.sign(self)
    def clamp(self, min=None, max=None): return ops.clamp(self, min, max)
    clip = clamp
    def maximum(self, other): return ops.maximum(self, other)
    def minimum(self, other): return ops.minimum(self, other)
    def eq(self, other): return ops.eq(self, other)
    def ne(self, other): return ops.ne(self, other)
    def lt(self, other): return ops.lt(self, other)
    def le(self, other): return ops.le(self, other)
    def gt(self, other): return ops.gt(self, other)
    def ge(self, other): return ops.ge(self, other)
    def logical_not(self): return ops.logical_not(self)
    def logical_and(self, other): return ops.logical_and(self, other)
    def logical_or(self, other): return ops.logical_or(self, other)
    def logical_xor(self, other): return ops.logical_xor(self, other)
    def isnan(self): return ops.isnan(self)
    def isinf(self): return ops.isinf(self)
    def isfinite(self): return ops.isfinite(self)
    def nan_to_num(self, nan=0.0, posinf=None, neginf=None): return ops.nan_to_num(self, nan, posinf, neginf)

    def nan_to_num_(self, nan=0.0, posinf=None, neginf=None):
        return ops.update_("nan_to_num_", self, lambda old: ops.nan_to_num(old, nan, posinf, neginf))

    def masked_fill(self, mask, value): return ops.masked_fill(self, mask, value)

    # -- more elementwise maths (core/ops/elementwise.py, pointwise.py) ---------------------
    def tan(self): return ops.tan(self)
    def asin(self): return ops.asin(self)
    def acos(self): return ops.acos(self)
    def atan(self): return ops.atan(self)
    def atan2(self, other): return ops.atan2(self, other)
    def sinh(self): return ops.sinh(self)
    def cosh(self): return ops.cosh(self)
    def asinh(self): return ops.asinh(self)
    def acosh(self): return ops.acosh(self)
    def atanh(self): return ops.atanh(self)
    arcsin, arccos, arctan, arctan2, arcsinh, arccosh, arctanh = asin, acos, atan, atan2, asinh, acosh, atanh
    def log2(self): return ops.log2(self)
    def log10(self): return ops.log10(self)
    def expm1(self): return ops.expm1(self)
    def exp2(self): return ops.exp2(self)
    def logaddexp(self, other): return ops.logaddexp(self, other)
    def logaddexp2(self, other): return ops.logaddexp2(self, other)
    def erfc(self): return ops.erfc(self)
    def erfinv(self): return ops.erfinv(self)
    def lgamma(self): return ops.lgamma(self)
    def digamma(self): return ops.digamma(self)
    def polygamma(self, n): return ops.polygamma(n, self)
    def mvlgamma(self, p): return ops.mvlgamma(self, p)
    def i0(self): return ops.i0(self)
    def trunc(self): return ops.trunc(self)
    fix = trunc
    def frac(self): return ops.frac(self)
    def fmod(self, other): return ops.fmod(self, other)
    def remainder(self, other): return ops.remainder(self, other)
    def floor_divide(self, other): return ops.floor_divide(self, other)
    def true_divide(self, other): return ops.true_divide(self, other)
    def lerp(self, end, weight): return ops.lerp(self, end, weight)
    def addcmul(self, tensor1, tensor2, *, value=1): return ops.addcmul(self, tensor1, tensor2, value=value)
    def addcdiv(self, tensor1, tensor2, *, value=1): return ops.addcdiv(self, tensor1, tensor2, value=value)
    def clamp_min(self, min): return ops.clamp_min(self, min)
    def clamp_max(self, max): return ops.clamp_max(self, max)
    def hypot(self, other): return ops.hypot(self, other)
    def copysign(self, other): return ops.copysign(self, other)
    def deg2rad(self): return ops.deg2rad(self)
    def rad2deg(self): return ops.rad2deg(self)
    def logit(self, eps=None): return ops.logit(self, eps)
    def xlogy(self, other): return ops.xlogy(self, other)
    def sinc(self): return ops.sinc(self)
    def float_power(self, exponent): return ops.float_power(self, exponent)
    def positive(self): return ops.positive(self)
    def isclose(self, other, rtol=1e-05, atol=1e-08, equal_nan=False):
        return ops.isclose(self, other, rtol, atol, equal_nan)
    def allclose(self, other, rtol=1e-05, atol=1e-08, equal_nan=False):
        return ops.allclose(self, other, rtol, atol, equal_nan)
    def equal(self, other): return ops.equal(self, other)
    def isposinf(self): return ops.isposinf(self)
    def isneginf(self): return ops.isneginf(self)
    def isreal(self): return ops.isreal(self)
    def unbind(self, dim=0): return ops.unbind(self, dim)
    def divide(self, other, *, rounding_mode=None): return ops.div(self, other, rounding_mode=rounding_mode)
    def multiply(self, other): return ops.mul(self, other)
    def subtract(self, other, *, alpha=1): return ops.sub(self, other, alpha=alpha)
    def negative(self): return ops.neg(self)
    def absolute(self): return ops.abs(self)
    def greater(self, other): return ops.gt(self, other)
    def greater_equal(self, other): return ops.ge(self, other)
    def less(self, other): return ops.lt(self, other)
    def less_equal(self, other): return ops.le(self, other)
    def not_equal(self, other): return ops.ne(self, other)

    # In-place forms (differentiable, as in PyTorch).
    def atan2_(self, other): return ops.update_("atan2_", self, ops.atan2, other)
    arctan2_ = atan2_
    def fmod_(self, other): return ops.update_("fmod_", self, ops.fmod, other)
    def remainder_(self, other): return ops.update_("remainder_", self, ops.remainder, other)
    def hypot_(self, other): return ops.update_("hypot_", self, ops.hypot, other)
    def copysign_(self, other): return ops.update_("copysign_", self, ops.copysign, other)
    def xlogy_(self, other): return ops.update_("xlogy_", self, ops.xlogy, other)
    def logaddexp_(self, other): return ops.update_("logaddexp_", self, ops.logaddexp, other)
    def clamp_min_(self, min): return ops.update_("clamp_min_", self, ops.clamp_min, min)
    def clamp_max_(self, max): return ops.update_("clamp_max_", self, ops.clamp_max, max)
    def lerp_(self, end, weight): return ops.update_("lerp_", self, lambda t: ops.lerp(t, end, weight))
    def addcmul_(self, tensor1, tensor2, *, value=1):
        return ops.update_("addcmul_", self, lambda t: ops.addcmul(t, tensor1, tensor2, value=value))
    def addcdiv_(self, tensor1, tensor2, *, value=1):
        return ops.update_("addcdiv_", self, lambda t: ops.addcdiv(t, tensor1, tensor2, value=value))
    def logit_(self, eps=None): return ops.update_("logit_", self, lambda t: ops.logit(t, eps))
    def floor_divide_(self, other): return ops.update_("floor_divide_", self, ops.floor_divide, other)
    def bitwise_and_(self, other): return ops.update_("bitwise_and_", self, ops.bitwise_and, other)
    def bitwise_or_(self, other): return ops.update_("bitwise_or_", self, ops.bitwise_or, other)
    def bitwise_xor_(self, other): return ops.update_("bitwise_xor_", self, ops.bitwise_xor, other)
    def bitwise_not_(self): return ops.update_("bitwise_not_", self, ops.bitwise_not)
    def __ilshift__(self, other): return ops.update_("bitwise_left_shift_", self, ops.bitwise_left_shift, other)
    def __irshift__(self, other): return ops.update_("bitwise_right_shift_", self, ops.bitwise_right_shift, other)
    def where(self, condition, other): return ops.where(condition, self, other)

    # -- reductions -----------------------------------------------------------------
    def sum(self, dim=None, keepdim=False, dtype=None, *, keepdims=None):
        return ops.sum(self, dim, keepdim, dtype=dtype, keepdims=keepdims)
    def mean(self, dim=None, keepdim=False, *, dtype=None, keepdims=None):
        return ops.mean(self, dim, keepdim, dtype=dtype, keepdims=keepdims)
    def prod(self, dim=None, keepdim=False, *, dtype=None, keepdims=None):
        return ops.prod(self, dim, keepdim, dtype=dtype, keepdims=keepdims)
    def max(self, dim=None, keepdim=False, *, keepdims=None): return ops.max(self, dim, keepdim, keepdims=keepdims)
    def min(self, dim=None, keepdim=False, *, keepdims=None): return ops.min(self, dim, keepdim, keepdims=keepdims)
    def amax(self, dim=None, keepdim=False, *, keepdims=None): return ops.amax(self, dim, keepdim, keepdims=keepdims)
    def amin(self, dim=None, keepdim=False, *, keepdims=None): return ops.amin(self, dim, keepdim, keepdims=keepdims)
    def argmax(self, dim=None, keepdim=False): return ops.argmax(self, dim, keepdim)
    def argmin(self, dim=None, keepdim=False): return ops.argmin(self, dim, keepdim)
    def var(self, dim=None, unbiased=None, keepdim=False, *, correction=None, keepdims=None):
        return ops.var(self, dim, unbiased, keepdim, correction=correction, keepdims=keepdims)
    def std(self, dim=None, unbiased=None, keepdim=False, *, correction=None, keepdims=None):
        return ops.std(self, dim, unbiased, keepdim, correction=correction, keepdims=keepdims)
    def logsumexp(self, dim, keepdim=False, *, keepdims=None):
        return ops.logsumexp(self, dim, keepdim, keepdims=keepdims)
    def softmax(self, dim, dtype=None): return ops.softmax(self, dim, dtype=dtype)
    def log_softmax(self, dim, dtype=None): return ops.log_softmax(self, dim, dtype=dtype)
    def all(self, dim=None, keepdim=False, *, keepdims=None): return ops.all(self, dim, keepdim, keepdims=keepdims)
    def any(self, dim=None, keepdim=False, *, keepdims=None): return ops.any(self, dim, keepdim, keepdims=keepdims)
    def norm(self, p="fro", dim=None, keepdim=False, dtype=None): return ops.norm(self, p, dim, keepdim, dtype=dtype)

    # -- linear algebra -------------------------------------------------------------
    def matmul(self, other): return ops.matmul(self, other)
    def mm(self, other): return ops.matmul(self, other)
    def bmm(self, other): return ops.matmul(self, other)
    def det(self): return _linalg().det(self)
    def logdet(self): return _linalg().logdet(self)
    def slogdet(self): return _linalg().slogdet(self)
    def inverse(self): return _linalg().inv(self)

    # -- complex numbers and spectra (core/complex_ops.py, core/spectral.py) --------------------
    @property
    def real(self): return _complex_ops().real(self)
    @property
    def imag(self): return _complex_ops().imag(self)
    def conj(self): return _complex_ops().conj(self)
    def angle(self): return _complex_ops().angle(self)
    def is_complex(self): return self.dtype.is_complex
    def stft(self, *args, **kwargs): return importlib.import_module("webgrad.spectral").stft(self, *args, **kwargs)
    def istft(self, *args, **kwargs): return importlib.import_module("webgrad.spectral").istft(self, *args, **kwargs)
    def pinverse(self, rcond=1e-15): return _linalg().torch_pinverse(self, rcond)
    def matrix_power(self, n): return _linalg().matrix_power(self, n)
    def cholesky(self, upper=False): return _linalg().cholesky(self, upper=upper)
    def svd(self, some=True, compute_uv=True): return _linalg().torch_svd(self, some, compute_uv)
    def qr(self, some=True): return _linalg().torch_qr(self, some)

    # -- shape ------------------------------------------------------------------------
    def reshape(self, *shape): return ops.reshape(self, *shape)
    def view(self, *shape): return ops.reshape(self, *shape)
    def view_as(self, other): return ops.reshape(self, other.shape)
    def reshape_as(self, other): return ops.reshape(self, other.shape)
    def transpose(self, dim0, dim1): return ops.transpose(self, dim0, dim1)
    def permute(self, *dims): return ops.permute(self, *dims)
    def squeeze(self, dim=None): return ops.squeeze(self, dim)
    def unsqueeze(self, dim): return ops.unsqueeze(self, dim)
    def expand(self, *shape): return ops.expand(self, *shape)
    def expand_as(self, other): return ops.expand(self, other.shape)
    def broadcast_to(self, shape): return ops.expand(self, shape)
    def flatten(self, start_dim=0, end_dim=-1): return ops.flatten(self, start_dim, end_dim)
    def unflatten(self, dim, sizes): return ops.unflatten(self, dim, sizes)
    def split(self, split_size_or_sections, dim=0): return ops.split(self, split_size_or_sections, dim)
    def chunk(self, chunks, dim=0): return ops.chunk(self, chunks, dim)
    def flip(self, dims): return ops.flip(self, dims)
    def repeat(self, *sizes): return ops.repeat(self, *sizes)
    def movedim(self, source, destination): return ops.movedim(self, source, destination)
    def gather(self, dim, index): return ops.gather(self, dim, index)
    def scatter_add(self, dim, index, src): return ops.scatter_add(self, dim, index, src)
    def index_select(self, dim, index): return ops.index_select(self, dim, index)
    def index_put(self, indices, values, accumulate=False): return ops.index_put(self, indices, values, accumulate)
    def nonzero(self, *, as_tuple=False): return ops.nonzero(self, as_tuple)
    def narrow(self, dim, start, length): return ops.narrow(self, dim, start, length)

    # -- scans, sorting, triangles ----------------------------------------------------------
    def cumsum(self, dim, *, dtype=None): return ops.cumsum(self, dim, dtype=dtype)
    def cumprod(self, dim, *, dtype=None): return ops.cumprod(self, dim, dtype=dtype)
    def sort(self, dim=-1, descending=False, stable=False): return ops.sort(self, dim, descending, stable)
    def argsort(self, dim=-1, descending=False, stable=False): return ops.argsort(self, dim, descending, stable)
    def topk(self, k, dim=-1, largest=True, sorted=True): return ops.topk(self, k, dim, largest, sorted)
    def unique(self, sorted=True, return_inverse=False, return_counts=False, dim=None):
        return ops.unique(self, sorted, return_inverse, return_counts, dim)
    def tril(self, diagonal=0): return ops.tril(self, diagonal)
    def triu(self, diagonal=0): return ops.triu(self, diagonal)
    def outer(self, other): return ops.outer(self, other)
    def multinomial(self, num_samples, replacement=False, *, generator=None):
        return ops.multinomial(self, num_samples, replacement, generator=generator)

    # -- products (core/ops/products.py) ---------------------------------------------------
    def addmm(self, mat1, mat2, *, beta=1, alpha=1): return ops.addmm(self, mat1, mat2, beta=beta, alpha=alpha)
    def baddbmm(self, batch1, batch2, *, beta=1, alpha=1):
        return ops.baddbmm(self, batch1, batch2, beta=beta, alpha=alpha)
    def addbmm(self, batch1, batch2, *, beta=1, alpha=1):
        return ops.addbmm(self, batch1, batch2, beta=beta, alpha=alpha)
    def addmv(self, mat, vec, *, beta=1, alpha=1): return ops.addmv(self, mat, vec, beta=beta, alpha=alpha)
    def addr(self, vec1, vec2, *, beta=1, alpha=1): return ops.addr(self, vec1, vec2, beta=beta, alpha=alpha)
    def dot(self, other): return ops.dot(self, other)
    def vdot(self, other): return ops.vdot(self, other)
    def mv(self, vec): return ops.mv(self, vec)
    def inner(self, other): return ops.inner(self, other)
    def kron(self, other): return ops.kron(self, other)
    def cross(self, other, dim=None): return ops.cross(self, other, dim)

    # -- statistics (core/ops/statistics.py) -------------------------------------------------
    def median(self, dim=None, keepdim=False): return ops.median(self, dim, keepdim)
    def nanmedian(self, dim=None, keepdim=False): return ops.nanmedian(self, dim, keepdim)
    def quantile(self, q, dim=None, keepdim=False, *, interpolation="linear"):
        return ops.quantile(self, q, dim, keepdim, interpolation=interpolation)
    def nanquantile(self, q, dim=None, keepdim=False, *, interpolation="linear"):
        return ops.nanquantile(self, q, dim, keepdim, interpolation=interpolation)
    def kthvalue(self, k, dim=-1, keepdim=False): return ops.kthvalue(self, k, dim, keepdim)
    def mode(self, dim=-1, keepdim=False): return ops.mode(self, dim, keepdim)
    def nansum(self, dim=None, keepdim=False, *, dtype=None): return ops.nansum(self, dim, keepdim, dtype=dtype)
    def nanmean(self, dim=None, keepdim=False, *, dtype=None): return ops.nanmean(self, dim, keepdim, dtype=dtype)
    def cummax(self, dim): return ops.cummax(self, dim)
    def cummin(self, dim): return ops.cummin(self, dim)
    def logcumsumexp(self, dim): return ops.logcumsumexp(self, dim)
    def count_nonzero(self, dim=None): return ops.count_nonzero(self, dim)
    def aminmax(self, *, dim=None, keepdim=False): return ops.aminmax(self, dim=dim, keepdim=keepdim)
    def bincount(self, weights=None, minlength=0): return ops.bincount(self, weights, minlength)
    def histc(self, bins=100, min=0, max=0): return ops.histc(self, bins, min, max)

    # -- shape (core/ops/shape_ops.py) -------------------------------------------------------
    def roll(self, shifts, dims=None): return ops.roll(self, shifts, dims)
    def tile(self, dims): return ops.tile(self, dims)
    def repeat_interleave(self, repeats=None, dim=None, *, output_size=None):
        return ops.repeat_interleave(self, repeats, dim, output_size=output_size)
    def swapaxes(self, axis0, axis1): return ops.transpose(self, axis0, axis1)
    def swapdims(self, dim0, dim1): return ops.transpose(self, dim0, dim1)
    def moveaxis(self, source, destination): return ops.movedim(self, source, destination)
    def rot90(self, k=1, dims=(0, 1)): return ops.rot90(self, k, dims)
    def fliplr(self): return ops.fliplr(self)
    def flipud(self): return ops.flipud(self)
    def diagonal(self, offset=0, dim1=0, dim2=1): return ops.diagonal(self, offset, dim1, dim2)
    def diag(self, diagonal=0): return ops.diag(self, diagonal)
    def diagflat(self, offset=0): return ops.diagflat(self, offset)
    def diag_embed(self, offset=0, dim1=-2, dim2=-1): return ops.diag_embed(self, offset, dim1, dim2)
    def trace(self): return ops.trace(self)
    def unfold(self, dimension, size, step): return ops.shape_ops.unfold(self, dimension, size, step)
    def tensor_split(self, indices_or_sections, dim=0): return ops.tensor_split(self, indices_or_sections, dim)
    def split_with_sizes(self, split_sizes, dim=0): return ops.split_with_sizes(self, split_sizes, dim)
    def ravel(self): return ops.reshape(self, -1)

    # -- indexing (core/ops/index_ops.py) ---------------------------------------------------
    def masked_select(self, mask): return ops.masked_select(self, mask)
    def masked_scatter(self, mask, source): return ops.masked_scatter(self, mask, source)
    def scatter(self, dim, index, src=None, value=None, *, reduce=None):
        return ops.scatter(self, dim, index, src, value, reduce=reduce)
    def scatter_reduce(self, dim, index, src, reduce, *, include_self=True):
        return ops.scatter_reduce(self, dim, index, src, reduce, include_self=include_self)
    def index_add(self, dim, index, source, *, alpha=1):
        return ops.index_ops.index_add(self, dim, index, source, alpha=alpha)
    def index_copy(self, dim, index, source): return ops.index_copy(self, dim, index, source)
    def index_fill(self, dim, index, value): return ops.index_fill(self, dim, index, value)
    def take(self, index): return ops.index_ops.take(self, index)
    def put(self, index, source, accumulate=False): return ops.put(self, index, source, accumulate)
    def put_(self, index, source, accumulate=False):
        return ops.update_("put_", self, lambda t, s: ops.put(t, index, s, accumulate), source)
    def diff(self, n=1, dim=-1, prepend=None, append=None): return ops.diff(self, n, dim, prepend, append)
    def take_along_dim(self, indices, dim=None): return ops.take_along_dim(self, indices, dim)
    def select(self, dim, index): return ops.select(self, dim, index)
    def select_scatter(self, src, dim, index): return ops.select_scatter(self, src, dim, index)
    def slice_scatter(self, src, dim=0, start=None, end=None, step=1):
        return ops.slice_scatter(self, src, dim, start, end, step)
    def diagonal_scatter(self, src, offset=0, dim1=0, dim2=1):
        return ops.diagonal_scatter(self, src, offset, dim1, dim2)
    def index_put_(self, indices, values, accumulate=False):
        return ops.update_("index_put_", self, lambda t, v: ops.index_put(t, indices, v, accumulate), values)
    def masked_scatter_(self, mask, source):
        return ops.update_("masked_scatter_", self, ops.masked_scatter, mask, source)
    def index_fill_(self, dim, index, value):
        return ops.update_("index_fill_", self, lambda t: ops.index_fill(t, dim, index, value))
    def index_copy_(self, dim, index, source):
        return ops.update_("index_copy_", self, lambda t, s: ops.index_copy(t, dim, index, s), source)
    def index_add_(self, dim, index, source, *, alpha=1):
        return ops.update_("index_add_", self,
                           lambda t, s: ops.index_ops.index_add(t, dim, index, s, alpha=alpha), source)
    def scatter_(self, dim, index, src=None, value=None, *, reduce=None):
        return ops.update_("scatter_", self, lambda t: ops.scatter(t, dim, index, src, value, reduce=reduce))
    def scatter_add_(self, dim, index, src):
        return ops.update_("scatter_add_", self, lambda t, s: ops.scatter_add(t, dim, index, s), src)
    def scatter_reduce_(self, dim, index, src, reduce, *, include_self=True):
        return ops.update_("scatter_reduce_", self,
                           lambda t, s: ops.scatter_reduce(t, dim, index, s, reduce, include_self=include_self), src)

    # -- new tensors like this one (same dtype and device unless given) -----------------
    def new_tensor(self, data, dtype=None, device=None, requires_grad=False):
        return _new_like(self, "tensor", (data,), dtype, device, requires_grad)

    def new_zeros(self, *size, dtype=None, device=None, requires_grad=False):
        return _new_like(self, "zeros", size, dtype, device, requires_grad)

    def new_ones(self, *size, dtype=None, device=None, requires_grad=False):
        return _new_like(self, "ones", size, dtype, device, requires_grad)

    def new_empty(self, *size, dtype=None, device=None, requires_grad=False):
        return _new_like(self, "empty", size, dtype, device, requires_grad)

    def new_full(self, size, fill_value, dtype=None, device=None, requires_grad=False):
        return _new_like(self, "full", (size, fill_value), dtype, device, requires_grad)

    def t(self) -> "Tensor":
        """Transpose of a tensor with at most 2 dims (``torch.Tensor.t``)."""
        if self.ndim > 2:
            raise ops.OpError(f"t: expects a tensor with <= 2 dims, got shape {tuple(self.shape)}; "
                              f"use .transpose(dim0, dim1) or .mT")
        return ops.permute(self, *reversed(range(self.ndim)))

    @property
    def T(self) -> "Tensor":
        return ops.permute(self, *reversed(range(self.ndim)))

    @property
    def mT(self) -> "Tensor":
        return ops.transpose(self, -2, -1)

    @property
    def _is_mT_view(self):  # -> bool (here `bool` names the method)
        """Whether this tensor is another's ``.mT`` view (a Linear's ``weight.mT``): matmul's vjp
        then makes its gradient in that tensor's layout (ops/linalg.py)."""
        view = self._view_of
        return view is not None and view[1] == "permute" and view[2][-2:] == (self.ndim - 1, self.ndim - 2) \
            and view[2][:-2] == tuple(range(self.ndim - 2))


def _inplace_unary(name, direct=False):
    def method(self):
        return ops.update_(name + "_", self, getattr(ops, name), direct=direct)
    method.__name__ = method.__qualname__ = name + "_"
    method.__doc__ = f"``{name}`` in place (differentiable, as in PyTorch)."
    return method


# One op each (ops.round's decimals: a chain on its first op's result), so they may write
# straight into the tensor (update_'s direct).
for _name in ("neg", "abs", "exp", "log", "log1p", "sqrt", "rsqrt", "sin", "cos", "tanh", "sigmoid", "relu", "erf",
              "reciprocal", "floor", "ceil", "round", "sign"):
    setattr(Tensor, _name + "_", _inplace_unary(_name, direct=True))


for _name in ("tan", "asin", "acos", "atan", "sinh", "cosh", "asinh", "acosh", "atanh", "expm1", "erfc", "erfinv",
              "trunc", "frac", "log2", "log10", "exp2", "lgamma", "digamma", "deg2rad", "rad2deg", "square", "sinc"):
    setattr(Tensor, _name + "_", _inplace_unary(_name))
Tensor.fix_ = Tensor.trunc_  # type: ignore[attr-defined]


def _new_like(t, name, args, dtype, device, requires_grad):
    from . import creation

    return getattr(creation, name)(*args, dtype=dtype or t.dtype, device=device or t.device,
                                   requires_grad=requires_grad)


_LEGACY_NAMES = {"float32": "FloatTensor", "float64": "DoubleTensor", "int64": "LongTensor", "int32": "IntTensor",
                 "bool": "BoolTensor", "uint8": "ByteTensor", "int8": "CharTensor", "int16": "ShortTensor"}

from . import ops  # noqa: E402  (ops imports Tensor; methods look ops up at call time)
from .ops import registry as _registry  # noqa: E402  (the observers' host-read hook in _host)


def _linalg():
    """webgrad.linalg, loaded on first use like webgrad's other subpackages (it imports this module)."""
    return importlib.import_module("webgrad.linalg")


def _complex_ops():
    return importlib.import_module("webgrad.complex_ops")
