"""Embed that always works: for every model a demo or example saves, the playground's Models
panel shows an embed snippet; pasted as it is into a page on ANOTHER origin (another port,
a strict CSP, no COOP/COEP), it must show a UI a person can use and answer through it.

The models are pushed natively with the demos' and examples' own code (demos/*.py's push
methods, web/playground/examples/digits_mlp.py run as a script), plus one model of a vector
of numbers (no demo makes one). Each pasted page is opened at 390 px: the UI has a size,
nothing overflows sideways, and using it (drawing, clicking the plane, typing numbers,
Generate) gives an answer. Screenshots go to tests/browser/screenshots/embed-*.png.

Every model but one has a web bundle (pushed beside it by webgrad.store.push): the pasted
widget runs it on the lite engine and the host page never asks for Pyodide; the panel shows
the bundle's size next to the snippet. "cumulative" uses an op the bundle does not lower
(cumsum): it runs on the Python runtime, and the panel says why.
"""
from __future__ import annotations

import functools
import http.server
import os
import re
import runpy
import sys
import threading
from urllib.parse import urlsplit

import pytest

from webgrad import nn

from .conftest import BOOT_TIMEOUT_MS, REPO, Runtime
from .test_widget import host_policy

sys.path.insert(0, str(REPO))
SHOTS = REPO / "tests" / "browser" / "screenshots"
EXAMPLES = REPO / "web" / "playground" / "examples"
WIDTH = 390

# name -> the UI a person should see (the kind recorded at push).
MODELS = {"digits-mlp": "image", "digits-cnn": "image", "classify-2d": "plane", "curve-fit": "curve",
          "char-lm": "text", "four-features": "fields", "cumulative": "fields"}
OWN_CODE = {"digits-cnn": "DigitsCNN", "char-lm": "TinyGPT",  # models built by the author's own classes
            "cumulative": "CumulativeFeatures"}
PYTHON_ONLY = {"cumulative": "'cumsum'"}  # models the web bundle cannot lower, and the op it names




class CumulativeFeatures(nn.Module):
    """Four numbers in, three classes out, through a running sum: an op the web bundle does not lower."""

    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 3)

    def forward(self, x):
        return self.fc(x.cumsum(dim=1))


@pytest.fixture(scope="module")
def pushed(server_url):
    """Each model pushed to the test server the way its demo or example pushes it."""
    from webgrad import nn

    from demos import char_lm, classify_2d, curve_fit, digits

    base = server_url.rstrip("/")
    before = os.environ.get("WEBGRAD_STORE")
    os.environ["WEBGRAD_STORE"] = base  # the example pushes to the default store
    try:
        runpy.run_path(str(EXAMPLES / "digits_mlp.py"),
                       init_globals={"webgrad_progress": lambda event: None, "WEBGRAD_DEVICE": "cpu"})
    finally:
        if before is None:
            os.environ.pop("WEBGRAD_STORE")
        else:
            os.environ["WEBGRAD_STORE"] = before
    cnn = digits.DigitsDemo("cnn")
    cnn.train(60)
    cnn.push("digits-cnn", url=base)
    plane = classify_2d.Classify2D()
    plane.train(150)
    plane.push("classify-2d", url=base)
    curve = curve_fit.CurveFit()
    curve.train(200)
    curve.push("curve-fit", url=base)
    lm = char_lm.CharLM()
    lm.train(20)
    lm.push("char-lm", url=base)
    import webgrad

    webgrad.manual_seed(0)
    tabular = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 3))
    webgrad.store.push(tabular, "four-features", {"labels": ["small", "medium", "large"]}, url=base,
                       input_size=(1, 4))
    cumulative = webgrad.store.push(CumulativeFeatures(), "cumulative", {"labels": ["small", "medium", "large"]},
                                    url=base, input_size=(1, 4))
    assert cumulative["lite"] is None and "'cumsum'" in cumulative["lite_reason"]
    return {"chars": lm.chars, "context": lm.context, "lm": lm.model}


