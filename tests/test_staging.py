"""Staging areas and the transfer between Spark and this process, without a cluster.

An s3:// staging root is exercised against moto's S3 server on loopback (real HTTP, the
S3 protocol pyarrow speaks); Spark's own s3a connector is not run here (this machine
cannot fetch hadoop-aws), so the cluster's side of an object store is not tested.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import pyarrow as pa
import pyarrow.fs as pafs
import pyarrow.parquet as pq
import pytest
from helpers import query
from object_stores import moto_server
from tableauhyperapi import Connection, CreateMode

from hyper_assets import HyperIOManager
from hyper_assets._rows.ingest import external_sql
from hyper_assets._rows.staging import (
    RemoteRoot,
    S3Staging,
    StagingArea,
    arrow_stream_readable,
    parse_root,
    staged_row_count,
)
from hyper_assets._rows.transfer import (
    OBSERVED_ATTEMPTS,
    StagingMode,
    _chunks,
    _probe,
    _probed,
    _stage_shared,
    _union,
    observed,
    resolve_mode,
    stage,
)
from hyper_assets.errors import (
    ConfigurationError,
    IngestError,
    StagingNotSharedError,
    StagingStoreError,
)

SECRET = "s3cr3t-value-never-shown"


@pytest.fixture(scope="module")
def s3() -> Iterator[S3Staging]:
    """moto's S3 server on loopback, with one bucket."""
    with moto_server() as (host, port):
        yield _staging(host, port)


def _staging(host: str, port: int) -> S3Staging:
    """S3 staging options for moto at `host:port`, with its bucket created."""
    options = S3Staging(
        access_key_id="test",
        secret_access_key=SECRET,
        region="us-east-1",
        endpoint_url=f"http://{host}:{port}",
    )
    filesystem = pafs.S3FileSystem(
        access_key="test",
        secret_key=SECRET,
        region="us-east-1",
        endpoint_override=f"{host}:{port}",
        scheme="http",
        allow_bucket_creation=True,
    )
    filesystem.create_dir("staging-bucket")
    return options


def store(area: StagingArea) -> pafs.FileSystem:
    """The store behind `area`, as pyarrow reaches it."""
    assert area.remote is not None
    return area.remote.connect()[0]


def files_under(area: StagingArea, prefix: str) -> list[str]:
    selector = pafs.FileSelector(prefix, recursive=True, allow_not_found=True)
    infos = store(area).get_file_info(selector)
    return sorted(i.path for i in infos if i.type is pafs.FileType.File)


def test_roots_are_parsed_once_into_paths_or_remote_stores(tmp_path):
    assert parse_root(str(tmp_path)) == tmp_path
    assert parse_root((tmp_path / "a b").as_uri()) == tmp_path / "a b"
    remote = parse_root("s3a://bucket/some/prefix/", S3Staging(region="eu-west-1"))
    assert isinstance(remote, RemoteRoot)
    assert (remote.uri, remote.scheme) == ("s3a://bucket/some/prefix", "s3")
    assert remote.connect()[1] == "bucket/some/prefix"  # the region given: no lookup
    with pytest.raises(ConfigurationError, match=r"ftp:// is not a store .*'s3a'"):
        parse_root("ftp://host/dir")


def test_an_unknown_store_is_refused_when_the_io_manager_is_defined(tmp_path):
    with pytest.raises(ConfigurationError, match="sftp://"):
        HyperIOManager(database=str(tmp_path / "x.hyper"), staging_dir="sftp://h/d")


def test_spark_stages_under_a_root_whose_path_needs_quoting(spark, tmp_path):
    """Spark gets file:// URIs (not the cluster's default file system), unquoted as
    Hadoop's Path reads them: a %20 would make Spark write to a directory of that name."""
    area = StagingArea(str(tmp_path / "staging a b é#%"))
    frame = spark.range(10).selectExpr("id", "CAST(id AS STRING) AS name")
    with area.directory("write") as directory:
        assert area.spark_uri(directory).startswith("file:///")
        staged = stage(frame, StagingMode.SHARED, area, directory, "snappy", "Extract.t")
        assert staged.rows == staged_row_count(staged.files) == 10
        assert all(f.is_relative_to(directory) for f in staged.files)
    assert _probe(spark, area) is None
    assert sorted(p.name for p in tmp_path.iterdir()) == ["staging a b é#%"]  # no %20 twin


