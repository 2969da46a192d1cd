"""Launching elementwise kernels (unary/binary/ternary.wgsl) over strided views."""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from . import large
from .array import contiguous_strides
from .geometry import (COMPUTE, KIND, MAX_RANK, PACKED, broadcast_strides, coalesce, compute_kind, is_cpu_adapter,
                       itemsize, kind_of)

FILES = {1: ("unary.wgsl", "unary"), 2: ("binary.wgsl", "binary"), 3: ("ternary.wgsl", "ternary")}
WORKGROUP = 256  # threads per workgroup, one thread per element
# Elements a thread of a strided (non-contiguous) launch on a CPU adapter: the largest of these
# that divides the innermost dim (strided.wgsl's RUN). An im2col copy (16x32x32 3x3 windows of 16
# images) took 57 / 29 / 22 / 18 ms in Chromium at 1 / 4 / 8 / 16 elements a thread, 17 / 9.5 /
# 6.2 / 4.5 ms on llvmpipe. A GPU keeps one a thread, neighbours writing neighbouring elements.
STRIDED_RUNS = (16, 8, 4, 2)
CHECKED_CALL = "wg_check_divisor("  # binary.wgsl's check; an expression calling it binds the error flag


def pack_params(n, shape, offsets, strides) -> bytes:
    """strided.wgsl's Params: the shape, then a vec4 per dim of the operands' strides."""
    words = np.zeros(16 + 4 * MAX_RANK, dtype=np.uint32)
    words[0], words[1] = n, len(shape)
    words[4:4 + len(offsets)] = offsets
    words[8:8 + len(shape)] = shape
    signed = words.view(np.int32)[16:].reshape(MAX_RANK, 4)
    for k, st in enumerate(strides):
        signed[:len(st), k] = st
    return words.tobytes()


# Launch plans by (op, expression, every operand's geometry): a training loop runs
# the same shapes every step, and working the plan out is most of an elementwise
# op's Python time (several times more inside Pyodide).
_PLANS: dict = {}
_MAX_PLANS = 4096


# The small integer dtypes are computed in i32; every result is wrapped into the dtype's
# range (two's complement, as a cast or an overflow in PyTorch does). float16 and bfloat16
# results are rounded to the dtype (math.wgsl). Stores into their packed kinds do both too.
ROUND_F16 = "wg_round_f16("
NARROW = {"uint8": "(({}) & 255)", "int8": "((({}) << 24u) >> 24u)", "int16": "((({}) << 16u) >> 16u)",
          "float16": ROUND_F16 + "{})", "bfloat16": "wg_round_bf16({})"}


@dataclass(frozen=True)
class Narrowed:
    """An ``Elementwise`` record whose i32 result is wrapped by ``wrap`` (a NARROW entry)."""

    inner: Any
    wrap: str

    def expression(self, in_kind: str, out_kind: str) -> str | None:
        expr = self.inner.expression(in_kind, out_kind)
        return None if expr is None else self.wrap.format(expr)


def run(backend, op, record, arrays, attrs, shape, dtype):
    """The launcher of ``Elementwise`` records: a new array of ``dtype``."""
    if dtype.name in NARROW:
        record = Narrowed(record, NARROW[dtype.name])
    return launch(backend, op.name, record, arrays, shape, kind_of(dtype))


def narrowed(backend, array, dtype):
    """The values a non-elementwise kernel wrote into ``array``, narrowed to ``dtype`` (NARROW):
    a new array (a buffer cannot be read and written by one dispatch)."""
    if dtype.name not in NARROW or array.kind in COMPUTE or not array.numel():
        return array  # a narrow kind's values were rounded or wrapped as they were stored
    return launch(backend, "narrow", Narrowed(CAST, NARROW[dtype.name]), [array], array.shape, array.kind)


def converted(backend, array, kind: str):
    """``array`` as a new contiguous array of ``kind`` (a narrow kind <-> its compute kind around
    kernels that do not read it); ``array`` itself when it already is one."""
    if array.kind == kind:
        return array
    return launch(backend, "convert", CAST, [array], array.shape, kind)


def narrow_in_place(backend, array, dtype) -> None:
    """``narrowed``, written back into ``array`` (an in-place op's target)."""
    if dtype.name in NARROW and array.kind not in COMPUTE and array.numel():
        copy_into(backend, narrowed(backend, array, dtype), array)


