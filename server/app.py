"""The webgrad site: static files, the browser runtime's assets and the model API.

URL map (``create_app`` builds it; ``python -m server`` runs it):

    /                     web/ (index.html for /), revalidated on every load (no-cache)
    /pyodide/             Pyodide 0.27.7 + numpy/micropip wheels (server/assets/pyodide/), immutable
    /pyodide-extra/       pytest & co. wheels for micropip, index.json (immutable; index no-cache)
    /wheels/latest.json   names the current webgrad wheel (rebuilt when core/ or wgsl_kernels/ change)
    /wheels/<file>        that wheel, revalidated; /wheels/<sha16>/<file> the same bytes, immutable
    /wgsl/<name>.wgsl     the WGSL kernels of the working tree, revalidated
    /vendor/tfjs/         TensorFlow.js 4.22 bundles and wasm binaries, immutable
    /api/models...        the model store (see server/api.py)

Every response carries ``Cross-Origin-Opener-Policy: same-origin`` and
``Cross-Origin-Embedder-Policy: require-corp`` (so pages get SharedArrayBuffer),
plus ``Cross-Origin-Resource-Policy: cross-origin``; GET/HEAD responses also
carry ``Access-Control-Allow-Origin: *``, so the widget and its files, and the
model API's reads, can be used from other sites.
"""
from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import JSONResponse, PlainTextResponse, Response
from starlette.routing import Route

from . import static
from .api import max_upload_from_env, model_routes
from .store import ModelStore, default_data_dir
from .wheel import WheelBuildError, WheelKeeper

REPO = Path(__file__).resolve().parent.parent

SECURITY_HEADERS = [
    (b"cross-origin-opener-policy", b"same-origin"),
    (b"cross-origin-embedder-policy", b"require-corp"),
    (b"cross-origin-resource-policy", b"cross-origin"),
    (b"x-content-type-options", b"nosniff"),
]
CORS_READ_HEADERS = [
    (b"access-control-allow-origin", b"*"),
    (b"access-control-expose-headers", b"ETag, Content-Length, Last-Modified"),
]
# Percent-encoded '/', '\' and NUL: the ASGI server decodes them before routing,
# where they would look like path separators or string ends. No URL here needs them.
FORBIDDEN_ENCODED = (b"%2f", b"%5c", b"%00")


@dataclass
class Settings:
    """Where the server finds things; every field has a default for `make serve`."""

    web_root: Path = REPO / "web"
    assets_root: Path = REPO / "server" / "assets"
    wgsl_root: Path = REPO / "wgsl_kernels"
    data_dir: Path = field(default_factory=default_data_dir)
    max_upload: int = field(default_factory=max_upload_from_env)
    repo: Path = REPO  # the working tree the webgrad wheel is built from


class SiteHeaders:
    """ASGI middleware: refuse encoded separators, answer CORS preflights, add the headers above."""

    def __init__(self, app):
        self.app = app

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        raw_path = (scope.get("raw_path") or scope["path"].encode("utf-8", "surrogateescape")).lower()
        method = scope["method"]
        if any(token in raw_path for token in FORBIDDEN_ENCODED) or "\x00" in scope["path"]:
            response = PlainTextResponse("Bad Request: encoded '/', '\\' or NUL in path", status_code=400)
        elif method == "OPTIONS":
            # Reads may come from any site; writes only from our own pages (no PUT/DELETE here).
            response = Response(status_code=204, headers={
                "Access-Control-Allow-Methods": "GET, HEAD, OPTIONS",
                "Access-Control-Allow-Headers": "Range, If-None-Match, If-Modified-Since",
                "Access-Control-Max-Age": "86400",
            })
        else:
            response = None
        cors = method in ("GET", "HEAD", "OPTIONS")

        async def send_with_headers(message):
            if message["type"] == "http.response.start":
                headers = list(message.get("headers", []))
                names = {name.lower() for name, _ in headers}
                headers += [h for h in SECURITY_HEADERS if h[0] not in names]
                if cors:
                    headers += [h for h in CORS_READ_HEADERS if h[0] not in names]
                if b"cache-control" not in names:
                    headers.append((b"cache-control", b"no-cache"))
                message = {**message, "headers": headers}
            await send(message)

        if response is not None:
            return await response(scope, receive, send_with_headers)
        return await self.app(scope, receive, send_with_headers)


