"""The server against hostile clients, over real loopback sockets: poisoned
metadata, DNS rebinding and cross-site writes, the CSP of HTML pages, idle and
slow sockets, odd but valid requests, files of very many tensors, and path
containment. Each case failed (a 500, a leak, a hang, a wrong status) before.
"""
from __future__ import annotations

import base64
import hashlib
import json
import re
import socket
import sqlite3
import struct
import sys
import time
import tracemalloc
from pathlib import Path

import httpx
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # `server` is not installed

from server import static
from server.api import BadUpload, check_tensor_count
from server.app import CONTENT_SECURITY_POLICY, create_app
from server.guard import AccessPolicy, split_host
from server.store import METADATA_MAX_DEPTH, InvalidMetadata, ModelStore, metadata_json
from server.testing import make_fake_site, raw_request, running_server, running_server_process, safetensors_bytes

SECRET = "hostile-secret-sentinel-77aa"
WRITE = {"X-Webgrad-Client": "1"}
MAX_TENSORS = 40
HEADER_TIMEOUT_S = 1.0
MAX_CONNECTIONS = 24
INLINE_SCRIPT = "\r\n  window.answer = 42;\r\n  document.title = 'x < y';\r\n"


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    top = tmp_path_factory.mktemp("hostile-site")
    settings = make_fake_site(top, SECRET, max_upload=1 << 22)
    settings.max_tensors = MAX_TENSORS
    settings.header_timeout_s = HEADER_TIMEOUT_S
    settings.max_connections = MAX_CONNECTIONS
    (settings.web_root / "page.html").write_bytes(
        f"<!doctype html><script src='/webgrad.js'></script><script type=module>{INLINE_SCRIPT}</script>"
        "<script>\nconsole.log(1)\n</script><p>hi</p>".encode())
    with running_server(create_app(settings)) as base:
        yield {"base": base, "settings": settings}


@pytest.fixture(scope="module")
def base(site) -> str:
    return site["base"]


@pytest.fixture()
def client(base):
    with httpx.Client(base_url=base, timeout=30, headers=WRITE) as http:
        yield http


def put(client, name, metadata="{}", weights=None, **kwargs):
    files = {"weights": ("m.safetensors", weights if weights is not None else safetensors_bytes())}
    return client.put(f"/api/models/{name}", files=files, data={"metadata": metadata}, **kwargs)


def listing(client) -> dict:
    response = client.get("/api/models")
    assert response.status_code == 200, response.text
    return {m["name"]: m for m in response.json()["models"]}


# ----------------------------------------------------------------------------- metadata

def nested(depth: int) -> str:
    return '{"x":' + "[" * (depth - 1) + "]" * (depth - 1) + "}"


BAD_METADATA = {
    "1e999": ('{"x": 1e999}', "finite"),
    "-1e999": ('{"x": -1e999}', "finite"),
    "NaN": ('{"x": NaN}', "NaN"),
    "Infinity": ('{"x": [Infinity]}', "Infinity"),
    "huge int": ('{"x": 1' + "0" * 400 + "}", "range"),
    "lone surrogate": ('{"x": "\\ud800"}', "surrogate"),
    "lone surrogate key": ('{"\\udfff": 1}', "surrogate"),
    "100k deep": (nested(100_000), "nests deeper"),
    "one level too deep": (nested(METADATA_MAX_DEPTH + 1), "nests deeper"),
    "too large": ('{"x": "' + "a" * (1 << 20) + '"}', "at most"),
}


@pytest.mark.parametrize("case", sorted(BAD_METADATA))
def test_bad_metadata_is_refused_before_anything_is_stored(client, case):
    metadata, reason = BAD_METADATA[case]
    good = safetensors_bytes(seed=1)
    assert put(client, "meta-victim", '{"ok": 1}', good).status_code in (200, 201)
    response = put(client, "meta-victim", metadata, safetensors_bytes(seed=2))
    assert response.status_code == 400, response.text
    assert "metadata" in response.json()["error"] and reason in response.json()["error"], response.json()
    response = put(client, f"meta-new-{abs(hash(case)) % 1000}", metadata)
    assert response.status_code == 400
    models = listing(client)  # still answers for everyone
    assert models["meta-victim"]["metadata"] == {"ok": 1}
    assert not any(name.startswith("meta-new-") for name in models)
    assert client.get("/api/models/meta-victim/weights").content == good


