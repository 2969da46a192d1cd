"""Compressed answers: brotli and gzip chosen by Accept-Encoding, from the asset step's
sidecars or made on demand for small files; Vary, per-encoding ETags, HEAD, Range and
304s; stale sidecars never served. Over real loopback sockets, against a small site in a
temporary folder (server/testing.py), so no network or browser is needed.
"""
from __future__ import annotations

import gzip
import os
import random
import sys
from pathlib import Path

import brotli
import httpx
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # `server` is not installed

from server import compress
from server.app import create_app
from server.testing import WASM_MAGIC, make_fake_site, running_server

# A "WebAssembly module" and a script that compress like real ones (repetitive, not random).
WASM = WASM_MAGIC + b"".join(b"\x20\x00\x41%c\x6a\x21\x01" % (i % 97) for i in range(20_000))
SCRIPT = "".join(f"export function f{i}(x) {{ return x * {i} + {i % 7}; }}\n" for i in range(800)).encode()
IMAGE_CONTENT = b"".join(b"numpy/core/%d.py\x00" % i for i in range(5000))
DECODE = {"br": brotli.decompress, "gzip": gzip.decompress, None: lambda body: body}


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    top = tmp_path_factory.mktemp("compressed-site")
    settings = make_fake_site(top, "compression-secret")
    pyodide = settings.assets_root / "pyodide"
    (pyodide / "pyodide.asm.wasm").write_bytes(WASM)
    (pyodide / "pyodide.asm.js").write_bytes(SCRIPT)
    (pyodide / "numpy-0000000000000000.img.gz").write_bytes(gzip.compress(IMAGE_CONTENT, mtime=0))
    (pyodide / "noise.wasm").write_bytes(random.Random(0).randbytes(50_000))  # does not compress
    (settings.web_root / "big.js").write_bytes(SCRIPT)  # no sidecars: compressed on demand
    (settings.web_root / "page.html").write_text(
        "<!doctype html><script>window.x = 1;</script>" + "<p>hello</p>\n" * 400)
    assert compress.compress_folder(pyodide, brotli_quality=5) > 0
    with running_server(create_app(settings)) as base:
        yield {"base": base, "settings": settings, "pyodide": pyodide}


@pytest.fixture(scope="module")
def client(site):
    with httpx.Client(base_url=site["base"], timeout=30) as http:
        yield http


def get(client, path: str, accept: str | None, method: str = "GET", **headers) -> tuple[httpx.Response, bytes]:
    """The answer and its body as sent (httpx would otherwise decode it)."""
    headers = {"Accept-Encoding": accept, **headers} if accept is not None else headers
    request = client.build_request(method, path, headers=headers)
    if accept is None:
        del request.headers["accept-encoding"]  # httpx's default "gzip, deflate, br, zstd"
    response = client.send(request, stream=True)
    body = b"".join(response.iter_raw())
    response.close()
    return response, body


@pytest.mark.parametrize("path, content, media_type", [
    ("/pyodide/pyodide.asm.wasm", WASM, "application/wasm"),
    ("/pyodide/pyodide.asm.js", SCRIPT, "text/javascript"),
    ("/big.js", SCRIPT, "text/javascript"),  # on demand
], ids=["wasm", "script", "script-on-demand"])
def test_each_encoding_decodes_to_the_file(client, path, content, media_type):
    etags = set()
    for accept, encoding in [("br", "br"), ("gzip, deflate, br, zstd", "br"), ("gzip", "gzip"), (None, None),
                             ("identity", None)]:
        response, body = get(client, path, accept)
        assert response.status_code == 200
        assert response.headers.get("content-encoding") == encoding, accept
        assert response.headers["content-type"].split(";")[0] == media_type
        assert response.headers["vary"] == "Accept-Encoding"
        assert int(response.headers["content-length"]) == len(body)
        assert DECODE[encoding](body) == content, accept
        if encoding is not None:
            assert len(body) < 0.5 * len(content)
        etags.add((encoding, response.headers["etag"]))
    assert len({etag for _, etag in etags}) == 3  # one per encoding, never shared


@pytest.mark.parametrize("accept, encoding", [
    ("br;q=0, gzip", "gzip"),
    ("gzip;q=0, br;q=0", None),
    ("gzip;q=0", None),  # br not named and no *: not acceptable
    ("*", "br"),
    ("*;q=0", None),
    ("*, br;q=0", "gzip"),
    ("gzip;q=1, br;q=0.5", "gzip"),
    ("GZIP; Q=0.8, BR; q=0.8", "br"),
    ("br;q=0.000", None),
    ("br;q=nonsense, gzip", "gzip"),
])
def test_accept_encoding_weights_are_honoured(client, accept, encoding):
    response, body = get(client, "/pyodide/pyodide.asm.wasm", accept)
    assert response.headers.get("content-encoding") == encoding
    assert DECODE[encoding](body) == WASM


