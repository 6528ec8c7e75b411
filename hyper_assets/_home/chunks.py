"""A file in an object store as content-addressed chunks.

Hyper changes a file in place, block by block: a one-day replace rewrites a few
megabytes of a file of hundreds (docs/performance.md, "The extract's home"). A file is
cut into fixed-size chunks. A commit names again the chunks of its base generation whose
bytes it still holds, and uploads each other chunk once as `chunks/<sha256>.<token>`, a
key of the new generation's own (`token` is its manifest's): never a chunk the store
holds for another reason, which a collector that listed the home before may be deleting
(`hyper_assets._home.collect`). An object never changes. A download copies from the working
copy every chunk whose bytes it still holds at the same place, fetches the others, and
checks every chunk's hash.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Iterator, MutableMapping
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

import obstore
from obstore.exceptions import AlreadyExistsError
from obstore.store import ObjectStore

from hyper_assets.errors import CorruptFileError

CHUNKS = "chunks/"
CHUNK_SIZE = 256 << 10


@dataclass(frozen=True)
class Part:
    """`size` bytes of a file from `offset`, stored as object `key` (whose bytes hash to
    `sha256`): a chunk, uploaded by the generation of `token` (none: a chunk of format
    2), or a whole file of a manifest of format 1."""

    key: str
    offset: int
    size: int
    sha256: str
    token: str = ""


@dataclass(frozen=True)
class Transfer:
    """Bytes moved by a commit or a download: sent or fetched, and kept (already in the
    store, or already in the working copy)."""

    moved: int = 0
    kept: int = 0

    def __add__(self, other: Transfer) -> Transfer:
        return Transfer(self.moved + other.moved, self.kept + other.kept)


def chunk_key(sha256: str, token: str = "") -> str:
    """The object of a chunk: `chunks/<sha256>.<token>` as the generation of `token`
    uploaded it, or `chunks/<sha256>` as manifests of format 2 named it."""
    return f"{CHUNKS}{sha256}.{token}" if token else f"{CHUNKS}{sha256}"


def _blocks(path: Path, size: int) -> Iterator[tuple[int, bytes]]:
    with path.open("rb") as source:
        offset = 0
        while block := source.read(size):
            yield offset, block
            offset += len(block)


def upload(
    store: ObjectStore, path: Path, named: MutableMapping[str, str], token: str
) -> tuple[tuple[Part, ...], Transfer]:
    """Cuts `path` into chunks: one in `named` (SHA-256 to the token of its key: the base
    generation's chunks, and those this commit uploaded) is named again, any other is
    uploaded as `chunk_key(sha256, token)` and added to `named`."""
    parts, transfer = [], Transfer()
    for offset, block in _blocks(path, CHUNK_SIZE):
        digest = hashlib.sha256(block).hexdigest()
        owner = named.get(digest)
        if owner is None:
            owner = named[digest] = token
            with suppress(AlreadyExistsError):  # a retried put whose first one landed
                obstore.put(store, chunk_key(digest, token), block, mode="create")
            transfer += Transfer(moved=len(block))
        else:
            transfer += Transfer(kept=len(block))
        parts.append(Part(chunk_key(digest, owner), offset, len(block), digest, owner))
    return tuple(parts), transfer


def download(store: ObjectStore, parts: tuple[Part, ...], target: Path, where: str) -> Transfer:
    """Makes `target` the file `parts` describe: each part's bytes are taken from
    `target` as it is where they still match, else fetched; `CorruptFileError` when a
    fetched part's bytes are not those the manifest names. Replaces `target` at once."""
    partial = target.with_name(f".{target.name}.download")
    try:
        with _existing(target) as old, partial.open("wb") as out:
            transfer = _assemble(store, parts, old, out, where)
            out.flush()
            os.fsync(out.fileno())
    except BaseException:
        partial.unlink(missing_ok=True)
        raise
    os.replace(partial, target)
    return transfer


def _assemble(
    store: ObjectStore, parts: tuple[Part, ...], old: BinaryIO | None, out: BinaryIO, where: str
) -> Transfer:
    transfer = Transfer()
    for part in parts:
        block = b""
        if old is not None:
            old.seek(part.offset)
            block = old.read(part.size)
        if len(block) == part.size and hashlib.sha256(block).hexdigest() == part.sha256:
            transfer += Transfer(kept=part.size)
        else:
            block = bytes(obstore.get(store, part.key).bytes())
            if hashlib.sha256(block).hexdigest() != part.sha256:
                raise CorruptFileError(
                    f"{where}/{part.key} does not hold the bytes its manifest names "
                    "(their SHA-256 differs); nothing was changed. Restore the object "
                    "from the store's versions."
                )
            transfer += Transfer(moved=part.size)
        out.write(block)
    return transfer


@contextmanager
def _existing(path: Path) -> Iterator[BinaryIO | None]:
    """`path` opened for reading, or None when there is no such file."""
    try:
        source = path.open("rb")
    except FileNotFoundError:
        yield None
        return
    with source:
        yield source
