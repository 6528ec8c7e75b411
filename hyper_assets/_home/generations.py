"""Generations of an extract in an object store, and the local working copy of one.

Under the home's prefix (`s3://bucket/path/shop.hyper/`):

- `chunks/<sha256>.<token>`: the bytes of the files of committed states (the `.hyper`
  file, its outbox and the state kept beside it), cut into chunks (`hyper_assets._home.chunks`),
  each uploaded by the generation whose manifest's token it carries, and named again by
  the next generations while their files hold its bytes; written once, never changed
  (`chunks/<sha256>`: one of manifests of format 2, shared by any generation);
- `manifest/<n>.json`: generation n's files, each as its list of chunks (`MANIFEST`; its
  version, spelled `format` as earlier releases read it, is the `FORMAT` below). Creating it with
  the store's create-if-absent write (S3 `If-None-Match: *`) is the commit: of two
  writers that both start from generation n - 1, one creates `manifest/<n>.json`, the
  other gets `HomeConflictError` and its chunks stay uncommitted. Manifests are never
  deleted (a deleted one could be created again by a stalled writer);
- `generations/<n>-<token>/<file>`: whole files, as manifests of format 1 named them
  (written by earlier versions; still read, no longer written);
- `lease.json`: who may write now (`hyper_assets._home.lease`).

A commit uploads only the chunks its base generation lacks; `hyper_assets._home.collect`
deletes what no recent generation names. A run keeps a working copy of one generation on
its disk, with a marker naming it (and that generation's manifest beside it), and
downloads only when the home's current generation is another, and then only the chunks
its copy lacks: read off the two manifests when the marker names the copy's generation,
else by hashing the copy. The marker is removed before the copy is written to, so a
copy that a failed or killed write or download changed is checked again.
"""

from __future__ import annotations

import json
import shutil
import uuid
from collections.abc import Callable, Collection, Iterator, Mapping
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import obstore
from obstore.exceptions import (
    AlreadyExistsError,
    BaseError,
    PermissionDeniedError,
    UnauthenticatedError,
)
from obstore.store import ObjectStore

from hyper_assets._base.files import fsync_path
from hyper_assets._base.saved import Fields, SavedFormat
from hyper_assets._home import chunks
from hyper_assets._home.chunks import CHUNKS, Part, Transfer, chunk_key
from hyper_assets.errors import (
    CorruptFileError,
    HomeCommitUnknownError,
    HomeConflictError,
    HomeStoreError,
)

#: 1: each file one object under generations/; 2: chunks under their SHA-256, shared by
#: every generation; 3: chunks under keys of the generation that uploaded them.
FORMAT = 3
READS = (1, 2, 3)
MANIFESTS = "manifest/"
_DIGITS = 20  # manifest numbers are zero-padded: the store lists them in order
MARKER = ".generation.json"
#: Beside the marker: the manifest of the generation it names (`WorkingCopy.held`).
HELD = ".generation.manifest.json"
#: Beside the marker: the fast digests of a generation's chunks (`Digests`).
DIGESTS_FILE = ".generation.digests.json"
#: obstore's errors for a request the store answered with a refusal (a 4xx status): it
#: was not carried out, and no copy of it is on its way.
REFUSALS = (PermissionDeniedError, UnauthenticatedError, AlreadyExistsError, FileNotFoundError)


@dataclass(frozen=True)
class StoredFile:
    """One file of a generation: its path in the working copy and its parts in order."""

    path: str
    size: int
    parts: tuple[Part, ...]

    def to_record(self) -> dict[str, Any]:
        chunks = [_chunk_record(p) for p in self.parts]
        return {"path": self.path, "size": self.size, "chunks": chunks}

    @classmethod
    def from_record(cls, f: Fields) -> StoredFile:
        path, size = f.take("path", str), f.take("size", int)
        if f.version == 1:  # the whole file, one object
            whole = Part(f.take("key", str), 0, size, f.take("sha256", str))
            return cls(path, size, (whole,))
        parts, offset = [], 0
        for digest, length, token in f.each("chunks", _chunk):
            parts.append(Part(chunk_key(digest, token), offset, length, digest, token))
            offset += length
        if offset != size:
            raise ValueError(f"the chunks of {path} hold {offset} bytes, not {size}")
        return cls(path, size, tuple(parts))


def _chunk_record(part: Part) -> dict[str, Any]:
    """A chunk as a manifest names it: its hash, size, and the token of its key (none for
    a chunk of format 2)."""
    token = {"token": part.token} if part.token else {}
    return {"sha256": part.sha256, "size": part.size} | token


