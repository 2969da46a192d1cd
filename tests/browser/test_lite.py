"""/lite.js in Chromium: webgrad.export bundles run in a page on ANOTHER origin, under a strict
CSP (no 'unsafe-eval', no 'wasm-unsafe-eval'), on WebGPU and on the CPU path, with nothing but
the browser.

The host page and the bundles are served by a tiny static server on another port; the page
imports /lite.js from the webgrad site. Every case of the export op table (tests/lite_ops.py)
and the four demo models must give what webgrad gives natively; bad inputs and damaged bundle
files must each be refused with a message naming the expected shape or the file, and the page
must go on working. (tests/test_lite.py runs the same table natively through the WGSL.)
"""
from __future__ import annotations

import copy
import functools
import gzip
import http.server
import json
import shutil
import struct
import sys
import threading
from urllib.parse import urlsplit

import httpx
import numpy as np
import pytest

import webgrad

from .conftest import REPO, Runtime, require

sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "tests"))
from lite_ops import CASES, Case, export_case  # noqa: E402

SHOTS = REPO / "tests" / "browser" / "screenshots"
DEVICES = ("webgpu", "cpu")
VOCAB, CONTEXT = 20, 8

HOST_HTML = """<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>webgrad lite on another site</title>
<link rel="stylesheet" href="host.css"></head>
<body><h1>A webgrad model in a page of another site</h1>
<p id="status">loading /lite.js</p><button id="run" type="button">Predict</button><div id="out"></div>
<script type="module" src="host.js"></script></body></html>
"""
# The page's own script: imports /lite.js from the webgrad site and records CSP violations.
HOST_JS = """
const webgrad = new URLSearchParams(location.search).get("webgrad");
window.violations = [];
document.addEventListener("securitypolicyviolation",
  (event) => window.violations.push(`${event.violatedDirective}: ${event.blockedURI}`));
window.liteReady = import(`${webgrad}/lite.js`).then((lite) => {
  window.lite = lite;
  document.getElementById("status").textContent = "lite.js loaded from " + webgrad;
  return Object.keys(lite).sort();
});

// The runs of the CSP test, started by a click so that it runs as the page's own task
// (code evaluated by the test driver is exempt from the page's CSP; this is not).
async function runInPage({urls, x}) {
  let evalAllowed = true;
  try { new Function("return 1")(); } catch { evalAllowed = false; }
  await new Promise((resolve) => setTimeout(resolve, 100));  // the probe's own violation report comes first
  const before = window.violations.length;
  const rows = [];
  for (const [url, device] of urls) {
    const model = await window.lite.load(url, {device});
    const answer = await model.predict(Float32Array.from(x));
    rows.push([url, model.info.device, model.info.weights, answer.label,
      `${(answer.probabilities[answer.index] * 100).toFixed(1)} %`, model.info.bytes]);
  }
  await new Promise((resolve) => setTimeout(resolve, 100));
  const violations = window.violations.slice(before);
  const table = document.createElement("table");
  const head = table.insertRow();
  for (const title of ["bundle", "device", "weights", "label", "probability", "bytes fetched"]) {
    const cell = document.createElement("th");
    cell.textContent = title;
    head.append(cell);
  }
  for (const row of rows) {
    const line = table.insertRow();
    for (const value of row) line.insertCell().textContent = String(value);
  }
  const note = document.createElement("p");
  note.className = evalAllowed || violations.length ? "bad" : "ok";
  note.textContent = "This page's CSP forbids eval and WebAssembly "
    + `(eval here: ${evalAllowed ? "allowed!" : "blocked"}); `
    + `CSP violations while predicting: ${violations.length}`;
  document.getElementById("out").replaceChildren(note, table);
  return {evalAllowed, rows, violations};
}
document.getElementById("run").addEventListener("click", () => {
  window.cpuDone = runInPage(window.cpuJob);
});
"""
HOST_CSS = """
body { font: 15px system-ui, sans-serif; margin: 24px; max-width: 900px; }
table { border-collapse: collapse; margin-top: 12px; }
td, th { border: 1px solid #bbb; padding: 4px 10px; text-align: left; }
.ok { color: #176b2c; } .bad { color: #a61b1b; }
"""


