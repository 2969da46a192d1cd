"""The wasm matmul kernel (core/backend/numpy/wasm_gemm/gemm.c) builds reproducibly into the wheel.

Its results are checked in Pyodide (tests/browser/test_wasm_gemm.py); natively
numpy's BLAS stays, and the fast path is off."""
from __future__ import annotations

import shutil
import zipfile

import numpy as np
import pytest

import webgrad
from webgrad.backend.numpy import wasm_gemm

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
        assert b"sgemm" in data and b"sconv" in data and b"qlinear" in data and b"work_floats" in data
        # Small: it rides in every wheel. (Chromium compiles at most 4 KiB synchronously on a page's
        # main thread; this module is compiled in the runtime's worker, where that limit does not apply.)
        assert len(data) <= 12 * 1024, len(data)


def test_wheel_ships_the_kernels_and_bytecode(tmp_path):
    need_module("ziglang")
    from server import wheel

    built = wheel.build_wheel(tmp_path, log=lambda message: None)
    archive = zipfile.ZipFile(built)
    names = set(archive.namelist())
    folder = "webgrad/backend/numpy/wasm_gemm/"
    assert {folder + "gemm_simd.wasm", folder + "gemm_relaxed.wasm"} <= names
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


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int64])
def test_numpy_matmul_in_pyodide_copies_y_k_major_and_matches(monkeypatch, dtype):
    """In Pyodide (BLAS-less numpy) ``numpy_matmul`` hands numpy a k-major copy of y; the
    product must be np.matmul's for every layout, batch and broadcast."""
    monkeypatch.setattr(wasm_gemm, "IN_PYODIDE", True)
    seen, real = [], np.matmul
    monkeypatch.setattr(np, "matmul", lambda x, y: seen.append(y.strides) or real(x, y))
    rng = np.random.default_rng(0)
    base = rng.integers(-5, 5, (3, 12, 20)).astype(dtype)
    cases = [(base[0], base[1].T), (base[0].T, base[1]), (base, base.swapaxes(1, 2)), (base[:1], base.swapaxes(1, 2)),
             (base[0, :4], base[1].T), (base[0], base[1, 0]), (base[0, 0], base[1].T), (base[0], base[1, :1].T)]
    for x, y in cases:
        seen.clear()
        got = wasm_gemm.numpy_matmul(x, y)
        np.testing.assert_array_equal(got, real(x, y))
        copied = x.ndim >= 2 and y.ndim >= 2 and x.shape[-2] >= wasm_gemm.MIN_ROWS_FOR_KMAJOR and y.shape[-1] > 1
        if copied:
            assert seen[0][-2] == y.itemsize, (x.shape, y.strides)  # k axis contiguous
        else:
            assert seen[0] == y.strides, (x.shape, y.strides)  # passed as it is
    seen.clear()  # the numpy backend's matmul goes the same way there
    product = webgrad.ones(16, 20, dtype=webgrad.float64) @ webgrad.ones(20, 12, dtype=webgrad.float64)
    assert seen and seen[0][-2] == 8 and float(product[0, 0].item()) == 20.0