def _chunk(f: Fields) -> tuple[str, int, str]:
    return f.take("sha256", str), f.take("size", int), f.take("token", str, "")


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

    @property
    def keys(self) -> frozenset[str]:
        """The objects its files are made of."""
        return frozenset(p.key for f in self.files for p in f.parts)

    def chunks(self) -> dict[str, str]:
        """The tokens of its chunks' keys by their SHA-256 (whole files of format 1 left
        out)."""
        return {p.sha256: p.token for f in self.files for p in f.parts if p.key.startswith(CHUNKS)}

    def to_bytes(self) -> bytes:
        return json.dumps(MANIFEST.to_json(self), indent=1).encode()

    def to_json(self) -> dict[str, Any]:
        return {
            "number": self.number,
            "token": self.token,
            "extract_id": self.extract_id,
            "lease_id": self.lease_id,
            "files": [f.to_record() for f in self.files],
            "committed_at": self.committed_at,
        }

    @classmethod
    def from_json(cls, f: Fields) -> Manifest:
        return cls(
            number=f.take("number", int),
            token=f.take("token", str),
            extract_id=f.take("extract_id", str),
            lease_id=f.take("lease_id", str),
            files=f.each("files", StoredFile.from_record),
            committed_at=f.take("committed_at", str),
        )

    @classmethod
    def parse(cls, body: bytes, where: str) -> Manifest:
        """The manifest `body` read from `where`: `CorruptFileError` when it cannot be read
        (`UnknownFormatVersionError` for a format this library does not read)."""
        return MANIFEST.from_text(body, where)


#: `manifest/<n>.json`. Formats 1 to 3 spelled their version `format`; a manifest has
#: always had one.
MANIFEST = SavedFormat(
    FORMAT,
    Manifest.from_json,
    Manifest.to_json,
    "Restore it from the store's object versions, or write with a library version that reads it.",
    reads=READS,
    unversioned=None,
    key="format",  # as every earlier release reads it
)


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
        raise store_error(where, error) from error


def store_error(where: str, error: Exception) -> HomeStoreError:
    """The store's `error`, where it leaves nothing committed: at a step before the
    commit, or at a commit the store refused."""
    return HomeStoreError(
        f"The store of {where} failed ({first_line(error)}); nothing was committed. Check "
        "the bucket or container, the store's settings or environment (S3: "
        "AWS_ENDPOINT_URL, keys, region; Azure: AZURE_STORAGE_ACCOUNT_NAME and its key or "
        "endpoint) and that this machine reaches the store."
    )


def first_line(error: BaseException) -> str:
    return str(error).splitlines()[0] if str(error) else type(error).__name__