def host_policy(webgrad: str, other: str) -> str:
    """A careful third-party site: scripts from itself and the webgrad host, never eval or wasm."""
    return "; ".join([
        "default-src 'self'",
        f"script-src 'self' {webgrad}",
        f"connect-src 'self' {other}",
        "style-src 'self'",
        "img-src 'self' data:",
    ])


class HostHandler(http.server.SimpleHTTPRequestHandler):
    policy = ""

    def end_headers(self):
        if self.path.split("?")[0].endswith((".html", "/")):
            self.send_header("Content-Security-Policy", self.policy)
        self.send_header("Access-Control-Allow-Origin", "*")  # the bundles, read from another origin too
        self.send_header("Cache-Control", "no-store")
        super().end_headers()

    def log_message(self, *args):
        pass


def _edge(fn, *inputs):
    """A case of ``fn`` over fixed inputs (numpy arrays), at the edges of the element types."""
    class Edge(webgrad.nn.Module):
        def forward(self, *xs):
            return fn(*xs)
    return lambda: (Edge(), tuple(webgrad.tensor(x) for x in inputs))


_SPECIAL = np.array([[np.nan, np.inf, -np.inf, 0.5, 1.5, 2.5, -0.5, -2.5, 0.0, -1.7, 3.0, -4.0]], np.float32)
_INTS = np.array([[0, 1, 2, -3, 5, -20000, 46340]], np.int64)  # results stay in int32 (the bundle's ints)
# Beyond the op table: NaN and infinities, halves, int32 arithmetic and bools, where numpy's
# rules are easy to miss in a port (each CPU op of web/lite/cpu.js is checked here too).
EDGE_CASES = [
    Case("edge_nan_inf_rounding", _edge(lambda x: webgrad.cat([
        x.relu(), webgrad.maximum(x, x * 0 + 1), webgrad.minimum(x, x * 0), x.sign(), webgrad.isnan(x).float(),
        x.round(), x.floor(), x.ceil(), x.abs(), -x], 1), _SPECIAL)),
    Case("edge_exp_log_pow", _edge(lambda x: webgrad.cat([
        (x * 30).exp(), x.abs().log(), x.log(), (x * 0 - 2) ** 3, x.abs() ** 0.5, x.tanh(), x.sigmoid()], 1),
        _SPECIAL)),
    Case("edge_int32", _edge(lambda t: webgrad.cat([
        t * 3 + 1, -t, t.abs(), webgrad.maximum(t, t * 0 + 2), webgrad.minimum(t, t * 0), (t == 2).long(),
        webgrad.where(t > 1, t, t * 0 - 7), t * t], 1), _INTS)),
    Case("edge_bool_logic", _edge(lambda x: webgrad.cat([
        ((x > 0) & (x < 2)).float(), ((x < -1) | (x != x)).float(), (~(x >= 1)).float(), (x > 0).long().float() * 2,
        webgrad.where(x.isnan(), x * 0, x)], 1), _SPECIAL)),
    Case("edge_reduce_nan_int", _edge(lambda x, t: webgrad.cat([
        x.amax(1, keepdim=True), x.amin(1, keepdim=True), x.argmax(1, keepdim=True).float(),
        t.sum(1, keepdim=True).float(), t.amax(1, keepdim=True).float(), (t > 0).sum(1, keepdim=True).float()], 1),
        _SPECIAL, _INTS[:, :5])),
    Case("edge_two_outputs_int_first", _edge(lambda x: (x.argmax(1), x * 2, x.sum(1)), _SPECIAL[:, 3:])),
]


def _demo_models():
    from demos import char_lm, classify_2d, digits

    webgrad.manual_seed(0)
    rng = np.random.default_rng(0)
    return {
        "digits-mlp": (digits.make_model("mlp"), rng.random((17, 64), np.float32)),
        "digits-cnn": (digits.make_model("cnn"), rng.random((17, 1, 8, 8), np.float32)),
        "classify-2d": (classify_2d.make_model(), rng.uniform(-1, 1, (17, 2)).astype(np.float32)),
        "char-lm": (char_lm.TinyGPT(VOCAB, context=CONTEXT), rng.integers(0, VOCAB, (17, CONTEXT)).astype(np.int64)),
    }


