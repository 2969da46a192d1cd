"""The <webgrad-model> widget on a third-party page: demos/embed/ served from ANOTHER port
by a tiny static server, under a strict CSP, without COOP/COEP.

A digits MLP is trained and pushed natively; the page's JavaScript must get the same class
as Python for the same input. It is pushed twice: with its web bundle (the widget runs it on
/lite.js, engine "lite", and the page downloads no Pyodide) and without (engine "python", the
model rebuilt in Pyodide). Failures (no such model, a file that is not a model, a broken
architecture record, bad input, a CSP without 'wasm-unsafe-eval' for the Python runtime) must
each fire `error` with a readable message, never leave a promise pending.
"""
from __future__ import annotations

import functools
import http.server
import json
import sys
import threading
import time
from urllib.parse import urlsplit

import httpx
import pytest

from .conftest import BOOT_TIMEOUT_MS, REPO, Runtime

sys.path.insert(0, str(REPO))
SHOTS = REPO / "tests" / "browser" / "screenshots"
MODEL = "digits-mlp-widget"
PYTHON_MODEL = "digits-mlp-python"  # the same model pushed without its web bundle


def host_policy(webgrad: str, wasm: bool) -> str:
    """What a careful third-party site sends: scripts only from itself and the webgrad host."""
    return "; ".join([
        "default-src 'self'",
        f"script-src 'self' {webgrad}" + (" 'wasm-unsafe-eval'" if wasm else ""),
        f"worker-src blob: {webgrad}",  # the runtime's worker: a blob: module that imports the webgrad host's
        f"connect-src 'self' {webgrad}",
        "style-src 'self'",
        "img-src 'self' data:",
    ])


class EmbedHandler(http.server.SimpleHTTPRequestHandler):
    """Serves demos/embed/; under /nowasm/ the same files with a CSP lacking 'wasm-unsafe-eval'."""

    webgrad = ""

    def translate_path(self, path):
        self.wasm = not path.startswith("/nowasm/")
        return super().translate_path(path.removeprefix("/nowasm").removeprefix("/nocsp"))

    def end_headers(self):
        if self.path.split("?")[0].endswith((".html", "/")) and "nocsp" not in self.path:
            self.send_header("Content-Security-Policy", host_policy(self.webgrad, self.wasm))
        self.send_header("Cache-Control", "no-store")
        super().end_headers()

    def log_message(self, *args):
        pass


@pytest.fixture(scope="module")
def embed_url(server_url):
    webgrad = server_url.rstrip("/")
    handler = type("Handler", (EmbedHandler,), {"webgrad": webgrad})
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0),
                                             functools.partial(handler, directory=str(REPO / "demos" / "embed")))
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}/"
    server.shutdown()


@pytest.fixture(scope="module")
def trained(server_url):
    """A digits MLP trained natively and pushed to the test server; its predictions on test images."""
    from demos import digits

    import webgrad

    demo = digits.DigitsDemo("mlp")
    demo.train(150)
    assert demo.push(MODEL, url=server_url.rstrip("/"))["lite"] is not None
    webgrad.store.push(demo.model, PYTHON_MODEL, {"labels": digits.LABELS, "image": {"height": 8, "width": 8}},
                       url=server_url.rstrip("/"), input_size=(1, 64), lite=False)
    images = demo.x_test[:12].tolist()
    expected = [max(range(10), key=p.__getitem__) for p in (demo.predict(image) for image in images)]
    return {"images": images, "expected": expected}


@pytest.fixture
def host_page(browser):
    contexts = []

    def make(url: str, width: int = 1280):
        context = browser.new_context(viewport={"width": width, "height": 900})
        contexts.append(context)
        page = context.new_page()
        recorder = Runtime(page)
        recorder.requests = []  # every URL the page asked for
        page.on("request", lambda request: recorder.requests.append(request.url))
        page.goto(url)
        return page, recorder

    yield make
    for context in contexts:
        context.close()


def python_requests(recorder) -> list:
    """The page's requests for the Python runtime (Pyodide, its packages, the webgrad wheel)."""
    return [url for url in recorder.requests if "/pyodide" in url or "/wheels/" in url or "worker" in url]


def wait_event(page, timeout_ms: int = BOOT_TIMEOUT_MS) -> dict:
    page.wait_for_function("() => window.embedEvents && window.embedEvents.some((e) => e.type !== 'prediction')",
                           timeout=timeout_ms)
    return page.evaluate("() => window.embedEvents.find((e) => e.type !== 'prediction')")


