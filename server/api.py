"""The model API: store and fetch trained models as safetensors files.

Endpoints (all JSON except the weights; errors are ``{"error": "..."}``):

    GET    /api/models                  {"models": [record, ...]} sorted by name
    GET    /api/models/{name}           record
    GET    /api/models/{name}/weights   the safetensors file (application/octet-stream), as a
                                        download named NAME.safetensors (Content-Disposition)
    GET    /api/models/{name}/lite/{file}  a file of the model's web bundle (``webgrad.lite``):
                                        model.json, weights.safetensors, kernels/N.wgsl
    PUT    /api/models/{name}           upload; 201 (new) or 200 (replaced) with the record
                                        and "replaced"; 412 if If-None-Match refuses it
    DELETE /api/models/{name}           204; 404 if there was no such model

A record is ``{"name", "size", "sha256", "created", "updated", "revision",
"metadata", "weights_url", "lite", "lite_reason"}``; times are UTC ISO 8601 strings. A
model's ETag is its ``"sha256"`` in quotes. ``"lite"`` is the model's web bundle,
``{"files": {path: bytes}, "bytes": total, "sha256": digest, "url": "/api/models/NAME/lite/"}``
(the ETag of its files is that digest), or null, and then ``"lite_reason"`` says why
(the widget then runs the model in Python).

A PUT answers the new record plus ``"replaced"``: null for a new model (status
201), else the version it replaced, ``{"revision", "updated", "size", "sha256"}``
(status 200), so a page can say "replaced revision 3 of 'digits'". To refuse
overwriting, send ``If-None-Match: *``: when the model exists the answer is 412
``{"error": "...", "current": {...}}`` and nothing changes (checked in the same
transaction as the write, so two such PUTs cannot both create it).
``If-None-Match: "<sha256>"`` likewise refuses to replace that version.

Upload format: ``multipart/form-data`` (what a browser ``FormData`` sends) with

- ``weights``: a file part holding the safetensors bytes (required);
- ``metadata``: a JSON object, as a plain field or a file part (optional, ``{}``
  if absent, at most 1 MiB, nested at most 32 levels, finite numbers only, valid
  Unicode; see ``server.store.metadata_json``).
- ``lite/model.json``, ``lite/weights.safetensors``, ``lite/kernels/N.wgsl``: the web bundle
  (``webgrad.export``), as file parts (optional). Only those names; model.json at most 8 MiB,
  a kernel at most 1 MiB, at most 1,000 kernels; the bundle must read back with
  ``webgrad.lite.read_bundle`` (every file it names present, none it does not name). Or
  ``lite_reason``: a plain field saying why the upload has no bundle (at most 4,000 characters).

For example ``curl -X PUT -F weights=@model.safetensors -F 'metadata={"classes": 10}'
http://127.0.0.1:8000/api/models/digits``, or in JavaScript::

    const form = new FormData();
    form.append("weights", new Blob([bytes]), "model.safetensors");
    form.append("metadata", JSON.stringify({classes: 10}));
    await fetch("/api/models/digits", {method: "PUT", body: form, headers: {"X-Webgrad-Client": "1"}});

(curl too needs ``-H 'X-Webgrad-Client: 1'`` for PUT and DELETE; see server/guard.py.)

Rules: names match ``^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$`` without ``..`` (else
400). The request body may be at most ``WEBGRAD_MAX_UPLOAD`` bytes (default 64
MiB): a larger Content-Length is refused before reading, and a body without one
is counted while it streams in, so neither is ever held in memory whole (413).
A file may hold at most ``WEBGRAD_MAX_TENSORS`` tensors (default 10,000), counted
from its header before any tensor is decoded (400). The weights must load with
``webgrad.serialize.load_bytes`` (else 400 with its reason) and the metadata
must pass ``server.store.metadata_json`` (else 400); a refused upload leaves
the stored version as it was. Other sites may read models (CORS GETs), but
only pages from this server may write them: a write needs the header
``X-Webgrad-Client: 1``, which another site can send only after a preflight,
and the preflight allows GET and HEAD only (unless the origin is in
WEBGRAD_ALLOWED_ORIGINS); see server/guard.py.
"""
from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import struct

import anyio
from starlette.background import BackgroundTask
from starlette.concurrency import run_in_threadpool
from starlette.datastructures import UploadFile
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