def _native(model, x) -> np.ndarray:
    with webgrad.no_grad():
        return model(webgrad.tensor(x)).numpy()


@pytest.fixture(scope="module")
def site(tmp_path_factory, server_url):
    """The host folder (page, op table bundles, demo bundles) served on another port."""
    root = tmp_path_factory.mktemp("lite-host")
    (root / "index.html").write_text(HOST_HTML)
    (root / "host.js").write_text(HOST_JS)
    (root / "host.css").write_text(HOST_CSS)
    table = []
    for case in [*CASES, *EDGE_CASES]:
        runs = export_case(case, root / "ops" / case.name)
        table.append({"name": case.name, "tol": case.tol, "runs": runs})
    demos = {}
    for name, (model, x) in _demo_models().items():
        model.eval()
        labels = [f"class {i}" for i in range(10)] if name.startswith("digits") else None
        webgrad.export(model, (webgrad.tensor(x[:2]),), root / "demos" / name, labels=labels)
        demos[name] = (model, x)
    for name, weights in (("digits-mlp", "int8"), ("digits-mlp", "float16"), ("digits-cnn", "int8")):
        model, x = demos[name]
        webgrad.export(model, (webgrad.tensor(x[:2]),), root / "demos" / f"{name}-{weights}", weights=weights,
                       labels=[f"class {i}" for i in range(10)])
    handler = type("Handler", (HostHandler,), {})
    model, x = demos["classify-2d"]
    webgrad.export(model, (webgrad.tensor(x[:3]),), root / "demos" / "classify-2d-static", dynamic_batch=False)
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(handler, directory=str(root)))
    port = server.server_address[1]
    other = f"http://localhost:{port}"  # another origin serving the same bundles (CORS)
    handler.policy = host_policy(server_url.rstrip("/"), other)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield {"root": root, "url": f"http://127.0.0.1:{port}/", "other": other + "/", "table": table, "demos": demos}
    server.shutdown()


@pytest.fixture(scope="module")
def host(browser, site, server_url):
    """The host page with /lite.js imported; fails (or skips outside CI) without a WebGPU adapter."""
    assert urlsplit(site["url"]).port != urlsplit(server_url).port
    context = browser.new_context(viewport={"width": 960, "height": 900})
    page = context.new_page()
    recorder = Runtime(page)
    page.goto(f"{site['url']}index.html?webgrad={server_url.rstrip('/')}")
    exported = page.evaluate("() => window.liteReady")
    assert exported == ["LiteError", "load"], exported
    adapter = page.evaluate("async () => Boolean(navigator.gpu && await navigator.gpu.requestAdapter())")
    require(adapter, "no WebGPU adapter in headless Chromium for the host page")
    yield page, recorder
    context.close()


def _worst(got, want) -> float:
    """Largest |got - want| / (1 + |want|); equal values (infinities too) and NaN against NaN count as equal."""
    got, want = np.asarray(got, np.float64), np.asarray(want, np.float64)
    same = (got == want) | (np.isnan(got) & np.isnan(want))
    with np.errstate(invalid="ignore"):
        diff = np.where(same, 0.0, np.abs(got - want) / (1 + np.abs(want)))
    return float(np.nan_to_num(diff, nan=np.inf).max()) if diff.size else 0.0


def _feed(x: np.ndarray) -> dict:
    return {"data": x.ravel().tolist(), "dtype": "int" if x.dtype.kind in "iu" else "float", "shape": list(x.shape)}


# In the page: load each bundle on `device`, predict every run, return the outputs.
RUN_TABLE = """async ({cases, device}) => {
    const typed = (x) => x.dtype === "int" ? Int32Array.from(x.data) : Float32Array.from(x.data);
    const results = [];
    for (const c of cases) {
        let model;
        try {
            model = await window.lite.load(c.url, {device});
        } catch (error) {
            results.push({name: c.name, error: `load: ${error.message}`});
            continue;
        }
        const runs = [];
        for (const inputs of c.runs) {
            try {
                const answer = await model.predict(inputs.length === 1 ? typed(inputs[0]) : inputs.map(typed));
                runs.push({outputs: answer.outputsAll.map((o) => ({data: Array.from(o.outputs), shape: o.shape}))});
            } catch (error) {
                runs.push({error: error.message});
            }
        }
        results.push({name: c.name, device: model.info.device, runs});
        model.dispose();
    }
    return results;
}"""


