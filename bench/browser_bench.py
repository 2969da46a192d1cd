"""webgrad in the browser vs TensorFlow.js 4.22 and jax-js 0.1.25, side by side in one headless Chromium.

    python bench/browser_bench.py            # starts the site on a free port
    python bench/browser_bench.py --url http://127.0.0.1:8000/   # a running `make serve`

Prints the boot time (``boot()`` to ready: cold in a fresh browser profile, then
warm, a second visit in the same profile once the first has written its caches, with
the bytes that went over the network each time, and the median time at which each
boot step ended) next to TF.js's own start, and, for the
digits-MLP training step (64->128->10, batch 64, Adam, loss read back every step),
the digits CNN's (demos/digits.py) and the char transformer's (demos/char_lm.py),
eagerly and through webgrad.compile, N x N matmuls, a 3x3 conv2d and a wide MLP's inference
in float32 and int8 (``quantize_dynamic``; its peer is TF.js's float32 model) (results read
back), milliseconds per step (after at least 0.5 s of warm-up, for every runner alike)
for webgrad on WebGPU and on the cpu in Pyodide (with
its wasm matmul, and with numpy's own), TF.js on its WebGPU and wasm backends, and
jax-js (npm ``@jax-js/jax``, bundled into the site) on its WebGPU and wasm backends for
the MLP step (one ``jit`` of ``valueAndGrad`` and an optax-style Adam written in the
page), the matmuls and the conv2d, with ratios against the TF.js backend and the jax-js
backend of the same kind (cpu and wasm runners all on one thread; jax-js's wasm on one
worker). The page is web/bench.html
(open it in a browser to run the same thing by hand). Compare ratios, not absolute
times: here both WebGPU adapters are CPU emulations. ``--no-webgpu`` leaves the
WebGPU runners out; ``--task NAME`` runs only the tasks whose name contains NAME.

``--boot-only --load N`` times the boots twice: on a quiet machine, then with N background
processes that each burn a CPU core (started and stopped here, and each ends by itself after
``--load-limit`` seconds should the bench die), as on a machine busy with other work; it prints
both and the loaded / quiet ratios.
"""
from __future__ import annotations

import argparse
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
CHROMIUM = os.environ.get("WEBGRAD_CHROMIUM", "/usr/bin/chromium")
CHROMIUM_ARGS = ["--enable-unsafe-webgpu", "--no-sandbox", "--disable-background-networking",
                 "--disable-component-update", "--no-first-run"]
# Each webgrad runner and its peers, the backend of the same kind: TF.js's, then jax-js's.
WEBGPU_PEERS = ("tfjs webgpu", "jax-js webgpu")
CPU_PEERS = ("tfjs wasm", "jax-js wasm")
PEERS = {"webgrad webgpu": WEBGPU_PEERS, "webgrad webgpu compiled": WEBGPU_PEERS,
         "webgrad cpu (wasm matmul)": CPU_PEERS, "webgrad cpu compiled": CPU_PEERS,
         "webgrad cpu (numpy matmul)": CPU_PEERS}


def start_server():
    subprocess.run([sys.executable, "-m", "server.assets"], cwd=REPO, check=True)
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    data = tempfile.mkdtemp(prefix="webgrad-bench-data-")
    process = subprocess.Popen([sys.executable, "-m", "server", "--port", str(port), "--data", data,
                                "--log-level", "warning"], cwd=REPO)
    url = f"http://127.0.0.1:{port}/"
    for _ in range(300):
        try:
            urllib.request.urlopen(url + "wheels/latest.json", timeout=2)
            return process, url
        except OSError:
            time.sleep(0.2)
    process.kill()
    raise SystemExit("the server did not start")


def _visit(context, url, script, linger=None):
    """Open bench.html in ``context``, evaluate ``script``, call ``linger(page)`` if given before
    closing the page; return (its result, bytes fetched from the network by the page and its
    workers, the largest such files, how many requests)."""
    requests = []

    def record(request):
        requests.append(request)

    context.on("requestfinished", record)
    page = context.new_page()
    page.goto(url + "bench.html")
    page.wait_for_selector("body[data-ready=true]")
    result = page.evaluate(script)
    if linger is not None:
        linger(page)
    context.remove_listener("requestfinished", record)
    # responseBodySize is what came over the wire: 0 for an answer from the HTTP cache or a 304.
    sizes = [(max(0, r.sizes()["responseBodySize"]), r.url.removeprefix(url)) for r in requests]
    page.close()
    return result, sum(size for size, _ in sizes), sorted(sizes, reverse=True)[:3], len(requests)


