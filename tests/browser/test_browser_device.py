"""The browser device (core/backend/webgpu/browser.py) inside Pyodide: readback
both ways, error reporting, the run_sync requirement, and a browser without WebGPU."""
from __future__ import annotations

from .conftest import CHROMIUM, CHROMIUM_ARGS, Runtime


def test_read_async_and_counters(webgpu_runtime):
    out = webgpu_runtime.ok("""
import webgrad
from webgrad.backend.webgpu import backend
device = backend().device
before = (device.dispatches, device.submits, device.reads)
x = webgrad.arange(6, device="webgpu").float().reshape(2, 3)
y = (x * 2 + 1).sum(dim=1)
values = (await y.numpy_async()).tolist()
after = (device.dispatches, device.submits, device.reads)
{"values": values, "dispatched": after[0] - before[0], "submitted": after[1] - before[1],
 "reads": after[2] - before[2], "limits": device.limits, "info": webgrad.webgpu.adapter_info()}
""")["result"]
    assert out["values"] == [9.0, 27.0]
    assert out["dispatched"] >= 2 and out["submitted"] >= 1 and out["reads"] == 1
    assert out["limits"]["max_storage_buffer_binding_size"] >= 1 << 27
    assert out["info"]["backend_type"] == "WebGPU (browser)"


def test_shader_errors_name_the_kernel(webgpu_runtime):
    out = webgpu_runtime.run("""
from webgrad.backend.webgpu import backend
device = backend().device
device.pipeline(("test", "broken"), "@compute @workgroup_size(1) fn main() { let x: f32 = 1u; }",
                "main", {}, "broken.wgsl:main")
""")
    error = out["error"]
    assert error["pythonType"] == "DeviceError", error
    assert "compiling broken.wgsl:main failed" in error["message"]
    assert "1:45" in error["message"]  # the compiler's message, with its line:column


def test_validation_errors_surface_at_the_next_read(webgpu_runtime):
    """An invalid dispatch is reported asynchronously by the GPU; the next read raises it,
    naming the op that was recorded, and later work is fine."""
    out = webgpu_runtime.run("""
import struct, webgrad
from webgrad.backend.webgpu import backend
device = backend().device
source = '''
struct Params { n: u32 }
@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read_write> out: array<f32>;
@compute @workgroup_size(1) fn fill() { out[0] = f32(p.n); }
'''
pipe = device.pipeline(("test", "fill"), source, "fill", {}, "fill.wgsl:fill")
device.dispatch(pipe, [], struct.pack("I", 1), (1, 1, 1), "fill.wgsl:fill (missing its buffer)")
webgrad.ones(2, device="webgpu").numpy()
""")
    error = out["error"]
    assert error["pythonType"] == "DeviceError", error
    assert "fill.wgsl:fill (missing its buffer)" in error["message"]
    assert webgpu_runtime.ok("(webgrad.ones(2, device='webgpu') + 1).tolist()")["result"] == [2.0, 2.0]


def test_a_failed_submit_leaves_the_device_usable(webgpu_runtime):
    """The recorder both devices share (recorder.py) on the browser transport: whatever fails
    in submit, the next dispatch starts a fresh encoder; a 0-byte buffer is still bindable and
    a 0-byte read touches no GPU (and counts no read)."""
    out = webgpu_runtime.ok("""
import webgrad
from webgrad.backend.webgpu import backend
from webgrad.backend.webgpu.device import DeviceError
device = backend().device
x = webgrad.arange(4.0, device="webgpu")
y = x * 2  # recorded, not submitted yet

class FailingEncoder:
    def finish(self):
        raise RuntimeError("injected failure")

device._encoder = FailingEncoder()  # what a lost device or a driver error does to finish()
try:
    device.submit()
    message = "no error"
except DeviceError as err:
    message = str(err)
fresh = device._encoder is None and device._pass is None
empty = device.create_buffer(0, "empty")
reads = device.reads
zero = len(device.read(empty, 0, 0))
reads = device.reads - reads
{"message": message, "fresh": fresh, "values": (x * 3).tolist(), "size": int(empty.size),
 "zero": zero, "reads": reads}
""")["result"]
    assert "injected failure" in out["message"] and "mul" in out["message"], out
    assert out["fresh"] and out["values"] == [0.0, 3.0, 6.0, 9.0], out
    assert out["size"] >= 4 and out["zero"] == 0 and out["reads"] == 0, out


def test_blocking_read_needs_run_python_async(webgpu_runtime):
    """Python entered synchronously from JS cannot block on the GPU: the error says what to do."""
    out = webgpu_runtime.ok("""
import js
from pyodide.ffi import create_proxy
from webgrad.backend.webgpu.browser import BrowserDevice
from webgrad.backend.webgpu.device import DeviceError

def construct():
    try:
        BrowserDevice()
    except DeviceError as err:
        return str(err)
    return "no error"

callback = create_proxy(construct)
try:
    message = js.Function.new("callback", "return callback()")(callback)
finally:
    callback.destroy()
message
""")
    assert "runPythonAsync" in out["result"] and "numpy_async" in out["result"]


def test_browser_without_webgpu_falls_back_to_cpu(browser, server_url):
    """Chromium without --enable-unsafe-webgpu has no adapter: asking for webgpu runs on the CPU and says why."""
    args = [a for a in CHROMIUM_ARGS if a != "--enable-unsafe-webgpu"]
    chromium = browser.browser_type.launch(executable_path=CHROMIUM, args=args, headless=True)
    try:
        runtime = Runtime(chromium.new_page())
        info = runtime.boot(server_url + "?device=webgpu")
        assert info["device"] == "cpu"
        assert "not available" in info["deviceReason"] and "webgpu" in info["deviceReason"]
        out = runtime.ok("import webgrad\n[webgrad.webgpu.is_available(), (webgrad.ones(2) * 3).tolist()]")
        assert out["result"] == [False, [3.0, 3.0]]
    finally:
        chromium.close()


def test_tensors_past_one_binding_run_in_windows(webgpu_runtime):
    """The browser transport binds byte ranges of a buffer (large.py's windows): an embedding
    table four times a (lowered) binding trains as it does on the cpu."""
    out = webgpu_runtime.ok("""
import numpy as np, webgrad
from webgrad import nn

def train(device):
    webgrad.manual_seed(0)
    table = nn.Embedding(2000, 32).to(device)
    opt = webgrad.optim.Adam(table.parameters(), lr=0.05)
    index = webgrad.tensor([[3, 1999, 3], [1000, 7, 1999]], device=device)
    for _ in range(2):
        opt.zero_grad()
        (table(index) ** 2).sum().backward()
        opt.step()
    return table.weight.detach().cpu().numpy()

want = train("cpu")
with webgrad.webgpu.override_limits(max_storage_buffer_binding_size=64 * 1024):
    got = train("webgpu")
{"difference": float(np.abs(got - want).max()), "bytes": int(want.nbytes)}
""")["result"]
    assert out["bytes"] > 3 * 64 * 1024  # past the lowered binding, so the table, its gradient and state split
    assert out["difference"] < 1e-6