# JS: an 8 x 8 image as a 64 x 64 <canvas>, each pixel an 8 x 8 grey block (the widget resizes it back).
GREY_CANVAS = """(image) => {
    const canvas = document.createElement('canvas');
    canvas.width = canvas.height = 64;
    const context = canvas.getContext('2d');
    image.forEach((v, i) => {
        const grey = Math.round(255 * v);
        context.fillStyle = `rgb(${grey}, ${grey}, ${grey})`;
        context.fillRect(8 * (i % 8), 8 * Math.floor(i / 8), 8, 8);
    });
    return canvas;
}"""

ADD_ELEMENT = """async ([src, wait, trust]) => {
    const element = document.createElement('webgrad-model');
    element.setAttribute('src', src);
    if (trust) element.setAttribute('trust-code', '');
    const outcome = new Promise((resolve) => {
        element.addEventListener('error', (e) => resolve({type: 'error', message: e.detail.message}));
        element.addEventListener('ready', () => resolve({type: 'ready'}));
    });
    const started = performance.now();
    document.body.append(element);
    const first = await Promise.race([outcome, new Promise((r) => setTimeout(() => r({type: 'nothing'}), wait))]);
    let rejected = null;
    try { await element.ready; } catch (error) { rejected = error.message; }
    return {...first, rejected, ms: performance.now() - started};
}"""


def test_embedded_digits_model_predicts_like_python(host_page, embed_url, server_url, trained):
    assert urlsplit(embed_url).port != urlsplit(server_url).port
    page, recorder = host_page(f"{embed_url}index.html?webgrad={server_url.rstrip('/')}&model={MODEL}")
    event = wait_event(page)
    assert event == {"type": "ready", "detail": {"name": MODEL, "labels": list("0123456789")}}, recorder.console[-20:]
    assert page.evaluate("() => self.crossOriginIsolated") is False  # no COOP/COEP on the host page
    info = page.evaluate("() => document.querySelector('webgrad-model').info")
    assert info["input_shape"] == [1, 64] and info["output_shape"] == [1, 10]
    assert info["engine"] == "lite" and info["lite"]["bytes"] > 0 and info["device"] == "cpu"
    labels = page.evaluate("""async (images) => {
        const element = document.querySelector('webgrad-model');
        const out = [];
        for (const image of images) out.push((await element.predict(new Float32Array(image))).label);
        const nested = await element.predict([images[0].slice(0, 8), ...Array.from({length: 7},
            (_, r) => images[0].slice(8 * (r + 1), 8 * (r + 2)))]);
        // The same image as a 64 x 64 <canvas> (each pixel an 8 x 8 grey block): resized back to 8 x 8.
        const canvas = (GREY_CANVAS)(images[0]);
        const context = canvas.getContext('2d');
        const fromCanvas = await element.predict(canvas);
        const fromImageData = await element.predict(context.getImageData(0, 0, 64, 64));
        return {out, nested: nested.label, probabilities: Array.from(nested.probabilities),
                canvas: [fromCanvas.label, fromImageData.label]};
    }""".replace("GREY_CANVAS", GREY_CANVAS), trained["images"])
    assert labels["out"] == [str(i) for i in trained["expected"]]
    assert labels["nested"] == str(trained["expected"][0])  # an 8x8 nested array is the same image
    assert abs(sum(labels["probabilities"]) - 1) < 1e-4
    assert labels["canvas"] == [str(trained["expected"][0])] * 2
    # The drawing pad: a stroke gives a prediction event.
    pad = page.locator("webgrad-model canvas")
    box = pad.bounding_box()
    page.mouse.move(box["x"] + 100, box["y"] + 20)
    page.mouse.down()
    page.mouse.move(box["x"] + 100, box["y"] + 180, steps=10)
    page.mouse.up()
    page.wait_for_function("() => window.embedEvents.some((e) => e.type === 'prediction')", timeout=60_000)
    SHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(SHOTS / "widget-embed-1280.png"), full_page=True)
    # Bad input: a readable rejection and an error event, and the model still works after it.
    bad = page.evaluate("""async () => {
        const element = document.querySelector('webgrad-model');
        const errors = [];
        element.addEventListener('error', (e) => errors.push(e.detail.message));
        let message = null;
        try { await element.predict(new Float32Array(10)); } catch (error) { message = error.message; }
        let other = null;
        try { await element.predict('a string'); } catch (error) { other = error.message; }
        const after = await element.predict(new Float32Array(64));
        return {message, other, errors, after: after.label};
    }""")
    assert "takes input of shape [1,64]" in bad["message"] and "got 10 values" in bad["message"]
    assert "predict() takes a Float32Array" in bad["other"]
    assert bad["errors"] == [bad["message"], bad["other"]] and bad["after"] in list("0123456789")
    assert [line for line in recorder.console if line.startswith(("error", "pageerror"))] == []
    assert python_requests(recorder) == []  # the lite engine: no Pyodide, no worker
    assert any("/api/models/digits-mlp-widget/lite/weights.safetensors" in url for url in recorder.requests)


