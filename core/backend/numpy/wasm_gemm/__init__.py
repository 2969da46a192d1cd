"""float32 matmul for the numpy backend inside Pyodide: a SIMD GEMM in wasm.

Pyodide's numpy has no optimized BLAS: its matmul runs at ~1-2 GFLOP/s, 20-70x
behind TF.js's wasm backend. ``gemm.c`` (beside this file) is a blocked SIMD128
GEMM; the wheel build (server/wheel.py) compiles it with ``python -m ziglang cc``
into ``gemm_simd.wasm`` and ``gemm_relaxed.wasm`` (relaxed-SIMD fused
multiply-add) and ships both in the wheel. On the first large float32 product
in Pyodide the relaxed build is instantiated if the engine validates it, else
the plain SIMD one; an engine without wasm SIMD keeps numpy.

Why this and not the alternatives the issue named: scipy's OpenBLAS sgemm would
need a 13 MB scipy wheel and 6 MB of OpenBLAS before the first product (its speed
was not measured here); a kernel that reads Pyodide's own heap avoids the copies
but would share Pyodide's stack and data addresses with a module built without
emscripten. This module owns its memory instead: the operands are copied in and
the product out (O(n^2) against O(n^3) work), safe whatever Pyodide does. The
kernels (the GEMM; conv2d's forward, which packs its im2col panels from the image:
``conv2d`` below; the dynamic-quantized Linear's int8 product: ``quantized_linear``) are
10 KB, compiled synchronously in the runtime's worker.
bench/browser_bench.py, one headless Chromium run on a busy 2-core machine, time
relative to TF.js 4.22 wasm (XNNPACK, one thread): matmul 256 / 512 / 1024 at 0.63 /
0.68 / 0.77x here against 11 / 34 / 71x with numpy's own matmul; a 3x3 conv2d
(16x16x32x32 -> 32 channels) at 1.6x against 12x (1.0x since im2col copies positions
innermost, ops/conv.py; 0.56-0.84x, quiet and under load, packed from the image); the
digits MLP step at 0.99x
against 1.21x.

Natively numpy's BLAS stays; ``use_wasm_gemm(False)`` (or the environment
variable ``WEBGRAD_WASM_GEMM=0`` before import) keeps numpy in Pyodide too, so
the op table can run against both.
"""
from __future__ import annotations

import math
import os
import sys
import warnings
from pathlib import Path
from typing import Any

import numpy as np

from ..blas import cpu_threads, matmul_size

IN_PYODIDE = sys.platform == "emscripten"
# Below this many multiply-adds numpy's own loop is as fast: the calls into JS and
# the copies cost tens of microseconds (measured in Pyodide: 40 x 40 x 40 was a
# tie, 64 x 128 x 10 already faster here).
MIN_MULTIPLY_ADDS = 1 << 16
# The module's memory only grows (wasm cannot shrink it); larger products use numpy.
MAX_BYTES = 1 << 30
PAGE = 65536

_enabled = IN_PYODIDE and os.environ.get("WEBGRAD_WASM_GEMM", "1") != "0"
_kernel: _Kernel | None = None
_failed = False
# Products computed here and the build in use (the browser tests read them).
stats: dict[str, Any] = {"calls": 0, "conv_calls": 0, "int8_calls": 0, "variant": None}


def use_wasm_gemm(enabled: bool = True) -> bool:
    """Route large float32 products in Pyodide to the wasm GEMM (True) or numpy (False).

    Returns the previous setting. Outside Pyodide it stays off: numpy's BLAS is faster.
    """
    global _enabled
    previous = _enabled
    _enabled = bool(enabled) and IN_PYODIDE
    return previous


def wants(x: np.ndarray, y: np.ndarray, multiply_adds: int) -> bool:
    """Whether ``np.matmul(x, y)`` (both at least 2-D) should run here."""
    if not _enabled or _failed or x.dtype != np.float32 or y.dtype != np.float32:
        return False
    return multiply_adds >= MIN_MULTIPLY_ADDS and _load() is not None


