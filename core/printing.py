"""PyTorch-style ``repr`` of tensors.

This follows ``torch/_tensor_str.py`` closely so that ``repr(webgrad.tensor(x))``
reads exactly like ``repr(torch.tensor(x))``: every element of a tensor is padded
to one common width, floats use 4 decimals (or scientific notation when the
magnitudes span more than 1000x, exceed 1e8 or fall below 1e-4), integer-valued
floats print as ``1.``, and more than 1000 elements are summarized with ``...``.
"""
from __future__ import annotations

import math

import numpy as np

from . import dtypes

PRECISION = 4
THRESHOLD = 1000
EDGEITEMS = 3
LINEWIDTH = 80


class _Formatter:
    """Decides one width and one notation for all the elements of a tensor."""

    def __init__(self, array: np.ndarray):
        self.floating = array.dtype.kind == "f"
        self.int_mode = True
        self.sci_mode = False
        self.max_width = 1
        flat = array.reshape(-1)
        if not self.floating:
            for value in flat.tolist():
                self.max_width = max(self.max_width, len(str(value)))
            return
        values = flat[np.isfinite(flat) & (flat != 0)].astype(np.float64)
        if values.size == 0:
            return
        magnitudes = np.abs(values)
        smallest, largest = magnitudes.min(), magnitudes.max()
        self.int_mode = bool(np.all(values == np.ceil(values)))
        self.sci_mode = bool(largest / smallest > 1000.0 or largest > 1.0e8 or smallest < 1.0e-4)
        for value in values.tolist():
            if self.sci_mode:
                width = len(f"{value:.{PRECISION}e}")
            elif self.int_mode:
                width = len(f"{value:.0f}") + 1  # the trailing "."
            else:
                width = len(f"{value:.{PRECISION}f}")
            self.max_width = max(self.max_width, width)

    def format(self, value) -> str:
        if self.floating:
            if self.sci_mode:
                text = f"{value:{self.max_width}.{PRECISION}e}"
            elif self.int_mode:
                text = f"{value:.0f}"
                if not (math.isinf(value) or math.isnan(value)):
                    text += "."
            else:
                text = f"{value:.{PRECISION}f}"
        else:
            text = str(value)
        return (self.max_width - len(text)) * " " + text


class _ComplexFormatter:
    """Complex elements as torch prints them: real and imaginary parts each with their own
    formatter, joined as ``1.+2.j`` / ``1.-2.j``."""

    def __init__(self, array: np.ndarray):
        self.real, self.imag = _Formatter(array.real), _Formatter(array.imag)
        self.max_width = self.real.max_width + self.imag.max_width + 1

    def format(self, value) -> str:
        imag = (self.imag.format(value.imag) + "j").lstrip()
        return self.real.format(value.real) + (imag if imag[0] in "+-" else "+" + imag)


def _summarized(array: np.ndarray) -> np.ndarray:
    """Only the elements that will be shown, so the width ignores the hidden ones."""
    if array.ndim == 0:
        return array
    if array.shape[0] > 2 * EDGEITEMS:
        array = np.concatenate([array[:EDGEITEMS], array[-EDGEITEMS:]])
    if array.ndim == 1:
        return array
    return np.stack([_summarized(row) for row in array])


def _vector_str(array, indent, summarize, formatter) -> str:
    element_length = formatter.max_width + 2
    per_line = max(1, math.floor((LINEWIDTH - indent) / element_length))
    if summarize and array.shape[0] > 2 * EDGEITEMS:
        data = ([formatter.format(v) for v in array[:EDGEITEMS].tolist()] + [" ..."]
                + [formatter.format(v) for v in array[-EDGEITEMS:].tolist()])
    else:
        data = [formatter.format(v) for v in array.tolist()]
    lines = [", ".join(data[i:i + per_line]) for i in range(0, len(data), per_line)]
    return "[" + (",\n" + " " * (indent + 1)).join(lines) + "]"


def _body(array, indent, summarize, formatter) -> str:
    if array.ndim == 0:
        return formatter.format(array.item())
    if array.ndim == 1:
        return _vector_str(array, indent, summarize, formatter)
    rows = range(array.shape[0])
    if summarize and array.shape[0] > 2 * EDGEITEMS:
        parts = ([_body(array[i], indent + 1, summarize, formatter) for i in rows[:EDGEITEMS]] + ["..."]
                 + [_body(array[i], indent + 1, summarize, formatter) for i in rows[-EDGEITEMS:]])
    else:
        parts = [_body(array[i], indent + 1, summarize, formatter) for i in rows]
    return "[" + ("," + "\n" * (array.ndim - 1) + " " * (indent + 1)).join(parts) + "]"


def _add_suffixes(text, suffixes, indent) -> str:
    parts = [text]
    last_line_len = len(text) - text.rfind("\n") + 1
    for suffix in suffixes:
        if last_line_len + len(suffix) + 2 > LINEWIDTH:
            parts.append(",\n" + " " * indent + suffix)
            last_line_len = indent + len(suffix)
        else:
            parts.append(", " + suffix)
            last_line_len += len(suffix) + 2
    parts.append(")")
    return "".join(parts)


def tensor_repr(t) -> str:
    array = t.detach()._host()
    prefix = "tensor("
    indent = len(prefix)
    suffixes = []
    if t.device != "cpu":
        suffixes.append(f"device='{t.device}'")
    has_default_dtype = t.dtype in (dtypes.get_default_dtype(), dtypes.int64, dtypes.bool_) or t.dtype is (
        dtypes.complex128 if dtypes.get_default_dtype() is dtypes.float64 else dtypes.complex64)
    if array.size == 0:
        body = "[]"
        if t.ndim != 1:
            suffixes.append(f"size={tuple(t.shape)}")
        if t.dtype is not dtypes.get_default_dtype():
            suffixes.append(f"dtype={t.dtype!r}")
    else:
        if not has_default_dtype:
            suffixes.append(f"dtype={t.dtype!r}")
        summarize = array.size > THRESHOLD
        make = _ComplexFormatter if array.dtype.kind == "c" else _Formatter
        formatter = make(_summarized(array) if summarize else array)
        body = _body(array, indent, summarize, formatter)
    if t._node is not None:
        suffixes.append(f"grad_fn=<{t._node.name()}>")
    elif t.requires_grad:
        suffixes.append("requires_grad=True")
    return _add_suffixes(prefix + body, suffixes, indent)