def test_urls_with_a_secret_a_host_or_a_stray_s3_config_are_refused(tmp_path):
    database = str(tmp_path / "x.hyper")
    with pytest.raises(ConfigurationError, match="holds a secret") as raised:
        HyperIOManager(database=database, staging_dir="s3://KEY:SECRET@bucket/x")
    assert "SECRET" not in str(raised.value)
    with pytest.raises(ConfigurationError, match="holds a secret"):
        HyperIOManager(database=database, staging_dir="abfss://c:KEY@acct.dfs.core.windows.net/x")
    with pytest.raises(ConfigurationError, match="names host 'nfshost'"):
        HyperIOManager(database=database, staging_dir="file://nfshost/share")
    with pytest.raises(ConfigurationError, match="staging_s3 is set"):
        HyperIOManager(database=database, staging_dir=str(tmp_path), staging_s3=S3Staging())


def test_a_store_is_not_reached_until_used(tmp_path):
    """Defining needs no JVM, namenode or network; the first use names what failed."""
    manager = HyperIOManager(database=str(tmp_path / "x.hyper"), staging_dir="hdfs://nn:8020/x")
    with manager.staging.directory("write") as directory:
        (directory / "f.txt").write_text("x")
        with pytest.raises(StagingStoreError, match=r"could not upload to hdfs://nn:8020/x"):
            manager.staging.push(directory / "f.txt")


def test_s3_staging_copies_both_ways_and_removes_the_remote_twin(s3, tmp_path):
    area = StagingArea("s3a://staging-bucket/hyper", s3)
    table = pa.table({"id": list(range(1000)), "name": [f"n{i}" for i in range(1000)]})
    with area.directory("write") as directory:
        name = directory.name
        assert area.spark_uri(directory / "parts") == f"s3a://staging-bucket/hyper/{name}/parts"
        # What Spark's s3a committer leaves: parts and a _SUCCESS marker under the twin.
        for i, part in enumerate((table.slice(0, 600), table.slice(600))):
            with store(area).open_output_stream(
                f"staging-bucket/hyper/{name}/parts/part-{i}.snappy.parquet"
            ) as out:
                pq.write_table(part, out)
        store(area).open_output_stream(f"staging-bucket/hyper/{name}/parts/_SUCCESS").close()
        area.pull(directory / "parts")
        pulled = sorted((directory / "parts").glob("*.parquet"))
        assert staged_row_count(pulled) == 1000
        assert pa.concat_tables(pq.read_table(p) for p in pulled).sort_by("id") == table
        export = directory / "table.parquet"
        pq.write_table(table, export)
        area.push(export)
        assert files_under(area, f"staging-bucket/hyper/{name}") == [
            f"staging-bucket/hyper/{name}/parts/_SUCCESS",
            f"staging-bucket/hyper/{name}/parts/part-0.snappy.parquet",
            f"staging-bucket/hyper/{name}/parts/part-1.snappy.parquet",
            f"staging-bucket/hyper/{name}/table.parquet",
        ]
    assert not directory.exists()
    assert files_under(area, "staging-bucket/hyper") == []


def test_pulling_what_spark_never_wrote_gives_no_files(s3, tmp_path):
    area = StagingArea("s3://staging-bucket/empty", s3)
    with area.directory("write") as directory:
        area.pull(directory / "parts")
        assert not (directory / "parts").exists()


def test_credentials_never_appear_in_reprs(s3, tmp_path):
    manager = HyperIOManager(
        database=str(tmp_path / "x.hyper"), staging_dir="s3://staging-bucket/x", staging_s3=s3
    )
    assert SECRET not in repr(s3) and SECRET not in repr(manager)