from .static import not_modified
from .store import (METADATA_MAX_BYTES, InvalidMetadata, InvalidName, ModelStore, PreconditionFailed, check_name,
                    parse_metadata, version_of)

DEFAULT_MAX_UPLOAD = 64 * 1024 * 1024
DEFAULT_MAX_TENSORS = 10_000
METADATA_LIMIT = METADATA_MAX_BYTES
CHUNK = 256 * 1024
LITE_PREFIX = "lite/"
LITE_FILE = re.compile(r"model\.json|weights\.safetensors|kernels/(0|[1-9][0-9]{0,2})\.wgsl")
LITE_MAX_BYTES = {"model.json": 8 * 1024 * 1024, "kernels": 1024 * 1024}  # weights: the upload limit
LITE_MAX_FILES = 2 + 1000
LITE_REASON_MAX = 4000
LITE_TYPES = {"model.json": "application/json", "weights.safetensors": "application/octet-stream",
              "wgsl": "text/wgsl; charset=utf-8"}
NO_CACHE = {"Cache-Control": "no-cache"}
NO_STORE = {"Cache-Control": "no-store"}


class UploadTooLarge(Exception):
    pass


class BadUpload(Exception):
    pass


def max_upload_from_env() -> int:
    return int(os.environ.get("WEBGRAD_MAX_UPLOAD", DEFAULT_MAX_UPLOAD))


def max_tensors_from_env() -> int:
    return int(os.environ.get("WEBGRAD_MAX_TENSORS", DEFAULT_MAX_TENSORS))


def error(status: int, message: str, headers: dict | None = None) -> JSONResponse:
    return JSONResponse({"error": message}, status_code=status, headers=headers or NO_STORE)


def public(record: dict) -> dict:
    lite = record.get("lite")
    return {**record, "weights_url": f"/api/models/{record['name']}/weights",
            "lite": None if lite is None else {**lite, "url": f"/api/models/{record['name']}/lite/"}}


class BodyLimit:
    """Wraps ASGI ``receive`` and raises ``UploadTooLarge`` once more than ``limit`` bytes came in."""

    def __init__(self, receive, limit: int):
        self.receive, self.limit, self.received = receive, limit, 0

    async def __call__(self):
        message = await self.receive()
        if message["type"] == "http.request":
            self.received += len(message.get("body", b""))
            if self.received > self.limit:
                raise UploadTooLarge()
        return message


class _TooManyObjects(Exception):
    pass


class _Pairs(list):
    """A JSON object's (key, value) pairs, told apart from a JSON array (a plain list)."""


def check_tensor_count(data: bytes, limit: int, name: str) -> None:
    """Refuse a safetensors file with more than ``limit`` tensors, reading only its header.

    The header is parsed with a hook that stops after ``limit`` + 2 JSON objects (one
    per tensor, ``__metadata__`` and the header itself), so a file of 100,000 empty
    tensors costs no more memory than one at the limit. Anything else malformed is
    left to ``webgrad.serialize.load_bytes``, which explains it.
    """
    if len(data) < 8:
        return
    (length,) = struct.unpack("<Q", data[:8])
    if length > len(data) - 8:
        return
    seen = 0

    def count(pairs):
        nonlocal seen
        seen += 1
        if seen > limit + 2:
            raise _TooManyObjects()
        return _Pairs(pairs)

    try:
        top = json.loads(data[8:8 + length], object_pairs_hook=count)
        # Only an object's keys are tensors; a header that is an array, a string or a number
        # is malformed, and load_bytes says so.
        if isinstance(top, _Pairs) and sum(key != "__metadata__" for key, _ in top) > limit:
            raise _TooManyObjects()
    except _TooManyObjects:
        raise BadUpload(f"weights for model {name!r} hold more than {limit} tensors, the limit per file; "
                        "raise it with WEBGRAD_MAX_TENSORS (or --max-tensors)") from None
    except (ValueError, RecursionError):
        return  # malformed: load_bytes says how


