"""Helpers for tests that talk to a real server over loopback.

- ``running_server(app)``: uvicorn in a background thread on a free port of
  127.0.0.1; yields the base URL and stops the server afterwards.
- ``running_server_process(args)``: ``python -m server`` in a subprocess (its own
  GIL, for load tests); yields the base URL.
- ``raw_request(base, target)``: send a request line exactly as written (no
  client-side normalisation of ``..`` or ``%2e``, unlike httpx or curl) and return
  ``(status, headers, body)``.
- ``make_fake_site(top, secret)``: a small site in a temporary folder (web/ with
  symlinks pointing in and out, one into a sibling web-private/, fake
  Pyodide/TF.js files, a secret file outside every root) and the ``Settings``
  that serve it.
- ``safetensors_bytes(...)``: a small valid file made with webgrad itself.
"""
from __future__ import annotations

import contextlib
import importlib.util
import os
import socket
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from urllib.parse import urlsplit

REPO = Path(__file__).resolve().parent.parent
WASM_MAGIC = b"\x00asm\x01\x00\x00\x00"
HTTP_IMPL = "httptools" if importlib.util.find_spec("httptools") else "h11"


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def wait_for_port(port: int, timeout_s: float = 20.0, process: subprocess.Popen | None = None) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if process is not None and process.poll() is not None:
            raise RuntimeError(f"server exited with code {process.returncode} before listening")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                return
        except OSError:
            time.sleep(0.05)
    raise TimeoutError(f"nothing listened on 127.0.0.1:{port} within {timeout_s} s")


@contextlib.contextmanager
def running_server(app):
    """Serve ``app`` with uvicorn on a free loopback port, in a thread; yield the base URL.

    The server runs with the limits of ``app.state.settings`` (as ``python -m server`` does).
    """
    import uvicorn

    from .limits import uvicorn_config

    port = free_port()
    config = uvicorn_config(app, "127.0.0.1", port, app.state.settings, http=HTTP_IMPL, log_level="warning",
                            lifespan="off")
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, name=f"uvicorn:{port}", daemon=True)
    thread.start()
    try:
        deadline = time.monotonic() + 20
        while not server.started:
            if not thread.is_alive() or time.monotonic() > deadline:
                raise RuntimeError("uvicorn did not start")
            time.sleep(0.02)
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(timeout=10)


@contextlib.contextmanager
def running_server_process(extra_args=(), env: dict | None = None, open_files: int | None = None):
    """``python -m server`` on a free loopback port in a subprocess; yield the base URL.

    ``open_files`` lowers the server's open-file limit (RLIMIT_NOFILE) to that many.
    """
    port = free_port()
    command = [sys.executable, "-m", "server", "--host", "127.0.0.1", "--port", str(port),
               "--log-level", "warning", *extra_args]

    def limit_files():
        import resource

        _soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
        resource.setrlimit(resource.RLIMIT_NOFILE, (open_files, hard))

    # The log goes to a file: an unread pipe fills up, and the server then blocks on its
    # next log line (asyncio logs every failed accept when file descriptors run out).
    log = tempfile.TemporaryFile()
    process = subprocess.Popen(command, cwd=REPO, env={**os.environ, **(env or {})},
                               stdout=subprocess.DEVNULL, stderr=log,
                               preexec_fn=limit_files if open_files else None)
    try:
        try:
            wait_for_port(port, process=process)
        except Exception:
            process.kill()
            process.wait()
            log.seek(0)
            raise RuntimeError("server did not start:\n" + log.read()[-4000:].decode(errors="replace")) from None
        yield f"http://127.0.0.1:{port}"
    finally:
        log.close()
        if process.poll() is None:
            process.terminate()
            try:
                process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()


def raw_request(base: str, target: bytes | str, method: str = "GET", headers: dict | None = None,
                body: bytes = b"", timeout_s: float = 10.0) -> tuple[int, dict, bytes]:
    """Send ``METHOD target HTTP/1.1`` verbatim and read the whole answer (Connection: close).

    Returns ``(status, headers with lower-case names, body)``; status 0 means the
    server closed the connection without an answer.
    """
    parts = urlsplit(base)
    if isinstance(target, str):
        target = target.encode("latin-1")
    lines = [method.encode() + b" " + target + b" HTTP/1.1", f"Host: {parts.netloc}".encode(),
             b"Connection: close"]
    for name, value in (headers or {}).items():
        lines.append(f"{name}: {value}".encode("latin-1"))
    if body:
        lines.append(f"Content-Length: {len(body)}".encode())
    request = b"\r\n".join(lines) + b"\r\n\r\n" + body
    with socket.create_connection((parts.hostname, parts.port), timeout=timeout_s) as sock:
        sock.sendall(request)
        chunks = []
        while True:
            try:
                chunk = sock.recv(65536)
            except ConnectionResetError:
                break
            if not chunk:
                break
            chunks.append(chunk)
    data = b"".join(chunks)
    if not data:
        return 0, {}, b""
    head, _, payload = data.partition(b"\r\n\r\n")
    status_line, *header_lines = head.decode("latin-1").split("\r\n")
    status = int(status_line.split(" ")[1])
    response_headers = {}
    for line in header_lines:
        name, _, value = line.partition(":")
        response_headers[name.strip().lower()] = value.strip()
    if response_headers.get("transfer-encoding", "").lower() == "chunked":
        payload = _dechunk(payload)
    return status, response_headers, payload