def test_arrow_streams_are_loaded_with_their_types_and_nullability(hyper, tmp_path):
    schema = pa.schema(
        [
            pa.field("id", pa.int64(), nullable=False),
            pa.field("small", pa.int8()),
            pa.field("ratio", pa.float32()),
            pa.field("price", pa.decimal128(10, 2)),
            pa.field("at", pa.timestamp("us")),
            pa.field("name", pa.string()),
        ]
    )
    assert arrow_stream_readable(schema)
    assert not arrow_stream_readable(pa.schema([("s", pa.large_string())]))
    rows = pa.table(
        {
            "id": [1, 2, 3],
            "small": [1, None, -3],
            "ratio": [0.5, 1.5, None],
            "price": pa.array([None, 2, 3], pa.decimal128(10, 2)),
            "at": pa.array([0, 1, None], pa.timestamp("us")),
            "name": ["a", None, "c"],
        },
        schema=schema,
    )
    files = [tmp_path / "s-0.arrows", tmp_path / "s-1.arrows"]
    for path, part in zip(files, (rows.slice(0, 2), rows.slice(2)), strict=True):
        with pa.ipc.new_stream(path, schema) as writer:
            writer.write_table(part)
    database = tmp_path / "t.hyper"
    with Connection(hyper.endpoint, database, CreateMode.CREATE) as connection:
        connection.execute_command(  # a version 2 file stores no REAL: cast it
            "CREATE TABLE t AS SELECT id, small, CAST(ratio AS DOUBLE PRECISION) AS ratio, price, "
            f"at, name FROM {external_sql(files)}"
        )
    # Hyper is told the stream's nullability (and each type it requires, float32: REAL).
    assert '"id" BIGINT NOT NULL, "small" SMALLINT, "ratio" REAL,' in external_sql(files)
    described = query(
        hyper,
        database,
        "SELECT COUNT(*), SUM(small), SUM(ratio), SUM(price), COUNT(at), "
        "STRING_AGG(name, ',' ORDER BY id) FROM t",
    )
    assert [list(map(str, described[0]))] == [["3", "-2", "2.0", "5.00", "2", "a,c"]]
    assert query(hyper, tmp_path / "t.hyper", "SELECT id FROM t ORDER BY id") == [[1], [2], [3]]


def test_chunks_cover_every_row_and_an_empty_file_gives_one_empty_chunk(tmp_path):
    path = tmp_path / "t.parquet"
    table = pa.table({"id": list(range(200_000))})
    pq.write_table(table, path, row_group_size=50_000)
    with pq.ParquetFile(path) as file:
        chunks = list(_chunks(file, chunk_bytes=600_000))
    assert [len(c) for c in chunks] == [65536 * 2, 200_000 - 65536 * 2]
    assert pa.concat_tables(chunks) == table
    pq.write_table(table.slice(0, 0), path)
    with pq.ParquetFile(path) as file:
        (empty,) = _chunks(file, chunk_bytes=1)
    assert len(empty) == 0 and empty.schema == table.schema


@dataclass(frozen=True)
class Tree:
    """Records how `_union` combines its leaves (a classic plan flattens unions, so the
    shape shows only in a Connect plan; this records it without one)."""

    depth: int = 0
    leaves: int = 1

    def union(self, other: Tree) -> Tree:
        return Tree(max(self.depth, other.depth) + 1, self.leaves + other.leaves)


def test_chunks_are_unioned_as_a_balanced_tree(spark):
    frames = [spark.range(i * 10, i * 10 + 10) for i in range(5)]
    assert sorted(r.id for r in _union(frames).collect()) == list(range(50))
    assert _union(frames[:1]) is frames[0]
    shapes = {n: _union([Tree()] * n) for n in (2, 5, 8, 100)}
    assert {n: (t.depth, t.leaves) for n, t in shapes.items()} == {
        2: (1, 2),
        5: (3, 5),
        8: (3, 8),
        100: (7, 100),
    }  # a chain would be n - 1 deep


def test_a_local_session_stages_in_place_and_a_probe_answer_is_kept(spark, tmp_path):
    area = StagingArea(str(tmp_path / "st"))
    assert resolve_mode(StagingMode.AUTO, spark, area, "t") is StagingMode.SHARED
    with pytest.raises(ConfigurationError, match="needs a Spark Connect session"):
        resolve_mode(StagingMode.STREAM, spark, area, "t")
    assert _probe(spark, area) is None  # Spark read the token, and wrote one read here
    assert (area.label, "", spark.sparkContext.applicationId) in _probed
    assert list((tmp_path / "st").iterdir()) == []  # the probe's files are gone