def test_metadata_at_the_depth_limit_is_kept(client):
    response = put(client, "meta-deep", nested(METADATA_MAX_DEPTH))
    assert response.status_code in (200, 201), response.text
    assert client.get("/api/models/meta-deep").json()["metadata"] == json.loads(nested(METADATA_MAX_DEPTH))


def test_metadata_that_is_not_utf8_is_refused(client):
    files = {"weights": ("m.safetensors", safetensors_bytes()), "metadata": ("m.json", b'{"x": "\xff\xfe"}')}
    response = client.put("/api/models/meta-bytes", files=files)
    assert response.status_code == 400 and "metadata" in response.json()["error"]


def test_store_refuses_bad_metadata_and_removes_the_upload(tmp_path):
    store = ModelStore(tmp_path)
    for bad in ({"x": float("inf")}, {"x": float("nan")}, {"x": "\ud800"}, {1: 2}, {"x": object()}, [1]):
        temp = store.write_temp(safetensors_bytes())
        with pytest.raises(InvalidMetadata, match="metadata"):
            store.put("m", temp, bad, size=1, sha256="0" * 64)
        assert not temp.exists()
    assert store.list() == [] and list(store.models_dir.iterdir()) == []
    deep: dict = {}
    for _ in range(100_000):
        deep = {"x": deep}
    with pytest.raises(InvalidMetadata, match="nests deeper"):
        metadata_json(deep)


@pytest.mark.parametrize("stored", ['{"x":Infinity}', '{"x":NaN}', '{"x":', "[1]", '{"x":"\\ud800"}',
                                    nested(5000), b'{"x":"\xff"}'])
def test_a_damaged_row_does_not_break_reads(client, site, stored):
    assert put(client, "damaged", '{"fine": true}').status_code in (200, 201)
    assert put(client, "healthy", '{"fine": true}').status_code in (200, 201)
    with sqlite3.connect(site["settings"].data_dir / "index.sqlite3") as conn:
        if isinstance(stored, bytes):  # bytes that are not UTF-8, as only a damaged file holds
            conn.execute("UPDATE models SET metadata = CAST(? AS TEXT) WHERE name = 'damaged'", (stored,))
        else:
            conn.execute("UPDATE models SET metadata = ? WHERE name = 'damaged'", (stored,))
    models = listing(client)
    assert models["healthy"]["metadata"] == {"fine": True} and "metadata_error" not in models["healthy"]
    assert models["damaged"]["metadata"] == {} and "unreadable" in models["damaged"]["metadata_error"]
    single = client.get("/api/models/damaged")
    assert single.status_code == 200 and "metadata_error" in single.json()
    assert put(client, "damaged", '{"fine": 2}').status_code == 200  # re-uploading repairs it
    assert "metadata_error" not in listing(client)["damaged"]


# ----------------------------------------------------------------------------- hosts and writes

@pytest.mark.parametrize("host", ["rebind.evil.example", "evil.example:8000", "127.0.0.1.evil.example",
                                  "localhost.evil.example", "10.0.0.1", "[::2]:80", "0.0.0.0"])
def test_foreign_host_is_refused(client, base, host):
    assert put(client, "rebind-target", "{}").status_code in (200, 201)
    for method, target in (("DELETE", "/api/models/rebind-target"), ("GET", "/api/models"), ("GET", "/")):
        status, _, body = raw_request(base, target, method=method, headers={"Host": host, **WRITE})
        assert status == 421, (method, target, status)
        assert b"WEBGRAD_ALLOWED_HOSTS" in body
    assert "rebind-target" in listing(client)


@pytest.mark.parametrize("host", ["localhost", "LOCALHOST.", "app.localhost", "127.0.0.1", "127.1.2.3",
                                  "[::1]", "::1"])
def test_loopback_hosts_are_served(base, host):
    port = base.rsplit(":", 1)[1]
    for value in (host, f"{host}:{port}") if host != "::1" else (host,):
        status, _, _ = raw_request(base, "/api/models", headers={"Host": value})
        assert status == 200, value


