"""Generations of an extract in an object store, and the local working copy of one.

Under the home's prefix (`s3://bucket/path/shop.hyper/`):

- `generations/<n>-<token>/<file>`: the files of a committed state (the `.hyper` file,
  its outbox and the state kept beside it), written once and never changed;
- `manifest/<n>.json`: generation n's list of those files. Creating it with the store's
  create-if-absent write (S3 `If-None-Match: *`) is the commit: of two writers that both
  start from generation n - 1, one creates `manifest/<n>.json`, the other gets
  `HomeConflictError` and its files stay uncommitted. Manifests are never deleted (a
  deleted one could be created again by a stalled writer);
- `lease.json`: who may write now (`hyper_assets.lease`).

A file unchanged since the generation a write started from is not uploaded again: the
new manifest names the old object. A run keeps a working copy of one generation on its
disk, with a marker naming it, and downloads only when the home's current generation is
another. The marker is removed before the copy is written to, so a copy that a failed
or killed write changed is downloaded again.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import obstore
from obstore.exceptions import AlreadyExistsError, BaseError
from obstore.store import ObjectStore

from hyper_assets._files import write_json
from hyper_assets.errors import CorruptFileError, HomeConflictError, HomeStoreError

FORMAT = 1
MANIFESTS = "manifest/"
_DIGITS = 20  # manifest numbers are zero-padded: the store lists them in order
MARKER = ".generation.json"


@dataclass(frozen=True)
class StoredFile:
    """One file of a generation: its path in the working copy and its object."""

    path: str
    key: str
    size: int
    sha256: str


@dataclass(frozen=True)
class Manifest:
    """Generation `number` of an extract: its files, the lease that committed it, and the
    extract's identity (created with generation 1, carried by every later one)."""

    number: int
    token: str
    extract_id: str
    lease_id: str
    files: tuple[StoredFile, ...]
    committed_at: str

    @property
    def key(self) -> str:
        return manifest_key(self.number)

    def to_bytes(self) -> bytes:
        body = {
            "format": FORMAT,
            "number": self.number,
            "token": self.token,
            "extract_id": self.extract_id,
            "lease_id": self.lease_id,
            "files": [f.__dict__ for f in self.files],
            "committed_at": self.committed_at,
        }
        return json.dumps(body, indent=1).encode()

    @classmethod
    def parse(cls, body: bytes, where: str) -> Manifest:
        try:
            record: dict[str, Any] = json.loads(body)
            if record["format"] != FORMAT:
                raise ValueError(f"format {record['format']}, this library reads {FORMAT}")
            return cls(
                number=int(record["number"]),
                token=str(record["token"]),
                extract_id=str(record["extract_id"]),
                lease_id=str(record["lease_id"]),
                files=tuple(StoredFile(**f) for f in record["files"]),
                committed_at=str(record["committed_at"]),
            )
        except (ValueError, KeyError, TypeError) as error:
            raise CorruptFileError(
                f"{where} cannot be read ({type(error).__name__}: {error}); nothing was "
                "changed. Restore it from the store's object versions, or write with a "
                "library version that reads it."
            ) from error


def manifest_key(number: int) -> str:
    return f"{MANIFESTS}{number:0{_DIGITS}d}.json"


@contextmanager
def store_errors(where: str, *, missing: bool = True) -> Iterator[None]:
    """Maps the store's own errors (obstore's) to `HomeStoreError`, quoting them; a
    missing object (`FileNotFoundError`) too, unless `missing` is False."""
    try:
        yield
    except (BaseError, FileNotFoundError) as error:
        if isinstance(error, FileNotFoundError) and not missing:
            raise
        raise HomeStoreError(
            f"The store of {where} failed ({str(error).splitlines()[0]}); nothing was "
            "committed. Check the bucket, the AWS environment (AWS_ENDPOINT_URL, keys, "
            "region) and that this machine reaches the store."
        ) from error