class PasteHandler(http.server.BaseHTTPRequestHandler):
    """Serves /NAME.html: a plain page whose body is the snippet pasted for NAME, under the CSP
    a careful third-party site sends (scripts only from itself and the webgrad host)."""

    webgrad = ""
    pastes: dict = {}

    def do_GET(self):
        name = self.path.split("?")[0].strip("/").removesuffix(".html")
        if name not in self.pastes:
            self.send_error(404)
            return
        body = ("<!doctype html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n"
                "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n"
                f"<title>My page with {name}</title>\n<link rel=\"icon\" href=\"data:,\">\n</head>\n<body>\n"
                f"<h1>My page</h1>\n<p>The model below is embedded with the snippet from webgrad's Models panel.</p>\n"
                f"{self.pastes[name]}\n</body>\n</html>\n").encode()
        self.send_response(200)
        self.send_header("Content-Type", "text/html; charset=utf-8")
        self.send_header("Content-Security-Policy", host_policy(self.webgrad, True))
        self.send_header("Cache-Control", "no-store")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


@pytest.fixture(scope="module")
def paste_site(server_url):
    """(base URL, pastes dict) of a host site on another port; put a snippet in pastes[name]."""
    pastes: dict = {}
    handler = type("Handler", (PasteHandler,), {"webgrad": server_url.rstrip("/"), "pastes": pastes})
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(handler))
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}/", pastes
    server.shutdown()


@pytest.fixture(scope="module")
def snippets(browser, server_url, pushed):
    """The snippet the Models panel shows for each model (clicking its Embed button, text as shown),
    and the line beside it (the engine); a screenshot of the panel with char-lm's."""
    context = browser.new_context(viewport={"width": 1280, "height": 900})
    page = context.new_page()
    recorder = Runtime(page)
    page.goto(server_url + "?device=cpu")
    found = {}
    for name in MODELS:
        row = page.locator("#models li", has=page.locator(".name", has_text=re.compile(f"^{name}$")))
        row.get_by_role("button", name="Embed", exact=True).click(timeout=BOOT_TIMEOUT_MS)
        found[name] = page.inner_text("#embed pre")
        found[f"{name} engine"] = page.inner_text("#embed .engine")
        if name in ("char-lm", "cumulative"):
            SHOTS.mkdir(parents=True, exist_ok=True)
            page.locator("#embed").screenshot(path=str(SHOTS / f"embed-panel-{name}.png"))
    assert [line for line in recorder.console if line.startswith("pageerror")] == []
    context.close()
    return found


def open_pasted(browser, paste_site, server_url, name, snippet):
    base, pastes = paste_site
    assert urlsplit(base).port != urlsplit(server_url).port  # another origin
    pastes[name] = snippet
    context = browser.new_context(viewport={"width": WIDTH, "height": 900})
    page = context.new_page()
    recorder = Runtime(page)
    recorder.requests = []  # every URL the host page asked for
    page.on("request", lambda request: recorder.requests.append(request.url))
    page.goto(f"{base}{name}.html")
    page.wait_for_function("""() => {
        const element = document.querySelector('webgrad-model');
        return element && (element.model || element.shadowRoot.querySelector('.status.error'));
    }""", timeout=BOOT_TIMEOUT_MS)
    error = page.evaluate("() => document.querySelector('webgrad-model').shadowRoot"
                          ".querySelector('.status').textContent")
    assert error == "", f"{name}: the pasted snippet failed: {error}\nconsole:\n" + "\n".join(recorder.console[-20:])
    return context, page, recorder


