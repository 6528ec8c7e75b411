"""Generations as content-addressed chunks, against moto's S3 server on loopback: a commit
uploads only the chunks its base lacks, a download fetches only the chunks the working
copy lacks and checks them, manifests of formats 1 (whole files) and 2 (chunks shared by
every generation) are still read and unknown ones refused, and old generations and
orphans are deleted (format 2's shared chunks once no kept generation names them) while
every kept generation stays whole."""

from __future__ import annotations

import hashlib
import json
import time
from datetime import date
from pathlib import Path

import boto3
import pyarrow as pa
import pytest
from dagster import DailyPartitionsDefinition, asset, materialize
from helpers import contents, query, store_home, working_copy

from hyper_assets import HyperIOManager
from hyper_assets._home.chunks import CHUNK_SIZE, Transfer, chunk_key
from hyper_assets._home.collect import collect
from hyper_assets._home.generations import Generations, WorkingCopy
from hyper_assets._home.home import HomeSettings, HyperDatabase
from hyper_assets.errors import CorruptFileError, UnknownFormatVersionError

KEY = "extracts/shop.hyper"


def random_bytes(size: int, seed: int) -> bytes:
    return b"".join(hashlib.sha256(f"{seed}-{n}".encode()).digest() for n in range(size // 32))


def stored(bucket: str) -> dict[str, int]:
    listed = boto3.client("s3").list_objects_v2(Bucket=bucket, Prefix=KEY + "/")
    return {o["Key"].removeprefix(KEY + "/"): o["Size"] for o in listed.get("Contents", [])}


def test_a_commit_uploads_only_the_chunks_its_base_lacks(bucket, tmp_path):
    home = store_home(bucket)
    generations = Generations(home.connect(), home.uri, home.name)
    body = bytearray(random_bytes(8 * CHUNK_SIZE, seed=1))
    copy = working_copy(tmp_path / "a", **{"shop.hyper": bytes(body)})
    one = generations.commit(None, copy, "lease")
    assert generations.sent == Transfer(moved=len(body))
    before = stored(bucket)
    body[3 * CHUNK_SIZE + 17] ^= 0xFF  # a block changed in place, as Hyper writes
    (copy.directory / "shop.hyper").write_bytes(bytes(body))
    two = generations.commit(one, copy, "lease")
    added = {k: n for k, n in stored(bucket).items() if k not in before}
    chunk = chunk_key(hashlib.sha256(body[3 * CHUNK_SIZE : 4 * CHUNK_SIZE]).hexdigest(), two.token)
    assert set(added) == {chunk, "manifest/00000000000000000002.json"}
    assert added[chunk] == CHUNK_SIZE == generations.sent.moved
    assert generations.sent.kept == 7 * CHUNK_SIZE

    # A copy one generation behind fetches the changed chunk only, and checks every chunk.
    behind = WorkingCopy(tmp_path / "b", "shop.hyper")
    (tmp_path / "b").mkdir()
    assert generations.download(one, behind) == Transfer(moved=8 * CHUNK_SIZE)
    assert generations.download(two, behind) == Transfer(moved=CHUNK_SIZE, kept=7 * CHUNK_SIZE)
    assert contents(behind) == {"shop.hyper": bytes(body)}

    # A chunk whose bytes are not those its name says is refused, the copy left unmarked.
    boto3.client("s3").put_object(Bucket=bucket, Key=f"{KEY}/{chunk}", Body=b"x" * CHUNK_SIZE)
    cold = WorkingCopy(tmp_path / "c", "shop.hyper")
    (tmp_path / "c").mkdir()
    with pytest.raises(CorruptFileError, match="SHA-256"):
        generations.download(two, cold)
    assert cold.generation() is None and not (tmp_path / "c" / "shop.hyper").exists()
    assert not list((tmp_path / "c").glob(".*.download"))  # no partial file left


def test_generations_written_as_whole_files_are_still_read(bucket, tmp_path, hyper):
    """A home committed by the previous version (manifest format 1: one object per file
    under generations/) is read, and the next write commits it as chunks."""
    local = tmp_path / "old" / "shop.hyper"
    writer = HyperIOManager(database=str(local))
    assert materialize(
        [sales], partition_key="2024-01-01", resources={"io_manager": writer}
    ).success
    body = local.read_bytes()
    s3 = boto3.client("s3")
    s3.put_object(Bucket=bucket, Key=f"{KEY}/generations/1-abc/shop.hyper", Body=body)
    manifest = {
        "format": 1,
        "number": 1,
        "token": "abc",
        "extract_id": "e1",
        "lease_id": "old",
        "files": [
            {
                "path": "shop.hyper",
                "key": "generations/1-abc/shop.hyper",
                "size": len(body),
                "sha256": hashlib.sha256(body).hexdigest(),
            }
        ],
        "committed_at": "2026-01-01T00:00:00+00:00",
    }
    uri, _ = _write_after_old_manifest(s3, bucket, manifest, tmp_path)
    current = Generations(store_home(bucket).connect(), uri, "shop.hyper").current()
    assert current is not None and current.number == 2 and current.extract_id == "e1"
    assert all(p.key.startswith("chunks/") for f in current.files for p in f.parts)
    assert read_days(hyper, uri, tmp_path / "r") == [["2024-01-01", 3], ["2024-01-02", 3]]


def test_generations_of_shared_chunks_are_still_read_and_unknown_formats_refused(
    bucket, tmp_path, hyper
):
    """A home committed by the previous version (manifest format 2: chunks under their
    SHA-256 alone) is read, and the next write names again the chunks it keeps and
    uploads the others under keys of its own generation. A manifest of a format this
    library does not know is refused, and nothing is written."""
    local = tmp_path / "old" / "shop.hyper"
    writer = HyperIOManager(database=str(local))
    assert materialize(
        [sales], partition_key="2024-01-01", resources={"io_manager": writer}
    ).success
    body, s3, chunks = local.read_bytes(), boto3.client("s3"), []
    for offset in range(0, len(body), CHUNK_SIZE):
        block = body[offset : offset + CHUNK_SIZE]
        digest = hashlib.sha256(block).hexdigest()
        s3.put_object(Bucket=bucket, Key=f"{KEY}/chunks/{digest}", Body=block)
        chunks.append({"sha256": digest, "size": len(block)})
    manifest = {
        "format": 2,
        "number": 1,
        "token": "abc",
        "extract_id": "e2",
        "lease_id": "old",
        "files": [{"path": "shop.hyper", "size": len(body), "chunks": chunks}],
        "committed_at": "2026-01-01T00:00:00+00:00",
    }
    uri, home = _write_after_old_manifest(s3, bucket, manifest, tmp_path)
    generations = Generations(store_home(bucket).connect(), uri, "shop.hyper")
    current = generations.current()
    assert current is not None and (current.number, current.extract_id) == (2, "e2")
    shared = {f"chunks/{c['sha256']}" for c in chunks}
    own = {p.key for f in current.files for p in f.parts} - shared
    assert own and all(k.startswith("chunks/") and k.endswith(f".{current.token}") for k in own)
    assert read_days(hyper, uri, tmp_path / "r") == [["2024-01-01", 3], ["2024-01-02", 3]]

    newer = {**manifest, "format": 99, "number": 3}
    s3.put_object(
        Bucket=bucket, Key=f"{KEY}/manifest/{3:020d}.json", Body=json.dumps(newer).encode()
    )
    with pytest.raises(UnknownFormatVersionError, match=rf"{3:020d}\.json has format version 99"):
        generations.current()
    with pytest.raises(UnknownFormatVersionError):
        materialize([sales], partition_key="2024-01-03", resources={"io_manager": home})
    assert generations.numbers() == [1, 2, 3]


def test_old_generations_and_orphans_are_deleted_and_kept_ones_stay_whole(bucket, tmp_path):
    home = store_home(bucket)
    generations = Generations(home.connect(), home.uri, home.name)
    copy = working_copy(tmp_path / "a")
    manifests = []
    for n in range(4):  # each generation shares chunk 0 and has a chunk of its own
        body = random_bytes(CHUNK_SIZE, seed=0) + random_bytes(CHUNK_SIZE, seed=10 + n)
        (copy.directory / "shop.hyper").write_bytes(body)
        manifests.append(generations.commit(manifests[-1] if manifests else None, copy, "l"))
    orphan = random_bytes(CHUNK_SIZE, seed=99)  # a killed writer's upload
    orphan_key = f"chunks/{hashlib.sha256(orphan).hexdigest()}"
    boto3.client("s3").put_object(Bucket=bucket, Key=f"{KEY}/{orphan_key}", Body=orphan)
    shared = manifests[0].files[0].parts[0].key

    # Within the grace time nothing goes: a reader may still download generation 1.
    assert collect(generations, keep=2, grace_seconds=3600).deleted_objects == 0
    time.sleep(1.1)  # the store's clock counts whole seconds
    done = collect(generations, keep=2, grace_seconds=0)
    assert done.kept_generations == (3, 4)
    own = [m.files[0].parts[1].key for m in manifests]
    left = set(stored(bucket))
    assert {own[0], own[1], orphan_key}.isdisjoint(left)
    assert {shared, own[2], own[3]} <= left
    assert done.deleted_objects == 3 and done.deleted_bytes == 3 * CHUNK_SIZE
    assert sum(k.startswith("manifest/") for k in left) == 4  # manifests are never deleted
    for kept in manifests[2:]:
        fresh = WorkingCopy(tmp_path / f"fresh{kept.number}", "shop.hyper")
        fresh.directory.mkdir()
        generations.download(kept, fresh)
        assert contents(fresh)["shop.hyper"][CHUNK_SIZE:] == random_bytes(
            CHUNK_SIZE, seed=10 + kept.number - 1
        )


def test_shared_chunks_of_format_2_are_kept_while_named_and_deleted_after(bucket, tmp_path):
    """A generation of format 2 names shared chunks a and b; the next names a again and
    uploads c under a key of its own. Collecting all but the newest deletes b, which only
    generation 1 named, and an older version's orphan whole file, and keeps a."""
    s3, records = boto3.client("s3"), []
    a, b, c = (random_bytes(CHUNK_SIZE, seed=s) for s in (1, 2, 3))
    for block in (a, b):
        digest = hashlib.sha256(block).hexdigest()
        s3.put_object(Bucket=bucket, Key=f"{KEY}/{chunk_key(digest)}", Body=block)
        records.append({"sha256": digest, "size": len(block)})
    s3.put_object(Bucket=bucket, Key=f"{KEY}/generations/0-x/shop.hyper", Body=b"old")
    manifest = {
        "format": 2,
        "number": 1,
        "token": "abc",
        "extract_id": "e",
        "lease_id": "l",
        "files": [{"path": "shop.hyper", "size": 2 * CHUNK_SIZE, "chunks": records}],
        "committed_at": "2026-01-01T00:00:00+00:00",
    }
    s3.put_object(Bucket=bucket, Key=f"{KEY}/manifest/{1:020d}.json", Body=json.dumps(manifest))
    home = store_home(bucket)
    generations = Generations(home.connect(), home.uri, home.name)
    copy = working_copy(tmp_path / "w", **{"shop.hyper": a + c})
    two = generations.commit(generations.read(1), copy, "l")
    shared, own = (p.key for p in two.files[0].parts)
    assert shared == chunk_key(records[0]["sha256"]) and own.endswith(f".{two.token}")

    time.sleep(1.1)  # the store's clock counts whole seconds
    done = collect(generations, keep=1, grace_seconds=0)
    left = set(stored(bucket))
    assert done.deleted_objects == 2 and {shared, own} <= left
    assert {chunk_key(records[1]["sha256"]), "generations/0-x/shop.hyper"}.isdisjoint(left)
    cold = WorkingCopy(tmp_path / "cold", "shop.hyper")
    cold.directory.mkdir()
    generations.download(generations.current(), cold)
    assert contents(cold) == {"shop.hyper": a + c}
    assert generations.commit(two, cold, "l") == two  # unchanged: nothing committed


def test_a_writer_deletes_generations_beyond_the_ones_it_keeps(bucket, tmp_path, hyper):
    uri = f"s3://{bucket}/{KEY}"
    # A lease of 5 s: one of 1 s expired mid-write on a machine at a load of 70.
    settings = HomeSettings(
        working_dir=str(tmp_path / "w"), keep_generations=2, keep_seconds=0, lease_seconds=5
    )
    writer = HyperIOManager(database=uri, home_settings=settings)
    for day in ("2024-01-01", "2024-01-02", "2024-01-03", "2024-01-04"):
        if day == "2024-01-04":  # generations 1 and 2, and their chunks, are now older
            time.sleep(5.1)  # than keep_seconds + lease_seconds on the store's clock
        assert materialize([sales], partition_key=day, resources={"io_manager": writer}).success
    generations = Generations(store_home(bucket).connect(), uri, "shop.hyper")
    named = generations.read(3).keys | generations.read(4).keys
    chunks = {k for k in stored(bucket) if k.startswith("chunks/")}
    assert chunks == named  # what generations 1 and 2 alone named is gone
    assert read_days(hyper, uri, tmp_path / "r") == [[f"2024-01-0{d}", 3] for d in (1, 2, 3, 4)]


DAYS = DailyPartitionsDefinition(start_date="2024-01-01", end_date="2024-01-10")


@asset(partitions_def=DAYS, metadata={"partition_expr": "day"})
def sales(context) -> pa.Table:
    day = date.fromisoformat(context.partition_key)
    return pa.table({"day": [day] * 3, "id": pa.array([1, 2, 3], pa.int64())})


def read_days(hyper, uri: str, scratch: Path) -> list[list[object]]:
    reader = HyperDatabase(database=uri, settings=HomeSettings(working_dir=str(scratch)))
    with reader.reading() as database:
        sql = 'SELECT CAST(day AS TEXT), COUNT(*) FROM "Extract"."sales" GROUP BY 1 ORDER BY 1'
        return query(hyper, database, sql)


def _write_after_old_manifest(
    s3, bucket: str, manifest: dict, tmp_path: Path
) -> tuple[str, HyperIOManager]:
    """Stores `manifest` as an older version wrote generation 1, then writes the partition
    2024-01-02 through the home; the home's URI and its IO manager."""
    s3.put_object(
        Bucket=bucket, Key=f"{KEY}/manifest/{1:020d}.json", Body=json.dumps(manifest).encode()
    )
    uri = f"s3://{bucket}/{KEY}"
    home = HyperIOManager(database=uri, home_settings=HomeSettings(working_dir=str(tmp_path / "w")))
    assert materialize([sales], partition_key="2024-01-02", resources={"io_manager": home}).success
    return uri, home
