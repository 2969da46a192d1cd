"""The browser runtime (web/runtime/: webgrad.js, worker.js, protocol.js) in headless Chromium:
boot and device choice, results, output, errors, interrupts, progress events,
and embedding from a page on another origin without COOP/COEP headers."""
from __future__ import annotations

import http.server
import threading
import time
from pathlib import Path

import pytest

from .conftest import BOOT_TIMEOUT_MS, Runtime, free_port


def test_boot_auto_reports_device_and_reason(browser, server_url):
    context = browser.new_context()
    try:
        runtime = Runtime(context.new_page())
        info = runtime.boot(server_url)
        assert info["device"] in ("webgpu", "cpu")
        assert info["deviceReason"]
        assert info["versions"]["pyodide"] == "0.27.7"
        assert info["versions"]["webgrad"]
        assert info["crossOriginIsolated"] and info["interruptMode"] == "sharedarraybuffer"
        adapter = info["adapter"]
        if adapter is None:  # no WebGPU at all: the reason says so
            assert info["device"] == "cpu" and "not available" in info["deviceReason"]
        elif adapter["adapter_type"] == "CPU":  # SwiftShader here: auto picks the numpy backend
            assert info["device"] == "cpu" and "CPU emulation" in info["deviceReason"]
        else:
            assert info["device"] == "webgpu"
        shown = runtime.page.inner_text("#device")
        assert shown == info["device"]
        # Booting imports webgrad's core only: nn, optim and graph load on first use, the wasm
        # matmul at the first large product, and a CPU-emulated adapter gets no WebGPU device.
        loaded = runtime.ok("""import sys
import webgrad.backend.numpy.wasm_gemm as wasm
webgpu = sys.modules.get("webgrad.backend.webgpu")
[sorted(m for m in ("webgrad.nn", "webgrad.optim", "webgrad.graph") if m in sys.modules),
 wasm._kernel is None, webgpu is None or webgpu._state["backend"] is None]""")["result"]
        assert loaded == [[], True, info["device"] == "cpu"]
        # The wheel's modules come with Pyodide-compiled bytecode: importing them compiles no
        # webgrad source, and their code still points at the source (tracebacks, inspect).
        compiled = runtime.ok("""import builtins, inspect
seen, compile_ = [], builtins.compile
def counting(source, filename, *args, **kwargs):
    seen.append(str(filename))
    return compile_(source, filename, *args, **kwargs)
builtins.compile = counting
try:
    import webgrad.nn, webgrad.optim, webgrad.graph
    import numpy.polynomial, numpy.ma  # not imported at boot; from numpy's image, with bytecode
finally:
    builtins.compile = compile_
linear = webgrad.nn.Linear
[[f for f in seen if "webgrad" in f or "numpy" in f], linear.__module__, "def forward" in inspect.getsource(linear),
 "def polyfit" in inspect.getsource(numpy.polynomial.polynomial)]
""")["result"]
        assert compiled == [[], "webgrad.nn.modules.linear", True, True]
        assert {"wheel", "snapshot", "numpy image", "pyodide", "numpy", "webgrad", "device"} <= set(info["timings"])
        assert info["pythonStart"] == "snapshot"  # the asset step made one; CI fails without it
        assert info["numpyFrom"] == "image"  # likewise
        print(f"boot (auto) {info['bootMs']} ms, stages {info['timings']}, device {info['device']}: "
              f"{info['deviceReason']}")
    finally:
        context.close()


def test_boot_webgpu(webgpu_runtime):
    info = webgpu_runtime.info()
    assert info["device"] == "webgpu"
    assert info["adapter"]["vendor"] or info["adapter"]["architecture"]
    out = webgpu_runtime.ok("import webgrad\n(webgrad.ones(3, device='webgpu') * 2).numpy()")
    assert out["result"] == [2.0, 2.0, 2.0]


def test_run_returns_result(webgpu_runtime):
    assert webgpu_runtime.ok("1+1")["result"] == 2
    assert webgpu_runtime.ok("None")["result"] is None
    assert webgpu_runtime.ok("x = 3")["result"] is None
    out = webgpu_runtime.ok("{'a': [1, 2.5, 'x'], 'b': (True, None), 3: {'nested': 1}}")
    assert out["result"] == {"a": [1, 2.5, "x"], "b": [True, None], "3": {"nested": 1}}
    out = webgpu_runtime.ok("import numpy as np\nnp.arange(6, dtype=np.float32).reshape(2, 3)")
    assert out["result"] == [[0, 1, 2], [3, 4, 5]]
    out = webgpu_runtime.ok("import webgrad\nwebgrad.arange(4, device='webgpu') * 2")  # a tensor on the GPU
    assert out["result"] == [0, 2, 4, 6]
    out = webgpu_runtime.ok("import asyncio\nawait asyncio.sleep(0.01)\n'awaited'")
    assert out["result"] == "awaited"


