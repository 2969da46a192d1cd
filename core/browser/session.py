"""The pieces behind ``python -m webgrad.browser``: the site, Chromium, the runtime in a page.

- ``Site``: the webgrad site at ``url`` (a running ``make serve``), or, without one, a
  server started from this webgrad checkout on a free loopback port. The server and the
  browser assets (Pyodide, the wheel) are part of a checkout, not of the wheel.
- ``find_chromium``: ``--chromium``, then ``$WEBGRAD_CHROMIUM``, then a Playwright-installed
  Chromium, then one on ``PATH``. Nothing is downloaded.
- ``BrowserSession``: headless Chromium (through Playwright) on ``/runner.html``, which
  boots the runtime; stdout, stderr and ``webgrad_progress`` events reach ``on_output``
  as they happen; ``run(code)`` runs Python source in the page, ``call(function, *args)``
  a function of ``webgrad.web.runner`` there (files in and out as zips, scripts, pytest).
"""
from __future__ import annotations

import base64
import glob
import io
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
import zipfile
from pathlib import Path
from typing import Any, Callable

CHROMIUM_ARGS = ["--enable-unsafe-webgpu", "--no-sandbox", "--disable-background-networking",
                 "--disable-component-update", "--no-first-run"]
BOOT_TIMEOUT_S = 120
WORKDIR = "/home/pyodide/work"


class BrowserError(RuntimeError):
    """The browser side could not be set up: no Chromium, no site, no WebGPU, no boot."""


def checkout_root() -> Path | None:
    """The webgrad checkout this package runs from (editable install), if it is one."""
    root = Path(__file__).resolve().parents[2]
    return root if (root / "server" / "app.py").is_file() and (root / "core").is_dir() else None


def find_chromium(explicit: str | None = None) -> str:
    for given in (explicit, os.environ.get("WEBGRAD_CHROMIUM")):
        if given:
            if not os.path.exists(given):
                raise BrowserError(f"no Chromium at {given} (from --chromium or WEBGRAD_CHROMIUM)")
            return given
    cache = os.environ.get("PLAYWRIGHT_BROWSERS_PATH", os.path.expanduser("~/.cache/ms-playwright"))
    installed = sorted(glob.glob(os.path.join(cache, "chromium-*", "chrome-linux*", "chrome")))
    if installed:
        return installed[-1]
    for name in ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable"):
        found = shutil.which(name)
        if found:
            return found
    raise BrowserError("no Chromium found: install one (Debian/Ubuntu: `apt-get install chromium`; or "
                       "`playwright install chromium` where downloads work), or name it with --chromium PATH "
                       "or WEBGRAD_CHROMIUM")


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _answers(url: str) -> bool:
    try:  # generous: the server may be rebuilding the webgrad wheel for this request
        with urllib.request.urlopen(url, timeout=30) as response:
            return response.status == 200
    except OSError:
        return False


