"""webgrad in the browser vs TensorFlow.js 4.22, side by side in one headless Chromium.

    python bench/browser_bench.py            # starts the site on a free port
    python bench/browser_bench.py --url http://127.0.0.1:8000/   # a running `make serve`

Prints the boot time (``boot()`` to ready, cold: a fresh browser context each
time) and, for the digits-MLP training step (64->128->10, batch 64, Adam, loss
read back every step) and N x N matmuls (result read back), milliseconds per
step for webgrad on WebGPU and on numpy-in-Pyodide, and TF.js on its WebGPU and
wasm backends, with ratios against the TF.js backend of the same kind. The page
is web/bench.html (open it in a browser to run the same thing by hand).
Compare ratios, not absolute times: here both WebGPU adapters are CPU emulations.
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
PEERS = {"webgrad webgpu": "tfjs webgpu", "webgrad cpu (numpy in Pyodide)": "tfjs wasm"}


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


def measure_boot(browser, url, runs):
    results = []
    for _ in range(runs):
        context = browser.new_context()  # its own HTTP cache: a cold boot
        page = context.new_page()
        page.goto(url + "bench.html")
        page.wait_for_selector("body[data-ready=true]")
        results.append(page.evaluate("window.webgradBench.bootTime()"))
        context.close()
    return results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--url", help="a running site (default: start python -m server on a free port)")
    parser.add_argument("--boots", type=int, default=3, help="cold boots to time")
    args = parser.parse_args()
    from playwright.sync_api import sync_playwright

    process = None
    url = args.url.rstrip("/") + "/" if args.url else None
    if url is None:
        process, url = start_server()
    try:
        with sync_playwright() as playwright:
            browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS, headless=True)
            boots = measure_boot(browser, url, args.boots)
            ms = [b["ms"] for b in boots]
            print(f"boot() to ready, cold, {len(ms)} runs: median {statistics.median(ms):.0f} ms "
                  f"(min {min(ms):.0f}, max {max(ms):.0f}); stages of the last: {boots[-1]['timings']}; "
                  f"auto picked {boots[-1]['device']}: {boots[-1]['reason']}")
            page = browser.new_page()
            page.goto(url + "bench.html")
            page.wait_for_selector("body[data-ready=true]")
            adapter = page.evaluate("window.webgradBench.adapterInfo()")
            print(f"TF.js {page.evaluate('window.webgradBench.tfjsVersion')}; WebGPU adapter: {adapter}")
            tasks = page.evaluate("window.webgradBench.tasks")
            rows = []
            for index in range(len(tasks)):
                row = page.evaluate("(i) => window.webgradBench.runTask(i)", index)
                rows.append(row)
                shown = f"{row['ms']:9.2f} ms" if row["ms"] is not None else f"   failed: {row.get('error')}"
                print(f"  {row['task']:12s} {row['runner']:32s} {shown}", flush=True)
            browser.close()
    finally:
        if process is not None:
            process.terminate()
            process.wait(10)

    print("\nratios (time of webgrad / time of the TF.js backend of the same kind; < 1 means webgrad is faster):")
    by_key = {(r["task"], r["runner"]): r["ms"] for r in rows}
    for task in dict.fromkeys(r["task"] for r in rows):
        for ours, peer in PEERS.items():
            mine, theirs = by_key.get((task, ours)), by_key.get((task, peer))
            if mine and theirs:
                print(f"  {task:12s} {ours:32s} / {peer:12s} = {mine / theirs:8.2f}")


if __name__ == "__main__":
    main()