def test_stdout_and_stderr_are_captured(webgpu_runtime):
    out = webgpu_runtime.ok("import sys\nprint('hello')\nprint('partial', end='')\nprint('oops', file=sys.stderr)\n7")
    assert out["stdout"] == "hello\npartial"
    assert out["stderr"] == "oops\n"
    assert out["result"] == 7
    assert webgpu_runtime.ok("print('next')")["stdout"] == "next\n"  # nothing carried over


def test_exception_carries_traceback_and_runtime_survives(webgpu_runtime):
    out = webgpu_runtime.run("def inner():\n    raise ValueError('bad value\\non two lines')\n"
                             "print('before')\ninner()")
    error = out["error"]
    assert error["pythonType"] == "ValueError"
    assert error["message"] == "ValueError: bad value\non two lines"
    assert "Traceback (most recent call last)" in error["traceback"]
    assert "in inner" in error["traceback"]
    assert error["stdout"] == "before\n"
    # A webgrad error names the op; the runtime keeps working afterwards.
    out = webgpu_runtime.run("import webgrad\nwebgrad.ones(3, 4) @ webgrad.ones(5, 2)")
    assert out["error"]["pythonType"] and "matmul" in out["error"]["message"]
    assert webgpu_runtime.ok("inner.__name__")["result"] == "inner"


# A webgrad module made for the call tests: says what arrived, sends the float32 values back reversed.
ECHO_MODULE = """
import sys, types
import numpy as np
echo = types.ModuleType("webgrad.test_echo")
def back(values, shape):
    return {"kind": type(values).__name__, "nbytes": memoryview(values).nbytes, "shape": shape,
            "values": np.frombuffer(values, "<f4")[::-1].copy()}
echo.back = back
sys.modules[echo.__name__] = echo
"""


def test_call_moves_a_float32_array_both_ways_bit_for_bit(webgpu_runtime):
    webgpu_runtime.ok(ECHO_MODULE)
    out = webgpu_runtime.evaluate("""async () => {
        const sent = new Float32Array([1.5, -0, Infinity, NaN, 3.4028234663852886e38, 1e-45, -2.25]);
        const bits = Array.from(new Uint32Array(sent.buffer.slice(0)));
        const buffer = sent.buffer;
        const answer = await window.webgradRuntime.call("webgrad.test_echo", "back", [sent, [7]], {transfer: [buffer]});
        const back = answer.values;
        return {moved: buffer.byteLength === 0, kind: answer.kind, nbytes: answer.nbytes, shape: answer.shape,
                type: back.constructor.name, sent: bits,
                got: Array.from(new Uint32Array(back.buffer, back.byteOffset, back.length)).reverse()};
    }""")
    assert out["moved"]  # transferred to the worker, not copied
    assert out["kind"] == "memoryview" and out["nbytes"] == 28 and out["shape"] == [7]
    assert out["type"] == "Float32Array" and out["got"] == out["sent"]  # NaN, -0 and denormals intact


def test_call_of_another_module_or_an_unknown_function_says_what_may_be_called(webgpu_runtime):
    webgpu_runtime.ok(ECHO_MODULE)
    errors = webgpu_runtime.evaluate("""async () => {
        const runtime = window.webgradRuntime;
        const failure = (module, fn) => runtime.call(module, fn, []).then(() => null,
            (err) => ({name: err.name, type: err.pythonType, message: err.message}));
        return {other: await failure("os", "getcwd"), missing: await failure("webgrad.test_echo", "nope"),
                module: await failure("webgrad.nope", "f"),
                after: (await runtime.call("webgrad.test_echo", "back", [new Float32Array([2]), [1]])).values[0]};
    }""")
    assert errors["other"]["name"] == "PythonError" and errors["other"]["type"] == "ValueError"
    assert "only webgrad's own modules (webgrad.*) can be called, not 'os'" in errors["other"]["message"]
    assert "webgrad.test_echo has no function 'nope'" in errors["missing"]["message"]
    assert "there is no module 'webgrad.nope'" in errors["module"]["message"]
    assert errors["after"] == 2  # the runtime keeps answering


def test_interrupt_stops_busy_loop_within_a_second(webgpu_runtime):
    webgpu_runtime.ok("kept = 41")
    # Interrupt once the loop runs (its first line says so): a long garbage collection
    # before it starts, after the suites run earlier in this page, is not interrupt latency;
    # so the run collects first, leaving the print's few allocations far from the next one.
    timing = webgpu_runtime.evaluate("""async () => {
        const runtime = window.webgradRuntime;
        let stop;
        const looping = new Promise((resolve) => {
            stop = runtime.on("stdout", (text) => { if (text.includes("looping")) resolve(); });
        });
        const running = runtime.run("import gc\\ngc.collect()\\nprint('looping', flush=True)\\nwhile True: pass")
          .then(() => null, (err) => err);
        await looping;
        stop();
        const asked = performance.now();
        await runtime.interrupt();
        const err = await running;
        return {ms: performance.now() - asked, type: err && err.pythonType, message: err && err.message};
    }""")
    assert timing["type"] == "KeyboardInterrupt", timing
    assert timing["ms"] < 1000, timing
    assert webgpu_runtime.ok("kept + 1")["result"] == 42  # state survives (SharedArrayBuffer interrupt)