def test_model_without_a_bundle_runs_in_python_and_predicts_the_same(host_page, embed_url, server_url, trained):
    page, recorder = host_page(f"{embed_url}index.html?webgrad={server_url.rstrip('/')}&model={PYTHON_MODEL}")
    assert wait_event(page)["type"] == "ready", recorder.console[-20:]
    out = page.evaluate("""async (images) => {
        const element = document.querySelector('webgrad-model');
        const labels = [];
        for (const image of images) labels.push((await element.predict(new Float32Array(image))).label);
        return {labels, engine: element.info.engine, reason: element.info.lite_reason, lite: element.info.lite};
    }""", trained["images"])
    assert out["engine"] == "python" and out["lite"] is None and "lite=False" in out["reason"]
    assert out["labels"] == [str(i) for i in trained["expected"]]
    assert any("/pyodide/" in url for url in recorder.requests)


def test_predict_is_one_call_that_moves_the_values_without_python_source(host_page, embed_url, server_url,
                                                                          trained):
    page, recorder = host_page(f"{embed_url}index.html?webgrad={server_url.rstrip('/')}&model={PYTHON_MODEL}")
    assert wait_event(page)["type"] == "ready", recorder.console[-20:]
    out = page.evaluate("""async (image) => {
        const sent = [];
        const post = Worker.prototype.postMessage;  // every message the page sends its runtime's worker
        Worker.prototype.postMessage = function (message, transfer) {
            sent.push({type: message.type, module: message.module ?? null, fn: message.function ?? null,
                       code: message.code ?? null, values: message.args?.[1]?.constructor?.name ?? null,
                       moved: (transfer || []).length});
            return post.call(this, message, transfer);
        };
        try {
            const answer = await document.querySelector('webgrad-model').predict(new Float32Array(image));
            return {sent, label: answer.label, outputs: answer.outputs.constructor.name, shape: answer.shape};
        } finally {
            Worker.prototype.postMessage = post;
        }
    }""", trained["images"][0])
    assert out["sent"] == [{"type": "call", "module": "webgrad.web.widget", "fn": "predict", "code": None,
                            "values": "Float32Array", "moved": 1}]
    assert out["label"] == str(trained["expected"][0])
    assert out["outputs"] == "Float32Array" and out["shape"] == [1, 10]


def test_load_on_webgpu_and_an_img_element_predict_like_python(host_page, embed_url, server_url, trained):
    """The JS API on the same third-party page: load(url, {device: 'webgpu'}) runs the model on
    the browser's WebGPU device; an <img> (a data: URL of the image drawn 8x larger) is resized
    to the model's input like a canvas."""
    webgrad = server_url.rstrip("/")
    page, recorder = host_page(f"{embed_url}index.html?webgrad={webgrad}&model={MODEL}")
    wait_event(page)
    out = page.evaluate("""async ([webgrad, name, images]) => {
        const {load} = await import(`${webgrad}/widget.js`);
        const model = await load(`${webgrad}/api/models/${name}`, {device: 'webgpu'});
        const labels = [];
        for (const image of images) labels.push((await model.predict(new Float32Array(image))).label);
        const canvas = (GREY_CANVAS)(images[0]);
        const img = new Image();
        img.src = canvas.toDataURL();
        await img.decode();
        const fromImg = await model.predict(img);
        return {device: model.info.device, engine: model.info.engine, labels, img: fromImg.label};
    }""".replace("GREY_CANVAS", GREY_CANVAS), [webgrad, MODEL, trained["images"]])
    assert out["device"] == "webgpu" and out["engine"] == "lite", out
    assert out["labels"] == [str(i) for i in trained["expected"]]
    assert out["img"] == str(trained["expected"][0])
    assert [line for line in recorder.console if line.startswith(("error", "pageerror"))] == []


