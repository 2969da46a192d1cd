"""The <webgrad-model> widget's cost on a host page, next to TF.js with the same MLP.

    python bench/widget_bench.py                 # starts the site on a free port
    python bench/widget_bench.py --url http://127.0.0.1:8000/

Trains the digits MLP (64 -> 128 -> 10) natively, pushes it to the store (under a name of its
own, deleted again at the end, so a --url site's store is left as it was), and writes the
same weights as a TF.js Layers model. A host page served from ANOTHER port (no COOP/COEP,
a fresh browser context each time, so nothing is cached) then measures, in one headless
Chromium:

- cold start: `import("/widget.js")` -> `load(url)` -> first `predict()` resolved, against
  loading tf.min.js -> `tf.loadLayersModel(url)` -> first `predict().data()`;
- per-prediction latency (median of N, one 8x8 image each, result read back).

TF.js runs on its wasm backend and on its plain-JS cpu backend; webgrad on the cpu device
(numpy in Pyodide), the widget's default for small models. Both must agree on the classes.
"""
from __future__ import annotations

import argparse
import functools
import http.server
import json
import os
import secrets
import shutil
import statistics
import sys
import tempfile
import threading
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from bench.browser_bench import CHROMIUM, CHROMIUM_ARGS, start_server  # noqa: E402

# Unique per run: never replaces (and then deletes) a model of the user's.
MODEL = f"bench-digits-mlp-{secrets.token_hex(4)}"

PAGE = """<!doctype html><meta charset="utf-8"><title>widget bench host</title>
<script type="module" src="bench.js"></script><p id="state">running</p>"""

SCRIPT = r"""
const params = new URLSearchParams(location.search);
const W = params.get("webgrad"), which = params.get("which"), runs = Number(params.get("runs"));
const images = await (await fetch("images.json")).json();
const median = (xs) => xs.slice().sort((a, b) => a - b)[Math.floor(xs.length / 2)];
async function measure(first, predict) {
  const t0 = performance.now();
  await first();
  const labels = [await predict(images[0])];
  const cold = performance.now() - t0;
  const times = [];
  for (let i = 0; i < runs; i++) {
    const t = performance.now();
    const label = await predict(images[(i + 1) % images.length]);
    times.push(performance.now() - t);
    if (i + 1 < images.length) labels.push(label);
  }
  return {cold, per: median(times), labels};
}
let result;
if (which === "webgrad") {
  let model;
  result = await measure(async () => {
    const {load} = await import(`${W}/widget.js`);
    model = await load(`${W}/api/models/BENCH_MODEL`, {device: "cpu"});
  }, async (image) => Number((await model.predict(new Float32Array(image))).label));
} else {
  const backend = which.split(" ")[1];
  let model;
  result = await measure(async () => {
    await new Promise((resolve, reject) => {
      const script = document.createElement("script");
      script.src = `${W}/vendor/tfjs/tf.min.js`;
      script.onload = resolve; script.onerror = reject;
      document.head.append(script);
    });
    if (backend === "wasm") {
      await new Promise((resolve, reject) => {
        const script = document.createElement("script");
        script.src = `${W}/vendor/tfjs/tf-backend-wasm.min.js`;
        script.onload = resolve; script.onerror = reject;
        document.head.append(script);
      });
      tf.wasm.setWasmPaths(`${W}/vendor/tfjs/`);
      tf.env().set("WASM_HAS_MULTITHREAD_SUPPORT", false);
    }
    await tf.setBackend(backend);
    await tf.ready();
    model = await tf.loadLayersModel(new URL("tfjs/model.json", location.href).href);
  }, async (image) => {
    const out = tf.tidy(() => model.predict(tf.tensor2d([image], [1, 64])).argMax(-1));
    const label = (await out.data())[0];
    out.dispose();
    return label;
  });
}
window.benchResult = result;
document.getElementById("state").textContent = JSON.stringify(result);
"""


