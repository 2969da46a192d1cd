"""webgrad's own tests and demos, run inside Pyodide in headless Chromium.

- The op table: the same test files as natively (tests/test_ops.py,
  tests/test_gradcheck.py with tests/conftest.py and tests/op_cases.py), copied
  into Pyodide's file system and run by pytest (installed in the worker from
  /pyodide-extra/), once per device through WEBGRAD_TEST_DEVICES.
- The digits MLP (demos/digits_mlp.py) trained in the page on WebGPU: accuracy,
  and per-step losses against a native run with the same seed in this process.
- A 1,000-step training loop on WebGPU keeps memory and proxy counts flat.
"""
from __future__ import annotations

import json

import numpy as np
import pytest

import webgrad
from .conftest import install_files_code, project_files

# The runner's own installer (webgrad.web.runner), then pytest's version as the result.
INSTALL_PYTEST = ("from webgrad.web.runner import install_pytest\nawait install_pytest()\n"
                  "import pytest\npytest.__version__\n")

RUN_PYTEST = """
import os, sys, importlib
os.environ["WEBGRAD_TEST_DEVICES"] = {devices!r}
os.chdir("/home/pyodide/webgrad/tests")
fresh = ("conftest", "op_cases", "test_ops", "test_gradcheck", "test_webgpu_backend")
for name in [m for m in sys.modules if m.startswith(fresh)]:
    del sys.modules[name]  # a fresh conftest reads WEBGRAD_TEST_DEVICES again
import pytest, webgrad
webgrad.set_default_device("cpu")  # the tests choose devices themselves
files = ["test_ops.py", "test_gradcheck.py"]
if "webgpu" in {devices!r}:  # gradients against the cpu, and the table under tiny device limits
    files += ["test_webgpu_backend.py::test_gradient_matches_cpu",
              "test_webgpu_backend.py::test_op_table_with_small_limits"]
code = pytest.main(files + ["-q", "-x", "-p", "no:cacheprovider",
                    "-p", "no:faulthandler", "--capture=sys", "-W", "ignore::pytest.PytestUnraisableExceptionWarning"])
int(code)
"""


@pytest.fixture(scope="module")
def suite_runtime(webgpu_runtime):
    """The shared WebGPU page with pytest installed and tests/ + demos/ copied in."""
    out = webgpu_runtime.ok(INSTALL_PYTEST)
    assert out["result"]
    files = project_files("tests/*.py", "demos/*.py", "demos/data/*.py", "demos/data/*.npz")
    webgpu_runtime.ok(install_files_code(files))
    return webgpu_runtime


@pytest.mark.parametrize("devices", ["cpu", "webgpu"])
def test_op_table_in_pyodide(suite_runtime, devices):
    out = suite_runtime.run(RUN_PYTEST.format(devices=devices), timeout_s=600)
    assert "error" not in out, out["error"]["traceback"]
    summary = out["stdout"].strip().splitlines()[-1:] or [""]
    assert out["result"] == 0, f"pytest in Pyodide ({devices}) exited {out['result']}:\n{out['stdout'][-6000:]}"
    assert "passed" in summary[0], out["stdout"][-3000:]
    print(f"Pyodide {devices}: {summary[0]}")


TRAIN_DIGITS = """
import webgrad
from demos.digits_mlp import build_model, train
webgrad.set_default_device("cpu")  # initialise exactly as the native run does; train() moves it
webgrad.manual_seed(0)
model = build_model()
losses, accuracy = train(model, device="webgpu", epochs={epochs}, seed=0, log=None)
{{"losses": losses, "accuracy": accuracy}}
"""
EPOCHS = 10