def test_allowed_hosts_setting(tmp_path):
    settings = make_fake_site(tmp_path, SECRET)
    settings.allowed_hosts = ("models.example",)
    with running_server(create_app(settings)) as url:
        assert raw_request(url, "/", headers={"Host": "models.example:1234"})[0] == 200
        assert raw_request(url, "/", headers={"Host": "other.example"})[0] == 421
    policy = AccessPolicy.build(hosts=("*",))
    assert policy.host_allowed("anything.example")
    assert AccessPolicy.build(bound_host="192.168.1.5").host_allowed("192.168.1.5:8000")
    assert not AccessPolicy.build(bound_host="192.168.1.5").host_allowed("192.168.1.6")
    assert split_host("[::1]:80") == ("::1", "80") and split_host("Example.ORG.:8") == ("example.org", "8")


def test_writes_need_the_client_header(base, client):
    assert put(client, "guarded", '{"v": 1}').status_code in (200, 201)
    with httpx.Client(base_url=base, timeout=30) as bare:  # no X-Webgrad-Client
        for response in (bare.delete("/api/models/guarded"), put(bare, "guarded", '{"v": 2}'),
                         put(bare, "guarded-new"), bare.post("/api/models/guarded")):
            assert response.status_code == 403
            assert "X-Webgrad-Client: 1" in response.json()["error"]
        wrong = bare.delete("/api/models/guarded", headers={"X-Webgrad-Client": "yes"})
        assert wrong.status_code == 403
    assert listing(client)["guarded"]["metadata"] == {"v": 1} and "guarded-new" not in listing(client)


@pytest.mark.parametrize("origin", ["http://evil.example", "null", "http://127.0.0.1:1", "https://127.0.0.1",
                                    "http://localhost", "file://"])
def test_writes_from_a_foreign_origin_are_refused(client, origin):
    assert put(client, "origin-target", "{}").status_code in (200, 201)
    response = client.delete("/api/models/origin-target", headers={"Origin": origin})
    assert response.status_code == 403 and "origin" in response.json()["error"]
    assert "origin-target" in listing(client)


def test_same_origin_writes_are_allowed(client, base):
    assert put(client, "same-origin", "{}", headers={"Origin": base}).status_code in (200, 201)
    assert client.delete("/api/models/same-origin", headers={"Origin": base}).status_code == 204


def test_preflight_denies_other_origins_and_grants_listed_ones(client, tmp_path):
    ask = {"Origin": "https://elsewhere.example", "Access-Control-Request-Method": "PUT",
           "Access-Control-Request-Headers": "x-webgrad-client"}
    denied = client.options("/api/models/x", headers=ask)
    assert "x-webgrad-client" not in denied.headers.get("access-control-allow-headers", "").lower()
    assert "PUT" not in denied.headers["access-control-allow-methods"]
    settings = make_fake_site(tmp_path, SECRET)
    settings.allowed_origins = ("https://trusted.example",)
    with running_server(create_app(settings)) as url, httpx.Client(base_url=url, headers=WRITE) as http:
        granted = http.options("/api/models/x", headers={**ask, "Origin": "https://trusted.example"})
        assert granted.headers["access-control-allow-origin"] == "https://trusted.example"
        assert "x-webgrad-client" in granted.headers["access-control-allow-headers"].lower()
        assert "PUT" in granted.headers["access-control-allow-methods"]
        still_denied = http.options("/api/models/x", headers=ask)
        assert "x-webgrad-client" not in still_denied.headers["access-control-allow-headers"].lower()
        written = put(http, "from-trusted", headers={"Origin": "https://trusted.example"})
        assert written.status_code == 201 and written.headers["access-control-allow-origin"] == "https://trusted.example"
        assert put(http, "from-other", headers={"Origin": "https://elsewhere.example"}).status_code == 403


# ----------------------------------------------------------------------------- CSP

def csp(response) -> dict[str, str]:
    value = response.headers["content-security-policy"]
    return {part.split()[0]: part.split(None, 1)[1] for part in value.split(";") if part.strip()}


