"""Compressed copies of the site's files: made ahead by the asset step, or on demand for small ones.

A first visit fetches Pyodide's WebAssembly (10 MB), its memory snapshot and numpy's image:
sent brotli-compressed they are about a third of their size, and the browser inflates
them off the page's thread (Content-Encoding), so nothing on the page changes.

Sidecars: next to ``FILE``, ``FILE.br`` and ``FILE.gz`` hold FILE's bytes compressed with
brotli and gzip. A sidecar counts only while its mtime equals FILE's (``write_sidecars``
sets it so), so a FILE changed since is served as itself, never as a stale sidecar. The
images ``*.bin.gz`` / ``*.img.gz`` already are gzip (the server sends them gzip-encoded, as
what they hold): they get only ``FILE.br``, brotli of what they hold. A sidecar is written
only where it saves at least ``MIN_SAVING`` of what would be sent without it.

``choose`` picks what to send for a request: br, then gzip, as its Accept-Encoding allows
(``q=0`` refuses a coding), else the file itself. Files with no sidecar that are small
(``ON_DEMAND_MAX_BYTES``: the pages' own scripts, HTML, JSON) are compressed when asked
for, quickly, and kept in memory per version.
"""
from __future__ import annotations

import functools
import gzip
import os
from dataclasses import dataclass
from pathlib import Path

try:
    import brotli
except ImportError:  # webgrad[server] installs it; without it the site is served with gzip only
    brotli = None

# File types that compress well; .map files are fetched only by developer tools. Of the zip
# files, only Pyodide's standard library: the asset step stores its entries uncompressed for
# this (server/assets.py ensure_stored_stdlib); wheels are deflated and gain nothing.
COMPRESSIBLE = (".wasm", ".js", ".mjs", ".json", ".html", ".css", ".wgsl", ".py", ".txt", ".md", ".svg", ".data",
                "python_stdlib.zip")
# Images the server sends gzip-encoded as what they hold (see server/static.py).
GZIP_IMAGES = (".bin.gz", ".img.gz")
SUFFIX = {"br": ".br", "gzip": ".gz"}
MIN_SAVING = 0.10  # a sidecar must be at least 10% smaller than what would be sent without it
MIN_BYTES = 1024  # smaller files gain a few hundred bytes at most: sent as they are
ON_DEMAND_MAX_BYTES = 512 * 1024  # with 128 kept, at most ~60 MB of memory
# Made once per asset, so the slowest, smallest setting (brotli's 11); on demand, fast ones.
AHEAD_BROTLI_QUALITY = 11
ON_DEMAND_BROTLI_QUALITY = 5
GZIP_LEVEL = 9
ON_DEMAND_GZIP_LEVEL = 6


def is_compressible(path: str) -> bool:
    """Whether ``path``'s representation depends on Accept-Encoding (answers carry Vary)."""
    return path.lower().endswith(COMPRESSIBLE + GZIP_IMAGES)


def _encoders(brotli_quality: int, gzip_level: int) -> dict:
    encoders = {"gzip": lambda data: gzip.compress(data, gzip_level, mtime=0)}
    if brotli is not None:
        encoders["br"] = lambda data: brotli.compress(data, quality=brotli_quality)
    return encoders


# ----------------------------------------------------------------------------- made ahead

def sidecar_stat(path: str, info: os.stat_result, encoding: str) -> os.stat_result | None:
    """The stat of ``path``'s sidecar for ``encoding`` if it is current (same mtime), else None."""
    try:
        side = os.stat(path + SUFFIX[encoding])
    except OSError:
        return None
    return side if side.st_mtime_ns == info.st_mtime_ns else None


def write_sidecars(path: Path, brotli_quality: int = AHEAD_BROTLI_QUALITY) -> int:
    """Write ``path``'s missing or stale sidecars; return how many were written.

    A sidecar that would not save ``MIN_SAVING`` is not written (and a stale one removed).
    """
    info = path.stat()
    if info.st_size < MIN_BYTES:
        return 0
    image = path.name.endswith(GZIP_IMAGES)
    encoders = _encoders(brotli_quality, GZIP_LEVEL)
    wanted = ["br"] if image else ["br", "gzip"]
    written = 0
    content = None
    for encoding in wanted:
        if encoding not in encoders or sidecar_stat(str(path), info, encoding) is not None:
            continue
        if content is None:
            content = path.read_bytes()
            if image:  # what the image holds; the .gz itself is what would be sent otherwise
                baseline, content = len(content), gzip.decompress(content)
            else:
                baseline = len(content)
        packed = encoders[encoding](content)
        side = path.with_name(path.name + SUFFIX[encoding])
        if len(packed) > (1 - MIN_SAVING) * baseline:
            side.unlink(missing_ok=True)
            continue
        # Hidden (never served half-written), and one per process: two asset steps may run at once.
        temp = path.with_name(f".{side.name}.{os.getpid()}.tmp")
        temp.write_bytes(packed)
        os.utime(temp, ns=(info.st_atime_ns, info.st_mtime_ns))
        os.replace(temp, side)
        written += 1
    return written


