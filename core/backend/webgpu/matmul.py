"""Launching matmul.wgsl: batched, broadcasting matrix products over strided views.

The operands are read in place through their strides (a transposed operand from
the vjp, a slice, an expanded batch dim); only the output is new. Three kernels:

- ``register``: each thread keeps a 16 x 16 block of C in private arrays, reads A and
  B as vec4s where their strides allow, and uses no workgroup memory. Chosen on
  llvmpipe, where barriers are very slow.
- ``matmul_4x4``: one to four 4 x 4 blocks a thread in plain vec4 variables, for
  SwiftShader, which keeps private arrays in memory, and llvmpipe's smaller products.
- ``tiled``: shared-memory tiling, chosen on real GPUs.

``VARIANT`` forces one blocking (tests run each on every adapter).
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from ...kernels import Elementwise, Fused, Program
from .array import contiguous_strides
from . import elementwise, fused, geometry, large
from .geometry import (FLOATS, broadcast_strides, coalesce, dtype_of, is_cpu_adapter, is_swiftshader, kind_of,
                       stored_kind)
from .reduce import LOOP_TRIP_LIMIT

FILE = "matmul.wgsl"
MAX_BATCH_DIMS = 4
VARIANT: str | None = None  # None: chosen per adapter; "register" or "tiled" to force one


ADD = Elementwise("a + b")  # the partial products of a product split along its inner dimension
# F.linear's bias add, as a matmul epilogue chain (kernels.Fused): the product plus input 1.
BIAS = Fused((("add", (("in", 0), ("in", 1)), ("float32", "float32"), "float32", ()),), 2, (ADD,))
# What the kernels read (source.matmul_readers): i32, and the floats, the packed ones never stored.
KINDS = ("i32", *FLOATS)

# Largest per-thread blocks the kernels hold (MAX_TM/MAX_TN4 and TILED_MAX_* in matmul.wgsl).
LIMITS = {"matmul": (16, 4), "matmul_tiled": (8, 2), "matmul_4x4": (8, 2)}  # matmul_4x4: TM 4 or 8, TN4 1 or 2


@dataclass(frozen=True)
class Blocking:
    """How C is cut up: a workgroup of wg_x x wg_y threads, each computing a
    tm x (4 * tn4) block, covers (wg_y * tm) x (wg_x * 4 * tn4) of C. ``tile_k``
    is the depth of the staged tiles of the tiled kernel."""

    entry: str
    wg_x: int
    wg_y: int
    tm: int
    tn4: int = 1
    tile_k: int = 16

    def __post_init__(self):
        max_tm, max_tn4 = LIMITS[self.entry]
        if not (1 <= self.tm <= max_tm and 1 <= self.tn4 <= max_tn4):
            raise ValueError(f"matmul: {self.entry} holds at most {max_tm} x {4 * max_tn4} elements per thread, "
                             f"got {self.tm} x {4 * self.tn4}")
        if self.entry == "matmul_4x4" and (self.tm not in (4, 8) or self.tn4 not in (1, 2)):
            raise ValueError(f"matmul: matmul_4x4 computes 4 or 8 rows by 4 or 8 columns, "
                             f"got {self.tm} x {4 * self.tn4}")

    @property
    def rows(self) -> int:
        return self.wg_y * self.tm

    @property
    def cols(self) -> int:
        return self.wg_x * 4 * self.tn4


# llvmpipe (8-wide SIMD, where every buffer read loops over the lanes): big
# 16 x 16 blocks make the fewest reads per multiply-add. Measured at N=512 per
# CPU-second: 4 x 4 and 8 x 8 blocks ~5.5 GFLOP, 16 x 16 ~7.5, 32 x 16 no
# better and 20x slower to compile.
REGISTER = Blocking("matmul", wg_x=8, wg_y=2, tm=16, tn4=4)
# SwiftShader (Chromium's CPU adapter) runs matmul_4x4: plain vec4 accumulators, as it keeps the
# register kernel's private arrays in memory (it does not unroll loops over TM and TN4), with
# 8 x 8 blocks in workgroups of 2 x 2 threads (16 x 16 of C, so that a small product still makes
# several workgroups to spread over the cores). In Chromium (bench/browser_bench.py, one run
# each on this 2-core machine) matmul 256 / 512 / 1024 took 90 / 949 / 4921 ms with REGISTER,
# 89 / 577 / 4915 with 8 x 8 register blocks, 39 / 247 / 2041 with 4 x 4 blocks; jax-js 0.1.25's 4 x 4 kernel
# 24-30 / 170-250 / 1300-1720 in the same runs. With K walked four at a time (contiguous rows of
# A): 16-18 / 101-103 / 757-769 ms with 4 x 4 blocks, 11-13 / 81-89 / 635-687 with 8 x 4, 9-12 /
# 66-80 / 497-531 with 8 x 8 (jax-js 14-15 / 112 / 808-814); workgroups of 2 x 2 to 16 x 16
# threads all the same there. Smaller products (ms with 4 x 4 blocks in 4 x 4 workgroups / these):
# (64, 32, 16) @ (64, 16, 32) 2.3-2.7 / 1.5-1.8, (64, 32, 32) @ (64, 32, 16) 2.0-2.4 / 1.2-1.6,
# (512, 64) @ (64, 64) 2.4-2.5 / 1.6-1.7, (64, 512) @ (512, 64) 1.9-2.1 / 1.4, (64, 128) @ (128, 10)
# 0.6-0.7 / 0.5-0.7. (The register kernel's 8 x 8 blocks in 2 x 2 workgroups took the char
# transformer's products 877 ms over three steps, 4 x 4 blocks here 444 ms.)
# On llvmpipe EIGHT also beats REGISTER where REGISTER's 32 x 128 tiles would be partly idle
# (ms REGISTER / EIGHT): (64, 1024) @ (1024, 64) 2.0 / 1.0, (1024, 64) @ (64, 64) 2.2 / 1.2,
# (16, 512) @ (512, 512) 2.1 / 1.0, (64, 32, 16) @ (64, 16, 32) 0.8-1.0 / 0.6-1.1 (8 x 8 register
# blocks in 4 x 4 workgroups, used for outputs up to 64 columns before, took 1.5 / 1.8 / 2.9 / 0.9);
# from 128 x 128 outputs they tie, and REGISTER is ahead from 256 x 256 (3.0 / 3.8 ms) to
# 1024 x 1024 (174 / 218 ms).
EIGHT = Blocking("matmul_4x4", wg_x=2, wg_y=2, tm=8, tn4=2)
# A common choice for discrete GPUs: 64 x 64 tiles staged 16 deep, 4 x 4 per thread.
TILED = Blocking("matmul_tiled", wg_x=16, wg_y=16, tm=4, tn4=1, tile_k=16)
BLOCKINGS = {"register": REGISTER, "eight": EIGHT, "tiled": TILED}


def choose_blocking(backend, m: int, n: int) -> Blocking:
    """The forced ``VARIANT`` if any, else EIGHT on SwiftShader, on other CPU adapters REGISTER
    (EIGHT for an ``m`` x ``n`` output at most 64 columns wide or under 32 rows), and
    shared-memory tiling on GPUs."""
    if VARIANT is not None:
        if VARIANT not in BLOCKINGS:
            raise ValueError(f"matmul: unknown variant {VARIANT!r}; use one of {sorted(BLOCKINGS)} or None")
        return BLOCKINGS[VARIANT]
    info = getattr(backend.device, "adapter_info", None) or {}
    if not is_cpu_adapter(info):
        return TILED
    if is_swiftshader(info):
        return EIGHT
    return EIGHT if n <= 64 or m < REGISTER.rows else REGISTER


def batch_strides(array, batch) -> list:
    """``array``'s strides over the broadcast batch dims (0 where it is broadcast)."""
    return broadcast_strides(array.shape[:-2], array.strides[:-2], batch)


