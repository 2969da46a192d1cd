"""dtypes and PyTorch's type-promotion rules.

Categories rank bool < int < float. Tensors with dimensions decide the result
within a category; a 0-d tensor or a Python scalar only matters when it belongs
to a higher category (then 0-d tensors keep their dtype, Python scalars give the
default dtype of their category) — exactly torch.result_type.
"""
from __future__ import annotations

import numpy as np

_CATEGORY_RANK = {"bool": 0, "int": 1, "float": 2}


class DType:
    """A tensor element type, e.g. ``webgrad.float32``."""

    __slots__ = ("name", "np", "itemsize", "category", "safetensors_name")

    def __init__(self, name: str, np_dtype, category: str, safetensors_name: str):
        self.name = name
        self.np = np.dtype(np_dtype)
        self.itemsize = self.np.itemsize
        self.category = category
        self.safetensors_name = safetensors_name

    @property
    def is_floating_point(self) -> bool:
        return self.category == "float"

    def __repr__(self) -> str:
        return f"webgrad.{self.name}"

    def __reduce__(self):
        return (from_name, (self.name,))


float32 = DType("float32", np.float32, "float", "F32")
float64 = DType("float64", np.float64, "float", "F64")
int32 = DType("int32", np.int32, "int", "I32")
int64 = DType("int64", np.int64, "int", "I64")
bool_ = DType("bool", np.bool_, "bool", "BOOL")

ALL = (float32, float64, int32, int64, bool_)
_BY_NAME = {d.name: d for d in ALL}
_BY_NUMPY = {d.np: d for d in ALL}
# Widest first within a category, so promotion is "pick the larger itemsize".
_DEFAULT_FOR_CATEGORY = {"bool": bool_, "int": int64, "float": float32}

_default_float = [float32]


def get_default_dtype() -> DType:
    return _default_float[0]


def set_default_dtype(dtype: DType) -> None:
    """Set the dtype that Python floats and ``rand``/``randn`` produce (float32 or float64)."""
    if dtype not in (float32, float64):
        raise TypeError(f"set_default_dtype: only float32 or float64 allowed, got {dtype}")
    _default_float[0] = dtype
    _DEFAULT_FOR_CATEGORY["float"] = dtype


def from_name(name: str) -> DType:
    try:
        return _BY_NAME[name]
    except KeyError:
        raise TypeError(f"unknown dtype {name!r}; expected one of {sorted(_BY_NAME)}") from None


def from_numpy(np_dtype) -> DType:
    """Map a numpy dtype to ours; narrow ints widen to int64, float16 to float32."""
    np_dtype = np.dtype(np_dtype)
    if np_dtype in _BY_NUMPY:
        return _BY_NUMPY[np_dtype]
    if np_dtype.kind in "iu":
        return int64
    if np_dtype.kind == "f":
        return float32
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
    raise TypeError(f"expected a Tensor or a Python number, got {type(value).__name__}")


def _promote_same_priority(dtypes) -> DType | None:
    best = None
    for d in dtypes:
        if best is None or _CATEGORY_RANK[d.category] > _CATEGORY_RANK[best.category] or (
            d.category == best.category and d.itemsize > best.itemsize
        ):
            best = d
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