# How many images the page's worker has kept whole (web/runtime/worker.js keepImages).
KEPT_IMAGES = """async () => {
  const folder = await (await navigator.storage.getDirectory()).getDirectoryHandle("webgrad-images", {create: true});
  let count = 0;
  for await (const [name, handle] of folder.entries()) {
    if (!name.endsWith(".crswap") && (await handle.getFile()).size) count++;
  }
  return count;
}"""


def _caches_written(profile: str):
    """A linger for the first visit: wait, as a user would use the page, until the worker has kept
    its images (in the origin private file system) and Chromium has written Pyodide's compiled code to the profile's
    wasm code cache (it does so some seconds after the module's hot code is optimized). Prints
    what was still missing after 30 s."""
    def linger(page):
        deadline = time.monotonic() + 30
        kept = code = False
        while time.monotonic() < deadline and not (kept and code):
            kept = kept or page.evaluate(KEPT_IMAGES) >= 3
            code = code or any(f.stat().st_size > 100_000 for f in Path(profile, "Default", "Code Cache", "wasm")
                               .glob("*") if f.is_file())
            time.sleep(0.25)
        if not (kept and code):
            print(f"  (after 30 s: images kept {kept}, wasm code cache written {code})")
    return linger


def measure_boot(playwright, url, runs):
    """Cold boots (a fresh profile each) and, in the same profile, a warm second visit, once the
    first has written its caches (see _caches_written).

    A profile on disk, as a user's browser has: an incognito-like context keeps its
    HTTP cache in memory, which does not hold pyodide.asm.wasm (10 MB)."""
    cold, warm = [], []
    for _ in range(runs):
        with tempfile.TemporaryDirectory(prefix="webgrad-bench-profile-") as profile:
            context = playwright.chromium.launch_persistent_context(
                profile, executable_path=CHROMIUM, args=CHROMIUM_ARGS, headless=True)
            cold.append(_visit(context, url, "window.webgradBench.bootTime()", _caches_written(profile)))
            warm.append(_visit(context, url, "window.webgradBench.bootTime()"))
            context.close()
    return cold, warm


def measure_tfjs_boot(browser, url, backend):
    context = browser.new_context()
    result, fetched, _, _ = _visit(context, url, f"window.webgradBench.tfjsBootTime({backend!r})")
    context.close()
    return result, fetched


# A background process that keeps one CPU core busy until its deadline (argv[1], time.time()).
BURNER = "import sys, time\ndeadline = float(sys.argv[1])\nwhile time.time() < deadline:\n    sum(range(10_000))\n"


class Load:
    """``count`` CPU burners for the duration of a ``with`` block (each stops by itself after ``limit_s``)."""

    def __init__(self, count: int, limit_s: float):
        self.count, self.limit_s, self.processes = count, limit_s, []

    def __enter__(self):
        deadline = time.time() + self.limit_s
        self.processes = [subprocess.Popen([sys.executable, "-c", BURNER, str(deadline)]) for _ in range(self.count)]
        return self

    def __exit__(self, *exc):
        for process in self.processes:
            process.kill()
        for process in self.processes:
            process.wait(10)