def test_digits_mlp_trains_on_webgpu_like_native(suite_runtime):
    import sys

    from .conftest import REPO

    out = suite_runtime.ok(TRAIN_DIGITS.format(epochs=EPOCHS), timeout_s=600)["result"]
    sys.path.insert(0, str(REPO))
    try:
        import webgrad
        from demos.digits_mlp import build_model, train
    finally:
        sys.path.remove(str(REPO))
    webgrad.manual_seed(0)
    native_losses, native_accuracy = train(build_model(), device="cpu", epochs=EPOCHS, seed=0, log=None)
    browser_losses = np.array(out["losses"])
    native_losses = np.array(native_losses)
    assert out["accuracy"] >= 0.95, out["accuracy"]
    assert browser_losses.shape == native_losses.shape
    # float32 on two backends (WGSL here, numpy there): one trajectory, apart only by
    # rounding (measured: at most ~5e-7 over 230 steps on SwiftShader).
    np.testing.assert_allclose(browser_losses, native_losses, rtol=1e-3, atol=1e-4)
    print(f"digits MLP: browser accuracy {out['accuracy']:.3f}, native {native_accuracy:.3f}, "
          f"max loss difference {np.max(np.abs(browser_losses - native_losses)):.2e}")


TRAIN_AUTOCAST = """
import warnings
import numpy as np
import webgrad
from webgrad import nn
warnings.simplefilter("ignore")  # the float16 storage notice
x, y = webgrad.datasets.digits(split="train", device="webgpu")
tx, ty = webgrad.datasets.digits(split="test", device="webgpu")
results = {}
for amp in (False, True):
    webgrad.manual_seed(0)
    model = nn.Sequential(nn.Linear(64, 128), nn.ReLU(), nn.Linear(128, 10)).to("webgpu")
    opt = webgrad.optim.Adam(model.parameters(), lr=3e-3)
    scaler = webgrad.amp.GradScaler("webgpu", enabled=amp)
    order = np.random.default_rng(0)
    for _ in range(4):
        for idx in np.array_split(order.permutation(len(y)), len(y) // 64):
            index = webgrad.tensor(idx, device="webgpu")
            with webgrad.autocast("webgpu", dtype=webgrad.float16, enabled=amp):
                logits = model(x[index])
                loss = nn.functional.cross_entropy(logits, y[index])
            opt.zero_grad()
            scaler.scale(loss).backward()
            scaler.step(opt)
            scaler.update()
    with webgrad.no_grad(), webgrad.autocast("webgpu", dtype=webgrad.float16, enabled=amp):
        accuracy = (model(tx).argmax(-1) == ty).float().mean().item()
    results[str(amp)] = {"accuracy": accuracy, "logits": logits.dtype.name, "loss": loss.dtype.name,
                         "grad": model[0].weight.grad.dtype.name}
half = webgrad.tensor([0.1, 70000.0], device="webgpu").half()
results["half"] = {"values": half.float().cpu().tolist(), "kind": half._data.kind}
ints = webgrad.tensor([-129, 3, 255, 7], device="webgpu").to(webgrad.int8)
ints[1::2] += 1
tenths = webgrad.tensor([0.1, 1 / 3, 70000.0], device="webgpu").bfloat16()
results["narrow"] = {"int8": (ints * 2).cpu().tolist(), "int8_kind": ints._data.kind,
                     "bfloat16": (tenths * 3).float().cpu().tolist(), "bfloat16_kind": tenths._data.kind}
quantized = webgrad.ao.quantization.quantize_dynamic(model)  # the int8 kernels in the page's WGSL
with webgrad.no_grad():
    on_gpu = quantized(tx)
    agree = (on_gpu.argmax(-1) == model(tx).argmax(-1)).float().mean().item()
    on_cpu = quantized.to("cpu")(tx.cpu())
results["int8"] = {"agree": agree, "cpu_difference": float(np.abs(on_gpu.cpu().numpy() - on_cpu.numpy()).max()),
                   "packed_dot": webgrad.backend.get_backend("webgpu").device.packed_dot}
results
"""