def create_app(settings: Settings | None = None) -> Starlette:
    """Build the ASGI app. ``settings`` defaults to the repository's folders and env vars."""
    settings = settings or Settings()
    assets = settings.assets_root
    roots = {
        "pyodide": static.Root(assets / "pyodide", static.IMMUTABLE),
        "pyodide-extra": static.Root(assets / "pyodide-extra", static.IMMUTABLE),
        "tfjs": static.Root(assets / "vendor" / "tfjs", static.IMMUTABLE),
        "wgsl": static.Root(settings.wgsl_root, static.REVALIDATE, suffixes=(".wgsl",)),
        "web": static.Root(settings.web_root, static.REVALIDATE, index="index.html"),
    }
    wheels_dir = assets / "wheels"
    keeper = WheelKeeper(wheels_dir, settings.repo)
    store = ModelStore(settings.data_dir)

    def from_root(key: str):
        root = roots[key]

        def endpoint(request: Request):
            return static.serve_from(root, request, request.path_params["path"])

        return endpoint

    def pyodide_extra(request: Request):
        relative = request.path_params["path"]
        if relative == "index.json":  # changes when the pinned wheels change
            return static.serve_from(static.Root(roots["pyodide-extra"].directory), request, relative)
        return static.serve_from(roots["pyodide-extra"], request, relative)

    def latest_or_error():
        try:
            return keeper.latest(), None
        except (OSError, ValueError, WheelBuildError) as exc:
            return None, PlainTextResponse(f"webgrad wheel unavailable: {exc}; run `python -m server.assets`",
                                           status_code=503)

    def wheels_latest(request: Request):
        latest, failure = latest_or_error()
        return failure or JSONResponse(latest, headers={"Cache-Control": "no-cache"})

    def wheel_plain(request: Request):
        latest, failure = latest_or_error()
        if failure:
            return failure
        if request.path_params["file"] != latest["file"]:
            return PlainTextResponse("Not Found", status_code=404)
        return static.serve_from(static.Root(wheels_dir), request, latest["file"])

    def wheel_pinned(request: Request):
        latest, failure = latest_or_error()
        if failure:
            return failure
        if (request.path_params["digest"], request.path_params["file"]) != (latest["sha256"][:16], latest["file"]):
            return PlainTextResponse("Not Found (an older build?) - see /wheels/latest.json", status_code=404)
        return static.serve_from(static.Root(wheels_dir, static.IMMUTABLE), request, latest["file"])

    routes = model_routes(store, settings.max_upload) + [
        Route("/pyodide/{path:path}", from_root("pyodide")),
        Route("/pyodide-extra/{path:path}", pyodide_extra),
        Route("/wheels/latest.json", wheels_latest),
        Route("/wheels/{digest}/{file}", wheel_pinned),
        Route("/wheels/{file}", wheel_plain),
        Route("/wgsl/{path:path}", from_root("wgsl")),
        Route("/vendor/tfjs/{path:path}", from_root("tfjs")),
        Route("/{path:path}", from_root("web")),
    ]

    async def http_error(request: Request, exc: HTTPException):
        if request.url.path.startswith("/api/"):
            return JSONResponse({"error": exc.detail}, status_code=exc.status_code,
                                headers={**(exc.headers or {}), "Cache-Control": "no-store"})
        return PlainTextResponse(str(exc.detail), status_code=exc.status_code, headers=exc.headers)

    app = Starlette(routes=routes, exception_handlers={HTTPException: http_error},
                    middleware=[Middleware(SiteHeaders)])
    app.state.settings = settings
    app.state.store = store
    return app


def app_from_env():
    """Factory for ``uvicorn --factory server.app:app_from_env`` (reads WEBGRAD_* env vars)."""
    return create_app(Settings(data_dir=Path(os.environ.get("WEBGRAD_DATA", "data"))))
