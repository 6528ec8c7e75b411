"""The extract's home: a local path as always, never a URI taken for a local path, and an
object-store home of immutable generations and a lease, against moto's S3 server on
loopback (real HTTP, the conditional writes S3 answers 412 to)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from datetime import date
from pathlib import Path
from typing import Any

import dagster as dg
import pyarrow as pa
import pytest
from cluster import REPOSITORY, private_mounts
from dagster import DailyPartitionsDefinition, asset, materialize
from helpers import contents, generation, home_rows, query, store_home, working_copy

from hyper_assets import (
    HyperIOManager,
    HyperResource,
    TableauServerResource,
    TokenSignIn,
    UnsupportedHomeError,
    compact,
    publish_freshness_check,
    tableau_datasource_asset,
)
from hyper_assets._home.chunks import Transfer
from hyper_assets._home.generations import Generations, WorkingCopy
from hyper_assets._home.home import HomeSettings, HyperDatabase, parse_home, relative_to
from hyper_assets._home.lease import Lease
from hyper_assets._home.stores import S3Home
from hyper_assets._rows.outbox import Outbox
from hyper_assets.emulator import Emulator
from hyper_assets.errors import (
    DatabaseLockedError,
    HomeConflictError,
    HomeStoreError,
    LeaseLostError,
)

# --- where the file lives --------------------------------------------------------------------


@pytest.mark.parametrize("uri", ["gs://b/x.hyper", "hdfs://nn/x.hyper", "sftp://h/x"])
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
    expected = S3Home("s3://b/a/shop.hyper", "b", "a/shop.hyper")
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
    assert two.files[1] == one.files[1]  # the unchanged outbox: the same chunk
    assert two.files[0].parts != one.files[0].parts
    assert generations.sent.moved == 2  # b"v2" only

    fresh = WorkingCopy(tmp_path / "b", "shop.hyper")
    (tmp_path / "b").mkdir()
    (tmp_path / "b" / "shop.hyper.stale").write_bytes(b"left by a killed write")
    assert generations.download(two, fresh) == Transfer(moved=4)
    assert contents(fresh) == {"shop.hyper": b"v2", "shop.hyper.outbox/state.json": b"{}"}
    assert generations.download(two, fresh) is None  # already that generation
    fresh.changing()  # a write began and failed: the copy is checked, the file fetched again
    (fresh.directory / "shop.hyper").write_bytes(b"half-written")
    assert generations.download(two, fresh) == Transfer(moved=2, kept=2)
    assert contents(fresh)["shop.hyper"] == b"v2"


def test_a_commit_of_unchanged_files_is_no_new_generation(bucket, tmp_path):
    home = store_home(bucket)
    generations = Generations(home.connect(), home.uri, home.name)
    copy = working_copy(tmp_path / "a", **{"shop.hyper": b"v1"})
    one = generations.commit(None, copy, "lease-1")
    assert generations.commit(one, copy, "lease-1") == one == generations.current()


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
    # The taker waits out the stalled lease's 1 s; its own seconds are long, so that the
    # renew() below cannot find it expired on a loaded machine (a CI run: 1 s passed).
    taker = Lease(store, "home", seconds=60, timeout_seconds=5)
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
    taker = Lease(store, home.uri, seconds=60, timeout_seconds=5)  # outlasts its commit
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


# --- the IO manager on an object-store home --------------------------------------------------

DAYS = DailyPartitionsDefinition(start_date="2024-01-01", end_date="2024-01-05")


@asset(partitions_def=DAYS, metadata={"partition_expr": "day"})
def sales(context) -> pa.Table:
    day = date.fromisoformat(context.partition_key)
    return pa.table({"day": [day] * 3, "id": pa.array([1, 2, 3], pa.int64())})


@asset
def per_day(sales: pa.Table) -> pa.Table:
    return sales.group_by("day").aggregate([("id", "count")]).sort_by("day")


def test_runs_that_share_only_the_store_write_and_read_one_extract(bucket, tmp_path, hyper):
    """Each run gets a fresh working copy, as a fresh container would: the second run's
    rows join the first's, and a downstream asset loads both."""
    uri = f"s3://{bucket}/extracts/shop.hyper"

    def run(name: str, partition: str | None, *assets) -> None:
        io_manager = HyperIOManager(
            database=uri, home_settings=HomeSettings(working_dir=str(tmp_path / name))
        )
        result = materialize(
            [sales, per_day], selection=list(assets), partition_key=partition,
            resources={"io_manager": io_manager},
        )  # fmt: skip
        assert result.success

    run("first", "2024-01-01", sales)
    tracker = HyperDatabase(database=uri, settings=HomeSettings(working_dir=str(tmp_path / "t")))
    with tracker.writing() as database:  # as a first publish does: later writes are recorded
        Outbox(database).start_tracking()
    run("second", "2024-01-02", sales)
    run("third", None, per_day)
    reader = HyperDatabase(database=uri, settings=HomeSettings(working_dir=str(tmp_path / "r")))
    with reader.reading() as database:
        per_day_rows = 'SELECT CAST(day AS TEXT), id_count FROM "Extract"."per_day" ORDER BY 1'
        assert query(hyper, database, per_day_rows) == [["2024-01-01", 3], ["2024-01-02", 3]]
        assert query(hyper, database, 'SELECT COUNT(*) FROM "Extract"."sales"') == [[6]]
        # The outbox travelled with the file: both later writes wait for the next publish.
        changes = Outbox(database).changes()
        assert [(c.table.name.unescaped, c.kind.value) for c in changes] == [
            ("sales", "partition"),
            ("per_day", "replace"),
        ]
    assert generation(uri) == 4
    assert not (tmp_path / "s3:").exists() and not list(Path.cwd().glob("s3:*"))


