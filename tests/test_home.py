"""The extract's home: a local path as always, never a URI taken for a local path, and an
object-store home of immutable generations and a lease, against moto's S3 server on
loopback (real HTTP, the conditional writes S3 answers 412 to)."""

from __future__ import annotations

import os
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import boto3
import pytest

from hyper_assets import HyperIOManager, UnsupportedHomeError
from hyper_assets.errors import DatabaseLockedError, HomeConflictError, LeaseLostError
from hyper_assets.generations import Generations, WorkingCopy
from hyper_assets.home import StoreHome, parse_home, relative_to
from hyper_assets.lease import Lease


@pytest.fixture(scope="module")
def moto_s3() -> Iterator[str]:
    """moto's S3 server on loopback, reached through the standard AWS environment."""
    from moto.server import ThreadedMotoServer

    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    host, port = server.get_host_and_port()
    endpoint = f"http://{host}:{port}"
    saved = dict(os.environ)
    os.environ.update(
        AWS_ENDPOINT_URL=endpoint,
        AWS_ACCESS_KEY_ID="test",
        AWS_SECRET_ACCESS_KEY="test-secret",
        AWS_REGION="us-east-1",
    )
    yield endpoint
    os.environ.clear()
    os.environ.update(saved)
    server.stop()


@pytest.fixture
def bucket(moto_s3: str) -> str:
    name = f"home-{uuid.uuid4().hex[:12]}"
    boto3.client("s3", endpoint_url=moto_s3).create_bucket(Bucket=name)
    return name


def store_home(bucket: str) -> StoreHome:
    home = parse_home(f"s3://{bucket}/extracts/shop.hyper")
    assert isinstance(home, StoreHome)
    return home


def working_copy(directory: Path, **files: bytes) -> WorkingCopy:
    directory.mkdir(parents=True, exist_ok=True)
    for name, body in files.items():
        path = directory / name.replace("__", "/")
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(body)
    return WorkingCopy(directory, "shop.hyper")


def contents(working: WorkingCopy) -> dict[str, bytes]:
    return {name: path.read_bytes() for name, path in working.files()}


# --- where the file lives --------------------------------------------------------------------


