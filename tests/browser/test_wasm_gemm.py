"""The wasm matmul of the numpy backend (core/backend/numpy/wasm_gemm/), in Pyodide in headless Chromium.

Every float32 product goes through the wasm kernel here (the size threshold is set
to 1 for these tests) and is checked against numpy: the op table's matmul rows and
their gradients, conv1d/conv2d (stride, padding, dilation, groups) forward and
backward (the forward through ``sconv``, its im2col packed from the image) against
the numpy path of the same page (``use_wasm_gemm(False)``), and
odd shapes against numpy in float64. A counter proves the fast path ran.
"""
from __future__ import annotations

import pytest

from .conftest import Runtime, install_files_code, project_files
from .test_in_pyodide import INSTALL_PYTEST

FAST_PATH = """
import webgrad
from webgrad.backend.numpy import wasm_gemm
wasm_gemm.MIN_MULTIPLY_ADDS = 1   # every float32 product, however small
wasm_gemm.use_wasm_gemm(True)
"""


@pytest.fixture(scope="module")
def cpu_runtime(browser, server_url):
    context = browser.new_context()
    runtime = Runtime(context.new_page())
    runtime.boot(server_url + "?device=cpu")
    runtime.ok(FAST_PATH)
    yield runtime
    context.close()


def test_kernel_loads_with_simd(cpu_runtime):
    out = cpu_runtime.ok(FAST_PATH + """
import numpy as np
wasm_gemm.matmul(np.ones((8, 8), np.float32), np.ones((8, 8), np.float32))
wasm_gemm.stats["variant"]
""")
    # Chromium has relaxed SIMD: the fused multiply-add build must be the one chosen.
    assert out["result"] == "relaxed-simd", out


ODD_SHAPES = FAST_PATH + """
import numpy as np
rng = np.random.default_rng(0)
def r(*shape):
    return rng.standard_normal(shape).astype(np.float32)

cases = {
    "1xN @ NxM": (r(1, 70), r(70, 33)),
    "Nx1 @ 1xM": (r(70, 1), r(1, 33)),
    "NxK @ Kx1": (r(70, 40), r(40, 1)),
    "vector @ matrix": (r(40), r(40, 9)),
    "matrix @ vector": (r(9, 40), r(40)),
    "edges, K and N past one block": (r(37, 300), r(300, 530)),
    "transposed left": (r(40, 23).T, r(40, 17)),
    "transposed right": (r(23, 40), r(17, 40).T),
    "both transposed, batched": (np.swapaxes(r(3, 40, 23), 1, 2), np.swapaxes(r(3, 17, 40), 1, 2)),
    "strided (non-contiguous)": (r(23, 80)[:, ::2], r(80, 34)[::2, 1::2]),
    "batched": (r(4, 13, 21), r(4, 21, 11)),
    "broadcast batch": (r(3, 1, 13, 21), r(2, 21, 11)),
    "one matrix for the batch": (r(13, 21), r(5, 21, 11)),
    "empty rows": (r(0, 21), r(21, 11)),
    "empty inner": (r(13, 0), r(0, 11)),
    "empty batch": (r(0, 13, 21), r(0, 21, 11)),
}
failures, counted = [], {}

def check(name, got, a, b):
    want = np.matmul(a.astype(np.float64), b.astype(np.float64))
    if got.shape != want.shape or got.dtype != np.float32 or not np.allclose(got, want, rtol=1e-4, atol=1e-4):
        failures.append(f"{name}: {got.shape} {got.dtype} vs {want.shape}")

for name, (a, b) in cases.items():
    before = wasm_gemm.stats["calls"]
    if a.ndim >= 2 and b.ndim >= 2:  # the numpy views reach the kernel as they are
        check(name + " (kernel)", wasm_gemm.matmul(a, b), a, b)
    check(name, (webgrad.tensor(a) @ webgrad.tensor(b)).numpy(), a, b)
    counted[name] = wasm_gemm.stats["calls"] - before
# webgrad's own views (transposed, stepped) through the backend
x, y = webgrad.tensor(r(40, 23)), webgrad.tensor(r(80, 34))
views = {"tensor .mT @ stepped": (x.mT, y[::2, 1::2]), "stepped @ .mT": (y[1::2, ::2], x.mT[:17])}
for name, (a, b) in views.items():
    before = wasm_gemm.stats["calls"]
    check(name, (a @ b).numpy(), a.numpy(), b.numpy())
    counted[name] = 2 * (wasm_gemm.stats["calls"] - before)
# float64 stays on numpy
before = wasm_gemm.stats["calls"]
webgrad.tensor(r(20, 20).astype(np.float64)) @ webgrad.tensor(r(20, 20).astype(np.float64))
{"failures": failures, "counted": counted, "float64_calls": wasm_gemm.stats["calls"] - before}
"""