def test_interrupt_aimed_at_a_run_not_started_yet_still_stops_it(webgpu_runtime):
    """interrupt() right after run(): the worker may not have begun the run when the signal lands
    (a busy or slow machine); it must not drop the signal when the run starts. Repeated: the signal
    lands at a different point of the run's set-up each time, where it used to leave later runs hanging."""
    webgpu_runtime.ok("kept = 41")
    for _ in range(5):
        outcome = webgpu_runtime.evaluate("""async () => {
            const runtime = window.webgradRuntime;
            let restarted = false;
            const stop = runtime.on("restart", () => { restarted = true; });
            const looping = runtime.run("while True: pass").then(() => null, (err) => err);
            await runtime.interrupt();  // before the worker has even received the run
            const err = await looping;
            stop();
            return {type: err && err.pythonType, restarted};
        }""")
        assert outcome == {"type": "KeyboardInterrupt", "restarted": False}
        assert webgpu_runtime.ok("kept + 1", timeout_s=30)["result"] == 42


def test_signal_aimed_at_an_ended_run_does_not_hit_the_next(webgpu_runtime):
    """An interrupt that lands just after its run ended must not kill the next run."""
    outcome = webgpu_runtime.evaluate("""async () => {
        const runtime = window.webgradRuntime;
        await runtime.run("1");
        const ended = runtime._nextId - 1;
        Atomics.store(runtime._control, 1, ended);  // what interrupt() writes, too late
        Atomics.store(runtime._control, 0, 2);
        return (await runtime.run("'survived'")).result;
    }""")
    assert outcome == "survived"


def test_interrupt_restarts_a_run_that_ignores_the_signal(browser, server_url):
    """Python awaiting a promise runs no bytecode, so the signal can't land: after
    interruptGraceMs the worker restarts, the run rejects and the runtime works again."""
    context = browser.new_context()
    try:
        runtime = Runtime(context.new_page())
        runtime.boot(server_url + "?device=cpu")
        runtime.ok("lost = 1")
        outcome = runtime.evaluate("""async () => {
            const r = window.webgradRuntime;
            const restarts = [];
            r.on("restart", (data) => restarts.push(data));
            const waiting = r.run("import asyncio\\nawait asyncio.sleep(600)").then(() => null, (err) => err);
            await new Promise((resolve) => setTimeout(resolve, 300));
            const asked = performance.now();
            const restarted = r.interrupt();
            const err = await waiting;
            const rejectedMs = performance.now() - asked;
            await restarted;
            return {rejectedMs, grace: r.interruptGraceMs, type: err && err.pythonType, restarts};
        }""")
        assert outcome["type"] == "KeyboardInterrupt"
        assert outcome["grace"] <= outcome["rejectedMs"] < outcome["grace"] + 1000
        assert outcome["restarts"] == [{"reason": "interrupt"}]
        out = runtime.run("lost")
        assert out["error"]["pythonType"] == "NameError"  # a fresh interpreter
        assert runtime.ok("2 * 21")["result"] == 42
    finally:
        context.close()


def test_progress_events_reach_the_page(webgpu_runtime):
    events = webgpu_runtime.evaluate("""async () => {
        const seen = [];
        const stop = window.webgradRuntime.on("progress", (data) => seen.push(data));
        await window.webgradRuntime.run([
            "import webgrad",
            "for i in range(2):",
            "    webgrad_progress({'step': i + 1, 'total': 3, 'loss': 1.0 / (i + 1)})",
            "webgrad_progress(step=3, total=3, loss=webgrad.full((2,), 0.125, device='webgpu').sum())",
            "from webgrad_runtime import progress",
            "progress({'message': 'done', 'values': (1, 2)})",
        ].join("\\n"));
        stop();
        return seen;
    }""")
    assert events == [{"step": 1, "total": 3, "loss": 1.0}, {"step": 2, "total": 3, "loss": 0.5},
                      {"step": 3, "total": 3, "loss": 0.25}, {"message": "done", "values": [1, 2]}]
    assert webgpu_runtime.page.evaluate("document.getElementById('progress').value") == pytest.approx(1.0)


HOST_PAGE = """<!doctype html><meta charset="utf-8"><title>host</title><link rel="icon" href="data:,">
<script type="module">
import {{boot}} from "{server}webgrad.js";
try {{
  window.hosted = await boot({{device: "cpu"}});
}} catch (err) {{
  window.webgradBootError = err.message || String(err);
}}
</script>"""


