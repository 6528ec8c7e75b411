"""HyperIOManager through a Spark Connect server that shares no disk with this process.

The server runs in a private mount namespace (`cluster.private_mounts`): its /tmp, the
repository and the test's directories are empty tmpfs mounts, as on a remote machine
(Databricks Connect, a cluster on other hosts). Whatever Spark writes to a path lands on
its own disk. A second server keeps one directory visible (as an NFS mount would be):
there the probe finds it and shared staging is used. Each test runs `remote_job.py` in a
child process (this process holds a classic local session) and reads the stored rows
back from the .hyper file.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from cluster import EXECUTOR_CONF, connect_server, standalone_cluster
from helpers import ROWS_SQL, as_text, query

from hyper_assets._rows.outbox import Outbox

pytestmark = [pytest.mark.slow, pytest.mark.usefixtures("namespaces")]
HERE = Path(__file__).parent


@pytest.fixture(scope="module")
def remote(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    directory = tmp_path_factory.mktemp("remote-connect")
    with connect_server(directory, hidden=[tmp_path_factory.getbasetemp()]) as url:
        yield url


@pytest.fixture(scope="module")
def shared_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("nfs")


@pytest.fixture(scope="module")
def remote_with_shared_dir(
    tmp_path_factory: pytest.TempPathFactory, shared_dir: Path
) -> Iterator[str]:
    directory = tmp_path_factory.mktemp("remote-connect-nfs")
    hidden = [tmp_path_factory.getbasetemp()]
    with connect_server(directory, hidden=hidden, shared=[shared_dir]) as url:
        yield url


@pytest.fixture(scope="module")
def isolated_worker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A standalone master here and its one worker in a private mount namespace."""
    directory = tmp_path_factory.mktemp("isolated-worker")
    with standalone_cluster(directory, hidden=[tmp_path_factory.getbasetemp()]) as cluster:
        yield cluster.master_url