def test_missing_and_malformed_models_fire_error(host_page, embed_url, server_url, trained):
    webgrad = server_url.rstrip("/")
    page, recorder = host_page(f"{embed_url}index.html?webgrad={webgrad}&model={MODEL}")
    assert wait_event(page)["type"] == "ready"
    # No such model: the record check answers before Python is involved.
    missing = page.evaluate(ADD_ELEMENT, [f"{webgrad}/api/models/no-such-model", 5000])
    assert missing["type"] == "error" and missing["ms"] < 5000
    assert "no model at" in missing["message"] and "404" in missing["message"]
    assert missing["rejected"] == missing["message"]
    # A URL that is not a stored model at all.
    not_model = page.evaluate(ADD_ELEMENT, [f"{webgrad}/demos/py/digits.py", 5000])
    assert not_model["type"] == "error" and "is not a stored model" in not_model["message"]
    # A stored model whose architecture record is broken (uploaded by hand).
    weights = httpx.get(f"{webgrad}/api/models/{MODEL}/weights").content
    record = {"webgrad": {"version": 1, "architecture": {"kind": "module", "class": "NoSuchLayer"},
                          "input_shape": [1, 64]}}
    response = httpx.put(f"{webgrad}/api/models/broken-arch", headers={"X-Webgrad-Client": "1"},
                         files={"weights": ("model.safetensors", weights)}, data={"metadata": json.dumps(record)})
    assert response.status_code in (200, 201), response.text
    broken = page.evaluate(ADD_ELEMENT, [f"{webgrad}/api/models/broken-arch", 60_000])
    assert broken["type"] == "error" and "broken-arch" in broken["message"], broken
    assert "architecture" in broken["message"]
    # A model whose class is the author's own code: its web bundle runs no code, so it loads as it is;
    # rebuilt in Python (no bundle) it loads only when the page trusts it.
    import webgrad as wg
    from demos import digits

    cnn = digits.DigitsDemo("cnn")
    cnn.push("digits-cnn-widget", url=webgrad)
    lite = page.evaluate(ADD_ELEMENT, [f"{webgrad}/api/models/digits-cnn-widget", 60_000])
    assert lite["type"] == "ready" and lite["rejected"] is None, lite
    wg.store.push(cnn.model, "digits-cnn-python", url=webgrad, input_size=(1, 1, 8, 8), lite=False)
    untrusted = page.evaluate(ADD_ELEMENT, [f"{webgrad}/api/models/digits-cnn-python", 60_000])
    assert untrusted["type"] == "error" and "DigitsCNN" in untrusted["message"]
    assert "add the trust-code attribute" in untrusted["message"]
    assert "trust_code=True" not in untrusted["message"]  # the page's terms, not pull()'s
    trusted = page.evaluate(ADD_ELEMENT, [f"{webgrad}/api/models/digits-cnn-python", 60_000, True])
    assert trusted["type"] == "ready" and trusted["rejected"] is None
    assert [line for line in recorder.console if line.startswith("pageerror")] == []


def test_host_csp_without_wasm_unsafe_eval_fires_error_quickly(host_page, embed_url, server_url, trained):
    """The Python runtime needs 'wasm-unsafe-eval' (and says so, quickly); the lite engine does not."""
    started = time.monotonic()
    page, _ = host_page(f"{embed_url}nowasm/index.html?webgrad={server_url.rstrip('/')}&model={PYTHON_MODEL}")
    event = wait_event(page, timeout_ms=30_000)
    assert event["type"] == "error" and "wasm-unsafe-eval" in event["detail"], event
    assert time.monotonic() - started < 30
    page, recorder = host_page(f"{embed_url}nowasm/index.html?webgrad={server_url.rstrip('/')}&model={MODEL}")
    assert wait_event(page, timeout_ms=30_000)["type"] == "ready", recorder.console[-20:]
    assert page.evaluate("async () => (await document.querySelector('webgrad-model').predict("
                         "new Float32Array(64))).label") in list("0123456789")


ADD_WITH_INPUT = """async ([src, input]) => {
    const element = document.createElement('webgrad-model');
    element.setAttribute('src', src);
    element.setAttribute('input', input);
    const events = [];
    element.addEventListener('error', (e) => events.push(`error: ${e.detail.message}`));
    element.addEventListener('ready', () => events.push('ready'));
    document.body.append(element);
    await element.ready;
    const box = element.shadowRoot.querySelector('.box');
    const controls = box ? box.querySelectorAll('textarea, canvas, input').length : 0;
    const result = {events, box: box ? box.className : null, controls};
    element.remove();
    return result;
}"""