def test_lite_js_is_served_for_any_origin(server_url):
    answer = httpx.get(server_url + "lite.js", headers={"Origin": "https://example.org"})
    assert answer.status_code == 200
    assert answer.headers["content-type"].startswith("text/javascript")
    assert answer.headers["access-control-allow-origin"] == "*"
    assert answer.headers["cross-origin-resource-policy"] == "cross-origin"
    assert answer.headers["cache-control"] == "no-cache"
    assert "sourceMappingURL=lite.js.map" in answer.text
    mapped = httpx.get(server_url + "lite.js.map")
    assert mapped.status_code == 200 and "../lite/main.js" in mapped.text  # resolves to /lite/main.js, the source
    built = (REPO / "web" / "build" / "lite.js").read_bytes()
    assert answer.content == built
    assert len(gzip.compress(built, 9)) <= 60_000, "lite.js is over its 60 KB (gzipped) budget"


def test_op_table_on_webgpu_and_cpu(host, site):
    page, recorder = host
    cases = [{"name": c["name"], "url": f"ops/{c['name']}/", "runs": [[_feed(x) for x in xs] for xs, _ in c["runs"]]}
             for c in site["table"]]
    failures = []
    for device in DEVICES:
        results = recorder.evaluate(RUN_TABLE, {"cases": cases, "device": device}, timeout_s=600)
        for entry, case in zip(results, site["table"]):
            where = f"{case['name']} on {device}"
            if "error" in entry:
                failures.append(f"{where}: {entry['error']}")
                continue
            if entry["device"] != device:
                failures.append(f"{where}: ran on {entry['device']}")
            for run, (inputs, want) in zip(entry["runs"], case["runs"]):
                shapes = [x.shape for x in inputs]
                if "error" in run:
                    failures.append(f"{where} {shapes}: {run['error']}")
                    continue
                for k, (out, expected) in enumerate(zip(run["outputs"], want)):
                    got = np.array(out["data"], np.float64).reshape(out["shape"])
                    if got.shape != expected.shape:
                        failures.append(f"{where} {shapes} output {k}: shape {got.shape}, expected {expected.shape}")
                    elif (worst := _worst(got, expected)) > case["tol"]:
                        failures.append(f"{where} {shapes} output {k}: off by {worst:.3g} (tol {case['tol']})")
    assert not failures, f"{len(failures)} failing:\n" + "\n".join(failures)


DEMO_RUN = """async ({url, device, rows, flat}) => {
    const model = await window.lite.load(url, {device});
    const typed = (row) => Number.isInteger(row[0]) && flat.int ? Int32Array.from(row) : Float32Array.from(row);
    // One item as a flat typed array, 17 as nested arrays: asked at once, answered in turn.
    const [one, all] = await Promise.all([model.predict(typed(flat.first)), model.predict(rows)]);
    const out = {info: model.info, one: {data: Array.from(one.outputs), shape: one.shape, label: one.label ?? null},
                 all: {data: Array.from(all.outputs), shape: all.shape}};
    model.dispose();
    return out;
}"""


def test_demo_models_predict_as_natively(host, site):
    page, recorder = host
    failures = []
    for name, (model, x) in site["demos"].items():
        want = _native(model, x)
        for device in DEVICES:
            args = {"url": f"demos/{name}/", "device": device, "rows": x.tolist(),
                    "flat": {"first": x[0].ravel().tolist(), "int": x.dtype.kind == "i"}}
            got = recorder.evaluate(DEMO_RUN, args, timeout_s=300)
            assert got["info"]["device"] == device and got["info"]["engine"] == "lite"
            assert got["info"]["inputs"][0]["shape"][0] == "batch"
            for key, expected in (("one", want[:1]), ("all", want)):
                data = np.array(got[key]["data"], np.float32).reshape(got[key]["shape"])
                assert data.shape == expected.shape, (name, device, key, data.shape)
                diff = float(np.abs(data - expected).max())
                if diff > 1e-5:
                    failures.append(f"{name} on {device}, batch {len(expected)}: max |diff| {diff:.3g}")
            if name.startswith("digits"):
                assert got["one"]["label"] == f"class {int(np.argmax(want[0]))}", (name, device, got["one"]["label"])
    assert not failures, "\n".join(failures)


