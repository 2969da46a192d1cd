"""The site server over real loopback sockets: files, headers, path safety, the
model store and the asset step.

Most tests run against a small site built in a temporary folder (its own web/
root, fake Pyodide files, an empty model store), so they need no network.
``real_assets`` runs ``python -m server.assets`` once (npm ci, the numpy wheel,
pytest wheels) and the ``test_real_*`` tests check what it assembled; without
npm or network they skip, except under ``CI=true``, where they fail.
"""
from __future__ import annotations

import concurrent.futures
import gzip
import hashlib
import json
import os
import socket
import struct
import subprocess
import sys
import time
import zipfile
from pathlib import Path

import httpx
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # `server` is not installed

from server import assets as asset_step
from server.api import DEFAULT_MAX_UPLOAD, max_upload_from_env
from server.app import Settings, create_app
from server.store import ModelStore
from server.testing import WASM_MAGIC, make_fake_site, raw_request, running_server, safetensors_bytes
from conftest import IN_CI

REPO = Path(__file__).resolve().parent.parent
SECRET = "webgrad-secret-sentinel-1f2e3d"
MAX_UPLOAD = 64 * 1024
CLIENT_HEADERS = {"X-Webgrad-Client": "1"}  # what webgrad.store and the pages send with writes


def skip_or_fail(reason: str):
    if IN_CI:
        pytest.fail(f"{reason} (CI=true: server tests may not skip)", pytrace=False)
    pytest.skip(reason)


# ----------------------------------------------------------------------------- fixtures

@pytest.fixture(scope="module")
def site(tmp_path_factory):
    """A temporary site: web/ with symlinks in and out, fake assets, a secret outside."""
    top = tmp_path_factory.mktemp("site")
    settings = make_fake_site(top, SECRET, max_upload=MAX_UPLOAD)
    with running_server(create_app(settings)) as base:
        yield {"base": base, "top": top, "settings": settings}


@pytest.fixture(scope="module")
def base(site) -> str:
    return site["base"]


@pytest.fixture(scope="module")
def client(base):
    with httpx.Client(base_url=base, timeout=60, headers=CLIENT_HEADERS) as http:
        yield http


@pytest.fixture(scope="module")
def real_assets():
    """Run the asset step once (npm ci, numpy wheel, pytest wheels, webgrad wheel)."""
    try:
        asset_step.ensure_assets()
    except (asset_step.AssetError, OSError, subprocess.SubprocessError) as error:
        skip_or_fail(f"`python -m server.assets` failed (npm or network missing?): {error}")
    return asset_step.ASSETS


@pytest.fixture(scope="module")
def real_base(real_assets, tmp_path_factory):
    settings = Settings(data_dir=tmp_path_factory.mktemp("real-data"))
    with running_server(create_app(settings)) as url:
        yield url


def put_model(client, name, weights: bytes, metadata: str | None = '{"classes": 10}'):
    data = {} if metadata is None else {"metadata": metadata}
    return client.put(f"/api/models/{name}", files={"weights": ("model.safetensors", weights)}, data=data)


# ----------------------------------------------------------------------------- files and headers

@pytest.mark.parametrize("path, media_type", [
    ("/", "text/html"),
    ("/webgrad.js", "text/javascript"),
    ("/worker.mjs", "text/javascript"),
    ("/style.css", "text/css"),
    ("/pyodide/pyodide.asm.wasm", "application/wasm"),
    ("/pyodide/pyodide.js", "text/javascript"),
    ("/pyodide/pyodide.mjs", "text/javascript"),
    ("/pyodide/pyodide-lock.json", "application/json"),
    ("/pyodide/python_stdlib.zip", "application/zip"),
    ("/pyodide-extra/demo-1.0-py3-none-any.whl", "application/zip"),
    ("/pyodide-extra/index.json", "application/json"),
    ("/vendor/tfjs/tf.min.js", "text/javascript"),
    ("/vendor/tfjs/tfjs-backend-wasm.wasm", "application/wasm"),
    ("/wgsl/binary.wgsl", "text/plain"),
    ("/wheels/latest.json", "application/json"),
    ("/api/models", "application/json"),
])
def test_media_types(client, path, media_type):
    response = client.get(path)
    assert response.status_code == 200, response.text
    assert response.headers["content-type"].split(";")[0] == media_type
    assert response.headers["x-content-type-options"] == "nosniff"


def test_wheel_media_type_and_content(client, site):
    latest = client.get("/wheels/latest.json").json()
    assert latest["file"] == f"webgrad-{latest['version']}-py3-none-any.whl"
    for url in (f"/wheels/{latest['file']}", latest["url"]):
        response = client.get(url)
        assert response.status_code == 200
        assert response.headers["content-type"] in ("application/zip", "application/octet-stream")
        assert hashlib.sha256(response.content).hexdigest() == latest["sha256"]
    wheel_path = site["settings"].assets_root / "wheels" / latest["file"]
    names = zipfile.ZipFile(wheel_path).namelist()
    assert "webgrad/__init__.py" in names and "webgrad/serialize.py" in names
    assert any(n.startswith("webgrad/wgsl_kernels/") and n.endswith(".wgsl") for n in names)
    # bytecode only as the build compiles it (Pyodide's CPython 3.12, one per module), none from the tree
    caches = [n for n in names if "__pycache__" in n]
    assert caches and all(n.replace("__pycache__/", "").replace(".cpython-312.pyc", ".py") in names for n in caches)
    assert client.get(f"/wheels/{'0' * 16}/{latest['file']}").status_code == 404
    assert client.get("/wheels/webgrad-9.9.9-py3-none-any.whl").status_code == 404
    # the same files as the image the page installs, pinned and immutable too
    # br- or gzip-encoded (the build writes a .br next to the .img.gz): httpx inflates it, as browsers do
    for accept in ("br", "gzip"):
        image = client.get(latest["image"]["url"], headers={"Accept-Encoding": accept})
        assert image.status_code == 200 and "immutable" in image.headers["cache-control"]
        assert image.headers["content-encoding"] == accept
        assert hashlib.sha256(image.content).hexdigest() == latest["image"]["sha256"]
    header, files = _read_image(image.content)
    assert header["wheel"] == latest["file"]
    with zipfile.ZipFile(wheel_path) as archive:
        assert files == {info.filename: archive.read(info) for info in archive.infolist() if not info.is_dir()}
    assert client.get(latest["image"]["url"].replace(latest["sha256"][:16], "0" * 16)).status_code == 404


