"""Build the webgrad wheel from the working tree, for the browser to install.

The wheel is rebuilt when any file under ``core/`` or ``wgsl_kernels/`` (or
``pyproject.toml``, or this recipe) is newer than it. Its modules ship with bytecode
compiled by Pyodide's interpreter (``add_bytecode``). The build runs on a fresh copy of those
files in a temporary folder: building in place would reuse setuptools'
``build/lib``, which keeps modules that were deleted since, and ship them.

Next to the wheel, ``latest.json`` names it::

    {"name": "webgrad", "version": "0.1.0", "file": "webgrad-0.1.0-py3-none-any.whl",
     "url": "/wheels/<sha256[:16]>/webgrad-0.1.0-py3-none-any.whl",
     "sha256": "...", "size": 12345}

``url`` is content-addressed, so browsers may cache it forever; the plain
``/wheels/<file>`` always has the newest build and is revalidated instead.

``image`` ({"file", "url", "sha256"}, the url pinned the same way, the digest of the image,
which the server sends gzip-encoded, or brotli-encoded from its ``.br`` sidecar) is the same
files in the form the page installs without unzipping in Python (``write_image``).
"""
from __future__ import annotations

import base64
import gzip
import hashlib
import json
import os
import shutil
import struct
import subprocess
import sys
import tempfile
import threading
import time
import tomllib
import zipfile
from pathlib import Path

from . import compress

REPO = Path(__file__).resolve().parent.parent
SOURCES = ("core", "wgsl_kernels")
PROJECT_FILES = ("pyproject.toml", "README.md")
RECIPE_FILES = ("server/wheel.py", "server/pyc.mjs")  # a change in how the wheel is made rebuilds it too
# The image is rebuilt on every change to core/ while the server runs: a brotli setting that
# takes a fraction of a second (9: ~840 KB; 11 would save 70 KB more in ~10 s).
IMAGE_BROTLI_QUALITY = 9


class WheelBuildError(RuntimeError):
    pass


# The wasm kernels (core/backend/numpy/wasm_gemm/gemm.c): built into the wheel's copy of the
# sources, never into the tree, so the wheel always matches the C it came from.
# zig's clang is deterministic: the same source and flags give the same bytes.
WASM_SOURCE = Path("core", "backend", "numpy", "wasm_gemm", "gemm.c")
WASM_FLAGS = ["--target=wasm32-freestanding", "-O3", "-g0", "-msimd128", "-nostdlib", "-Wl,--no-entry",
              "-Wl,--strip-all", "-Wl,--export-memory", "-Wl,--export=__heap_base"]
WASM_BUILDS = {"gemm_simd.wasm": [], "gemm_relaxed.wasm": ["-mrelaxed-simd", "-DRELAXED"]}


def compile_wasm(source_root: Path) -> list[Path]:
    """Compile the C kernel under ``source_root`` into its folder; return the .wasm paths."""
    source = source_root / WASM_SOURCE
    built = []
    for name, extra in WASM_BUILDS.items():
        target = source.parent / name
        # Relative paths: the temporary folder's name would otherwise end up in the module.
        command = [sys.executable, "-m", "ziglang", "cc", *WASM_FLAGS, *extra, "-o", name, source.name]
        try:
            result = subprocess.run(command, capture_output=True, text=True, cwd=source.parent)
        except OSError as error:
            raise WheelBuildError(f"compiling {WASM_SOURCE} failed: {error}") from error
        if result.returncode != 0:
            hint = ("; install zig's compiler with `pip install ziglang` (scripts/install-deps does)"
                    if "No module named ziglang" in result.stderr else "")
            raise WheelBuildError(f"compiling {WASM_SOURCE} into {name} failed{hint}:\n{result.stderr}")
        built.append(target)
    return built


def project_version(repo: Path = REPO) -> tuple[str, str]:
    try:
        with open(repo / "pyproject.toml", "rb") as file:
            project = tomllib.load(file)["project"]
        return project["name"], project["version"]
    except (OSError, KeyError, tomllib.TOMLDecodeError) as error:  # e.g. caught mid-save by an editor
        raise WheelBuildError(f"pyproject.toml has no readable [project] name and version ({error!r})") from error


def wheel_file_name(repo: Path = REPO) -> str:
    name, version = project_version(repo)
    return f"{name.replace('-', '_')}-{version}-py3-none-any.whl"