GREEDY = """async ({url, device, prompt, steps, context}) => {
    const model = await window.lite.load(url, {device});
    const tokens = [...prompt];
    for (let s = 0; s < steps; s++) {
        const window_ = tokens.slice(-context);
        const row = new Int32Array(context);  // padded on the right: causal, so later slots do not matter
        row.set(window_);
        const {outputs, shape} = await model.predict(row);
        const vocab = shape[2];
        const last = (window_.length - 1) * vocab;
        let best = 0;
        for (let v = 1; v < vocab; v++) if (outputs[last + v] > outputs[last + best]) best = v;
        tokens.push(best);
    }
    model.dispose();
    return tokens.slice(prompt.length);
}"""


def test_char_transformer_greedy_decoding(host, site):
    page, recorder = host
    model, _ = site["demos"]["char-lm"]
    prompt, steps = [3, 1, 4], 20
    tokens = list(prompt)
    for _ in range(steps):
        window = tokens[-CONTEXT:]
        row = np.zeros((1, CONTEXT), np.int64)
        row[0, :len(window)] = window
        tokens.append(int(np.argmax(_native(model, row)[0, len(window) - 1])))
    want = tokens[len(prompt):]
    assert len(set(want)) > 1, "the reference decoding is degenerate; pick another prompt"
    for device in DEVICES:
        got = recorder.evaluate(GREEDY, {"url": "demos/char-lm/", "device": device, "prompt": prompt, "steps": steps,
                                         "context": CONTEXT}, timeout_s=300)
        assert got == want, (device, got, want)


# In the page: predict `input` (built from a recipe, since some are not JSON) and report the outcome.
BAD_INPUT = """async ({url, device, recipe}) => {
    const model = await window.lite.load(url, {device});
    const inputs = {
        short: () => new Float32Array(63),
        ragged: () => [[1, 2], [3]],
        text: () => "hello",
        strings: () => [Array.from({length: 64}, (_, i) => i === 5 ? "x" : 0)],
        nested_wrong: () => Array.from({length: 2}, () => new Array(32).fill(0)),
        nan: () => Float32Array.from({length: 64}, (_, i) => i === 0 ? NaN : 0.5),
        fraction: () => [[1, 2, 3, 4, 5, 6, 7, 1.5]],
        range: () => Int32Array.from([1, 2, 3, 4, 5, 6, 7, 25]),
        negative: () => Int32Array.from([1, 2, 3, 4, 5, 6, 7, -1]),
        token_short: () => Int32Array.from([1, 2, 3]),
    };
    try {
        const answer = await model.predict(inputs[recipe]());
        return {ok: true, outputs: Array.from(answer.outputs, (v) => Number.isNaN(v) ? "NaN" : v)};
    } catch (error) {
        return {ok: false, name: error.name, kind: error.kind, message: error.message};
    } finally {
        model.dispose();
    }
}"""


@pytest.mark.parametrize("device", DEVICES)
def test_bad_inputs_name_the_expected_shape(host, device):
    page, recorder = host
    mlp, lm = "demos/digits-mlp/", "demos/char-lm/"
    cases = [(mlp, "short", "expected shape (batch, 64)"), (mlp, "ragged", "ragged"),
             (mlp, "text", "expected shape (batch, 64)"), (mlp, "strings", "expected shape (batch, 64)"),
             (mlp, "nested_wrong", "expected shape (batch, 64)"), (lm, "fraction", "whole numbers"),
             (lm, "range", "[0, 20)"), (lm, "negative", "[0, 20)"), (lm, "token_short", "expected shape (batch, 8)")]
    for url, recipe, words in cases:
        got = recorder.evaluate(BAD_INPUT, {"url": url, "device": device, "recipe": recipe})
        assert not got["ok"], (recipe, got)
        assert got["name"] == "LiteError" and got["kind"] == "input", (recipe, got)
        assert words in got["message"], (recipe, got["message"])
        if recipe in ("fraction", "range", "negative"):
            assert "expected shape (batch, 8)" in got["message"], (recipe, got["message"])
    got = recorder.evaluate(BAD_INPUT, {"url": mlp, "device": device, "recipe": "nan"})
    assert got["ok"] and all(v == "NaN" for v in got["outputs"]), got  # NaN passes through