def test_head_gives_the_length_of_the_encoded_body(client, site):
    for accept, encoding, suffix in [("br", "br", ".br"), ("gzip", "gzip", ".gz"), (None, None, "")]:
        response, body = get(client, "/pyodide/pyodide.asm.wasm", accept, method="HEAD")
        assert response.status_code == 200 and body == b""
        assert response.headers.get("content-encoding") == encoding
        expected = (site["pyodide"] / f"pyodide.asm.wasm{suffix}").stat().st_size
        assert int(response.headers["content-length"]) == expected
        assert response.headers["vary"] == "Accept-Encoding"
    full, body = get(client, "/big.js", "br")  # compressed on demand
    head, nothing = get(client, "/big.js", "br", method="HEAD")
    assert head.headers["content-encoding"] == "br" and nothing == b""
    assert head.headers["content-length"] == full.headers["content-length"] == str(len(body))


def test_range_requests_get_the_file_as_it_is(client):
    response, body = get(client, "/pyodide/pyodide.asm.wasm", "br, gzip", Range="bytes=4-11")
    assert response.status_code == 206 and "content-encoding" not in response.headers
    assert body == WASM[4:12]
    assert response.headers["vary"] == "Accept-Encoding"
    whole, _ = get(client, "/pyodide/pyodide.asm.wasm", "br")
    assert "accept-ranges" not in whole.headers  # ranges are of the file, not of this body
    assert get(client, "/pyodide/pyodide.asm.wasm", None)[0].headers["accept-ranges"] == "bytes"


def test_not_modified_matches_the_encoding_sent(client):
    first, _ = get(client, "/pyodide/pyodide.asm.wasm", "br")
    etag = first.headers["etag"]
    again, body = get(client, "/pyodide/pyodide.asm.wasm", "br", **{"If-None-Match": etag})
    assert again.status_code == 304 and body == b"" and again.headers["vary"] == "Accept-Encoding"
    other, body = get(client, "/pyodide/pyodide.asm.wasm", "gzip", **{"If-None-Match": etag})
    assert other.status_code == 200 and gzip.decompress(body) == WASM


def test_images_are_sent_brotli_or_gzip_encoded(client):
    path = "/pyodide/numpy-0000000000000000.img.gz"
    for accept, encoding in [("br, gzip", "br"), ("gzip", "gzip"), (None, "gzip")]:
        response, body = get(client, path, accept)
        assert response.headers["content-encoding"] == encoding
        assert response.headers["content-type"] == "application/octet-stream"
        assert response.headers["vary"] == "Accept-Encoding"
        assert DECODE[encoding](body) == IMAGE_CONTENT


def test_what_does_not_compress_is_sent_as_it_is(client, site):
    assert not (site["pyodide"] / "noise.wasm.br").exists() and not (site["pyodide"] / "noise.wasm.gz").exists()
    response, body = get(client, "/pyodide/noise.wasm", "br, gzip")
    assert "content-encoding" not in response.headers and len(body) == 50_000
    response, body = get(client, "/webgrad.js", "br, gzip")  # 24 bytes: not worth it
    assert "content-encoding" not in response.headers and body == b"export const hello = 1;\n"
    assert response.headers["vary"] == "Accept-Encoding"
    response, _ = get(client, "/pyodide-extra/demo-1.0-py3-none-any.whl", "br, gzip")  # a zip: not compressible
    assert "content-encoding" not in response.headers and "vary" not in response.headers


def test_a_stale_sidecar_is_never_served(client, site):
    script = site["pyodide"] / "pyodide.asm.js"
    newer = SCRIPT.replace(b"return", b"return  ")
    script.write_bytes(newer)
    os.utime(script, ns=(script.stat().st_atime_ns, script.stat().st_mtime_ns + 10**9))
    try:
        response, body = get(client, "/pyodide/pyodide.asm.js", "br")
        assert DECODE[response.headers.get("content-encoding")](body) == newer
        assert compress.compress_folder(site["pyodide"], brotli_quality=5) == 2  # both sidecars remade
        response, body = get(client, "/pyodide/pyodide.asm.js", "br")
        assert response.headers["content-encoding"] == "br" and brotli.decompress(body) == newer
    finally:
        script.write_bytes(SCRIPT)
        compress.compress_folder(site["pyodide"], brotli_quality=5)


def test_compressed_html_keeps_its_script_hashes(client):
    response, body = get(client, "/page.html", "br")
    assert response.headers["content-encoding"] == "br"
    assert "'sha256-" in response.headers["content-security-policy"]
    assert brotli.decompress(body).startswith(b"<!doctype html><script>")


def test_compress_folder_does_nothing_the_second_time_and_drops_orphans(tmp_path):
    (tmp_path / "a.js").write_bytes(SCRIPT)
    (tmp_path / "tiny.json").write_text("{}")
    (tmp_path / "b.whl").write_bytes(SCRIPT)  # not a compressible type
    (tmp_path / "gone.js.br").write_bytes(b"left by a file since removed")
    assert compress.compress_folder(tmp_path, brotli_quality=5) == 3
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.js", "a.js.br", "a.js.gz", "b.whl", "tiny.json"]
    before = {p.name: p.stat().st_mtime_ns for p in tmp_path.iterdir()}
    assert before["a.js.br"] == before["a.js"] == before["a.js.gz"]
    assert compress.compress_folder(tmp_path, brotli_quality=5) == 0
    assert {p.name: p.stat().st_mtime_ns for p in tmp_path.iterdir()} == before
