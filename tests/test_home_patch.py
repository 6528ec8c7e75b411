"""A working copy one generation behind, patched in place against moto's S3 server on
loopback: which chunks it fetches (a table of the pure decision), the file byte for byte
the one a fresh copy downloads, a corrupt chunk that leaves the copy as it was and still
marked, a copy killed (kill -9) in the middle of its patch that the next download makes
right, and the file's lock that a publish's download takes before it patches. And the
fast digests saved beside the copy: which chunks a commit hashes with SHA-256 (those
whose digest is not the base's), and digests of another generation or unreadable
ignored."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import boto3
import pytest
from helpers import contents, store_home, working_copy

from hyper_assets._engine.resource import HyperResource
from hyper_assets._home.chunks import CHUNK_SIZE, Part, Transfer, fast_digest, lacking, reused
from hyper_assets._home.generations import (
    DIGESTS,
    DIGESTS_FILE,
    PATCH_BYTES,
    Digests,
    Generations,
    Manifest,
    StoredFile,
    WorkingCopy,
    patch_plan,
)
from hyper_assets._home.home import HomeSettings, HyperDatabase
from hyper_assets.errors import CorruptFileError, DatabaseLockedError

KEY = "extracts/shop.hyper"
DB = "shop.hyper"


def part(offset: int, sha: str, size: int = 10, token: str = "t1") -> Part:
    return Part(f"chunks/{sha}.{token}", offset, size, sha, token)


@pytest.mark.parametrize(
    ("held", "parts", "fetched"),
    [
        # the same chunks at the same places, whoever uploaded them: nothing
        ([("a", 0), ("b", 10)], [("a", 0), ("b", 10)], []),
        # one changed, one appended
        ([("a", 0), ("b", 10)], [("a", 0), ("c", 10), ("d", 20)], [("c", 10), ("d", 20)]),
        # bytes the copy has, but elsewhere: fetched (a patch writes chunks where they are)
        ([("a", 0), ("b", 10)], [("b", 0), ("a", 10)], [("b", 0), ("a", 10)]),
        # the file shrinks: the chunks it keeps are there
        ([("a", 0), ("b", 10), ("c", 20)], [("a", 0)], []),
        # nothing held (a new file)
        ([], [("a", 0), ("b", 10)], [("a", 0), ("b", 10)]),
    ],
)
def test_the_chunks_a_copy_lacks(held, parts, fetched):
    as_parts = lambda listed: tuple(part(o, s) for s, o in listed)  # noqa: E731
    assert lacking(as_parts(held), as_parts(parts)) == as_parts(fetched)


def test_a_chunk_of_another_size_or_generation_at_the_same_place():
    """A chunk's bytes are what its SHA-256 says: another generation's key holding them
    is kept; the same hash with another size is not."""
    assert lacking((part(0, "a", token="t1"),), (part(0, "a", token="t2"),)) == ()
    shorter = (part(0, "a", size=5),)
    assert lacking((part(0, "a"),), shorter) == shorter


def manifest(number: int, *files: StoredFile) -> Manifest:
    return Manifest(number, f"t{number}", "id", "lease", files, "2026-12-06T00:00:00+00:00")


def test_the_plan_of_a_patch():
    """Each file of the new generation with the chunks the copy lacks: all of them for a
    file the held generation lacks, or whose size on disk is not the held one's (a file
    changed behind the marker's back is not trusted); None past PATCH_BYTES."""
    a, b, c = part(0, "a"), part(10, "b"), part(10, "c")
    old = manifest(1, StoredFile(DB, 20, (a, b)), StoredFile("shop.hyper.x", 10, (a,)))
    db, side = StoredFile(DB, 20, (a, c)), StoredFile("shop.hyper.x", 10, (a,))
    new = StoredFile("shop.hyper.y", 10, (a,))
    two = manifest(2, db, side, new)
    sizes = {DB: 20, "shop.hyper.x": 10}
    assert patch_plan(old, two, sizes) == [(db, (c,)), (side, ()), (new, (a,))]
    assert patch_plan(old, two, {DB: 25, "shop.hyper.x": 10}) == [
        (db, (a, c)),
        (side, ()),
        (new, (a,)),
    ]
    big = part(0, "big", size=PATCH_BYTES + 1)
    assert patch_plan(old, manifest(2, StoredFile(DB, big.size, (big,))), sizes) is None