def check_engine(page, recorder, name):
    """The widget runs `name` on the lite engine without Pyodide, or (PYTHON_ONLY) on Python's."""
    info = page.evaluate("() => { const {engine, lite, lite_reason} = document.querySelector('webgrad-model').info; "
                         "return {engine, lite, lite_reason}; }")
    pyodide = [url for url in recorder.requests if "/pyodide/" in url]
    if name in PYTHON_ONLY:
        assert info["engine"] == "python" and PYTHON_ONLY[name] in info["lite_reason"], info
        assert pyodide, f"{name}: the Python runtime was not loaded"
    else:
        assert info["engine"] == "lite" and info["lite"]["bytes"] > 0, info
        assert pyodide == [], f"{name}: the host page asked for Pyodide: {pyodide[:3]}"


def visible_size(locator) -> tuple[float, float]:
    box = locator.bounding_box()
    assert box is not None, "not rendered"
    return box["width"], box["height"]


def answered(page, selector: str, before: str = "") -> str:
    """The text of the widget's answer `selector` once it shows one (not empty, not "…", not `before`)."""
    page.wait_for_function("""([selector, before]) => {
        const node = document.querySelector('webgrad-model').shadowRoot.querySelector(selector);
        const status = document.querySelector('webgrad-model').shadowRoot.querySelector('.status');
        const text = node ? node.textContent : '';
        return status.textContent || (text && text !== '…' && text !== before);
    }""", arg=[selector, before], timeout=60_000)
    status = page.evaluate("() => document.querySelector('webgrad-model').shadowRoot.querySelector('.status')"
                           ".textContent")
    assert status == "", f"the widget failed: {status}"
    return page.evaluate("(selector) => document.querySelector('webgrad-model').shadowRoot"
                         ".querySelector(selector).textContent", selector)


def use_image(page, name):
    pad = page.locator("webgrad-model .pad canvas")
    width, height = visible_size(pad)
    assert width > 100 and height > 100
    box = pad.bounding_box()
    page.mouse.move(box["x"] + width / 2, box["y"] + 0.15 * height)  # a "1"
    page.mouse.down()
    page.mouse.move(box["x"] + width / 2, box["y"] + 0.85 * height, steps=12)
    page.mouse.up()
    drawn = answered(page, "[part=label]")
    assert re.fullmatch(r"\d", drawn), drawn
    assert page.locator("webgrad-model .bar-row").count() == 10
    # By keyboard: Clear, then from the middle Shift+Up moves the pen up, Down draws a stroke.
    page.locator("webgrad-model .pad button", has_text="Clear").press("Enter")
    assert page.locator("webgrad-model [part=label]").inner_text() == ""
    pad.focus()
    for key in ["Shift+ArrowUp"] * 4 + ["ArrowDown"] * 8:
        page.keyboard.press(key)
    typed = answered(page, "[part=label]")
    assert re.fullmatch(r"\d", typed), typed
    return typed


def use_plane(page, name, labels):
    canvas = page.locator("webgrad-model .plane canvas")
    width, height = visible_size(canvas)
    assert width > 200 and abs(width - height) < 1
    page.wait_for_function("() => document.querySelector('webgrad-model').plane.background", timeout=60_000)
    assert page.locator("webgrad-model .legend > span").all_inner_texts() == labels
    colored = page.evaluate("""() => {
        const canvas = document.querySelector('webgrad-model').shadowRoot.querySelector('.plane canvas');
        const data = canvas.getContext('2d').getImageData(0, 0, canvas.width, canvas.height).data;
        const colours = new Set();
        for (let i = 0; i < data.length; i += 4 * 97) colours.add(`${data[i]},${data[i + 1]},${data[i + 2]}`);
        return colours.size;
    }""")
    assert colored > 10, "the plane is not colored by the model's answers"
    canvas.click(position={"x": 0.8 * width, "y": 0.3 * height})
    clicked = answered(page, ".plane output")
    point = re.fullmatch(r"\((-?[\d.]+), (-?[\d.]+)\): (class 0|class 1) \(\d+\.\d%\)", clicked)
    assert point, clicked
    x, y = float(point[1]), float(point[2])
    # The point clicked (0.8 across, 0.3 down) in the plane the model recorded, within a pixel or two.
    (x_low, x_high), (y_low, y_high) = page.evaluate(
        "() => { const {input} = document.querySelector('webgrad-model').info; "
        "return [input.x_range, input.y_range]; }")
    expected_x, expected_y = x_low + 0.8 * (x_high - x_low), y_high - 0.3 * (y_high - y_low)
    tolerance = 0.01 * (x_high - x_low)
    assert abs(x - expected_x) < tolerance and abs(y - expected_y) < tolerance, (clicked, expected_x, expected_y)
    # By keyboard: Tab to the plane, arrows move the cross (1/24 of the range a step), Enter asks.
    canvas.focus()
    for key in ("ArrowLeft", "ArrowLeft", "ArrowDown", "Enter"):
        page.keyboard.press(key)
    moved = answered(page, ".plane output", clicked)
    after = re.fullmatch(r"\((-?[\d.]+), (-?[\d.]+)\): class [01] \(\d+\.\d%\)", moved)
    assert after, moved
    step_x, step_y = (x_high - x_low) / 24, (y_high - y_low) / 24
    assert abs(float(after[1]) - (x - 2 * step_x)) < tolerance, moved
    assert abs(float(after[2]) - (y - step_y)) < tolerance, moved
    return clicked