def coalesce_batch(batch, a_strides, b_strides, matrix_size):
    """Drop size-1 batch dims and merge neighbours that step evenly in A, B and C
    (C is contiguous, a batch step of ``matrix_size``), so most calls end up
    with at most one batch dim. Only called with a non-empty batch."""
    c_strides = [s * matrix_size for s in contiguous_strides(batch)]
    dims, (a, b, _) = coalesce(batch, [a_strides, b_strides, c_strides])
    return dims, a, b


def fold_grid(backend, groups: int, label: str) -> tuple:
    """Spread ``groups`` workgroups over (x, y, z) within the per-dimension limit."""
    return geometry.fold_grid(groups, backend.limits["max_compute_workgroups_per_dimension"], label, dims=3)


def _aligned(stride, size) -> bool:
    return size == 1 or stride % 4 == 0


def vector_modes(a, b, a_batch, b_batch, batch, m, n, k, tm):
    """Which operands allow vec4 reads (see matmul.wgsl): a vec4 read needs a
    unit stride along its axis and every row start at a multiple of 4 elements."""
    am, ak = a.strides[-2:]
    bk, bn = b.strides[-2:]
    a_starts = a.offset % 4 == 0 and all(_aligned(s, d) for s, d in zip(a_batch, batch))
    b_starts = b.offset % 4 == 0 and all(_aligned(s, d) for s, d in zip(b_batch, batch))
    a_mode = b_mode = 0
    if a_starts and k >= 4 and ak == 1 and _aligned(am, m):
        a_mode = 1
    elif a_starts and k >= 4 and am == 1 and m > 1 and _aligned(ak, k) and tm % 4 == 0:
        a_mode = 2
    if b_starts and k >= 4 and bn == 1 and n > 1 and _aligned(bk, k):
        b_mode = 1
    elif b_starts and k >= 4 and bk == 1 and _aligned(bn, n):
        b_mode = 2
    return a_mode, b_mode


