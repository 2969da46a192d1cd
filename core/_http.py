"""HTTP for ``webgrad.store``: one request path natively (urllib) and in Pyodide (``fetch``).

A caller writes its conversation with the server once, as a *plan*: a generator that
yields ``Request`` objects and receives ``Response`` objects. ``run`` drives a plan
synchronously (natively; in Pyodide through ``pyodide.ffi.run_sync``) and ``run_async``
drives it with ``await``. Failures to reach the server raise ``Unreachable``; a page
that cannot block raises ``CannotWait``. The caller turns both into its own errors.
"""
from __future__ import annotations

import secrets
import sys
import urllib.error
import urllib.request
from dataclasses import dataclass

TIMEOUT_S = 120.0
WRITE_HEADERS = {"X-Webgrad-Client": "1"}  # the webgrad server refuses writes without it


@dataclass
class Request:
    method: str
    url: str
    body: bytes | None = None
    content_type: str | None = None
    extra_headers: dict | None = None  # e.g. If-None-Match on a PUT that must not replace


@dataclass
class Response:
    status: int
    body: bytes


class Unreachable(Exception):
    """No answer from the server (refused, no route, timed out, fetch failed)."""

    def __init__(self, url: str, reason):
        super().__init__(f"{url}: {reason}")
        self.url, self.reason = url, reason


class CannotWait(Exception):
    """Blocking Python in a page that cannot suspend for ``fetch`` (no JSPI, or not entered asynchronously)."""


def headers(request: Request) -> dict:
    # Only writes carry the custom header: a cross-origin GET then stays a simple request (no preflight).
    result = {"Accept": "application/json"}
    if request.method not in ("GET", "HEAD"):
        result.update(WRITE_HEADERS)
    if request.content_type:
        result["Content-Type"] = request.content_type
    result.update(request.extra_headers or {})
    return result


def send_native(request: Request) -> Response:
    http = urllib.request.Request(request.url, data=request.body, method=request.method, headers=headers(request))
    try:
        with urllib.request.urlopen(http, timeout=TIMEOUT_S) as answer:
            return Response(answer.status, answer.read())
    except urllib.error.HTTPError as err:
        return Response(err.code, err.read())
    except (urllib.error.URLError, OSError) as err:
        raise Unreachable(request.url, getattr(err, "reason", err)) from None


async def send_pyodide(request: Request) -> Response:
    import js
    from pyodide.ffi import JsException, to_js

    options: dict = {"method": request.method, "headers": headers(request)}
    if request.body is not None:
        options["body"] = to_js(request.body)  # a Uint8Array
    try:
        answer = await js.fetch(request.url, to_js(options, dict_converter=js.Object.fromEntries))
        body = (await answer.arrayBuffer()).to_bytes()
    except JsException as err:
        raise Unreachable(request.url, err) from None
    return Response(int(answer.status), body)


def send_sync(request: Request) -> Response:
    if sys.platform != "emscripten":
        return send_native(request)
    try:
        from pyodide.ffi import run_sync
    except ImportError:
        raise CannotWait("this Pyodide has no pyodide.ffi.run_sync") from None
    coroutine = send_pyodide(request)
    try:
        return run_sync(coroutine)
    except Unreachable:
        raise
    except RuntimeError as err:
        # Pyodide says "... stack switching not supported" or "Cannot stack switch because the
        # Python entrypoint was a synchronous function" when it cannot wait here.
        text = str(err).lower()
        if "stack switch" not in text and "jspi" not in text and "run_sync" not in text:
            raise
        coroutine.close()
        raise CannotWait(str(err)) from None


def run(plan):
    """Drive a plan synchronously; return its result."""
    try:
        request = next(plan)
        while True:
            request = plan.send(send_sync(request))
    except StopIteration as done:
        return done.value


async def run_async(plan):
    """Drive a plan with ``await`` (natively, each request runs in a worker thread)."""
    import asyncio

    try:
        request = next(plan)
        while True:
            if sys.platform == "emscripten":
                response = await send_pyodide(request)
            else:
                response = await asyncio.to_thread(send_native, request)
            request = plan.send(response)
    except StopIteration as done:
        return done.value


def multipart(fields: list[tuple[str, str | None, bytes]]) -> tuple[bytes, str]:
    """Encode ``(name, filename or None, bytes)`` parts as multipart/form-data; return ``(body, content type)``."""
    boundary = "webgrad-" + secrets.token_hex(16)
    chunks = []
    for field, filename, data in fields:
        disposition = f'form-data; name="{field}"' + (f'; filename="{filename}"' if filename else "")
        kind = "application/octet-stream" if filename else "application/json"
        chunks.append(f"--{boundary}\r\nContent-Disposition: {disposition}\r\nContent-Type: {kind}\r\n\r\n".encode())
        chunks.extend([data, b"\r\n"])
    chunks.append(f"--{boundary}--\r\n".encode())
    return b"".join(chunks), f"multipart/form-data; boundary={boundary}"