def test_a_store_that_fails_is_a_named_error_and_nothing_is_written(moto_s3, tmp_path):
    io_manager = HyperIOManager(
        database="s3://no-such-bucket/extracts/shop.hyper",
        home_settings=HomeSettings(working_dir=str(tmp_path / "copy")),
    )
    with pytest.raises(HomeStoreError, match=r"s3://no-such-bucket/extracts/shop.hyper failed"):
        materialize([sales], partition_key="2024-01-01", resources={"io_manager": io_manager})
    assert [p.name for p in (tmp_path / "copy").iterdir()] == ["shop.hyper.lock"]


def test_compact_rewrites_the_current_generation_of_a_store_home(bucket, tmp_path, hyper):
    uri = f"s3://{bucket}/extracts/shop.hyper"
    writer = HyperIOManager(database=uri, home_settings=HomeSettings(working_dir=str(tmp_path)))
    for day in ("2024-01-01", "2024-01-02"):
        assert materialize([sales], partition_key=day, resources={"io_manager": writer}).success
    result = compact(HyperResource(), uri)  # a working copy of its own, downloaded cold
    assert result.before_bytes > 0 and generation(uri) == 3
    counts = 'SELECT CAST(day AS TEXT), COUNT(*) FROM "Extract"."sales" GROUP BY 1 ORDER BY 1'
    assert home_rows(hyper, uri, tmp_path / "read", counts) == [
        ["2024-01-01", 3],
        ["2024-01-02", 3],
    ]
    assert not list(Path.cwd().glob("s3:*"))