def pack_params(m, n, k, count, tiles_n, tiles_m, total, a, b, batch, a_batch, b_batch, ext=()) -> bytes:
    """The ``Params`` uniform; ``ext``: (offset, strides) of each epilogue input."""
    words = np.zeros(36, dtype=np.uint32)
    signed = words.view(np.int32)
    words[0:4] = (m, n, k, count)
    words[4:8] = (tiles_n, tiles_m, total, n % 4 == 0)
    words[8:10] = (a.offset, b.offset)
    signed[12:16] = (a.strides[-2], a.strides[-1], b.strides[-2], b.strides[-1])
    lead = MAX_BATCH_DIMS - len(batch)
    words[16:20] = [1] * lead + list(batch)
    signed[20:24] = [0] * lead + list(a_batch)
    signed[24:28] = [0] * lead + list(b_batch)
    for j, (offset, strides) in enumerate(ext):
        words[10 + j] = offset
        signed[28 + 4 * j:31 + 4 * j] = strides
    return words.tobytes()


def epilogue_strides(array, shape) -> tuple | None:
    """An epilogue input's strides per (batch index, row, column) of C (``shape``), where
    it is broadcast to C; None when its batch dims do not step evenly with C's batch index."""
    strides = broadcast_strides(array.shape, array.strides, shape)
    unit, span = None, 1
    for size, s in zip(reversed(shape[:-2]), reversed(strides[:-2])):
        if size == 1:
            continue
        if unit is None:
            unit = s
        elif s != unit * span:
            return None
        span *= size
    return unit or 0, strides[-2], strides[-1]


def _materialize(backend, array, batch):
    """A contiguous copy of ``array`` expanded over ``batch``: the fallback when
    more than MAX_BATCH_DIMS batch dims remain after coalescing."""
    shape = tuple(batch) + array.shape[-2:]
    strides = tuple(batch_strides(array, tuple(batch))) + array.strides[-2:]
    return backend.contiguous(array.view(shape, strides))


def matmul(backend, op, record, arrays, attrs, shape, dtype):
    a, b = arrays
    if _past_one_binding(backend, a, b, shape, dtype):
        return _in_windows(backend, a, b, tuple(shape), dtype)
    return _product(backend, a, b, shape, dtype)


def _past_one_binding(backend, a, b, shape, dtype) -> bool:
    return large.too_large(backend, (a, b)) or \
        math.prod(shape) * geometry.itemsize(kind_of(dtype)) > large.binding_limit(backend)