@pytest.fixture(scope="module")
def host_url(server_url):
    """A page on another origin (another port), served without COOP/COEP headers, that embeds the runtime."""
    page = HOST_PAGE.format(server=server_url).encode()

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self):  # noqa: N802 (the stdlib's name)
            self.send_response(200)
            self.send_header("Content-Type", "text/html; charset=utf-8")
            self.send_header("Content-Length", str(len(page)))
            self.end_headers()
            self.wfile.write(page)

        def log_message(self, *args):
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", free_port()), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}/"
    server.shutdown()
    server.server_close()


def test_cross_origin_page_without_coop_coep(browser, host_url):
    """The widget case: another site, not cross-origin isolated (no SharedArrayBuffer).
    Boots through a Blob-URL worker, runs code, and interrupt() restarts the worker."""
    context = browser.new_context()
    try:
        runtime = Runtime(context.new_page(), name="hosted")
        info = runtime.boot(host_url)
        assert info["crossOriginIsolated"] is False
        assert info["interruptMode"] == "restart"
        assert info["device"] == "cpu" and "requested" in info["deviceReason"]
        out = runtime.ok("import webgrad\nprint('hi')\n(webgrad.ones(2) + 1).tolist()")
        assert out == {"stdout": "hi\n", "stderr": "", "result": [2.0, 2.0], "display": {"text/plain": "[2.0, 2.0]"}}
        outcome = runtime.evaluate("""async () => {
            const running = window.hosted.run("while True: pass").then(() => null, (err) => err);
            await new Promise((resolve) => setTimeout(resolve, 300));
            const asked = performance.now();
            const restarted = window.hosted.interrupt();
            const err = await running;
            const rejectedMs = performance.now() - asked;
            await restarted;
            return {rejectedMs, type: err && err.pythonType};
        }""")
        assert outcome["type"] == "KeyboardInterrupt"
        assert outcome["rejectedMs"] < 1000
        assert runtime.ok("2 * 21")["result"] == 42  # usable again after the restart
    finally:
        context.close()


def test_input_on_a_page_without_shared_memory_says_why(browser, host_url):
    context = browser.new_context()
    try:
        runtime = Runtime(context.new_page(), name="hosted")
        runtime.boot(host_url)
        error = runtime.run("input('name? ')")["error"]
        assert error["pythonType"] == "EOFError"
        assert "cross-origin isolated" in error["message"] and "set the value in the code" in error["message"]
        assert not [line for line in runtime.console if line.startswith(("error", "pageerror"))]
    finally:
        context.close()


def test_results_come_with_a_display_bundle(webgpu_runtime):
    out = webgpu_runtime.ok("import webgrad\nwebgrad.arange(3, device='webgpu')")
    assert out["result"] == [0, 1, 2]
    assert out["display"]["text/plain"] == repr(__import__("webgrad").arange(3)).replace(")", ", device='webgpu')")
    out = webgpu_runtime.ok("from webgrad import nn\nwebgrad.summary(nn.Linear(4, 2), input_size=(1, 4))")
    assert "<table" in out["display"]["text/html"] and "Linear" in out["display"]["text/plain"]
    assert webgpu_runtime.ok("x = 1")["display"] is None


def test_cell_source_is_known_to_tracebacks_and_inspect(webgpu_runtime):
    out = webgpu_runtime.ok("import inspect\nclass Net:\n    def forward(self):\n        return 1\n"
                            "inspect.getsource(Net)")
    assert out["result"] == "class Net:\n    def forward(self):\n        return 1\n"
    error = webgpu_runtime.run("x = 1\ny = x +\n")["error"]
    assert error["pythonType"] == "SyntaxError" and error["line"] == 2
    assert 'File "<playground>", line 2' in error["traceback"]


def test_files_api(webgpu_runtime):
    outcome = webgpu_runtime.evaluate("""async () => {
        const files = window.webgradRuntime.files;
        await files.write("sub/a.txt", "text from the page");
        const read = new TextDecoder().decode(await files.read("sub/a.txt"));
        const listed = (await files.list()).map((f) => [f.path, f.size]);
        await files.delete("sub/a.txt");
        const refused = await files.read("../etc/passwd").then(() => null, (err) => err.message);
        const missing = await files.read("nothing.txt").then(() => null, (err) => err.message);
        return {read, listed, refused, missing};
    }""")
    assert outcome["read"] == "text from the page"
    assert ["sub/a.txt", 18] in outcome["listed"]
    assert "not a relative path inside the working directory" in outcome["refused"]
    assert "nothing.txt" in outcome["missing"]
    assert webgpu_runtime.ok("import os\nos.path.exists('sub/a.txt')")["result"] is False


def test_boot_failure_names_a_missing_asset(webgpu_runtime):
    outcome = webgpu_runtime.evaluate("""async () => {
        const {boot} = await import("/webgrad.js");
        try {
            await boot({baseUrl: location.origin + "/nowhere/"});
            return null;
        } catch (err) {
            return {name: err.name, cause: err.cause, message: err.message};
        }
    }""", timeout_s=30)
    assert outcome["name"] == "BootError" and outcome["cause"] == "asset"
    assert "/nowhere/runtime/worker.js answered 404" in outcome["message"]
    assert "python -m server.assets" in outcome["message"]