def check_lite(store: ModelStore, files: dict) -> tuple:
    """The uploaded web bundle ``files`` (path -> bytes) as ``ModelStore.put``'s ``lite`` (a synced
    temp folder and its summary), after checking names, sizes and that it reads back whole."""
    from webgrad.lite import BundleError, read_bundle

    for path, data in files.items():
        if not LITE_FILE.fullmatch(path):
            raise BadUpload(f"web bundle: {LITE_PREFIX}{path!r} is not a bundle file; a bundle holds only "
                            "model.json, weights.safetensors and kernels/N.wgsl")
        limit = LITE_MAX_BYTES.get(path.partition("/")[0])
        if limit is not None and len(data) > limit:
            raise BadUpload(f"web bundle: {path} is {len(data)} bytes, more than the {limit} allowed")
    for path in ("model.json", "weights.safetensors"):
        if path not in files:
            raise BadUpload(f"web bundle: the upload has no {LITE_PREFIX}{path} part")
    folder = store.write_temp_folder(files)
    try:
        meta, _, _ = read_bundle(folder)
        unnamed = sorted(set(files) - {"model.json", "weights.safetensors", *meta["kernels"]})
        if unnamed:
            raise BundleError(f"{', '.join(unnamed)}: not named in model.json's kernels")
    except BundleError as exc:
        shutil.rmtree(folder, ignore_errors=True)
        raise BadUpload(f"web bundle: {str(exc).replace(str(folder) + os.sep, '')}") from None
    except BaseException:
        shutil.rmtree(folder, ignore_errors=True)
        raise
    digest = hashlib.sha256()
    for path in sorted(files):
        digest.update(f"{path}\0{len(files[path])}\0".encode())
        digest.update(files[path])
    return folder, {"files": {path: len(data) for path, data in sorted(files.items())},
                    "bytes": sum(len(data) for data in files.values()), "sha256": digest.hexdigest()}


def store_upload(store: ModelStore, name: str, file, metadata: dict, limit: int,
                 max_tensors: int, only_if=None, lite_files: dict | None = None,
                 lite_reason: str | None = None) -> tuple[dict, dict | None]:
    """Validate the uploaded weights (and web bundle), then hand them to the store (runs in a worker thread)."""
    file.seek(0)
    data = file.read(limit + 1)
    if len(data) > limit:
        raise UploadTooLarge()
    check_tensor_count(data, max_tensors, name)
    from webgrad import serialize

    try:
        serialize.load_bytes(data, f"weights for model {name!r}", max_tensors=max_tensors)
    except MemoryError:
        raise
    except Exception as exc:  # any failure to decode means: not a file we can serve
        raise BadUpload(f"weights are not a valid safetensors file: {exc}") from None
    digest = hashlib.sha256(data).hexdigest()
    lite = check_lite(store, lite_files) if lite_files else None
    try:
        temp = store.write_temp(data)
    except BaseException:
        if lite is not None:
            shutil.rmtree(lite[0], ignore_errors=True)
        raise
    return store.put(name, temp, metadata, size=len(data), sha256=digest, only_if=only_if, lite=lite,
                     lite_reason=lite_reason)


def _chunks(file):
    """An open file's bytes in CHUNK pieces, closing it at the end."""
    try:
        while chunk := file.read(CHUNK):
            yield chunk
    finally:
        file.close()


def put_precondition(header: str | None):
    """``If-None-Match`` of a PUT as ``only_if(current) -> bool`` for ``ModelStore.put`` (None: none).

    ``*`` passes only when there is no model yet; a list of ETags passes unless the
    current model's ETag (its quoted sha256, weak or not) is among them.
    """
    if header is None:
        return None
    tags = {tag.strip().removeprefix("W/") for tag in header.split(",")}
    if "*" in tags:
        return lambda current: current is None
    return lambda current: current is None or '"' + current["sha256"] + '"' not in tags


def precondition_failed(name: str, current: dict | None) -> JSONResponse:
    if current is None:  # not reachable with put_precondition's rules; said plainly all the same
        return error(412, f"model {name!r}: the upload's precondition (If-None-Match) failed; nothing was changed")
    message = (f"model {name!r} already exists (revision {current['revision']}, updated {current['updated']}) "
               "and If-None-Match refused to replace it; nothing was changed. Choose another name, or PUT "
               "without If-None-Match to replace it")
    return JSONResponse({"error": message, "current": current}, status_code=412,
                        headers={**NO_STORE, "ETag": f'"{current["sha256"]}"'})


