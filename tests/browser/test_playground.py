"""The playground page (/) driven as a person would: keyboard, menus, buttons, reloads.

Screenshots go to tests/browser/screenshots/ (gitignored): look at them after a run.
"""
from __future__ import annotations

import contextlib
import re
import urllib.error
import urllib.request

import pytest

from .conftest import BOOT_TIMEOUT_MS, REPO, Runtime

SHOTS = REPO / "tests" / "browser" / "screenshots"
EXAMPLES = REPO / "web" / "playground" / "examples"
RED = "rgb(180, 35, 24)"  # .error / .failed in playground.css


class Page:
    """A playground page with every console error and uncaught exception recorded."""

    def __init__(self, browser, url: str, width: int = 1280):
        self.context = browser.new_context(viewport={"width": width, "height": 900 if width > 500 else 844})
        self.page = self.context.new_page()
        self.runtime = Runtime(self.page)
        self.width = width
        self.open(url)

    def open(self, url: str) -> None:
        self.runtime.boot(url)

    @property
    def errors(self) -> list[str]:
        return [line for line in self.runtime.console if line.startswith(("error", "pageerror"))]

    def shot(self, name: str) -> None:
        SHOTS.mkdir(parents=True, exist_ok=True)
        self.page.screenshot(path=str(SHOTS / f"{name}-{self.width}.png"), full_page=True)

    def editor_text(self) -> str:
        return self.page.evaluate("() => window.webgradPlayground.editor.text")

    def type_code(self, code: str) -> None:
        """Replace the editor's code through the keyboard (pasted, so no auto-indent is added)."""
        self.page.click(".cm-content")
        self.page.keyboard.press("Control+A")
        self.page.keyboard.press("Delete")
        self.page.keyboard.insert_text(code)

    def wait_idle(self, timeout_ms: int = 120_000) -> str:
        """Wait until no run is in progress; return the status line."""
        self.page.wait_for_function("() => document.getElementById('stop').disabled", timeout=timeout_ms)
        return self.page.inner_text("#status")

    def output(self) -> str:
        self.page.evaluate("() => window.webgradPlayground.output.flush()")
        return self.page.inner_text("#output")

    def close(self) -> None:
        self.context.close()


@pytest.fixture
def playground(browser, server_url):
    pages = []

    def make(query: str = "?device=cpu", width: int = 1280) -> Page:
        page = Page(browser, server_url + query, width)
        pages.append(page)
        return page

    yield make
    for page in pages:
        page.close()


@pytest.mark.parametrize("width", [1280, 390])
def test_pages_open_without_console_errors(playground, server_url, width):
    page = playground("?device=cpu", width)
    assert page.page.inner_text("#device") == "cpu"
    nav = page.page.locator("header nav a")
    assert [nav.nth(i).get_attribute("href") for i in range(nav.count())] == ["/", "/demos/", "/bench.html"]
    # Nothing sticks out sideways, at 390 px neither.
    assert page.page.evaluate("() => document.documentElement.scrollWidth") <= width
    page.shot("playground")
    page.page.goto(server_url + "bench.html")
    page.page.wait_for_selector("#go")
    assert page.page.evaluate("() => document.documentElement.scrollWidth") <= width
    page.shot("bench")
    assert page.errors == []


def test_keyboard_tab_indents_and_ctrl_enter_runs(playground):
    page = playground()
    page.type_code("x = 6")
    page.page.keyboard.press("Home")
    page.page.keyboard.press("Tab")
    assert page.editor_text() == "    x = 6"
    page.page.keyboard.press("Shift+Tab")
    page.page.keyboard.press("End")
    page.page.keyboard.press("Enter")
    page.page.keyboard.type("print('typed', x * 7)")
    page.page.keyboard.press("Control+Enter")
    assert page.wait_idle().startswith("done")
    assert "typed 42" in page.output()
    assert page.errors == []


