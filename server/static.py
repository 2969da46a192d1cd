"""Serving files from a few fixed folders, and never anything outside them.

A request path is checked segment by segment before it touches the file
system: no empty segment (``//``), no ``.`` or ``..``, no hidden names (``.git``),
no backslash, NUL or ``:`` (Windows drives and streams). Percent-encoded
slashes, backslashes and NULs (``%2f``, ``%5c``, ``%00``) are refused by the
app for every route, because the ASGI server decodes them before we see the
path. Then the joined path is resolved with ``realpath`` and must still lie
inside the root's own ``realpath`` (compared as paths with ``commonpath``, not
as strings, so a sibling ``web-private/`` is outside ``web/``): that refuses
symlinks that point outside, while links that stay inside keep working.

Compressible files are sent brotli- or gzip-encoded when the request's Accept-Encoding
allows, from the sidecars the asset step wrote or compressed on demand when small (see
``server.compress``), with ``Vary: Accept-Encoding`` and an ETag per encoding.

``inline_script_hashes`` gives the CSP hashes of an HTML page's inline scripts.
"""
from __future__ import annotations

import base64
import functools
import hashlib
import html.parser
import mimetypes
import os
import stat
from dataclasses import dataclass
from email.utils import formatdate
from pathlib import Path

from starlette.requests import Request
from starlette.responses import FileResponse, PlainTextResponse, RedirectResponse, Response

from . import compress

IMMUTABLE = "public, max-age=31536000, immutable"
REVALIDATE = "no-cache"

# Explicit types for what the site serves; mimetypes (which reads the machine's
# /etc/mime.types) only fills in the rest, so answers do not depend on the host.
MEDIA_TYPES = {
    ".html": "text/html; charset=utf-8",
    ".js": "text/javascript; charset=utf-8",
    ".mjs": "text/javascript; charset=utf-8",
    ".css": "text/css; charset=utf-8",
    ".json": "application/json",
    ".map": "application/json",
    ".wasm": "application/wasm",
    ".whl": "application/zip",
    ".zip": "application/zip",
    ".tar": "application/x-tar",
    ".wgsl": "text/plain; charset=utf-8",
    ".py": "text/plain; charset=utf-8",
    ".txt": "text/plain; charset=utf-8",
    ".md": "text/markdown; charset=utf-8",
    ".svg": "image/svg+xml",
    ".png": "image/png",
    ".jpg": "image/jpeg",
    ".ico": "image/x-icon",
    ".safetensors": "application/octet-stream",
    ".npz": "application/octet-stream",
    ".data": "application/octet-stream",
}


def media_type_for(path: str) -> str:
    suffix = os.path.splitext(path)[1].lower()
    if suffix in MEDIA_TYPES:
        return MEDIA_TYPES[suffix]
    guessed, _ = mimetypes.guess_type(path)
    return guessed or "application/octet-stream"


class BadPath(ValueError):
    """A request path that can never name a file (traversal, NUL, backslash...)."""


def split_safe(relative: str) -> list[str]:
    """Split a URL path remainder into segments, raising ``BadPath`` for anything suspicious.

    A trailing slash gives a final empty segment (a directory request).
    """
    if "\x00" in relative or "\\" in relative:
        raise BadPath("NUL or backslash in path")
    parts = relative.split("/")
    for index, part in enumerate(parts):
        if part == "" and index == len(parts) - 1:
            continue  # trailing slash
        if part in ("", ".", "..") or part.startswith(".") or ":" in part:
            raise BadPath(f"path segment {part!r} is not allowed")
        if any(ord(ch) < 32 for ch in part):
            raise BadPath("control character in path")
    return parts


def is_inside(real: str, root_real: str) -> bool:
    """True if the resolved path ``real`` is ``root_real`` or below it (both absolute, resolved)."""
    return os.path.commonpath([real, root_real]) == root_real


@dataclass
class Root:
    """One served folder: where it is, how long browsers may cache it, which files."""

    directory: Path
    cache_control: str = REVALIDATE
    suffixes: tuple[str, ...] | None = None  # only these file types, if set
    index: str | None = None  # file served for a directory request (e.g. index.html)

    def resolve(self, relative: str) -> tuple[str, os.stat_result] | str | None:
        """Map ``relative`` to ``(real path, stat)``, a redirect target (``str``), or None.

        Raises ``BadPath`` for malformed paths.
        """
        parts = split_safe(relative)
        root_real = os.path.realpath(self.directory)
        candidate = os.path.join(root_real, *[p for p in parts if p])
        real = os.path.realpath(candidate)
        if not is_inside(real, root_real):
            return None  # a symlink somewhere on the way points outside the root
        try:
            info = os.stat(real)
        except OSError:  # missing, not a directory, no permission, a symlink loop, a name too long
            return None
        if stat.S_ISDIR(info.st_mode):
            if self.index is None:
                return None
            if parts[-1] != "" and relative != "":
                return "redirect"
            return self.resolve(relative + self.index)
        if not stat.S_ISREG(info.st_mode):
            return None
        if self.suffixes is not None and not real.endswith(self.suffixes):
            return None
        return real, info


