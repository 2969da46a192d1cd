"""dtypes and PyTorch's type-promotion rules.

Categories rank bool < int < float. Tensors with dimensions decide the result
within a category; a 0-d tensor or a Python scalar only matters when it belongs
to a higher category (then 0-d tensors keep their dtype, Python scalars give the
default dtype of their category) — exactly torch.result_type.

Half precision (cpu only): ``float16`` is stored as numpy's float16. numpy has
no bfloat16, so a ``bfloat16`` tensor is stored as float32 whose values are
rounded to bfloat16 (the low 16 bits are zero): numpy computes in float32 and
every result is rounded back, as a bfloat16 kernel would. ``.numpy()`` of a
bfloat16 tensor therefore gives float32 (exactly the bfloat16 values). The
WebGPU device has neither; move such tensors with ``.float()`` first.
"""
from __future__ import annotations

import numpy as np

_CATEGORY_RANK = {"bool": 0, "int": 1, "float": 2, "complex": 3}


class DType:
    """A tensor element type, e.g. ``webgrad.float32``."""

    __slots__ = ("name", "np", "itemsize", "category", "safetensors_name", "rounding")

    def __init__(self, name: str, np_dtype, category: str, safetensors_name: str,
                 itemsize: int | None = None, rounding=None):
        self.name = name
        self.np = np.dtype(np_dtype)  # the numpy dtype a cpu tensor stores
        self.itemsize = self.np.itemsize if itemsize is None else itemsize
        self.category = category
        self.safetensors_name = safetensors_name
        # For a dtype stored wider than it is (bfloat16 in float32): array -> array
        # with every value rounded to this dtype. Backends apply it to each result.
        self.rounding = rounding

    @property
    def is_floating_point(self) -> bool:
        return self.category == "float"

    @property
    def is_complex(self) -> bool:
        return self.category == "complex"

    def __repr__(self) -> str:
        return f"webgrad.{self.name}"

    def __reduce__(self):
        return (from_name, (self.name,))


def bfloat16_bits(array) -> np.ndarray:
    """float32 values -> the uint16 bit patterns of the nearest bfloat16 (ties to even)."""
    array = np.asarray(array, dtype=np.float32, order="C")
    bits = array.view(np.uint32)
    # Adding 0x7FFF plus the lowest kept bit rounds to nearest, ties to even; a carry
    # into the exponent correctly turns the largest values into inf.
    rounded = (bits + (np.uint32(0x7FFF) + ((bits >> 16) & 1))) >> 16
    # NaN must stay NaN (rounding could carry it into inf): keep its top bits, set quiet.
    rounded = np.where(np.isnan(array), (bits >> 16) | 0x0040, rounded)
    return rounded.astype(np.uint16)


def bfloat16_values(bits) -> np.ndarray:
    """uint16 bfloat16 bit patterns -> float32 values (exact)."""
    return (np.asarray(bits, dtype=np.uint16).astype(np.uint32) << 16).view(np.float32)


def _round_to_bfloat16(array) -> np.ndarray:
    return bfloat16_values(bfloat16_bits(array)).reshape(np.shape(array))


float32 = DType("float32", np.float32, "float", "F32")
float64 = DType("float64", np.float64, "float", "F64")
float16 = DType("float16", np.float16, "float", "F16")
bfloat16 = DType("bfloat16", np.float32, "float", "BF16", itemsize=2, rounding=_round_to_bfloat16)
int32 = DType("int32", np.int32, "int", "I32")
int64 = DType("int64", np.int64, "int", "I64")
bool_ = DType("bool", np.bool_, "bool", "BOOL")
# The small integers: numpy's on the cpu (so arithmetic wraps around, as in PyTorch); on WebGPU
# each element is an i32 narrowed after every op (backend/webgpu/elementwise.py).
uint8 = DType("uint8", np.uint8, "int", "U8")
int8 = DType("int8", np.int8, "int", "I8")
int16 = DType("int16", np.int16, "int", "I16")
# Complex numbers live on the cpu only (numpy complex arrays); see webgrad.fft's docstring.
complex64 = DType("complex64", np.complex64, "complex", "C64")
complex128 = DType("complex128", np.complex128, "complex", "C128")

# torch.qint8: the dtype a dynamic-quantized Linear's weight is quantized to (webgrad.ao). It
# names the scheme only: the weight itself is an int8 tensor with its scale beside it.
qint8 = DType("qint8", np.int8, "quantized", "I8")

