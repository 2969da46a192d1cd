"""The model store: safetensors files in a data folder, indexed by SQLite.

Layout of the data folder (``WEBGRAD_DATA``, default ``./data``)::

    index.sqlite3               one row per model: name, file, size, sha256, metadata, times, bundle
    models/NAME@REV.safetensors the current weights of each model (REV is unique per upload)
    lite/NAME@REV/              its web bundle (model.json, weights.safetensors, kernels/N.wgsl), if any
    tmp/                        uploads being written; never served

How a write stays safe:

- Metadata is checked (``metadata_json``: finite numbers, bounded depth and size,
  valid Unicode) before anything changes, so every stored row can be read back
  by any client; a row damaged some other way is reported in its record
  (``metadata_error``) instead of failing every listing.
- An upload is written to ``tmp/``, flushed and fsynced, then renamed to a file
  name nobody has used before (``NAME@REV``), its web bundle likewise to the folder
  ``lite/NAME@REV``. Nothing points at them yet.
- One SQLite transaction (``BEGIN IMMEDIATE``, which SQLite serialises across
  threads and processes) reads the old row and writes the new one. The commit is
  the single moment the model switches version, so the row and the file always
  agree, and two concurrent PUTs of one name simply take turns: the last commit
  wins and the loser's file is removed.
- Only after the commit are the previous file and bundle removed. A reader that looked up
  the old row just before may find its file gone; it looks the row up again.
  A reader that already opened the old file keeps reading it (POSIX unlink).
- A crash between the rename and the commit leaves an unreferenced file, which
  ``collect_garbage`` removes once it is old enough that no writer can still own it.

This module knows nothing about HTTP; ``server/api.py`` puts it on the web.
"""
from __future__ import annotations

import datetime
import json
import math
import os
import re
import secrets
import shutil
import sqlite3
import threading
import time
from pathlib import Path

from webgrad.serialize import _fsync_directory  # the same durability rule as webgrad.save

NAME_PATTERN = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,63}")
SCHEMA = """
CREATE TABLE IF NOT EXISTS models (
    name     TEXT PRIMARY KEY,
    file     TEXT NOT NULL,
    size     INTEGER NOT NULL,
    sha256   TEXT NOT NULL,
    metadata TEXT NOT NULL,
    created  TEXT NOT NULL,
    updated  TEXT NOT NULL,
    revision INTEGER NOT NULL,
    lite     TEXT
)
"""
# lite: the web bundle as JSON, {"files": {path: bytes}, "bytes": total, "sha256": digest of its files},
# or {"reason": why there is none}; NULL in rows stored before bundles existed.
COLUMNS = "name, file, size, sha256, metadata, created, updated, revision, lite"
NO_BUNDLE = ("no web bundle was stored with this model (it was uploaded without one); push it again with "
             "webgrad.store.push(..., input_size=...) to get one")
METADATA_MAX_BYTES = 1024 * 1024
METADATA_MAX_DEPTH = 32


class InvalidName(ValueError):
    """A model name outside ``NAME_PATTERN`` (or containing ``..``)."""


def check_name(name: str) -> str:
    """Return ``name`` if it is a valid model name, else raise ``InvalidName`` saying why."""
    if not isinstance(name, str) or not NAME_PATTERN.fullmatch(name) or ".." in name:
        raise InvalidName(
            f"invalid model name {name!r}: use 1 to 64 characters from A-Z a-z 0-9 _ . -, "
            "starting with a letter or digit, without '..'")
    return name


class PreconditionFailed(Exception):
    """``ModelStore.put``'s ``only_if`` refused the write; ``current`` is the model's version
    then (None if there was none)."""

    def __init__(self, name: str, current: dict | None):
        super().__init__(name, current)
        self.name, self.current = name, current


class InvalidMetadata(ValueError):
    """Metadata that is not a JSON object every client can read back (see ``metadata_json``)."""


def _refuse_constant(name):
    raise InvalidMetadata(f"metadata holds {name}, which is not a JSON number; only finite numbers are allowed")


def _where(path: tuple) -> str:
    return "metadata" + "".join(f"[{key!r}]" for key in path)


def _check_text(text: str, path: tuple) -> None:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as exc:
        bad = text[exc.start:exc.end].encode("unicode_escape").decode()
        raise InvalidMetadata(f"{_where(path)}: the string holds {bad}, a lone surrogate, which is not "
                              "valid Unicode; send UTF-8 text") from None