def _in_windows(backend, a, b, shape, dtype):
    """A product with an operand or result larger than one binding (an output layer over a
    large vocabulary, or its gradients), cut in halves until every block fits one binding."""
    out = backend.empty(shape, kind_of(dtype), "matmul")
    _into(backend, a, b, out, dtype, large.binding_limit(backend))
    return out


def _into(backend, a, b, into, dtype, limit) -> None:
    """``into = a @ b`` (``into`` a view of the result). The operand or result that does not fit
    one binding is halved along its widest dim: rows of A and C, columns of B and C, or the
    inner dimension (two partial products added). A block's product is a buffer of its own,
    copied into its place (copies split however large the result is)."""
    if large.fits(a, limit) and large.fits(b, limit) and into.nbytes <= limit:
        product = _product(backend, large.windowed(a, limit), large.windowed(b, limit), into.shape, dtype)
        elementwise.copy_into(backend, product, into)
        return
    m_dim, n_dim = len(into.shape) - 2, len(into.shape) - 1
    if not large.fits(a, limit):
        axis = {len(a.shape) - 2: "m", len(a.shape) - 1: "k"}.get(large.widest_dim(a))
    elif not large.fits(b, limit):
        axis = {len(b.shape) - 1: "n", len(b.shape) - 2: "k"}.get(large.widest_dim(b))
    else:
        axis = "m" if into.shape[m_dim] >= into.shape[n_dim] else "n"
    size = {"m": into.shape[m_dim], "n": into.shape[n_dim], "k": a.shape[-1]}.get(axis or "", 1)
    if size < 2:  # a batch dim is the widest, or nothing is left to halve
        raise MemoryError(f"webgpu: matmul of {a.shape} and {b.shape} cannot be cut into blocks that fit one "
                          f"binding ({limit} bytes, maxStorageBufferBindingSize)")
    half = size // 2
    a_rows, b_cols = len(a.shape) - 2, len(b.shape) - 1
    for lo, hi in ((0, half), (half, size)):
        if axis == "m":
            _into(backend, large.narrow(a, a_rows, lo, hi), b, large.narrow(into, m_dim, lo, hi), dtype, limit)
        elif axis == "n":
            _into(backend, a, large.narrow(b, b_cols, lo, hi), large.narrow(into, n_dim, lo, hi), dtype, limit)
    if axis == "k":
        parts = []
        for lo, hi in ((0, half), (half, size)):
            part = backend.empty(into.shape, into.kind, "matmul partial")
            _into(backend, large.narrow(a, len(a.shape) - 1, lo, hi), large.narrow(b, len(b.shape) - 2, lo, hi),
                  part, dtype, limit)
            parts.append(part)
        elementwise.launch(backend, "matmul", ADD, parts, into.shape, into.kind, out=into)


def matmul_epilogue(backend, op, record, arrays, attrs, shape, dtype):
    """A product whose stores run a fused elementwise chain (``record.chain``, input 0
    the product). Inputs the kernel cannot address (not float32, batch dims that do not
    step evenly) run the chain as its own dispatch instead."""
    a, b, *ext = arrays
    if _past_one_binding(backend, a, b, shape, dtype):  # the product in windows, then the chain (which splits)
        product = _in_windows(backend, a, b, tuple(shape), dtype)
        return fused.launch_fused(backend, op, record.chain, [product, *ext], attrs, shape, dtype)
    strides = [epilogue_strides(e, tuple(shape)) for e in ext]
    if kind_of(dtype) == "f32" and all(e.kind == "f32" and s is not None for e, s in zip(ext, strides)):
        return _product(backend, a, b, shape, dtype, (record.chain, ext, strides))
    product = _product(backend, a, b, shape, dtype)
    return fused.launch_fused(backend, op, record.chain, [product, *ext], attrs, shape, dtype)


