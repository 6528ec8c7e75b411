"""Races of an object-store home against moto's S3 server on loopback, the network's faults
played by a proxy in front of it (`StoreProxy`): a collector stalled before its delete, a
commit whose reply was lost, alone or while the store was out of reach long enough for
other writers to commit and collect, one whose create was held past the client's timeout,
and one the store refused: each test reads the rows back from the home. And the warnings
of a collection after a commit that failed, and the IO manager's `transfer_concurrency`
counted in the chunks a commit puts at once."""

from __future__ import annotations

import itertools
import logging
import os
import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from datetime import date
from typing import Any

import pyarrow as pa
import pytest
from dagster import AssetsDefinition, DailyPartitionsDefinition, asset, materialize
from helpers import contents, generation, home_rows, store_home, working_copy
from object_stores import StoreProxy

from hyper_assets import HyperIOManager
from hyper_assets._home.chunks import CHUNK_SIZE
from hyper_assets._home.collect import collect, collect_quietly
from hyper_assets._home.generations import Generations
from hyper_assets._home.home import HomeSettings, HyperDatabase
from hyper_assets._home.lease import Lease
from hyper_assets._home.stores import S3Settings
from hyper_assets.errors import HomeCommitUnknownError, HomeConflictError, HomeStoreError

KEY = "extracts/shop.hyper"
DAYS = DailyPartitionsDefinition(start_date="2024-01-01", end_date="2024-01-10")
SALES = 'SELECT CAST(day AS TEXT), COUNT(*) FROM "Extract"."sales" GROUP BY 1 ORDER BY 1'
EVENTS = 'SELECT label, COUNT(*) FROM "Extract"."events" GROUP BY 1 ORDER BY 1'


@asset(partitions_def=DAYS, metadata={"partition_expr": "day"})
def sales(context) -> pa.Table:
    day = date.fromisoformat(context.partition_key)
    return pa.table({"day": [day] * 3, "id": pa.array([1, 2, 3], pa.int64())})


def events(label: str) -> AssetsDefinition:
    """An asset that appends three rows tagged `label` to `events`."""

    @asset(name="events", metadata={"write_mode": "append"})
    def appended() -> pa.Table:
        return pa.table({"id": pa.array([1, 2, 3], pa.int64()), "label": [label] * 3})

    return appended


@pytest.fixture
def proxy(moto_s3: str) -> Iterator[StoreProxy]:
    with StoreProxy(moto_s3) as started:
        yield started


def through(proxy: StoreProxy, **settings: Any) -> HomeSettings:
    """Home settings that reach the store through `proxy`."""
    return HomeSettings(s3=S3Settings(endpoint_url=proxy.url), **settings)


def is_manifest(method: str, path: str) -> bool:
    return method == "PUT" and "/manifest/" in path


def is_chunk(method: str, path: str) -> bool:
    return method == "PUT" and "/chunks/" in path


def append(uri: str, label: str, settings: HomeSettings) -> bool:
    io_manager = HyperIOManager(database=uri, home_settings=settings)
    return materialize([events(label)], resources={"io_manager": io_manager}).success


def test_a_collector_stalled_before_its_delete_spares_a_later_generations_chunks(
    bucket, proxy, tmp_path, hyper
):
    """The collector lists the home, renews its lease, and its delete request stalls past
    the lease. A writer takes the lease over and commits a file that holds a chunk of
    generation 1 again (here: the file restored to generation 1's bytes), a chunk the
    collector listed as no kept generation's. The delete then lands; the generation the
    writer committed still downloads whole."""
    local = HyperIOManager(database=str(tmp_path / "local" / "shop.hyper"))
    files = []
    for day in ("2024-01-01", "2024-01-02"):
        assert materialize([sales], partition_key=day, resources={"io_manager": local}).success
        files.append((tmp_path / "local" / "shop.hyper").read_bytes())
    home = store_home(bucket)
    generations = Generations(home.connect(), home.uri, home.name)
    copy = working_copy(tmp_path / "w", **{"shop.hyper": files[0]})
    one = generations.commit(None, copy, "first")
    (copy.directory / "shop.hyper").write_bytes(files[1])
    generations.commit(one, copy, "second")

    store = home.connect(through(proxy))
    lease = Lease(store, home.uri, seconds=3, timeout_seconds=5)
    lease.acquire()  # no heartbeat: its process stalls with its request
    proxy.stall(lambda method, path: method == "POST" and "delete" in path)
    with ThreadPoolExecutor(1) as pool:
        collecting = pool.submit(
            collect, Generations(store, home.uri, home.name), 1, 0.0, lease.renew
        )
        assert proxy.reached.wait(30)
        writer = HyperDatabase(
            database=home.uri, settings=HomeSettings(working_dir=str(tmp_path / "writer"))
        )
        with writer.writing() as database:  # once the collector's lease expired
            database.write_bytes(files[0])
        proxy.heal()
        assert collecting.result(60).deleted_objects == 1  # generation 1's chunk
    assert generation(home.uri) == 3
    assert home_rows(hyper, home.uri, tmp_path / "read", SALES) == [["2024-01-01", 3]]