def use_curve(page, name):
    canvas = page.locator("webgrad-model .plane canvas")
    width, height = visible_size(canvas)
    assert width > 200 and height > 200
    page.wait_for_function("() => document.querySelector('webgrad-model').plane.background", timeout=60_000)
    canvas.click(position={"x": 0.75 * width, "y": 0.5 * height})
    value = answered(page, ".plane output")
    assert re.fullmatch(r"f\(0\.(49|50|51)\) = -?\d+(\.\d+)?(e-?\d+)?", value), value
    return value


def use_fields(page, name):
    fields = page.locator("webgrad-model .fields input")
    assert fields.count() == 4
    for i, value in enumerate(["0.5", "-1", "2", "0.25"]):
        assert min(visible_size(fields.nth(i))) > 10
        fields.nth(i).fill(value)
    page.locator("webgrad-model .fields button").click()
    answer = answered(page, ".answer")
    assert re.fullmatch(r"(small|medium|large) \(\d+\.\d%\)", answer), answer
    return answer


def use_text(page, name, chars):
    prompt = page.locator("webgrad-model textarea")
    assert min(visible_size(prompt)) > 20
    prompt.fill("Shall I")
    page.locator("webgrad-model input[type=number]").nth(1).fill("40")
    page.locator("webgrad-model button", has_text="Generate").click()
    written = "() => document.querySelector('webgrad-model').shadowRoot.querySelector('[part=generated]').textContent"
    page.wait_for_function(f"() => ({written})().length > 0", timeout=60_000)
    text = page.evaluate(written)  # textContent: the characters as written, spaces and newlines included
    assert len(text) == 40 and set(text) <= set(chars), repr(text)
    return text