def print_boots(label, boots):
    ms = [b[0]["ms"] for b in boots]
    info, fetched, largest, count = boots[-1]
    print(f"boot() to ready, {label}, {len(ms)} runs: median {statistics.median(ms):.0f} ms "
          f"(min {min(ms):.0f}, max {max(ms):.0f}); the last: {count} requests, {fetched / 1e6:.2f} MB "
          "over the network, largest " + ", ".join(f"{name} {size / 1e6:.3f} MB" for size, name in largest))
    # Each step: median over the runs of the time (from the start of boot) at which it ended.
    # Steps overlap: the wheel, the adapter and numpy's download run while Pyodide starts.
    stages = {}
    for boot, *_ in boots:
        for name, at in boot["timings"].items():
            stages.setdefault(name, []).append(at)
    medians = sorted((statistics.median(at), name) for name, at in stages.items())
    print("  step ends at (median ms): " + ", ".join(f"{name} {at:.0f}" for at, name in medians))
    print(f"  auto picked {info['device']}: {info['reason']}")
    print(f"  Python: {info.get('pythonStart')}; images from: {info.get('imagesFrom')}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--url", help="a running site (default: start python -m server on a free port)")
    parser.add_argument("--boots", type=int, default=3, help="cold (and warm) boots to time")
    parser.add_argument("--no-webgpu", action="store_true", help="leave out the WebGPU runners")
    parser.add_argument("--boot-only", action="store_true", help="time the boots only, no tasks")
    parser.add_argument("--load", type=int, default=0, metavar="N",
                        help="with --boot-only: time the boots quiet, then with N CPU-burning background processes")
    parser.add_argument("--load-limit", type=float, default=600, metavar="S",
                        help="the burners stop by themselves after this many seconds (default 600)")
    parser.add_argument("--task", action="append", default=[],
                        help="run only tasks whose name contains this (repeatable), e.g. --task 'cnn step'")
    args = parser.parse_args()
    if args.load and not args.boot_only:
        parser.error("--load goes with --boot-only (tasks under load would time the burners)")
    if args.load < 0:
        parser.error("--load must be 0 or more")
    from playwright.sync_api import sync_playwright

    process = None
    url = args.url.rstrip("/") + "/" if args.url else None
    if url is None:
        process, url = start_server()
    try:
        with sync_playwright() as playwright:
            browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS, headless=True)
            cold, warm = measure_boot(playwright, url, args.boots)
            print_boots("cold", cold)
            print_boots("warm (second visit)", warm)
            if args.load:
                with Load(args.load, args.load_limit):
                    busy_cold, busy_warm = measure_boot(playwright, url, args.boots)
                print_boots(f"cold, {args.load} burners", busy_cold)
                print_boots(f"warm, {args.load} burners", busy_warm)
                for label, quiet, busy in (("cold", cold, busy_cold), ("warm", warm, busy_warm)):
                    q, b = (statistics.median(boot[0]["ms"] for boot in boots) for boots in (quiet, busy))
                    print(f"{label} boot median: quiet {q:.0f} ms, with {args.load} burners {b:.0f} ms: x{b / q:.2f}")
            for backend in ("wasm",) if args.no_webgpu else ("wasm", "webgpu"):
                tfjs, fetched = measure_tfjs_boot(browser, url, backend)
                print(f"TF.js {backend} start, cold: scripts loaded at {tfjs['scriptsMs']:.0f} ms, then "
                      f"setBackend + ready {tfjs['backendMs']:.0f} ms; fetched {fetched / 1e6:.2f} MB")
            if args.boot_only:
                return
            page = browser.new_page()
            page.goto(url + "bench.html")
            page.wait_for_selector("body[data-ready=true]")
            adapter = page.evaluate("window.webgradBench.adapterInfo()")
            print(f"TF.js {page.evaluate('window.webgradBench.tfjsVersion')}; WebGPU adapter: {adapter}")
            tasks = page.evaluate("window.webgradBench.tasks")
            rows = []
            for index in range(len(tasks)):
                if args.no_webgpu and "webgpu" in tasks[index]["runner"]:
                    continue
                if args.task and not any(name in tasks[index]["task"] for name in args.task):
                    continue
                row = page.evaluate("(i) => window.webgradBench.runTask(i)", index)
                rows.append(row)
                shown = f"{row['ms']:9.2f} ms" if row["ms"] is not None else f"   failed: {row.get('error')}"
                print(f"  {row['task']:16s} {row['runner']:28s} {shown}", flush=True)
            browser.close()
    finally:
        if process is not None:
            process.terminate()
            process.wait(10)

    print("\nratios (time of webgrad / time of the peer's backend of the same kind, TF.js's and jax-js's;\n"
          "< 1 means webgrad is faster; - where a runner has no time):")
    by_key = {(r["task"], r["runner"]): r["ms"] for r in rows}
    for task in dict.fromkeys(r["task"] for r in rows):
        for ours, peers in PEERS.items():
            mine = by_key.get((task, ours))
            if not mine:
                continue
            ratios = []
            for peer in peers:
                theirs = by_key.get((task, peer))
                ratios.append(f"/ {peer:13s} = " + (f"{mine / theirs:6.2f}" if theirs else "     -"))
            print(f"  {task:16s} {ours:28s} " + "   ".join(ratios))


if __name__ == "__main__":
    main()