def test_a_commit_whose_reply_was_lost_is_reported_committed(bucket, proxy, tmp_path, hyper):
    """The manifest's create reaches the store, its reply does not: the write committed,
    so it succeeds, and its rows are in the home once."""
    uri = f"s3://{bucket}/{KEY}"
    assert append(uri, "first", HomeSettings(working_dir=str(tmp_path / "first")))
    proxy.lose_reply(is_manifest)
    assert append(uri, "lost", through(proxy, working_dir=str(tmp_path / "lost")))
    assert proxy.reached.is_set() and generation(uri) == 2
    assert home_rows(hyper, uri, tmp_path / "read", EVENTS) == [["first", 3], ["lost", 3]]


def test_a_commit_whose_reply_was_lost_and_could_not_be_checked_may_be_committed(
    bucket, proxy, tmp_path, hyper
):
    """The manifest's create reaches the store, its reply does not, and the store refuses
    to say whether it holds the manifest: the write fails, saying it may be committed and
    how to tell, never that nothing was."""
    uri = f"s3://{bucket}/{KEY}"
    assert append(uri, "first", HomeSettings(working_dir=str(tmp_path / "first")))
    proxy.lose_reply(is_manifest)
    proxy.refuse(lambda method, path: method == "GET" and path.endswith(f"/manifest/{2:020d}.json"))
    with pytest.raises(HomeCommitUnknownError, match="may be committed") as unknown:
        append(uri, "unknown", through(proxy, working_dir=str(tmp_path / "unknown")))
    token = Generations(store_home(bucket).connect(), uri, "shop.hyper").read(2).token
    assert f"manifest/{2:020d}.json holds token {token!r}" in str(unknown.value)
    assert "Do not run it again before checking" in str(unknown.value)
    assert "nothing was committed" not in str(unknown.value)
    assert generation(uri) == 2
    assert home_rows(hyper, uri, tmp_path / "read", EVENTS) == [["first", 3], ["unknown", 3]]


def test_a_commit_the_store_refused_is_reported_refused(bucket, proxy, tmp_path, hyper):
    """The manifest's create is answered 403 and never reaches the store: nothing was
    committed, and the write says so."""
    uri = f"s3://{bucket}/{KEY}"
    assert append(uri, "first", HomeSettings(working_dir=str(tmp_path / "first")))
    proxy.refuse(is_manifest)
    with pytest.raises(HomeStoreError, match="nothing was committed"):
        append(uri, "refused", through(proxy, working_dir=str(tmp_path / "refused")))
    assert proxy.reached.is_set() and generation(uri) == 1
    assert home_rows(hyper, uri, tmp_path / "read", EVENTS) == [["first", 3]]


def test_a_create_that_timed_out_is_sent_again(bucket, proxy, tmp_path, hyper):
    """The manifest's create is held on its way past the client's timeout (obstore does
    not retry a create that timed out), then delivered: the check finds no manifest, the
    create is sent again and commits. The held one, delivered later, is refused by the
    manifest it created: the rows are in the home once."""
    uri = f"s3://{bucket}/{KEY}"
    assert append(uri, "first", HomeSettings(working_dir=str(tmp_path / "first")))
    proxy.stall(is_manifest)  # held until heal(), then relayed to the store
    late = through(proxy, working_dir=str(tmp_path / "late"), request_timeout_seconds=3)
    assert append(uri, "late", late)
    proxy.heal()
    assert proxy.reached.is_set() and generation(uri) == 2
    assert home_rows(hyper, uri, tmp_path / "read", EVENTS) == [["first", 3], ["late", 3]]


