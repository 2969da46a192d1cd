"""webgrad.store inside the page (Pyodide in the worker, fetch + run_sync): push, pull, list,
delete and the async twins against the page's own server; native Python pulls the same model."""
from __future__ import annotations

import json

import numpy as np

import webgrad

PAGE_CODE = """
import json
import webgrad
from webgrad import nn

webgrad.manual_seed(0)
model = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 3))
info = webgrad.store.push(model, "page-model", {"labels": ["a", "b", "c"]}, input_size=(1, 4))
x = webgrad.tensor([[0.1, -0.2, 0.3, 0.4]])
pulled = webgrad.store.pull("page-model")
by_url = webgrad.store.pull(info["url"])
listed = [r["name"] for r in await webgrad.store.list_async()]
json.dumps({"info": info, "default": webgrad.store.default_url(), "listed": listed,
            "device": str(model[0].weight.device), "pulled_device": str(pulled[0].weight.device),
            "expected": model.eval()(x).detach().numpy().tolist(),
            "pulled": pulled(x).detach().numpy().tolist(), "by_url": by_url(x).detach().numpy().tolist()})
"""

CLEANUP_CODE = """
import webgrad
webgrad.store.delete("page-model")
try:
    webgrad.store.pull("page-model")
    message = "no error"
except webgrad.store.ModelNotFoundError as exc:
    message = str(exc)
try:
    webgrad.store.list(url="http://127.0.0.1:9")
    unreachable = "no error"
except webgrad.store.StoreConnectionError as exc:
    unreachable = str(exc)
[message, unreachable]
"""


def test_store_push_pull_in_the_page(webgpu_runtime, server_url):
    out = json.loads(webgpu_runtime.ok(PAGE_CODE, timeout_s=180)["result"])
    origin = server_url.rstrip("/")
    assert out["default"] == origin  # no url given: the page's own server
    assert out["info"]["url"] == f"{origin}/api/models/page-model"
    assert out["info"]["input_shape"] == [1, 4] and out["info"]["output_shape"] == [1, 3]
    assert out["info"]["labels"] == ["a", "b", "c"] and out["info"]["has_architecture"]
    assert "page-model" in out["listed"]
    assert out["pulled_device"] == out["device"]
    np.testing.assert_allclose(out["pulled"], out["expected"], rtol=1e-6, atol=1e-7)
    np.testing.assert_allclose(out["by_url"], out["expected"], rtol=1e-6, atol=1e-7)

    # The model the page pushed, pulled natively, predicts the same.
    native = webgrad.store.pull("page-model", url=origin)
    x = webgrad.tensor([[0.1, -0.2, 0.3, 0.4]])
    np.testing.assert_allclose(native(x).detach().numpy(), out["expected"], rtol=1e-5, atol=1e-6)

    message, unreachable = webgpu_runtime.ok(CLEANUP_CODE)["result"]
    assert "no model named 'page-model'" in message and origin in message
    assert "http://127.0.0.1:9" in unreachable and "make serve" in unreachable


def test_push_in_the_page_records_token_input(webgpu_runtime, server_url):
    """push_async with torchinfo's dtypes= in the page: the int64 input and what it is (tokens
    with their vocabulary) are recorded, as natively."""
    code = """
import json
import webgrad
from webgrad import nn

lm = nn.Sequential(nn.Embedding(4, 8), nn.Linear(8, 4))
info = await webgrad.store.push_async(lm, "page-lm", {"labels": list("abcd"), "context": 16},
                                      input_size=(1, 5), dtypes=[webgrad.int64])
await webgrad.store.delete_async("page-lm")
json.dumps({key: info[key] for key in ("input", "input_dtype", "input_shape", "output_shape")})
"""
    out = json.loads(webgpu_runtime.ok(code, timeout_s=120)["result"])
    assert out == {"input": {"kind": "tokens", "vocab": list("abcd"), "vocab_size": 4, "context": 16},
                   "input_dtype": "int64", "input_shape": [1, 5], "output_shape": [1, 5, 4]}


def test_datasets_summary_and_display_in_the_page(webgpu_runtime):
    code = """
import json
import webgrad
from webgrad import nn
x, y = webgrad.datasets.digits(split="test", flatten=False)
model = nn.Sequential(nn.Conv2d(1, 4, 3, padding=1), nn.ReLU(), nn.Flatten(), nn.Linear(256, 10))
summary = webgrad.summary(model, input_size=(1, 1, 8, 8))
bundle = webgrad.display.rich_repr(summary)
json.dumps({"x": list(x.shape), "y": list(y.shape), "text": len(webgrad.datasets.tiny_text()),
            "flops": summary.total_flops, "html": bundle["text/html"][:31],
            "png": webgrad.display.rich_repr(webgrad.display.Image(x[0, 0]))["image/png"][:8]})
"""
    out = json.loads(webgpu_runtime.ok(code)["result"])
    assert out["x"] == [360, 1, 8, 8] and out["y"] == [360]
    assert out["text"] > 20_000
    conv = 2 * (4 * 8 * 8) * 9 + 4 * 8 * 8
    assert out["flops"] == conv + 2 * 256 * 10 + 10
    assert out["html"] == '<table class="webgrad-summary">'
    assert out["png"] == "iVBORw0K"  # base64 of the PNG signature
