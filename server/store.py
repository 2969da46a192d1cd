"""The model store: safetensors files in a data folder, indexed by SQLite.

Layout of the data folder (``WEBGRAD_DATA``, default ``./data``)::

    index.sqlite3               one row per model: name, file, size, sha256, metadata, times
    models/NAME@REV.safetensors the current weights of each model (REV is unique per upload)
    tmp/                        uploads being written; never served

How a write stays safe:

- An upload is written to ``tmp/``, flushed and fsynced, then renamed to a file
  name nobody has used before (``NAME@REV``). Nothing points at it yet.
- One SQLite transaction (``BEGIN IMMEDIATE``, which SQLite serialises across
  threads and processes) reads the old row and writes the new one. The commit is
  the single moment the model switches version, so the row and the file always
  agree, and two concurrent PUTs of one name simply take turns: the last commit
  wins and the loser's file is removed.
- Only after the commit is the previous file removed. A reader that looked up
  the old row just before may find its file gone; it looks the row up again.
  A reader that already opened the old file keeps reading it (POSIX unlink).
- A crash between the rename and the commit leaves an unreferenced file, which
  ``collect_garbage`` removes once it is old enough that no writer can still own it.

This module knows nothing about HTTP; ``server/api.py`` puts it on the web.
"""
from __future__ import annotations

import datetime
import json
import os
import re
import secrets
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
    revision INTEGER NOT NULL
)
"""
COLUMNS = "name, file, size, sha256, metadata, created, updated, revision"


class InvalidName(ValueError):
    """A model name outside ``NAME_PATTERN`` (or containing ``..``)."""


def check_name(name: str) -> str:
    """Return ``name`` if it is a valid model name, else raise ``InvalidName`` saying why."""
    if not isinstance(name, str) or not NAME_PATTERN.fullmatch(name) or ".." in name:
        raise InvalidName(
            f"invalid model name {name!r}: use 1 to 64 characters from A-Z a-z 0-9 _ . -, "
            "starting with a letter or digit, without '..'")
    return name


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
        self.db_path = self.root / "index.sqlite3"
        self.models_dir.mkdir(parents=True, exist_ok=True)
        self.tmp_dir.mkdir(parents=True, exist_ok=True)
        self._local = threading.local()
        with self._connect() as conn:
            # WAL lets readers go on while a writer commits. The journal mode is
            # stored in the file, so setting it once is enough.
            conn.execute("PRAGMA journal_mode=WAL")
            conn.execute(SCHEMA)
        self.collect_garbage()

    # ------------------------------------------------------------------ connections

    def _connect(self) -> sqlite3.Connection:
        """One connection per thread, reused (the server's thread pool keeps its threads)."""
        conn = getattr(self._local, "conn", None)
        if conn is None:
            # isolation_level=None: we write BEGIN/COMMIT ourselves.
            conn = sqlite3.connect(self.db_path, timeout=30, isolation_level=None)
            conn.row_factory = sqlite3.Row
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
        return {
            "name": row["name"],
            "size": row["size"],
            "sha256": row["sha256"],
            "created": row["created"],
            "updated": row["updated"],
            "revision": row["revision"],
            "metadata": json.loads(row["metadata"]),
        }

    def list(self) -> list[dict]:
        rows = self._connect().execute(f"SELECT {COLUMNS} FROM models ORDER BY name").fetchall()
        return [self._record(row) for row in rows]

    def get(self, name: str) -> dict | None:
        check_name(name)
        row = self._connect().execute(f"SELECT {COLUMNS} FROM models WHERE name = ?", (name,)).fetchone()
        return None if row is None else self._record(row)

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

    def put(self, name: str, temp_path: Path, metadata: dict, *, size: int, sha256: str) -> tuple[dict, bool]:
        """Make the synced file ``temp_path`` the weights of ``name``; return ``(record, created)``.

        The caller has validated the file. ``temp_path`` is consumed (moved or removed).
        """
        check_name(name)
        if not isinstance(metadata, dict):
            raise TypeError("metadata must be a dict (a JSON object)")
        metadata_json = json.dumps(metadata, ensure_ascii=False, separators=(",", ":"))
        file_name = f"{name}@{time.time_ns():x}-{secrets.token_hex(4)}.safetensors"
        final_path = self.models_dir / file_name
        try:
            os.replace(temp_path, final_path)
            _fsync_directory(self.models_dir)
        except BaseException:
            Path(temp_path).unlink(missing_ok=True)
            raise

        conn = self._connect()
        now = _now()
        try:
            conn.execute("BEGIN IMMEDIATE")
            old = conn.execute("SELECT file, created, revision FROM models WHERE name = ?", (name,)).fetchone()
            created = old["created"] if old else now
            revision = old["revision"] + 1 if old else 1
            conn.execute(
                "INSERT INTO models (name, file, size, sha256, metadata, created, updated, revision) "
                "VALUES (?, ?, ?, ?, ?, ?, ?, ?) "
                "ON CONFLICT(name) DO UPDATE SET file = excluded.file, size = excluded.size, "
                "sha256 = excluded.sha256, metadata = excluded.metadata, updated = excluded.updated, "
                "revision = excluded.revision",
                (name, file_name, size, sha256, metadata_json, created, now, revision))
            conn.execute("COMMIT")
        except BaseException:
            if conn.in_transaction:
                conn.execute("ROLLBACK")
            final_path.unlink(missing_ok=True)
            raise
        if old is not None and old["file"] != file_name:
            (self.models_dir / old["file"]).unlink(missing_ok=True)
        record = {"name": name, "size": size, "sha256": sha256, "created": created,
                  "updated": now, "revision": revision, "metadata": metadata}
        return record, old is None

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
        (self.models_dir / row["file"]).unlink(missing_ok=True)
        return True

    def collect_garbage(self, min_age_s: float = 600.0) -> int:
        """Remove stale uploads and weights files no row points to; return how many.

        Only files untouched for ``min_age_s`` go: a writer in another process may
        be between its rename and its commit.
        """
        referenced = {row["file"] for row in self._connect().execute("SELECT file FROM models")}
        cutoff = time.time() - min_age_s
        removed = 0
        for directory, keep in ((self.tmp_dir, set()), (self.models_dir, referenced)):
            for entry in os.scandir(directory):
                try:
                    if entry.name in keep or not entry.is_file(follow_symlinks=False):
                        continue
                    if entry.stat(follow_symlinks=False).st_mtime < cutoff:
                        os.unlink(entry.path)
                        removed += 1
                except FileNotFoundError:
                    continue
        return removed