class Generations:
    """The generations of one extract in `store` (rooted at the home's prefix)."""

    def __init__(
        self, store: ObjectStore, where: str, name: str, concurrency: int = chunks.CONCURRENCY
    ) -> None:
        self.store, self.where, self.name = store, where, name
        self.concurrency = concurrency  # chunks moved at once
        self.sent = Transfer()  # by the last commit

    def current(self) -> Manifest | None:
        """The newest committed generation; None for a home nothing was committed to."""
        keys = self.numbers()
        return self.read(max(keys)) if keys else None

    def numbers(self) -> list[int]:
        """The numbers of the committed generations, oldest first."""
        with store_errors(self.where):
            keys = [m["path"] for batch in obstore.list(self.store, MANIFESTS) for m in batch]
        return sorted(int(k.removeprefix(MANIFESTS).removesuffix(".json")) for k in keys)

    def read(self, number: int) -> Manifest:
        key = manifest_key(number)
        with store_errors(self.where):
            body = bytes(obstore.get(self.store, key).bytes())
        return Manifest.parse(body, f"{self.where}/{key}")

    def commit(
        self,
        base: Manifest | None,
        working: WorkingCopy,
        lease_id: str,
        fence: Callable[[], None] = lambda: None,
    ) -> Manifest:
        """Uploads the chunks of the working copy's files that `base` lacks, under keys of
        the new generation's own, and makes them generation `base + 1` (returns `base`
        when they are its files).

        `fence` runs between the upload and the commit (the lease's renewal: it raises
        when the lease was lost, so nothing is committed). Raises `HomeConflictError` if
        another writer committed that generation first; this one's uploaded chunks are
        then orphans, and the current generation is theirs. `sent` holds the bytes moved.
        """
        number, token = (base.number if base else 0) + 1, uuid.uuid4().hex[:12]
        named = base.chunks() if base else {}
        known = working.digests(base)
        files, self.sent, digests = [], Transfer(), {}
        with store_errors(self.where):
            for path, local in working.files():
                parts, transfer, digests[path] = chunks.upload(
                    self.store, local, named, token, self.concurrency, known.get(path, ())
                )
                # On disk before the marker names it: hyperd's writes may still be in
                # the page cache, and a marker that outlived a power loss would vouch for
                # bytes the disk never got.
                fsync_path(local)
                files.append(StoredFile(path, sum(p.size for p in parts), parts))
                self.sent += transfer
            if base is not None and tuple(files) == base.files:
                working.mark(base, digests)  # nothing changed: the home holds this state
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
        self._create(manifest)
        working.mark(manifest, digests)
        return manifest

    def _create(self, manifest: Manifest) -> None:
        """Creates `manifest`'s object: the commit. When the store answers with an error
        (a reply lost, a retried create refused by the first one's object), the object
        tells whether it committed: it holds this manifest's token (committed), another's
        (`HomeConflictError`), or is absent. Absent after the store refused the create
        (`REFUSALS`), nothing was committed (`HomeStoreError`); after any other error (a
        timeout: obstore does not retry a create), the create may still be on its way,
        so it is sent again, and whichever lands first is the commit. When that cannot
        be told, `HomeCommitUnknownError`."""
        body = manifest.to_bytes()
        try:
            obstore.put(self.store, manifest.key, body, mode="create")
            return
        except (BaseError, FileNotFoundError) as error:
            failed = error
        token = self._token(manifest, failed)
        if token is None and not isinstance(failed, REFUSALS):
            try:
                obstore.put(self.store, manifest.key, body, mode="create")
                return
            except AlreadyExistsError:  # the first create landed, or another writer's
                token = self._token(manifest, failed)
            except (BaseError, FileNotFoundError) as error:
                sent = f"again when it was sent again ({first_line(error)})"
                raise self._unknown(manifest, failed, sent) from error
        if token is None:
            raise store_error(self.where, failed) from failed
        if token != manifest.token:
            raise HomeConflictError(
                f"Another writer committed generation {manifest.number} of {self.where} "
                "while this write ran (its lease expired meanwhile); nothing of this write "
                "was committed. Run it again: it starts from their generation."
            ) from failed

    def _token(self, manifest: Manifest, failed: Exception) -> str | None:
        """The token of the manifest the store holds at `manifest`'s number; None when
        it holds none; `HomeCommitUnknownError` when the store does not answer."""
        try:
            body = bytes(obstore.get(self.store, manifest.key).bytes())
        except FileNotFoundError:
            return None
        except BaseError as error:
            asked = f"again when asked whether it had ({first_line(error)})"
            raise self._unknown(manifest, failed, asked) from error
        return Manifest.parse(body, f"{self.where}/{manifest.key}").token

    def _unknown(self, manifest: Manifest, failed: Exception, then: str) -> HomeCommitUnknownError:
        """The commit of `manifest` failed with `failed`, and `then` (what failed next)
        left unknown whether it took place."""
        where = f"{self.where}/{manifest.key}"
        return HomeCommitUnknownError(
            f"This write to {self.where} may be committed: the store failed when it created "
            f"{manifest.key}, the commit ({first_line(failed)}), and {then}. Do not run it "
            "again before checking: an append run twice adds its rows twice. It is "
            f"committed if {where} holds token {manifest.token!r} (read it with the store's "
            "console or CLI); if it holds another token, nothing of this write was "
            "committed: run it again. If it is absent, the create may still land: check "
            "again later."
        )

    def download(self, manifest: Manifest | None, working: WorkingCopy) -> Transfer | None:
        """Makes the working copy equal to `manifest` (empty for None), fetching only the
        chunks it lacks; the bytes moved, or None when the copy already is that
        generation. A copy that holds a known generation unchanged is patched
        (`_patch`); any other is checked chunk by chunk and its files written anew."""
        if working.generation() == _identity(manifest):
            return None
        held = working.held()
        if held is not None and manifest is not None:
            patched = self._patch(held, manifest, working)
            if patched is not None:
                return patched
        files = manifest.files if manifest else ()
        working.clear(keep={f.path for f in files})
        transfer, digests = Transfer(), {}
        with store_errors(self.where):
            for stored in files:
                target = working.directory / stored.path
                target.parent.mkdir(parents=True, exist_ok=True)
                moved, digests[stored.path] = chunks.download(
                    self.store, stored.parts, target, self.where, self.concurrency
                )
                transfer += moved
        working.mark(manifest, digests)
        return transfer

    def _patch(self, held: Manifest, manifest: Manifest, working: WorkingCopy) -> Transfer | None:
        """Brings a copy that holds generation `held` unchanged to `manifest` without
        reading it: `held`'s chunks tell which of `manifest`'s it has where they belong
        (`patch_plan`). Every chunk it lacks is fetched and checked first, so that a
        failure leaves the copy as it was, still marked; only then is the copy made no
        generation, the chunks written at their offsets (the database in place, the
        small files beside it each replaced at once), and marked. None, with nothing
        changed, when more than `PATCH_BYTES` are lacking (the copy is then checked and
        written anew, holding no more than a few chunks at a time)."""
        plan = patch_plan(held, manifest, _sizes(working, held))
        if plan is None:
            return None
        lacking = tuple(p for _, parts in plan for p in parts)
        with store_errors(self.where):
            blocks = iter(chunks.fetch(self.store, lacking, self.where, self.concurrency))
        known = working.digests(held)
        working.clear(keep={f.path for f in manifest.files})
        moved, digests = 0, {}
        for stored, parts in plan:
            target = working.directory / stored.path
            target.parent.mkdir(parents=True, exist_ok=True)
            written = {p.offset: next(blocks) for p in parts}
            chunks.patch(target, stored.size, written, in_place=stored.path == working.name)
            moved += sum(p.size for p in parts)
            fast = {p.offset: d for p, d in known.get(stored.path, ())}  # kept: the same bytes
            fast |= {o: chunks.fast_digest(b) for o, b in written.items()}
            if all(p.offset in fast for p in stored.parts):  # else hashed at the next commit
                digests[stored.path] = tuple(fast[p.offset] for p in stored.parts)
        working.mark(manifest, digests)
        total = sum(f.size for f in manifest.files)
        return Transfer(moved=moved, kept=total - moved)