CSP_PAGE = """<!doctype html><meta charset="utf-8"><title>strict host</title><link rel="icon" href="data:,">
<script type="module" nonce="n0nce">
import {{boot}} from "{server}webgrad.js";
try {{
  window.hosted = await boot({{device: "cpu"}});
}} catch (err) {{
  window.webgradBootError = `${{err.name}} ${{err.cause}}: ${{err.message}}`;
}}
</script>"""


ZONE_AND_RANDOM = """import datetime, random, time
[time.timezone, time.altzone, time.daylight, list(time.tzname), time.strftime("%Z %z", time.localtime(1e9)),
 datetime.datetime.now().astimezone().tzname(), random.getrandbits(64)]"""


def test_python_restored_from_the_snapshot_has_the_pages_time_zone_and_its_own_random(browser, server_url):
    """The memory snapshot is made on the server (in UTC here): a page elsewhere must still see
    its own zone, exactly as a Python that started in the page does, and each visit must draw
    its own random numbers. Without a snapshot, or with one made by a runtime with another
    stack-switching API, Python starts in the page."""
    seen = {}
    for zone in ("America/New_York", "Asia/Kolkata", "Australia/Sydney"):
        for start in ("snapshot", "fresh"):
            context = browser.new_context(timezone_id=zone)
            try:
                if start == "fresh" and zone == "Asia/Kolkata":  # a snapshot from a runtime without JSPI
                    context.route("**/pyodide/snapshot.json", lambda route: route.fulfill(
                        json={**route.fetch().json(), "jspi": "none"}))
                elif start == "fresh":  # no snapshot offered: Python starts in the page
                    context.route("**/pyodide/snapshot.json", lambda route: route.fulfill(status=404, body="Not Found"))
                runtime = Runtime(context.new_page())
                info = runtime.boot(server_url + "?device=cpu")
                assert info["pythonStart"] == start
                seen[zone, start] = runtime.ok(ZONE_AND_RANDOM)["result"]
            finally:
                context.close()
        snapshot, fresh = seen[zone, "snapshot"], seen[zone, "fresh"]
        assert snapshot[:-1] == fresh[:-1], zone
    assert seen["America/New_York", "snapshot"][:4] == [18000, 14400, 1, ["EST", "EDT"]]
    assert seen["Asia/Kolkata", "snapshot"][:3] == [-19800, -19800, 0]
    assert seen["Australia/Sydney", "snapshot"][:3] == [-36000, -39600, 1]  # summer in January
    draws = [values[-1] for values in seen.values()]
    assert len(set(draws)) == len(draws), draws


def test_numpy_comes_from_its_wheel_without_its_image_and_a_missing_wheel_is_named(browser, server_url):
    """Without numpy's image (an asset folder from before it, a failed fetch) numpy loads from
    its wheel; without both, boot() rejects naming numpy (loadPackage's own failure only
    reaches the console)."""
    for missing in (("numpy-image.json",), ("numpy-image.json", "numpy-*.whl")):
        context = browser.new_context()
        try:
            for pattern in missing:
                context.route(f"**/pyodide/{pattern}", lambda route: route.fulfill(status=404, body="Not Found"))
            page = context.new_page()
            page.goto(server_url + "?device=cpu")
            page.wait_for_function("() => window.webgradRuntime || window.webgradBootError", timeout=BOOT_TIMEOUT_MS)
            failure = page.evaluate("window.webgradBootError ? String(window.webgradBootError) : null")
            if len(missing) == 1:
                assert failure is None, failure
                assert page.evaluate("window.webgradRuntime.numpyFrom") == "wheel"
                code = "import numpy\\nint(numpy.arange(5).sum())"
                assert page.evaluate(f"async () => (await window.webgradRuntime.run('{code}')).result") == 10
            else:
                assert failure is not None and "boot failed (asset)" in failure, failure
                assert "loading numpy failed" in failure and "python -m server.assets" in failure
        finally:
            context.close()


# The images (snapshot, numpy's, webgrad's) the page's worker kept, by URL (worker.js keepImages):
# written whole (not a write's swap file, not the empty file made before the bytes land).
KEPT_IMAGES = """async () => {
  const folder = await (await navigator.storage.getDirectory()).getDirectoryHandle("webgrad-images", {create: true});
  const names = [];
  for await (const [name, handle] of folder.entries()) {
    if (!name.endsWith(".crswap") && (await handle.getFile()).size) names.push(decodeURIComponent(name));
  }
  return names;
}"""


def _wait_for_kept_images(page, count=3, timeout_s=30.0) -> list:
    deadline = time.monotonic() + timeout_s
    while True:
        kept = page.evaluate(KEPT_IMAGES)
        if len(kept) >= count or time.monotonic() > deadline:
            return kept
        time.sleep(0.2)


