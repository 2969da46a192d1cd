"""Launchers for scan.wgsl (cumsum, cumprod) and sort.wgsl (argsort).

Both ops work along the last dim (``webgrad.ops.scan`` and ``ops.sorting`` move
the dim there); a strided input is copied to a contiguous array first, so the
shaders see plain rows. Long rows are scanned in pieces of at most CHUNK
elements (three passes, see scan.wgsl), which keeps every thread under the loop
limit of CPU adapters (llvmpipe ends an invocation after ~65535 loop trips).
"""
from __future__ import annotations

import numpy as np

from . import reduce as gpu_reduce
from .backend import launcher

CHUNK = 4096           # elements one thread scans; rows up to this long take one pass
SORT_KINDS = {"f32": 0, "i32": 1, "u32": 2}


def _rows(x):
    n = x.shape[-1] if x.shape else 1
    return (x.numel() // n if n else 0), n


def _params(*words) -> bytes:
    return np.array(words, dtype=np.uint32).tobytes()


@launcher("scan")
def scan(backend, op, record, arrays, attrs, shape, dtype):
    """cumsum / cumprod of ``arrays[0]`` along its last dim."""
    (x,) = arrays
    if x.kind not in ("f32", "i32"):
        raise TypeError(f"{op.name}: webgpu scans f32 and i32 elements, got {x.kind}; convert with .float() or .long()")
    out = backend.empty(shape, x.kind, op.name)
    if out.numel() == 0:
        return out
    if not x.is_contiguous():
        x = backend.contiguous(x)
    rows, n = _rows(x)
    chunks = -(-n // CHUNK)
    chunk = -(-n // chunks)  # even pieces
    types = (("T", x.kind),)
    constants = {"PROD": record.entry == "cumprod"}
    params = _params(rows, n, x.offset, chunk, chunks, 0, 0, 0)
    carries = backend.empty((max(rows * chunks, 1),) if chunks > 1 else (1,), x.kind, "scan carries")
    buffers = [x.buffer, carries.buffer, out.buffer]
    label = f"scan.wgsl:{record.entry} {tuple(x.shape)}"
    backend.dispatch_1d("scan.wgsl", "scan_chunks", types, None, constants, buffers, params, rows * chunks, label)
    if chunks > 1:
        backend.dispatch_1d("scan.wgsl", "scan_carries", types, None, constants, buffers, params, rows, label)
        backend.dispatch_1d("scan.wgsl", "scan_apply", types, None, constants, buffers, params, rows * chunks, label)
    return out


@launcher("argsort")
def argsort(backend, op, record, arrays, attrs, shape, dtype):
    """The stable sorting permutation of every row of ``arrays[0]`` (last dim)."""
    (x,) = arrays
    out = backend.empty(shape, "i32", "argsort")
    if out.numel() == 0:
        return out
    if not x.is_contiguous():
        x = backend.contiguous(x)
    rows, n = _rows(x)
    if n > gpu_reduce.LOOP_TRIP_LIMIT and gpu_reduce.is_cpu_adapter(backend):
        raise ValueError(f"{op.name}: rows of {n} elements are longer than this CPU WebGPU adapter can sort "
                         f"(at most {gpu_reduce.LOOP_TRIP_LIMIT}); move the tensor to 'cpu' with .cpu()")
    constants = {"KIND": SORT_KINDS[x.kind], "DESCENDING": bool(attrs["descending"])}
    backend.dispatch_1d("sort.wgsl", "argsort", (("T", x.kind),), None, constants, [x.buffer, out.buffer],
                        _params(rows, n, x.offset, 0), rows * n, f"sort.wgsl:argsort {tuple(x.shape)}")
    return out
