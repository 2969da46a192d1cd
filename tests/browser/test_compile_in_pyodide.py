"""webgrad.compile inside Pyodide: a traced and replayed digits-MLP Adam step equals eager
on the page's numpy (cpu) and on the browser's WebGPU device, with fused kernels there and,
from the second replay on, the recorded dispatch list (backend/webgpu/replay.py) re-issuing the
optimizer updates too; a loop that fills a tensor's rows writes them in place there."""
from __future__ import annotations


def test_compile_in_pyodide(webgpu_runtime):
    out = webgpu_runtime.ok("""
import numpy as np, webgrad
import webgrad.nn.functional as F
from webgrad import nn
results = {}
for device in ("cpu", "webgpu"):
    rng = np.random.default_rng(0)
    xs = [webgrad.tensor(rng.standard_normal((16, 64)).astype(np.float32), device=device) for _ in range(5)]
    ys = [webgrad.tensor(rng.integers(0, 10, 16), device=device) for _ in range(5)]
    runs = []
    for compiled in (False, True):
        webgrad.manual_seed(0)
        model = nn.Sequential(nn.Linear(64, 32), nn.ReLU(), nn.Linear(32, 10)).to(device)
        opt = webgrad.optim.Adam(model.parameters(), lr=1e-2)
        def step(x, y):
            opt.zero_grad()
            loss = F.cross_entropy(model(x), y)
            loss.backward()
            opt.step()
            return loss
        fn = webgrad.compile(step) if compiled else step
        losses, held = [], []
        for x, y in zip(xs, ys):
            loss = fn(x, y)
            losses.append(loss.item())
            held.append((loss, loss.item()))  # a later step must not write into an earlier result
        runs.append((losses, [p.detach().numpy() for p in model.parameters()], fn))
    (el, ep, _), (cl, cp, fn) = runs
    results[device] = {"eager": el, "compiled": cl, "replays": fn.replays,
                       "held": [t.item() == v for t, v in held],
                       "param_diff": max(float(np.abs(a - b).max()) for a, b in zip(ep, cp)),
                       "explain": fn.explain()}

def fill(x, w):  # an RNN-style loop writing out[:, t]: functionalized, then written back in place
    out = webgrad.zeros(x.shape[0], x.shape[1], 8, device="webgpu")
    h = x[:, 0]
    for t in range(x.shape[1]):
        h = (h @ w).tanh()
        out[:, t] = h
    return out
w = webgrad.randn(8, 8, device="webgpu") * 0.5
filled = webgrad.compile(fill)
xs = [webgrad.randn(2, 4, 8, device="webgpu") for _ in range(3)]
got = [filled(x, w) for x in xs]
results["fill"] = {"diff": max(float(np.abs(g.numpy() - fill(x, w).numpy()).max()) for g, x in zip(got, xs)),
                   "reinplaced": filled.graph.stats["reinplaced"]}
results
""", timeout_s=240)["result"]
    for device in ("cpu", "webgpu"):
        r = out[device]
        assert r["replays"] == 4, r["explain"]
        assert all(r["held"]), r
        assert max(abs(a - b) for a, b in zip(r["eager"], r["compiled"])) < 1e-5, r
        assert r["param_diff"] < 1e-5, r
    assert "fused: matmul -> add -> relu" in out["webgpu"]["explain"]  # the bias and ReLU in the product's stores
    assert "updates in one kernel" in out["webgpu"]["explain"]
    assert "replay: a recorded list of" in out["webgpu"]["explain"]
    assert "update(s) re-issued with each call's scalars; 0 step(s) in Python" in out["webgpu"]["explain"]
    assert out["fill"]["diff"] < 1e-5 and out["fill"]["reinplaced"] == 3, out["fill"]