def test_odd_shapes_match_numpy(cpu_runtime):
    out = cpu_runtime.ok(ODD_SHAPES)["result"]
    assert out["failures"] == []
    for name, calls in out["counted"].items():
        # an empty product is answered without the kernel; every other one runs in it
        # (twice for matrices: the kernel called directly, then through a tensor)
        expected = 0 if name.startswith("empty") else 1 if "vector" in name else 2
        assert calls == expected, (name, calls)
    assert out["float64_calls"] == 0


CONV = FAST_PATH + """
import numpy as np
import webgrad.nn.functional as F
rng = np.random.default_rng(1)
CONV2D = [dict(), dict(stride=2, padding=1), dict(padding="same", dilation=2), dict(padding="valid", stride=(1, 2)),
          dict(groups=2, stride=(2, 1), padding=(1, 0), dilation=(1, 2)), dict(groups=4, padding=2)]
CONV1D = [dict(), dict(stride=2, padding=2), dict(padding="same", dilation=2, groups=2)]

def run(fn, arrays, fast):
    wasm_gemm.use_wasm_gemm(fast)
    tensors = [webgrad.tensor(a, requires_grad=True) for a in arrays]
    out = fn(*tensors)
    (out * webgrad.tensor(np.linspace(-1, 1, out.numel(), dtype=np.float32).reshape(out.shape))).sum().backward()
    wasm_gemm.use_wasm_gemm(True)
    return [out.detach().numpy()] + [t.grad.numpy() for t in tensors]

failures, calls, reference_calls, conv_calls = [], 0, 0, wasm_gemm.stats["conv_calls"]
jobs = [(F.conv2d, case, ((2, 4, 7, 6), (8, 4 // case.get("groups", 1), 3, 2), (8,))) for case in CONV2D]
jobs += [(F.conv1d, case, ((2, 4, 9), (6, 4 // case.get("groups", 1), 3), (6,))) for case in CONV1D]
# Rows wider than a panel (8 positions: one vector copy when inside the image, else element by
# element), and K and Ho*Wo past one block of the product (256 and 512).
jobs += [(F.conv2d, dict(padding=1), ((2, 3, 11, 21), (4, 3, 3, 3), (4,))),
         (F.conv2d, dict(dilation=2, padding=(2, 1)), ((1, 2, 9, 30), (5, 2, 3, 3), (5,))),
         (F.conv2d, dict(padding=1), ((1, 32, 24, 24), (3, 32, 3, 3), (3,)))]
for fn, case, shapes in jobs:
    arrays = [rng.standard_normal(s).astype(np.float32) for s in shapes]
    conv = lambda x, w, b, fn=fn, case=case: fn(x, w, b, **case)
    before = wasm_gemm.stats["calls"]
    fast = run(conv, arrays, True)
    calls += wasm_gemm.stats["calls"] - before > 0
    before = wasm_gemm.stats["calls"]
    reference = run(conv, arrays, False)  # use_wasm_gemm(False): numpy's matmul throughout
    reference_calls += wasm_gemm.stats["calls"] - before
    for what, got, want in zip(("out", "dx", "dw", "db"), fast, reference):
        if not np.allclose(got, want, rtol=1e-4, atol=1e-5):
            failures.append(f"{fn.__name__} {case} {what}: max diff {np.abs(got - want).max()}")
{"failures": failures, "with_calls": calls, "jobs": len(jobs), "reference_calls": reference_calls,
 "conv_calls": wasm_gemm.stats["conv_calls"] - conv_calls}
"""


def test_conv_forward_and_backward_match_numpy_path(cpu_runtime):
    out = cpu_runtime.ok(CONV, timeout_s=300)["result"]
    assert out["failures"] == []
    assert out["with_calls"] == out["jobs"], out
    assert out["conv_calls"] == out["jobs"], out  # each forward packed its im2col from the image (sconv)
    assert out["reference_calls"] == 0, out  # the switch really keeps numpy


RUN_OP_TABLE = FAST_PATH + """
import os, sys
os.environ["WEBGRAD_TEST_DEVICES"] = "cpu"
os.chdir("/home/pyodide/webgrad/tests")
for name in [m for m in sys.modules if m.startswith(("conftest", "op_cases", "test_ops", "test_gradcheck"))]:
    del sys.modules[name]
import pytest
before = wasm_gemm.stats["calls"]
code = pytest.main(["test_ops.py", "test_gradcheck.py", "-k", "matmul or bmm or mm or einsum or linear",
                    "-q", "-p", "no:cacheprovider", "-p", "no:faulthandler", "--capture=sys"])
{"code": int(code), "calls": wasm_gemm.stats["calls"] - before}
"""