def metadata_json(metadata) -> str:
    """Check ``metadata`` and return its compact JSON text, or raise ``InvalidMetadata`` saying where.

    Rules: a dict (JSON object) with string keys, nested at most ``METADATA_MAX_DEPTH``
    levels, only finite numbers (no NaN or infinities, no integers beyond a double's
    range, which browsers would read as Infinity), strings of valid Unicode (no lone
    surrogates), and at most ``METADATA_MAX_BYTES`` of UTF-8 JSON.
    """
    if not isinstance(metadata, dict):
        raise InvalidMetadata(f"metadata must be a JSON object, got {type(metadata).__name__}")
    stack = [(metadata, 0, ())]  # iterative: a deep value must not overflow Python's stack
    while stack:
        value, depth, path = stack.pop()
        if isinstance(value, (dict, list)):
            if depth >= METADATA_MAX_DEPTH:
                raise InvalidMetadata(f"{_where(path)}: metadata nests deeper than {METADATA_MAX_DEPTH} levels")
            if isinstance(value, dict):
                for key, item in value.items():
                    if not isinstance(key, str):
                        raise InvalidMetadata(f"{_where(path)}: key {key!r} is not a string")
                    _check_text(key, path)
                    stack.append((item, depth + 1, path + (key,)))
            else:
                stack.extend((item, depth + 1, path + (index,)) for index, item in enumerate(value))
        elif isinstance(value, str):
            _check_text(value, path)
        elif isinstance(value, float) and not math.isfinite(value):
            raise InvalidMetadata(f"{_where(path)} is {value}: only finite numbers are allowed (a number like "
                                  "1e999 overflows to infinity; JSON has no NaN or Infinity)")
        elif isinstance(value, int) and not isinstance(value, bool) and abs(value) > 2 ** 1023:
            raise InvalidMetadata(f"{_where(path)}: the integer is beyond a double's range; browsers would "
                                  "read it as Infinity")
        elif value is not None and not isinstance(value, (bool, int, float)):
            raise InvalidMetadata(f"{_where(path)}: {type(value).__name__} is not a JSON value")
    text = json.dumps(metadata, ensure_ascii=False, separators=(",", ":"), allow_nan=False)
    if len(text.encode("utf-8")) > METADATA_MAX_BYTES:
        raise InvalidMetadata(f"metadata is larger than {METADATA_MAX_BYTES} bytes as JSON")
    return text


def parse_metadata(raw: bytes | str) -> dict:
    """Parse JSON text into metadata checked by ``metadata_json``; raise ``InvalidMetadata``."""
    try:
        value = json.loads(raw, parse_constant=_refuse_constant)
    except InvalidMetadata:
        raise
    except RecursionError:
        raise InvalidMetadata(f"metadata nests deeper than {METADATA_MAX_DEPTH} levels") from None
    except (ValueError, UnicodeDecodeError) as exc:
        raise InvalidMetadata(f"metadata is not valid JSON: {exc}") from None
    metadata_json(value)
    return value


VERSION_FIELDS = ("revision", "updated", "size", "sha256")


def version_of(record) -> dict | None:
    """Which version of a model ``record`` (a record or a row; None for none) is: ``VERSION_FIELDS``."""
    return None if record is None else {key: record[key] for key in VERSION_FIELDS}


def _valid_name(name) -> bool:
    try:
        check_name(name)
    except InvalidName:
        return False
    return True


def default_data_dir() -> Path:
    return Path(os.environ.get("WEBGRAD_DATA", "data"))


def _now() -> str:
    """UTC time as ISO 8601 with microseconds, e.g. ``2025-01-31T12:00:00.123456Z``."""
    now = datetime.datetime.now(datetime.timezone.utc)
    return now.strftime("%Y-%m-%dT%H:%M:%S.%fZ")