def chunked(*seeds: int, tail: bytes = b"") -> bytes:
    """Whole chunks of seeded bytes (so that equal seeds make equal chunks), and `tail`."""
    return b"".join(seed.to_bytes(4, "big") * (CHUNK_SIZE // 4) for seed in seeds) + tail


@pytest.fixture
def home(bucket: str) -> Generations:
    located = store_home(bucket)
    return Generations(located.connect(), located.uri, located.name)


def behind_and_fresh(
    home: Generations, tmp_path: Path, one: dict[str, bytes], two: dict[str, bytes]
) -> tuple[WorkingCopy, Manifest, Manifest]:
    """Generations 1 and 2 of `one` and `two`'s files, and a copy holding generation 1."""
    first = home.commit(None, working_copy(tmp_path / "w1", **one), "lease")
    second = home.commit(first, working_copy(tmp_path / "w2", **two), "lease")
    behind = working_copy(tmp_path / "behind")
    home.download(first, behind)
    return behind, first, second


@pytest.mark.parametrize(
    ("one", "two", "moved", "kept"),
    [
        # a chunk changed in place, one appended, a short tail grown; a side file replaced
        (
            {DB: chunked(1, 2, 3, 4, tail=b"end"), "shop.hyper.deletions.json": b"{}"},
            {DB: chunked(1, 9, 3, 4, 5, tail=b"longer end"), "shop.hyper.identity.json": b"[]"},
            2 * CHUNK_SIZE + len(b"longer end") + 2,
            3 * CHUNK_SIZE,
        ),
        # the file shrinks (as after a compaction) and loses its side file
        (
            {DB: chunked(1, 2, 3, 4, 5), "shop.hyper.deletions.json": b"{}"},
            {DB: chunked(1, 2)},
            0,
            2 * CHUNK_SIZE,
        ),
        # in the outbox's folder: one file grown, one gone, one new
        (
            {
                DB: chunked(1),
                "shop.hyper.outbox/1.json": b"1",
                "shop.hyper.outbox/2.json": chunked(2),
            },
            {
                DB: chunked(1),
                "shop.hyper.outbox/2.json": chunked(2, tail=b"+"),
                "shop.hyper.outbox/3.json": b"3",
            },
            2,
            2 * CHUNK_SIZE,
        ),
        # the outbox's folder new
        ({DB: chunked(1)}, {DB: chunked(1), "shop.hyper.outbox/1.json": b"1"}, 1, CHUNK_SIZE),
    ],
)
def test_a_copy_behind_is_patched_in_place_to_the_bytes_a_fresh_copy_downloads(
    home, tmp_path, one, two, moved, kept
):
    behind, _, second = behind_and_fresh(home, tmp_path, one, two)
    inode = (behind.directory / DB).stat().st_ino
    # only the chunks generation 1 lacks at their place: the unchanged ones are not read
    assert home.download(second, behind) == Transfer(moved=moved, kept=kept)
    assert contents(behind) == two
    assert (behind.directory / DB).stat().st_ino == inode  # written in place
    assert behind.held() == second
    fresh = working_copy(tmp_path / "fresh")
    home.download(second, fresh)
    assert contents(fresh) == contents(behind)
    assert home.download(second, behind) is None


def test_a_copy_whose_marker_is_missing_is_checked_chunk_by_chunk(home, tmp_path):
    """A copy a write changed (no marker) is hashed and written anew, as before, reusing
    what matches."""
    behind, _, second = behind_and_fresh(
        home, tmp_path, {DB: chunked(1, 2, 3)}, {DB: chunked(1, 2, 7)}
    )
    behind.changing()
    inode = (behind.directory / DB).stat().st_ino
    assert home.download(second, behind) == Transfer(moved=CHUNK_SIZE, kept=2 * CHUNK_SIZE)
    assert contents(behind) == {DB: chunked(1, 2, 7)}
    assert (behind.directory / DB).stat().st_ino != inode  # replaced whole


def test_a_held_manifest_that_is_not_the_markers_is_not_trusted(home, tmp_path):
    behind, first, second = behind_and_fresh(
        home, tmp_path, {DB: chunked(1, 2, 3)}, {DB: chunked(1, 2, 7)}
    )
    held = behind.directory / ".generation.manifest.json"
    held.write_bytes(second.to_bytes())  # as a crash between its write and the marker's
    assert behind.held() is None
    inode = (behind.directory / DB).stat().st_ino
    assert home.download(second, behind) == Transfer(moved=CHUNK_SIZE, kept=2 * CHUNK_SIZE)
    assert contents(behind) == {DB: chunked(1, 2, 7)}  # not taken for generation 2 as it was
    assert (behind.directory / DB).stat().st_ino != inode  # checked and written anew
    behind.changing()
    home.download(first, behind)
    held.write_text("{not json")
    assert behind.held() is None
    assert home.download(second, behind) == Transfer(moved=CHUNK_SIZE, kept=2 * CHUNK_SIZE)
    assert contents(behind) == {DB: chunked(1, 2, 7)} and behind.held() == second


@pytest.mark.parametrize(
    ("why", "moved", "kept"),
    [
        # checked chunk by chunk and written anew: the chunk changed is fetched
        ("lacking more than PATCH_BYTES", 3 * CHUNK_SIZE, 2 * CHUNK_SIZE),
        # the file's chunks are not taken from the held manifest: all fetched, in place
        ("of another size than held", 5 * CHUNK_SIZE, 0),
    ],
)
def test_a_copy_that_is_not_patched_from_the_manifests_gets_the_generations_bytes(
    home, tmp_path, monkeypatch, why, moved, kept
):
    """A copy lacking more than PATCH_BYTES (lowered here to one chunk), or whose file's
    size on disk is not the held manifest's, is not patched from the two manifests: a
    chunk changed behind its marker's back (which a patch from them would keep) is made
    right, and the copy is the store's generation byte for byte."""
    behind, _, second = behind_and_fresh(
        home, tmp_path, {DB: chunked(1, 2, 3, 4)}, {DB: chunked(1, 5, 3, 4, 6)}
    )
    with (behind.directory / DB).open("r+b") as changed:  # behind the marker's back
        changed.write(chunked(8))
        if why == "of another size than held":
            changed.seek(0, os.SEEK_END)
            changed.write(b"more")
        else:
            monkeypatch.setattr("hyper_assets._home.generations.PATCH_BYTES", CHUNK_SIZE)
    transfer = home.download(second, behind)
    assert contents(behind) == {DB: chunked(1, 5, 3, 4, 6)} and behind.held() == second
    assert transfer == Transfer(moved=moved, kept=kept)


@pytest.mark.parametrize("corrupt", [0, -1], ids=["first", "last"])
def test_a_corrupt_chunk_leaves_the_copy_as_it_was_and_marked(bucket, home, tmp_path, corrupt):
    """Whichever chunk the copy lacks is corrupt, the first (in the database) or the last
    (in the last file): every chunk is fetched and checked before any file is written."""
    one = {DB: chunked(1, 2, 3), "shop.hyper.deletions.json": b"{}"}
    two = {DB: chunked(1, 8, 9), "shop.hyper.outbox/1.json": chunked(5)}
    behind, first, second = behind_and_fresh(home, tmp_path, one, two)
    new = [p for f in second.files for p in f.parts if p.token == second.token][corrupt]
    boto3.client("s3").put_object(Bucket=bucket, Key=f"{KEY}/{new.key}", Body=b"x" * new.size)
    with pytest.raises(CorruptFileError, match="SHA-256"):
        home.download(second, behind)
    assert contents(behind) == one
    assert behind.held() == first
    assert not list(behind.directory.glob(".*.download"))


CRASH = """
import os, signal, sys
from pathlib import Path
from hyper_assets._home.generations import Generations, WorkingCopy
from hyper_assets._home.home import parse_home

home = parse_home(sys.argv[1])
generations = Generations(home.connect(), home.uri, home.name)
working = WorkingCopy(Path(sys.argv[2]), home.name)
database = working.database.resolve()
write = os.pwrite

def pwrite_then_die(fd, data, offset):
    written = write(fd, data, offset)
    if os.readlink(f"/proc/self/fd/{fd}") == str(database):
        os.kill(os.getpid(), signal.SIGKILL)  # after the patch's first chunk
    return written

os.pwrite = pwrite_then_die
generations.download(generations.current(), working)
"""


def test_a_copy_killed_in_the_middle_of_its_patch_is_made_right_by_the_next_download(
    bucket, home, tmp_path
):
    """kill -9 of a process after it wrote the first of its patch's chunks: the copy is
    marked no generation, and the next download checks it and makes it the generation."""
    behind, _, second = behind_and_fresh(
        home, tmp_path, {DB: chunked(1, 2, 3, 4)}, {DB: chunked(1, 5, 3, 6, 7)}
    )
    crash = [sys.executable, "-c", textwrap.dedent(CRASH), home.where, str(behind.directory)]
    killed = subprocess.run(crash, env=os.environ, capture_output=True, text=True, timeout=120)
    assert killed.returncode == -9, killed.stderr
    assert behind.generation() is None and behind.held() is None
    on_disk = (behind.directory / DB).read_bytes()
    assert on_disk != chunked(1, 2, 3, 4) and on_disk != chunked(1, 5, 3, 6, 7)  # half done

    again = home.download(second, behind)
    assert contents(behind) == {DB: chunked(1, 5, 3, 6, 7)} and behind.held() == second
    assert again is not None and again.moved < 3 * CHUNK_SIZE  # the chunk written is kept


def test_a_publishs_download_takes_the_files_lock(bucket, home, tmp_path):
    """The publish's working copy is patched only under its lock, which a connection to
    it holds: while another holds it, the publish waits, then fails, having changed
    nothing."""
    home.commit(None, working_copy(tmp_path / "w1", **{DB: chunked(1)}), "lease")
    database = HyperDatabase(
        database=store_home(bucket).uri,
        hyper=HyperResource(lock_timeout_seconds=0.3),
        settings=HomeSettings(working_dir=str(tmp_path / "work")),
    )
    copy = tmp_path / "work" / "publishing" / DB
    with HyperResource().lock(copy), pytest.raises(DatabaseLockedError), database.publishing():
        pass
    assert not copy.exists()
    with database.publishing() as (path, _):
        assert path.read_bytes() == chunked(1)


# The fast digests beside the copy: a commit compares each chunk with the base's by them.


@pytest.mark.parametrize(
    ("known", "size", "fast", "named"),
    [
        ((part(0, "a"), "f1"), 10, "f1", True),  # the base's bytes: named again
        ((part(0, "a"), "f1"), 10, "f2", False),  # changed: hashed
        ((part(0, "a"), "f1"), 7, "f1", False),  # another size (a shorter last chunk)
        (None, 10, "f1", False),  # no digest of the base's there (a new chunk, none saved)
        # a whole file of manifest format 1, of one chunk's size: hashed (uploaded as a chunk)
        ((Part("generations/1-t/shop.hyper", 0, 10, "a"), "f1"), 10, "f1", False),
    ],
)
def test_a_chunk_is_the_base_generations_when_its_fast_digest_is(known, size, fast, named):
    assert reused(known, size, fast) == (known[0] if named else None)


def digests_hold(working: WorkingCopy, generation: Manifest) -> None:
    """The copy's saved digests are of every chunk of `generation`'s files, each that of
    the bytes there (the copy holds `generation`)."""
    saved = working.digests(generation)
    assert set(saved) == {f.path for f in generation.files}
    for path, parts in saved.items():
        body = (working.directory / path).read_bytes()
        assert [d for _, d in parts] == [
            fast_digest(body[p.offset : p.offset + p.size]) for p, _ in parts
        ]


def sha256_calls(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Records the size of each block `hyper_assets._home.chunks` hashes with SHA-256."""
    import hashlib
    import types

    from hyper_assets._home import chunks

    calls: list[int] = []

    def sha256(block: bytes = b""):
        calls.append(len(block))
        return hashlib.sha256(block)

    monkeypatch.setattr(chunks, "hashlib", types.SimpleNamespace(sha256=sha256))
    return calls


def test_a_commit_hashes_only_the_chunks_whose_fast_digest_changed(home, tmp_path, monkeypatch):
    """After a commit, a download and a patch the copy's digests are those of its
    chunks; the next commit names again the chunks whose digest is the base's, without
    SHA-256, and uploads exactly the changed ones, and a fresh copy gets the bytes."""
    hashed = sha256_calls(monkeypatch)
    writer = working_copy(tmp_path / "w", **{DB: chunked(1, 2, 3, 4)})
    one = home.commit(None, writer, "lease")
    digests_hold(writer, one)
    cold = working_copy(tmp_path / "cold")
    home.download(one, cold)
    digests_hold(cold, one)

    (writer.directory / DB).write_bytes(chunked(1, 5, 3, 4, 6))
    hashed.clear()
    two = home.commit(one, writer, "lease")
    assert home.sent == Transfer(moved=2 * CHUNK_SIZE, kept=3 * CHUNK_SIZE)
    assert hashed == [CHUNK_SIZE, CHUNK_SIZE]  # the changed chunk and the new one alone
    kept = [p for p in two.files[0].parts if p.token == one.token]
    assert [p.offset for p in kept] == [0, 2 * CHUNK_SIZE, 3 * CHUNK_SIZE]
    home.download(two, cold)  # patched: its digests are the kept ones and the fetched
    digests_hold(cold, two)

    (cold.directory / DB).write_bytes(chunked(7, 5, 3, 4, 6))
    hashed.clear()
    three = home.commit(two, cold, "lease")
    assert home.sent == Transfer(moved=CHUNK_SIZE, kept=4 * CHUNK_SIZE)
    assert hashed == [CHUNK_SIZE]  # digests the patch saved: kept ones and fetched ones
    fresh = working_copy(tmp_path / "fresh")
    home.download(three, fresh)
    assert contents(fresh) == {DB: chunked(7, 5, 3, 4, 6)}


def lie(working: WorkingCopy, generation: Manifest, first: bytes, number: int, token: str) -> None:
    """Saves digests of generation `number` (`token`) that say the first chunk of
    `generation`'s file holds `first`."""
    parts = generation.files[0].parts
    fast = (fast_digest(first), *(d for _, d in working.digests(generation)[DB][1:]))
    DIGESTS.write(working.directory / DIGESTS_FILE, Digests(number, token, ((DB, fast),)))
    assert len(fast) == len(parts)


@pytest.mark.parametrize("saved", ["lying", "of another token", "of another number", "corrupt"])
def test_the_digests_are_trusted_for_their_generation_alone(home, tmp_path, monkeypatch, saved):
    """The saved digests are what the commit goes by, not SHA-256: digests that lie
    about the base's first chunk make the commit name the base's chunk there (shown here
    to prove that the chunk was not hashed). The same digests saved for another token,
    for the base's token but another number (a forged file: both halves are checked),
    or a file that cannot be read, are ignored: every chunk is hashed."""
    hashed = sha256_calls(monkeypatch)
    writer = working_copy(tmp_path / "w", **{DB: chunked(1, 2, 3)})
    one = home.commit(None, writer, "lease")
    (writer.directory / DB).write_bytes(chunked(9, 2, 3))
    number = 2 if saved == "of another number" else one.number
    lie(writer, one, chunked(9), number, "another" if saved == "of another token" else one.token)
    if saved == "corrupt":
        (writer.directory / DIGESTS_FILE).write_text('{"format_version": 1, "number"')
    hashed.clear()
    committed = home.commit(one, writer, "lease")
    if saved == "lying":
        assert committed == one and hashed == []  # every chunk taken for the base's
        return
    assert hashed == [CHUNK_SIZE] * 3
    assert home.sent == Transfer(moved=CHUNK_SIZE, kept=2 * CHUNK_SIZE)
    fresh = working_copy(tmp_path / "fresh")
    home.download(committed, fresh)
    assert contents(fresh) == {DB: chunked(9, 2, 3)}
    digests_hold(writer, committed)  # saved anew for the generation committed


@pytest.mark.parametrize("name", [".generation.json", ".generation.manifest.json", DIGESTS_FILE])
def test_a_file_beside_the_copy_damaged_to_bytes_that_are_not_text_is_unknown(tmp_path, name):
    """A crash can leave any bytes in a file written without waiting for the disk: ones
    that are not UTF-8 make the copy of unknown content, not an error for every run."""
    working = working_copy(tmp_path / "w", **{DB: chunked(1)})
    one = manifest(1, StoredFile(DB, CHUNK_SIZE, (part(0, "a", size=CHUNK_SIZE),)))
    working.mark(one, {DB: (fast_digest(chunked(1)),)})
    assert working.held() == one and working.digests(one)
    (working.directory / name).write_bytes(b"\xff\xfe\x80 not text")
    if name == DIGESTS_FILE:
        assert working.digests(one) == {} and working.held() == one
    else:
        assert working.held() is None
