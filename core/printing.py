"""PyTorch-style ``repr`` of tensors."""
from __future__ import annotations

import numpy as np

from . import dtypes


def _float_formatter(array: np.ndarray):
    finite = array[np.isfinite(array)] if array.size else array
    if finite.size and np.all(finite == np.round(finite)) and np.abs(finite).max() < 1e8:
        return lambda v: f"{v:.0f}." if np.isfinite(v) else str(v)
    big = finite.size and (np.abs(finite).max() >= 1e8 or
                           (np.abs(finite[finite != 0]).min() < 1e-4 if np.any(finite != 0) else False))
    if big:
        return lambda v: f"{v:.4e}"
    return lambda v: f"{v:.4f}" if np.isfinite(v) else str(v)


def tensor_repr(t) -> str:
    array = t.detach()._host()
    prefix = "tensor("
    if array.dtype.kind == "f":
        formatter = {"float_kind": _float_formatter(array)}
    else:
        formatter = None
    if array.size == 0:
        body = "[]"
    else:
        body = np.array2string(array, separator=", ", prefix=prefix, formatter=formatter,
                               threshold=1000, edgeitems=3, max_line_width=80)
    extras = []
    if t.device != "cpu":
        extras.append(f"device='{t.device}'")
    default_dtypes = (dtypes.get_default_dtype(), dtypes.int64, dtypes.bool_)
    if t.dtype not in default_dtypes or array.size == 0 and t.dtype is not dtypes.get_default_dtype():
        extras.append(f"dtype={t.dtype!r}")
    if array.size == 0 and t.ndim > 1:
        extras.insert(0, f"size={tuple(t.shape)}")
    if t._node is not None:
        extras.append(f"grad_fn=<{t._node.name()}>")
    elif t.requires_grad:
        extras.append("requires_grad=True")
    return prefix + ", ".join([body] + extras) + ")"