def test_digits_mlp_chart_stop_push_reload_pull(playground):
    page = playground()
    p = page.page
    # The example, chosen from the menu, runs; stop it once the chart has points.
    p.select_option("#examples", "digits_mlp")
    p.wait_for_function("() => window.webgradPlayground.editor.text.includes('Digits MLP')")
    assert page.editor_text() == (EXAMPLES / "digits_mlp.py").read_text()
    p.click("#run")
    p.wait_for_function("() => window.webgradPlayground.charts.points >= 3", timeout=60_000)
    p.click("#stop")
    status = page.wait_idle()
    assert re.fullmatch(r"stopped at step \d+", status), status
    assert p.eval_on_selector("#status", "e => getComputedStyle(e).color") != RED
    assert "KeyboardInterrupt" not in page.output() and re.search(r"stopped at step \d+", page.output())
    assert page.errors == []
    # Run to the end: the chart keeps every point, the summary is a table, the model is pushed.
    p.click("#clear")
    p.click("#run")
    assert page.wait_idle().startswith("done")
    points = p.evaluate("() => window.webgradPlayground.charts.points")
    assert points >= 92 + 20  # loss every 5 of 460 steps, accuracy per epoch
    assert p.locator(".chart").count() == 2
    assert "pushed to the store as digits-mlp" in page.output()
    assert p.locator("#output .result.rich table").count() == 1
    page.shot("playground-digits")
    with p.expect_download() as download:
        p.click("#csv")
    csv = open(download.value.path()).read().splitlines()
    assert csv[0].split(",")[:3] == ["step", "total", "loss"] and len(csv) == 1 + 92 + 20
    predicted = page.runtime.ok("model(x_test[:20]).argmax(dim=1).tolist()")["result"]
    # Reload: the code is still there; the Models panel pulls the model back.
    page.open(p.url)
    assert page.editor_text() == (EXAMPLES / "digits_mlp.py").read_text()
    row = p.locator("#models li", has_text="digits-mlp")
    row.get_by_role("button", name="Load", exact=True).click()
    page.wait_idle()
    assert "Sequential(" in page.output()
    again = page.runtime.ok("x_test, y_test = webgrad.datasets.digits(split='test')\n"
                            "model(x_test[:20]).argmax(dim=1).tolist()")["result"]
    assert again == predicted
    row.get_by_role("button", name="Embed", exact=True).click()
    snippet = p.inner_text("#embed pre")
    assert snippet == (f'<script type="module" src="{p.url.split("/?")[0]}/widget.js"></script>\n'
                       f'<webgrad-model src="{p.url.split("/?")[0]}/api/models/digits-mlp"></webgrad-model>')
    # Pushed from the page, with its web bundle exported there: the widget will run it without Python.
    engine = p.inner_text("#embed .engine")
    assert re.fullmatch(r"lite bundle, \d+ KB — no Python in the page", engine), engine
    assert page.errors == []


def test_traceback_marks_the_line_and_input_prompts(playground):
    page = playground()
    p = page.page
    page.type_code("import webgrad\n\ndef bad(x):\n    return x @ webgrad.ones(5, 2)\n\nbad(webgrad.ones(3, 4))\n")
    p.keyboard.press("Control+Enter")
    assert page.wait_idle().startswith("failed")
    shown = page.output()
    assert 'File "<playground>", line 6, in <module>' in shown
    assert 'File "<playground>", line 4, in bad' in shown and "return x @ webgrad.ones(5, 2)" in shown
    assert "/webgrad/" in shown  # webgrad's own frames stay
    assert "_pyodide" not in shown and "/pyodide/" not in shown
    assert p.inner_text(".cm-error-line") == "    return x @ webgrad.ones(5, 2)"  # the deepest line of the cell
    assert p.eval_on_selector("#status", "e => getComputedStyle(e).color") == RED
    page.shot("playground-error")
    # input() asks through the page's prompt box (SharedArrayBuffer: the page is isolated).
    p.once("dialog", lambda dialog: dialog.accept("Ada"))
    page.type_code("name = input('name? ')\nf'hello {name}'")
    p.keyboard.press("Control+Enter")
    assert page.wait_idle().startswith("done")
    assert "name? Ada" in page.output() and "'hello Ada'" in page.output()
    # A cancelled prompt is an EOFError, as at the end of a terminal's input.
    p.once("dialog", lambda dialog: dialog.dismiss())
    p.keyboard.press("Control+Enter")
    page.wait_idle()
    assert "EOFError" in page.output() and "cancelled" in page.output()
    assert page.errors == []