def test_input_attribute_picks_the_ui_or_none(host_page, embed_url, server_url, trained):
    """input="..." overrides the UI the model's record picks: "none" shows nothing (the element
    is for JavaScript), "fields" takes the 64 pixel values as numbers; a UI the model cannot
    use, or a name that is no UI, fires `error` saying which fit."""
    webgrad = server_url.rstrip("/")
    page, recorder = host_page(f"{embed_url}index.html?webgrad={webgrad}&model={MODEL}")
    assert wait_event(page)["type"] == "ready"
    assert page.locator("webgrad-model .pad canvas").count() == 1  # no input attribute: the image's pad
    src = f"{webgrad}/api/models/{MODEL}"
    none = page.evaluate(ADD_WITH_INPUT, [src, "none"])
    assert none == {"events": ["ready"], "box": None, "controls": 0}
    fields = page.evaluate(ADD_WITH_INPUT, [src, "fields"])
    assert fields == {"events": ["ready"], "box": "box fields", "controls": 1}  # 64 numbers: one text box
    text = page.evaluate(ADD_WITH_INPUT, [src, "text"])
    assert text["events"] == ['error: webgrad widget: input="text" needs a model that takes token ids; this one '
                              'takes image input: leave input out to get its own UI ("canvas")', "ready"]
    bogus = page.evaluate(ADD_WITH_INPUT, [src, "slider"])
    assert bogus["events"][0] == ('error: webgrad widget: input="slider" is not one of canvas, fields, plane, text, '
                                  'none; leave it out to get the UI that fits the model')
    # Changing the attribute swaps the UI of the loaded model (no reload: no second ready event).
    page.evaluate("() => document.querySelector('webgrad-model').setAttribute('input', 'none')")
    page.wait_for_function("() => !document.querySelector('webgrad-model').shadowRoot.querySelector('.box')")
    page.evaluate("() => document.querySelector('webgrad-model').removeAttribute('input')")
    page.locator("webgrad-model .pad canvas").wait_for()
    assert [e["type"] for e in page.evaluate("() => window.embedEvents")] == ["ready"]
    assert [line for line in recorder.console if line.startswith("pageerror")] == []


# JS: a <webgrad-model> on `device`; resolves with its error event's message and what its status line shows.
ADD_ON_DEVICE = """async ([src, device]) => {
    const element = document.createElement('webgrad-model');
    element.setAttribute('src', src);
    element.setAttribute('device', device);
    const outcome = new Promise((resolve) => {
        element.addEventListener('error', (e) => resolve({type: 'error', message: e.detail.message}));
        element.addEventListener('ready', () => resolve({type: 'ready'}));
    });
    document.body.append(element);
    const result = await outcome;
    const status = element.shadowRoot.querySelector('.status');
    return {...result, shown: status.classList.contains('error') ? status.textContent : null};
}"""


def _damaged(data: bytes, file: str) -> bytes:
    if file.endswith(".wgsl"):
        return b"fn broken( {"  # a kernel that does not compile
    return data[: len(data) // 2]  # model.json and weights.safetensors arrive truncated


@pytest.mark.parametrize("file, device", [("model.json", "cpu"), ("weights.safetensors", "cpu"),
                                          ("kernels/0.wgsl", "webgpu")])
def test_a_damaged_bundle_file_is_named_on_the_widget_and_the_page_lives(host_page, embed_url, server_url, trained,
                                                                          file, device):
    """Each file of the model's web bundle, arriving damaged (a proxy or CDN cut it short), is refused
    with its name: the widget shows that, fires `error`, and the page and its other widgets go on."""
    webgrad = server_url.rstrip("/")
    page, recorder = host_page(f"{embed_url}index.html?webgrad={webgrad}&model={MODEL}")
    assert wait_event(page)["type"] == "ready"
    url = f"{webgrad}/api/models/{MODEL}/lite/{file}"
    good = httpx.get(url)
    assert good.status_code == 200
    headers = {"Content-Type": good.headers["content-type"], "Access-Control-Allow-Origin": "*"}
    page.route(url, lambda route: route.fulfill(status=200, body=_damaged(good.content, file), headers=headers))
    broken = page.evaluate(ADD_ON_DEVICE, [f"{webgrad}/api/models/{MODEL}", device])
    assert broken["type"] == "error" and file in broken["message"], broken
    assert broken["shown"] == broken["message"]  # the widget says it where the user looks
    page.unroute(url)
    again = page.evaluate(ADD_ON_DEVICE, [f"{webgrad}/api/models/{MODEL}", device])
    assert again["type"] == "ready", again
    label = page.evaluate("async (image) => (await document.querySelector('webgrad-model').predict("
                          "new Float32Array(image))).label", trained["images"][0])
    assert label == str(trained["expected"][0])
    assert [line for line in recorder.console if line.startswith("pageerror")] == []