class Site:
    """The webgrad site: ``url`` if given, else a fresh server from this checkout (``close()`` stops it)."""

    def __init__(self, url: str | None = None):
        self.url = url.rstrip("/") + "/" if url else None
        self._process: subprocess.Popen | None = None
        self._data: tempfile.TemporaryDirectory | None = None
        self._log: Any = None

    def __enter__(self) -> "Site":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.close()

    def start(self) -> "Site":
        if self.url:
            if not _answers(self.url + "wheels/latest.json"):
                raise BrowserError(f"no webgrad site answers at {self.url} (is `make serve` running there?)")
            return self
        repo = checkout_root()
        if repo is None:
            raise BrowserError("no site to run in: pass --url http://HOST:PORT/ of a running webgrad site "
                               "(`make serve` in a webgrad checkout); the server is not part of the wheel")
        assets = subprocess.run([sys.executable, "-m", "server.assets"], cwd=repo, capture_output=True, text=True)
        if assets.returncode != 0:
            raise BrowserError("the browser assets could not be prepared (`python -m server.assets`):\n"
                               + (assets.stdout + assets.stderr)[-3000:])
        port = _free_port()
        self._data = tempfile.TemporaryDirectory(prefix="webgrad-browser-")
        self._log = tempfile.TemporaryFile()
        self._process = subprocess.Popen(
            [sys.executable, "-m", "server", "--port", str(port), "--data", self._data.name,
             "--log-level", "warning"], cwd=repo, stdout=self._log, stderr=subprocess.STDOUT)
        self.url = f"http://127.0.0.1:{port}/"
        deadline = time.monotonic() + 60
        while not _answers(self.url + "wheels/latest.json"):
            if self._process.poll() is not None or time.monotonic() > deadline:
                self._log.seek(0)
                output = self._log.read().decode(errors="replace")[-3000:]
                self.close()
                raise BrowserError(f"the webgrad server did not start:\n{output}")
            time.sleep(0.2)
        return self

    def close(self) -> None:
        if self._process is not None:
            self._process.terminate()
            try:
                self._process.wait(10)
            except subprocess.TimeoutExpired:
                self._process.kill()
            self._process = None
        if self._log is not None:
            self._log.close()
            self._log = None
        if self._data is not None:
            self._data.cleanup()
            self._data = None


def _write_stream(kind: str, text: str) -> None:
    if kind == "progress":
        sys.stderr.write(f"webgrad_progress: {text}\n")
        sys.stderr.flush()
        return
    stream = sys.stderr if kind == "stderr" else sys.stdout
    stream.write(text)
    stream.flush()


def zip_files(files: dict[str, bytes]) -> str:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
        for name, data in sorted(files.items()):
            archive.writestr(name, data)
    return base64.b64encode(buffer.getvalue()).decode()


def unzip_files(encoded: str) -> dict[str, bytes]:
    with zipfile.ZipFile(io.BytesIO(base64.b64decode(encoded))) as archive:
        return {name: archive.read(name) for name in archive.namelist()}


def collect(paths, base: Path | None = None) -> dict[str, bytes]:
    """Files under ``paths`` (files or folders), keyed by their path relative to ``base``
    (the current folder) when inside it, else by their name; caches and hidden names skipped."""
    base = (base or Path.cwd()).resolve()
    found: dict[str, bytes] = {}
    for given in paths:
        path = Path(given).resolve()
        if not path.exists():
            raise BrowserError(f"{given}: no such file or folder")
        top = path.parent
        root = base if path.is_relative_to(base) else top
        for file in ([path] if path.is_file() else sorted(path.rglob("*"))):
            relative = file.relative_to(root)
            if file.is_file() and not any(part.startswith(".") or part == "__pycache__" for part in relative.parts):
                found[relative.as_posix()] = file.read_bytes()
    return found


RUNNER = "webgrad.web.runner"  # the wheel's module the driver calls in the page (files, scripts, pytest)


def _ms(timeout_s: float | None) -> int | None:
    return None if timeout_s is None else int(timeout_s * 1000)


def _value(out: dict):
    if "error" in out:
        error = out["error"]
        raise BrowserError(error["traceback"] or error["message"])
    return out["result"]


