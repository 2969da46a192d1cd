"""The demo pages (/demos/) driven as a person would: open, train, stop, draw, sample.

Screenshots go to tests/browser/screenshots/ (gitignored): look at them after a run.
"""
from __future__ import annotations

import os
import re
import sys
import time
import uuid

import httpx
import pytest

from .conftest import BOOT_TIMEOUT_MS, REPO, Runtime

SHOTS = REPO / "tests" / "browser" / "screenshots"
sys.path.insert(0, str(REPO))  # `demos` is not installed
PAGES = ["digits", "classify_2d", "char_lm", "curve_fit"]
LEARNED_LOSS = 1.0  # char_lm: its training loss at the end of the page's default run (about 0.6 natively)
DEVICES = [d.strip() for d in os.environ.get("WEBGRAD_TEST_DEVICES", "cpu,webgpu").split(",") if d.strip()]


class DemoPage:
    """One demo page, its console recorded (errors and uncaught exceptions)."""

    def __init__(self, browser, url: str, width: int):
        self.context = browser.new_context(viewport={"width": width, "height": 900 if width > 500 else 844})
        self.page = self.context.new_page()
        self.recorder = Runtime(self.page)  # only for its console recording
        self.width = width
        self.page.goto(url)

    def wait_ready(self) -> None:
        """Wait for what the page promises once set up: Train enabled and the status "ready"."""
        try:
            self.page.wait_for_function("() => !document.getElementById('train').disabled "
                                        "&& document.getElementById('status').textContent === 'ready'",
                                        timeout=BOOT_TIMEOUT_MS)
        except Exception as err:
            raise AssertionError(f"the demo did not become ready: {err}\nstatus: {self.page.inner_text('#status')}"
                                 "\nconsole:\n" + "\n".join(self.recorder.console[-30:])) from err

    def wait_idle(self, timeout_ms: int = 300_000) -> str:
        """Wait until the page is idle again (Train enabled: no run, no job); return the status line."""
        self.page.wait_for_function("() => !document.getElementById('train').disabled", timeout=timeout_ms)
        return self.status()

    def status(self) -> str:
        return self.page.inner_text("#status")

    def wait_for(self, expression: str, arg=None, timeout_ms: int = 60_000):
        """page.wait_for_function, failing with what the page shows and its console."""
        try:
            return self.page.wait_for_function(expression, arg=arg, timeout=timeout_ms)
        except Exception as err:
            shown = self.page.evaluate("() => ['status', 'saved', 'snippet'].map((id) => "
                                       "`${id}: ${document.getElementById(id)?.textContent}`).join('\\n')")
            raise AssertionError(f"waited for {expression}: {err}\n{shown}\nconsole:\n"
                                 + "\n".join(self.recorder.console[-30:])) from err

    @property
    def errors(self) -> list[str]:
        return [line for line in self.recorder.console if line.startswith(("error", "pageerror"))]

    def shot(self, name: str) -> None:
        SHOTS.mkdir(parents=True, exist_ok=True)
        self.page.screenshot(path=str(SHOTS / f"demo-{name}-{self.width}.png"), full_page=True)

    def record_progress(self) -> None:
        self.page.evaluate("() => { window.seen = []; window.webgradDemo.runtime.on('progress', (e) => "
                           "window.seen.push(e)); }")

    def train(self, steps: int, timeout_ms: int = 300_000) -> str:
        """Click Train with ``steps`` and wait until the run ends; return the status line.

        The click disables Train in its own event task (the page's promise: it answers every
        click at once), so waiting for Train to be enabled again waits for this run's end."""
        assert self.page.is_enabled("#train"), f"Train is disabled (status: {self.status()})"
        self.page.fill("#steps", str(steps))
        self.page.click("#train")
        return self.wait_idle(timeout_ms)  # a swallowed click returns the old status at once

    def canvas_pixels(self, selector: str) -> list[int]:
        return self.page.evaluate("(s) => { const c = document.querySelector(s); "
                                  "return Array.from(c.getContext('2d').getImageData(0, 0, c.width, c.height).data); }",
                                  selector)

    def close(self) -> None:
        self.context.close()


@pytest.fixture
def demo_page(browser, server_url):
    pages = []

    def make(name: str, width: int = 1280, device: str = "cpu") -> DemoPage:
        page = DemoPage(browser, f"{server_url}demos/{name}.html?device={device}", width)
        pages.append(page)
        return page

    yield make
    for page in pages:
        page.close()