class ModelStore:
    """Models on disk: ``put`` (replace atomically), ``get``, ``list``, ``open_weights``, ``delete``.

    Args:
        root: the data folder; created if missing.

    Example:
        >>> store = ModelStore(Path("data"))
        >>> path = store.write_temp(safetensors_bytes)
        >>> store.put("digits", path, {"classes": 10}, size=len(safetensors_bytes), sha256=digest)
        >>> store.get("digits")["metadata"]
        {'classes': 10}
    """

    def __init__(self, root: Path | str):
        self.root = Path(root).resolve()
        self.models_dir = self.root / "models"
        self.tmp_dir = self.root / "tmp"
        self.lite_dir = self.root / "lite"
        self.db_path = self.root / "index.sqlite3"
        self.models_dir.mkdir(parents=True, exist_ok=True)
        self.tmp_dir.mkdir(parents=True, exist_ok=True)
        self.lite_dir.mkdir(parents=True, exist_ok=True)
        self._local = threading.local()
        with self._connect() as conn:
            # WAL lets readers go on while a writer commits. The journal mode is
            # stored in the file, so setting it once is enough.
            conn.execute("PRAGMA journal_mode=WAL")
            conn.execute(SCHEMA)
            if "lite" not in {row["name"] for row in conn.execute("PRAGMA table_info(models)")}:
                conn.execute("ALTER TABLE models ADD COLUMN lite TEXT")  # a data folder from before bundles
        self.collect_garbage()

    # ------------------------------------------------------------------ connections

    def _connect(self) -> sqlite3.Connection:
        """One connection per thread, reused (the server's thread pool keeps its threads)."""
        conn = getattr(self._local, "conn", None)
        if conn is None:
            # isolation_level=None: we write BEGIN/COMMIT ourselves.
            conn = sqlite3.connect(self.db_path, timeout=30, isolation_level=None)
            conn.row_factory = sqlite3.Row
            # A damaged row must not make every read fail: undecodable text comes
            # back as lone surrogates, which _record then reports for that row only.
            conn.text_factory = lambda data: data.decode("utf-8", "surrogateescape")
            # FULL: a commit is on disk before we delete the file it replaced.
            conn.execute("PRAGMA synchronous=FULL")
            conn.execute("PRAGMA busy_timeout=30000")
            self._local.conn = conn
        return conn

    def close(self) -> None:
        conn = getattr(self._local, "conn", None)
        if conn is not None:
            conn.close()
            self._local.conn = None

    # ------------------------------------------------------------------ reads

    @staticmethod
    def _record(row: sqlite3.Row) -> dict:
        record = {
            "name": row["name"],
            "size": row["size"],
            "sha256": row["sha256"],
            "created": row["created"],
            "updated": row["updated"],
            "revision": row["revision"],
        }
        try:  # rows written before metadata was checked may hold what clients cannot read
            record["metadata"] = parse_metadata(row["metadata"])
        except InvalidMetadata as exc:
            record["metadata"] = {}
            record["metadata_error"] = f"the stored metadata is unreadable ({exc}); upload the model again"
        record.update(_lite_fields(row["lite"]))
        return record

    def list(self) -> list[dict]:
        """Every model's record, by name (rows with a damaged name are left out)."""
        rows = self._connect().execute(f"SELECT {COLUMNS} FROM models ORDER BY name").fetchall()
        return [self._record(row) for row in rows if _valid_name(row["name"])]

    def get(self, name: str) -> dict | None:
        check_name(name)
        row = self._connect().execute(f"SELECT {COLUMNS} FROM models WHERE name = ?", (name,)).fetchone()
        return None if row is None else self._record(row)

    def open_lite(self, name: str, path: str):
        """Return ``(record, open binary file or None)`` for the file ``path`` of the model's web bundle
        (None when the model has no bundle or the bundle has no such file), or ``None`` for no model.
        Like ``open_weights``, the file stays readable when a concurrent write replaces it."""
        check_name(name)
        for _attempt in range(5):
            row = self._connect().execute(f"SELECT {COLUMNS} FROM models WHERE name = ?", (name,)).fetchone()
            if row is None:
                return None
            record = self._record(row)
            if record["lite"] is None or path not in record["lite"]["files"]:
                return record, None
            try:
                return record, open(self.lite_dir / _stem(row["file"]) / path, "rb")
            except FileNotFoundError:
                continue  # replaced between the lookup and the open: look again
        raise RuntimeError(f"model {name!r}: its web bundle keeps disappearing; is another "
                           "process deleting files in the data folder?")

    def open_weights(self, name: str):
        """Return ``(record, open binary file)`` for the current weights, or ``None``.

        The file object stays valid even if a concurrent PUT or DELETE removes the
        file right after: the caller reads the version it opened.
        """
        check_name(name)
        for _attempt in range(5):
            row = self._connect().execute(f"SELECT {COLUMNS} FROM models WHERE name = ?", (name,)).fetchone()
            if row is None:
                return None
            try:
                return self._record(row), open(self.models_dir / row["file"], "rb")
            except FileNotFoundError:
                continue  # replaced between the lookup and the open: look again
        raise RuntimeError(f"model {name!r}: its weights file keeps disappearing; is another "
                           "process deleting files in the data folder?")

    # ------------------------------------------------------------------ writes

    def new_temp_path(self) -> Path:
        return self.tmp_dir / f"upload-{time.time_ns():x}-{secrets.token_hex(8)}.tmp"

    def write_temp_folder(self, files: dict) -> Path:
        """Write ``files`` (relative path -> bytes; the caller checked the paths) as a synced folder in ``tmp/``."""
        folder = self.new_temp_path()
        try:
            for path, data in files.items():
                target = folder / path
                target.parent.mkdir(parents=True, exist_ok=True)
                with open(target, "wb") as file:
                    file.write(data)
                    file.flush()
                    os.fsync(file.fileno())
            for directory in {folder, *(p.parent for p in folder.rglob("*"))}:
                _fsync_directory(directory)
        except BaseException:
            shutil.rmtree(folder, ignore_errors=True)
            raise
        return folder

    def write_temp(self, chunks) -> Path:
        """Write ``chunks`` (bytes or an iterable of bytes) to a synced file in ``tmp/``."""
        path = self.new_temp_path()
        if isinstance(chunks, (bytes, bytearray, memoryview)):
            chunks = [chunks]
        try:
            with open(path, "wb") as file:
                for chunk in chunks:
                    file.write(chunk)
                file.flush()
                os.fsync(file.fileno())
        except BaseException:
            path.unlink(missing_ok=True)
            raise
        return path

    def put(self, name: str, temp_path: Path, metadata: dict, *, size: int, sha256: str,
            only_if=None, lite: tuple[Path, dict] | None = None,
            lite_reason: str | None = None) -> tuple[dict, dict | None]:
        """Make the synced file ``temp_path`` the weights of ``name``; return ``(record, replaced)``.

        ``lite``: the model's web bundle, ``(synced folder from write_temp_folder, {"files": {path:
        bytes}, "bytes": total, "sha256": digest})``, stored with the weights in the same commit; without
        one, ``lite_reason`` says why the model has none. Both folder and file are consumed.

        ``replaced`` is None for a new model, else what the upload replaced:
        ``{"revision", "updated", "size", "sha256"}`` of the previous version.
        ``only_if(current)``, if given, is called inside the write transaction with the
        current record's ``{"revision", "updated", "size", "sha256"}`` (None when there
        is no such model); when it returns False nothing changes and ``PreconditionFailed``
        is raised. Checking there, not before, means two writers cannot both pass it.
        The caller has validated the file. ``temp_path`` is consumed (moved or removed).
        """
        temp_lite = lite[0] if lite is not None else None
        try:
            check_name(name)
            metadata_text = metadata_json(metadata)  # before anything changes on disk
        except ValueError:
            Path(temp_path).unlink(missing_ok=True)
            if temp_lite is not None:
                shutil.rmtree(temp_lite, ignore_errors=True)
            raise
        lite_text = json.dumps(lite[1] if lite is not None else {"reason": lite_reason or NO_BUNDLE})
        stem = f"{name}@{time.time_ns():x}-{secrets.token_hex(4)}"
        file_name = stem + WEIGHTS_SUFFIX
        final_path, final_lite = self.models_dir / file_name, self.lite_dir / stem
        try:
            os.replace(temp_path, final_path)
            _fsync_directory(self.models_dir)
            if temp_lite is not None:
                os.replace(temp_lite, final_lite)
                _fsync_directory(self.lite_dir)
        except BaseException:
            Path(temp_path).unlink(missing_ok=True)
            final_path.unlink(missing_ok=True)
            if temp_lite is not None:
                shutil.rmtree(temp_lite, ignore_errors=True)
            raise

        conn = self._connect()
        now = _now()
        try:
            conn.execute("BEGIN IMMEDIATE")
            old = conn.execute("SELECT file, created, updated, revision, size, sha256 FROM models WHERE name = ?",
                               (name,)).fetchone()
            replaced = version_of(old)
            if only_if is not None and not only_if(replaced):
                raise PreconditionFailed(name, replaced)
            created = old["created"] if old else now
            revision = old["revision"] + 1 if old else 1
            conn.execute(
                "INSERT INTO models (name, file, size, sha256, metadata, created, updated, revision, lite) "
                "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?) "
                "ON CONFLICT(name) DO UPDATE SET file = excluded.file, size = excluded.size, "
                "sha256 = excluded.sha256, metadata = excluded.metadata, updated = excluded.updated, "
                "revision = excluded.revision, lite = excluded.lite",
                (name, file_name, size, sha256, metadata_text, created, now, revision, lite_text))
            conn.execute("COMMIT")
        except BaseException:
            if conn.in_transaction:
                conn.execute("ROLLBACK")
            final_path.unlink(missing_ok=True)
            shutil.rmtree(final_lite, ignore_errors=True)
            raise
        if old is not None and old["file"] != file_name:
            self._remove_files(old["file"])
        record = {"name": name, "size": size, "sha256": sha256, "created": created,
                  "updated": now, "revision": revision, "metadata": metadata, **_lite_fields(lite_text)}
        return record, replaced

    def _remove_files(self, file_name: str) -> None:
        """Remove a version's weights file and its bundle folder (if any)."""
        (self.models_dir / file_name).unlink(missing_ok=True)
        shutil.rmtree(self.lite_dir / _stem(file_name), ignore_errors=True)

    def delete(self, name: str) -> bool:
        """Remove ``name``; return False if there was no such model."""
        check_name(name)
        conn = self._connect()
        try:
            conn.execute("BEGIN IMMEDIATE")
            row = conn.execute("SELECT file FROM models WHERE name = ?", (name,)).fetchone()
            if row is not None:
                conn.execute("DELETE FROM models WHERE name = ?", (name,))
            conn.execute("COMMIT")
        except BaseException:
            if conn.in_transaction:
                conn.execute("ROLLBACK")
            raise
        if row is None:
            return False
        self._remove_files(row["file"])
        return True

    def collect_garbage(self, min_age_s: float = 600.0) -> int:
        """Remove stale uploads, weights files and bundle folders no row points to; return how many.

        Only files untouched for ``min_age_s`` go: a writer in another process may
        be between its rename and its commit.
        """
        referenced = {row["file"] for row in self._connect().execute("SELECT file FROM models")}
        cutoff = time.time() - min_age_s
        removed = 0
        for directory, keep in ((self.tmp_dir, set()), (self.models_dir, referenced),
                                (self.lite_dir, {_stem(file) for file in referenced})):
            for entry in os.scandir(directory):
                try:
                    if entry.name in keep or entry.is_symlink():
                        continue
                    if entry.stat(follow_symlinks=False).st_mtime < cutoff:
                        if entry.is_dir(follow_symlinks=False):
                            shutil.rmtree(entry.path)  # an upload's bundle folder, or an old version's bundle
                        else:
                            os.unlink(entry.path)
                        removed += 1
                except FileNotFoundError:
                    continue
        return removed


WEIGHTS_SUFFIX = ".safetensors"


def _stem(file_name: str) -> str:
    """``NAME@REV`` of a weights file ``NAME@REV.safetensors``: the name of its bundle folder."""
    return file_name.removesuffix(WEIGHTS_SUFFIX)


def _lite_fields(text: str | None) -> dict:
    """A record's ``"lite"`` ({"files", "bytes", "sha256"}, or None) and ``"lite_reason"`` (why there is none)
    from the ``lite`` column."""
    try:
        value = json.loads(text) if text else {}
    except ValueError:
        value = {"reason": "the stored bundle record is unreadable; push the model again"}
    if isinstance(value, dict) and isinstance(value.get("files"), dict):
        return {"lite": {"files": value["files"], "bytes": value.get("bytes"), "sha256": value.get("sha256")},
                "lite_reason": None}
    reason = value.get("reason") if isinstance(value, dict) else None
    return {"lite": None, "lite_reason": str(reason or NO_BUNDLE)}