@pytest.mark.parametrize("name", list(MODELS))
def test_pasted_snippet_shows_a_working_ui(browser, server_url, paste_site, snippets, pushed, name):
    snippet = snippets[name]
    origin = server_url.rstrip("/")
    assert snippet.startswith(f'<script type="module" src="{origin}/widget.js"></script>\n')
    assert f'<webgrad-model src="{origin}/api/models/{name}"' in snippet
    engine = snippets[f"{name} engine"]  # beside the snippet: the bundle's size, or why Python
    if name in PYTHON_ONLY:
        assert engine.startswith("Python runtime: webgrad.export: ") and PYTHON_ONLY[name] in engine, engine
    else:
        assert re.fullmatch(r"lite bundle, \d+ KB — no Python in the page", engine), engine
    if name in OWN_CODE:  # the attribute, and a comment saying what it allows, before the element
        assert f"<!-- trust-code: this model is built by its author's own Python code ({OWN_CODE[name]})" in snippet
        assert "only for models whose author you trust" in snippet and snippet.endswith(" trust-code></webgrad-model>")
    else:
        assert "trust-code" not in snippet
    context, page, recorder = open_pasted(browser, paste_site, server_url, name, snippet)
    try:
        element = page.locator("webgrad-model")
        width, height = visible_size(element)
        assert width > 100 and height > 100, f"{name}: the element is {width} x {height}"
        kind = MODELS[name]
        if kind == "image":
            answer = use_image(page, name)
        elif kind == "plane":
            answer = use_plane(page, name, ["class 0", "class 1"])
        elif kind == "curve":
            answer = use_curve(page, name)
        elif kind == "fields":
            answer = use_fields(page, name)
        else:
            answer = use_text(page, name, pushed["chars"])
        assert answer
        check_engine(page, recorder, name)
        overflow = page.evaluate("() => document.documentElement.scrollWidth - document.documentElement.clientWidth")
        assert overflow <= 0, f"{name}: the page scrolls sideways by {overflow} px at {WIDTH} px"
        SHOTS.mkdir(parents=True, exist_ok=True)
        page.screenshot(path=str(SHOTS / f"embed-{name}-{WIDTH}.png"), full_page=True)
        errors = [line for line in recorder.console if line.startswith(("error", "pageerror"))]
        assert errors == [], errors
    finally:
        context.close()


def test_language_model_predicts_from_token_ids(browser, server_url, paste_site, snippets, pushed):
    """predict() on a token model sends integer ids (an Embedding refuses floats): nested arrays,
    an Int32Array, a BigInt64Array; a fractional id is refused by name before it reaches the model.
    On the lite engine a row shorter than the bundle's sequence is padded on the right; with the
    causal mask its logits are those Python gives for the row as it is."""
    context, page, recorder = open_pasted(browser, paste_site, server_url, "char-lm", snippets["char-lm"])
    vocab = len(pushed["chars"])
    try:
        out = page.evaluate("""async ([webgrad]) => {
            const element = document.querySelector('webgrad-model');
            const nested = await element.predict([[1, 2, 3, 4]]);
            const logits = Array.from(nested.outputs);
            const typed = await element.predict(Int32Array.of(5, 6, 7));
            const big = await element.predict(BigInt64Array.of(1n, 2n));
            let fractional = null;
            try { await element.predict([[1.5, 2]]); } catch (error) { fractional = error.message; }
            const {load} = await import(`${webgrad}/widget.js`);
            const model = await load(`${webgrad}/api/models/char-lm`, {trustCode: true});
            const direct = await model.predict([[0, 1], [2, 3]]);
            const written = await model.generate('', {length: 12, temperature: 0.5});
            model.dispose();
            return {nested: nested.shape, typed: typed.shape, big: big.shape, fractional, logits,
                    direct: direct.shape, written: written.text, info: model.info.input, engine: model.info.engine};
        }""", [server_url.rstrip("/")])
        assert out["nested"] == [1, 4, vocab] and out["typed"] == [1, 3, vocab] and out["big"] == [1, 2, vocab]
        assert out["direct"] == [2, 2, vocab]
        assert "takes token ids (int64): whole numbers, found 1.5" in out["fractional"]
        assert len(out["written"]) == 12 and set(out["written"]) <= set(pushed["chars"])
        assert out["info"] == {"kind": "tokens", "vocab": pushed["chars"], "vocab_size": vocab,
                               "context": pushed["context"]}
        import numpy as np

        import webgrad

        lm = pushed["lm"].eval()
        with webgrad.no_grad():
            expected = lm(webgrad.tensor([[1, 2, 3, 4]])).numpy().reshape(-1)
        assert out["engine"] == "lite"
        np.testing.assert_allclose(np.array(out["logits"]), expected, rtol=1e-4, atol=1e-4)
        check_engine(page, recorder, "char-lm")
    finally:
        context.close()