def _image_kind(url: str) -> str:
    for kind, part in (("snapshot", "/pyodide/snapshot-"), ("numpy", "/pyodide/numpy-"), ("webgrad", "/wheels/")):
        if part in url and url.endswith(".gz"):
            return kind
    return url


def test_second_visit_fetches_nothing_again(browser, server_url, tmp_path):
    """A second visit in the same browser profile: every file it asks for again (Pyodide's wasm
    and stdlib, the page's scripts) comes from the HTTP cache or as a 304, so no body crosses
    the network but latest.json's few bytes; the images (the snapshot, numpy's and webgrad's)
    are not even asked for: the first visit kept them decoded. A profile on disk, as a user's
    browser has: an in-memory (incognito-like) cache does not keep pyodide.asm.wasm."""
    from .conftest import CHROMIUM, CHROMIUM_ARGS

    context = browser.browser_type.launch_persistent_context(
        str(tmp_path / "profile"), executable_path=CHROMIUM, args=CHROMIUM_ARGS, headless=True)
    visits, infos = [], []
    try:
        for _ in range(2):
            requests = []

            def record(request, requests=requests):
                requests.append(request)

            context.on("requestfinished", record)
            page = context.new_page()
            infos.append(Runtime(page).boot(server_url + "?device=cpu"))
            kept = _wait_for_kept_images(page)
            context.remove_listener("requestfinished", record)
            visits.append({r.url: max(0, r.sizes()["responseBodySize"]) for r in requests if r.method == "GET"})
            page.close()
    finally:
        context.close()
    first, second = visits
    assert infos[0]["imagesFrom"] == {"snapshot": "network", "numpy": "network", "webgrad": "network"}
    assert infos[1]["imagesFrom"] == {"snapshot": "cache", "numpy": "cache", "webgrad": "cache"}, infos[1]
    assert infos[1]["pythonStart"] == "snapshot", infos[1]
    assert sorted(_image_kind(url) for url in kept) == ["numpy", "snapshot", "webgrad"], kept
    assert first[server_url + "pyodide/pyodide.asm.wasm"] > 1_000_000  # it did come over the network once
    assert not [url for url in second if url.endswith((".img.gz", ".bin.gz"))], second
    again = {url: size for url, size in second.items() if url in first}  # a rebuilt wheel has a new URL
    for name in ("pyodide.asm.wasm", "pyodide.asm.js", "python_stdlib.zip"):
        assert again[server_url + "pyodide/" + name] == 0, again
    assert sum(again.values()) < 10_000, {url: size for url, size in again.items() if size}


CORRUPT_KEPT_IMAGES = """async () => {
  const folder = await (await navigator.storage.getDirectory()).getDirectoryHandle("webgrad-images");
  for await (const name of folder.keys()) {
    const writable = await (await folder.getFileHandle(name)).createWritable();
    await writable.write(new TextEncoder().encode("not an image"));
    await writable.close();
  }
}"""


def test_a_damaged_kept_image_costs_a_download_not_the_boot(browser, server_url, tmp_path):
    """Images kept by an earlier visit that no longer hold what they should (a damaged disk, a
    half-cleared profile): the snapshot is not restored (Python starts in the page), numpy
    comes from its wheel, webgrad's image is fetched again (its sha256 differs), the boot
    still succeeds, and the damaged files are dropped, so the next visit fetches them anew."""
    from .conftest import CHROMIUM, CHROMIUM_ARGS

    context = browser.browser_type.launch_persistent_context(
        str(tmp_path / "profile"), executable_path=CHROMIUM, args=CHROMIUM_ARGS, headless=True)
    try:
        page = context.new_page()
        Runtime(page).boot(server_url + "?device=cpu")
        assert len(_wait_for_kept_images(page)) == 3
        page.evaluate(CORRUPT_KEPT_IMAGES)
        page.close()
        page = context.new_page()
        runtime = Runtime(page)
        info = runtime.boot(server_url + "?device=cpu")
        assert (info["pythonStart"], info["numpyFrom"]) == ("fresh", "wheel"), info
        assert info["imagesFrom"] == {"snapshot": "cache", "numpy": "cache", "webgrad": "network"}, info
        assert runtime.ok("import numpy, webgrad\nint(webgrad.tensor(numpy.arange(4.0)).sum().item())")["result"] == 6
        deadline = time.monotonic() + 30
        while sorted(map(_image_kind, page.evaluate(KEPT_IMAGES))) != ["webgrad"] and time.monotonic() < deadline:
            time.sleep(0.2)
        assert sorted(map(_image_kind, page.evaluate(KEPT_IMAGES))) == ["webgrad"]
        assert not [line for line in runtime.console if line.startswith(("error", "pageerror"))], runtime.console
    finally:
        context.close()