class BrowserSession:
    """Headless Chromium with one page whose runtime has booted (``close()`` ends it)."""

    def __init__(self, site_url: str, device: str = "auto", chromium: str | None = None, headed: bool = False,
                 on_output: Callable[[str, str], None] | None = _write_stream):
        if device not in ("auto", "cpu", "webgpu"):
            raise BrowserError(f"device must be auto, cpu or webgpu, not {device!r}")
        self.site_url = site_url.rstrip("/") + "/"
        self.requested = device
        self.chromium = find_chromium(chromium)
        self.headed = headed
        self.on_output = on_output
        self.console: list[str] = []
        self.device = self.device_reason = None
        self._playwright: Any = None
        self._browser: Any = None
        self.page: Any = None

    def __enter__(self) -> "BrowserSession":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.close()

    def start(self) -> "BrowserSession":
        try:
            from playwright.sync_api import sync_playwright
        except ImportError as err:
            raise BrowserError("webgrad.browser drives Chromium through Playwright: pip install playwright "
                               "(its browser download is not needed)") from err
        self._playwright = sync_playwright().start()
        try:
            self._browser = self._playwright.chromium.launch(executable_path=self.chromium, args=CHROMIUM_ARGS,
                                                             headless=not self.headed)
            # The site's CSP forbids eval, which Playwright's own waiting and evaluation use.
            self.page = self._browser.new_context(bypass_csp=True).new_page()
            self.page.on("console", lambda m: self.console.append(f"{m.type}: {m.text}"))
            self.page.on("pageerror", lambda e: self.console.append(f"pageerror: {e}"))
            self.page.expose_function("webgradRunnerOutput", self._output)
            self._boot()
        except BaseException:
            self.close()
            raise
        return self

    def _output(self, kind: str, text: str) -> None:
        if self.on_output is not None:
            self.on_output(kind, text)

    def _boot(self) -> None:
        self.page.goto(f"{self.site_url}runner.html?device={self.requested}")
        try:
            self.page.wait_for_function("window.webgradRuntime || window.webgradBootError",
                                        timeout=BOOT_TIMEOUT_S * 1000)
        except Exception as err:
            raise BrowserError(f"the runtime did not boot within {BOOT_TIMEOUT_S} s: {err}\n"
                               + "\n".join(self.console[-20:])) from err
        failure = self.page.evaluate("window.webgradBootError ? String(window.webgradBootError) : null")
        if failure:
            raise BrowserError(f"the runtime failed to boot: {failure}")
        info = self.page.evaluate("({device: webgradRuntime.device, reason: webgradRuntime.deviceReason})")
        self.device, self.device_reason = info["device"], info["reason"]
        if self.requested == "webgpu" and self.device != "webgpu":
            raise BrowserError(f"no WebGPU in headless Chromium ({self.device_reason}); on a machine without a "
                               f"GPU install Mesa's Vulkan drivers (apt-get install mesa-vulkan-drivers), or use "
                               f"--device cpu")

    def run(self, code: str, timeout_s: float | None = None) -> dict:
        """Run ``code`` in the page: ``{"result": value}``, ``{"error": {...}}`` for a Python exception,
        or ``{"timed_out": True}`` after ``timeout_s`` (the run is interrupted first)."""
        return self.page.evaluate("args => webgradRunner.run(args)", [code, _ms(timeout_s)])

    def call(self, function: str, *args, timeout_s: float | None = None, module: str = RUNNER) -> dict:
        """``module.function(*args)`` in the page (``runtime.call``: no source is built), answered as ``run``."""
        return self.page.evaluate("args => webgradRunner.call(args)", [module, function, list(args), _ms(timeout_s)])

    def ok(self, code: str):
        """The value of ``code``; a Python exception raises BrowserError with the page's traceback."""
        return _value(self.run(code))

    def call_ok(self, function: str, *args):
        """The value of ``webgrad.web.runner.function(*args)`` in the page, as ``ok``."""
        return _value(self.call(function, *args))

    def put_files(self, files: dict[str, bytes], target: str = WORKDIR) -> None:
        """Copy ``files`` under ``target`` in the page, which joins ``sys.path`` there."""
        self.call_ok("put", zip_files(files), target)

    def snapshot(self, top: str = WORKDIR) -> None:
        self.call_ok("snapshot", top)

    def changed_files(self, top: str = WORKDIR) -> dict[str, bytes]:
        """Files under ``top`` written since ``snapshot()``."""
        return unzip_files(self.call_ok("changed", top))

    def close(self) -> None:
        for stop in (self._browser and self._browser.close, self._playwright and self._playwright.stop):
            if stop:
                try:
                    stop()
                except Exception:  # already gone (Chromium crashed or was closed): nothing left to free
                    pass
        self._browser = self._playwright = self.page = None