def test_publish_and_checks_follow_the_home(bucket, tmp_path, hyper):
    """Writes, checks and publishes run as separate containers would (each with a fresh
    working copy) against one s3:// home: the second publish sends only the second day,
    the third sends nothing, and the server's copy equals the file."""
    uri = f"s3://{bucket}/extracts/shop.hyper"
    published = tableau_datasource_asset(datasource="Shop", project="Default", deps=[sales])
    fresh = publish_freshness_check(published, max_lag_minutes=0)
    data_dir = tmp_path / "server"
    data_dir.mkdir()
    with Emulator(data_dir, tokens={"ci": "secret"}, hyper=hyper) as emulator:
        tableau = TableauServerResource(
            server_url=emulator.url, sign_in=TokenSignIn(name="ci", secret="secret")
        )

        def run(name: str, selection, partition: str | None = None) -> dg.ExecuteInProcessResult:
            io_manager = HyperIOManager(
                database=uri, home_settings=HomeSettings(working_dir=str(tmp_path / name))
            )
            return materialize(
                [sales, published, fresh], selection=selection, partition_key=partition,
                resources={"io_manager": io_manager, "tableau": tableau},
            )  # fmt: skip

        def published_as(result: dg.ExecuteInProcessResult) -> tuple[str, int]:
            (event,) = result.asset_materializations_for_node(published.op.name)
            return event.metadata["publish"].value, event.metadata["rows_sent"].value

        assert run("write-1", dg.AssetSelection.assets(sales), "2024-01-01").success
        assert published_as(run("publish-1", dg.AssetSelection.assets(published))) == ("full", 3)
        assert run("write-2", dg.AssetSelection.assets(sales), "2024-01-02").success
        (waiting,) = run("check", dg.AssetSelection.checks(fresh)).get_asset_check_evaluations()
        assert not waiting.passed and waiting.metadata["unpublished_changes"].value == 1
        assert published_as(run("publish-2", dg.AssetSelection.assets(published))) == (
            "update",
            3,
        )
        assert published_as(run("publish-3", dg.AssetSelection.assets(published))) == ("none", 0)
        counts = 'SELECT CAST(day AS TEXT), COUNT(*) FROM "Extract"."sales" GROUP BY 1 ORDER BY 1'
        assert query(hyper, emulator.data_dir / "Shop.hyper", counts) == [
            ["2024-01-01", 3],
            ["2024-01-02", 3],
        ]
        assert home_rows(hyper, uri, tmp_path / "read", counts) == [
            ["2024-01-01", 3],
            ["2024-01-02", 3],
        ]


# --- steps that share no disk ----------------------------------------------------------------
# Each step runs in its own private mount namespace (its own empty /tmp, so its own cold
# working copy and hyperd), sharing only moto's S3 server on loopback. Each test reads the
# rows back from the home (a fresh working copy in this process): every committed step's
# rows are there, no refused or killed step's.

JOB = Path(__file__).with_name("home_job.py")
LEASE_SECONDS = 3.0


class Step:
    """One Dagster step in a mount namespace of its own."""

    def __init__(
        self,
        uri: str,
        *args: str,
        pause: str | None = None,
        after_update: bool = False,
        tableau: str = "",
    ) -> None:
        env = {
            **os.environ,
            "HOME_TEST_TABLEAU": tableau,
            "PYTHONPATH": str(REPOSITORY),
            "HOME_TEST_URI": uri,
            "HOME_TEST_LEASE": str(LEASE_SECONDS),
            "HOME_TEST_PAUSE": pause or "",
            "HOME_TEST_PAUSE_AFTER_UPDATE": "1" if after_update else "",
        }
        command = private_mounts([sys.executable, str(JOB), *args], [], shared=[REPOSITORY])
        self.log = tempfile.TemporaryFile("w+")  # noqa: SIM115  (shown when the step ends early)
        self.process = subprocess.Popen(
            command, env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
            stderr=self.log, text=True, start_new_session=True,
        )  # fmt: skip

    def wait_for(self, word: str, timeout: float = 120) -> str:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            line = self.process.stdout.readline()
            if not line:
                self.log.seek(0)
                tail = self.log.read()[-3000:]
                raise AssertionError(f"the step ended before printing {word}:\n{tail}")
            if line.startswith(word):
                return line[len(word) :].strip()
        raise AssertionError(f"no {word} after {timeout:g} s")

    def result(self) -> dict[str, Any]:
        outcome = json.loads(self.wait_for("RESULT "))
        self.process.wait(60)
        return outcome

    def signal(self, number: int) -> None:
        os.killpg(self.process.pid, number)

    def kill(self) -> None:
        self.signal(signal.SIGKILL)
        self.process.wait(60)


def run(home_uri: str, *args: str, tableau: str = "") -> dict[str, Any]:
    return Step(home_uri, *args, tableau=tableau).result()