def linear(backend, op, record, arrays, attrs, shape, dtype):
    """F.linear's one op: x @ w.T, plus the bias in the product's stores where the kernel can
    add it (float32, one binding each), else as a second dispatch."""
    x, w, *bias = arrays
    wt = w.view((w.shape[1], w.shape[0]), (w.strides[1], w.strides[0]))
    if not bias:
        return matmul(backend, op, record, [x, wt], attrs, shape, dtype)
    if not _past_one_binding(backend, x, wt, shape, dtype) and kind_of(dtype) == bias[0].kind == "f32":
        return _product(backend, x, wt, shape, dtype, (BIAS, bias, [epilogue_strides(bias[0], tuple(shape))]))
    product = matmul(backend, op, record, [x, wt], attrs, shape, dtype)
    return elementwise.launch(backend, "linear", ADD, [product, bias[0]], shape, product.kind)


def _product(backend, a, b, shape, dtype, epilogue=None):
    kind = kind_of(dtype)
    if stored_kind(kind) != kind:  # read as stored; the sums are stored as f32, then rounded into the packed kind
        return elementwise.converted(backend, _product(backend, a, b, shape, dtype_of("f32"), epilogue), kind)
    if kind not in ("f32", "i32", "f16") or a.kind not in KINDS or b.kind not in KINDS:
        raise TypeError(f"matmul: not supported on webgpu for {dtype.name} tensors")
    out = backend.empty(shape, kind, "matmul")
    m, k, n = a.shape[-2], a.shape[-1], b.shape[-1]
    batch = tuple(shape[:-2])
    count = math.prod(batch)
    if m == 0 or n == 0 or count == 0:
        return out
    a_batch, b_batch = batch_strides(a, batch), batch_strides(b, batch)
    dims, a_batch, b_batch = coalesce_batch(batch, a_batch, b_batch, m * n)
    if len(dims) > MAX_BATCH_DIMS:
        a, b = _materialize(backend, a, batch), _materialize(backend, b, batch)
        dims, a_batch, b_batch = coalesce_batch(batch, batch_strides(a, batch), batch_strides(b, batch), m * n)

    blocking = choose_blocking(backend, m, n)
    trips = k if blocking.entry == "matmul_4x4" else -(-k // 4)
    if trips > LOOP_TRIP_LIMIT and is_cpu_adapter(getattr(backend.device, "adapter_info", None) or {}):
        raise ValueError(f"matmul: an inner dimension of {k} needs {trips} loop trips per thread, past this CPU "
                         f"adapter's limit of {LOOP_TRIP_LIMIT} (it would stop silently); split the product "
                         f"along that dimension or move the tensors to 'cpu'")
    tiles_n, tiles_m = -(-n // blocking.cols), -(-m // blocking.rows)
    total = tiles_n * tiles_m * count
    label = f"{FILE}:{blocking.entry}"
    a_mode, b_mode = vector_modes(a, b, a_batch, b_batch, dims, m, n, k, blocking.tm)
    constants = {"WG_X": blocking.wg_x, "WG_Y": blocking.wg_y, "TM": blocking.tm, "TN4": blocking.tn4}
    if blocking.entry == "matmul_tiled":
        constants["TILE_K"] = blocking.tile_k
    elif blocking.entry == "matmul_4x4":  # vec4 reads along rows only (of A along k, of B along n)
        constants.update(A_VEC=1 if a_mode == 1 else 0, B_VEC=1 if b_mode == 1 else 0)
    else:
        constants.update(A_VEC=a_mode, B_VEC=b_mode)
    grid = fold_grid(backend, total, label)
    types = (("T", kind), ("A", a.kind), ("B", b.kind), ("O", kind))
    if epilogue is None:
        params = pack_params(m, n, k, count, tiles_n, tiles_m, total, a, b, dims, a_batch, b_batch)
        backend.dispatch(FILE, blocking.entry, types, "v", constants, [a.buffer, b.buffer, out.buffer], params, grid,
                         label)
        return out
    chain, ext, strides = epilogue
    params = pack_params(m, n, k, count, tiles_n, tiles_m, total, a, b, dims, a_batch, b_batch,
                         [(e.offset, s) for e, s in zip(ext, strides)])
    program = Program.of(FILE, blocking.entry, types, None, constants, generated=chain)
    backend.run_program(program, [a.buffer, b.buffer, out.buffer] + [e.buffer for e in ext], params, grid, label,
                        source=fused.matmul_epilogue_source(chain, types))
    return out