def _source_files(repo: Path):
    for top in SOURCES:
        for directory, subdirs, files in os.walk(repo / top):
            # Python writes __pycache__ on every import; it must never trigger a rebuild.
            subdirs[:] = [d for d in subdirs if d != "__pycache__" and not d.startswith(".")]
            for file in files:
                if not file.endswith((".pyc", ".pyo")):
                    yield Path(directory, file)
    for file in PROJECT_FILES + RECIPE_FILES:
        if (repo / file).exists():
            yield repo / file


def newest_source_mtime(repo: Path = REPO) -> float:
    return max((path.stat().st_mtime for path in _source_files(repo)), default=0.0)


def sha256_of(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as file:
        for chunk in iter(lambda: file.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def is_stale(out_dir: Path, repo: Path = REPO) -> bool:
    wheel = out_dir / wheel_file_name(repo)
    latest = out_dir / "latest.json"
    if not wheel.exists() or not latest.exists():
        return True
    try:
        current = json.loads(latest.read_text())
        if current["file"] != wheel.name or not (out_dir / current["image"]["file"]).exists():
            return True
    except (ValueError, KeyError, TypeError):
        return True
    return newest_source_mtime(repo) > wheel.stat().st_mtime


def build_wheel(out_dir: Path, repo: Path = REPO, log=print) -> Path:
    """Build the wheel into ``out_dir`` (atomically replacing an older one) and write latest.json."""
    out_dir.mkdir(parents=True, exist_ok=True)
    target_name = wheel_file_name(repo)
    started = time.time()
    with tempfile.TemporaryDirectory(prefix="webgrad-wheel-") as temp:
        source = Path(temp, "src")
        source.mkdir()
        for top in SOURCES:
            shutil.copytree(repo / top, source / top,
                            ignore=shutil.ignore_patterns("__pycache__", "*.pyc", ".*"))
        for file in PROJECT_FILES:
            if (repo / file).exists():
                shutil.copy2(repo / file, source / file)
        compile_wasm(source)
        built = Path(temp, "dist")
        # --no-build-isolation: use the setuptools already installed, so this
        # works offline; --no-deps: numpy comes from Pyodide, not from here.
        command = [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation",
                   "--no-cache-dir", "-q", "-w", str(built), str(source)]
        result = subprocess.run(command, capture_output=True, text=True)
        wheels = list(built.glob("*.whl")) if built.exists() else []
        if result.returncode != 0 or len(wheels) != 1:
            raise WheelBuildError("building the webgrad wheel failed:\n" + result.stdout + result.stderr)
        if wheels[0].name != target_name:
            raise WheelBuildError(f"expected {target_name}, pip built {wheels[0].name}")
        temp_target = out_dir / (target_name + ".tmp")
        add_bytecode(wheels[0], temp_target, Path(temp, "unpacked"), repo)
        os.replace(temp_target, out_dir / target_name)
    wheel = out_dir / target_name
    write_latest(out_dir, wheel, write_image(wheel), repo)
    log(f"assets: built {wheel.name} ({wheel.stat().st_size} bytes) in {time.time() - started:.1f} s")
    return wheel


def add_bytecode(wheel: Path, target: Path, scratch: Path, repo: Path = REPO) -> None:
    """Write ``wheel`` to ``target`` with a ``__pycache__`` .pyc for every module, compiled by
    Pyodide's interpreter (server/pyc.mjs), each listed in the wheel's RECORD."""
    with zipfile.ZipFile(wheel) as archive:
        archive.extractall(scratch)
        names = archive.namelist()
    pyodide_dir = repo / "node_modules" / "pyodide"
    command = ["node", str(repo / "server" / "pyc.mjs"), str(pyodide_dir), str(scratch)]
    try:
        result = subprocess.run(command, capture_output=True, text=True, timeout=300)
    except (OSError, subprocess.TimeoutExpired) as error:
        raise WheelBuildError(f"compiling the wheel's bytecode with Pyodide failed ({error}); node and "
                              f"{pyodide_dir} are needed (scripts/install-deps installs them)") from error
    if result.returncode != 0:
        raise WheelBuildError(f"compiling the wheel's bytecode with Pyodide failed:\n{result.stderr}")
    compiled = sorted(p.relative_to(scratch).as_posix() for p in scratch.rglob("__pycache__/*.pyc"))
    if len(compiled) != sum(name.endswith(".py") for name in names):
        raise WheelBuildError(f"Pyodide compiled {len(compiled)} modules of the wheel's "
                              f"{sum(name.endswith('.py') for name in names)}")
    record_name = next(name for name in names if name.endswith(".dist-info/RECORD"))
    with zipfile.ZipFile(target, "w", zipfile.ZIP_DEFLATED) as out:
        for name in [n for n in names if n != record_name] + compiled:
            out.write(scratch / name, name)
        record = (scratch / record_name).read_text().rstrip("\n").split("\n")
        for name in compiled:
            data = (scratch / name).read_bytes()
            digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
            record.insert(-1, f"{name},sha256={digest},{len(data)}")  # RECORD's own line stays last
        out.writestr(record_name, "\n".join(record) + "\n")


def image_path(wheel: Path) -> Path:
    return wheel.with_name(wheel.name.removesuffix(".whl") + ".img.gz")


def write_image(wheel: Path) -> str:
    """The wheel's files as one gzipped archive that the page writes straight into its file
    system (web/runtime/worker.js, ``installImage``): unzipping the wheel in Pyodide's Python
    took about 130 ms of every boot. Layout: a 4-byte little-endian header length, the header
    (JSON: {"wheel", "files": [[path, size], ...]}), then the files' bytes in order; gzipped
    (the server sends it gzip-encoded). Returns the sha256 of the image (not of the gzip)."""
    with zipfile.ZipFile(wheel) as archive:
        entries = [info for info in archive.infolist() if not info.is_dir()]
        contents = [archive.read(info) for info in entries]
    header = json.dumps({"wheel": wheel.name,
                         "files": [[info.filename, len(data)] for info, data in zip(entries, contents)]}).encode()
    raw = struct.pack("<I", len(header)) + header + b"".join(contents)
    image = image_path(wheel)
    temp = image.with_name(image.name + ".tmp")
    temp.write_bytes(gzip.compress(raw, mtime=0))
    os.replace(temp, image)
    compress.write_sidecars(image, IMAGE_BROTLI_QUALITY)
    return hashlib.sha256(raw).hexdigest()


def write_latest(out_dir: Path, wheel: Path, image_sha256: str, repo: Path = REPO) -> dict:
    name, version = project_version(repo)
    digest = sha256_of(wheel)
    image = image_path(wheel)
    latest = {"name": name, "version": version, "file": wheel.name,
              "url": f"/wheels/{digest[:16]}/{wheel.name}",
              "sha256": digest, "size": wheel.stat().st_size,
              "image": {"file": image.name, "url": f"/wheels/{digest[:16]}/{image.name}",
                        "sha256": image_sha256}}
    temp = out_dir / "latest.json.tmp"
    temp.write_text(json.dumps(latest, indent=2) + "\n")
    os.replace(temp, out_dir / "latest.json")
    return latest


def ensure_wheel(out_dir: Path, repo: Path = REPO, log=print) -> Path:
    """Build the wheel if it is missing or older than the sources; return its path."""
    if is_stale(out_dir, repo):
        return build_wheel(out_dir, repo, log)
    return out_dir / wheel_file_name(repo)


class WheelKeeper:
    """Keeps the served wheel current while the server runs (one build at a time).

    Checking the sources costs a walk over ~100 files, so it happens at most
    once per ``interval_s`` seconds.
    """

    def __init__(self, out_dir: Path, repo: Path = REPO, interval_s: float = 1.0, log=print):
        self.out_dir, self.repo, self.interval_s, self.log = out_dir, repo, interval_s, log
        self._lock = threading.Lock()
        self._checked_at = 0.0
        self._latest: dict | None = None
        self._latest_mtime = 0

    def latest(self) -> dict:
        """Return latest.json's content, rebuilding first if the sources changed.

        latest.json is re-read whenever its mtime changes: another process (the asset
        step, a test fixture) may rebuild the wheel while this server runs.
        """
        with self._lock:
            now = time.monotonic()
            if self._latest is None or now - self._checked_at >= self.interval_s:
                if is_stale(self.out_dir, self.repo):
                    build_wheel(self.out_dir, self.repo, self.log)
                mtime = (self.out_dir / "latest.json").stat().st_mtime_ns
                if self._latest is None or mtime != self._latest_mtime:
                    self._latest = json.loads((self.out_dir / "latest.json").read_text())
                    self._latest_mtime = mtime
                self._checked_at = now
            return dict(self._latest)