def test_a_create_that_lands_after_the_check_is_never_reported_uncommitted(
    bucket, proxy, tmp_path, hyper
):
    """As above, but the create sent again is refused (403): the held one may still land,
    so the write says it may be committed, never that nothing was (a re-run would append
    its rows twice). Delivered, the held create commits the write."""
    uri = f"s3://{bucket}/{KEY}"
    assert append(uri, "first", HomeSettings(working_dir=str(tmp_path / "first")))
    proxy.stall(is_manifest)
    proxy.refuse(is_manifest)  # the create sent again
    late = through(proxy, working_dir=str(tmp_path / "late"), request_timeout_seconds=3)
    with pytest.raises(HomeCommitUnknownError, match="may be committed") as unknown:
        append(uri, "late", late)
    assert "nothing was committed" not in str(unknown.value)
    proxy.heal()
    deadline = time.monotonic() + 30
    while generation(uri) < 2 and time.monotonic() < deadline:
        time.sleep(0.2)
    assert home_rows(hyper, uri, tmp_path / "read", EVENTS) == [["first", 3], ["late", 3]]


def test_a_commit_is_found_after_later_generations_were_collected(bucket, proxy, tmp_path, hyper):
    """The manifest's create reaches the store, then the store is out of reach of that
    writer (its lease renewals too) while two other writers commit, each collecting all
    but the newest generation. Its reply lost, the writer finds its manifest, kept: it
    succeeds, and each write's rows are in the home once. A stalled writer's commit of
    an old number is still refused."""
    uri = f"s3://{bucket}/{KEY}"
    collecting = HomeSettings(keep_generations=1, keep_seconds=0, lease_seconds=1)
    assert append(uri, "first", collecting.model_copy(update={"working_dir": str(tmp_path / "1")}))
    proxy.lose_reply(is_manifest, partition=True)
    with ThreadPoolExecutor(1) as pool:
        cut_off = pool.submit(
            append, uri, "cut off", through(proxy, working_dir=str(tmp_path / "c"), lease_seconds=2)
        )
        assert proxy.reached.wait(60)
        for label in ("second", "third"):
            settings = collecting.model_copy(update={"working_dir": str(tmp_path / label)})
            assert append(uri, label, settings)
        assert generation(uri) == 4
        proxy.heal()
        assert cut_off.result(120)
    expected = [["cut off", 3], ["first", 3], ["second", 3], ["third", 3]]
    assert home_rows(hyper, uri, tmp_path / "read", EVENTS) == expected

    home = store_home(bucket)
    generations = Generations(home.connect(), home.uri, home.name)
    stale = generations.read(1)
    with pytest.raises(HomeConflictError, match="generation 2"):
        generations.commit(stale, working_copy(tmp_path / "s", **{"shop.hyper": b"x"}), "stale")


def test_a_commit_found_after_its_lease_was_lost_warns_only_that_its_collection_stopped(
    bucket, proxy, tmp_path, hyper, records
):
    """As above, but the cut-off writer's generation is a keep-th one: it collects after
    finding its manifest, under the lease it lost meanwhile, so the collection stops. The
    warning says the write is committed, never to run it again."""
    uri = f"s3://{bucket}/{KEY}"
    collecting = HomeSettings(keep_generations=1, keep_seconds=0, lease_seconds=1)
    assert append(uri, "first", collecting.model_copy(update={"working_dir": str(tmp_path / "1")}))
    proxy.lose_reply(is_manifest, partition=True)
    cut_off_settings = through(
        proxy, working_dir=str(tmp_path / "c"), lease_seconds=2, keep_generations=2, keep_seconds=0
    )
    with ThreadPoolExecutor(1) as pool:
        cut_off = pool.submit(append, uri, "cut off", cut_off_settings)
        assert proxy.reached.wait(60)
        second = HomeSettings(lease_seconds=1, working_dir=str(tmp_path / "second"))
        assert append(uri, "second", second)  # generation 3, which collects nothing
        time.sleep(2.5)  # generation 1 stops being kept by the cut-off's grace (2 s)
        proxy.heal()
        assert cut_off.result(120)
    expected = [["cut off", 3], ["first", 3], ["second", 3]]
    assert home_rows(hyper, uri, tmp_path / "read", EVENTS) == expected
    warned = [r.getMessage() for r in records if r.levelno == logging.WARNING]
    assert [w for w in warned if "the write's lease was lost" in w], warned
    assert not [w for w in warned if "Run it again" in w or "nothing of" in w], warned


def test_a_collection_the_store_failed_warns_that_the_write_is_committed(
    bucket, proxy, tmp_path, records
):
    """A collection after a commit whose delete the store refuses: the warning quotes the
    store and says the write is committed, not that nothing was."""
    home = store_home(bucket)
    generations = Generations(home.connect(through(proxy)), home.uri, home.name)
    copy = working_copy(tmp_path / "w", **{"shop.hyper": b"one"})
    one = generations.commit(None, copy, "first")
    (copy.directory / "shop.hyper").write_bytes(b"two")
    generations.commit(one, copy, "first")
    proxy.refuse(lambda method, path: method == "POST" and "delete" in path)
    collect_quietly(generations, 1, 0.0, lambda: None)
    warned = [r.getMessage() for r in records if r.levelno == logging.WARNING]
    assert len(warned) == 1 and "is committed" in warned[0], warned
    assert "AccessDenied" in warned[0] and "nothing was committed" not in warned[0]