@pytest.fixture
def home_uri(bucket: str, namespaces: None) -> str:
    return f"s3://{bucket}/team/shop.hyper"


LABELS = 'SELECT CAST(day AS TEXT), label, COUNT(*) FROM "Extract"."sales" GROUP BY 1, 2 ORDER BY 1'


@pytest.mark.slow
def test_runs_one_after_another_each_cold(hyper, home_uri, tmp_path):
    assert run(home_uri, "write", "2024-01-01", "first") == {"success": True, "error": None}
    assert run(home_uri, "write", "2024-01-02", "second")["success"]
    assert run(home_uri, "summary")["success"]  # loads both days in a third namespace
    assert home_rows(hyper, home_uri, tmp_path / "read", LABELS) == [
        ["2024-01-01", "first", 1000],
        ["2024-01-02", "second", 1000],
    ]
    per_day = 'SELECT CAST(day AS TEXT), id_count FROM "Extract"."per_day" ORDER BY 1'
    assert home_rows(hyper, home_uri, tmp_path / "read", per_day) == [
        ["2024-01-01", 1000],
        ["2024-01-02", 1000],
    ]
    assert generation(home_uri) == 3


@pytest.mark.slow
def test_two_writers_at_once_both_commit(hyper, home_uri, tmp_path):
    steps = [Step(home_uri, "write", f"2024-01-0{d}", f"writer{d}") for d in (1, 2)]
    assert [s.result()["success"] for s in steps] == [True, True]
    assert home_rows(hyper, home_uri, tmp_path / "read", LABELS) == [
        ["2024-01-01", "writer1", 1000],
        ["2024-01-02", "writer2", 1000],
    ]
    assert generation(home_uri) == 2


@pytest.mark.slow
@pytest.mark.parametrize("during", ["chunks/", "manifest/"], ids=["upload", "commit"])
def test_a_step_killed_during_upload_or_commit_leaves_the_previous_generation(
    hyper, home_uri, tmp_path, during
):
    assert run(home_uri, "write", "2024-01-01", "kept")["success"]
    killed = Step(home_uri, "write", "2024-01-02", "killed", pause=during)
    killed.wait_for("PAUSED ")
    killed.kill()
    assert generation(home_uri) == 1
    assert home_rows(hyper, home_uri, tmp_path / "read", LABELS) == [["2024-01-01", "kept", 1000]]
    # The next step takes over the dead step's lease once it expired, and commits.
    assert run(home_uri, "write", "2024-01-03", "next")["success"]
    assert home_rows(hyper, home_uri, tmp_path / "read", LABELS) == [
        ["2024-01-01", "kept", 1000],
        ["2024-01-03", "next", 1000],
    ]


@pytest.mark.slow
@pytest.mark.parametrize(
    ("during", "refusal"),
    [("chunks/", "LeaseLostError"), ("manifest/", "HomeConflictError")],
    ids=["before-the-fence", "after-the-fence"],
)
def test_a_stalled_writer_whose_lease_expired_cannot_commit(
    hyper, home_uri, tmp_path, during, refusal
):
    """SIGSTOP stalls the whole step (its lease heartbeat too) past its lease; another
    step commits meanwhile; the stalled one, resumed, is refused and changes nothing."""
    stalled = Step(home_uri, "write", "2024-01-01", "stalled", pause=during)
    stalled.wait_for("PAUSED ")
    stalled.signal(signal.SIGSTOP)
    try:
        assert run(home_uri, "write", "2024-01-02", "other")["success"]
    finally:
        stalled.signal(signal.SIGCONT)
    stalled.process.stdin.write("go\n")
    stalled.process.stdin.flush()
    outcome = stalled.result()
    assert not outcome["success"] and outcome["error"].startswith(refusal), outcome
    assert home_rows(hyper, home_uri, tmp_path / "read", LABELS) == [["2024-01-02", "other", 1000]]
    assert generation(home_uri) == 1