def _load() -> _Kernel | None:
    global _kernel, _failed
    if _kernel is None and not _failed:
        try:
            _kernel = _Kernel(Path(__file__).parent)
            stats["variant"] = _kernel.variant
        except Exception as error:  # no SIMD, a wheel without the .wasm: numpy still works
            _failed = True
            warnings.warn(f"webgrad: the wasm matmul could not be loaded ({error}); "
                          f"float32 matmul stays on numpy", RuntimeWarning, stacklevel=3)
    return _kernel


class _Kernel:
    def __init__(self, folder: Path, variants=("relaxed", "simd")):
        import js  # type: ignore[import-not-found]  # Pyodide's bridge to JavaScript

        for variant in variants:
            path = folder / f"gemm_{variant}.wasm"
            data = path.read_bytes()
            code = js.Uint8Array.new(len(data))
            code.assign(data)
            if js.WebAssembly.validate(code):
                break
        else:
            raise RuntimeError("this engine has no WebAssembly SIMD")
        # Synchronous compile: fine in a worker (where webgrad's runtime runs Pyodide).
        exports = js.WebAssembly.Instance.new(js.WebAssembly.Module.new(code)).exports
        self.variant = "relaxed-simd" if variant == "relaxed" else "simd"
        self._js = js
        self._memory = exports.memory
        self._sgemm = exports.sgemm
        self._sconv = exports.sconv
        self._qlinear, self._qlinear_work_bytes = exports.qlinear, exports.qlinear_work_bytes
        self._base = (getattr(exports, "__heap_base").value + 15) // 16 * 16
        self._work_bytes = exports.work_floats() * 4
        self._size = self._memory.buffer.byteLength
        self._views: dict[tuple[int, int, str], object] = {}

    def _reserve(self, total: int) -> None:
        need = self._base + total - self._size
        if need > 0:
            self._memory.grow(-(-need // PAGE))
            self._size = self._memory.buffer.byteLength
            self._views.clear()  # growing detaches the old ArrayBuffer and its views

    def _place(self, *floats: int) -> list[int]:
        """Offsets in our memory (grown to fit) of arrays of ``floats`` float32s each, then of
        the kernels' scratch, 16-byte aligned."""
        offsets, total = [], 0
        for size in (*(4 * n for n in floats), self._work_bytes):
            offsets.append(self._base + total)
            total += (size + 15) // 16 * 16
        self._reserve(total)
        return offsets

    def _view(self, offset: int, length: int, kind: str = "Float32Array"):
        """A typed array over our memory, kept: each call into JS costs microseconds,
        and a training loop asks for the same few (offset, length) pairs every step."""
        view = self._views.get((offset, length, kind))
        if view is None:
            if len(self._views) >= 256:
                self._views.clear()
            view = self._views[offset, length, kind] = getattr(self._js, kind).new(self._memory.buffer, offset, length)
        return view

    def matmul(self, x: np.ndarray, y: np.ndarray, out: np.ndarray) -> None:
        """``out[...] = x @ y`` for float32 ``x`` (..., m, k), ``y`` (..., k, n); out contiguous."""
        batch = out.shape[:-2]
        count = math.prod(batch)
        a, (sa, ra, ca) = _operand(x, batch, count)
        b, (sb, rb, cb) = _operand(y, batch, count)
        offsets = self._place(a.size, b.size, out.size)
        self._view(offsets[0], a.size).assign(a)
        self._view(offsets[1], b.size).assign(b)
        m, k, n = x.shape[-2], x.shape[-1], y.shape[-1]
        self._sgemm(count, m, n, k, offsets[0], sa, ra, ca, offsets[1], sb, rb, cb, offsets[2], offsets[3])
        self._view(offsets[2], out.size).assign_to(out)


    def conv2d(self, x: np.ndarray, w: np.ndarray, out: np.ndarray, geometry: tuple) -> None:
        """``out`` (n, O, Ho*Wo) = conv2d of contiguous x (n, C, h, w) by w (O, Cg*kh*kw); ``geometry``:
        sconv's groups, O/groups, Cg, h, w, kh, kw, sh, sw, dh, dw, top, left, Ho, Wo."""
        offsets = self._place(x.size, w.size, out.size)
        self._view(offsets[0], x.size).assign(x.reshape(-1))
        self._view(offsets[1], w.size).assign(w.reshape(-1))
        self._sconv(x.shape[0], *geometry, *offsets)
        self._view(offsets[2], out.size).assign_to(out.reshape(-1))

    def quantized_linear(self, x: np.ndarray, w: np.ndarray, wscale: np.ndarray, bias, out: np.ndarray) -> bool:
        """``out`` (m, n) = the int8 layer (gemm.c's qlinear) on contiguous float32 x (m, k), int8
        w (n, k), float32 wscale (n or 1) and bias (n or None); False where x has an inf or NaN."""
        (m, k), n = x.shape, w.shape[0]
        # w's floats: its bytes and the 16 that qlinear may read past its end, rounded up
        work_floats = -(-self._qlinear_work_bytes(m, k) // 4)
        offsets = self._place(x.size, -(-(w.size + 16) // 4), wscale.size, n, out.size, work_floats)
        self._view(offsets[0], x.size).assign(x.reshape(-1))
        self._view(offsets[1], w.size, "Int8Array").assign(w.reshape(-1))
        self._view(offsets[2], wscale.size).assign(wscale)
        if bias is not None:
            self._view(offsets[3], n).assign(bias)
        if self._qlinear(m, n, k, offsets[0], offsets[1], offsets[2], int(wscale.size == n),
                         0 if bias is None else offsets[3], offsets[4], offsets[5]) != 0:
            return False
        self._view(offsets[4], out.size).assign_to(out.reshape(-1))
        return True


def quantized_linear(x: np.ndarray, weight: np.ndarray, weight_scale: np.ndarray, bias) -> np.ndarray | None:
    """The dynamic-quantized layer (ao/quantization.py) on x (m, k) float32 and weight (n, k) int8
    in wasm: int8 products, the numpy reference's bits. None where the wasm kernels are not in use,
    for a small layer (numpy's float32 path is as fast) and for what it leaves to the reference
    (an infinity or NaN in x, k of 2**17 or more: int32 sums stay exact below)."""
    (m, k), n = x.shape, weight.shape[0]
    if not _enabled or _failed or not (m and n and 0 < k < 1 << 17) or m * n * k < MIN_MULTIPLY_ADDS:
        return None
    kernel = _load()
    if kernel is None or x.nbytes + weight.nbytes + 4 * m * n > MAX_BYTES:
        return None
    out = np.empty((m, n), np.float32)
    bias = None if bias is None else np.ascontiguousarray(bias, np.float32)
    if not kernel.quantized_linear(np.ascontiguousarray(x, np.float32), np.ascontiguousarray(weight),
                                    np.ascontiguousarray(weight_scale, np.float32).reshape(-1), bias, out):
        return None
    stats["calls"] += 1
    stats["int8_calls"] += 1
    return out


def _operand(x: np.ndarray, batch: tuple, count: int):
    """A C-contiguous array holding ``x``'s matrices, and (batch, row, column) strides
    in elements that read matrix b's element (i, j) from it. A transposed matrix
    (``.mT`` of a contiguous one) is read in place; one matrix for the whole batch
    gets batch stride 0."""
    rows, cols = x.shape[-2:]
    own = math.prod(x.shape[:-2])
    if own != count and own != 1:  # broadcast over some batch dims only: materialize
        x = np.broadcast_to(x, batch + (rows, cols))
        own = count
    x3 = x.reshape(own, rows, cols)
    step = 0 if own == 1 else rows * cols
    if x3.flags.c_contiguous:
        return x3, (step, cols, 1)
    xt = x3.swapaxes(-1, -2)
    if xt.flags.c_contiguous:
        return xt, (step, 1, rows)
    return np.ascontiguousarray(x3), (step, cols, 1)


def np_matmul(x: np.ndarray, y: np.ndarray, out: np.ndarray | None = None) -> np.ndarray:
    """``np.matmul``, in wasm where that applies (Pyodide, float32, large enough): for
    numpy kernels that multiply matrices themselves (conv2d's im2col in ops/conv.py). Natively
    BLAS writes straight into ``out`` (any row stride); in Pyodide the result is copied there."""
    products = x.ndim >= 2 and y.ndim >= 2
    if products and wants(x, y, matmul_size(x, y)):
        result = matmul(x, y)
    elif products and not IN_PYODIDE:
        return cpu_threads.matmul(x, y, out=out)  # as the matmul op does (see blas.py)
    else:
        result = numpy_matmul(x, y)
    if out is None:
        return result
    out[...] = result
    return out


# Pyodide's numpy (no BLAS) multiplies in its own loop, which walks y down a column: with y
# C-contiguous each step jumps a row. Measured in Pyodide, 256 x 256 float64: 52 -> 15 ms with
# y copied k-major first; a 3x3 conv's product (16 x (32x144 @ 144x1024)): 254 -> 102 ms. The
# copy is O(k n) against O(m k n): only worth it from a few rows of x.
MIN_ROWS_FOR_KMAJOR = 8


def numpy_matmul(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """``np.matmul(x, y)``; in Pyodide with ``y`` copied so that its k axis is contiguous
    when that pays (see above). Natively numpy's BLAS takes any layout as it is."""
    if (IN_PYODIDE and x.ndim >= 2 and y.ndim >= 2 and x.shape[-2] >= MIN_ROWS_FOR_KMAJOR
            and y.shape[-1] > 1 and y.strides[-2] != y.itemsize):
        y = np.ascontiguousarray(y.swapaxes(-1, -2)).swapaxes(-1, -2)
    return np.matmul(x, y)


def matmul(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """``np.matmul(x, y)`` for float32 operands of at least 2 dims, in wasm."""
    shape = np.broadcast_shapes(x.shape[:-2], y.shape[:-2]) + (x.shape[-2], y.shape[-1])
    out = np.empty(shape, np.float32)
    if out.size == 0:
        return out
    if x.shape[-1] == 0:
        out[...] = 0
        return out
    kernel = _load()
    if kernel is None or out.nbytes + x.nbytes + y.nbytes > MAX_BYTES:
        return np.matmul(x, y)
    kernel.matmul(x, y, out)
    stats["calls"] += 1
    return out


def conv2d(x: np.ndarray, w: np.ndarray, out_hw, stride, padding, dilation, groups) -> np.ndarray | None:
    """PyTorch's conv2d of x (n, C, h, w) by w (O, C/groups, kh, kw), float32, in wasm with the
    im2col matrix packed straight from the image (gemm.c's sconv): neither built by numpy nor
    copied in. None where the wasm kernels are not in use (natively, off, float64, small)."""
    n, o, (ho, wo), (kh, kw) = x.shape[0], w.shape[0], out_hw, w.shape[2:]
    size = n * o * ho * wo * w[0].size
    if not wants(x, w, size) or x.nbytes + w.nbytes + n * o * ho * wo * 4 > MAX_BYTES:
        return None
    kernel = _load()
    assert kernel is not None  # wants() loaded it
    out = np.empty((n, o, ho * wo), np.float32)
    geometry = (groups, o // groups, x.shape[1] // groups, *x.shape[2:], kh, kw, *stride, *dilation, padding[0],
                padding[2], ho, wo)
    kernel.conv2d(np.ascontiguousarray(x), np.ascontiguousarray(w), out, geometry)
    stats["calls"] += 1
    stats["conv_calls"] += 1
    return out