def test_files_panel_downloads_and_uploads(playground):
    page = playground()
    p = page.page
    page.type_code("import webgrad\nwebgrad.save({'w': webgrad.ones(2)}, 'weights.pt')\n"
                   "open('notes.txt', 'w').write('written by Python')")
    p.keyboard.press("Control+Enter")
    page.wait_idle()
    row = p.locator("#files li", has_text="notes.txt")
    row.wait_for()
    assert p.locator("#files li", has_text="weights.pt").count() == 1
    with p.expect_download() as download:
        row.get_by_role("button", name="Download").click()
    assert open(download.value.path()).read() == "written by Python"
    p.set_input_files("#file-picker", files=[{"name": "data.csv", "mimeType": "text/csv", "buffer": b"a,b\n1,2\n"}])
    p.locator("#files li", has_text="data.csv").wait_for()
    assert page.runtime.ok("open('data.csv').read()")["result"] == "a,b\n1,2\n"
    assert page.errors == []


def test_share_link_restores_the_code(playground, browser):
    page = playground()
    code = "# shared\nprint('a link with code in it: é ∑')\n" * 3
    page.type_code(code)
    page.page.click("#share")
    page.page.wait_for_function("() => document.getElementById('share-link').value !== ''")
    link = page.page.input_value("#share-link")
    assert "#code/" in link
    other = Page(browser, link)
    try:
        assert other.editor_text() == code
        assert "#code/" not in other.page.url  # a reload then keeps later edits (localStorage)
    finally:
        other.close()


def test_bad_device_falls_back_to_auto_with_a_warning(playground):
    page = playground("?device=gpu")
    warning = page.page.locator("#warning")
    assert warning.is_visible() and "?device=gpu" in warning.inner_text() and "auto" in warning.inner_text()
    assert page.page.input_value("#device-picker") == "auto"
    assert page.runtime.info()["device"] in ("cpu", "webgpu")
    assert page.runtime.ok("1 + 1")["display"] == {"text/plain": "2"}
    assert page.errors == []


def test_device_picker_reboots_and_restart_clears_state(playground):
    page = playground()
    p = page.page
    page.runtime.ok("kept = 1")
    p.select_option("#device-picker", "webgpu")
    p.wait_for_function("() => window.webgradRuntime && window.webgradRuntime.requestedDevice === 'webgpu'",
                        timeout=BOOT_TIMEOUT_MS)
    assert "device=webgpu" in p.url
    assert page.runtime.run("kept")["error"]["pythonType"] == "NameError"
    page.runtime.ok("kept = 2")
    p.click("#restart")
    p.wait_for_function("() => !document.getElementById('restart').disabled", timeout=BOOT_TIMEOUT_MS)
    assert page.runtime.run("kept")["error"]["pythonType"] == "NameError"
    assert "restarted" in page.output()
    assert page.errors == []