def tfjs_layers_model(model, folder: Path) -> None:
    """Write ``model`` (Linear, ReLU, Linear) as a TF.js Layers model: model.json + weights.bin."""
    first, last = model[0], model[2]
    arrays = [first.weight.detach().numpy().T, first.bias.detach().numpy(),
              last.weight.detach().numpy().T, last.bias.detach().numpy()]
    names = ["dense1/kernel", "dense1/bias", "dense2/kernel", "dense2/bias"]
    dense = [{"class_name": "Dense", "config": {"name": "dense1", "units": 128, "activation": "relu", "use_bias": True,
                                                "batch_input_shape": [None, 64], "dtype": "float32"}},
             {"class_name": "Dense", "config": {"name": "dense2", "units": 10, "activation": "linear",
                                                "use_bias": True}}]
    topology = {"class_name": "Sequential", "config": {"name": "digits_mlp", "layers": dense},
                "keras_version": "tfjs-layers 4.22.0", "backend": "tensor_flow.js"}
    manifest = [{"paths": ["weights.bin"], "weights": [
        {"name": n, "shape": list(a.shape), "dtype": "float32"} for n, a in zip(names, arrays)]}]
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "model.json").write_text(json.dumps({"format": "layers-model", "generatedBy": "webgrad widget_bench",
                                                   "modelTopology": topology, "weightsManifest": manifest}))
    (folder / "weights.bin").write_bytes(b"".join(np.ascontiguousarray(a, dtype="<f4").tobytes() for a in arrays))


def serve(folder: Path):
    class Handler(http.server.SimpleHTTPRequestHandler):
        def end_headers(self):
            self.send_header("Cache-Control", "no-store")
            super().end_headers()

        def log_message(self, *args):
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(Handler, directory=str(folder)))
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server, f"http://127.0.0.1:{server.server_address[1]}/"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--url", help="a running webgrad site (default: start one)")
    parser.add_argument("--runs", type=int, default=50, help="predictions timed per runner")
    parser.add_argument("--repeats", type=int, default=2, help="cold starts per runner (fresh contexts)")
    args = parser.parse_args()
    from playwright.sync_api import sync_playwright

    from webgrad import store as model_store
    from demos import digits

    process = host = folder = None
    pushed = False
    if args.url:
        webgrad = args.url.rstrip("/")
    else:
        process, url = start_server()
        webgrad = url.rstrip("/")
    try:
        demo = digits.DigitsDemo("mlp")
        demo.train(200)
        pushed = True  # before the call: a push that fails late may still have stored it
        demo.push(MODEL, url=webgrad)
        images = demo.x_test[:20].tolist()
        python_labels = [max(range(10), key=p.__getitem__) for p in map(demo.predict, images)]
        folder = Path(tempfile.mkdtemp(prefix="webgrad-widget-bench-"))
        tfjs_layers_model(demo.model, folder / "tfjs")
        (folder / "index.html").write_text(PAGE)
        (folder / "bench.js").write_text(SCRIPT.replace("BENCH_MODEL", MODEL))
        (folder / "images.json").write_text(json.dumps(images))
        host, host_url = serve(folder)
        results: dict[str, list[dict]] = {}
        with sync_playwright() as playwright:
            browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS, headless=True)
            for _ in range(args.repeats):
                for which in ["webgrad", "tfjs wasm", "tfjs cpu"]:
                    context = browser.new_context()  # cold: an empty HTTP cache
                    page = context.new_page()
                    page.goto(f"{host_url}index.html?webgrad={webgrad}&which={which}&runs={args.runs}")
                    page.wait_for_function("() => window.benchResult", timeout=300_000)
                    results.setdefault(which, []).append(page.evaluate("() => window.benchResult"))
                    context.close()
            browser.close()
    finally:
        if host is not None:
            host.shutdown()
        if folder is not None:
            shutil.rmtree(folder, ignore_errors=True)
        if pushed:
            try:
                model_store.delete(MODEL, url=webgrad)
            except model_store.ModelNotFoundError:
                pass
            except model_store.StoreError as error:
                print(f"could not delete the bench's model {MODEL!r} from {webgrad}: {error}", file=sys.stderr)
        if process is not None:
            process.terminate()
    n = len(python_labels)
    print(f"digits MLP 64-128-10, host page on another origin, {args.repeats} cold starts, "
          f"median of {args.runs} predictions (ms); CPUs: {os.cpu_count()}")
    print(f"{'runner':<12} {'cold: load -> 1st prediction':>30} {'per prediction':>16} {'same classes as Python':>24}")
    base = None
    for which, runs in results.items():
        cold = statistics.median(r["cold"] for r in runs)
        per = statistics.median(r["per"] for r in runs)
        agree = sum(a == b for a, b in zip(runs[0]["labels"][:n], python_labels))
        if base is None:
            base = (cold, per)
        checked = f"{agree}/{min(n, len(runs[0]['labels']))}"
        print(f"{which:<12} {cold:>30.0f} {per:>16.2f} {checked:>24}")
    for which, runs in results.items():
        if which != "webgrad":
            cold = statistics.median(r["cold"] for r in runs)
            per = statistics.median(r["per"] for r in runs)
            print(f"webgrad / {which}: cold x{base[0] / cold:.1f}, per prediction x{base[1] / per:.1f}")


if __name__ == "__main__":
    main()