def test_a_cluster_that_cannot_reach_the_store_fails_quoting_spark_and_is_asked_again(spark, s3):
    """This Spark has no s3a connector: the probe's failure is quoted, and not kept."""
    area = StagingArea("s3a://staging-bucket/probe", s3)
    for _ in range(2):  # asked again: the same answer, from a second probe
        with pytest.raises(StagingNotSharedError, match=r"Spark said: .*s3a") as raised:
            resolve_mode(StagingMode.AUTO, spark, area, "Extract.items")
        assert "Extract.items" in str(raised.value)
        assert "s3a://staging-bucket/probe" in str(raised.value)
        assert not any(key[0] == area.label for key in _probed)
    assert files_under(area, "staging-bucket/probe") == []  # the token file was removed


def test_a_store_this_process_cannot_reach_is_a_named_error(spark, s3, tmp_path):
    area = StagingArea("s3://no-such-bucket/x", s3)
    with area.directory("load") as directory:
        (directory / "t.parquet").write_bytes(b"PAR1")
        with pytest.raises(StagingStoreError, match="could not upload to s3://no-such-bucket/x"):
            area.push(directory / "t.parquet")
    # The probe says so too (a classic session has no channel to stream through).
    with pytest.raises(StagingNotSharedError, match="could not upload to"):
        resolve_mode(StagingMode.AUTO, spark, area, "Extract.items")


@pytest.mark.parametrize("dropped", range(OBSERVED_ATTEMPTS + 1))
def test_rows_whose_count_spark_did_not_report_are_produced_again(spark, tmp_path, dropped):
    """A Spark Connect server without SPARK-54279's fix can answer a write without its
    observed count (the attempt is then None): the rows are written again, over the last
    attempt's, up to OBSERVED_ATTEMPTS times in all; then a named error."""
    area = StagingArea(str(tmp_path / "st"))
    attempts = []
    with area.directory("write") as directory:  # one write's directory, as stage()'s

        def attempt():
            frame = spark.range(len(attempts) * 10, len(attempts) * 10 + 5)
            staged = _stage_shared(frame, area, directory, "snappy", "Extract.items")
            assert staged is not None  # a local session always reports its count
            attempts.append(
                sorted(i for f in staged.files for i in pq.read_table(f)["id"].to_pylist())
            )
            return None if len(attempts) <= dropped else staged

        if dropped == OBSERVED_ATTEMPTS:
            with pytest.raises(IngestError, match=r"Extract\.items it produced, 3 times"):
                observed(attempt, "Extract.items")
        else:
            assert observed(attempt, "Extract.items").rows == 5
    assert len(attempts) == min(dropped + 1, OBSERVED_ATTEMPTS)
    # Each attempt's parts hold its own rows alone: none is left from the one before.
    assert attempts == [list(range(n * 10, n * 10 + 5)) for n in range(len(attempts))]


@pytest.mark.parametrize("setting", ["LEGACY", "EXCEPTION", None])
def test_old_dates_are_stored_as_they_are_and_the_sessions_rebase_setting_is_left_alone(
    spark, hyper, tmp_path, setting
):
    """Spark 3.x refuses dates before 1582 in Parquet (EXCEPTION) and LEGACY would rebase
    them to the Julian calendar: either way the write stores them as Spark shows them, and
    the session keeps its own setting."""
    from dagster import asset, materialize

    rebase = "spark.sql.parquet.datetimeRebaseModeInWrite"
    before = spark.conf.get(rebase, None)
    if setting is None:
        spark.conf.unset(rebase)
    else:
        spark.conf.set(rebase, setting)
    expected = spark.conf.get(rebase, None)

    @asset
    def old_days():
        return spark.sql("SELECT DATE'1000-01-01' AS d, TIMESTAMP_NTZ'1200-06-30 12:00:00' AS t")

    database = tmp_path / "old.hyper"
    try:
        io = HyperIOManager(database=str(database))
        assert materialize([old_days], resources={"io_manager": io}).success
        assert spark.conf.get(rebase, None) == expected
    finally:
        if before is None:
            spark.conf.unset(rebase)
        else:
            spark.conf.set(rebase, before)
    stored = query(
        hyper, database, 'SELECT CAST(d AS TEXT), CAST(t AS TEXT) FROM "Extract".old_days'
    )
    assert stored == [["1000-01-01", "1200-06-30 12:00:00"]]
