"""int8 products for the dynamic-quantized Linear on the cpu, natively: ``qgemm.c``.

numpy has no int8 matrix product, so without this the int8 layer is the float32 BLAS
call plus the quantization, slower than float32. ``qgemm.c`` (beside this file) sums int8
products in int32 with AVX-512 VNNI, AVX2 or plain C, whichever the machine has, and gives
the numpy reference's bits (see there). It is compiled for this machine's CPU
(``-march=native``) by the install step::

    python -m webgrad.backend.numpy.int8_gemm      # scripts/install-deps runs it

into ``~/.cache/webgrad`` (``$XDG_CACHE_HOME``), named by a hash of the source, the flags and
the CPU's features, so a changed source or another machine never loads a stale build. Where
no build is there (Pyodide, a plain ``pip install``) the layer keeps the BLAS path: the same
results, at float32 speed. ``stats`` says which ran (the tests read it).
"""
from __future__ import annotations

import hashlib
import os
import platform
import sys
from pathlib import Path
from typing import Any

import numpy as np

SOURCE = Path(__file__).with_name("qgemm.c")
FLAGS = ["-O3", "-march=native", "-ffp-contract=off", "-shared", "-fPIC", "-lpthread"]
MR = 8  # qgemm.c's rows per tile: the quantized x is padded to a multiple
# Products of at least this many multiply-adds split over the cores (as BLAS threads do, blas.py).
THREADS_FROM = 1 << 22
_lib: Any = None
_tried = False
stats: dict[str, Any] = {"calls": 0, "variant": None}


def _cpu_features() -> str:
    try:
        with open("/proc/cpuinfo") as info:
            return next((line for line in info if line.startswith(("flags", "Features"))), "")
    except OSError:
        return platform.processor()


def library_path() -> Path:
    """Where this source's build for this CPU lives."""
    key = hashlib.sha256(SOURCE.read_bytes() + " ".join(FLAGS).encode() + _cpu_features().encode()).hexdigest()
    cache = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "webgrad"
    suffix = ".dll" if sys.platform == "win32" else ".dylib" if sys.platform == "darwin" else ".so"
    return cache / f"qgemm-{platform.machine()}-{key[:16]}{suffix}"


def build() -> Path:
    """Compile qgemm.c for this machine with zig's clang (``pip install ziglang``); nothing to do
    when this build exists. Written to a temporary name first: a failed build leaves no library."""
    target = library_path()
    if target.exists():
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    import subprocess

    partial = target.with_name(f"{target.name}.{os.getpid()}.tmp")
    command = [sys.executable, "-m", "ziglang", "cc", *FLAGS, "-o", str(partial), str(SOURCE)]
    result = subprocess.run(command, capture_output=True, text=True)
    if result.returncode != 0:
        partial.unlink(missing_ok=True)
        raise RuntimeError(f"compiling {SOURCE.name} failed ({' '.join(command)}):\n{result.stderr}")
    partial.replace(target)
    return target


def open_library(path: Path):
    """The built library at ``path``, its functions typed for ctypes."""
    import ctypes

    lib = ctypes.CDLL(str(path))
    lib.qgemm_variant.restype = ctypes.c_char_p
    p, n = ctypes.c_void_p, ctypes.c_long
    lib.qgemm_quantize.argtypes = [n, n, p, n, p, p]
    lib.qgemm_linear.argtypes = [n, n, n, p, p, p, n, p, n, p, p, n, ctypes.c_int]
    return lib


def _load():
    global _lib, _tried
    if not _tried:
        _tried = True
        path = library_path()
        if sys.platform != "emscripten" and path.exists():
            _lib = open_library(path)
            stats["variant"] = _lib.qgemm_variant().decode()
    return _lib


def available() -> bool:
    return _load() is not None


def _cores() -> int:
    """The cores this process may run on (a container's share, not the machine's count)."""
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


def _rows(a: np.ndarray) -> np.ndarray:
    """``a`` with unit stride along its last dim (a copy otherwise)."""
    return a if a.strides[-1] == a.itemsize else np.ascontiguousarray(a)


def linear(x: np.ndarray, weight: np.ndarray, weight_scale: np.ndarray, bias) -> np.ndarray | None:
    """The quantized layer on x (m, k) float32 and weight (n, k) int8 with per-row (or one)
    ``weight_scale``: x quantized by its own range, the int8 products, scaled back, the bias
    added. None where the library is not built, or for what it leaves to the reference
    (empty operands, an infinity or NaN in x, k of 2**17 or more)."""
    lib = _load()
    (m, k), n = x.shape, weight.shape[0]
    if lib is None or not (m and n and 0 < k < 1 << 17):  # (int32 sums stay exact)
        return None
    x, weight = _rows(x), _rows(weight)
    xq, qparams = np.empty(-(-m // MR) * MR * -(-k // 4) * 4, np.uint8), np.empty(2, np.float32)
    if lib.qgemm_quantize(m, k, x.ctypes.data, x.strides[0] // 4, xq.ctypes.data, qparams.ctypes.data) != 0:
        return None
    weight_scale = np.ascontiguousarray(weight_scale, np.float32)
    bias = None if bias is None else np.ascontiguousarray(bias, np.float32)
    out = np.empty((m, n), np.float32)
    threads = _cores() if m * n * k >= THREADS_FROM else 1
    if lib.qgemm_linear(m, n, k, xq.ctypes.data, qparams.ctypes.data, weight.ctypes.data, weight.strides[0],
                        weight_scale.ctypes.data, int(weight_scale.size == n),
                        None if bias is None else bias.ctypes.data, out.ctypes.data, n, threads) != 0:
        raise MemoryError(f"quantized_linear: no memory for the packed weight ({n} x {k} int8)")
    stats["calls"] += 1
    return out