@pytest.mark.slow
def test_a_publish_from_another_namespace_sends_only_what_changed(hyper, home_uri, tmp_path):
    """The server's copy is the emulator's (this process's disk); each write and publish
    runs in a namespace of its own, so the publish state reaches it only through S3."""
    (tmp_path / "server").mkdir()
    with Emulator(tmp_path / "server", tokens={"ci": "secret"}, hyper=hyper) as emulator:
        assert run(home_uri, "write", "2024-01-01", "first")["success"]
        first = run(home_uri, "publish", tableau=emulator.url)
        assert (first["publish"], first["rows_sent"]) == ("full", 1000), first
        assert run(home_uri, "write", "2024-01-02", "second")["success"]
        second = run(home_uri, "publish", tableau=emulator.url)
        assert (second["publish"], second["rows_sent"]) == ("update", 1000), second
        third = run(home_uri, "publish", tableau=emulator.url)
        assert (third["publish"], third["rows_sent"]) == ("none", 0), third
        remote = query(hyper, emulator.data_dir / "Shop.hyper", LABELS)
    assert remote == home_rows(hyper, home_uri, tmp_path / "read", LABELS)
    assert remote == [["2024-01-01", "first", 1000], ["2024-01-02", "second", 1000]]


@pytest.mark.slow
def test_a_check_in_its_own_namespace_reads_the_current_generation(hyper, home_uri, tmp_path):
    """Each check runs cold in a namespace of its own: it counts the rows of the home's
    current generation, and a later write's NULLs are what it finds next."""
    assert run(home_uri, "write", "2024-01-01", "first")["success"]
    assert run(home_uri, "write", "2024-01-02", "second")["success"]
    counts = 'SELECT COUNT(*), COUNT(*) - COUNT(label) FROM "Extract"."sales"'

    checked = run(home_uri, "check")
    assert checked["success"] and checked["passed"], checked
    stored = home_rows(hyper, home_uri, tmp_path / "read", counts)
    assert [[checked["metadata"]["rows"], checked["metadata"]["null_rows"]]] == stored
    assert stored == [[2000, 0]]

    assert run(home_uri, "write", "2024-01-03", "NULL")["success"]
    checked = run(home_uri, "check")
    assert checked["success"] and not checked["passed"], checked
    stored = home_rows(hyper, home_uri, tmp_path / "read", counts)
    assert [[checked["metadata"]["rows"], checked["metadata"]["null_rows"]]] == stored
    assert stored == [[3000, 1000]]
    assert generation(home_uri) == 3  # the checks committed nothing


EVENTS = 'SELECT label, COUNT(*) FROM "Extract"."events" GROUP BY 1 ORDER BY 1'


@pytest.mark.slow
def test_a_publish_killed_after_sending_resumes_from_another_namespace(hyper, home_uri, tmp_path):
    """kill -9 at the worst point: the server started the update's job, the publish had
    not saved that it did. The next publish, in another namespace, finds the plan in the
    home and sends the batch again with the same RequestID, which the server runs once:
    appended rows arrive once, and the server's copy equals the file."""
    (tmp_path / "server").mkdir()
    with Emulator(tmp_path / "server", tokens={"ci": "secret"}, hyper=hyper) as emulator:
        assert run(home_uri, "append", "first")["success"]
        first = run(home_uri, "publish", tableau=emulator.url)
        assert (first["publish"], first["rows_sent"]) == ("full", 1000), first
        assert run(home_uri, "append", "second")["success"]
        before = generation(home_uri)
        killed = Step(
            home_uri, "publish", pause="manifest/", after_update=True, tableau=emulator.url
        )
        killed.wait_for("PAUSED ")
        killed.kill()
        assert generation(home_uri) > before  # its plan was committed before it sent
        resumed = run(home_uri, "publish", tableau=emulator.url)
        assert (resumed["success"], resumed["publish"]) == (True, "update"), resumed
        again = run(home_uri, "publish", tableau=emulator.url)
        assert (again["publish"], again["rows_sent"]) == ("none", 0), again
        remote = query(hyper, emulator.data_dir / "Shop.hyper", EVENTS)
    assert remote == home_rows(hyper, home_uri, tmp_path / "read", EVENTS)
    assert remote == [["first", 1000], ["second", 1000]]