def launch(backend, op_name, record, arrays, shape, out_kind, out=None):
    """Run ``record``'s expression over ``arrays`` into ``out`` (a new contiguous
    array unless an existing, possibly strided, view is given)."""
    in_kind = compute_kind(arrays[0].kind if len(arrays) < 3 else arrays[1].kind)
    expr = record.expression(in_kind, compute_kind(out_kind))
    if expr is None:
        raise TypeError(f"{op_name}: not supported on webgpu for element type {in_kind}")
    if out_kind == "f16" and not expr.startswith(ROUND_F16):
        expr = f"{ROUND_F16}{expr})"  # WGSL leaves f32 -> f16 rounding to the implementation
    shape = tuple(shape)
    out_geometry = None if out is None else (out.strides, out.offset)
    runs = strided_runs(backend)
    key = (op_name, expr, out_kind, shape, out_geometry, runs,
           *[(a.kind, a.shape, a.strides, a.offset) for a in arrays])
    plan = _PLANS.get(key)
    if plan is None:
        plan = _plan(op_name, arrays, shape, out_kind, out_geometry, runs)
        if len(_PLANS) >= _MAX_PLANS:
            _PLANS.clear()
        _PLANS[key] = plan
    if out is None:
        out = backend.empty(shape, out_kind, op_name)
    if plan is None:  # nothing to compute
        return out
    if large.too_large(backend, (*arrays, out)):  # once per window of the operands
        operands = [a.view(shape, broadcast_strides(a.shape, a.strides, shape)) for a in arrays]
        for *parts, part in large.split([*operands, out], large.binding_limit(backend)):
            launch(backend, op_name, record, parts, part.shape, out_kind, out=part)
        return out
    file, entry, types, constants, params, groups, label = plan
    buffers = [a.buffer for a in arrays] + [out.buffer]
    if CHECKED_CALL in expr:  # the expression reports bad values in the backend's error flag
        buffers.append(backend.index_errors.buffer_for(op_name))
    backend.dispatch(file, entry, types, expr, constants, buffers, params, backend.grid(groups, label), label)
    return out


def strided_runs(backend) -> tuple:
    """The elements a thread of a strided launch may take on ``backend``'s adapter (STRIDED_RUNS)."""
    return STRIDED_RUNS if is_cpu_adapter(getattr(backend.device, "adapter_info", None) or {}) else ()


def _plan(op_name, arrays, shape, out_kind, out_geometry, runs=()):
    """(file, entry, types, constants, params, workgroups, label) of one launch, or None when empty.
    ``runs``: the elements a thread may take in a strided launch (STRIDED_RUNS), largest first."""
    n = math.prod(shape)
    if n == 0:
        return None
    arity = len(arrays)
    out_strides, out_offset = out_geometry or (None, 0)
    out_strides = list(out_strides if out_strides is not None else contiguous_strides(shape))
    dims, strides = coalesce(shape, [*(broadcast_strides(a.shape, a.strides, shape) for a in arrays), out_strides])
    if len(dims) > MAX_RANK:
        raise ValueError(f"{op_name}: webgpu kernels handle at most {MAX_RANK} non-mergeable dims, "
                         f"got shape {shape}; call .contiguous() first")
    contiguous = len(dims) <= 1 and all(s == 1 for st in strides for s in st)
    file, entry = FILES[arity]
    types = (("A", arrays[0].kind),) + ((("B", arrays[1].kind),) if arity == 3 else ()) + (("O", out_kind),)
    # Contiguous: every operand's element i is at its offset + i. Else the kernel works the
    # offsets out over the coalesced dims, RANK of them (a pipeline constant: strided.wgsl).
    # A packed out, contiguous from a word's start: a thread per word, stored whole (no atomics).
    per_word = 4 // itemsize(out_kind) if out_kind in PACKED else 1
    words = per_word > 1 and out_offset % per_word == 0 and out_strides == list(contiguous_strides(shape))
    strided = not (contiguous or words) and len(dims) > 1
    run = next((r for r in runs if strided and dims[-1] % r == 0), 1)
    constants = {"CONTIGUOUS": contiguous, "RANK": len(dims), "WG": WORKGROUP, "WORDS": words, "RUN": run}
    offsets = [a.offset for a in arrays] + [0] * (3 - arity) + [out_offset]
    all_strides = strides[:arity] + [[0] * len(dims)] * (3 - arity) + [strides[-1]]
    threads = -(-n // per_word) if words else n // run
    groups = -(-threads // WORKGROUP)
    return file, entry, types, constants, pack_params(n, dims, offsets, all_strides), groups, f"{file}:{op_name}"


def copy_into(backend, src, dst) -> None:
    """Strided copy (with conversion) of ``src`` into the view ``dst`` of the same shape."""
    if src.storage is dst.storage:
        src = launch(backend, "copy", CAST, [src], src.shape, src.kind)
    launch(backend, "copy", CAST, [src], dst.shape, dst.kind, out=dst)


def _cast_record():
    from ...kernels import Elementwise

    return Elementwise({"f32->u32": "u32(wg_truthy(a))", "*->u32": "u32(a != A(0))", "*": "O(a)"})


CAST = _cast_record()
__all__ = ["KIND", "launch", "copy_into", "converted", "narrowed", "narrow_in_place"]
