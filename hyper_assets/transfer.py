"""How rows travel between Spark and this process: through shared staging, or streamed.

- `shared`: Spark's executors write Parquet parts into a staging directory that this
  process reads too (one machine, or a file system both mount). Every write is checked:
  the rows in the parts this process sees must equal the rows Spark counted while it
  wrote them (an `Observation`), so parts left on the cluster's own disk are never taken
  for an empty frame.
- `stream`: a Spark Connect session sends the rows through its own channel as Arrow
  record batches, written to local files as they arrive (Arrow IPC streams, one per
  core, or Parquet for column types Hyper does not read from Arrow; a few batches in
  memory).
  Nothing is shared with, or installed on, the cluster.

`auto` picks `shared` when Spark reads back a file this process staged (a probe, once
per session and staging root; a local classic session needs none), else `stream` for
Spark Connect; a classic session on a cluster that cannot see the staging directory has
no channel to stream through, and gets a `StagingNotSharedError` saying what to do.
"""

from __future__ import annotations

import functools
import os
import uuid
from collections.abc import Iterator
from enum import StrEnum
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
from py4j.protocol import Py4JJavaError
from pyspark.errors import PySparkException
from pyspark.sql import DataFrame, Observation, SparkSession
from pyspark.sql import functions as F
from pyspark.sql import types as T
from pyspark.sql.pandas.types import from_arrow_schema

from hyper_assets.errors import ConfigurationError, IngestError, StagingNotSharedError
from hyper_assets.spark import prepare_frame
from hyper_assets.staging import (
    StagingArea,
    arrow_stream_readable,
    part_files,
    staged_row_count,
)


class StagingMode(StrEnum):
    """How a Spark DataFrame reaches Hyper (`HyperIOManager.staging_mode`)."""

    AUTO = "auto"  # shared when verified by a probe, else stream (Spark Connect)
    SHARED = "shared"  # Parquet parts in a directory both sides see; checked every write
    STREAM = "stream"  # Arrow batches through the Spark Connect channel


#: Arrow IPC stream files that streamed rows are spread over (Hyper loads them in parallel).
STREAM_FILES = min(os.cpu_count() or 2, 8)
#: Arrow bytes buffered before a row group of the streamed Parquet file is written.
STREAM_ROW_GROUP_BYTES = 16 * 1024 * 1024

#: (staging root, session) -> whether Spark saw this process's staging directory.
_probed: dict[tuple[str, str], bool] = {}


def is_connect(session: SparkSession) -> bool:
    """A Spark Connect session (told by its class, without importing the Connect client)."""
    return type(session).__module__.startswith("pyspark.sql.connect.")


def resolve_mode(
    requested: StagingMode, session: SparkSession, area: StagingArea, table: str
) -> StagingMode:
    """The mode a write or load of `table` through `session` uses."""
    if requested is StagingMode.STREAM and not is_connect(session):
        raise ConfigurationError(
            f"staging_mode='stream' for {table} needs a Spark Connect session (sc://...), "
            "and this one is classic. Use staging_mode='auto' or 'shared' with a staging_dir "
            "that the executors and this process both see."
        )
    if requested is not StagingMode.AUTO:
        return requested
    if not is_connect(session) and session.conf.get("spark.master", "").startswith("local"):
        return StagingMode.SHARED  # the executors are threads of this process
    if _staging_shared(session, area):
        return StagingMode.SHARED
    if is_connect(session):
        return StagingMode.STREAM
    raise StagingNotSharedError(
        f"The Spark cluster ({session.conf.get('spark.master', '?')}) cannot read "
        f"{area.root}, this process's staging directory, so it cannot hand {table}'s "
        "rows to Hyper; nothing was written. Set the HyperIOManager's staging_dir to a "
        "directory both the executors and this process mount, or use a Spark Connect "
        "session (rows then stream through its channel)."
    )


def _session_key(session: SparkSession) -> str:
    if is_connect(session):
        return session.session_id
    return session.sparkContext.applicationId


def _staging_shared(session: SparkSession, area: StagingArea) -> bool:
    """Whether Spark reads a file this process writes under the staging root."""
    key = (str(area.root), _session_key(session))
    if key not in _probed:
        token = uuid.uuid4().hex
        with area.directory("probe") as directory:
            (directory / "probe.txt").write_text(token)
            try:
                seen = [row[0] for row in session.read.text(str(directory)).collect()]
            except (PySparkException, Py4JJavaError):
                seen = []  # PATH_NOT_FOUND on the driver, FILE_NOT_EXIST on an executor
        _probed[key] = seen == [token]
    return _probed[key]


def _counted(df: DataFrame) -> tuple[DataFrame, Observation]:
    """`df` prepared for staging, counting its rows as Spark produces them."""
    observation = Observation(f"hyper_assets_{uuid.uuid4().hex}")
    counted = prepare_frame(df).observe(observation, F.count(F.lit(1)).alias("rows"))
    return counted, observation


def _observed_rows(observation: Observation, table: str) -> int:
    """The rows Spark counted while producing `table`'s frame."""
    rows = observation.get.get("rows")
    if rows is None:
        raise IngestError(
            f"Spark did not report how many rows of {table} it produced, so they cannot be "
            "checked; nothing was written. Run the step again; if it persists, report the "
            "Spark version."
        )
    return int(rows)