def test_output_stays_bounded_and_charts_take_100k_points(playground):
    page = playground()
    p = page.page
    page.type_code("for i in range(3000):\n    print('line', i)\n"
                   "for i in range(100_000):\n    webgrad_progress({'step': i, 'loss': 1 / (i + 1), 'lr': 0.01})\n")
    p.keyboard.press("Control+Enter")
    assert page.wait_idle(timeout_ms=300_000).startswith("done")
    box = p.eval_on_selector("#output", "e => ({client: e.clientHeight, scroll: e.scrollHeight, top: e.scrollTop})")
    assert box["client"] < 600 < box["scroll"]  # a scroll box, not a 55,000 px page
    assert box["top"] + box["client"] >= box["scroll"] - 2  # it followed the output to the end
    assert "line 2999" in page.output()
    p.wait_for_function("() => document.querySelector('.chart[data-field=loss] figcaption').textContent"
                        ".startsWith('loss: 1.000e-5')")
    assert p.evaluate("() => window.webgradPlayground.charts.points") == 200_000  # loss and lr
    assert p.locator(".chart").count() == 2
    page.shot("playground-100k")
    assert page.errors == []


@pytest.mark.parametrize("name", ["regression", "digits_mlp", "store_predict"])
def test_examples_run_in_the_page_on_webgpu(webgpu_runtime, name):
    """The same files as the menu's, on the browser's WebGPU (the cpu runs are above and native)."""
    out = webgpu_runtime.ok((EXAMPLES / f"{name}.py").read_text(), timeout_s=600)
    assert out["display"]["text/plain"]
    if name != "store_predict":
        assert "on webgpu" in out["stdout"]
    if name in ("digits_mlp", "store_predict"):
        accuracy = float(re.search(r"test accuracy ([0-9.]+)", out["stdout"]).group(1))
        assert accuracy > 0.9, out["stdout"]


def test_models_panel_download_and_delete_and_drop_upload(playground, server_url):
    page = playground()
    p = page.page
    page.runtime.ok("import webgrad\nfrom webgrad import nn\nwebgrad.store.push(nn.Linear(2, 1), 'panel-test')")
    p.click("#models-refresh")
    row = p.locator("#models li", has_text="panel-test")
    row.wait_for()
    with p.expect_download() as download:
        row.get_by_role("button", name="Download", exact=True).click()
    weights = open(download.value.path(), "rb").read()
    header = int.from_bytes(weights[:8], "little")
    assert b'"weight"' in weights[8:8 + header] and b'"bias"' in weights[8:8 + header]
    p.once("dialog", lambda dialog: dialog.accept())
    row.get_by_role("button", name="Delete", exact=True).click()
    p.wait_for_function("() => !document.getElementById('models').textContent.includes('panel-test')")
    assert "deleted panel-test" in p.inner_text("#models-status")
    with pytest.raises(urllib.error.HTTPError) as gone:
        urllib.request.urlopen(server_url + "api/models/panel-test", timeout=10)
    assert gone.value.code == 404
    # A file dropped on the Files panel lands in Python's working directory.
    p.evaluate("""() => {
        const data = new DataTransfer();
        data.items.add(new File(["dropped text"], "dropped.txt", {type: "text/plain"}));
        document.getElementById("drop").dispatchEvent(new DragEvent("drop", {dataTransfer: data, bubbles: true,
                                                                             cancelable: true}));
    }""")
    p.locator("#files li", has_text="dropped.txt").wait_for()
    assert page.runtime.ok("open('dropped.txt').read()")["result"] == "dropped text"
    assert page.errors == []


def _sha256_in_page(page: Page, path: str) -> str:
    return page.runtime.ok(f"import hashlib\nhashlib.sha256(open({path!r}, 'rb').read()).hexdigest()")["result"]