def _damaged_bundles(root):
    """Copies of the digits MLP bundle, each with one file damaged: {variant: file the error must name}."""
    good = root / "demos" / "digits-mlp"
    variants = {}

    def variant(name, file):
        folder = root / "bad" / name
        shutil.rmtree(folder, ignore_errors=True)
        shutil.copytree(good, folder)
        variants[name] = file
        return folder

    text = (good / "model.json").read_text()
    (variant("model-truncated", "model.json") / "model.json").write_text(text[: len(text) // 2])
    (variant("model-version", "model.json") / "model.json").write_text(json.dumps({**json.loads(text), "version": 9}))
    meta = json.loads(text)
    meta["steps"][0]["inputs"] = [999]
    (variant("model-missing-buffer", "model.json") / "model.json").write_text(json.dumps(meta))
    (variant("model-missing", "model.json") / "model.json").unlink()
    data = (good / "weights.safetensors").read_bytes()
    (variant("weights-truncated", "weights.safetensors") / "weights.safetensors").write_bytes(data[:-100])
    (variant("weights-header", "weights.safetensors") / "weights.safetensors").write_bytes(
        struct.pack("<Q", 10**9) + data[8:])
    length = struct.unpack("<Q", data[:8])[0]
    header = json.loads(data[8:8 + length])
    renamed = {("wrong" if k == "0.weight" else k): v for k, v in header.items()}
    encoded = json.dumps(renamed).encode()
    (variant("weights-missing-tensor", "weights.safetensors") / "weights.safetensors").write_bytes(
        struct.pack("<Q", len(encoded)) + encoded + data[8 + length:])
    (variant("kernel-garbage", "kernels/0.wgsl") / "kernels" / "0.wgsl").write_text("fn main( { this is not wgsl")
    (variant("kernel-missing", "kernels/1.wgsl") / "kernels" / "1.wgsl").unlink()
    return variants


DAMAGED = """async ({urls, device, good}) => {
    const outcomes = {};
    for (const [name, url] of Object.entries(urls)) {
        try {
            const model = await window.lite.load(url, {device});
            await model.predict(new Float32Array(64));
            outcomes[name] = {ok: true};
        } catch (error) {
            outcomes[name] = {ok: false, name: error.name, kind: error.kind, message: error.message};
        }
    }
    const model = await window.lite.load(good, {device});  // the page goes on working
    const answer = await model.predict(new Float32Array(64).fill(0.25));
    return {outcomes, after: answer.shape};
}"""


@pytest.mark.parametrize("device", DEVICES)
def test_damaged_bundle_files_are_refused_by_name(host, site, device):
    page, recorder = host
    variants = _damaged_bundles(site["root"])
    if device == "cpu":  # the CPU path never reads the kernels
        variants = {k: v for k, v in variants.items() if not k.startswith("kernel")}
    urls = {name: f"bad/{name}/" for name in variants}
    got = recorder.evaluate(DAMAGED, {"urls": urls, "device": device, "good": "demos/digits-mlp"}, timeout_s=300)
    for name, file in variants.items():
        outcome = got["outcomes"][name]
        assert not outcome["ok"], (name, outcome)
        assert outcome["name"] == "LiteError" and outcome["kind"] == "load", (name, outcome)
        assert f"bad/{name}/{file}" in outcome["message"], (name, outcome["message"])
    assert got["after"] == [1, 10]


def test_strict_csp_page_runs_the_cpu_path_and_shows_it(host, site):
    page, recorder = host
    model, x = site["demos"]["digits-mlp"]
    want = f"class {int(np.argmax(_native(model, x[:1])[0]))}"
    # The int8 bundle from another origin (CORS); the last row runs on WebGPU, for the picture.
    urls = [["demos/digits-mlp/", "cpu"], [f"{site['other']}demos/digits-mlp-int8/", "cpu"],
            ["demos/digits-mlp/", "webgpu"]]
    page.evaluate("(job) => { window.cpuJob = job; }", {"urls": urls, "x": x[0].tolist()})
    page.click("#run")
    got = recorder.evaluate("() => window.cpuDone", timeout_s=120)
    assert got["evalAllowed"] is False, "the host page's CSP should forbid eval"
    assert got["violations"] == [], got["violations"]
    assert [row[1] for row in got["rows"]] == ["cpu", "cpu", "webgpu"]
    assert got["rows"][0][3] == want and got["rows"][2][3] == want, (got["rows"], want)
    SHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(SHOTS / "lite-host.png"), full_page=True)
    assert recorder.console == [] or not any("pageerror" in line for line in recorder.console), recorder.console


def _as_stored(model, folder):
    """A copy of ``model`` holding the weights as the bundle stores them (float16, or int8 times the scale)."""
    _, arrays, _ = webgrad.lite.read_bundle(folder)
    state = {}
    for name in model.state_dict():
        values = arrays[name].astype(np.float32)
        if name + ".scale" in arrays:
            values = values * arrays[name + ".scale"].reshape(-1, *[1] * (values.ndim - 1))
        state[name] = webgrad.tensor(values)
    stored = copy.deepcopy(model)
    stored.load_state_dict(state)
    return stored


@pytest.mark.parametrize("bundle", ["digits-mlp-float16", "digits-mlp-int8", "digits-cnn-int8"])
def test_float16_and_int8_weights_run_as_stored(host, site, bundle):
    """float16 weights are widened in JavaScript, int8 ones dequantized in the kernels (and the CPU
    path): both give what the model computes with the stored weights."""
    page, recorder = host
    name = bundle.rsplit("-", 1)[0]
    model, x = site["demos"][name]
    want = _native(_as_stored(model, site["root"] / "demos" / bundle), x)
    for device in DEVICES:
        args = {"url": f"demos/{bundle}/", "device": device, "rows": x.tolist(),
                "flat": {"first": x[0].ravel().tolist(), "int": False}}
        got = recorder.evaluate(DEMO_RUN, args, timeout_s=300)
        assert got["info"]["weights"] == bundle.rsplit("-", 1)[1]
        data = np.array(got["all"]["data"], np.float32).reshape(got["all"]["shape"])
        assert float(np.abs(data - want).max()) <= 1e-5, (bundle, device, float(np.abs(data - want).max()))


DEVICE_LOST = """async ({url}) => {
    // Keep the device lite.js asks for, to take it away as a driver reset would.
    const original = GPUAdapter.prototype.requestDevice;
    let device = null;
    GPUAdapter.prototype.requestDevice = async function (...args) {
        device = await original.apply(this, args);
        return device;
    };
    try {
        const model = await window.lite.load(url, {device: "webgpu"});
        const before = (await model.predict(new Float32Array(64))).shape;
        device.destroy();
        try {
            await model.predict(new Float32Array(64));
            return {before, error: null};
        } catch (error) {
            return {before, error: {name: error.name, kind: error.kind, message: error.message}};
        }
    } finally {
        GPUAdapter.prototype.requestDevice = original;
    }
}"""

NO_ADAPTER = """async ({url}) => {
    const gpu = navigator.gpu;
    const original = gpu.requestAdapter;
    gpu.requestAdapter = async () => null;  // a browser that has WebGPU but no adapter for this page
    try {
        const auto = await window.lite.load(url, {device: "auto"});
        const answer = await auto.predict(new Float32Array(64));
        let refused = null;
        try {
            await window.lite.load(url, {device: "webgpu"});
        } catch (error) {
            refused = {name: error.name, kind: error.kind, message: error.message};
        }
        return {device: auto.info.device, shape: answer.shape, refused};
    } finally {
        gpu.requestAdapter = original;
    }
}"""


def test_device_loss_and_missing_adapter(host):
    page, recorder = host
    lost = recorder.evaluate(DEVICE_LOST, {"url": "demos/digits-mlp/"})
    assert lost["before"] == [1, 10]
    assert lost["error"] and lost["error"]["kind"] == "device", lost
    assert "lost" in lost["error"]["message"] and "load() the model again" in lost["error"]["message"], lost
    fallback = recorder.evaluate(NO_ADAPTER, {"url": "demos/digits-mlp/"})
    assert fallback["device"] == "cpu" and fallback["shape"] == [1, 10], fallback
    assert fallback["refused"]["kind"] == "device" and 'device: "cpu"' in fallback["refused"]["message"], fallback
    auto = recorder.evaluate(AUTO, {"url": "demos/digits-mlp/"})
    # "auto" takes a hardware adapter, and the CPU path over a software one (this machine's SwiftShader)
    assert auto["hardware"] == {"device": "webgpu", "reason": "a hardware WebGPU adapter"}, auto
    assert auto["software"]["device"] == "cpu", auto
    assert auto["software"]["reason"].startswith("the only WebGPU adapter is a software renderer (swiftshader)"), auto


# The page's own adapter, and the same adapter made to look like a hardware GPU (its info says so).
AUTO = """async ({url}) => {
    const gpu = navigator.gpu;
    const original = gpu.requestAdapter;
    const pick = async () => {
        const model = await window.lite.load(url);
        const {device, reason} = model.info;
        model.dispose();
        return {device, reason};
    };
    const software = await pick();
    gpu.requestAdapter = async (...args) => {
        const real = await original.apply(gpu, args);
        const info = {vendor: "acme", architecture: "rdna-9", device: "", description: "Acme GPU"};
        return new Proxy(real, {get: (target, key) => {
            if (key === "info") return info;
            const value = Reflect.get(target, key, target);
            return typeof value === "function" ? value.bind(target) : value;
        }});
    };
    try {
        return {software, hardware: await pick()};
    } finally {
        gpu.requestAdapter = original;
    }
}"""


STATIC = """async ({url, device, rows}) => {
    const model = await window.lite.load(url, {device});
    const answer = await model.predict(rows);
    let refused = null;
    try {
        await model.predict(rows.slice(1));
    } catch (error) {
        refused = {kind: error.kind, message: error.message};
    }
    return {data: Array.from(answer.outputs), shape: answer.shape, inputs: model.info.inputs, refused};
}"""


@pytest.mark.parametrize("device", DEVICES)
def test_fixed_batch_bundle(host, site, device):
    """A bundle exported with dynamic_batch=False takes exactly its example's shape."""
    page, recorder = host
    model, x = site["demos"]["classify-2d"]
    got = recorder.evaluate(STATIC, {"url": "demos/classify-2d-static/", "device": device, "rows": x[:3].tolist()})
    assert got["inputs"][0]["shape"] == [3, 2]
    data = np.array(got["data"], np.float32).reshape(got["shape"])
    assert float(np.abs(data - _native(model, x[:3])).max()) <= 1e-5
    assert got["refused"]["kind"] == "input" and "expected shape (3, 2)" in got["refused"]["message"], got


IMAGE = """async ({url, device, image}) => {
    const canvas = document.createElement("canvas");  // each pixel an 8 x 8 grey block: lite.js resizes it back
    canvas.width = canvas.height = 64;
    const context = canvas.getContext("2d");
    image.forEach((grey, i) => {
        context.fillStyle = `rgb(${grey}, ${grey}, ${grey})`;
        context.fillRect(8 * (i % 8), 8 * Math.floor(i / 8), 8, 8);
    });
    const model = await window.lite.load(url, {device});
    const answer = await model.predict(canvas);
    return {data: Array.from(answer.outputs), shape: answer.shape};
}"""


@pytest.mark.parametrize("name", ["digits-mlp", "digits-cnn"])
def test_image_input_as_the_widget_reads_it(host, site, name):
    """A <canvas> goes in as the widget takes it: grey levels in 0..1, resized to the model's 8 x 8."""
    page, recorder = host
    model, x = site["demos"][name]
    grey = np.round(x[0].ravel() * 255).astype(int)
    want = _native(model, (grey / 255).astype(np.float32).reshape(1, *x.shape[1:]))
    for device in DEVICES:
        got = recorder.evaluate(IMAGE, {"url": f"demos/{name}/", "device": device, "image": grey.tolist()})
        data = np.array(got["data"], np.float32).reshape(got["shape"])
        assert float(np.abs(data - want).max()) <= 1e-4, (name, device, float(np.abs(data - want).max()))
