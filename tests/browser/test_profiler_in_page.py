"""webgrad.profiler inside Pyodide on the browser's WebGPU device: events, the table,
the Chrome trace, and _repr_html_ for a notebook-style page; webgpu.synchronize's wait there,
and dispatches recorded through the worker's one-call function."""
from __future__ import annotations

import json


def test_profiler_in_pyodide(webgpu_runtime):
    out = webgpu_runtime.ok("""
import json, webgrad
import webgrad.nn.functional as F
from webgrad import nn
from webgrad.backend.webgpu import backend
device = backend().device
model = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 3)).to("webgpu")
opt = webgrad.optim.Adam(model.parameters(), lr=1e-3)
x = webgrad.randn(4, 8, device="webgpu")
y = webgrad.tensor([0, 1, 2, 0], device="webgpu")
def step():
    loss = F.cross_entropy(model(x), y)
    opt.zero_grad(); loss.backward(); opt.step()
    return loss.item()
step()
results = {}
for timing in ("auto", "sync"):
    with webgrad.profiler.profile(record_shapes=True, profile_memory=True, device_timing=timing) as prof:
        with webgrad.profiler.record_function("train_step"):
            step()
    events = prof.events()
    mm = [e for e in events if e.name in ("linear", "matmul")]
    results[timing] = {
        "names": sorted({e.name for e in events}),
        "products": [e.name for e in mm], "dispatches": [e.dispatches for e in mm],
        "device_us": sum(e.device_time_total for e in mm),
        "kernels": len([e for e in events if e.kind == "kernel"]),
        "table": prof.key_averages().table(sort_by="self_device_time_total", row_limit=10),
    }
prof.export_chrome_trace("/tmp/trace.json")
pending = x * 2  # recorded, not submitted
recorded = device._encoder is not None
webgrad.webgpu.synchronize()  # torch.cuda.synchronize's contract: submitted and waited for (JSPI)
{"results": results, "timestamps": device.timestamps, "trace": json.load(open("/tmp/trace.json")),
 "html": prof.key_averages()._repr_html_()[:200], "synchronized": recorded and device._encoder is None,
 "one_call_dispatches": device._record_dispatch is not None}
""", timeout_s=240)["result"]
    auto, sync = out["results"]["auto"], out["results"]["sync"]
    for r in (auto, sync):
        # the two F.linear ops (bias added in the product's stores), then backward's 3 products
        assert r["products"] == ["linear"] * 2 + ["matmul"] * 3 and r["dispatches"] == [1] * 5, r
        assert {"train_step", "F.linear", "LinearBackward", "Optimizer.step#Adam.step"} <= set(r["names"])
    assert sync["device_us"] > 0 and "synchronization at op boundaries" in sync["table"]
    if out["timestamps"]:
        assert auto["kernels"] >= 5 and auto["device_us"] > 0 and "timestamp queries" in auto["table"]
    else:
        assert auto["kernels"] == 0 and "no 'timestamp-query'" in auto["table"]
    complete = [e for e in out["trace"]["traceEvents"] if e["ph"] == "X"]
    assert any(e["name"] == "matmul" and e["args"]["Input Dims"] for e in complete)
    json.dumps(out["trace"])
    assert out["html"].startswith("<table")
    assert out["synchronized"]
    assert out["one_call_dispatches"]  # the worker's webgradRecordDispatch recorded every dispatch above