def test_files_survive_restart_device_switch_and_reload(playground):
    """The working folder is kept in the browser's storage: an upload (the Files panel's picker)
    and a file the code wrote are still listed and read the same bytes after Restart, a device
    switch and a reload; what is lost is the variables."""
    import hashlib
    import random

    page = playground()
    p = page.page
    upload = random.Random(19).randbytes(3 << 20)  # binary, a few MB: every byte must survive
    p.set_input_files("#file-picker", files=[{"name": "upload.bin", "mimeType": "application/octet-stream",
                                              "buffer": upload}])
    p.locator("#files li", has_text="upload.bin").wait_for()
    page.type_code("import os\nos.makedirs('out', exist_ok=True)\nopen('out/written.txt', 'w').write('by the code')\n"
                   "kept = 1")
    p.keyboard.press("Control+Enter")
    assert page.wait_idle().startswith("done")
    assert "files are kept" in p.get_attribute("#restart", "title")
    assert "files are kept" in p.get_attribute("#device-picker", "title")
    expected = hashlib.sha256(upload).hexdigest()

    def still_there(when: str) -> None:
        p.click("#files-refresh")
        for name in ("upload.bin", "out/written.txt"):
            p.locator("#files li", has_text=name).wait_for()
        assert _sha256_in_page(page, "upload.bin") == expected, when
        assert page.runtime.ok("open('out/written.txt').read()")["result"] == "by the code", when
        assert page.runtime.run("kept")["error"]["pythonType"] == "NameError", when  # variables are not kept

    p.click("#restart")
    p.wait_for_function("() => !document.getElementById('restart').disabled", timeout=BOOT_TIMEOUT_MS)
    still_there("after Restart")
    p.select_option("#device-picker", "webgpu")
    p.wait_for_function("() => window.webgradRuntime && window.webgradRuntime.requestedDevice === 'webgpu'",
                        timeout=BOOT_TIMEOUT_MS)
    still_there("after the device switch")
    page.runtime.ok("import os\nos.remove('out/written.txt')")  # a deletion is kept too
    page.open(p.url)
    p.locator("#files li", has_text="upload.bin").wait_for()
    assert _sha256_in_page(page, "upload.bin") == expected
    assert p.locator("#files li", has_text="written.txt").count() == 0
    page.shot("files-kept")
    assert page.errors == []


def test_switching_device_during_a_run_says_so_calmly(playground):
    page = playground()
    p = page.page
    page.type_code("import time\nfor step in range(10**6):\n    webgrad_progress({'step': step})\n"
                   "    time.sleep(0.05)\n")
    p.keyboard.press("Control+Enter")
    p.wait_for_function("() => document.getElementById('status').textContent.startsWith('step')")
    p.select_option("#device-picker", "webgpu")
    status = page.wait_idle()
    assert status.startswith("stopped at step ") and status.endswith("the device changed to webgpu"), status
    assert "failed" not in p.get_attribute("#status", "class")
    assert "terminated" not in page.output() and p.locator("#output .error").count() == 0
    assert "the device changed to webgpu" in p.inner_text("#output .stopped")
    p.wait_for_function("() => window.webgradRuntime && window.webgradRuntime.requestedDevice === 'webgpu'",
                        timeout=BOOT_TIMEOUT_MS)
    page.shot("device-switch-during-run")
    assert page.errors == []


def test_status_names_the_error_class_without_its_module_and_summary_displays_once(playground):
    page = playground()
    p = page.page
    page.type_code("import webgrad\nwebgrad.ones(2, 3) @ webgrad.ones(4, 1)\n")
    p.keyboard.press("Control+Enter")
    status = page.wait_idle()
    assert status == "failed: OpError: matmul: (2, 3) @ (4, 1): inner dimensions differ (3 != 4)", status
    assert "webgrad.ops.registry.OpError: matmul" in page.output()  # the traceback keeps the full name
    # webgrad.summary as a cell's last expression: the rich table, not a printed copy as well.
    page.type_code("import webgrad\nfrom webgrad import nn\n"
                   "model = nn.Sequential(nn.Linear(64, 32), nn.ReLU(), nn.Linear(32, 10))\n"
                   "webgrad.summary(model, input_size=(1, 64))")
    p.keyboard.press("Control+Enter")
    assert page.wait_idle().startswith("done")
    assert p.locator("#output table.webgrad-summary").count() == 1
    assert page.output().count("Total params") == 1  # the table's own row; no text table printed
    # Called from a script's code (as `python -m webgrad.browser run train.py` runs it), it prints.
    script = "webgrad.summary(model, input_size=(1, 64))\n"
    out = page.runtime.ok(f"exec(compile({script!r}, 'train.py', 'exec'))")
    assert out["stdout"].count("Total params: 2,410") == 1, out["stdout"]
    page.shot("summary")
    assert page.errors == []