@pytest.mark.parametrize("width", [1280, 390])
def test_gallery_and_every_demo_open_without_console_errors(browser, server_url, demo_page, width):
    gallery = DemoPage(browser, server_url + "demos/", width)
    try:
        links = gallery.page.locator(".gallery a.card")
        assert sorted(links.nth(i).get_attribute("href") for i in range(links.count())) == sorted(
            f"/demos/{name}.html" for name in PAGES)
        assert gallery.page.evaluate("() => document.documentElement.scrollWidth") <= width
        gallery.shot("gallery")
        assert gallery.errors == []
    finally:
        gallery.close()
    for name in PAGES:
        page = demo_page(name, width)
        page.wait_ready()
        assert page.page.inner_text("#device") == "cpu"
        assert page.page.evaluate("() => document.documentElement.scrollWidth") <= width, name  # nothing sticks out
        page.shot(name)
        assert page.errors == [], name
        page.close()


# Pixels of a colour (within a small distance) in a canvas, and in its outer frame only.
COUNT_COLOUR = """([selector, colours, frame]) => {
  const canvas = document.querySelector(selector), w = canvas.width, h = canvas.height;
  const data = canvas.getContext('2d').getImageData(0, 0, w, h).data;
  let count = 0;
  for (let y = 0; y < h; y++) for (let x = 0; x < w; x++) {
    if (frame && x >= frame && x < w - frame && y >= frame && y < h - frame) continue;
    const i = 4 * (y * w + x);
    if (data[i + 3] > 200 && colours.some(([r, g, b]) =>
        Math.abs(data[i] - r) + Math.abs(data[i + 1] - g) + Math.abs(data[i + 2] - b) < 40)) count++;
  }
  return count;
}"""
ORANGE, BLUE = (217, 72, 15), (31, 111, 235)  # the demos' point colours


def colour_pixels(page, selector: str, colours, frame: int = 0) -> int:
    return page.page.evaluate(COUNT_COLOUR, [selector, [list(c) for c in colours], frame])


def at_first_ready(page, selector: str, colours) -> dict:
    """The status and the points painted at the moment Train first becomes enabled (one page task)."""
    handle = page.page.wait_for_function(
        "([selector, colours]) => document.getElementById('train').disabled ? false : "
        f"{{status: document.getElementById('status').textContent, points: ({COUNT_COLOUR})([selector, colours, 0])}}",
        arg=[selector, [list(c) for c in colours]], timeout=BOOT_TIMEOUT_MS)
    return handle.json_value()


def click_train_now(page, steps: int) -> str:
    """Click Train from the page's own script and read the status in the same task: what a
    person sees the moment they click."""
    page.page.fill("#steps", str(steps))
    return page.page.evaluate("() => { document.getElementById('train').click(); "
                              "return document.getElementById('status').textContent; }")


@pytest.mark.parametrize("device", DEVICES)
def test_2d_demo_ready_painted_train_runs_the_steps_asked_and_learns(demo_page, device):
    page = demo_page("classify_2d", device=device)
    # "ready" comes with the first boundary and the points painted (on webgpu the plane was blank).
    first = at_first_ready(page, "#plane", [ORANGE, BLUE])
    assert first["status"] == "ready" and first["points"] > 500, first
    assert colour_pixels(page, "#plane", [ORANGE, BLUE], frame=2) == 0  # no point cut by the edge
    # A click answers at once (the first step may take seconds to compile on webgpu).
    assert click_train_now(page, 3000).startswith("training… first step")
    page.page.wait_for_function("() => /step [1-9]/.test(document.getElementById('status').textContent)",
                                timeout=120_000)
    page.page.click("#stop")
    stopped = page.wait_idle(60_000)
    assert stopped.startswith("stopped at step ") and " of 3000" in stopped, stopped
    # Train after Stop runs the Steps asked, and says so (it used to end "done at step 414").
    assert page.train(50).startswith("done at step 50 of 50")
    # A changed control builds a new model; two runs, the second continues the first.
    page.page.select_option("#dataset", "circles")
    page.page.wait_for_function("() => document.getElementById('status').textContent === 'ready: a new model'"
                                " && !document.getElementById('train').disabled", timeout=60_000)
    assert page.train(20) == "done at step 20 of 20"
    before = page.canvas_pixels("#plane")
    page.record_progress()
    assert page.train(100) == "done at step 100 of 100 (120 steps in all)"
    losses = page.page.evaluate("() => window.seen.map((e) => e.loss)")
    assert len(losses) == 10 and losses[-1] < 0.7 * losses[0], losses
    after = page.canvas_pixels("#plane")
    changed = sum(1 for a, b in zip(before, after) if abs(a - b) > 8)
    assert changed > len(after) // 20, f"only {changed} of {len(after)} channel values changed"
    assert page.page.evaluate("() => window.seen.at(-1).accuracy") > 0.85
    assert colour_pixels(page, "#plane", [ORANGE, BLUE], frame=2) == 0
    page.shot(f"classify_2d-trained-{device}")
    assert page.errors == []