def test_autocast_trains_in_the_page(suite_runtime):
    """autocast("webgpu", float16) with GradScaler trains the digits MLP in the page as float32
    does (within a point), with torch's dtypes; float16 there is packed two to a u32 word, since
    SwiftShader has no 'shader-f16' (or f16 where the adapter has it): 2 bytes either way."""
    out = suite_runtime.ok(TRAIN_AUTOCAST, timeout_s=600)["result"]
    full, mixed = out["False"], out["True"]
    assert full["logits"] == "float32" and mixed["logits"] == "float16"
    assert mixed["loss"] == "float32" and mixed["grad"] == "float32"
    assert full["accuracy"] >= 0.9 and abs(mixed["accuracy"] - full["accuracy"]) <= 0.01, out
    assert out["half"]["values"] == [0.0999755859375, float("inf")]  # rounded as float16, overflowing to inf
    assert out["half"]["kind"] in ("f16", "f16p")
    # int8 and bfloat16 packed in words by the page's shaders too, with the cpu's values
    ints = webgrad.tensor([-129, 3, 255, 7]).to(webgrad.int8)
    ints[1::2] += 1
    tenths = webgrad.tensor([0.1, 1 / 3, 70000.0]).bfloat16()
    assert out["narrow"] == {"int8": (ints * 2).tolist(), "int8_kind": "i8",
                             "bfloat16": (tenths * 3).float().tolist(), "bfloat16_kind": "bf16"}, out["narrow"]
    # a quantize_dynamic model runs its int8 kernels in the page with the cpu's numbers
    assert out["int8"]["agree"] >= 0.99 and out["int8"]["cpu_difference"] <= 1e-5, out["int8"]
    print(f"autocast in the page: accuracy {mixed['accuracy']:.4f} vs float32 {full['accuracy']:.4f}, "
          f"float16 stored as {out['half']['kind']}; int8 Linear top-1 agreement {out['int8']['agree']:.4f} "
          f"(dot4I8Packed: {out['int8']['packed_dot']})")


# What "flat" means here, measured inside the worker after a warm-up and again at
# the end of 1,000 steps:
#   gpu       webgrad.webgpu.memory_stats(): bytes in live tensors and in the pool
#   heap      the WebAssembly memory (Python's whole heap), in bytes
#   jsrefs    live JS objects referenced from Python (Pyodide's hiwire table: JsProxies)
#   pyproxies live PyProxies (Python objects referenced from JS), counted by Pyodide's
#             allocation tracing, switched on before the warm-up
#   objects   Python objects tracked by the garbage collector
MEMORY_LOOP = """
import gc, webgrad, pyodide_js
from webgrad import nn
from pyodide.ffi import create_proxy
module = pyodide_js._module
module.enable_pyproxy_allocation_tracing()
probe = create_proxy(lambda: None)  # the counter sees a PyProxy while it lives
tracing_works = module.pyproxy_alloc_map.size >= 1
probe.destroy()

def counters():
    gc.collect()
    return {"gpu_in_use": webgrad.webgpu.memory_stats()["bytes_in_use"],
            "gpu_pooled": webgrad.webgpu.memory_stats()["bytes_pooled"],
            "heap": module.HEAP8.length, "jsrefs": module._hiwire_num_refs(),
            "pyproxies": module.pyproxy_alloc_map.size, "objects": len(gc.get_objects())}

webgrad.manual_seed(0)
model = nn.Sequential(nn.Linear(16, 32), nn.ReLU(), nn.Linear(32, 4)).to("webgpu")
optimizer = webgrad.optim.Adam(model.parameters(), lr=1e-3)
x = webgrad.randn(8, 16, device="webgpu")
y = webgrad.randint(0, 4, (8,), device="webgpu")
samples = {}
for step in range(1, 1001):
    loss = nn.functional.cross_entropy(model(x), y)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    loss.item()
    if step in (200, 600, 1000):
        samples[step] = counters()
        webgrad_progress({"step": step, "total": 1000})
module.disable_pyproxy_allocation_tracing()
{"tracing_works": tracing_works, "samples": samples}
"""


def test_training_memory_stays_flat(suite_runtime):
    out = suite_runtime.ok(MEMORY_LOOP, timeout_s=600)["result"]
    assert out["tracing_works"], "Pyodide's PyProxy allocation tracing counted nothing"
    samples = out["samples"]
    warm, middle, end = samples["200"], samples["600"], samples["1000"]
    print("memory after 200 / 600 / 1000 steps:", json.dumps(samples))
    for key in ("gpu_in_use", "gpu_pooled", "heap", "jsrefs", "pyproxies"):
        assert warm[key] == middle[key] == end[key], f"{key} grows: {warm[key]} -> {middle[key]} -> {end[key]}"
    assert end["objects"] - warm["objects"] < 200, f"Python objects grow: {warm['objects']} -> {end['objects']}"
