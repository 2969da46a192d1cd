"""A WebGPU device lost in the page during training (here: ``device.destroy()``, as a driver
reset or a tab in the background can do) raises a clear error at the next op, and the
runtime recovers: ``webgrad.webgpu.reset()`` in place, or a fresh ``boot()``."""
from __future__ import annotations

import pytest

from .conftest import Runtime, require

TRAIN = """
import webgrad
from webgrad import nn
from webgrad.backend.webgpu import backend

def train(steps, lose_at=None):
    webgrad.manual_seed(0)
    model = nn.Linear(4, 1).to("webgpu")
    opt = webgrad.optim.SGD(model.parameters(), lr=0.1)
    x, y = webgrad.randn(16, 4, device="webgpu"), webgrad.randn(16, 1, device="webgpu")
    for step in range(steps):
        if step == lose_at:
            backend().device.device.destroy()   # what a lost GPU looks like to the page
        loss = ((model(x) - y) ** 2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        last = loss.item()
    return last
"""


@pytest.fixture
def page_runtime(browser, server_url):
    context = browser.new_context()
    runtime = Runtime(context.new_page())
    info = runtime.boot(server_url + "?device=webgpu")
    require(info["device"] == "webgpu", f"no WebGPU in the page: {info['deviceReason']}")
    yield runtime
    context.close()


def test_lost_device_raises_a_clear_error_then_reset_recovers(page_runtime):
    page_runtime.ok(TRAIN)
    out = page_runtime.run("train(10, lose_at=3)")
    error = out["error"]
    assert error["pythonType"] == "DeviceError", error
    assert "device was lost" in error["message"] and "webgrad.webgpu.reset()" in error["message"], error
    # The next op fails the same way (never a wrong number), until the user resets.
    again = page_runtime.run("(webgrad.ones(2, device='webgpu') * 2).tolist()")["error"]
    assert "device was lost" in again["message"], again
    result = page_runtime.ok("webgrad.webgpu.reset()\ntrain(5)")["result"]
    assert isinstance(result, float) and result == result  # a finite loss from the new device
    # A fresh runtime in the same page boots on WebGPU too.
    booted = page_runtime.evaluate("""async () => {
        const {boot} = await import("/webgrad.js");
        const fresh = await boot({device: "webgpu"});
        const {result} = await fresh.run("import webgrad\\n(webgrad.ones(3, device='webgpu') * 2).tolist()");
        fresh.terminate();
        return {device: fresh.device, result};
    }""", timeout_s=120)
    assert booted == {"device": "webgpu", "result": [2.0, 2.0, 2.0]}
    errors = [line for line in page_runtime.console if line.startswith(("error", "pageerror"))]
    assert not errors, errors