def test_boot_under_a_csp_without_wasm_unsafe_eval_fails_fast_and_says_why(browser, server_url):
    """A third-party page whose CSP lacks 'wasm-unsafe-eval': the Blob worker inherits it, so
    Pyodide cannot compile WebAssembly. boot() must reject (it used to hang forever)."""
    page = CSP_PAGE.format(server=server_url).encode()
    origin = server_url.rstrip("/")
    # Everything else the runtime needs is allowed (Chrome checks a module Blob worker against script-src).
    policy = f"default-src 'none'; script-src 'nonce-n0nce' {origin} blob:; connect-src {origin}".encode()

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self):  # noqa: N802 (the stdlib's name)
            self.send_response(200)
            self.send_header("Content-Type", "text/html; charset=utf-8")
            self.send_header("Content-Security-Policy", policy.decode())
            self.send_header("Content-Length", str(len(page)))
            self.end_headers()
            self.wfile.write(page)

        def log_message(self, *args):
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", free_port()), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    context = browser.new_context()
    try:
        tab = context.new_page()
        tab.goto(f"http://127.0.0.1:{server.server_address[1]}/")
        tab.wait_for_function("() => window.hosted || window.webgradBootError", timeout=30_000)
        failure = tab.evaluate("window.webgradBootError || null")
        assert failure is not None, "booted although WebAssembly should be blocked"
        assert failure.startswith("BootError csp:"), failure
        assert "Content-Security-Policy" in failure and "'wasm-unsafe-eval'" in failure
    finally:
        context.close()
        server.shutdown()
        server.server_close()


def test_boot_failure_names_a_missing_pyodide_file(browser, server_url):
    """A file Pyodide loads itself (here its standard library) answers 404: boot() rejects
    naming it, instead of hanging inside Pyodide."""
    context = browser.new_context()
    try:
        context.route("**/pyodide/python_stdlib.zip", lambda route: route.fulfill(status=404, body="Not Found"))
        runtime = Runtime(context.new_page())
        runtime.page.goto(server_url + "?device=cpu")
        runtime.page.wait_for_function("() => window.webgradRuntime || window.webgradBootError",
                                       timeout=BOOT_TIMEOUT_MS)
        failure = runtime.page.evaluate("window.webgradBootError || null")
        assert failure is not None and "boot failed (asset)" in failure, failure
        assert "pyodide/python_stdlib.zip answered 404" in failure and "python -m server.assets" in failure
        assert runtime.page.inner_text("#device") == "boot failed"
    finally:
        context.close()


# -- the worker's Python (webgrad.web.worker), natively: no browser needed ---------------------

def test_worker_python_trims_tracebacks_to_the_users_frames():
    from webgrad.web import worker

    machinery = "/lib/python312.zip/_pyodide/_base.py"
    scope: dict = {}
    exec(compile("def run(f):\n    return f()\n", machinery, "exec"), scope)  # stands in for Pyodide's frames
    code = "import webgrad\n\ndef bad():\n    return webgrad.ones(2, 3) @ webgrad.ones(4, 1)\n\nbad()\n"
    worker.register_source(code, worker.CELL)
    try:
        scope["run"](lambda: exec(compile(code, worker.CELL, "exec"), {}))
    except Exception as error:  # noqa: BLE001 (the test inspects it)
        described = worker.describe_error(error)
    assert described["ok"] is False and described["type"] == "OpError"
    text = described["traceback"]
    assert "_pyodide" not in text and "worker.py" not in text
    assert 'File "<playground>", line 4, in bad' in text and "return webgrad.ones(2, 3) @" in text
    assert "ops/linalg.py" in text  # webgrad's frames stay
    assert described["line"] == 4 and described["message"].endswith("inner dimensions differ (3 != 4)")
    # The message (the page's status line) names the class without its module path; the traceback keeps it.
    assert described["message"].startswith("OpError: matmul: (2, 3) @ (4, 1)"), described["message"]
    assert "webgrad.ops.registry.OpError: matmul" in text


def test_worker_python_message_keeps_builtins_nested_classes_and_syntax_errors():
    from webgrad.web import worker

    class Outer:
        class Inner(Exception):
            pass

    for error, expected in [(ValueError("bad value"), "ValueError: bad value"),
                            (Outer.Inner("nested"), f"{Outer.Inner.__qualname__}: nested")]:
        try:
            raise error
        except Exception as caught:  # noqa: BLE001 (the test inspects it)
            assert worker.describe_error(caught)["message"] == expected
    try:
        compile("x = (", worker.CELL, "exec")
    except SyntaxError as caught:
        described = worker.describe_error(caught)
    assert described["message"].split("\n")[-1].startswith("SyntaxError: ") and described["line"] == 1


def test_worker_python_display_and_jsonable():
    import numpy as np

    import webgrad
    from webgrad.web import worker

    t = webgrad.tensor([[1.5, 2.0]])
    assert worker.display(t) == webgrad.display.rich_repr(t)
    assert worker.display(t)["text/plain"] == repr(t)
    assert worker.jsonable({"t": t, "n": np.float32(0.5), (1, 2): (3, {4})}) == {"t": [[1.5, 2.0]], "n": 0.5,
                                                                                 "(1, 2)": [3, [4]]}

    class Html:
        def _repr_html_(self):
            return "<b>hi</b>"

    assert worker.display(Html())["text/html"] == "<b>hi</b>"