def compress_folder(folder: Path, brotli_quality: int = AHEAD_BROTLI_QUALITY, log=None) -> int:
    """Write the sidecars of every compressible file under ``folder`` and remove those whose
    file is gone; return how many files changed. Does nothing when all are current."""
    changed = 0
    for path in sorted(folder.rglob("*")):
        name = path.name
        if name.startswith(".") or not path.is_file():
            continue
        if name.endswith(tuple(SUFFIX.values())) and not name.endswith(GZIP_IMAGES):
            if not path.with_name(name[:-len(".br")]).exists():  # both suffixes are 3 characters
                path.unlink()
                changed += 1
            continue
        if is_compressible(name):
            written = write_sidecars(path, brotli_quality)
            if written and log is not None:
                log(f"assets: compressed {path.relative_to(folder.parent)} ({written} file(s))")
            changed += written
    return changed


# ----------------------------------------------------------------------------- per request

def accepted_encodings(header: str | None) -> list[str]:
    """The codings of ``SUFFIX`` that an Accept-Encoding header allows, best first (br on ties).

    ``q=0`` (or a malformed q) refuses a coding; ``*`` stands for codings not named.
    """
    weights: dict[str, float] = {}
    for item in (header or "").split(","):
        coding, *params = [part.strip() for part in item.split(";")]
        weight = 1.0
        for param in params:
            key, _, value = param.partition("=")
            if key.strip().lower() == "q":
                try:
                    weight = float(value)
                except ValueError:
                    weight = 0.0
        if coding:
            weights[coding.lower()] = weight
    star = weights.get("*", 0.0)
    ranked = [(weights.get(coding, star), index, coding) for index, coding in enumerate(SUFFIX)]
    return [coding for weight, _, coding in sorted(ranked, key=lambda r: (-r[0], r[1])) if weight > 0]


@dataclass
class Choice:
    """What to send for a file: ``path``/``info`` of a file, or ``body`` made on demand."""

    path: str
    info: os.stat_result
    encoding: str | None = None  # None: as it is (or, for an image, its own gzip)
    body: bytes | None = None


def choose(path: str, info: os.stat_result, accept_encoding: str | None, ranged: bool) -> Choice:
    """The best representation of ``path`` for a request with ``accept_encoding``.

    A Range request gets the file as it is: ranges of a compressed body are of no use to
    a browser, and serving them would need their own ETags and lengths.
    """
    if ranged or not is_compressible(path):
        return Choice(path, info)
    image = path.endswith(GZIP_IMAGES)
    for encoding in accepted_encodings(accept_encoding):
        side = sidecar_stat(path, info, encoding)
        if side is not None:
            return Choice(path + SUFFIX[encoding], side, encoding)
        if not image and MIN_BYTES <= info.st_size <= ON_DEMAND_MAX_BYTES:
            body = _on_demand(path, info.st_mtime_ns, info.st_size, encoding)
            if body is not None:
                return Choice(path, info, encoding, body)
    return Choice(path, info)


@functools.lru_cache(maxsize=128)
def _on_demand(path: str, mtime_ns: int, size: int, encoding: str) -> bytes | None:
    """``path`` compressed with ``encoding``, or None when that saves too little (or brotli is
    missing). Cached per version of the file: its mtime and size are part of the key."""
    encoder = _encoders(ON_DEMAND_BROTLI_QUALITY, ON_DEMAND_GZIP_LEVEL).get(encoding)
    if encoder is None:
        return None
    with open(path, "rb") as file:
        content = file.read()
    if len(content) != size:  # changed while we looked: send it as it is this time
        return None
    packed = encoder(content)
    return packed if len(packed) <= (1 - MIN_SAVING) * len(content) else None