class Generations:
    """The generations of one extract in `store` (rooted at the home's prefix)."""

    def __init__(self, store: ObjectStore, where: str, name: str) -> None:
        self.store, self.where, self.name = store, where, name

    def current(self) -> Manifest | None:
        """The newest committed generation; None for a home nothing was committed to."""
        with store_errors(self.where):
            keys = [m["path"] for batch in obstore.list(self.store, MANIFESTS) for m in batch]
            if not keys:
                return None
            newest = max(keys)
            body = bytes(obstore.get(self.store, newest).bytes())
        return Manifest.parse(body, f"{self.where}/{newest}")

    def commit(
        self,
        base: Manifest | None,
        working: WorkingCopy,
        lease_id: str,
        fence: Callable[[], None] = lambda: None,
    ) -> Manifest:
        """Uploads the working copy's files and makes them generation `base + 1`
        (returns `base` when they are its files).

        `fence` runs between the upload and the commit (the lease's renewal: it raises
        when the lease was lost, so nothing is committed). Raises `HomeConflictError` if
        another writer committed that generation first; this one's uploaded files are
        then orphans, and the current generation is theirs.
        """
        number = (base.number if base else 0) + 1
        token = uuid.uuid4().hex[:12]
        unchanged = {(f.path, f.sha256): f for f in base.files} if base else {}
        files = []
        with store_errors(self.where):
            for path, local in working.files():
                digest = sha256(local)
                stored = unchanged.get((path, digest))
                if stored is None:
                    key = f"generations/{number:0{_DIGITS}d}-{token}/{path}"
                    obstore.put(self.store, key, local)
                    stored = StoredFile(path, key, local.stat().st_size, digest)
                files.append(stored)
            if base is not None and tuple(files) == base.files:
                working.mark(base)  # nothing changed: the home holds this state already
                return base
            manifest = Manifest(
                number,
                token,
                base.extract_id if base else uuid.uuid4().hex,
                lease_id,
                tuple(files),
                datetime.now(UTC).isoformat(),
            )
            fence()
            try:
                obstore.put(self.store, manifest.key, manifest.to_bytes(), mode="create")
            except AlreadyExistsError as error:
                raise HomeConflictError(
                    f"Another writer committed generation {number} of {self.where} while "
                    "this write ran (its lease expired meanwhile); nothing of this write "
                    "was committed. Run it again: it starts from their generation."
                ) from error
        working.mark(manifest)
        return manifest

    def download(self, manifest: Manifest | None, working: WorkingCopy) -> bool:
        """Makes the working copy equal to `manifest` (empty for None); whether it
        downloaded anything (nothing when the copy already is that generation)."""
        if working.generation() == _identity(manifest):
            return False
        working.clear()
        with store_errors(self.where):
            for stored in manifest.files if manifest else ():
                target = working.directory / stored.path
                target.parent.mkdir(parents=True, exist_ok=True)
                partial = target.with_name(f".{target.name}.download")
                with partial.open("wb") as out:
                    for chunk in obstore.get(self.store, stored.key):
                        out.write(chunk)
                os.replace(partial, target)
        working.mark(manifest)
        return True


def _identity(manifest: Manifest | None) -> dict[str, Any]:
    if manifest is None:
        return {"number": 0, "token": ""}
    return {"number": manifest.number, "token": manifest.token}


class WorkingCopy:
    """This machine's copy of one generation: `directory/<name>` and the files beside it
    (its outbox, compaction's count), with a marker naming the generation."""

    def __init__(self, directory: Path, name: str) -> None:
        self.directory, self.name = directory, name
        self.database = directory / name
        self._marker = directory / MARKER

    def files(self) -> Iterator[tuple[str, Path]]:
        """The generation's files: the database and everything named after it, but its
        locks and a publish's holder record, which belong to a process, not a state."""
        for path in sorted(self.directory.rglob("*")):
            relative = path.relative_to(self.directory).as_posix()
            top = relative.split("/")[0]
            if not path.is_file() or not (top == self.name or top.startswith(self.name + ".")):
                continue
            if path.name.startswith(".") or path.name.endswith((".lock", ".holder.json")):
                continue
            yield relative, path

    def generation(self) -> dict[str, Any] | None:
        """The generation the copy holds, unchanged since; None when unknown or changed."""
        try:
            return json.loads(self._marker.read_text())
        except (OSError, ValueError):
            return None

    def mark(self, manifest: Manifest | None) -> None:
        write_json(self._marker, _identity(manifest))

    def changing(self) -> None:
        """Called before the copy is written to: until a commit marks it, it is no
        generation (a failed write's copy is downloaded again)."""
        self._marker.unlink(missing_ok=True)

    def clear(self) -> None:
        self.changing()
        for _, path in list(self.files()):
            path.unlink()
        outbox = self.directory / f"{self.name}.outbox"
        if outbox.is_dir():
            shutil.rmtree(outbox)


def sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as source:
        while block := source.read(1 << 20):
            digest.update(block)
    return digest.hexdigest()