def _read_image(raw: bytes) -> tuple[dict, dict]:
    """An image's header and files (layout: server/wheel.py write_image, server/numpy_image.mjs)."""
    length = struct.unpack("<I", raw[:4])[0]
    header = json.loads(raw[4:4 + length])
    files, at = {}, 4 + length
    for path, size in header["files"]:
        files[path] = raw[at:at + size]
        at += size
    assert at == len(raw), "the header lists fewer bytes than the image holds"
    return header, files


def test_wheel_is_rebuilt_when_a_source_changes(tmp_path):
    """A newer file under core/ makes the wheel stale (checked on a copy of the tree)."""
    from server import wheel

    tree = tmp_path / "tree"
    for name in ("core", "wgsl_kernels"):
        (tree / name).mkdir(parents=True)
    (tree / "pyproject.toml").write_text((REPO / "pyproject.toml").read_text())
    (tree / "core" / "a.py").write_text("x = 1\n")
    out = tmp_path / "wheels"
    out.mkdir()
    (out / wheel.wheel_file_name(tree)).write_bytes(b"old")
    image = wheel.image_path(out / wheel.wheel_file_name(tree))
    (out / "latest.json").write_text(json.dumps({"file": wheel.wheel_file_name(tree), "image": {"file": image.name}}))
    assert wheel.is_stale(out, tree), "a missing image makes the build stale"
    image.write_bytes(b"old")
    assert not wheel.is_stale(out, tree)
    (tree / "core" / "__pycache__").mkdir()
    (tree / "core" / "__pycache__" / "a.cpython-311.pyc").write_bytes(b"")
    future = time.time() + 5
    os.utime(tree / "core" / "__pycache__" / "a.cpython-311.pyc", (future, future))
    assert not wheel.is_stale(out, tree), "__pycache__ must not trigger rebuilds"
    os.utime(tree / "core" / "a.py", (future, future))
    assert wheel.is_stale(out, tree)


def test_isolation_and_cors_headers_everywhere(client, base):
    responses = [client.get("/"), client.get("/pyodide/pyodide.js"), client.get("/missing.js"),
                 client.get("/api/models"), client.get("/api/models/nothing"), client.head("/webgrad.js")]
    headers = [dict(r.headers) for r in responses] + [raw_request(base, "/../secret.txt")[1]]
    for response_headers in headers:
        assert response_headers["cross-origin-opener-policy"] == "same-origin"
        assert response_headers["cross-origin-embedder-policy"] == "require-corp"
        assert response_headers["cross-origin-resource-policy"] == "cross-origin"
        assert response_headers["access-control-allow-origin"] == "*"
    write = put_model(client, "headers-check", safetensors_bytes())
    assert write.status_code in (200, 201)
    assert write.headers["cross-origin-embedder-policy"] == "require-corp"
    assert "access-control-allow-origin" not in write.headers  # writes stay same-origin
    client.delete("/api/models/headers-check")


def test_preflight_allows_reads_only(client):
    response = client.options("/api/models/x", headers={
        "Origin": "https://elsewhere.example", "Access-Control-Request-Method": "PUT"})
    assert response.status_code == 204
    allowed = {m.strip() for m in response.headers["access-control-allow-methods"].split(",")}
    assert allowed == {"GET", "HEAD", "OPTIONS"}


@pytest.mark.parametrize("path, cache", [
    ("/", "no-cache"), ("/webgrad.js", "no-cache"), ("/wgsl/binary.wgsl", "no-cache"),
    ("/pyodide/pyodide.asm.wasm", "immutable"), ("/vendor/tfjs/tf.min.js", "immutable"),
    ("/pyodide-extra/demo-1.0-py3-none-any.whl", "immutable"), ("/pyodide-extra/index.json", "no-cache"),
    ("/pyodide/snapshot.json", "no-cache"), ("/pyodide/numpy-image.json", "no-cache"),
    ("/pyodide/python_stdlib.zip", "no-cache"),  # the snapshot must match it: never a stale copy
    ("/wheels/latest.json", "no-cache"), ("/api/models", "no-cache"),
])
def test_cache_headers(client, path, cache):
    value = client.get(path).headers["cache-control"]
    if cache == "immutable":
        assert "immutable" in value and "max-age=31536000" in value
    else:
        assert value == "no-cache"


def test_wheel_cache_headers(client):
    latest = client.get("/wheels/latest.json").json()
    assert client.get(f"/wheels/{latest['file']}").headers["cache-control"] == "no-cache"
    assert "immutable" in client.get(latest["url"]).headers["cache-control"]


def test_conditional_get_and_head(client):
    first = client.get("/webgrad.js")
    again = client.get("/webgrad.js", headers={"If-None-Match": first.headers["etag"]})
    assert again.status_code == 304 and again.content == b""
    head = client.head("/pyodide/pyodide.asm.wasm")
    assert head.status_code == 200 and head.content == b""
    assert int(head.headers["content-length"]) == len(WASM_MAGIC) + 8


def test_index_and_directory_redirect(client):
    assert "demos" in client.get("/demos/").text
    response = client.get("/demos", follow_redirects=False)
    assert response.status_code in (301, 307, 308) and response.headers["location"].endswith("/demos/")


def test_wgsl_serves_only_kernels(client):
    assert client.get("/wgsl/binary.wgsl").text.strip()
    assert client.get("/wgsl/__init__.py").status_code == 404


# ----------------------------------------------------------------------------- path safety

TRAVERSALS = [
    "/../secret.txt", "/../../etc/passwd", "/%2e%2e/secret.txt", "/%2E%2E/%2E%2E/etc/passwd",
    "/..%2fsecret.txt", "/%2e%2e%2fsecret.txt", "/.%2e/secret.txt", "/pyodide/../../secret.txt",
    "/pyodide/%2e%2e/%2e%2e/secret.txt", "/vendor/tfjs/..%2f..%2f..%2fsecret.txt",
    "/wgsl/../pyproject.toml", "/wgsl/%2e%2e/pyproject.toml", "/wheels/../../pyproject.toml",
    "//etc/passwd", "/pyodide//etc/passwd", "/%2fetc%2fpasswd", "/etc/passwd",
    "/..\\secret.txt", "/%5c..%5csecret.txt", "/pyodide/..%5c..%5csecret.txt",
    "/%00", "/index.html%00.js", "/secret.txt%00", "/C:/Windows/win.ini", "/c:%5cwindows",
    "/.env", "/.git/config", "/%2e%65nv", "/leak.txt", "/leakdir/also-secret.txt", "/leakdir/",
    "/%252e%252e/secret.txt", "http://127.0.0.1/../secret.txt", "/./index.html",
    "/api/models/..", "/api/models/%2e%2e/weights", "/api/models/..%2f..%2fsecret.txt",
    "/loop", "/loop/x", "/" + "a" * 4000, "/private/secret.txt", "/private/",
]
# Well-formed paths that lead nowhere (or outside a root through a symlink) are 404;
# everything else is refused by the segment check (400) before touching the disk.
NOT_FOUND = {"/etc/passwd", "/leak.txt", "/leakdir/also-secret.txt", "/leakdir/", "/%252e%252e/secret.txt",
             "/loop", "/loop/x", "/" + "a" * 4000, "/private/secret.txt", "/private/"}