@pytest.mark.parametrize("path", ["/", "/demos/", "/page.html", "/index.html"])
def test_html_pages_carry_the_policy(client, path):
    response = client.get(path)
    assert response.status_code == 200
    policy = csp(response)
    for name, value in CONTENT_SECURITY_POLICY.items():
        assert policy[name].startswith(value), name
    assert "'unsafe-inline'" not in policy["script-src"] and "'unsafe-eval'" not in policy["script-src"]
    assert policy["default-src"] == "'self'" and policy["object-src"] == "'none'"


def test_inline_scripts_are_allowed_by_hash_only(client):
    policy = csp(client.get("/page.html"))
    expected = [INLINE_SCRIPT.replace("\r\n", "\n"), "\nconsole.log(1)\n"]
    hashes = re.findall(r"'sha256-([^']+)'", policy["script-src"])
    assert hashes == [base64.b64encode(hashlib.sha256(s.encode()).digest()).decode() for s in expected]
    assert "sha256" not in csp(client.get("/"))["script-src"]  # index.html has no inline script


def test_page_extras_apply_to_their_page_only(client, site):
    (site["settings"].web_root / "bench.html").write_text("<!doctype html><p>bench</p>")
    assert "'unsafe-eval'" in csp(client.get("/bench.html"))["script-src"]  # TF.js needs it there
    assert "'unsafe-eval'" not in csp(client.get("/page.html"))["script-src"]


def test_non_html_has_no_page_policy(client):
    assert "content-security-policy" not in client.get("/webgrad.js").headers
    assert "content-security-policy" not in client.get("/api/models").headers


# ----------------------------------------------------------------------------- sockets

def wait_closed(sock: socket.socket, limit_s: float) -> bytes:
    """Read until the server closes ``sock``; fail if it is still open after ``limit_s``."""
    sock.settimeout(limit_s)
    data = b""
    try:
        while chunk := sock.recv(65536):
            data += chunk
    except TimeoutError:
        pytest.fail(f"the server kept an idle socket open for {limit_s} s (header timeout {HEADER_TIMEOUT_S} s)")
    except ConnectionResetError:
        pass
    return data


def connect(base: str) -> socket.socket:
    host, port = base.rsplit("/", 1)[1].split(":")
    return socket.create_connection((host, int(port)), timeout=10)


def test_a_silent_socket_is_closed(base):
    with connect(base) as sock:
        assert wait_closed(sock, 20 * HEADER_TIMEOUT_S) == b""


def test_headers_trickling_in_are_cut_off(base):
    with connect(base) as sock:
        sock.sendall(b"GET / HTTP/1.1\r\nHost: 127.0.0.1\r\n")
        closed = False
        for _ in range(int(40 * HEADER_TIMEOUT_S / 0.2)):  # one header line every 0.2 s, never the end
            try:
                sock.sendall(b"X-Slow: 1\r\n")
            except (BrokenPipeError, ConnectionResetError):
                closed = True
                break
            time.sleep(0.2)
        assert closed, "a client sending a header line every 0.2 s kept its socket"