def draw_stroke(page, points) -> None:
    box = page.page.locator("#pad").bounding_box()
    x0, y0 = points[0]
    page.page.mouse.move(box["x"] + x0, box["y"] + y0)
    page.page.mouse.down()
    for x, y in points[1:]:
        page.page.mouse.move(box["x"] + x, box["y"] + y, steps=4)
    page.page.mouse.up()


# Records every message the page sends its runtime's worker in window.sent.
RECORD_MESSAGES = """() => {
    window.sent = [];
    const post = Worker.prototype.postMessage;
    Worker.prototype.postMessage = function (message, transfer) {
        if (message.type === "run" || message.type === "call") {
            const first = message.args?.[0];
            window.sent.push({type: message.type, module: message.module ?? null, fn: message.function ?? null,
                              code: message.code ?? null, values: first?.constructor?.name ?? null,
                              length: first?.length ?? null, moved: (transfer || []).length});
        }
        return post.call(this, message, transfer);
    };
}"""


@pytest.mark.parametrize("device", DEVICES)
def test_digits_demo_train_then_draw_a_prediction_appears(demo_page, device):
    page = demo_page("digits", device=device)
    page.wait_ready()
    page.page.evaluate(RECORD_MESSAGES)
    assert page.train(80).startswith("done at step 80")
    accuracy = page.page.evaluate("() => window.webgradDemo.runtime.run('digits.current.accuracy')")["result"]
    assert accuracy > 0.8
    draw_stroke(page, [(112, 30), (112, 110), (112, 190)])  # a vertical bar: a one
    page.page.wait_for_function("() => document.getElementById('prediction').textContent !== ''", timeout=60_000)
    # The page names the module's functions and sends data: the pixels go as a Float32Array
    # (its buffer transferred), and no Python source was sent but the test's own accuracy read.
    sent = page.page.evaluate("() => window.sent")
    assert [m["fn"] for m in sent[:2]] == ["start", "train"] and all(m["module"] == "digits" for m in sent[:2])
    predictions = [m for m in sent if m["fn"] == "predict"]
    assert predictions and all(m == {"type": "call", "module": "digits", "fn": "predict", "code": None,
                                     "values": "Float32Array", "length": 64, "moved": 1} for m in predictions), sent
    assert [m["code"] for m in sent if m["type"] == "run"] == ["digits.current.accuracy"], sent
    # Read both in one task: a stroke classifies as it grows, and a later classification may
    # land between two separate reads (seen under CI load: the text of one, the bars of the next).
    shown, best = page.page.evaluate("""() => [document.getElementById('prediction').innerText,
        [...document.querySelectorAll('#bars .bar-row.best .bar-label')].map((label) => label.innerText)]""")
    assert best == [shown]
    assert page.canvas_pixels("#preview")[4 * 27] > 40  # the 8x8 preview has ink in the middle
    page.shot(f"digits-drawn-{device}")
    # Stop mid-way: the page says where it stopped and the model trained so far still predicts.
    page.page.fill("#steps", "3000")
    page.page.click("#train")
    page.page.wait_for_function("() => /step [1-9]/.test(document.getElementById('status').textContent)",
                                timeout=120_000)
    page.page.click("#stop")
    page.wait_for("() => document.getElementById('stop').disabled")
    status = page.status()
    assert status.startswith("stopped"), f"{status}\nconsole:\n" + "\n".join(page.recorder.console[-30:])
    assert page.errors == []


def corpus_words() -> set[str]:
    import webgrad

    return set(re.findall(r"[a-z]+", webgrad.datasets.tiny_text().lower()))


