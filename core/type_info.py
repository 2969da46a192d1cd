"""``webgrad.finfo`` and ``webgrad.iinfo``: the numeric limits of a dtype, as ``torch.finfo``/``torch.iinfo``.

Example:
    >>> webgrad.finfo(webgrad.float32).eps
    1.1920928955078125e-07
    >>> webgrad.iinfo(webgrad.int32).max
    2147483647
"""
from __future__ import annotations

import numpy as np

from . import dtypes

# bfloat16 is stored in float32 here; its limits are its own (8 exponent bits, 7 fraction bits).
_BFLOAT16 = {"bits": 16, "eps": 2.0 ** -7, "max": float(np.float32(3.3895313892515355e38)),
             "tiny": 2.0 ** -126, "resolution": 0.01}


def _dtype(owner: str, dtype) -> dtypes.DType:
    if dtype is None:
        return dtypes.get_default_dtype()
    try:
        return dtypes.to_dtype(dtype)
    except (TypeError, ValueError, KeyError) as exc:
        raise TypeError(f"{owner}(): expected a webgrad dtype like webgrad.float32, got {dtype!r}") from exc


class finfo:  # noqa: N801  (torch's name)
    """Limits of a floating point dtype: ``bits``, ``eps``, ``max``, ``min``, ``tiny``
    (= ``smallest_normal``), ``resolution`` and ``dtype`` (its name, e.g. ``'float32'``).

    Args:
        type: a floating point dtype (default: the default dtype).
    """

    def __init__(self, type=None):  # noqa: A002  (torch's argument name)
        dtype = _dtype("finfo", type)
        if not dtype.is_floating_point:
            raise TypeError(f"finfo(): torch.finfo takes a floating point dtype, got webgrad.{dtype.name}; "
                            f"use webgrad.iinfo for integer dtypes")
        if dtype.name == "bfloat16":
            info = dict(_BFLOAT16)
        else:
            limits = np.finfo(dtype.np)
            info = {"bits": int(limits.bits), "eps": float(limits.eps), "max": float(limits.max),
                    "tiny": float(limits.smallest_normal), "resolution": 10.0 ** -int(limits.precision)}
        self.bits: int = info["bits"]
        self.eps: float = info["eps"]
        self.max: float = info["max"]
        self.min: float = -info["max"]
        self.tiny: float = info["tiny"]
        self.smallest_normal: float = info["tiny"]
        self.resolution: float = info["resolution"]
        self.dtype: str = dtype.name

    def __repr__(self) -> str:
        return (f"finfo(resolution={self.resolution:g}, min={self.min:g}, max={self.max:g}, eps={self.eps:g}, "
                f"smallest_normal={self.smallest_normal:g}, tiny={self.tiny:g}, dtype={self.dtype})")


class iinfo:  # noqa: N801  (torch's name)
    """Limits of an integer dtype: ``bits``, ``max``, ``min`` and ``dtype`` (its name, e.g. ``'int64'``).

    Args:
        type: an integer dtype.
    """

    def __init__(self, type):  # noqa: A002  (torch's argument name)
        dtype = _dtype("iinfo", type)
        if dtype.category != "int":
            kind = "bool" if dtype.category == "bool" else "floating point"
            raise TypeError(f"iinfo(): webgrad.{dtype.name} is a {kind} dtype, not supported by iinfo; "
                            f"use webgrad.finfo for floating point dtypes")
        limits = np.iinfo(dtype.np)
        self.bits: int = int(limits.bits)
        self.max: int = int(limits.max)
        self.min: int = int(limits.min)
        self.dtype: str = dtype.name

    def __repr__(self) -> str:
        return f"iinfo(min={self.min}, max={self.max}, dtype={self.dtype})"