@pytest.mark.parametrize("target", TRAVERSALS)
def test_no_file_outside_the_roots(base, target):
    status, _headers, body = raw_request(base, target)
    assert status == (404 if target in NOT_FOUND else 400), (target, status, body[:200])
    assert SECRET.encode() not in body and b"[build-system]" not in body and b"root:" not in body


def test_nul_and_control_bytes_in_request_line(base):
    for target in (b"/a\x00b", b"/\x01", b"/..\x00/secret.txt"):
        status, _, body = raw_request(base, target)
        assert status in (0, 400, 404) and SECRET.encode() not in body


def test_symlink_inside_the_root_still_works(client):
    assert client.get("/alias.js").text == "export const hello = 1;\n"


# ----------------------------------------------------------------------------- model store

def test_model_list_revalidates_to_304_until_a_model_changes(client):
    """The playground asks for the listing on every visit: unchanged, it costs a 304 and no body."""
    first = client.get("/api/models")
    etag = first.headers["etag"]
    again = client.get("/api/models", headers={"If-None-Match": etag})
    assert again.status_code == 304 and again.content == b"" and again.headers["etag"] == etag
    put_model(client, "listed-once", safetensors_bytes(seed=3))
    changed = client.get("/api/models", headers={"If-None-Match": etag})
    assert changed.status_code == 200 and changed.headers["etag"] != etag
    assert "listed-once" in [m["name"] for m in changed.json()["models"]]


def test_model_roundtrip(client):
    weights = safetensors_bytes(seed=1)
    created = put_model(client, "digits-mlp", weights)
    assert created.status_code == 201, created.text
    record = created.json()
    assert record["replaced"] is None
    assert record["size"] == len(weights) and record["metadata"] == {"classes": 10}
    assert record["sha256"] == hashlib.sha256(weights).hexdigest()

    listed = {m["name"]: m for m in client.get("/api/models").json()["models"]}
    assert listed["digits-mlp"]["size"] == len(weights)
    assert {"created", "updated", "metadata"} <= set(listed["digits-mlp"])

    meta = client.get("/api/models/digits-mlp")
    assert meta.status_code == 200 and meta.json()["metadata"] == {"classes": 10}
    download = client.get("/api/models/digits-mlp/weights")
    assert download.status_code == 200 and download.content == weights
    assert download.headers["content-type"] == "application/octet-stream"
    assert download.headers["content-disposition"] == 'attachment; filename="digits-mlp.safetensors"'
    cached = client.get("/api/models/digits-mlp/weights", headers={"If-None-Match": download.headers["etag"]})
    assert cached.status_code == 304

    newer = safetensors_bytes(seed=2)
    replaced = put_model(client, "digits-mlp", newer, '{"classes": 10, "epochs": 3}')
    assert replaced.status_code == 200
    assert replaced.json()["created"] == record["created"] and replaced.json()["revision"] == 2
    assert replaced.json()["replaced"] == {"revision": 1, "updated": record["updated"], "size": len(weights),
                                           "sha256": record["sha256"]}
    assert client.get("/api/models/digits-mlp/weights").content == newer

    assert client.delete("/api/models/digits-mlp").status_code == 204
    assert client.get("/api/models/digits-mlp").status_code == 404
    assert client.get("/api/models/digits-mlp/weights").status_code == 404
    assert client.delete("/api/models/digits-mlp").status_code == 404


def test_weights_download_is_named_after_the_model(client):
    assert put_model(client, "A-b_c.9", safetensors_bytes()).status_code == 201
    for method in ("GET", "HEAD"):
        response = client.request(method, "/api/models/A-b_c.9/weights")
        assert response.headers["content-disposition"] == 'attachment; filename="A-b_c.9.safetensors"', method
    client.delete("/api/models/A-b_c.9")


def test_if_none_match_star_refuses_to_replace(client, site):
    first, second = safetensors_bytes(seed=4), safetensors_bytes(seed=5)
    only_new = {**CLIENT_HEADERS, "If-None-Match": "*"}
    created = client.put("/api/models/careful", files={"weights": ("m.safetensors", first)}, headers=only_new)
    assert created.status_code == 201 and created.json()["replaced"] is None
    refused = client.put("/api/models/careful", files={"weights": ("m.safetensors", second)},
                         data={"metadata": '{"x": 1}'}, headers=only_new)
    assert refused.status_code == 412
    answer = refused.json()
    assert "'careful' already exists" in answer["error"] and "revision 1" in answer["error"]
    assert answer["current"] == {"revision": 1, "updated": created.json()["updated"], "size": len(first),
                                 "sha256": hashlib.sha256(first).hexdigest()}
    assert refused.headers["etag"] == f'"{answer["current"]["sha256"]}"'
    assert client.get("/api/models/careful/weights").content == first
    assert client.get("/api/models/careful").json()["metadata"] == {}
    assert list((site["settings"].data_dir / "tmp").iterdir()) == []

    # An ETag list refuses replacing that version only.
    etag = client.get("/api/models/careful").headers["etag"]
    stale = {**CLIENT_HEADERS, "If-None-Match": f'"{"0" * 64}", W/{etag}'}
    assert client.put("/api/models/careful", files={"weights": ("m.safetensors", second)},
                      headers=stale).status_code == 412
    other = {**CLIENT_HEADERS, "If-None-Match": f'"{"0" * 64}"'}
    replaced = client.put("/api/models/careful", files={"weights": ("m.safetensors", second)}, headers=other)
    assert replaced.status_code == 200 and replaced.json()["replaced"]["revision"] == 1
    client.delete("/api/models/careful")