def stage_shared(df: DataFrame, directory: Path, compression: str, table: str) -> list[Path]:
    """Has Spark write `df` as Parquet parts; fails unless this process sees every row."""
    target = directory / "parts"
    counted, observation = _counted(df)
    writer = counted.write.mode("overwrite").option("compression", compression)
    # Dictionaries cost Spark time and mostly get thrown away on high-cardinality columns;
    # the files are read once, locally (docs/performance.md).
    writer.option("parquet.enable.dictionary", "false").parquet(str(target))
    written = _observed_rows(observation, table)
    files = part_files(target)
    seen = staged_row_count(files)
    if not target.is_dir() or seen != written:
        raise StagingNotSharedError(
            f"Spark wrote {written} rows of {table} to {target}, but this process sees "
            f"{seen} there: the cluster wrote to a disk this process does not share. "
            f"Nothing was written; {table} is unchanged. Either set the HyperIOManager's "
            "staging_dir to a directory both sides mount (a path or file:// URI), or, with "
            "Spark Connect, set staging_mode='auto' or 'stream' so the rows come through "
            "the Connect channel."
        )
    return files


def stream(df: DataFrame, directory: Path, compression: str, table: str) -> list[Path]:
    """Receives `df` (Spark Connect) as Arrow batches into local files (`_Sink`).

    `to_table_as_iterator` is the Connect client's own batch iterator behind
    `toLocalIterator`; pyspark has no public API that yields Arrow batches.
    """
    counted, observation = _counted(df)
    client = counted.sparkSession.client
    plan = counted._plan.to_proto(client)
    received = 0
    with _Sink(directory, compression) as sink:
        for item in client.to_table_as_iterator(plan, counted._plan.observations):
            if not isinstance(item, T.StructType) and item.num_rows:
                sink.add(item)
                received += item.num_rows
    written = _observed_rows(observation, table)
    if received != written:
        raise IngestError(
            f"Spark produced {written} rows of {table} but {received} arrived through the "
            "Spark Connect channel; nothing was written. Run the step again."
        )
    return sink.paths


class _Sink:
    """Writes arriving Arrow tables to local files as they come.

    When Hyper reads every column type from Arrow: IPC streams, one per core, filled in
    turn. Writing them costs next to nothing, and Hyper scans each stream on one thread,
    so several load in parallel. Otherwise one Parquet file, in row groups of about
    STREAM_ROW_GROUP_BYTES.
    """

    def __init__(self, directory: Path, compression: str) -> None:
        self.directory, self.compression = directory, compression
        self.paths: list[Path] = []
        self.writers: list[pa.ipc.RecordBatchStreamWriter | pq.ParquetWriter] = []
        self.pending: list[pa.Table] = []
        self.size = self.tables = 0

    def __enter__(self) -> _Sink:
        return self

    def add(self, table: pa.Table) -> None:
        if not self.writers:
            self._open(table.schema)
        if isinstance(self.writers[0], pq.ParquetWriter):
            self.pending.append(table)
            self.size += table.nbytes
            if self.size >= STREAM_ROW_GROUP_BYTES:
                self._flush()
        else:
            self.writers[self.tables % len(self.writers)].write_table(table)
        self.tables += 1

    def _open(self, schema: pa.Schema) -> None:
        if arrow_stream_readable(schema):
            self.paths = [self.directory / f"streamed-{i}.arrows" for i in range(STREAM_FILES)]
            self.writers = [pa.ipc.new_stream(str(p), schema) for p in self.paths]
        else:
            self.paths = [self.directory / "streamed.parquet"]
            self.writers = [pq.ParquetWriter(self.paths[0], schema, compression=self.compression)]

    def _flush(self) -> None:
        if self.pending:
            table = pa.concat_tables(self.pending)
            self.writers[0].write_table(table, row_group_size=len(table))
            self.pending, self.size = [], 0

    def __exit__(self, *exc: object) -> None:
        try:
            if exc[0] is None:
                self._flush()
        finally:
            for writer in self.writers:
                writer.close()


def to_spark(session: SparkSession, path: Path, mode: StagingMode, table: str) -> DataFrame:
    """A DataFrame of the Parquet file `path`: read by Spark, or sent to it in chunks."""
    if mode is StagingMode.SHARED:
        frame = session.read.parquet(str(path))
        try:
            frame.schema  # noqa: B018 -- analysis lists the path now, not at a later action
        except PySparkException as error:
            raise StagingNotSharedError(
                f"Spark cannot read {path}, where this process exported {table}: the "
                "cluster does not share the staging directory. Set staging_dir to storage "
                "both sides reach, or use Spark Connect with staging_mode='auto' or "
                f"'stream'. Spark said: {error}"
            ) from error
        return frame
    # A chunk at least the cache threshold is uploaded as an artifact at once; smaller
    # ones ride inside the plan, so only the last chunk stays in this process's memory.
    threshold = int(session.conf.get("spark.sql.session.localRelationCacheThreshold"))
    with pq.ParquetFile(path) as file:
        # A timestamp without time zone is TimestampNTZ, as Spark reads it from Parquet.
        schema = from_arrow_schema(file.schema_arrow, prefer_timestamp_ntz=True)
        chunks = [session.createDataFrame(c, schema) for c in _chunks(file, threshold)]
    return functools.reduce(lambda a, b: a.union(b), chunks)


def _chunks(file: pq.ParquetFile, chunk_bytes: int) -> Iterator[pa.Table]:
    """The file's rows as tables of at least `chunk_bytes` (but the last); one if empty."""
    pending: list[pa.RecordBatch] = []
    size = 0
    for batch in file.iter_batches(batch_size=64 * 1024):
        pending.append(batch)
        size += batch.nbytes
        if size >= chunk_bytes:
            yield pa.Table.from_batches(pending)
            pending, size = [], 0
    if pending or file.metadata.num_rows == 0:
        yield pa.Table.from_batches(pending, schema=file.schema_arrow)
