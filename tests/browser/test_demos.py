"""The demo pages (/demos/) driven as a person would: open, train, stop, draw, sample.

Screenshots go to tests/browser/screenshots/ (gitignored): look at them after a run.
"""
from __future__ import annotations

import os

import pytest

from .conftest import BOOT_TIMEOUT_MS, REPO, Runtime

SHOTS = REPO / "tests" / "browser" / "screenshots"
PAGES = ["digits", "classify_2d", "char_lm", "curve_fit"]
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
        try:
            self.page.wait_for_function("() => !document.getElementById('train').disabled", timeout=BOOT_TIMEOUT_MS)
        except Exception as err:
            raise AssertionError(f"the demo did not become ready: {err}\nstatus: {self.page.inner_text('#status')}"
                                 "\nconsole:\n" + "\n".join(self.recorder.console[-30:])) from err

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
        """Click Train with ``steps`` and wait until the run ends; return the status line."""
        runs = self.page.evaluate("() => window.webgradDemo.runs")
        self.page.fill("#steps", str(steps))
        self.page.click("#train")
        self.page.wait_for_function("(runs) => window.webgradDemo.runs > runs", arg=runs, timeout=timeout_ms)
        return self.page.inner_text("#status")

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


@pytest.mark.parametrize("device", DEVICES)
def test_2d_demo_loss_falls_and_boundary_changes(demo_page, device):
    page = demo_page("classify_2d", device=device)
    page.wait_ready()
    page.page.wait_for_function("() => window.webgradDemo.fresh === true")  # the untrained model painted
    page.page.select_option("#dataset", "circles")
    page.page.wait_for_timeout(300)
    page.train(20)  # the dataset change rebuilt the model; paint its first boundary
    before = page.canvas_pixels("#plane")
    page.record_progress()
    assert page.train(100).startswith("done at step 120")
    losses = page.page.evaluate("() => window.seen.map((e) => e.loss)")
    assert len(losses) == 10 and losses[-1] < 0.7 * losses[0], losses
    after = page.canvas_pixels("#plane")
    changed = sum(1 for a, b in zip(before, after) if abs(a - b) > 8)
    assert changed > len(after) // 20, f"only {changed} of {len(after)} channel values changed"
    assert page.page.evaluate("() => window.seen.at(-1).accuracy") > 0.85
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


@pytest.mark.parametrize("device", DEVICES)
def test_digits_demo_train_then_draw_a_prediction_appears(demo_page, device):
    page = demo_page("digits", device=device)
    page.wait_ready()
    assert page.train(80).startswith("done at step 80")
    accuracy = page.page.evaluate("() => window.webgradDemo.runtime.run('digits_demo.accuracy')")["result"]
    assert accuracy > 0.8
    draw_stroke(page, [(112, 30), (112, 110), (112, 190)])  # a vertical bar: a one
    page.page.wait_for_function("() => document.getElementById('prediction').textContent !== ''", timeout=60_000)
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
    page.page.wait_for_function("() => document.getElementById('stop').disabled", timeout=60_000)
    assert page.page.inner_text("#status").startswith("stopped")
    assert page.errors == []


def test_transformer_demo_samples_text_after_training(demo_page):
    page = demo_page("char_lm")
    page.wait_ready()
    assert page.train(50).startswith("done at step 50")
    text = page.page.inner_text("#sample-text")
    assert text.startswith("step 50:") and len(text) > 60
    page.page.click("#sample")
    page.page.wait_for_function("() => document.getElementById('sample-text').textContent.startsWith('sample:')",
                                timeout=60_000)
    page.shot("char_lm-trained")
    assert page.errors == []


def test_curve_fit_click_adds_a_point_and_save_embed(demo_page, server_url):
    page = demo_page("curve_fit")
    page.wait_ready()
    page.page.wait_for_function("() => window.webgradDemo.fresh === true")
    assert page.train(200).startswith("done at step 200")
    before = page.canvas_pixels("#plot")
    box = page.page.locator("#plot").bounding_box()
    page.page.mouse.click(box["x"] + box["width"] * 0.5, box["y"] + box["height"] * 0.05)  # (0, 0.9): far off
    assert page.train(200).startswith("done at step 400")
    after = page.canvas_pixels("#plot")
    assert sum(1 for a, b in zip(before, after) if a != b) > 1000  # the new point and the bent curve
    page.page.fill("#model-name", "curve-fit-test")
    page.page.click("#embed")
    page.page.wait_for_function("() => !document.getElementById('snippet').hidden", timeout=60_000)
    assert f'src="{server_url}api/models/curve-fit-test"' in page.page.inner_text("#snippet")
    page.shot("curve_fit-trained")
    assert page.errors == []
