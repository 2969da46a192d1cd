"""The wasm matmul kernel (core/backend/wasm/gemm.c) builds reproducibly into the wheel.

Its results are checked in Pyodide (tests/browser/test_wasm_gemm.py); natively
numpy's BLAS stays, and the fast path is off."""
from __future__ import annotations

import shutil
import zipfile

import numpy as np

import webgrad
from webgrad.backend import wasm as wasm_gemm

from conftest import need_module


def _build(root):
    from server import wheel

    (root / wheel.WASM_SOURCE).parent.mkdir(parents=True)
    shutil.copy(wheel.REPO / wheel.WASM_SOURCE, root / wheel.WASM_SOURCE)
    return {path.name: path.read_bytes() for path in wheel.compile_wasm(root)}


def test_kernel_builds_reproducibly(tmp_path):
    need_module("ziglang")
    first, second = _build(tmp_path / "a"), _build(tmp_path / "b")
    assert set(first) == {"gemm_simd.wasm", "gemm_relaxed.wasm"}
    assert first == second, "the same C source and flags must give the same bytes"
    for data in first.values():
        assert data[:8] == b"\0asm\x01\0\0\0"
        assert b"sgemm" in data and b"work_floats" in data
        # Chromium compiles at most 4 KiB synchronously on a page's main thread.
        assert len(data) <= 4096, len(data)


def test_wheel_ships_the_kernels_and_bytecode(tmp_path):
    need_module("ziglang")
    from server import wheel

    built = wheel.build_wheel(tmp_path, log=lambda message: None)
    archive = zipfile.ZipFile(built)
    names = set(archive.namelist())
    assert {"webgrad/backend/wasm/gemm_simd.wasm", "webgrad/backend/wasm/gemm_relaxed.wasm"} <= names
    # Every module has Pyodide's bytecode (CPython 3.12), unchecked-hash (flags 0b01), in RECORD.
    modules = {n for n in names if n.endswith(".py")}
    caches = {n for n in names if n.endswith(".cpython-312.pyc")}
    assert len(modules) > 100 and len(caches) == len(modules)
    for name in modules:
        folder, _, file = name.rpartition("/")
        cache = f"{folder}/__pycache__/{file[:-3]}.cpython-312.pyc"
        header = archive.read(cache)[:8]
        assert header[:4] == (3531).to_bytes(2, "little") + b"\r\n" and header[4:8] == b"\x01\0\0\0", cache
    record = archive.read(next(n for n in names if n.endswith("RECORD"))).decode()
    assert all(f"{cache},sha256=" in record for cache in caches)


def test_native_matmul_stays_on_numpy():
    calls = wasm_gemm.stats["calls"]
    assert wasm_gemm.use_wasm_gemm(True) is False  # outside Pyodide it cannot be switched on
    x = webgrad.randn(64, 64)
    np.testing.assert_allclose((x @ x).numpy(), x.numpy() @ x.numpy(), rtol=1e-5, atol=1e-5)
    assert wasm_gemm.stats["calls"] == calls
