"""A file in an object store as content-addressed chunks.

Hyper changes a file in place, block by block: a one-day replace rewrites a few
megabytes of a file of hundreds (docs/performance.md, "The extract's home"). A file is
cut into fixed-size chunks. A commit names again the chunks of its base generation whose
bytes it still holds, and uploads each other chunk once as `chunks/<sha256>.<token>`, a
key of the new generation's own (`token` is its manifest's): never a chunk the store
holds for another reason, which a collector that listed the home before may be deleting
(`hyper_assets._home.collect`). An object never changes. A download into a copy of
unknown content copies from it every chunk whose bytes it still holds at the same place
(hashing each), fetches the others, and writes the file anew; a copy known to hold an
earlier generation is patched: only the chunks that generation lacks at their place
(`lacking`) are fetched, and written at their offsets (`patch`). Every fetched chunk's
hash is checked.

Each chunk is one request, and a store answers each after tens of milliseconds: one at a
time, a 10 GB file's 40,000 chunks would wait 20 minutes. Both directions therefore work
on up to `concurrency` chunks at once, in as many threads, each of which reads, hashes
and puts (or gets, checks and writes) a chunk at its offset, so hashing does not wait on
the store either. A transfer returns only once every chunk is done, and when one fails, the
chunks not yet started are dropped and those under way finish before the error is
raised: nothing still writes after it. Concurrency 1 is the same code, one chunk at a
time.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import threading
from collections.abc import Callable, Iterable, Iterator, Mapping, MutableMapping
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO, TypeVar

import obstore
import xxhash
from obstore.exceptions import AlreadyExistsError
from obstore.store import ObjectStore

from hyper_assets._base.files import file_mode
from hyper_assets.errors import CorruptFileError

CHUNKS = "chunks/"
CHUNK_SIZE = 256 << 10
#: Chunks a transfer has in flight at once (`HomeSettings.transfer_concurrency`).
CONCURRENCY = 16
T = TypeVar("T")
R = TypeVar("R")


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


def upload(
    store: ObjectStore,
    path: Path,
    named: MutableMapping[str, str],
    token: str,
    concurrency: int = CONCURRENCY,
    known: Iterable[tuple[Part, str]] = (),
) -> tuple[tuple[Part, ...], Transfer, tuple[str, ...]]:
    """Cuts `path` into chunks: one whose fast digest is that of the part of `known`
    (the base generation's parts of this file, each with its fast digest) at its offset
    is that part (`reused`), without SHA-256; any other is hashed, and one in `named`
    (SHA-256 to the token of its key: the base generation's chunks, and those this
    commit uploaded) is named again, any other uploaded as `chunk_key(sha256, token)`
    and added to `named`. Returns once every chunk it names is in the store, with each
    chunk's fast digest."""
    claim = threading.Lock()  # one upload per new SHA-256, however many chunks hold it
    by_offset = {part.offset: (part, fast) for part, fast in known}
    with path.open("rb") as source:

        def send(offset: int) -> tuple[Part, Transfer, str]:
            block = os.pread(source.fileno(), CHUNK_SIZE, offset)
            fast = fast_digest(block)
            same = reused(by_offset.get(offset), len(block), fast)
            if same is not None:
                return same, Transfer(kept=len(block)), fast
            digest = hashlib.sha256(block).hexdigest()
            with claim:
                new = digest not in named
                owner = named.setdefault(digest, token)
            if new:
                with suppress(AlreadyExistsError):  # a retried put whose first one landed
                    obstore.put(store, chunk_key(digest, token), block, mode="create")
            transfer = Transfer(moved=len(block)) if new else Transfer(kept=len(block))
            part = Part(chunk_key(digest, owner), offset, len(block), digest, owner)
            return part, transfer, fast

        size = os.fstat(source.fileno()).st_size
        sent = _each(concurrency, send, range(0, size, CHUNK_SIZE))
    parts = tuple(p for p, _, _ in sent)
    return parts, sum((t for _, t, _ in sent), Transfer()), tuple(f for _, _, f in sent)


def fast_digest(block: bytes) -> str:
    """A chunk's fast digest (XXH3, 128 bits): not cryptographic, but ten times faster than
    SHA-256, and as unlikely to match another chunk's bytes by chance."""
    return xxhash.xxh3_128_hexdigest(block)


def reused(known: tuple[Part, str] | None, size: int, fast: str) -> Part | None:
    """The base generation's part `known` (with its fast digest) at a chunk's offset, when
    the chunk, of `size` bytes and fast digest `fast`, holds its bytes; else None. Never a
    whole file of a manifest of format 1, which a chunk cannot name."""
    if known is None:
        return None
    part, digest = known
    chunk = part.key.startswith(CHUNKS)
    return part if chunk and part.size == size and digest == fast else None


def download(
    store: ObjectStore,
    parts: tuple[Part, ...],
    target: Path,
    where: str,
    concurrency: int = CONCURRENCY,
) -> tuple[Transfer, tuple[str, ...]]:
    """Makes `target` the file `parts` describe: each part's bytes are taken from
    `target` as it is where they still match, else fetched; `CorruptFileError` when a
    fetched part's bytes are not those the manifest names. Replaces `target` at once.
    Returns the bytes moved and each part's fast digest."""
    partial = target.with_name(f".{target.name}.download")
    try:
        with _existing(target) as old, partial.open("wb") as out:

            def place(part: Part) -> tuple[Transfer, str]:
                block = os.pread(old.fileno(), part.size, part.offset) if old else b""
                if len(block) == part.size and hashlib.sha256(block).hexdigest() == part.sha256:
                    transfer = Transfer(kept=part.size)
                else:
                    block = _get(store, part, where)
                    transfer = Transfer(moved=part.size)
                os.pwrite(out.fileno(), block, part.offset)
                return transfer, fast_digest(block)

            placed = _each(concurrency, place, parts)
            os.fsync(out.fileno())
    except BaseException:
        partial.unlink(missing_ok=True)
        raise
    os.replace(partial, target)
    return sum((t for t, _ in placed), Transfer()), tuple(f for _, f in placed)


def lacking(held: tuple[Part, ...], parts: tuple[Part, ...]) -> tuple[Part, ...]:
    """The parts of `parts` that a file made of `held` lacks: all but those `held` has
    at the same offset, of the same size and SHA-256 (whatever their keys: a chunk's
    bytes are what its hash says)."""
    there = {(p.offset, p.size, p.sha256) for p in held}
    return tuple(p for p in parts if (p.offset, p.size, p.sha256) not in there)


def fetch(
    store: ObjectStore, parts: tuple[Part, ...], where: str, concurrency: int = CONCURRENCY
) -> list[bytes]:
    """The bytes of each of `parts`, in their order, each checked against its SHA-256
    (`CorruptFileError` otherwise); up to `concurrency` fetched at once."""
    return _each(concurrency, lambda part: _get(store, part, where), parts)


def patch(target: Path, size: int, blocks: Mapping[int, bytes], *, in_place: bool) -> None:
    """Makes `target` (none: an empty file) `size` bytes long, with each of `blocks`
    written at its offset and every other byte kept, and durable. `in_place`: written
    into `target` itself (for a caller that holds the file's lock and has made the copy
    no generation: a crash leaves a file that is downloaded again); else into a copy of
    it that then replaces it at once."""
    if in_place:
        _write_blocks(target, size, blocks)
        return
    partial = target.with_name(f".{target.name}.download")
    try:
        if target.exists():
            shutil.copyfile(target, partial)
        _write_blocks(partial, size, blocks)
    except BaseException:
        partial.unlink(missing_ok=True)
        raise
    os.replace(partial, target)


def _write_blocks(path: Path, size: int, blocks: Mapping[int, bytes]) -> None:
    descriptor = os.open(path, os.O_RDWR | os.O_CREAT, file_mode())
    try:
        os.ftruncate(descriptor, size)
        for offset, block in blocks.items():
            os.pwrite(descriptor, block, offset)
        os.fsync(descriptor)
    finally:
        os.close(descriptor)


def _get(store: ObjectStore, part: Part, where: str) -> bytes:
    """The bytes of `part`, fetched; `CorruptFileError` when they are not those the
    manifest names."""
    block = bytes(obstore.get(store, part.key).bytes())
    if len(block) != part.size or hashlib.sha256(block).hexdigest() != part.sha256:
        raise CorruptFileError(
            f"{where}/{part.key} does not hold the bytes its manifest names "
            "(their SHA-256 differs); nothing was changed. Restore the "
            "object from the store's versions."
        )
    return block


def _each(concurrency: int, work: Callable[[T], R], items: Iterable[T]) -> list[R]:
    """`work` of each of `items`, in their order, up to `concurrency` at once. When one
    raises, those not started are dropped, and those under way are waited for before its
    error is raised."""
    pool = ThreadPoolExecutor(concurrency, thread_name_prefix="hyper-chunks")
    try:
        return list(pool.map(work, items))
    finally:
        pool.shutdown(cancel_futures=True)


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