def etag_for(info: os.stat_result, encoding: str | None = None) -> str:
    """A strong ETag for a file's version, and for each encoding of it a different one."""
    token = f"{info.st_mtime_ns}-{info.st_size}-{info.st_ino}".encode()
    digest = hashlib.md5(token, usedforsecurity=False).hexdigest()
    return f'"{digest}-{encoding}"' if encoding else f'"{digest}"'


def not_modified(request: Request, etag: str) -> bool:
    header = request.headers.get("if-none-match")
    if not header:
        return False
    tags = [tag.strip() for tag in header.split(",")]
    return "*" in tags or etag in tags or ("W/" + etag) in tags


# Gzipped images the page reads whole (Python's memory snapshot, numpy's and webgrad's files):
# sent as what they hold, gzip-encoded, so that the browser inflates them off the page's thread.
GZIP_ENCODED = compress.GZIP_IMAGES


def serve_file(request: Request, real: str, info: os.stat_result, cache_control: str,
               media_type: str | None = None) -> Response:
    """A file response with ETag/Last-Modified, answering 304 to a matching If-None-Match.

    The response's ``served_path`` is ``real`` (whatever encoding was sent).
    """
    choice = compress.choose(real, info, request.headers.get("accept-encoding"), "range" in request.headers)
    etag = etag_for(choice.info, choice.encoding)
    headers = {"Cache-Control": cache_control, "ETag": etag,
               "Last-Modified": formatdate(info.st_mtime, usegmt=True)}
    if compress.is_compressible(real):
        headers["Vary"] = "Accept-Encoding"  # caches must keep one answer per encoding
    if real.endswith(GZIP_ENCODED):
        media_type = "application/octet-stream"
        headers["Content-Encoding"] = "gzip"  # the file itself, unless a br sidecar was chosen
    if choice.encoding is not None:
        headers["Content-Encoding"] = choice.encoding
    media_type = media_type or media_type_for(real)
    if not_modified(request, etag):
        response = Response(status_code=304, headers=headers)
    elif choice.body is not None:
        response = Response(choice.body, headers=headers, media_type=media_type)
    else:
        response = FileResponse(choice.path, stat_result=choice.info, headers=headers, media_type=media_type)
        if choice.encoding is not None:
            # Range requests get the file as it is (compress.choose): do not offer ranges of this body.
            del response.headers["accept-ranges"]
    response.served_path = real  # type: ignore[attr-defined]
    return response


def serve_from(root: Root, request: Request, relative: str) -> Response:
    """Answer a GET/HEAD for ``relative`` under ``root``: the file, a redirect, 400 or 404."""
    try:
        found = root.resolve(relative)
    except BadPath as error:
        return PlainTextResponse(f"Bad Request: {error}", status_code=400)
    if found is None:
        return PlainTextResponse("Not Found", status_code=404)
    if found == "redirect":
        return RedirectResponse(request.url.path + "/", status_code=307)
    real, info = found
    return serve_file(request, real, info, root.cache_control)


class _InlineScripts(html.parser.HTMLParser):
    """Collects the text of each ``<script>`` without ``src`` (what CSP hashes cover)."""

    def __init__(self):
        super().__init__(convert_charrefs=False)
        self.scripts: list[str] = []
        self._current: list[str] | None = None

    def handle_starttag(self, tag, attrs):
        if tag == "script" and not any(name == "src" for name, _ in attrs):
            self._current = []

    def handle_data(self, data):
        if self._current is not None:
            self._current.append(data)

    def handle_endtag(self, tag):
        if tag == "script" and self._current is not None:
            self.scripts.append("".join(self._current))
            self._current = None


@functools.lru_cache(maxsize=64)
def _hashes(real: str, mtime_ns: int, size: int) -> tuple[str, ...]:
    with open(real, "rb") as file:
        text = file.read().decode("utf-8", "replace")
    # Browsers hash the script text after the HTML parser's newline normalisation.
    text = text.replace("\r\n", "\n").replace("\r", "\n")
    parser = _InlineScripts()
    parser.feed(text)
    parser.close()
    return tuple(base64.b64encode(hashlib.sha256(script.encode("utf-8")).digest()).decode()
                 for script in parser.scripts)


def inline_script_hashes(real: str) -> tuple[str, ...]:
    """Base64 sha256 of each inline ``<script>`` in the HTML file ``real`` (cached per version)."""
    info = os.stat(real)
    return _hashes(real, info.st_mtime_ns, info.st_size)