def test_wide_output_scrolls_instead_of_wrapping_and_the_editor_keeps_long_lines(playground):
    """A tensor's repr keeps torch's 80-column rows: the output pane scrolls sideways rather than
    wrapping them mid-row; a long comment in the editor wraps instead of being cut off."""
    page = playground()
    p = page.page
    page.type_code("import webgrad\nprint(webgrad.arange(40.0).reshape(2, 20) * 1000.5)\n")
    p.keyboard.press("Control+Enter")
    assert page.wait_idle().startswith("done")
    page.output()
    lines = p.evaluate("""() => {
        const span = [...document.querySelectorAll('#output span')].find((s) => s.textContent.includes('tensor('));
        const range = document.createRange();
        range.selectNodeContents(span);
        const tops = new Set([...range.getClientRects()].map((r) => Math.round(r.top)));
        return {text: span.textContent.trimEnd().split('\\n').length, boxes: tops.size};
    }""")
    assert lines["text"] > 1 and lines["boxes"] == lines["text"], lines  # one box per line: nothing wrapped
    box = p.eval_on_selector("#output", "e => ({client: e.clientWidth, scroll: e.scrollWidth})")
    assert box["scroll"] > box["client"]  # the 80-column rows scroll sideways in this narrower pane
    comment = "# " + "a long comment that goes on " * 8 + "THE-END"
    page.type_code(comment + "\nx = 1\n")
    visible = p.evaluate("""() => {
        const line = document.querySelector('.cm-line');
        const end = line.getBoundingClientRect().right;
        const scroller = document.querySelector('.cm-scroller').getBoundingClientRect();
        return {end, right: scroller.right, height: line.getBoundingClientRect().height,
                lineHeight: document.querySelector('.cm-line:nth-child(2)').getBoundingClientRect().height};
    }""")
    assert visible["end"] <= visible["right"] + 1 and visible["height"] > visible["lineHeight"], visible
    page.shot("wide-output")
    assert page.errors == []


@contextlib.contextmanager
def _bench_page(browser, server_url):
    """bench.html loaded in a 1280x900 page: (the page, the page errors seen so far)."""
    context = browser.new_context(viewport={"width": 1280, "height": 900})
    try:
        p = context.new_page()
        errors: list[str] = []
        p.on("pageerror", lambda error: errors.append(str(error)))
        p.goto(server_url + "bench.html")
        p.wait_for_selector("body[data-ready=true]")
        yield p, errors
    finally:
        context.close()


def _results(p) -> dict:
    """The results table as a person reads it: runner -> (ms, ÷ TF.js, ÷ jax-js)."""
    return {row[1]: row[2:5] for row in p.evaluate("""() => [...document.querySelectorAll('#results tbody tr')]
        .map((tr) => [...tr.querySelectorAll('td')].map((td) => td.textContent))""")}


