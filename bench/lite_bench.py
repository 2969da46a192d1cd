"""A model shipped with webgrad.export + /lite.js vs the same model as a TF.js Layers model, in one
headless Chromium.

    python bench/lite_bench.py              # quiet, then with --load N CPU burners (default 2)
    python bench/lite_bench.py --runs 5 --load 0

The digits MLP (demos/digits.py, 64 -> 128 -> 10) is exported natively as a lite bundle and
written as a TF.js Layers model (model.json + weights.bin) with the same weights. Both are served,
with lite.js and TF.js's scripts, by one static server (the host page's origin; a fresh browser
context per visit, so nothing is cached) and timed from navigation start to the first prediction's
numbers in JavaScript (lite: import + load + predict; TF.js: its scripts + setBackend + ready +
loadLayersModel + predict().data(), on its cpu and wasm backends: the faster counts). Then the
median latency of one more prediction, lite on WebGPU vs TF.js WebGPU and lite's CPU path vs TF.js
wasm. Prints medians over alternated runs, ratios lite / TF.js (below 1: lite is faster), the
bytes each page fetched and the gzipped size of the JavaScript each needs.
"""
from __future__ import annotations

import argparse
import functools
import gzip
import http.server
import json
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
from bench.browser_bench import CHROMIUM, CHROMIUM_ARGS, Load  # noqa: E402

TFJS = REPO / "server" / "assets" / "vendor" / "tfjs"
LITE_JS = REPO / "web" / "build" / "lite.js"
PREDICTIONS = 50

LITE_PAGE = """<!doctype html><meta charset="utf-8"><title>lite</title><script type="module">
const x = new Float32Array(64).map((_, i) => (i %% 7) / 7);
const {load} = await import("./lite.js");
const model = await load("./bundle/", {device: "%(device)s"});
const first = await model.predict(x);
const ms = performance.now();
const times = [];
for (let i = 0; i < %(n)d; i++) {
  const t = performance.now();
  await model.predict(x);
  times.push(performance.now() - t);
}
times.sort((a, b) => a - b);
window.result = {ms, predictMs: times[times.length >> 1], device: model.info.device, out: Array.from(first.outputs)};
</script>"""

TFJS_PAGE = """<!doctype html><meta charset="utf-8"><title>tfjs</title>
<script src="./tfjs/tf.min.js"></script>%(extra)s<script type="module">
const x = new Float32Array(64).map((_, i) => (i %% 7) / 7);
if ("%(backend)s" === "wasm") {
  tf.wasm.setWasmPaths(new URL("./tfjs/", location.href).href);
  tf.env().set("WASM_HAS_MULTITHREAD_SUPPORT", false);
}
if (!(await tf.setBackend("%(backend)s"))) throw new Error("no %(backend)s backend");
await tf.ready();
const model = await tf.loadLayersModel("./tfjs-model/model.json");
const predict = async () => {
  const y = model.predict(tf.tensor(x, [1, 64]));
  const d = await y.data();
  y.dispose();
  return d;
};
const first = await predict();
const ms = performance.now();
const times = [];
for (let i = 0; i < %(n)d; i++) {
  const t = performance.now();
  await predict();
  times.push(performance.now() - t);
}
times.sort((a, b) => a - b);
window.result = {ms, predictMs: times[times.length >> 1], device: "%(backend)s", out: Array.from(first)};
</script>"""


def write_site(folder: Path) -> dict:
    """The host folder: both pages, lite.js, the bundle, TF.js's files and its model; returns the model's
    expected outputs for the pages' input."""
    import webgrad
    from demos import digits

    webgrad.manual_seed(0)
    model = digits.make_model("mlp")
    model.eval()
    x = (np.arange(64) % 7 / 7).astype(np.float32)[None]
    webgrad.export(model, (webgrad.tensor(x),), folder / "bundle")
    shutil.copy(LITE_JS, folder / "lite.js")
    shutil.copytree(TFJS, folder / "tfjs", ignore=shutil.ignore_patterns("*.gz", "*.br"))
    _write_tfjs_model(model, folder / "tfjs-model")
    for device in ("webgpu", "cpu"):
        (folder / f"lite-{device}.html").write_text(LITE_PAGE % {"device": device, "n": PREDICTIONS})
    for backend in ("cpu", "wasm", "webgpu"):
        extra = {"wasm": '<script src="./tfjs/tf-backend-wasm.min.js"></script>',
                 "webgpu": '<script src="./tfjs/tf-backend-webgpu.min.js"></script>'}.get(backend, "")
        (folder / f"tfjs-{backend}.html").write_text(TFJS_PAGE % {"backend": backend, "extra": extra, "n": PREDICTIONS})
    with webgrad.no_grad():
        return model(webgrad.tensor(x)).numpy()[0]