def test_a_kept_alive_socket_is_closed_when_idle(base):
    with connect(base) as sock:
        sock.sendall(b"GET /api/models HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
        data = wait_closed(sock, 30)
        assert data.startswith(b"HTTP/1.1 200")


def test_oversized_headers_get_431(base):
    with connect(base) as sock:
        sock.sendall(b"GET / HTTP/1.1\r\nHost: 127.0.0.1\r\n")
        try:
            for _ in range(100):
                sock.sendall(b"X-Big: " + b"a" * 1000 + b"\r\n")
        except (BrokenPipeError, ConnectionResetError):
            pass
        assert wait_closed(sock, 20).startswith(b"HTTP/1.1 431")


def test_many_idle_sockets_do_not_lock_others_out(base):
    idle = [connect(base) for _ in range(MAX_CONNECTIONS + 16)]
    try:
        time.sleep(0.2)
        for _ in range(3):
            status, _, body = raw_request(base, "/api/models")
            assert status == 200, body
        time.sleep(0.2)
        closed = 0
        for sock in idle:
            sock.setblocking(False)
            try:
                closed += sock.recv(1) == b""
            except BlockingIOError:
                pass
            except ConnectionResetError:
                closed += 1
        assert closed >= 16, f"only {closed} idle sockets were closed to make room"
    finally:
        for sock in idle:
            sock.close()


def test_300_idle_sockets_against_a_256_file_limit(tmp_path):
    """The reported case: with the open-file limit at 256, 300 idle sockets stopped the
    server answering anyone. Now idle ones are closed to make room (connection cap 128)."""
    with running_server_process(["--data", str(tmp_path / "data")], open_files=256) as url:
        idle = []
        try:
            for _ in range(300):
                idle.append(connect(url))
            for _ in range(3):
                status, _, body = raw_request(url, "/api/models", timeout_s=30)
                assert status == 200, body
        finally:
            for sock in idle:
                sock.close()


# ----------------------------------------------------------------------------- request details

def test_media_type_is_case_insensitive(client):
    request = client.build_request("PUT", "/api/models/capitals", files={"weights": ("w", safetensors_bytes())})
    content_type = request.headers["content-type"].replace("multipart/form-data", "MULTIPART/FORM-DATA")
    response = client.put("/api/models/capitals", content=request.read(), headers={"Content-Type": content_type})
    assert response.status_code == 201, response.text


@pytest.mark.parametrize("target, methods", [
    ("/api/models/x", {"GET", "HEAD", "PUT", "DELETE"}), ("/api/models", {"GET", "HEAD"}),
    ("/api/models/x/weights", {"GET", "HEAD"}), ("/webgrad.js", {"GET", "HEAD"}),
])
def test_405_lists_the_allowed_methods(client, target, methods):
    response = client.post(target)
    assert response.status_code == 405
    assert {m.strip() for m in response.headers["allow"].split(",")} == methods


def many_tensors(count: int) -> bytes:
    header = {f"t{i}": {"dtype": "F32", "shape": [0], "data_offsets": [0, 0]} for i in range(count)}
    text = json.dumps(header, separators=(",", ":")).encode()
    return struct.pack("<Q", len(text)) + text


def test_tensor_count_is_bounded(client):
    assert put(client, "many", weights=many_tensors(MAX_TENSORS)).status_code == 201
    response = put(client, "many", weights=many_tensors(MAX_TENSORS + 1))
    assert response.status_code == 400
    message = response.json()["error"]
    assert f"more than {MAX_TENSORS} tensors" in message and "WEBGRAD_MAX_TENSORS" in message
    assert "--max-tensors" in message  # the server's own knob, not webgrad.load's keyword
    assert client.get("/api/models/many/weights").content == many_tensors(MAX_TENSORS)


def test_refusing_many_tensors_costs_little_memory():
    data = many_tensors(100_000)
    tracemalloc.start()
    try:
        with pytest.raises(BadUpload, match="more than 10000 tensors"):
            check_tensor_count(data, 10_000, "m")
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    # Decoding every tensor took ~22x the file; stopping at the limit takes ~2x (text copies).
    assert peak < 4 * len(data), peak / len(data)


# ----------------------------------------------------------------------------- static containment

@pytest.mark.parametrize("relative", ["../x", "..", "a/../b", "./x", "a/./b", ".env", "a/.git/c", "a//b", "/x",
                                      "a\\b", "a\x00b", "c:x", "a/\x01"])
def test_split_safe_refuses(relative):
    with pytest.raises(static.BadPath):
        static.split_safe(relative)


def test_containment_compares_paths_not_strings(tmp_path):
    assert static.is_inside(str(tmp_path / "web" / "a.js"), str(tmp_path / "web"))
    assert static.is_inside(str(tmp_path / "web"), str(tmp_path / "web"))
    assert not static.is_inside(str(tmp_path / "web-private" / "a.js"), str(tmp_path / "web"))
    assert not static.is_inside(str(tmp_path), str(tmp_path / "web"))


def test_sibling_folder_through_a_symlink_is_not_served(base):
    for target in ("/private/secret.txt", "/private/"):
        status, _, body = raw_request(base, target)
        assert status == 404 and SECRET.encode() not in body
    assert raw_request(base, "/../secret.txt")[0] == 400  # the segment check, before any realpath
