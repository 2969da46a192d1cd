"""Launchers for scan.wgsl (cumsum, cumprod) and sort.wgsl (argsort).

Both ops work along the last dim (``webgrad.ops.scan`` and ``ops.sorting`` move
the dim there); a strided input is copied to a contiguous array first, so the
shaders see plain rows. Long rows are scanned in pieces of at most CHUNK
elements (three passes, see scan.wgsl), which keeps every thread under the loop
limit of CPU adapters (llvmpipe ends an invocation after ~65535 loop trips).
Rows up to RANK_SORT_MAX elements are sorted by ranking (one dispatch, n * n
work per row); longer rows by a bitonic network (n log^2 n work, one dispatch per step).
"""
from __future__ import annotations

import numpy as np

from .backend import WORKGROUP

CHUNK = 4096           # elements one thread scans; rows up to this long take one pass
RANK_SORT_MAX = 1024   # rows up to this long sort by ranking; longer ones by the bitonic network
SORT_KINDS = {"f32": 0, "i32": 1, "u32": 2}


def _rows(x):
    n = x.shape[-1] if x.shape else 1
    return (x.numel() // n if n else 0), n


def _params(*words) -> bytes:
    return np.array(words, dtype=np.uint32).tobytes()


def _dispatch(backend, file, entry, types, constants, buffers, params, threads, label):
    """Enough workgroups for ``threads`` threads, folded into (x, y) and capped at the
    adapter's limit in both; the shaders loop over the rest (t += grid size)."""
    grid = backend.looped_grid(-(-threads // WORKGROUP))
    backend.dispatch(file, entry, types, None, dict(constants, WG=WORKGROUP), buffers, params, grid, label)


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
    _dispatch(backend, "scan.wgsl", "scan_chunks", types, constants, buffers, params, rows * chunks, label)
    if chunks > 1:
        _dispatch(backend, "scan.wgsl", "scan_carries", types, constants, buffers, params, rows, label)
        _dispatch(backend, "scan.wgsl", "scan_apply", types, constants, buffers, params, rows * chunks, label)
    return out


def argsort(backend, op, record, arrays, attrs, shape, dtype):
    """The stable sorting permutation of every row of ``arrays[0]`` (last dim)."""
    (x,) = arrays
    out = backend.empty(shape, "i32", "argsort")
    if out.numel() == 0:
        return out
    if not x.is_contiguous():
        x = backend.contiguous(x)
    rows, n = _rows(x)
    types = (("T", x.kind),)
    constants = {"KIND": SORT_KINDS[x.kind], "DESCENDING": bool(attrs["descending"])}
    label = f"sort.wgsl {tuple(x.shape)}"
    if n <= RANK_SORT_MAX:
        # Two scratch buffers: one buffer bound twice as writable is a validation error.
        keys, idx = backend.empty((1,), "u32", "argsort scratch"), backend.empty((1,), "i32", "argsort scratch")
        _dispatch(backend, "sort.wgsl", "argsort", types, constants,
                  [x.buffer, keys.buffer, idx.buffer, out.buffer],
                  _params(rows, n, x.offset, 0, 0, 0), rows * n, label)
        return out
    padded = 1 << (n - 1).bit_length()
    keys = backend.empty((rows * padded,), "u32", "argsort keys")
    idx = backend.empty((rows * padded,), "i32", "argsort indices")
    buffers = [x.buffer, keys.buffer, idx.buffer, out.buffer]

    def run(entry, threads, k=0, j=0):
        _dispatch(backend, "sort.wgsl", entry, types, constants, buffers,
                  _params(rows, n, x.offset, padded, k, j), threads, label)

    run("bitonic_init", rows * padded)
    k = 2
    while k <= padded:
        j = k // 2
        while j >= 1:
            run("bitonic_step", rows * padded, k, j)
            j //= 2
        k *= 2
    run("bitonic_write", rows * n)
    return out