#: Bytes a patch fetches into memory at most; a copy lacking more is written anew.
PATCH_BYTES = 64 << 20


def patch_plan(
    held: Manifest, manifest: Manifest, sizes: Mapping[str, int]
) -> list[tuple[StoredFile, tuple[Part, ...]]] | None:
    """What a copy holding generation `held` unchanged, whose files have `sizes` on
    disk, fetches to become `manifest`: each of `manifest`'s files with the chunks it
    lacks (all of them for a file `held` lacks, or whose size on disk is not `held`'s).
    None when that is more than `PATCH_BYTES`."""
    old = {f.path: f.parts for f in held.files if sizes.get(f.path) == f.size}
    plan = [(f, chunks.lacking(old.get(f.path, ()), f.parts)) for f in manifest.files]
    if sum(p.size for _, parts in plan for p in parts) > PATCH_BYTES:
        return None
    return plan


def _sizes(working: WorkingCopy, held: Manifest) -> dict[str, int]:
    """The sizes on disk of the files of `held` the copy has."""
    sizes = {}
    for stored in held.files:
        with suppress(OSError):
            sizes[stored.path] = (working.directory / stored.path).stat().st_size
    return sizes


@dataclass(frozen=True)
class Marker:
    """The generation a working copy holds (number 0: none, the home was empty)."""

    number: int
    token: str

    def to_json(self) -> dict[str, Any]:
        return {"number": self.number, "token": self.token}

    @classmethod
    def from_json(cls, f: Fields) -> Marker:
        return cls(f.take("number", int), f.take("token", str))


#: The working copy's marker (written without a version before this one: version 1).
MARKER_FORMAT = SavedFormat(1, Marker.from_json, Marker.to_json, "The copy is downloaded again.")


@dataclass(frozen=True)
class Digests:
    """The fast digests (`chunks.fast_digest`) of the chunks of generation `number`
    (`token`)'s files, by path, in the order of the file's parts in its manifest: what a
    commit from that generation compares a chunk with before it hashes it with SHA-256.
    They hold for the generation's bytes whatever became of the copy since, so they are
    used by a commit from that generation alone (number and token), of a file of as many
    parts."""

    number: int
    token: str
    files: tuple[tuple[str, tuple[str, ...]], ...]

    def to_json(self) -> dict[str, Any]:
        return {
            "number": self.number,
            "token": self.token,
            "files": [{"path": path, "xxh3_128": list(d)} for path, d in self.files],
        }

    @classmethod
    def from_json(cls, f: Fields) -> Digests:
        return cls(f.take("number", int), f.take("token", str), f.each("files", _file_digests))