def test_transformer_demo_writes_corpus_words_within_its_default_steps(demo_page):
    page = demo_page("char_lm")
    page.wait_ready()
    steps = int(page.page.input_value("#steps"))  # the budget a visitor gets by pressing Train
    page.record_progress()
    started = time.monotonic()
    assert page.train(steps, timeout_ms=900_000) == f"done at step {steps} of {steps}"
    print(f"char_lm: {steps} steps in the page: {time.monotonic() - started:.0f} s")  # with -s; never asserted
    events = page.page.evaluate("() => window.seen")
    losses = [e["loss"] for e in events]
    assert losses[-1] < LEARNED_LOSS, losses
    samples = [e["sample"] for e in events if "sample" in e]
    assert len(samples) >= 3  # it writes as it trains
    shown = page.page.inner_text("#sample-text")
    assert shown.startswith(f"step {steps}:") and samples[-1].strip()[:20] in shown
    page.page.click("#sample")
    page.page.wait_for_function("() => document.getElementById('sample-text').textContent.startsWith('sample:')",
                                timeout=60_000)
    # Mostly the sonnets' own words now (gibberish at loss 2.4 scores about 0.2-0.35 here).
    written = page.page.evaluate("() => document.querySelector('#sample-text > div').textContent")
    text = samples[-1] + " " + written.removeprefix("sample:")
    words = [w for w in re.findall(r"[a-z]+", text.lower()) if len(w) >= 3]
    known = [w for w in words if w in corpus_words()]
    assert len(words) >= 20 and len(known) >= 0.5 * len(words), text
    page.shot("char_lm-trained")
    page.page.click("#reset")
    page.page.wait_for_function("() => document.getElementById('status').textContent === 'ready: a new model'",
                                timeout=60_000)
    assert page.page.inner_text("#sample-text") == "" and page.page.is_disabled("#sample")
    assert page.errors == []


SAVED_STARTS = "(prefix) => document.getElementById('saved').textContent.startsWith(prefix)"


def test_curve_fit_ready_click_refits_reset_save_asks_embed(demo_page, server_url):
    page = demo_page("curve_fit")
    # The points are drawn before Train is enabled (a Train click used to land before the page had
    # its points, and vanish), whole at the plot's edges.
    first = at_first_ready(page, "#plot", [ORANGE])
    assert first["status"] == "ready" and first["points"] > 200, first
    assert colour_pixels(page, "#plot", [ORANGE], frame=2) == 0
    assert page.train(200) == "done at step 200 of 200"
    before = page.canvas_pixels("#plot")
    # A click while idle adds the point and refits at once.
    box = page.page.locator("#plot").bounding_box()
    page.page.mouse.click(box["x"] + box["width"] * 0.5, box["y"] + box["height"] * 0.05)  # about (0, 0.9)
    assert page.wait_idle() == "done at step 150 of 150 (350 steps in all)"
    after = page.canvas_pixels("#plot")
    assert sum(1 for a, b in zip(before, after) if a != b) > 1000  # the new point and the bent curve
    page.shot("curve_fit-refit")
    # Reset points: a new model, and a status that says so (it kept "done at step 1000").
    page.page.click("#reset")
    page.wait_for("() => document.getElementById('status').textContent === 'ready: the default points and a new model'")
    assert page.page.is_disabled("#save")
    assert page.train(100) == "done at step 100 of 100"
    # Save over a model someone else stored under that name: asked first, with its revision.
    import webgrad
    from demos import curve_fit

    name = f"curve-fit-{uuid.uuid4().hex[:8]}"
    webgrad.store.push(curve_fit.make_model(), f"{server_url}api/models/{name}", {"by": "another page"})
    page.page.fill("#model-name", name)
    asked = []
    page.page.once("dialog", lambda dialog: (asked.append(dialog.message), dialog.dismiss()))
    page.page.click("#save")
    page.wait_for(SAVED_STARTS, "not saved")
    assert len(asked) == 1 and re.search(r"replace revision 1 saved \d{4}-\d\d-\d\d \d\d:\d\d UTC\?$", asked[0]), asked
    assert httpx.get(f"{server_url}api/models/{name}").json()["metadata"]["by"] == "another page"
    page.page.once("dialog", lambda dialog: (asked.append(dialog.message), dialog.accept()))
    page.page.click("#save")
    page.wait_for(SAVED_STARTS, "saved as")
    assert page.page.inner_text("#saved").startswith(f"saved as {name}, revision 2")
    # Embed: the snippet the widget module writes for this record.
    page.page.click("#embed")
    page.wait_for("() => !document.getElementById('snippet').hidden")
    snippet = page.page.inner_text("#snippet")
    assert f'<webgrad-model src="{server_url}api/models/{name}"' in snippet and "input=" not in snippet
    assert len(asked) == 2  # the page saved this name itself: no second question
    page.shot("curve_fit-trained")
    # A new worker (what a Stop that Python does not obey leads to): the page loads the demo again.
    page.page.evaluate("() => window.webgradDemo.runtime.restart()")
    page.page.wait_for_function("() => document.getElementById('status').textContent.endsWith("
                                "'(Python restarted: the model starts over)')", timeout=BOOT_TIMEOUT_MS)
    assert page.train(50) == "done at step 50 of 50"
    assert page.errors == []