def test_a_commit_puts_its_chunks_several_at_once(bucket, proxy, tmp_path):
    """The first chunk's put is held at the proxy: the commit's eleven other chunks reach
    the store meanwhile (one at a time, none would), and once it is let through the
    commit completes, a fresh copy holding the same bytes."""
    home = store_home(bucket)
    generations = Generations(home.connect(through(proxy)), home.uri, home.name, concurrency=4)
    body = os.urandom(12 * CHUNK_SIZE)
    copy = working_copy(tmp_path / "w", **{"shop.hyper": body})
    proxy.stall(is_chunk)
    with ThreadPoolExecutor(1) as pool:
        committing = pool.submit(generations.commit, None, copy, "lease")
        assert proxy.reached.wait(30)
        deadline = time.monotonic() + 30
        while sum(is_chunk(*r) for r in proxy.requests) < 12 and time.monotonic() < deadline:
            time.sleep(0.05)
        put_while_held = sum(is_chunk(*r) for r in proxy.requests)
        assert not committing.done()
        proxy.heal()
        one = committing.result(60)
    assert put_while_held == 12
    fresh = working_copy(tmp_path / "fresh")
    generations.download(one, fresh)
    assert contents(fresh) == {"shop.hyper": body}


def test_a_chunk_put_refused_mid_upload_commits_nothing_and_changes_nothing(
    bucket, proxy, tmp_path
):
    """The 10th of a commit's 41 chunk puts is refused (403) while others are under way:
    the commit fails naming the store, no manifest is sent, the home's current
    generation and the working copy are as they were, and no put of it goes on after
    the error. The commit sent again succeeds."""
    home = store_home(bucket)
    direct = Generations(home.connect(), home.uri, home.name)
    one = direct.commit(None, working_copy(tmp_path / "a", **{"shop.hyper": b"one"}), "first")
    body = os.urandom(40 * CHUNK_SIZE + 100)
    copy = working_copy(tmp_path / "w", **{"shop.hyper": body})
    generations = Generations(home.connect(through(proxy)), home.uri, home.name, concurrency=8)
    counted = itertools.count(1)
    proxy.refuse(lambda method, path: is_chunk(method, path) and next(counted) == 10)
    with pytest.raises(HomeStoreError, match="nothing was committed"):
        generations.commit(one, copy, "second")
    assert proxy.reached.is_set()
    assert not [t for t in threading.enumerate() if t.name.startswith("hyper-chunks")]
    assert not [r for r in proxy.requests if is_manifest(*r)]
    assert direct.numbers() == [1] and direct.current() == one
    assert contents(copy) == {"shop.hyper": body} and copy.generation() is None

    two = generations.commit(one, copy, "second")
    fresh = working_copy(tmp_path / "fresh")
    direct.download(direct.current(), fresh)
    assert direct.current() == two and contents(fresh) == {"shop.hyper": body}


@pytest.mark.parametrize("concurrency", [1, 3])
def test_the_io_managers_transfer_concurrency_bounds_the_chunks_a_commit_puts_at_once(
    bucket, proxy, tmp_path, hyper, concurrency
):
    """`home_settings=HomeSettings(transfer_concurrency=N)` on the IO manager reaches the
    commit: with each chunk's put held 50 ms, N of a file's dozen chunks are in flight at
    once, never more; the rows are in the home."""

    @asset(name="blobs")
    def blobs() -> pa.Table:  # about 3 MB that does not compress: a dozen chunks
        return pa.table({"id": range(12), "blob": [os.urandom(CHUNK_SIZE) for _ in range(12)]})

    proxy.slow_down(is_chunk, 0.05)
    settings = through(proxy, transfer_concurrency=concurrency, working_dir=str(tmp_path / "w"))
    io_manager = HyperIOManager(database=store_home(bucket).uri, home_settings=settings)
    assert materialize([blobs], resources={"io_manager": io_manager}).success
    assert sum(is_chunk(*request) for request in proxy.requests) >= 12
    assert proxy.most_at_once == concurrency
    count = 'SELECT COUNT(*), SUM(OCTET_LENGTH(blob)) FROM "Extract"."blobs"'
    assert home_rows(hyper, store_home(bucket).uri, tmp_path / "read", count) == [
        [12, 12 * CHUNK_SIZE]
    ]