def run(
    url: str,
    database: Path,
    steps: list[Any],
    mode: str = "auto",
    staging: str = "",
    conf: dict[str, str] | None = None,
) -> list[dict[str, Any]]:
    """Runs `steps` through the Spark at `url` (sc://, or a classic master); their outcomes."""
    session = (
        {"spark.remote": url} if url.startswith("sc://") else EXECUTOR_CONF | {"spark.master": url}
    )
    config = session | {"spark.sql.session.timeZone": "America/New_York"} | (conf or {})
    arguments = [json.dumps(config), database, mode, json.dumps(steps), *[staging] * bool(staging)]
    completed = subprocess.run(
        [sys.executable, HERE / "remote_job.py", *arguments],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert completed.returncode == 0, completed.stderr[-3000:]
    return json.loads(completed.stdout.strip().splitlines()[-1])


def ok(outcomes: list[dict[str, Any]], mode: str = "stream") -> list[dict[str, Any]]:
    """The outcomes, after checking that every step succeeded in staging mode `mode`."""
    for outcome in outcomes:
        assert outcome["success"], outcome.get("message")
        assert outcome["metadata"]["staging_mode"] == mode
    return outcomes


def step(asset: str, start: int, end: int, label: str, **tags: Any) -> list[Any]:
    return [asset, {"start": start, "end": end, "label": label, **tags}]


def summary_of(hyper, database: Path, table: str) -> list[list[Any]]:
    """label, row count, distinct ids, min id, max id; per label."""
    return query(
        hyper,
        database,
        f'SELECT label, COUNT(*), COUNT(DISTINCT id), MIN(id), MAX(id) FROM "Extract".{table} '
        "GROUP BY label ORDER BY label",
    )


def test_full_refresh_of_an_existing_table(hyper, remote, tmp_path):
    database = tmp_path / "remote.hyper"
    first, second = ok(
        run(remote, database, [step("items", 0, 1000, "a"), step("items", 500, 1200, "b")])
    )
    assert first["metadata"]["dagster/row_count"] == 1000
    assert first["metadata"]["staged_format"] == "arrow stream"
    assert second["metadata"]["dagster/row_count"] == 700
    assert summary_of(hyper, database, "items") == [["b", 700, 700, 500, 1199]]
    assert query(
        hyper,
        database,
        'SELECT CAST(at AS TEXT), price FROM "Extract".items WHERE id = 600',
    ) == [["2024-01-01 08:40:00", 900.0]]


def test_columns_hyper_cannot_read_from_arrow_stream_through_parquet(hyper, remote, tmp_path):
    """Large string types (an Arrow type Hyper's stream reader refuses) go through Parquet."""
    database = tmp_path / "remote.hyper"
    large = {"spark.sql.execution.arrow.useLargeVarTypes": "true"}
    (written,) = ok(run(remote, database, [step("items", 0, 1000, "large")], conf=large))
    assert written["metadata"]["staged_format"] == "parquet"
    assert summary_of(hyper, database, "items") == [["large", 1000, 1000, 0, 999]]


def test_partition_replaced_twice(hyper, remote, tmp_path):
    database = tmp_path / "remote.hyper"
    ok(
        run(
            remote,
            database,
            [
                step("readings", 0, 100, "first", day="2024-01-01"),
                step("readings", 0, 100, "first", day="2024-01-02"),
                step("readings", 0, 150, "again", day="2024-01-02"),
            ],
        )
    )
    assert query(
        hyper,
        database,
        'SELECT CAST(day AS TEXT), label, COUNT(*), COUNT(DISTINCT id) FROM "Extract".readings '
        "GROUP BY 1, 2 ORDER BY 1",
    ) == [["2024-01-01", "first", 100, 100], ["2024-01-02", "again", 150, 150]]


def test_append_and_upsert(hyper, remote, tmp_path):
    database = tmp_path / "remote.hyper"
    ok(
        run(
            remote,
            database,
            [
                step("events", 0, 100, "a"),
                step("events", 100, 250, "b"),
                step("prices", 0, 100, "a"),
                step("prices", 50, 150, "b"),
            ],
        )
    )
    assert summary_of(hyper, database, "events") == [
        ["a", 100, 100, 0, 99],
        ["b", 150, 150, 100, 249],
    ]
    assert summary_of(hyper, database, "prices") == [["a", 50, 50, 0, 49], ["b", 100, 100, 50, 149]]


def test_streamed_rows_are_counted_as_they_arrive_and_never_read_back(hyper, remote, tmp_path):
    """The Arrow streams' rows are counted as they arrive (and checked against Spark's
    own count); the insert's check and the outbox's records take that count, so no write
    walks the streams' batches to count them again."""
    database = tmp_path / "remote.hyper"
    Outbox(database).start_tracking()
    steps = [step("events", 0, 100, "a"), step("prices", 0, 100, "a"), step("prices", 50, 150, "b")]
    outcomes = ok(run(remote, database, steps))
    assert [o["metadata"]["staged_format"] for o in outcomes] == ["arrow stream"] * 3
    assert [o["staged_row_counts"] for o in outcomes] == [0, 0, 0]
    changes = [(c.kind, c.rows, c.rows_before) for c in Outbox(database).changes()]
    assert changes == [("append", 100, 0), ("upsert", 100, None), ("upsert", 100, None)]
    assert summary_of(hyper, database, "events") == [["a", 100, 100, 0, 99]]
    assert summary_of(hyper, database, "prices") == [["a", 50, 50, 0, 49], ["b", 100, 100, 50, 149]]


def test_downstream_asset_loads_the_table_into_the_remote_session(hyper, remote, tmp_path):
    database = tmp_path / "remote.hyper"
    ok(run(remote, database, [step("items", 0, 1000, "x"), ["summary", {}]]))
    assert query(
        hyper, database, 'SELECT label, n, CAST(last_at AS TEXT) FROM "Extract".summary'
    ) == [["x", 1000, "2024-01-01 08:46:39"]]


def test_a_table_larger_than_one_upload_loads_back_in_chunks(hyper, remote, tmp_path):
    """300,000 rows (~10 MB of Arrow) against a 1 MB threshold: five chunks, unioned."""
    database = tmp_path / "remote.hyper"
    small = {"spark.sql.session.localRelationCacheThreshold": str(1024 * 1024)}
    ok(run(remote, database, [step("items", 0, 300_000, "x"), ["summary", {}]], conf=small))
    assert query(
        hyper, database, 'SELECT label, n, CAST(last_at AS TEXT) FROM "Extract".summary'
    ) == [["x", 300_000, "2024-01-04 19:49:59"]]


def test_empty_frame_empties_the_table(hyper, remote, tmp_path):
    database = tmp_path / "remote.hyper"
    _, empty = ok(run(remote, database, [step("items", 0, 1000, "a"), step("items", 0, 0, "a")]))
    assert empty["metadata"]["dagster/row_count"] == 0
    assert query(hyper, database, 'SELECT COUNT(*) FROM "Extract".items') == [[0]]


def test_shared_staging_that_is_not_shared_fails_and_keeps_every_table(hyper, remote, tmp_path):
    """With streaming off, no write mode stores the cluster's missing parts as no rows."""
    database = tmp_path / "remote.hyper"
    writes = [
        step("items", 0, 100, "old"),
        step("events", 0, 100, "old"),
        step("prices", 0, 100, "old"),
        step("readings", 0, 100, "old", day="2024-01-01"),
    ]
    ok(run(remote, database, writes))
    again = [[name, tags | {"label": "new", "end": 300}] for name, tags in writes]
    for outcome in run(remote, database, again, mode="shared"):
        assert not outcome["success"]
        assert outcome["error"] == "StagingNotSharedError"
        assert "this process sees 0 there" in outcome["message"]
        assert "staging_dir" in outcome["message"] and "stream" in outcome["message"]
    for table in ("items", "events", "prices", "readings"):
        assert summary_of(hyper, database, table) == [["old", 100, 100, 0, 99]]


def test_a_frame_larger_than_the_memory_it_may_use_streams_in_bounded_memory(
    hyper, remote, tmp_path
):
    """2.5M rows of ~170 bytes (~400 MB as Arrow) pass through ~a few batches of memory."""
    database = tmp_path / "remote.hyper"
    warm_up = step("wide", 0, 1000, "w")  # the first run's imports and connections
    _, wide = ok(run(remote, database, [warm_up, step("wide", 0, 2_500_000, "w", partitions=8)]))
    assert wide["metadata"]["dagster/row_count"] == 2_500_000
    grown = wide["peak_mb_after"] - wide["peak_mb_before"]
    assert grown < 150, f"the Python process's peak grew by {grown} MB"
    assert query(
        hyper,
        database,
        'SELECT COUNT(DISTINCT id), MIN(LENGTH(payload)), MAX(LENGTH(payload)) FROM "Extract".wide',
    ) == [[2_500_000, 128, 128]]


@pytest.mark.parametrize("as_uri", [False, True], ids=["path", "file-uri"])
def test_a_directory_both_sides_mount_is_found_and_used_for_shared_staging(
    hyper, remote_with_shared_dir, shared_dir, tmp_path, as_uri
):
    database = tmp_path / "remote.hyper"
    staging = shared_dir / "staging"
    steps = [step("items", 0, 1000, "a"), step("items", 0, 400, "b"), ["summary", {}]]
    uri = staging.as_uri() if as_uri else str(staging)
    ok(run(remote_with_shared_dir, database, steps, staging=uri), mode="shared")
    assert summary_of(hyper, database, "items") == [["b", 400, 400, 0, 399]]
    assert query(hyper, database, 'SELECT label, n FROM "Extract".summary') == [["b", 400]]
    assert list(staging.rglob("*.parquet")) == []  # each write's parts were removed


def test_classic_session_whose_executors_cannot_see_the_staging_directory(
    hyper, isolated_worker, tmp_path
):
    """Driver here, executors elsewhere: the driver commits an empty directory with a
    _SUCCESS marker, and only the row count tells that the parts are on another disk."""
    database = tmp_path / "classic.hyper"
    ok(run("local[1]", database, [step("items", 0, 100, "old")]), mode="shared")
    # One session on the isolated worker (its executors start once), one write per mode.
    new = [step("items", 0, 300, "new", staging_mode=m) for m in ("auto", "shared", "stream")]
    probed, written, streamed = run(isolated_worker, database, new)
    assert probed["error"] == "StagingNotSharedError", probed["message"][:3000]
    assert "do not share" in probed["message"] and "Spark Connect" in probed["message"]
    assert "Spark said: " in probed["message"], probed["message"]  # the executor, quoted
    assert written["error"] == "StagingNotSharedError"
    assert "Spark wrote 300 rows of Extract.items" in written["message"]
    assert "this process sees 0 there" in written["message"]
    assert streamed["error"] == "ConfigurationError"
    assert "needs a Spark Connect session" in streamed["message"]
    assert summary_of(hyper, database, "items") == [["old", 100, 100, 0, 99]]


def test_every_spark_type_streams_and_loads_back(spark, hyper, remote, tmp_path):
    """The round trip of test_types, through the remote server: the same text, the same types."""
    database, out = tmp_path / "types.hyper", tmp_path / "back.json"
    written, loaded = run(remote, database, [["typed", {}], ["typed_back", {"out": str(out)}]])
    ok([written])
    assert loaded["success"], loaded.get("message")
    from pyspark.sql import functions as F

    source = spark.sql(ROWS_SQL).withColumn("row", F.monotonically_increasing_id()).coalesce(1)
    back = json.loads(out.read_text())
    assert [tuple(r) for r in back["rows"]] == as_text(source)
    assert back["types"] == {f.name: f.dataType.simpleString() for f in source.schema.fields}
    assert query(hyper, database, 'SELECT CAST(ts AS TEXT) FROM "Extract".typed ORDER BY "row"')[
        1
    ] == ["2024-03-10 03:30:00"]