def test_bench_page_runs_one_task_with_a_line_per_run_and_ratios(browser, server_url):
    """bench.html: one task picked from the menu, a progress line per run (webgrad's runners, TF.js's
    and jax-js's backends), webgrad ÷ TF.js and webgrad ÷ jax-js ratios, the site's header and
    styles, and the button usable again afterwards."""
    with _bench_page(browser, server_url) as (p, errors):
        assert p.locator("header.site nav a[aria-current=page]").inner_text() == "Bench"
        assert p.evaluate("() => getComputedStyle(document.body).marginTop") == "0px"  # the site's stylesheet
        assert p.locator("#results thead th").all_inner_texts() == ["task", "runner", "ms", "÷ TF.js", "÷ jax-js",
                                                                    "note"]
        p.select_option("#task-filter", "matmul 256")
        assert p.inner_text("#go") == "Run"
        p.click("#go")
        p.wait_for_function("() => document.querySelectorAll('#log li').length >= 1")
        assert p.is_disabled("#go")
        p.wait_for_function("() => !document.getElementById('go').disabled", timeout=600_000)
        lines = p.locator("#log li").all_inner_texts()
        # 7 runners: webgrad webgpu, cpu (wasm matmul), cpu (numpy matmul), tfjs webgpu and wasm, jax-js webgpu and wasm
        assert len(lines) == 7 and lines[0].startswith("1/7 matmul 256 · webgrad webgpu: "), lines
        assert all(line.endswith(" ms") or ": failed: " in line for line in lines), lines
        assert not [line for line in lines if " · webgrad" in line and ": failed: " in line], lines  # ours all ran
        # jax-js ran on both backends (its bundle, /build/bench/jax.js, is part of the site's assets).
        assert not [line for line in lines if " · jax-js" in line and ": failed: " in line], lines
        assert p.inner_text("#status").startswith("done: 7 runs in ")
        table = _results(p)
        assert float(table["jax-js wasm"][0]) > 0 and float(table["jax-js webgpu"][0]) > 0, table

        def ratio_of(ours, peer):  # from the ms shown, which are rounded to 0.01
            return pytest.approx(float(table[ours][0]) / float(table[peer][0]), rel=0.02, abs=0.01)

        cpu = "webgrad cpu (wasm matmul)"
        assert float(table[cpu][2]) == ratio_of(cpu, "jax-js wasm"), table
        assert float(table[cpu][1]) > 0, table  # against tfjs wasm
        assert float(table["webgrad webgpu"][2]) == ratio_of("webgrad webgpu", "jax-js webgpu"), table
        for peer in ("tfjs wasm", "tfjs webgpu", "jax-js wasm", "jax-js webgpu"):
            assert table[peer][1:] == ["", ""], table  # a peer's row has no ratios of its own
        SHOTS.mkdir(parents=True, exist_ok=True)
        p.screenshot(path=str(SHOTS / "bench-run-1280.png"), full_page=True)
        assert errors == []


def test_bench_page_runs_the_int8_inference_task(browser, server_url):
    """bench.html's "mlp inference int8" (quantize_dynamic's int8 layers in webgrad, TF.js's float32
    model as the peer), picked from the menu: every runner runs, and the cpu row shows its ratio
    against TF.js wasm. (test_wasm_gemm checks the int8 kernel itself.)"""
    with _bench_page(browser, server_url) as (p, errors):
        p.select_option("#task-filter", "mlp inference int8")
        p.click("#go")
        p.wait_for_function("() => document.querySelectorAll('#log li').length >= 1")
        p.wait_for_function("() => !document.getElementById('go').disabled", timeout=600_000)
        lines = p.locator("#log li").all_inner_texts()
        # webgrad webgpu, cpu (wasm matmul), cpu (numpy matmul), tfjs webgpu and wasm
        assert len(lines) == 5 and all(" mlp inference int8 · " in line for line in lines), lines
        assert not [line for line in lines if ": failed: " in line], lines
        table = _results(p)
        cpu = "webgrad cpu (wasm matmul)"
        assert float(table[cpu][0]) > 0 and float(table["tfjs wasm"][0]) > 0, table
        assert float(table[cpu][1]) == pytest.approx(float(table[cpu][0]) / float(table["tfjs wasm"][0]),
                                                     rel=0.02, abs=0.01), table
        SHOTS.mkdir(parents=True, exist_ok=True)
        p.screenshot(path=str(SHOTS / "bench-int8-1280.png"), full_page=True)
        assert errors == []