def model_routes(store: ModelStore, max_upload: int, max_tensors: int = DEFAULT_MAX_TENSORS) -> list[Route]:
    # Validating decodes every tensor (memory about twice the upload): two at a time.
    validation_slots = anyio.Semaphore(2)

    def too_large(close: bool) -> JSONResponse:
        headers = {**NO_STORE, "Connection": "close"} if close else NO_STORE
        return error(413, f"upload too large: the limit is {max_upload} bytes (WEBGRAD_MAX_UPLOAD)", headers)

    def name_or_error(request: Request) -> str:
        try:
            return check_name(request.path_params["name"])
        except InvalidName as exc:
            raise HTTPException(400, str(exc)) from None

    def list_models(request: Request):
        # The listing changes only when a model does: its ETag lets a revisit answer 304, no body.
        body = json.dumps({"models": [public(r) for r in store.list()]}).encode()
        etag = f'"{hashlib.sha256(body).hexdigest()}"'
        headers = {**NO_CACHE, "ETag": etag}
        if not_modified(request, etag):
            return Response(status_code=304, headers=headers)
        return Response(body, media_type="application/json", headers=headers)

    def get_model(request: Request):
        name = name_or_error(request)
        record = store.get(name)
        if record is None:
            return error(404, f"no model named {name!r}", NO_CACHE)
        return JSONResponse(public(record), headers={**NO_CACHE, "ETag": f'"{record["sha256"]}"'})

    def get_weights(request: Request):
        name = name_or_error(request)
        found = store.open_weights(name)
        if found is None:
            return error(404, f"no model named {name!r}", NO_CACHE)
        record, file = found
        etag = f'"{record["sha256"]}"'
        # The name is checked against [A-Za-z0-9_.-] (check_name), so it needs no escaping in quotes.
        headers = {**NO_CACHE, "ETag": etag, "Content-Length": str(record["size"]),
                   "Content-Disposition": f'attachment; filename="{name}.safetensors"'}
        if not_modified(request, etag) or request.method == "HEAD":
            file.close()
            status = 304 if not_modified(request, etag) else 200
            if status == 304:
                del headers["Content-Length"]
            return Response(status_code=status, headers=headers, media_type="application/octet-stream")

        return StreamingResponse(_chunks(file), headers=headers, media_type="application/octet-stream",
                                 background=BackgroundTask(file.close))

    async def put_model(request: Request):
        name = name_or_error(request)
        length = request.headers.get("content-length")
        if length is not None and (not length.isdigit() or int(length) > max_upload):
            # Answer before reading. uvicorn then discards the body as it arrives, so
            # the client reads this answer instead of a reset; past 4x the limit it
            # is cheaper to drop the connection.
            close = not length.isdigit() or int(length) > 4 * max_upload
            return too_large(close)
        if not request.headers.get("content-type", "").lower().startswith("multipart/form-data"):
            return error(415, "send multipart/form-data with a 'weights' file part (safetensors) and "
                              "an optional 'metadata' part (a JSON object)")
        only_if = put_precondition(request.headers.get("if-none-match"))
        if only_if is not None:
            # Refuse before reading the body when we can already tell; the write checks again.
            current = version_of(await run_in_threadpool(store.get, name))
            if not only_if(current):
                return precondition_failed(name, current)
        limited = Request(request.scope, BodyLimit(request.receive, max_upload))
        try:
            async with limited.form(max_files=2 + LITE_MAX_FILES, max_fields=3,
                                    max_part_size=METADATA_LIMIT) as form:
                weights = form.get("weights")
                if not isinstance(weights, UploadFile):
                    raise BadUpload("missing the 'weights' part: send the safetensors bytes as a file "
                                    "part named 'weights' (with a filename)")
                lite_files, lite_reason = await lite_parts(form)
                raw = form.get("metadata", "{}")
                if isinstance(raw, UploadFile):
                    raw = await raw.read(METADATA_LIMIT + 1)
                    if len(raw) > METADATA_LIMIT:
                        raise BadUpload(f"metadata is larger than {METADATA_LIMIT} bytes")
                try:
                    metadata = parse_metadata(raw)
                except InvalidMetadata as exc:
                    raise BadUpload(str(exc)) from None
                async with validation_slots:
                    record, replaced = await run_in_threadpool(
                        store_upload, store, name, weights.file, metadata, max_upload, max_tensors, only_if,
                        lite_files, lite_reason)
        except PreconditionFailed as exc:
            return precondition_failed(name, exc.current)
        except UploadTooLarge:
            return too_large(close=False)
        except BadUpload as exc:
            return error(400, str(exc))
        except HTTPException as exc:  # the multipart parser's refusal (a part too large, a bad boundary)
            if exc.status_code != 400:
                raise
            return error(400, f"the upload is not acceptable multipart/form-data: {exc.detail} (the "
                              f"'metadata' part may hold at most {METADATA_LIMIT} bytes)")
        return JSONResponse({**public(record), "replaced": replaced}, status_code=201 if replaced is None else 200,
                            headers={**NO_STORE, "Location": f"/api/models/{name}"})

    async def lite_parts(form) -> tuple[dict, str | None]:
        """The bundle's file parts (path -> bytes) and the ``lite_reason`` field of an upload."""
        files: dict = {}
        for key, value in form.multi_items():
            if key in ("weights", "metadata"):
                continue
            if key == "lite_reason":
                if not isinstance(value, str):
                    raise BadUpload("'lite_reason' must be a plain field (text), not a file")
                continue
            if not key.startswith(LITE_PREFIX):
                raise BadUpload(f"unexpected part {key!r}: an upload holds 'weights', 'metadata' and the web "
                                f"bundle's files as '{LITE_PREFIX}model.json', '{LITE_PREFIX}weights.safetensors', "
                                f"'{LITE_PREFIX}kernels/N.wgsl' (or 'lite_reason')")
            path = key[len(LITE_PREFIX):]
            if not isinstance(value, UploadFile):
                raise BadUpload(f"web bundle: {key!r} must be a file part (with a filename)")
            if path in files:
                raise BadUpload(f"web bundle: {key!r} comes twice")
            files[path] = await value.read(max_upload + 1)
        reason = form.get("lite_reason")
        if isinstance(reason, str) and len(reason) > LITE_REASON_MAX:
            raise BadUpload(f"'lite_reason' is longer than {LITE_REASON_MAX} characters")
        return files, reason if isinstance(reason, str) else None

    def get_lite(request: Request):
        name = name_or_error(request)
        path = request.path_params["path"]
        if not LITE_FILE.fullmatch(path):
            return error(404, f"{path!r} is not a file of a web bundle (model.json, weights.safetensors, "
                              "kernels/N.wgsl)", NO_CACHE)
        found = store.open_lite(name, path)
        if found is None:
            return error(404, f"no model named {name!r}", NO_CACHE)
        record, file = found
        if file is None:
            why = (f"the bundle has no file {path}" if record["lite"] is not None
                   else f"the model has no web bundle: {record['lite_reason']}")
            return error(404, f"model {name!r}: {why}", NO_CACHE)
        etag = f'"{record["lite"]["sha256"]}"'
        media = LITE_TYPES.get(path, LITE_TYPES["wgsl"])
        headers = {**NO_CACHE, "ETag": etag}
        if not_modified(request, etag) or request.method == "HEAD":
            file.close()
            status = 304 if not_modified(request, etag) else 200
            if status == 200:
                headers["Content-Length"] = str(record["lite"]["files"][path])
            return Response(status_code=status, headers=headers, media_type=media)
        headers["Content-Length"] = str(record["lite"]["files"][path])
        return StreamingResponse(_chunks(file), headers=headers, media_type=media,
                                 background=BackgroundTask(file.close))

    async def delete_model(request: Request):
        name = name_or_error(request)
        if not await run_in_threadpool(store.delete, name):
            return error(404, f"no model named {name!r}")
        return Response(status_code=204, headers=NO_STORE)

    async def model(request: Request):
        # One route per URL, so a 405 lists every method the URL takes in its Allow header.
        if request.method == "PUT":
            return await put_model(request)
        if request.method == "DELETE":
            return await delete_model(request)
        return await run_in_threadpool(get_model, request)

    def unknown(request: Request):
        return error(404, f"no API endpoint {request.url.path}", NO_CACHE)

    return [
        Route("/api/models", list_models, methods=["GET", "HEAD"]),
        Route("/api/models/{name}", model, methods=["GET", "HEAD", "PUT", "DELETE"]),
        Route("/api/models/{name}/weights", get_weights, methods=["GET", "HEAD"]),
        Route("/api/models/{name}/lite/{path:path}", get_lite, methods=["GET", "HEAD"]),
        Route("/api/{rest:path}", unknown),
    ]