def test_op_table_matmul_rows_through_wasm(cpu_runtime):
    assert cpu_runtime.ok(INSTALL_PYTEST, timeout_s=300)["result"]
    cpu_runtime.ok(install_files_code(project_files("tests/*.py")))
    out = cpu_runtime.run(RUN_OP_TABLE, timeout_s=600)
    assert "error" not in out, out["error"]["traceback"]
    assert out["result"]["code"] == 0, out["stdout"][-6000:]
    assert out["result"]["calls"] > 50, out["result"]  # the rows' float32 products ran in wasm
    print("op table through wasm:", out["stdout"].strip().splitlines()[-1], out["result"])


INT8 = FAST_PATH + """
import numpy as np
from pathlib import Path
from webgrad.ao.quantization import _quantized_linear_numpy, quantize_weight
rng = np.random.default_rng(2)

def layer(m, k, n, per_channel, bias=True, batch=()):
    x = (rng.standard_normal((*batch, m, k)) * rng.uniform(0.1, 3)).astype(np.float32)
    if rng.random() < 0.5:
        x = np.maximum(x, 0)  # ReLU outputs: a range from 0, zero point 0
    w, scale = quantize_weight(webgrad.tensor(rng.standard_normal((n, k)).astype(np.float32)), per_channel)
    b = rng.standard_normal(n).astype(np.float32) if bias else None
    return x, w.numpy(), scale.numpy(), b

# k not a multiple of 16 (bytes read past each weight row meet zero activations), n not a multiple
# of the 4-column tile, m odd (the 2-row tile), batch dims, one scale or per-row, no bias, k past
# 1032 (the reference then sums in float64), a transposed x.
CASES = {"digits": (64, 64, 128, False), "k 37, n 10, m 7": (7, 37, 10, True), "k 1, n 1": (9, 1, 1, False),
         "k 16, n 4": (2, 16, 4, True), "no bias": (5, 200, 33, True, False),
         "batch dims": (3, 24, 17, False, True, (2, 2)), "k 1500": (4, 1500, 6, True), "one row": (1, 300, 40, False),
         "transposed x": (5, 300, 40, False)}
bits = lambda a: a.view(np.uint32)

def check(variant):
    failures, calls = [], wasm_gemm.stats["int8_calls"]
    for name, spec in CASES.items():
        x, w, scale, b = layer(*spec)
        if name == "transposed x":
            x = np.ascontiguousarray(x.T).T
        got = _quantized_linear_numpy(x, w, scale, b)
        wasm_gemm.use_wasm_gemm(False)
        want = _quantized_linear_numpy(x, w, scale, b)
        wasm_gemm.use_wasm_gemm(True)
        if got.shape != want.shape or not np.array_equal(bits(got), bits(want)):
            failures.append(f"{variant} {name}: max diff {np.abs(got - want).max()}")
    # an infinity in x: the reference's path (its result, not the kernel's)
    x, w, scale, b = layer(4, 20, 8, False)
    x[1, 3] = np.inf
    before = wasm_gemm.stats["int8_calls"]
    got = _quantized_linear_numpy(x, w, scale, b)
    wasm_gemm.use_wasm_gemm(False)
    want = _quantized_linear_numpy(x, w, scale, b)
    wasm_gemm.use_wasm_gemm(True)
    if not np.array_equal(got, want, equal_nan=True) or wasm_gemm.stats["int8_calls"] != before:
        failures.append(f"{variant} inf: not left to the reference")
    return failures, wasm_gemm.stats["int8_calls"] - calls

chosen = wasm_gemm._load()
failures, relaxed_calls = check(chosen.variant)
# the plain SIMD build (engines without relaxed SIMD): its int8 dot product from 16-bit ones
wasm_gemm._kernel = wasm_gemm._Kernel(Path(wasm_gemm.__file__).parent, variants=("simd",))
try:
    more, simd_calls = check(wasm_gemm._kernel.variant)
finally:
    wasm_gemm._kernel = chosen
# the quantized model, as users call it, through the kernel
model = webgrad.nn.Sequential(webgrad.nn.Linear(64, 128), webgrad.nn.ReLU(), webgrad.nn.Linear(128, 10))
q = webgrad.ao.quantization.quantize_dynamic(model, {webgrad.nn.Linear}, dtype=webgrad.qint8)
before = wasm_gemm.stats["int8_calls"]
q(webgrad.randn(32, 64))
{"failures": failures + more, "relaxed_calls": relaxed_calls, "simd_calls": simd_calls,
 "variants": [chosen.variant], "model_calls": wasm_gemm.stats["int8_calls"] - before, "cases": len(CASES)}
"""


def test_int8_linear_gives_the_bits_of_the_reference(cpu_runtime):
    out = cpu_runtime.ok(INT8, timeout_s=300)["result"]
    assert out["failures"] == []
    assert out["variants"] == ["relaxed-simd"], out  # Chromium: the relaxed dot product ran
    assert out["relaxed_calls"] == out["cases"] and out["simd_calls"] == out["cases"], out
    assert out["model_calls"] == 2, out  # both quantized layers of the model