def test_models_panel_asks_before_loading_own_code_and_downloads_a_named_file(browser, server_url, pushed):
    context = browser.new_context(viewport={"width": 1280, "height": 900}, accept_downloads=True)
    page = context.new_page()
    recorder = Runtime(page)
    try:
        recorder.boot(server_url + "?device=cpu")
        row = page.locator("#models li", has=page.locator(".name", has_text=re.compile("^char-lm$")))
        with page.expect_download() as download:
            row.get_by_role("button", name="Download", exact=True).click()
        assert download.value.suggested_filename == "char-lm.safetensors"
        # Declined: nothing runs, and the panel says why.
        asked = []
        page.once("dialog", lambda dialog: (asked.append(dialog.message), dialog.dismiss()))
        row.get_by_role("button", name="Load", exact=True).click()
        page.locator("#models-status", has_text="not loaded: char-lm needs its own code (TinyGPT)").wait_for()
        assert "TinyGPT" in asked[0] and "trust" in asked[0]
        # Accepted: pulled with trust_code=True, so the model's own class is rebuilt.
        page.once("dialog", lambda dialog: dialog.accept())
        row.get_by_role("button", name="Load", exact=True).click()
        page.wait_for_function("() => /^(done|failed)/.test(document.getElementById('status').textContent)",
                               timeout=BOOT_TIMEOUT_MS)
        page.evaluate("() => window.webgradPlayground.output.flush()")
        assert "TinyGPT(" in page.inner_text("#output") and "ArchitectureError" not in page.inner_text("#output")
        # A model of built-in layers loads without asking.
        page.once("dialog", lambda dialog: (asked.append(dialog.message), dialog.dismiss()))
        page.locator("#models li", has=page.locator(".name", has_text=re.compile("^digits-mlp$"))) \
            .get_by_role("button", name="Load", exact=True).click()
        page.wait_for_function("() => document.getElementById('output').textContent.includes('Sequential(')",
                               timeout=BOOT_TIMEOUT_MS)
        assert len(asked) == 1
    finally:
        context.close()


def test_char_lm_demo_save_embed_snippet_pasted_writes_text(browser, server_url, paste_site):
    """The transformer demo's own Save -> Embed (the snippet a visitor copies from the demo page,
    trust-code included) pasted on another origin: the text box generates."""
    context = browser.new_context(viewport={"width": 1280, "height": 900})
    page = context.new_page()
    recorder = Runtime(page)
    try:
        page.goto(server_url + "demos/char_lm.html?device=cpu")
        page.wait_for_function("() => !document.getElementById('train').disabled", timeout=BOOT_TIMEOUT_MS)
        page.fill("#steps", "10")
        page.click("#train")
        page.wait_for_function("() => document.getElementById('status').textContent.startsWith('done')",
                               timeout=BOOT_TIMEOUT_MS)
        page.fill("#model-name", "char-lm-from-demo")
        page.wait_for_function("() => !document.getElementById('embed').disabled")
        page.click("#embed")
        page.wait_for_function("() => !document.getElementById('snippet').hidden", timeout=60_000)
        snippet = page.inner_text("#snippet")
        # Pushed from the page (Pyodide): the bundle was exported there too.
        engine = page.inner_text("#snippet-engine")
        assert re.fullmatch(r"lite bundle, \d+ KB — no Python in the page", engine), engine
        SHOTS.mkdir(parents=True, exist_ok=True)
        page.screenshot(path=str(SHOTS / "embed-char-lm-demo-snippet.png"), full_page=True)
        assert [line for line in recorder.console if line.startswith("pageerror")] == []
    finally:
        context.close()
    assert "trust-code" in snippet and "/api/models/char-lm-from-demo" in snippet
    import webgrad

    chars = set(webgrad.datasets.tiny_text())  # the demo's corpus is a part of it
    pasted, page, recorder = open_pasted(browser, paste_site, server_url, "char-lm-from-demo", snippet)
    try:
        use_text(page, "char-lm-from-demo", chars)
        check_engine(page, recorder, "char-lm-from-demo")
    finally:
        pasted.close()
