"""Published data sources as `DATA_DIR/<name>.hyper`, and upload sessions beside them.

Ids derive from the name (uuid5), so a restarted emulator serves the files already in its
data directory under the same ids. Each data source has a lock: the job runner holds it
while applying a batch and `publish` while it swaps the file in, so the two never overlap.
"""

from __future__ import annotations

import os
import threading
import uuid
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from hyper_assets.emulator.wire import bad_request, not_found
from hyper_assets.errors import RestApiError

_NAMESPACE = uuid.UUID("5b0c7f36-58a4-4c3e-9d7e-2f6a1f0e4b11")
PROJECT_NAME = "default"
PROJECT_ID = str(uuid.uuid5(_NAMESPACE, "project/default"))
INTERNAL_DIR = ".emulator"
MAX_NAME_BYTES = 200


@dataclass
class Datasource:
    id: str
    name: str
    connection_id: str
    path: Path
    created_at: datetime
    updated_at: datetime


def check_name(name: str) -> str:
    """A data source name usable as a file name; anything else is a 400 naming the rule."""
    problem = None
    if not name or not name.strip():
        problem = "is empty"
    elif "/" in name or "\\" in name or "\x00" in name:
        problem = "contains a path separator or NUL"
    elif ".." in name or name.startswith("."):
        problem = "starts with '.' or contains '..'"
    elif any(ord(ch) < 32 for ch in name):
        problem = "contains a control character"
    elif len(name.encode()) > MAX_NAME_BYTES:
        problem = f"is longer than {MAX_NAME_BYTES} bytes in UTF-8"
    if problem:
        raise bad_request(f"data source name {name!r} {problem}; the emulator stores it as a file.")
    return name


class DatasourceStore:
    """The data sources in one directory, one `.hyper` file each."""

    def __init__(self, data_dir: Path) -> None:
        self.data_dir = data_dir
        self._by_id: dict[str, Datasource] = {}
        self._locks: dict[str, threading.Lock] = {}
        self._guard = threading.Lock()
        for path in sorted(data_dir.glob("*.hyper")):
            if not path.name.startswith("."):
                self._register(path.stem, path)

    def _register(self, name: str, path: Path) -> Datasource:
        ds_id = str(uuid.uuid5(_NAMESPACE, f"datasource/{name}"))
        modified = datetime.fromtimestamp(path.stat().st_mtime, UTC)
        datasource = self._by_id.get(ds_id) or Datasource(
            ds_id, name, str(uuid.uuid5(_NAMESPACE, f"connection/{name}")), path, modified, modified
        )
        datasource.updated_at = modified
        self._by_id[ds_id] = datasource
        self._locks.setdefault(ds_id, threading.Lock())
        return datasource

    def list(self, name: str | None = None) -> list[Datasource]:
        with self._guard:
            found = [d for d in self._by_id.values() if name is None or d.name == name]
        return sorted(found, key=lambda d: d.name)

    def get(self, ds_id: str) -> Datasource:
        with self._guard:
            if ds_id not in self._by_id:
                raise not_found("404011", f"Data source {ds_id!r} could not be found.")
            return self._by_id[ds_id]

    def lock(self, datasource: Datasource) -> threading.Lock:
        return self._locks[datasource.id]

    def publish(self, name: str, staged: Path, overwrite: bool) -> Datasource:
        """Move `staged` (a file in the data dir) to `<name>.hyper`, atomically."""
        path = self.data_dir / f"{check_name(name)}.hyper"
        if path.resolve().parent != self.data_dir.resolve():
            raise bad_request(f"data source name {name!r} would leave the data directory.")
        with self._guard:
            existing = [d for d in self._by_id.values() if d.name == name]
        if existing and not overwrite:
            staged.unlink(missing_ok=True)
            raise RestApiError(
                403,
                "403007",
                "Forbidden",
                f"A data source named {name!r} already exists in project {PROJECT_NAME!r}; "
                "publish with overwrite=true to replace it.",
            )
        if existing:
            with self.lock(existing[0]):
                os.replace(staged, path)
        else:
            os.replace(staged, path)
        with self._guard:
            return self._register(name, path)

    def staging_path(self) -> Path:
        """A fresh hidden file name in the data dir (same file system, so `os.replace` works)."""
        internal = self.data_dir / INTERNAL_DIR
        internal.mkdir(exist_ok=True)
        return internal / f"publish-{uuid.uuid4().hex}.hyper"


@dataclass
class Upload:
    path: Path
    size: int = 0
    consumed_by: str | None = None


class UploadStore:
    """File upload sessions: initiate, append chunks, then one request consumes the file."""

    def __init__(self, data_dir: Path) -> None:
        self.dir = data_dir / INTERNAL_DIR / "uploads"
        self.dir.mkdir(parents=True, exist_ok=True)
        self._uploads: dict[str, Upload] = {}
        self._guard = threading.Lock()
        self._counter = 0

    def initiate(self) -> str:
        with self._guard:
            self._counter += 1
            session_id = f"{self._counter}:{uuid.uuid4().hex}-1:0"
            path = self.dir / f"{uuid.uuid4().hex}.part"
            path.touch()
            self._uploads[session_id] = Upload(path)
        return session_id

    def append(self, session_id: str, chunk: bytes) -> int:
        """Add a chunk; return the size so far in bytes."""
        upload = self._open(session_id)
        with self._guard, upload.path.open("ab") as out:
            out.write(chunk)
            upload.size += len(chunk)
            return upload.size

    def size(self, session_id: str) -> int:
        return self._open(session_id).size

    def consume(self, session_id: str, consumer: str) -> Path:
        """Hand the uploaded file to `consumer`; any later use of the session is refused."""
        with self._guard:
            upload = self._open(session_id)
            upload.consumed_by = consumer
            return upload.path

    def _open(self, session_id: str) -> Upload:
        upload = self._uploads.get(session_id)
        if upload is None:
            raise not_found("404031", f"Upload session {session_id!r} does not exist.")
        if upload.consumed_by is not None:
            raise RestApiError(
                409,
                "409000",
                "Conflict",
                f"Upload session {session_id!r} was already consumed by {upload.consumed_by}; "
                "an upload can be used by one request only. Upload the file again.",
            )
        return upload
