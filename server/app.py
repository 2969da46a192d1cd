"""The webgrad site: static files, the browser runtime's assets and the model API.

URL map (``create_app`` builds it; ``python -m server`` runs it):

    /                     web/ (index.html for /), revalidated on every load (no-cache)
    /pyodide/             Pyodide 0.27.7 + numpy/micropip wheels (server/assets/pyodide/), immutable,
                          Python's memory snapshot and numpy's image (immutable; snapshot.json and
                          numpy-image.json, which name them, revalidated; python_stdlib.zip, which
                          the snapshot must match, revalidated)
    /pyodide-extra/       pytest & co. wheels for micropip, index.json (immutable; index no-cache)
    /wheels/latest.json   names the current webgrad wheel (rebuilt when core/ or wgsl_kernels/ change)
    /wheels/<file>        that wheel, revalidated; /wheels/<sha16>/<file> the same bytes, immutable,
                          and /wheels/<sha16>/<image> its files in the page's install form
    /wgsl/<name>.wgsl     the WGSL kernels of the working tree, revalidated
    /vendor/tfjs/         TensorFlow.js 4.22 bundles and wasm binaries, immutable
    /demos/py/<name>.py   the demos' Python sources (demos/), which the demo pages run in the worker
    /lite.js              the runtime of webgrad.export bundles (web/lite/, bundled to web/build/lite.js),
                          and its .map, revalidated; any site may import it (GET carries CORS)
    /api/models...        the model store (see server/api.py)

Requests pass ``server.guard`` first: a Host outside the allow-list gets 421, a
write (PUT/POST/DELETE...) without ``X-Webgrad-Client: 1`` or from a foreign
Origin gets 403. HTML pages carry ``CONTENT_SECURITY_POLICY``. Connection limits
(timeouts, a connection cap) are set in ``server.limits``.

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
from .api import max_tensors_from_env, max_upload_from_env, model_routes
from .guard import CLIENT_HEADER, AccessPolicy, hosts_from_env, origins_from_env
from .limits import DEFAULT_HEADER_TIMEOUT_S, DEFAULT_KEEP_ALIVE_S, default_max_connections
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
# The Content-Security-Policy of every HTML page: scripts, workers, wasm and data
# from this server only. 'wasm-unsafe-eval' lets Pyodide and TF.js compile
# WebAssembly; blob: workers are how the runtime starts when embedded elsewhere;
# CodeMirror 6 injects <style> elements, hence 'unsafe-inline' for styles only.
# Inline <script> blocks of the pages in web/ are allowed by their sha256 hashes,
# which the web root's endpoint adds per page (no 'unsafe-inline' for scripts).
# frame-ancestors 'self': our pages are not meant to be framed by other sites
# (embedding works through webgrad.js, not an iframe).
CONTENT_SECURITY_POLICY = {
    "default-src": "'self'",
    "script-src": "'self' 'wasm-unsafe-eval'",
    "worker-src": "'self' blob:",
    "connect-src": "'self'",
    "img-src": "'self' data: blob:",
    "style-src": "'self' 'unsafe-inline'",
    "font-src": "'self' data:",
    "object-src": "'none'",
    "base-uri": "'self'",
    "form-action": "'self'",
    "frame-ancestors": "'self'",
}


# Pages of web/ that need more than that, and why.
PAGE_POLICY_EXTRAS = {
    # TF.js, the comparison peer on the benchmark page, evaluates strings as code as it loads.
    "bench.html": {"script-src": "'unsafe-eval'"},
}


def csp_header(script_hashes=(), extras: dict | None = None) -> str:
    """``CONTENT_SECURITY_POLICY`` as a header value, allowing the inline scripts with these
    hashes, plus ``extras`` (directive -> sources to add)."""
    directives = dict(CONTENT_SECURITY_POLICY)
    for name, sources in (extras or {}).items():
        directives[name] = f"{directives.get(name, '')} {sources}".strip()
    if script_hashes:
        directives["script-src"] += "".join(f" 'sha256-{digest}'" for digest in script_hashes)
    return "; ".join(f"{name} {value}" for name, value in directives.items())


BASE_CSP = csp_header().encode()
WRITE_PREFLIGHT_HEADERS = f"{CLIENT_HEADER}, Content-Type, Range, If-None-Match, If-Modified-Since"

# Percent-encoded '/', '\' and NUL: the ASGI server decodes them before routing,
# where they would look like path separators or string ends. No URL here needs them.
FORBIDDEN_ENCODED = (b"%2f", b"%5c", b"%00")


@dataclass
class Settings:
    """What the server serves and its limits; every field has a default for `make serve`."""

    web_root: Path = REPO / "web"
    assets_root: Path = REPO / "server" / "assets"
    wgsl_root: Path = REPO / "wgsl_kernels"
    data_dir: Path = field(default_factory=default_data_dir)
    max_upload: int = field(default_factory=max_upload_from_env)
    max_tensors: int = field(default_factory=max_tensors_from_env)  # per uploaded file
    repo: Path = REPO  # the working tree the webgrad wheel is built from
    # Host names served besides loopback ones ("*": any); origins that may write cross-origin.
    allowed_hosts: tuple[str, ...] = field(default_factory=hosts_from_env)
    allowed_origins: tuple[str, ...] = field(default_factory=origins_from_env)
    bound_host: str | None = None  # the address served on, allowed as a Host too
    header_timeout_s: float = DEFAULT_HEADER_TIMEOUT_S
    keep_alive_s: float = DEFAULT_KEEP_ALIVE_S
    max_connections: int = field(default_factory=default_max_connections)


class SiteHeaders:
    """ASGI middleware: the access policy, encoded separators, CORS preflights, the headers above."""

    def __init__(self, app, policy: AccessPolicy):
        self.app = app
        self.policy = policy

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        raw_path = (scope.get("raw_path") or scope["path"].encode("utf-8", "surrogateescape")).lower()
        method = scope["method"]
        headers = {name.decode("latin-1"): value.decode("latin-1") for name, value in scope["headers"]}
        origin = headers.get("origin")
        listed = self.policy.origin_listed(origin)
        refusal = self.policy.refusal(method, scope.get("scheme", "http"), headers)
        if refusal is not None:
            status, message = refusal
            response = PlainTextResponse(message, status_code=status, headers={"Cache-Control": "no-store"})
            if scope["path"].startswith("/api/"):
                response = JSONResponse({"error": message}, status_code=status, headers={"Cache-Control": "no-store"})
        elif any(token in raw_path for token in FORBIDDEN_ENCODED) or "\x00" in scope["path"]:
            response = PlainTextResponse("Bad Request: encoded '/', '\\' or NUL in path", status_code=400)
        elif method == "OPTIONS" and listed:
            # An allow-listed origin may also write (with our client header).
            response = Response(status_code=204, headers={
                "Access-Control-Allow-Origin": origin,
                "Access-Control-Allow-Methods": "GET, HEAD, OPTIONS, PUT, DELETE",
                "Access-Control-Allow-Headers": WRITE_PREFLIGHT_HEADERS,
                "Access-Control-Max-Age": "600",
                "Vary": "Origin",
            })
        elif method == "OPTIONS":
            # Reads may come from any site; writes only from our own pages (no PUT/DELETE here,
            # and not our client header, so a browser never sends another site's write).
            response = Response(status_code=204, headers={
                "Access-Control-Allow-Methods": "GET, HEAD, OPTIONS",
                "Access-Control-Allow-Headers": "Range, If-None-Match, If-Modified-Since",
                "Access-Control-Max-Age": "86400",
                "Vary": "Origin",
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
                elif listed:
                    headers += [(b"access-control-allow-origin", origin.encode("latin-1")), (b"vary", b"Origin")]
                if b"cache-control" not in names:
                    headers.append((b"cache-control", b"no-cache"))
                content_type = dict(headers).get(b"content-type", b"")
                if content_type.startswith(b"text/html") and b"content-security-policy" not in names:
                    headers.append((b"content-security-policy", BASE_CSP))
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
        "build": static.Root(settings.web_root / "build", static.REVALIDATE, suffixes=(".js", ".map")),
        # The demo pages run the very files `python demos/NAME.py` runs: served as text, .py only.
        "demos": static.Root(settings.repo / "demos", static.REVALIDATE, suffixes=(".py",)),
    }
    wheels_dir = assets / "wheels"
    keeper = WheelKeeper(wheels_dir, settings.repo)
    store = ModelStore(settings.data_dir)

    def from_root(key: str):
        root = roots[key]

        def endpoint(request: Request):
            return static.serve_from(root, request, request.path_params["path"])

        return endpoint

    def web_page(request: Request):
        response = static.serve_from(roots["web"], request, request.path_params["path"])
        path = getattr(response, "served_path", None)  # a file (maybe sent compressed), not an error
        if path is not None and (response.media_type or "").startswith("text/html"):  # a 304 has none
            page = Path(os.path.relpath(path, os.path.realpath(settings.web_root))).as_posix()
            response.headers["Content-Security-Policy"] = csp_header(static.inline_script_hashes(path),
                                                                     PAGE_POLICY_EXTRAS.get(page))
        return response

    def with_manifest(key: str, *manifests: str):
        """``key``'s files, immutable, but for the ``manifests``, which name the current ones: revalidated."""
        root = roots[key]

        def endpoint(request: Request):
            relative = request.path_params["path"]
            if relative in manifests:
                return static.serve_from(static.Root(root.directory), request, relative)
            return static.serve_from(root, request, relative)

        return endpoint

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
        file = request.path_params["file"]
        pinned = (latest["file"], latest["image"]["file"])
        if request.path_params["digest"] != latest["sha256"][:16] or file not in pinned:
            return PlainTextResponse("Not Found (an older build?) - see /wheels/latest.json", status_code=404)
        return static.serve_from(static.Root(wheels_dir, static.IMMUTABLE), request, file)

    def lite_script(request: Request):
        # /lite.js is the page bundle of web/lite/ under a short, stable name (its sourceMappingURL,
        # "lite.js.map", resolves beside it); served like /widget.js: revalidated, CORS on GET.
        return static.serve_from(roots["build"], request, request.url.path.lstrip("/"))

    routes = model_routes(store, settings.max_upload, settings.max_tensors) + [
        # python_stdlib.zip is revalidated too: the memory snapshot holds zipimport's table of its
        # entries' offsets, so a browser must never pair a new snapshot with a copy cached before
        # the asset step remade the zip (server/assets.py ensure_stored_stdlib). A 304 costs no bytes.
        Route("/pyodide/{path:path}", with_manifest("pyodide", "snapshot.json", "numpy-image.json",
                                                    "python_stdlib.zip")),
        Route("/pyodide-extra/{path:path}", with_manifest("pyodide-extra", "index.json")),
        Route("/wheels/latest.json", wheels_latest),
        Route("/wheels/{digest}/{file}", wheel_pinned),
        Route("/wheels/{file}", wheel_plain),
        Route("/wgsl/{path:path}", from_root("wgsl")),
        Route("/vendor/tfjs/{path:path}", from_root("tfjs")),
        Route("/demos/py/{path:path}", from_root("demos")),
        Route("/lite.js", lite_script),
        Route("/lite.js.map", lite_script),
        Route("/{path:path}", web_page),
    ]

    async def http_error(request: Request, exc: HTTPException):
        if request.url.path.startswith("/api/"):
            return JSONResponse({"error": exc.detail}, status_code=exc.status_code,
                                headers={**(exc.headers or {}), "Cache-Control": "no-store"})
        return PlainTextResponse(str(exc.detail), status_code=exc.status_code, headers=exc.headers)

    policy = AccessPolicy.build(settings.allowed_hosts, settings.allowed_origins, settings.bound_host)
    app = Starlette(routes=routes, exception_handlers={HTTPException: http_error},
                    middleware=[Middleware(SiteHeaders, policy=policy)])
    app.state.settings = settings
    app.state.store = store
    return app


def app_from_env():
    """Factory for ``uvicorn --factory server.app:app_from_env`` (reads WEBGRAD_* env vars)."""
    return create_app(Settings(data_dir=Path(os.environ.get("WEBGRAD_DATA", "data"))))