def test_store_checks_the_precondition_inside_the_write(tmp_path):
    """Two uploads that both found no model before reading their bodies: only one may create it."""
    from server.store import PreconditionFailed

    store = ModelStore(tmp_path)
    first = store.write_temp(b"first")
    record, replaced = store.put("m", first, {}, size=5, sha256="1" * 64, only_if=lambda current: current is None)
    assert replaced is None and record["revision"] == 1
    second = store.write_temp(b"second")
    with pytest.raises(PreconditionFailed) as info:
        store.put("m", second, {}, size=6, sha256="2" * 64, only_if=lambda current: current is None)
    assert info.value.current["revision"] == 1 and info.value.current["sha256"] == "1" * 64
    assert store.get("m")["sha256"] == "1" * 64
    assert [p.name for p in store.models_dir.iterdir()] == [store.open_weights("m")[1].name.rpartition("/")[2]]
    assert not second.exists() and list(store.tmp_dir.iterdir()) == []


def test_metadata_is_optional(client):
    response = put_model(client, "no-meta", safetensors_bytes(), metadata=None)
    assert response.status_code == 201 and response.json()["metadata"] == {}
    client.delete("/api/models/no-meta")


BAD_WEIGHTS = {
    "garbage": (b"definitely not safetensors", "not a safetensors file"),
    "empty": (b"", "shorter than the 8-byte header"),
    "huge header length": ((2**40).to_bytes(8, "little") + b"{}", "header length"),
    "truncated": (None, "truncated"),
    "pickle": (b"\x80\x04\x95" + b"\x00" * 32, "pickle"),
    # Headers that are JSON but not an object once answered 500 (the tensor count unpacked them as pairs).
    "array header": (struct.pack("<Q", 9) + b"[1, 2, 3]", "got a JSON array"),
    "array of pairs header": (struct.pack("<Q", 14) + b'[["w", {}], 1]', "header must be a JSON object"),
    "string header": (struct.pack("<Q", 3) + b'"w"', "got a JSON string"),
}


@pytest.mark.parametrize("case", sorted(BAD_WEIGHTS))
def test_malformed_weights_are_refused_and_the_old_version_stays(client, site, case):
    good = safetensors_bytes(seed=3)
    assert put_model(client, "keeper", good).status_code in (200, 201)
    bad, reason = BAD_WEIGHTS[case]
    if bad is None:
        bad = good[: len(good) - 10]
    response = put_model(client, "keeper", bad, '{"broken": true}')
    assert response.status_code == 400
    message = response.json()["error"]
    assert "safetensors" in message
    assert reason.lower() in message.lower(), message
    assert client.get("/api/models/keeper/weights").content == good
    assert client.get("/api/models/keeper").json()["metadata"] == {"classes": 10}
    assert list((site["settings"].data_dir / "tmp").iterdir()) == []


@pytest.mark.parametrize("metadata", ["[1, 2]", '"text"', "3", "null", "not json", '{"x": NaN}', "{"])
def test_metadata_must_be_a_json_object(client, metadata):
    response = put_model(client, "meta-check", safetensors_bytes(), metadata)
    assert response.status_code == 400
    assert "metadata" in response.json()["error"]
    assert client.get("/api/models/meta-check").status_code == 404


@pytest.mark.parametrize("name", ["..", "a..b", ".hidden", "-dash", "_under", "x" * 65, "bad name",
                                  "semi;colon", "ünïcode", "a%2fb", "%2e%2e", "a\\b"])
def test_bad_model_names(base, client, name):
    from urllib.parse import quote

    target = f"/api/models/{quote(name, safe='%')}"
    status, _, body = raw_request(base, target)
    assert status in (400, 404), (name, status)
    # Sent verbatim: httpx would resolve "/api/models/.." to "/api/" before sending.
    upload = client.build_request("PUT", "/api/models/placeholder",
                                  files={"weights": ("w.safetensors", safetensors_bytes())})
    status, _, body = raw_request(base, target, method="PUT", body=upload.read(),
                                  headers={"Content-Type": upload.headers["content-type"], **CLIENT_HEADERS})
    assert status in (400, 404), (name, status, body)
    assert all(m["name"] != name for m in client.get("/api/models").json()["models"])


def test_good_model_names(client):
    for name in ("a", "A.b-c_d", "x" * 64, "v1.2.3"):
        assert put_model(client, name, safetensors_bytes()).status_code == 201, name
        assert client.delete(f"/api/models/{name}").status_code == 204


def test_oversized_uploads_get_413_and_change_nothing(client, site):
    good = safetensors_bytes(seed=4)
    assert put_model(client, "big", good).status_code in (200, 201)
    too_big = b"\x00" * (MAX_UPLOAD + 1)
    # With a Content-Length: refused before the body is read.
    assert put_model(client, "big", too_big).status_code == 413

    # Without one (chunked): counted while streaming.
    def chunked():
        yield b'--b\r\nContent-Disposition: form-data; name="weights"; filename="w"\r\n\r\n'
        for _ in range(64):
            yield b"\x00" * 65536
        yield b"\r\n--b--\r\n"

    response = client.put("/api/models/big", content=chunked(),
                          headers={"Content-Type": "multipart/form-data; boundary=b"})
    assert response.status_code == 413
    assert "limit" in response.json()["error"]
    assert client.get("/api/models/big/weights").content == good
    assert list((site["settings"].data_dir / "tmp").iterdir()) == []