def _write_tfjs_model(model, folder: Path) -> None:
    """A Keras-style Sequential of two Dense layers holding the model's weights (kernel = weight.T)."""
    folder.mkdir()
    first, second = model[0], model[2]
    layers, weights, blobs = [], [], []
    for i, (linear, activation) in enumerate([(first, "relu"), (second, "linear")], 1):
        config = {"name": f"dense_{i}", "units": linear.out_features, "activation": activation, "use_bias": True,
                  "dtype": "float32", "trainable": True}
        if i == 1:
            config["batch_input_shape"] = [None, linear.in_features]
        layers.append({"class_name": "Dense", "config": config})
        kernel = np.ascontiguousarray(linear.weight.detach().numpy().T, np.float32)
        bias = linear.bias.detach().numpy().astype(np.float32)
        weights += [{"name": f"dense_{i}/kernel", "shape": list(kernel.shape), "dtype": "float32"},
                    {"name": f"dense_{i}/bias", "shape": list(bias.shape), "dtype": "float32"}]
        blobs += [kernel.tobytes(), bias.tobytes()]
    (folder / "weights.bin").write_bytes(b"".join(blobs))
    (folder / "model.json").write_text(json.dumps({
        "format": "layers-model", "generatedBy": "webgrad bench", "convertedBy": None,
        "modelTopology": {"class_name": "Sequential", "keras_version": "2.15.0", "backend": "tensorflow",
                          "config": {"name": "digits", "layers": layers}},
        "weightsManifest": [{"paths": ["weights.bin"], "weights": weights}]}))


def serve(folder: Path):
    handler = functools.partial(_Quiet, directory=str(folder))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server, f"http://127.0.0.1:{server.server_address[1]}/"


class _Quiet(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args):
        pass


def visit(browser, url: str) -> dict:
    """One fresh context (nothing cached): the page's result and the bytes it fetched."""
    context = browser.new_context()
    page = context.new_page()
    sizes = []
    page.on("requestfinished", lambda r: sizes.append(max(0, r.sizes()["responseBodySize"])))
    errors = []
    page.on("pageerror", lambda e: errors.append(str(e)))
    page.goto(url)
    try:
        page.wait_for_function("window.result || null", timeout=120_000)
    except Exception as error:  # noqa: BLE001  (the page's own errors say more than the timeout)
        raise SystemExit(f"{url}: {errors or error}") from None
    result = page.evaluate("window.result")
    context.close()
    return {**result, "bytes": sum(sizes)}


RUNNERS = ["lite-webgpu", "lite-cpu", "tfjs-cpu", "tfjs-wasm", "tfjs-webgpu"]


def measure(browser, url: str, runs: int, want) -> dict:
    results: dict = {name: [] for name in RUNNERS}
    for _ in range(runs):
        for name in RUNNERS:  # alternated, so a slow moment hits every runner alike
            result = visit(browser, url + name + ".html")
            worst = float(np.max(np.abs(np.array(result["out"]) - want)))
            if worst > 1e-4:
                raise SystemExit(f"{name} predicted {result['out']}, natively {list(want)}")
            results[name].append(result)
    return results


def report(label: str, results: dict) -> None:
    med = {name: {key: statistics.median(r[key] for r in rs) for key in ("ms", "predictMs", "bytes")}
           for name, rs in results.items()}
    print(f"\n{label} (medians of {len(results['lite-cpu'])} alternated runs):")
    for name, m in med.items():
        device = results[name][-1]["device"]
        print(f"  {name:12s} on {device:7s} first prediction {m['ms']:7.0f} ms, one more {m['predictMs']:6.2f} ms, "
              f"fetched {m['bytes'] / 1e3:8.0f} KB")
    tfjs_first = min(med["tfjs-cpu"]["ms"], med["tfjs-wasm"]["ms"])
    lite_default = med["lite-webgpu"]["ms"]  # load()'s default device here: auto picks WebGPU when present
    print(f"  first prediction, lite (WebGPU) / faster TF.js (cpu, wasm): {lite_default / tfjs_first:.2f}x; "
          f"lite (cpu) / same: {med['lite-cpu']['ms'] / tfjs_first:.2f}x")
    print(f"  one prediction, lite WebGPU / TF.js WebGPU: "
          f"{med['lite-webgpu']['predictMs'] / med['tfjs-webgpu']['predictMs']:.2f}x; "
          f"lite cpu / TF.js wasm: {med['lite-cpu']['predictMs'] / med['tfjs-wasm']['predictMs']:.2f}x")
    print(f"  bytes fetched, lite (cpu) / TF.js (wasm): {med['lite-cpu']['bytes'] / med['tfjs-wasm']['bytes']:.3f}")


def gzipped(path: Path) -> int:
    return len(gzip.compress(path.read_bytes(), 9))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--load", type=int, default=2, help="CPU burners for the second round (0: none)")
    args = parser.parse_args()
    subprocess.run([sys.executable, "-m", "server.assets"], cwd=REPO, check=True)
    from playwright.sync_api import sync_playwright

    with tempfile.TemporaryDirectory(prefix="webgrad-lite-bench-") as temp:
        folder = Path(temp)
        want = write_site(folder)
        server, url = serve(folder)
        print(f"JavaScript gzipped: lite.js {gzipped(folder / 'lite.js') / 1e3:.1f} KB; TF.js tf.min.js "
              f"{gzipped(folder / 'tfjs' / 'tf.min.js') / 1e3:.1f} KB (+ wasm backend "
              f"{gzipped(folder / 'tfjs' / 'tf-backend-wasm.min.js') / 1e3:.1f} KB and its .wasm)")
        bundle = sum(p.stat().st_size for p in (folder / "bundle").rglob("*") if p.is_file())
        print(f"bundle: {bundle / 1e3:.1f} KB; TF.js model: "
              f"{sum(p.stat().st_size for p in (folder / 'tfjs-model').iterdir()) / 1e3:.1f} KB")
        with sync_playwright() as playwright:
            browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS, headless=True)
            report("quiet machine", measure(browser, url, args.runs, want))
            if args.load:
                with Load(args.load, limit_s=1800):
                    report(f"under load ({args.load} CPU burners)", measure(browser, url, args.runs, want))
            browser.close()
        server.shutdown()


if __name__ == "__main__":
    main()
