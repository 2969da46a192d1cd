"""Browser tests: the real site (``python -m server``) in headless Chromium.

A session starts the server on a free port (after ``python -m server.assets``)
and one headless Chromium, both through ``webgrad.browser`` (the runner users
call as ``python -m webgrad.browser``, so everything here tests it too); tests
open pages at http://127.0.0.1:PORT/ and drive the runtime (``web/runtime/webgrad.js``)
through the playground's ``window.webgradRuntime``.

Missing pieces (no chromium, no assets, no WebGPU adapter) skip the tests with
the reason outside CI; under ``CI=true`` they fail instead, so CI never passes
by skipping. ``WEBGRAD_BROWSER_TEST_URL=http://host:port/`` runs against an
already running server instead of starting one.
"""
from __future__ import annotations

import base64
import io
import json
import os
import pathlib
import socket
import zipfile

import pytest

from webgrad.browser.session import CHROMIUM_ARGS, BrowserError, Site, find_chromium

REPO = pathlib.Path(__file__).resolve().parents[2]
try:  # the same search as the user's runner: WEBGRAD_CHROMIUM, Playwright's, then PATH
    CHROMIUM: str | None = find_chromium()
    _CHROMIUM_MISSING = ""
except BrowserError as missing:
    CHROMIUM, _CHROMIUM_MISSING = None, str(missing)
IN_CI = os.environ.get("CI", "").lower() in ("1", "true", "yes")
BOOT_TIMEOUT_MS = 120_000


def require(condition, reason: str) -> None:
    """Skip with ``reason`` when ``condition`` is false; under CI=true fail instead."""
    if condition:
        return
    if IN_CI:
        pytest.fail(f"{reason} (CI=true: browser tests may not skip)", pytrace=False)
    pytest.skip(reason)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.fixture(scope="session")
def server_url():
    """Base URL (ending in /) of the site: a fresh ``python -m server`` on a free port, started
    by ``webgrad.browser.Site`` (what ``python -m webgrad.browser`` uses), or the running
    site named by WEBGRAD_BROWSER_TEST_URL."""
    try:
        site = Site(os.environ.get("WEBGRAD_BROWSER_TEST_URL")).start()
    except BrowserError as err:
        require(False, str(err))
    yield site.url
    site.close()


@pytest.fixture(scope="session")
def browser():
    """One headless Chromium, found and launched as ``python -m webgrad.browser`` does."""
    require(CHROMIUM is not None, _CHROMIUM_MISSING)
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        require(False, "the playwright package is not installed (pip install playwright)")
    with sync_playwright() as playwright:
        chromium = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS, headless=True)
        yield chromium
        chromium.close()


class Runtime:
    """Drives ``window.webgradRuntime`` (or another global holding a Runtime) on a page."""

    def __init__(self, page, name="webgradRuntime"):
        self.page = page
        self.name = name
        self.console = []
        page.on("console", lambda message: self.console.append(f"{message.type}: {message.text}"))
        page.on("pageerror", lambda error: self.console.append(f"pageerror: {error}"))

    def boot(self, url: str) -> dict:
        self.page.goto(url)
        try:
            self.page.wait_for_function(f"() => window.{self.name} || window.webgradBootError",
                                        timeout=BOOT_TIMEOUT_MS)
        except Exception as err:
            raise AssertionError(f"boot did not finish: {err}\nconsole:\n" + "\n".join(self.console[-30:])) from err
        failure = self.page.evaluate("window.webgradBootError ? String(window.webgradBootError) : null")
        assert failure is None, f"boot failed: {failure}\nconsole:\n" + "\n".join(self.console[-30:])
        return self.info()

    def info(self) -> dict:
        return self.page.evaluate(f"""() => {{
            const r = window.{self.name};
            return {{device: r.device, deviceReason: r.deviceReason, adapter: r.adapter, versions: r.versions,
                     timings: r.timings, pythonStart: r.pythonStart,
                     numpyFrom: r.numpyFrom, imagesFrom: r.imagesFrom, bootMs: r.bootMs, interruptMode: r.interruptMode,
                     crossOriginIsolated: self.crossOriginIsolated}};
        }}""")

    def evaluate(self, function: str, arg=None, timeout_s: float = 60.0):
        """``page.evaluate`` of an async JS ``function(arg)``, bounded: a hang fails this test
        after ``timeout_s`` instead of stalling the suite until pytest's timeout."""
        return self.page.evaluate(f"""async ([arg, ms]) => {{
            const timeout = new Promise((_, reject) =>
                setTimeout(() => reject(new Error(`timed out after ${{ms}} ms`)), ms));
            return await Promise.race([({function})(arg), timeout]);
        }}""", [arg, int(timeout_s * 1000)])

    def run(self, code: str, timeout_s: float = 120.0) -> dict:
        """{stdout, stderr, result, display} of ``code``, or {error: {message, traceback, pythonType, line, stdout}}."""
        return self.evaluate(f"""async (code) => {{
            try {{
                return await window.{self.name}.run(code);
            }} catch (err) {{
                return {{error: {{message: err.message, traceback: err.traceback || null,
                                  pythonType: err.pythonType || null, line: err.line ?? null,
                                  stdout: err.stdout || ""}}}};
            }}
        }}""", code, timeout_s)

    def ok(self, code: str, timeout_s: float = 120.0) -> dict:
        """Like run(), but a Python error fails the test with its traceback."""
        out = self.run(code, timeout_s)
        if "error" in out:
            error = out["error"]
            raise AssertionError(f"Python failed in the browser:\n{error['traceback'] or error['message']}\n"
                                 f"stdout:\n{error['stdout'][-4000:]}")
        return out


def zip_b64(files: dict[str, bytes]) -> str:
    """A zip of {path: bytes}, base64-encoded, for shipping files into Pyodide's file system."""
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
        for name, data in sorted(files.items()):
            archive.writestr(name, data)
    return base64.b64encode(buffer.getvalue()).decode()


def project_files(*patterns: str) -> dict[str, bytes]:
    """Files of the repository matching glob ``patterns`` (relative), by relative path."""
    found = {}
    for pattern in patterns:
        for path in REPO.glob(pattern):
            if path.is_file() and "__pycache__" not in path.parts:
                found[path.relative_to(REPO).as_posix()] = path.read_bytes()
    return found


def install_files_code(files: dict[str, bytes], target: str = "/home/pyodide/webgrad") -> str:
    """Python source that unpacks ``files`` under ``target`` and puts it first on sys.path."""
    return (f"import base64, io, sys, zipfile\n"
            f"zipfile.ZipFile(io.BytesIO(base64.b64decode({zip_b64(files)!r}))).extractall({target!r})\n"
            f"sys.path.insert(0, {target!r}) if {target!r} not in sys.path else None\n")


@pytest.fixture(scope="session")
def webgpu_runtime(browser, server_url):
    """One playground page booted with device='webgpu' (booting costs seconds, so tests share it)."""
    context = browser.new_context()
    page = context.new_page()
    runtime = Runtime(page)
    info = runtime.boot(server_url + "?device=webgpu")
    if info["device"] != "webgpu":
        reason = info["deviceReason"]
        # No adapter is the machine's limit (skip outside CI); anything else is a bug (fail).
        if "found no WebGPU adapter" in reason or "has no WebGPU" in reason:
            require(False, f"no WebGPU adapter in headless Chromium: {reason}")
        pytest.fail(f"WebGPU failed to start in the browser: {reason}", pytrace=False)
    yield runtime
    context.close()


__all__ = ["Runtime", "install_files_code", "json", "project_files", "require"]