def test_a_body_drained_after_an_early_answer_is_not_read_as_headers(base):
    """After an early 413 the client may still send the body it announced; those bytes
    belong to the refused request, not to the next one's headers (else the next request on
    the connection is answered 431, as a CI run once saw)."""
    parts = httpx.URL(base)
    declared = 4 * MAX_UPLOAD
    with socket.create_connection((parts.host, parts.port), timeout=10) as sock:
        sock.sendall(b"PUT /api/models/late HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: multipart/form-data; "
                     b"boundary=b\r\nX-Webgrad-Client: 1\r\nContent-Length: %d\r\n\r\n" % declared)
        assert sock.recv(4096).startswith(b"HTTP/1.1 413")
        sock.sendall(b"\x00" * declared)  # the announced body, now after the answer
        sock.sendall(b"GET /api/models HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
        rest = b""  # the 413's body, then the next answer's status line
        while b"HTTP/1.1 " not in rest:
            chunk = sock.recv(4096)
            assert chunk, rest
            rest += chunk
    assert rest[rest.index(b"HTTP/1.1 "):].startswith(b"HTTP/1.1 200"), rest


def test_declared_length_is_refused_before_the_body(base):
    """With Expect: 100-continue the client never has to send the body at all."""
    parts = httpx.URL(base)
    with socket.create_connection((parts.host, parts.port), timeout=10) as sock:
        sock.sendall(b"PUT /api/models/huge HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: multipart/form-data; "
                     b"boundary=b\r\nX-Webgrad-Client: 1\r\nExpect: 100-continue\r\n"
                     b"Content-Length: 10000000000\r\n\r\n")
        assert sock.recv(4096).startswith(b"HTTP/1.1 413")


def test_default_upload_limit(monkeypatch):
    monkeypatch.delenv("WEBGRAD_MAX_UPLOAD", raising=False)
    assert max_upload_from_env() == DEFAULT_MAX_UPLOAD == 64 * 1024 * 1024
    monkeypatch.setenv("WEBGRAD_MAX_UPLOAD", "1000")
    assert max_upload_from_env() == 1000


def test_upload_format_errors(client):
    missing = client.put("/api/models/fmt", data={"metadata": "{}"}, files={"other": ("x", b"1")})
    assert missing.status_code == 400 and "weights" in missing.json()["error"]
    raw = client.put("/api/models/fmt", content=safetensors_bytes(),
                     headers={"Content-Type": "application/octet-stream"})
    assert raw.status_code == 415 and "multipart" in raw.json()["error"]


@pytest.fixture(scope="module")
def bundle(tmp_path_factory) -> dict:
    """A small web bundle (path -> bytes) as webgrad.export writes it, and the weights of its model."""
    import webgrad
    from webgrad import nn, serialize

    webgrad.manual_seed(0)
    model = nn.Sequential(nn.Linear(4, 3), nn.ReLU())
    folder = tmp_path_factory.mktemp("bundle") / "b"
    exported = webgrad.export(model, (webgrad.zeros(1, 4),), folder, labels=["a", "b", "c"])
    files = {path: (folder / path).read_bytes() for path in exported.files}
    return {"files": files, "weights": serialize.save_bytes(model.state_dict())}


def put_bundle(client, name, bundle, files=None, data=None):
    files = bundle["files"] if files is None else files
    parts = [("weights", ("model.safetensors", bundle["weights"]))]
    parts += [(f"lite/{path}", (path.rpartition("/")[2], content)) for path, content in files.items()]
    return client.put(f"/api/models/{name}", files=parts, data=data or {"metadata": "{}"})


def test_web_bundle_is_stored_with_the_model_and_served_cross_origin(client, site, bundle):
    response = put_bundle(client, "lite-model", bundle)
    assert response.status_code == 201, response.text
    lite = response.json()["lite"]
    sizes = {path: len(content) for path, content in bundle["files"].items()}
    assert lite["files"] == sizes and lite["bytes"] == sum(sizes.values()) and response.json()["lite_reason"] is None
    assert lite["url"] == "/api/models/lite-model/lite/"
    assert client.get("/api/models/lite-model").json()["lite"] == lite
    assert [m["lite"] for m in client.get("/api/models").json()["models"] if m["name"] == "lite-model"] == [lite]
    types = {"model.json": "application/json", "weights.safetensors": "application/octet-stream",
             "kernels/0.wgsl": "text/wgsl; charset=utf-8"}
    for path, content in bundle["files"].items():
        served = client.get(f"/api/models/lite-model/lite/{path}", headers={"Origin": "https://elsewhere.example"})
        assert served.status_code == 200 and served.content == content, path
        assert served.headers["access-control-allow-origin"] == "*" and served.headers["cache-control"] == "no-cache"
        assert served.headers["content-type"] == types.get(path, types["kernels/0.wgsl"])
        assert served.headers["etag"] == f'"{lite["sha256"]}"'
        again = client.get(f"/api/models/lite-model/lite/{path}", headers={"If-None-Match": served.headers["etag"]})
        assert again.status_code == 304 and again.content == b""
    head = client.head("/api/models/lite-model/lite/weights.safetensors")
    assert head.status_code == 200 and head.headers["content-length"] == str(sizes["weights.safetensors"])
    folder = site["settings"].data_dir / "lite"
    assert [p.name.split("@")[0] for p in folder.iterdir()] == ["lite-model"]
    # Replaced without a bundle: the reason is listed, the files are gone from disk and from the API.
    plain = client.put("/api/models/lite-model", files={"weights": ("m.safetensors", bundle["weights"])},
                       data={"lite_reason": "webgrad.export: 'cumsum': an op the web bundle does not lower yet"})
    assert plain.status_code == 200 and plain.json()["lite"] is None
    assert "'cumsum'" in plain.json()["lite_reason"]
    gone = client.get("/api/models/lite-model/lite/model.json")
    assert gone.status_code == 404 and "'cumsum'" in gone.json()["error"]
    assert list(folder.iterdir()) == []
    assert client.delete("/api/models/lite-model").status_code == 204


def test_a_model_uploaded_without_a_bundle_says_so(client):
    assert put_model(client, "no-lite", safetensors_bytes()).status_code == 201
    record = client.get("/api/models/no-lite").json()
    assert record["lite"] is None and "without one" in record["lite_reason"]
    assert client.get("/api/models/no-lite/lite/model.json").status_code == 404
    assert client.get("/api/models/nobody/lite/model.json").status_code == 404
    client.delete("/api/models/no-lite")


@pytest.mark.parametrize("path", ["../index.sqlite3", "kernels/../model.json", "model.json/", "other.json",
                                  "kernels/01.wgsl", "kernels/x.wgsl", "", "kernels/7.wgsl"])
def test_only_bundle_files_are_served(client, bundle, path):
    assert put_bundle(client, "lite-paths", bundle).status_code in (200, 201)
    status, _, body = raw_request(client.base_url.__str__().rstrip("/"), f"/api/models/lite-paths/lite/{path}")
    assert status in (400, 404), (path, status)
    assert b"sqlite" not in body.lower()[:20] and b"format" not in body


def _bad_bundles(files: dict) -> dict:
    model = json.loads(files["model.json"])
    more = dict(model, kernels=[*model["kernels"], "kernels/9.wgsl"])
    return {
        "traversal": ({**files, "../evil.json": b"{}"}, "not a bundle file"),
        "absolute": ({**files, "/etc/passwd": b"x"}, "not a bundle file"),
        "other name": ({**files, "notes.txt": b"x"}, "not a bundle file"),
        "leading zero": ({**files, "kernels/00.wgsl": b"x"}, "not a bundle file"),
        "no model.json": ({k: v for k, v in files.items() if k != "model.json"}, "no lite/model.json"),
        "no weights": ({k: v for k, v in files.items() if k != "weights.safetensors"}, "no lite/weights.safetensors"),
        "model.json not json": ({**files, "model.json": b"{nope"}, "not valid JSON"),
        "wrong format": ({**files, "model.json": json.dumps(dict(model, format="x")).encode()}, "'format'"),
        "missing kernel": ({**files, "model.json": json.dumps(more).encode()}, "kernels/9.wgsl"),
        "kernel not named": ({**files, "kernels/7.wgsl": b"fn main() {}"}, "not named in model.json"),
        "kernel not wgsl": ({**files, "kernels/0.wgsl": b"\xff\xfe"}, "kernels/0.wgsl"),
        "truncated weights": ({**files, "weights.safetensors": files["weights.safetensors"][:-8]}, "weights"),
        "huge kernel": ({**files, "kernels/0.wgsl": b"fn main() {}" + b" " * (1024 * 1024)}, "more than"),
    }


@pytest.mark.parametrize("case", ["traversal", "absolute", "other name", "leading zero", "no model.json",
                                  "no weights", "model.json not json", "wrong format", "missing kernel",
                                  "kernel not named", "kernel not wgsl", "truncated weights", "huge kernel"])
def test_bad_bundles_are_refused_and_the_old_version_stays(client, site, bundle, case):
    assert put_bundle(client, "lite-keeper", bundle).status_code in (200, 201)
    before = client.get("/api/models/lite-keeper").json()
    files, reason = _bad_bundles(bundle["files"])[case]
    response = put_bundle(client, "lite-keeper", bundle, files)
    assert response.status_code in (400, 413), response.text
    if response.status_code == 400:
        message = response.json()["error"]
        assert reason.lower() in message.lower(), message
        assert str(site["settings"].data_dir) not in message  # the server's folders are its own business
    assert client.get("/api/models/lite-keeper").json() == before
    assert client.get("/api/models/lite-keeper/lite/model.json").content == bundle["files"]["model.json"]
    assert list((site["settings"].data_dir / "tmp").iterdir()) == []


def test_unexpected_parts_and_reasons_are_refused(client, bundle):
    weights = ("weights", ("m.safetensors", bundle["weights"]))
    other = client.put("/api/models/lite-odd", files=[weights, ("extra", ("x", b"1"))])
    assert other.status_code == 400 and "unexpected part 'extra'" in other.json()["error"]
    plain = client.put("/api/models/lite-odd", files=[weights], data={"lite/model.json": "{}"})
    assert plain.status_code == 400 and "file part" in plain.json()["error"]
    long = client.put("/api/models/lite-odd", files=[weights], data={"lite_reason": "x" * 5000})
    assert long.status_code == 400 and "lite_reason" in long.json()["error"]
    assert client.get("/api/models/lite-odd").status_code == 404


def test_store_bundles_are_atomic_with_the_weights_and_collected(tmp_path, bundle):
    store = ModelStore(tmp_path)
    folder = store.write_temp_folder(bundle["files"])
    summary = {"files": {p: len(c) for p, c in bundle["files"].items()}, "bytes": 1, "sha256": "0" * 64}
    path = store.write_temp(bundle["weights"])
    with pytest.raises(ValueError):  # a refused write leaves neither the weights nor the bundle behind
        store.put("bad name!", path, {}, size=1, sha256="0" * 64, lite=(folder, summary))
    assert not folder.exists() and list(store.lite_dir.iterdir()) == [] and list(store.models_dir.iterdir()) == []
    folder = store.write_temp_folder(bundle["files"])
    path = store.write_temp(bundle["weights"])
    record, _ = store.put("kept", path, {}, size=1, sha256="0" * 64, lite=(folder, summary))
    assert record["lite"]["files"] == summary["files"]
    record, file = store.open_lite("kept", "model.json")
    assert file.read() == bundle["files"]["model.json"]
    file.close()
    orphan = store.lite_dir / "gone@1-abc"
    orphan.mkdir()
    abandoned = store.write_temp_folder({"model.json": b"{}"})
    assert store.collect_garbage(min_age_s=3600) == 0
    old = time.time() - 7200
    for stale in (orphan, abandoned, *store.lite_dir.iterdir(), *store.models_dir.iterdir()):
        os.utime(stale, (old, old))
    assert store.collect_garbage(min_age_s=3600) == 2
    assert [p.name.split("@")[0] for p in store.lite_dir.iterdir()] == ["kept"]
    assert store.delete("kept") and list(store.lite_dir.iterdir()) == []


def test_a_data_folder_from_before_bundles_gains_the_column(tmp_path):
    import sqlite3

    with sqlite3.connect(tmp_path / "index.sqlite3") as conn:
        conn.execute("CREATE TABLE models (name TEXT PRIMARY KEY, file TEXT NOT NULL, size INTEGER NOT NULL, "
                     "sha256 TEXT NOT NULL, metadata TEXT NOT NULL, created TEXT NOT NULL, updated TEXT NOT NULL, "
                     "revision INTEGER NOT NULL)")
        conn.execute("INSERT INTO models VALUES ('old', 'old@1.safetensors', 1, 'ab', '{}', 't', 't', 1)")
    conn.close()
    record = ModelStore(tmp_path).get("old")
    assert record["lite"] is None and "without one" in record["lite_reason"]


def test_concurrent_puts_of_one_name(client, site):
    blobs = [safetensors_bytes(seed=10 + i, shape=(32, 16)) for i in range(12)]

    def upload(blob):
        with httpx.Client(base_url=site["base"], timeout=60, headers=CLIENT_HEADERS) as own:
            return put_model(own, "contended", blob).status_code

    with concurrent.futures.ThreadPoolExecutor(max_workers=12) as pool:
        statuses = list(pool.map(upload, blobs))
    assert sorted(set(statuses)) in ([200, 201], [201]) and statuses.count(201) == 1
    record = client.get("/api/models/contended").json()
    weights = client.get("/api/models/contended/weights").content
    assert weights in blobs and hashlib.sha256(weights).hexdigest() == record["sha256"]
    assert record["revision"] == len(blobs)
    files = [p.name for p in (site["settings"].data_dir / "models").iterdir() if p.name.startswith("contended@")]
    assert len(files) == 1, files


def test_store_collects_stale_files(tmp_path):
    store = ModelStore(tmp_path)
    temp = store.write_temp(b"abandoned upload")
    orphan = store.models_dir / "gone@1-abc.safetensors"
    orphan.write_bytes(b"x")
    path = store.write_temp(safetensors_bytes())
    store.put("kept", path, {}, size=path.stat().st_size, sha256="0" * 64)
    assert store.collect_garbage(min_age_s=3600) == 0  # too young: a writer may own them
    old = time.time() - 7200
    for stale in (temp, orphan, *store.models_dir.iterdir()):
        os.utime(stale, (old, old))
    assert store.collect_garbage(min_age_s=3600) == 2
    assert [p.name.split("@")[0] for p in store.models_dir.iterdir()] == ["kept"]


# ----------------------------------------------------------------------------- the asset step

def test_asset_step_refuses_a_wrong_sha256(tmp_path):
    class FakeSource:
        def fetch(self, file_name, dest):
            dest.write_bytes(b"tampered")
            return "a test double"

    lock = {"packages": {"numpy": {"file_name": "numpy-x.whl", "sha256": "0" * 64}}}
    (tmp_path / "numpy-x.whl").write_bytes(b"an old, wrong file")
    with pytest.raises(asset_step.AssetError, match="sha256"):
        asset_step.ensure_lock_packages(tmp_path, lock, names=("numpy",), sources=FakeSource())
    assert list(tmp_path.iterdir()) == []


def test_stdlib_is_stored_uncompressed_so_that_it_compresses_on_the_wire(tmp_path):
    source = tmp_path / "npm" / "python_stdlib.zip"
    source.parent.mkdir()
    module = b"".join(b"def f%d(x):\n    return x + %d\n" % (i, i) for i in range(2000))
    with zipfile.ZipFile(source, "w", zipfile.ZIP_DEFLATED) as archive:
        archive.writestr("asyncio/", b"")
        archive.writestr("asyncio/base.py", module)
        archive.writestr("json/__init__.pyc", bytes(range(256)) * 8)
    target = tmp_path / "python_stdlib.zip"
    assert asset_step.ensure_stored_stdlib(source, target) == 1
    with zipfile.ZipFile(source) as original, zipfile.ZipFile(target) as stored:
        assert [e.filename for e in stored.infolist()] == [e.filename for e in original.infolist()]
        assert all(e.compress_type == zipfile.ZIP_STORED for e in stored.infolist())
        assert all(stored.read(e.filename) == original.read(e) for e in original.infolist())
    assert asset_step.compress.write_sidecars(target) == 2  # stored, it compresses; deflated it would not
    made = target.stat().st_mtime_ns
    assert asset_step.ensure_stored_stdlib(source, target) == 0 and target.stat().st_mtime_ns == made
    os.utime(source, ns=(made + 10**9, made + 10**9))  # a new Pyodide: made again
    assert asset_step.ensure_stored_stdlib(source, target) == 1


def test_asset_step_refuses_a_wrong_extra_wheel(tmp_path, monkeypatch):
    def fake_run(command, what, cwd=None):
        Path(command[command.index("-d") + 1], "demo-1.0-py3-none-any.whl").write_bytes(b"evil")

    monkeypatch.setattr(asset_step, "_run", fake_run)
    with pytest.raises(asset_step.AssetError, match="sha256"):
        asset_step.ensure_extra_wheels(tmp_path, {"demo-1.0-py3-none-any.whl": "0" * 64})
    assert not (tmp_path / "demo-1.0-py3-none-any.whl").exists()


def test_asset_step_remakes_the_memory_snapshot_only_when_pyodide_or_its_script_changes(tmp_path, monkeypatch):
    for name in asset_step.SNAPSHOT_INPUTS:
        (tmp_path / name).write_bytes(name.encode())
    made = []

    def fake_chromium(target, repo):
        made.append(target)
        return b"memory %d" % len(made), "new", 25 << 20

    def no_chromium(target, repo):
        raise asset_step.AssetError("Chromium is missing")

    monkeypatch.setattr(asset_step, "make_snapshot", no_chromium)  # a warning, not a failed asset step
    assert asset_step.ensure_snapshot(tmp_path) == 0 and not (tmp_path / "snapshot.json").exists()
    monkeypatch.setattr(asset_step, "make_snapshot", fake_chromium)

    def current() -> str:
        return json.loads((tmp_path / "snapshot.json").read_text())["file"]

    assert asset_step.ensure_snapshot(tmp_path) == 1
    first = current()
    assert (tmp_path / first).read_bytes() == b"memory 1"
    manifest = json.loads((tmp_path / "snapshot.json").read_text())
    assert manifest["jspi"] == "new" and manifest["size"] == 25 << 20  # the page sizes Pyodide's memory by it
    assert asset_step.ensure_snapshot(tmp_path) == 0 and len(made) == 1
    (tmp_path / "pyodide.asm.wasm").write_bytes(b"another Pyodide build")
    assert asset_step.ensure_snapshot(tmp_path) == 1
    assert current() != first
    assert sorted(p.name for p in tmp_path.glob("snapshot-*")) == [current()]  # the old one is gone
    (tmp_path / current()).unlink()  # a lost file is remade too
    assert asset_step.ensure_snapshot(tmp_path) == 1 and (tmp_path / current()).exists()


def test_asset_step_remakes_numpy_image_only_when_its_inputs_change(tmp_path, monkeypatch):
    lock = {"packages": {"numpy": {"file_name": "numpy-x.whl"}}}
    for name in asset_step.NUMPY_IMAGE_INPUTS + ("numpy-x.whl",):
        (tmp_path / name).write_bytes(name.encode())
    made = []

    def fake_node(command, what, cwd=None):
        made.append(command)
        Path(command[-1]).write_bytes(b"image %d" % len(made))

    monkeypatch.setattr(asset_step, "_run", fake_node)

    def current() -> str:
        return json.loads((tmp_path / "numpy-image.json").read_text())["file"]

    assert asset_step.ensure_numpy_image(tmp_path, lock) == 1
    first = current()
    assert (tmp_path / first).read_bytes() == b"image 1" and made[0][-2] == str(tmp_path / "numpy-x.whl")
    assert asset_step.ensure_numpy_image(tmp_path, lock) == 0 and len(made) == 1
    (tmp_path / "numpy-x.whl").write_bytes(b"another numpy")
    assert asset_step.ensure_numpy_image(tmp_path, lock) == 1 and current() != first
    assert sorted(p.name for p in tmp_path.glob("numpy-*.img.gz")) == [current()]  # the old one is gone
    (tmp_path / current()).unlink()  # a lost file is remade too
    assert asset_step.ensure_numpy_image(tmp_path, lock) == 1 and (tmp_path / current()).exists()


def test_numpy_image_is_the_verified_wheel_unpacked_with_bytecode(real_assets):
    folder = real_assets / "pyodide"
    manifest = json.loads((folder / "numpy-image.json").read_text())
    header, files = _read_image(gzip.decompress((folder / manifest["file"]).read_bytes()))
    lock = json.loads((folder / "pyodide-lock.json").read_text())["packages"]["numpy"]
    assert header["wheel"] == manifest["wheel"] == lock["file_name"]
    wheel = folder / lock["file_name"]
    assert asset_step.sha256_of(wheel) == lock["sha256"]
    with zipfile.ZipFile(wheel) as archive:
        for info in archive.infolist():
            if not info.is_dir():
                assert files[info.filename] == archive.read(info), info.filename
    sources = [p for p in files if p.endswith(".py")]
    assert len(sources) > 100
    for source in sources:  # each with its Pyodide-compiled bytecode
        folder_name, _, name = source.rpartition("/")
        assert f"{folder_name}/__pycache__/{name[:-3]}.cpython-312.pyc" in files, source
    assert sorted(header["dynlibs"]) == sorted(p for p in files if p.endswith(".so"))
    assert any(p.endswith("_multiarray_umath.cpython-312-wasm32-emscripten.so") for p in header["dynlibs"])


def _snapshot(*folders: Path) -> dict:
    return {str(p): p.stat().st_mtime_ns for folder in folders for p in folder.rglob("*") if p.is_file()}


def test_asset_step_is_idempotent(real_assets, monkeypatch):
    asset_step.ensure_assets()  # settle anything that changed since the fixture ran
    before = _snapshot(real_assets, REPO / "node_modules" / "pyodide")

    def no_network(*args, **kwargs):
        raise AssertionError("the second asset run used the network")

    def no_subprocess(*args, **kwargs):
        raise AssertionError("the second asset run started a subprocess")

    monkeypatch.setattr(socket.socket, "connect", no_network)
    monkeypatch.setattr(socket, "create_connection", no_network)
    monkeypatch.setattr(subprocess, "run", no_subprocess)
    monkeypatch.setattr(subprocess, "Popen", no_subprocess)
    assert asset_step.ensure_assets() == 0
    assert asset_step.main([]) == 0
    monkeypatch.undo()
    assert _snapshot(real_assets, REPO / "node_modules" / "pyodide") == before


def test_snapshot_and_numpy_image_are_sent_brotli_or_gzip_encoded(real_base, real_assets):
    folder = real_assets / "pyodide"
    with httpx.Client(base_url=real_base, timeout=60) as http:
        for manifest in ("snapshot.json", "numpy-image.json"):
            file = http.get(f"/pyodide/{manifest}").json()["file"]
            for accept in ("br", "gzip"):
                response = http.get(f"/pyodide/{file}", headers={"Accept-Encoding": accept})
                assert response.headers["content-encoding"] == accept, (file, accept)
                assert "immutable" in response.headers["cache-control"]
                assert response.content == gzip.decompress((folder / file).read_bytes())


def test_real_runtime_is_sent_compressed(real_base, real_assets):
    """What a first visit fetches, brotli- and gzip-encoded, decodes to the very files."""
    import brotli

    decode = {"br": brotli.decompress, "gzip": gzip.decompress}
    with httpx.Client(base_url=real_base, timeout=60) as http:
        for name in ("pyodide.asm.wasm", "pyodide.asm.js", "pyodide-lock.json", "python_stdlib.zip"):
            raw = (real_assets / "pyodide" / name).read_bytes()
            for accept in ("br", "gzip"):
                with http.stream("GET", f"/pyodide/{name}", headers={"Accept-Encoding": accept}) as response:
                    body = b"".join(response.iter_raw())
                assert response.headers["content-encoding"] == accept, (name, accept)
                assert response.headers["vary"] == "Accept-Encoding"
                assert int(response.headers["content-length"]) == len(body) < 0.9 * len(raw)
                assert decode[accept](body) == raw, (name, accept)
            if name.endswith(".wasm"):  # WebAssembly.instantiateStreaming needs this type, encoded or not
                assert response.headers["content-type"] == "application/wasm"


def test_real_pyodide_runtime_is_served(real_base, real_assets):
    lock = json.loads((real_assets / "pyodide" / "pyodide-lock.json").read_text())
    assert lock["info"]["version"] == asset_step.PYODIDE_VERSION
    with httpx.Client(base_url=real_base, timeout=60) as http:
        wasm = http.get("/pyodide/pyodide.asm.wasm")
        assert wasm.headers["content-type"] == "application/wasm" and wasm.content[:4] == b"\x00asm"
        assert "immutable" in wasm.headers["cache-control"]
        for name in ("pyodide.js", "pyodide.mjs", "python_stdlib.zip", "pyodide-lock.json"):
            assert http.get(f"/pyodide/{name}").status_code == 200, name
        manifest = http.get("/pyodide/snapshot.json")
        assert manifest.headers["cache-control"] == "no-cache"
        for package in asset_step.LOCK_PACKAGES:
            entry = lock["packages"][package]
            served = http.get(f"/pyodide/{entry['file_name']}")
            assert served.status_code == 200, package
            assert hashlib.sha256(served.content).hexdigest() == entry["sha256"], package
        index = http.get("/pyodide-extra/index.json").json()
        names = {p["name"] for p in index["packages"]}
        assert {"pytest", "iniconfig", "packaging", "pluggy"} <= names
        for package in index["packages"]:
            served = http.get(package["url"])
            assert served.status_code == 200 and hashlib.sha256(served.content).hexdigest() == package["sha256"]
        for _source, name in asset_step.TFJS_FILES:
            served = http.head(f"/vendor/tfjs/{name}")
            assert served.status_code == 200, name
            expected = "application/wasm" if name.endswith(".wasm") else "text/javascript"
            assert served.headers["content-type"].split(";")[0] == expected
        latest = http.get("/wheels/latest.json").json()
        assert http.get(latest["url"]).status_code == 200


def test_real_web_root_is_served(real_base):
    with httpx.Client(base_url=real_base, timeout=30) as http:
        for name in ("index.html", "webgrad.js"):
            if (REPO / "web" / name).exists():
                response = http.get("/" if name == "index.html" else f"/{name}")
                assert response.status_code == 200 and response.headers["cache-control"] == "no-cache"
        for target in ("/../pyproject.toml", "/%2e%2e/pyproject.toml", "/pyodide/../../pyproject.toml"):
            status, _, body = raw_request(real_base, target)
            assert status == 400 and b"[build-system]" not in body