def _dechunk(data: bytes) -> bytes:
    out, position = [], 0
    while True:
        end = data.index(b"\r\n", position)
        size = int(data[position:end].split(b";")[0], 16)
        if size == 0:
            return b"".join(out)
        out.append(data[end + 2:end + 2 + size])
        position = end + 2 + size + 2


def safetensors_bytes(seed: int = 0, shape=(4, 3), metadata: dict | None = None) -> bytes:
    """A small valid safetensors file (``weight`` and ``bias``) written by webgrad."""
    import numpy as np

    import webgrad
    from webgrad import serialize

    rng = np.random.default_rng(seed)
    state = {"weight": webgrad.tensor(rng.standard_normal(shape).astype(np.float32)),
             "bias": webgrad.tensor(rng.standard_normal(shape[0]).astype(np.float32))}
    return serialize.save_bytes(state, metadata)


def make_fake_site(top: Path, secret: str, max_upload: int = 64 * 1024):
    """Build a site under ``top`` and return the ``server.app.Settings`` that serve it."""
    from .app import Settings

    (top / "secret.txt").write_text(secret)
    outside = top / "outside"
    outside.mkdir()
    (outside / "also-secret.txt").write_text(secret)
    web = top / "web"
    (web / "demos").mkdir(parents=True)
    (web / "index.html").write_text("<!doctype html><title>webgrad</title>")
    (web / "webgrad.js").write_text("export const hello = 1;\n")
    (web / "worker.mjs").write_text("self.onmessage = () => {};\n")
    (web / "style.css").write_text("body {}\n")
    (web / "demos" / "index.html").write_text("<!doctype html><title>demos</title>")
    (web / ".env").write_text(secret)
    os.symlink(top / "secret.txt", web / "leak.txt")
    os.symlink(outside, web / "leakdir")
    os.symlink("webgrad.js", web / "alias.js")  # stays inside the root: allowed
    os.symlink("loop", web / "loop")  # points at itself
    # A sibling whose name starts like the root's: outside it, though "web-private"
    # starts with "web" as a string.
    (top / "web-private").mkdir()
    (top / "web-private" / "secret.txt").write_text(secret)
    os.symlink(top / "web-private", web / "private")
    assets = top / "assets"
    for folder in ("pyodide", "pyodide-extra", "vendor/tfjs"):
        (assets / folder).mkdir(parents=True)
    empty_zip = b"PK\x05\x06" + b"\x00" * 18
    (assets / "pyodide" / "pyodide.asm.wasm").write_bytes(WASM_MAGIC + b"\x00" * 8)
    (assets / "pyodide" / "pyodide.js").write_text("var loadPyodide;\n")
    (assets / "pyodide" / "pyodide.mjs").write_text("export {};\n")
    (assets / "pyodide" / "pyodide-lock.json").write_text('{"packages": {}}')
    (assets / "pyodide" / "python_stdlib.zip").write_bytes(empty_zip)
    (assets / "pyodide" / "snapshot.json").write_text('{"file": "snapshot-0000000000000000.bin.gz", "jspi": "new"}')
    (assets / "pyodide" / "numpy-image.json").write_text('{"file": "numpy-0000000000000000.img.gz"}')
    (assets / "pyodide-extra" / "demo-1.0-py3-none-any.whl").write_bytes(empty_zip)
    (assets / "pyodide-extra" / "index.json").write_text('{"packages": []}')
    (assets / "vendor" / "tfjs" / "tf.min.js").write_text("var tf;\n")
    (assets / "vendor" / "tfjs" / "tfjs-backend-wasm.wasm").write_bytes(WASM_MAGIC)
    return Settings(web_root=web, assets_root=assets, data_dir=top / "data", max_upload=max_upload)