def _file_digests(f: Fields) -> tuple[str, tuple[str, ...]]:
    return f.take("path", str), f.strings("xxh3_128")


#: `.generation.digests.json` beside the marker; a missing, corrupt or newer one only
#: means that the next commit hashes every chunk with SHA-256.
DIGESTS = SavedFormat(
    1, Digests.from_json, Digests.to_json, "The next commit hashes the copy's chunks instead."
)


def _identity(manifest: Manifest | None) -> Marker:
    return Marker(manifest.number, manifest.token) if manifest else Marker(0, "")


class WorkingCopy:
    """This machine's copy of one generation: `directory/<name>` and the files beside it
    (its outbox, compaction's count), with a marker naming the generation."""

    def __init__(self, directory: Path, name: str) -> None:
        self.directory, self.name = directory, name
        self.database = directory / name
        self._marker = directory / MARKER
        self._held = directory / HELD
        self._digests = directory / DIGESTS_FILE

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

    def generation(self) -> Marker | None:
        """The generation the copy holds, unchanged since; None when unknown or changed."""
        try:
            return MARKER_FORMAT.read(self._marker)
        except (OSError, CorruptFileError):
            return None

    def held(self) -> Manifest | None:
        """The manifest of the generation the copy holds, unchanged since; None when
        unknown, changed, or the home was empty."""
        marker = self.generation()
        if marker is None or marker.number == 0:
            return None
        try:
            manifest = MANIFEST.read(self._held)
        except (OSError, CorruptFileError):
            return None
        return manifest if _identity(manifest) == marker else None

    def mark(self, manifest: Manifest | None, digests: Mapping[str, tuple[str, ...]] = {}) -> None:
        """Marks the copy as holding `manifest`'s generation, unchanged: its manifest
        (`held`) and the fast `digests` of its files' chunks by path (`digests`) first,
        then the marker."""
        if manifest is None:
            self._held.unlink(missing_ok=True)
            self._digests.unlink(missing_ok=True)
        else:
            # The held manifest not durable: read only when it names the marker's
            # generation, whose manifest in the store never changes; one that a crash
            # lost or damaged costs a hashing. The digests durable: a commit takes them at
            # their word (a chunk whose digest matches is not hashed), so a file that a
            # crash left of stale blocks that still parse would commit wrong bytes.
            MANIFEST.write(self._held, manifest, durable=False)
            files = tuple((f.path, digests[f.path]) for f in manifest.files if f.path in digests)
            DIGESTS.write(self._digests, Digests(manifest.number, manifest.token, files))
        MARKER_FORMAT.write(self._marker, _identity(manifest))

    def digests(self, manifest: Manifest | None) -> dict[str, tuple[tuple[Part, str], ...]]:
        """The parts of `manifest`'s files with their fast digests, by path, for the files
        the saved digests are of; none when they are of another generation, or cannot
        be read."""
        if manifest is None:
            return {}
        try:
            saved = DIGESTS.read(self._digests)
        except (OSError, CorruptFileError):
            return {}
        if (saved.number, saved.token) != (manifest.number, manifest.token):
            return {}
        parts = {f.path: f.parts for f in manifest.files}
        return {
            path: tuple(zip(parts[path], fast, strict=True))
            for path, fast in saved.files
            if path in parts and len(parts[path]) == len(fast)
        }

    def changing(self) -> None:
        """Called before the copy is written to: until a commit marks it, it is no
        generation (a failed write's copy is downloaded again). The removal is on disk
        before this returns: a patch and hyperd write the file in place, and a marker that
        outlived a power loss would vouch for their half-written bytes."""
        if self._marker.exists():
            self._marker.unlink(missing_ok=True)
            fsync_path(self.directory)

    def clear(self, keep: Collection[str] = ()) -> None:
        """Removes the generation's files but those at the paths in `keep` (a download
        reuses their chunks)."""
        self.changing()
        for relative, path in list(self.files()):
            if relative not in keep:
                path.unlink()
        outbox = self.directory / f"{self.name}.outbox"
        if outbox.is_dir() and not any(k.startswith(f"{self.name}.outbox/") for k in keep):
            shutil.rmtree(outbox)