ALL = (float32, float64, float16, bfloat16, int32, int64, bool_, complex64, complex128, uint8, int8, int16)
_BY_NAME = {d.name: d for d in ALL}
_BY_NAME["half"] = float16
_BY_NAME.update(cfloat=complex64, cdouble=complex128)
# bfloat16 shares float32's storage; a float32 numpy array is float32.
_BY_NUMPY = {d.np: d for d in ALL if d is not bfloat16}
# Widest first within a category, so promotion is "pick the larger itemsize".
_DEFAULT_FOR_CATEGORY = {"bool": bool_, "int": int64, "float": float32, "complex": complex64}

_default_float = [float32]


def get_default_dtype() -> DType:
    return _default_float[0]


def set_default_dtype(dtype: DType) -> None:
    """Set the dtype that Python floats and ``rand``/``randn`` produce (float32 or float64)."""
    if dtype not in (float32, float64):
        raise TypeError(f"set_default_dtype: only float32 or float64 allowed, got {dtype}")
    _default_float[0] = dtype
    _DEFAULT_FOR_CATEGORY["float"] = dtype
    _DEFAULT_FOR_CATEGORY["complex"] = complex128 if dtype is float64 else complex64


def from_name(name: str) -> DType:
    try:
        return _BY_NAME[name]
    except KeyError:
        raise TypeError(f"unknown dtype {name!r}; expected one of {sorted(_BY_NAME)}") from None


def from_numpy(np_dtype) -> DType:
    """Map a numpy dtype to ours; narrow ints widen to int64, other floats to float32."""
    np_dtype = np.dtype(np_dtype)
    if np_dtype in _BY_NUMPY:
        return _BY_NUMPY[np_dtype]
    if np_dtype.kind in "iu":
        return int64
    if np_dtype.kind == "f":
        return float32
    if np_dtype.kind == "c":
        return complex128
    raise TypeError(f"unsupported numpy dtype {np_dtype}; webgrad supports "
                    f"{', '.join(d.name for d in ALL)}")


def to_dtype(value) -> DType:
    """Accept a DType, a name like 'float32', a numpy dtype or a Python type."""
    if isinstance(value, DType):
        return value
    if value is float:
        return get_default_dtype()
    if value is int:
        return int64
    if value is bool:
        return bool_
    if isinstance(value, str):
        return from_name(value)
    return from_numpy(value)


def scalar_category(value) -> str:
    if isinstance(value, (bool, np.bool_)):
        return "bool"
    if isinstance(value, (int, np.integer)):
        return "int"
    if isinstance(value, (float, np.floating)):
        return "float"
    if isinstance(value, (complex, np.complexfloating)):
        return "complex"
    raise TypeError(f"expected a Tensor or a Python number, got {type(value).__name__}")


def _promote_same_priority(dtypes) -> DType | None:
    best = None
    for d in dtypes:
        if best is None or _CATEGORY_RANK[d.category] > _CATEGORY_RANK[best.category] or (
            d.category == best.category and d.itemsize > best.itemsize
        ):
            best = d
        elif d.category == best.category == "float" and d.itemsize == best.itemsize and d is not best:
            best = float32  # float16 with bfloat16: neither holds the other (torch gives float32)
        elif d.category == best.category == "int" and d.itemsize == best.itemsize and d is not best:
            best = int16  # uint8 with int8: neither holds the other (torch gives int16)
    if best is complex64 and any(d is float64 for d in dtypes):
        best = complex128  # complex64 with float64: torch keeps float64's precision
    return best


def result_type(dimensioned, zero_dim, scalars) -> DType:
    """torch.result_type over three groups: dtypes of tensors with dims, of 0-d
    tensors, and Python scalar values."""
    result = _promote_same_priority(dimensioned)
    zero = _promote_same_priority(zero_dim)
    if zero is not None and (result is None or _CATEGORY_RANK[zero.category] > _CATEGORY_RANK[result.category]):
        result = zero
    for value in scalars:
        category = scalar_category(value)
        if result is None or _CATEGORY_RANK[category] > _CATEGORY_RANK[result.category]:
            result = _DEFAULT_FOR_CATEGORY[category]
    assert result is not None, "result_type of no tensors and no scalars"  # every caller passes one
    return result


def category_rank(dtype: DType) -> int:
    """bool 0 < int 1 < float 2: the order promotion never goes back on."""
    return _CATEGORY_RANK[dtype.category]


def promote_types(a: DType, b: DType) -> DType:
    result = _promote_same_priority((a, b))
    assert result is not None  # never: None only for no dtypes
    return result
