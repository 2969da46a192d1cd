"""Models shipped with webgrad.export + /lite.js vs the same models as TF.js Layers models, in one
headless Chromium.

    python bench/lite_bench.py              # quiet, then with --load N CPU burners (default 2)
    python bench/lite_bench.py --runs 5 --load 0 --model mlp

The digits MLP (demos/digits.py, 64 -> 128 -> 10) and the digits CNN (two 3x3 convolutions with
max pooling, then a linear layer) are exported natively as lite bundles and written as TF.js
Layers models (model.json + weights.bin) with the same weights; the char transformer
(demos/char_lm.py) runs on lite alone (TF.js Layers has no transformer layer). Everything is
served, with lite.js and TF.js's scripts, by one static server (the host page's origin; a fresh
browser context per visit, so nothing is cached) and timed from navigation start to the first
prediction's numbers in JavaScript (lite: import + load + predict, on its default device and on each;
TF.js: its scripts +
setBackend + ready + loadLayersModel + predict().data(), on its cpu and wasm backends: the faster
counts). Then the median latency of one more prediction, lite on WebGPU vs TF.js WebGPU and lite's
CPU path vs TF.js wasm. Prints medians over alternated runs, ratios lite / TF.js (below 1: lite is
faster), the bytes each page fetched and the gzipped size of the JavaScript each needs. Every
page's first prediction is checked against webgrad's natively.
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

# %(input)s is a JavaScript expression of the model's input: the same numbers on every page.
LITE_PAGE = """<!doctype html><meta charset="utf-8"><title>lite</title><script type="module">
const x = %(input)s;
const {load} = await import("./lite.js");
const model = await load("./%(model)s-bundle/", {device: "%(device)s"});
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
const x = %(input)s;
if ("%(backend)s" === "wasm") {
  tf.wasm.setWasmPaths(new URL("./tfjs/", location.href).href);
  tf.env().set("WASM_HAS_MULTITHREAD_SUPPORT", false);
}
if (!(await tf.setBackend("%(backend)s"))) throw new Error("no %(backend)s backend");
await tf.ready();
const model = await tf.loadLayersModel("./%(model)s-tfjs/model.json");
const predict = async () => {
  const y = model.predict(tf.tensor(x, %(shape)s));
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


def _pixels():
    return (np.arange(64) % 7 / 7).astype(np.float32)


def _mlp():
    from demos import digits
    model = digits.make_model("mlp")
    return model, _pixels()[None], "new Float32Array(64).map((_, i) => (i % 7) / 7)", [1, 64]


def _cnn():
    from demos import digits
    model = digits.make_model("cnn")
    return model, _pixels().reshape(1, 1, 8, 8), "new Float32Array(64).map((_, i) => (i % 7) / 7)", [1, 8, 8, 1]


def _transformer():
    from demos import char_lm
    model = char_lm.TinyGPT(40, context=32)
    tokens = (np.arange(32) * 7 % 40)[None]
    return model, tokens, "[Array.from({length: 32}, (_, i) => i * 7 % 40)]", None


MODELS = {"mlp": ("digits MLP", _mlp), "cnn": ("digits CNN", _cnn), "transformer": ("char transformer", _transformer)}


def write_site(folder: Path, keys) -> dict:
    """The host folder: lite.js, TF.js's files, each model's bundle, TF.js model and pages; returns
    each model's expected first outputs."""
    import webgrad

    shutil.copy(LITE_JS, folder / "lite.js")
    shutil.copytree(TFJS, folder / "tfjs", ignore=shutil.ignore_patterns("*.gz", "*.br"))
    expected = {}
    for key in keys:
        webgrad.manual_seed(0)
        model, x, js_input, tfjs_shape = MODELS[key][1]()
        model.eval()
        webgrad.export(model, (webgrad.tensor(x),), folder / f"{key}-bundle")
        for device in ("auto", "webgpu", "cpu"):
            (folder / f"lite-{key}-{device}.html").write_text(
                LITE_PAGE % {"input": js_input, "model": key, "device": device, "n": PREDICTIONS})
        if tfjs_shape is not None:
            _write_tfjs_model(key, model, folder / f"{key}-tfjs")
            for backend in ("cpu", "wasm", "webgpu"):
                extra = {"wasm": '<script src="./tfjs/tf-backend-wasm.min.js"></script>',
                         "webgpu": '<script src="./tfjs/tf-backend-webgpu.min.js"></script>'}.get(backend, "")
                (folder / f"tfjs-{key}-{backend}.html").write_text(TFJS_PAGE % {
                    "input": js_input, "model": key, "backend": backend, "extra": extra, "n": PREDICTIONS,
                    "shape": json.dumps(tfjs_shape)})
        with webgrad.no_grad():
            expected[key] = model(webgrad.tensor(x)).numpy().reshape(-1)
    return expected


def _dense(name, linear, activation, first_input=None):
    config = {"name": name, "units": linear.out_features, "activation": activation, "use_bias": True}
    if first_input is not None:
        config["batch_input_shape"] = [None, first_input]
    return config


def _write_tfjs_model(key, model, folder: Path) -> None:
    """The model as a Keras-style Sequential (channels last) with the same weights."""
    layers, arrays = [], []

    def add(class_name, config, *weights):
        config = {"dtype": "float32", "trainable": True, **config}
        layers.append({"class_name": class_name, "config": config})
        arrays.extend((f"{config['name']}/{w}", np.ascontiguousarray(a, np.float32)) for w, a in weights)

    def linear(name, module, activation, first_input=None):
        add("Dense", _dense(name, module, activation, first_input), ("kernel", module.weight.detach().numpy().T),
            ("bias", module.bias.detach().numpy()))

    if key == "mlp":
        linear("dense_1", model[0], "relu", model[0].in_features)
        linear("dense_2", model[2], "linear")
    else:  # DigitsCNN: conv, relu, pool, conv, relu, pool, flatten, linear
        convs = [model.features[0], model.features[3]]
        for i, conv in enumerate(convs, 1):
            config = {"name": f"conv2d_{i}", "filters": conv.out_channels, "kernel_size": [3, 3], "strides": [1, 1],
                      "padding": "same", "data_format": "channels_last", "dilation_rate": [1, 1],
                      "activation": "relu", "use_bias": True}
            if i == 1:
                config["batch_input_shape"] = [None, 8, 8, 1]
            add("Conv2D", config, ("kernel", conv.weight.detach().numpy().transpose(2, 3, 1, 0)),
                ("bias", conv.bias.detach().numpy()))
            add("MaxPooling2D", {"name": f"max_pooling2d_{i}", "pool_size": [2, 2], "strides": [2, 2],
                                 "padding": "valid", "data_format": "channels_last"})
        add("Flatten", {"name": "flatten_1"})
        head = model.classifier
        channels = convs[-1].out_channels
        # Flatten reads (h, w, c) there and (c, h, w) here: the same kernel rows, reordered.
        w = head.weight.detach().numpy().T.reshape(channels, 2, 2, -1).transpose(1, 2, 0, 3).reshape(-1, 10)
        add("Dense", _dense("dense_1", head, "linear"), ("kernel", w), ("bias", head.bias.detach().numpy()))
    folder.mkdir()
    (folder / "weights.bin").write_bytes(b"".join(a.tobytes() for _, a in arrays))
    manifest = [{"name": name, "shape": list(a.shape), "dtype": "float32"} for name, a in arrays]
    (folder / "model.json").write_text(json.dumps({
        "format": "layers-model", "generatedBy": "webgrad bench", "convertedBy": None,
        "modelTopology": {"class_name": "Sequential", "keras_version": "2.15.0", "backend": "tensorflow",
                          "config": {"name": key, "layers": layers}},
        "weightsManifest": [{"paths": ["weights.bin"], "weights": manifest}]}))


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


def runners(folder: Path, key: str) -> list:
    return [p.stem for name in ("lite", "tfjs") for p in sorted(folder.glob(f"{name}-{key}-*.html"))]


def measure(browser, url: str, names: list, runs: int, want) -> dict:
    results: dict = {name: [] for name in names}
    for _ in range(runs):
        for name in names:  # alternated, so a slow moment hits every runner alike
            result = visit(browser, url + name + ".html")
            worst = float(np.max(np.abs(np.array(result["out"]) - want)))
            if worst > 1e-4:
                raise SystemExit(f"{name} predicted {result['out'][:5]}..., natively {list(want[:5])}...")
            results[name].append(result)
    return results


def report(label: str, key: str, results: dict) -> None:
    med, picked = {}, {}
    for name, rs in results.items():  # "lite-mlp-cpu" -> "lite-cpu"
        picked[name.split("-", 1)[0] + "-" + name.rsplit("-", 1)[1]] = rs[-1]["device"]
        med[name.split("-", 1)[0] + "-" + name.rsplit("-", 1)[1]] = {
            k: statistics.median(r[k] for r in rs) for k in ("ms", "predictMs", "bytes")}
    print(f"\n{MODELS[key][0]}, {label} (medians of {len(next(iter(results.values())))} alternated runs):")
    for name, m in med.items():
        print(f"  {name:12s} first prediction {m['ms']:7.0f} ms, one more {m['predictMs']:6.2f} ms, "
              f"fetched {m['bytes'] / 1e3:8.0f} KB")
    if "tfjs-cpu" not in med:
        return
    tfjs_first = min(med["tfjs-cpu"]["ms"], med["tfjs-wasm"]["ms"])
    print(f"  first prediction, lite (its default, auto: {picked['lite-auto']} here) / faster TF.js (cpu, wasm): "
          f"{med['lite-auto']['ms'] / tfjs_first:.2f}x; lite on WebGPU / same: "
          f"{med['lite-webgpu']['ms'] / tfjs_first:.2f}x")
    print(f"  one prediction, lite WebGPU / TF.js WebGPU: "
          f"{med['lite-webgpu']['predictMs'] / med['tfjs-webgpu']['predictMs']:.2f}x; "
          f"lite cpu / TF.js wasm: {med['lite-cpu']['predictMs'] / med['tfjs-wasm']['predictMs']:.2f}x")
    print(f"  bytes fetched, lite (cpu) / TF.js (wasm): {med['lite-cpu']['bytes'] / med['tfjs-wasm']['bytes']:.3f}")


def _folder_bytes(folder: Path) -> int:
    return sum(p.stat().st_size for p in folder.rglob("*") if p.is_file())


def gzipped(path: Path) -> int:
    return len(gzip.compress(path.read_bytes(), 9))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--load", type=int, default=2, help="CPU burners for the second round (0: none)")
    parser.add_argument("--model", choices=sorted(MODELS), action="append", help="(repeatable; default: all)")
    args = parser.parse_args()
    keys = args.model or list(MODELS)
    subprocess.run([sys.executable, "-m", "server.assets"], cwd=REPO, check=True)
    from playwright.sync_api import sync_playwright

    with tempfile.TemporaryDirectory(prefix="webgrad-lite-bench-") as temp:
        folder = Path(temp)
        want = write_site(folder, keys)
        server, url = serve(folder)
        print(f"JavaScript gzipped: lite.js {gzipped(folder / 'lite.js') / 1e3:.1f} KB; TF.js tf.min.js "
              f"{gzipped(folder / 'tfjs' / 'tf.min.js') / 1e3:.1f} KB (+ wasm backend "
              f"{gzipped(folder / 'tfjs' / 'tf-backend-wasm.min.js') / 1e3:.1f} KB and its .wasm)")
        for key in keys:
            sizes = [f"bundle {_folder_bytes(folder / f'{key}-bundle') / 1e3:.1f} KB"]
            if (folder / f"{key}-tfjs").exists():
                sizes.append(f"TF.js model {_folder_bytes(folder / f'{key}-tfjs') / 1e3:.1f} KB")
            print(f"{MODELS[key][0]}: " + ", ".join(sizes))
        with sync_playwright() as playwright:
            browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS, headless=True)
            rounds = [("quiet machine", 0)]
            if args.load:
                rounds.append((f"under load ({args.load} CPU burners)", args.load))
            for label, burners in rounds:
                with Load(burners, limit_s=1800):
                    for key in keys:
                        report(label, key, measure(browser, url, runners(folder, key), args.runs, want[key]))
            browser.close()
        server.shutdown()


if __name__ == "__main__":
    main()