@pytest.mark.parametrize("uri", ["gs://b/x.hyper", "abfss://c@a.dfs/x.hyper", "sftp://h/x"])
def test_a_store_the_library_cannot_serve_is_refused_at_definition(uri, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(UnsupportedHomeError, match="cannot keep the file in"):
        HyperIOManager(database=uri)
    with pytest.raises(UnsupportedHomeError):
        relative_to(uri, tmp_path)
    assert list(tmp_path.iterdir()) == []  # nothing was taken for a local path


@pytest.mark.parametrize(
    "uri", ["s3://bucket", "s3://bucket/", "s3://key:secret@bucket/x.hyper", "s3://b/x?region=1"]
)
def test_an_s3_uri_without_a_file_or_with_credentials_is_refused(uri):
    with pytest.raises(UnsupportedHomeError):
        HyperIOManager(database=uri)


def test_local_paths_are_kept_as_given_and_s3_uris_are_homes(tmp_path):
    assert HyperIOManager(database="data/flights.hyper").database == "data/flights.hyper"
    assert HyperIOManager(database="./a:b.hyper").database == "./a:b.hyper"
    assert relative_to("data/x.hyper", tmp_path) == str(tmp_path / "data" / "x.hyper")
    assert relative_to(str(tmp_path / "x.hyper"), Path("/elsewhere")) == str(tmp_path / "x.hyper")
    expected = StoreHome("s3://b/a/shop.hyper", "b", "a/shop.hyper")
    assert parse_home("s3a://b/a/shop.hyper") == expected
    assert relative_to("s3://b/shop.hyper", tmp_path) == "s3://b/shop.hyper"


# --- generations -----------------------------------------------------------------------------


def test_each_commit_is_the_next_generation_and_a_fresh_copy_downloads_it(bucket, tmp_path):
    home = store_home(bucket)
    generations = Generations(home.connect(), home.uri, home.name)
    assert generations.current() is None
    first = working_copy(
        tmp_path / "a", **{"shop.hyper": b"v1", "shop.hyper.outbox__state.json": b"{}"}
    )
    one = generations.commit(None, first, "lease-1")
    (first.directory / "shop.hyper").write_bytes(b"v2")
    two = generations.commit(one, first, "lease-2")
    assert (generations.current(), two.number, two.extract_id) == (two, 2, one.extract_id)
    reused = {f.path: f.key for f in two.files}
    assert reused["shop.hyper.outbox/state.json"] == one.files[1].key  # not uploaded again
    assert reused["shop.hyper"] != one.files[0].key

    fresh = WorkingCopy(tmp_path / "b", "shop.hyper")
    (tmp_path / "b").mkdir()
    (tmp_path / "b" / "shop.hyper.stale").write_bytes(b"left by a killed write")
    assert generations.download(two, fresh)
    assert contents(fresh) == {"shop.hyper": b"v2", "shop.hyper.outbox/state.json": b"{}"}
    assert not generations.download(two, fresh)  # already that generation: nothing moved
    fresh.changing()  # a write began and failed: the copy is downloaded again
    (fresh.directory / "shop.hyper").write_bytes(b"half-written")
    assert generations.download(two, fresh)
    assert contents(fresh)["shop.hyper"] == b"v2"


def test_of_two_commits_from_one_generation_the_second_is_refused(bucket, tmp_path):
    home = store_home(bucket)
    generations = Generations(home.connect(), home.uri, home.name)
    base = generations.commit(None, working_copy(tmp_path / "0", **{"shop.hyper": b"v1"}), "l0")
    first = generations.commit(base, working_copy(tmp_path / "a", **{"shop.hyper": b"a"}), "la")
    with pytest.raises(HomeConflictError, match="generation 2"):
        generations.commit(base, working_copy(tmp_path / "b", **{"shop.hyper": b"b"}), "lb")
    assert generations.current() == first
    fresh = WorkingCopy(tmp_path / "c", "shop.hyper")
    (tmp_path / "c").mkdir()
    generations.download(generations.current(), fresh)
    assert contents(fresh) == {"shop.hyper": b"a"}


# --- the lease -------------------------------------------------------------------------------


def test_writers_take_turns_and_a_released_lease_is_taken_at_once(bucket):
    store = store_home(bucket).connect()
    waiter = Lease(store, "home", seconds=30, timeout_seconds=0.5)
    with (
        Lease(store, "home", seconds=30, timeout_seconds=5),
        pytest.raises(DatabaseLockedError, match="is leased by"),
    ):
        waiter.acquire()
    started = time.monotonic()
    with Lease(store, "home", seconds=30, timeout_seconds=5):
        assert time.monotonic() - started < 5


def test_a_held_lease_is_renewed_and_a_killed_holders_lease_expires(bucket):
    store = store_home(bucket).connect()
    waiter = Lease(store, "home", seconds=1.5, timeout_seconds=3)
    with (
        Lease(store, "home", seconds=1.5, timeout_seconds=5),
        pytest.raises(DatabaseLockedError),  # renewed: 3 s is twice its seconds
    ):
        waiter.acquire()
    stalled = Lease(store, "home", seconds=1, timeout_seconds=5)
    stalled.acquire()  # no heartbeat: as a killed or stalled writer
    started = time.monotonic()
    taker = Lease(store, "home", seconds=1, timeout_seconds=5)
    taker.acquire()
    assert time.monotonic() - started >= 1
    with pytest.raises(LeaseLostError, match="expired"):
        stalled.renew()
    stalled.release()  # not its own any more: leaves the taker's lease alone
    taker.renew()


def test_a_writer_whose_lease_expired_cannot_commit(bucket, tmp_path):
    """The stalled writer's commit renews its lease first (the fence): refused, and the
    generation the next writer committed is current."""
    home = store_home(bucket)
    store = home.connect()
    generations = Generations(store, home.uri, home.name)
    base = generations.commit(None, working_copy(tmp_path / "0", **{"shop.hyper": b"v1"}), "l0")
    stalled = Lease(store, home.uri, seconds=1, timeout_seconds=5)
    stalled.acquire()
    taker = Lease(store, home.uri, seconds=1, timeout_seconds=5)
    taker.acquire()
    theirs = generations.commit(
        base, working_copy(tmp_path / "b", **{"shop.hyper": b"b"}), taker.id, fence=taker.renew
    )
    mine = working_copy(tmp_path / "a", **{"shop.hyper": b"a"})
    with pytest.raises(LeaseLostError):
        generations.commit(base, mine, stalled.id, fence=stalled.renew)
    with pytest.raises(HomeConflictError):  # without the fence, the manifest refuses it
        generations.commit(base, mine, stalled.id)
    assert generations.current() == theirs
    assert theirs.lease_id == taker.id