def test_worker_python_input_without_a_page_says_what_to_do(monkeypatch, tmp_path):
    from webgrad.web import worker

    monkeypatch.setattr(worker, "_hooks", None)
    with pytest.raises(EOFError, match="cross-origin isolated.*set the value in the code"):
        worker._input("name? ")
    worker.progress({"step": 1})  # natively a no-op
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "a.txt").write_text("abc")
    (tmp_path / ".hidden").write_text("x")
    listed = __import__("json").loads(worker.list_files(str(tmp_path)))
    assert [(f["path"], f["size"]) for f in listed] == [("sub/a.txt", 3)]


def test_boot_fetches_each_file_once_and_no_request_fails(browser, server_url):
    """A boot asks for each of its files once (the page's and its worker's requests alike) and
    none is aborted: Pyodide's own files used to be asked for with HEAD first, four requests
    that Chromium reported as net::ERR_ABORTED before fetching them again."""
    import collections

    context = browser.new_context()
    requests: collections.Counter = collections.Counter()
    failed: list[str] = []
    context.on("request", lambda request: requests.update([request.url]))
    context.on("requestfailed", lambda request: failed.append(f"{request.method} {request.url}: {request.failure}"))
    try:
        Runtime(context.new_page()).boot(server_url + "?device=cpu")
    finally:
        context.close()
    assert failed == []
    assert {url: count for url, count in requests.items() if count > 1} == {}
    for name in ("pyodide.asm.wasm", "pyodide.asm.js", "python_stdlib.zip", "pyodide-lock.json"):
        assert requests[server_url + "pyodide/" + name] == 1, name


KEPT_FILE_TIME = """async (path) => {
  let folder = await (await navigator.storage.getDirectory()).getDirectoryHandle("webgrad-files");
  const parts = path.split("/");
  for (const part of parts.slice(0, -1)) folder = await folder.getDirectoryHandle(part);
  const file = await (await folder.getFileHandle(parts[parts.length - 1])).getFile();
  return {size: file.size, modified: file.lastModified};
}"""


def test_kept_files_are_copied_when_they_change_not_after_every_run(browser, server_url):
    """The working folder's copy in the origin private file system: a write through runtime.files
    is kept before it resolves, a run that writes nothing copies nothing, a file the code changes
    is copied once, a deleted one is dropped, and a restarted worker finds them all."""
    context = browser.new_context()
    try:
        runtime = Runtime(context.new_page())
        runtime.boot(server_url + "?device=cpu")
        page = runtime.page
        runtime.evaluate("() => window.webgradRuntime.files.write('data/big.bin', new Uint8Array(1 << 20).fill(7))")
        first = page.evaluate(KEPT_FILE_TIME, "data/big.bin")
        assert first["size"] == 1 << 20
        time.sleep(0.05)  # file times have millisecond resolution
        runtime.ok("x = sum(range(10))")  # writes nothing
        assert page.evaluate(KEPT_FILE_TIME, "data/big.bin") == first
        runtime.ok("open('data/big.bin', 'ab').write(b'more')\nopen('gone.txt', 'w').write('soon gone')")
        changed = page.evaluate(KEPT_FILE_TIME, "data/big.bin")
        assert changed["size"] == (1 << 20) + 4 and changed["modified"] > first["modified"]
        assert page.evaluate(KEPT_FILE_TIME, "gone.txt")["size"] == 9
        runtime.ok("import os\nos.remove('gone.txt')")
        with pytest.raises(Exception, match="NotFoundError|could not be found"):
            page.evaluate(KEPT_FILE_TIME, "gone.txt")
        runtime.evaluate("() => window.webgradRuntime.restart()")
        listed = runtime.evaluate("() => window.webgradRuntime.files.list()")
        assert [(f["path"], f["size"]) for f in listed] == [("data/big.bin", (1 << 20) + 4)]
        assert runtime.ok("open('data/big.bin', 'rb').read()[-6:]")["result"] == list(b"\x07\x07more")
    finally:
        context.close()


def test_the_readme_call_example_runs_as_written(browser, server_url):
    """README's runtime.call block, pasted as is into a freshly booted page (the shared runtime's
    working directory is moved by other tests): a page module called with a moved Float32Array
    gives the mean back."""
    readme = (Path(__file__).resolve().parents[2] / "README.md").read_text()
    block = next(b.split("```", 1)[0] for b in readme.split("```js\n")[1:] if 'runtime.call("stats"' in b)
    context = browser.new_context()
    try:
        runtime = Runtime(context.new_page())
        runtime.boot(server_url + "?device=cpu")
        got = runtime.evaluate(f"""async () => {{
            const runtime = window.webgradRuntime;
            {block}
            return {{mean, moved: values.buffer.byteLength === 0}};
        }}""")
    finally:
        context.close()
    assert got == {"mean": 3, "moved": True}
