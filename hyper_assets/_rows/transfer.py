"""How rows travel between Spark and this process: through shared staging, or streamed.

- `shared`: Spark's executors write Parquet parts into a staging directory that this
  process reads too (one machine, a file system both mount, or an object store whose
  files are copied here: `StagingArea.pull`). Every write is checked:
  the rows in the parts this process sees must equal the rows Spark counted while it
  wrote them (an `Observation`), so parts left on the cluster's own disk are never taken
  for an empty frame.
- `stream`: a Spark Connect session sends the rows through its own channel as Arrow
  record batches, written to local files as they arrive (Arrow IPC streams, one per
  core up to 8, or Parquet for column types Hyper does not read from Arrow; a few
  batches in memory).
  Nothing is shared with, or installed on, the cluster.

`auto` picks `shared` when Spark reads a file this process staged and this process
reads one Spark wrote (a probe, once per session and staging root; a local classic
session with a local root needs none), else `stream` for Spark Connect; a classic
session on a cluster that cannot see the staging directory has no channel to stream
through, and gets a `StagingNotSharedError` saying what to do.
"""

from __future__ import annotations

import inspect
import logging
import os
import threading
import uuid
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, cast

import pyarrow as pa
import pyarrow.parquet as pq
from pyspark.errors import PySparkException
from pyspark.sql import DataFrame, Observation, SparkSession, functions as F, types as T
from pyspark.sql.pandas.types import from_arrow_schema

from hyper_assets._rows.spark import prepare_frame
from hyper_assets._rows.staging import (
    Staged,
    StagingArea,
    StagingMode,
    arrow_stream_readable,
    part_files,
    staged_row_count,
)
from hyper_assets.errors import (
    ConfigurationError,
    IngestError,
    StagingNotSharedError,
    StagingStoreError,
)

if TYPE_CHECKING:
    from pyspark.sql.connect.dataframe import DataFrame as ConnectDataFrame
    from pyspark.sql.connect.session import SparkSession as ConnectSession


def _py4j_error() -> tuple[type[Exception], ...]:
    """py4j's error of a JVM call, where there is a JVM gateway: pyspark-client and
    databricks-connect have none (nor py4j), and raise only PySparkException."""
    try:
        from py4j.protocol import Py4JJavaError
    except ImportError:
        return ()
    return (Py4JJavaError,)


#: What a Spark call raises: PySparkException, and py4j's error in a classic session.
SPARK_ERRORS: tuple[type[Exception], ...] = (PySparkException, *_py4j_error())


def _spark_said(error: Exception) -> str:
    """The first line of what Spark said: the Java exception's, for a JVM call's error."""
    java = getattr(error, "java_exception", None)
    said = java.toString() if java is not None else str(error)
    return str(said).strip().splitlines()[0] if str(said).strip() else type(error).__name__


#: Arrow IPC stream files that streamed rows are spread over (Hyper loads them in parallel).
STREAM_FILES = min(os.cpu_count() or 2, 8)
#: Arrow bytes buffered before a row group of the streamed Parquet file is written.
STREAM_ROW_GROUP_BYTES = 16 * 1024 * 1024

log = logging.getLogger(__name__)

#: What to do when Spark and this process do not share the staging directory.
WAYS_OUT = (
    "Set the HyperIOManager's staging_dir to storage both the executors and this process "
    "reach (a shared mount, or an object store URI), or use a Spark Connect session with "
    "staging_mode='auto' or 'stream' (rows then come through its channel)."
)

#: (staging root, store, session) -> None if they share it, else why not (clean answers).
_probed: dict[tuple[str, str, str], str | None] = {}
_probe_locks: dict[tuple[str, str, str], threading.Lock] = {}
_locks_lock = threading.Lock()


def is_connect(session: SparkSession) -> bool:
    """A Spark Connect session (told by its class, without importing the Connect client)."""
    return type(session).__module__.startswith("pyspark.sql.connect.")


def resolve_mode(
    requested: StagingMode, session: SparkSession, area: StagingArea, table: str
) -> StagingMode:
    """The mode a write or load of `table` through `session` uses."""
    if is_connect(session):
        _require_observing_client(session, table)
    if requested is StagingMode.STREAM and not is_connect(session):
        raise ConfigurationError(
            f"staging_mode='stream' for {table} needs a Spark Connect session (sc://...), "
            "and this one is classic. Use staging_mode='auto' or 'shared' with a staging_dir "
            "that the executors and this process both reach."
        )
    if requested is not StagingMode.AUTO:
        return requested
    local = not is_connect(session) and (session.conf.get("spark.master") or "").startswith("local")
    if local and area.remote is None:
        return StagingMode.SHARED  # the executors are threads of this process
    problem = _probe(session, area)
    if problem is None:
        return StagingMode.SHARED
    if is_connect(session):
        return StagingMode.STREAM
    raise StagingNotSharedError(
        f"The Spark cluster ({session.conf.get('spark.master', '?')}) and this process do "
        f"not share {area.label}, the staging directory, so Spark cannot hand {table}'s "
        f"rows to Hyper ({problem}); nothing was written. {WAYS_OUT}"
    )


def _require_observing_client(session: SparkSession, table: str) -> None:
    """Refuses a Spark Connect client that cannot report the rows a write observed.

    Every write checks the rows it staged against Spark's own count (an `Observation`);
    pyspark 3.5's Connect client fills no observation and streams without them, nor makes a
    DataFrame of an Arrow table, as loads do. Told by the client's signature, not a version.
    """
    client = cast("ConnectSession", session).client
    stream = getattr(client, "to_table_as_iterator", None)
    if stream is None or "observations" not in inspect.signature(stream).parameters:
        import pyspark

        raise ConfigurationError(
            f"{table}'s frame comes from a Spark Connect session of pyspark "
            f"{pyspark.__version__}, whose Connect client lacks what this library needs (the "
            "rows Spark produced, observed, which every write checks; a DataFrame made of an "
            "Arrow table, which every load sends); nothing was read or written. Use a "
            "pyspark 4.0+ (or pyspark-client) Connect client, or a classic session."
        )


def _session_key(session: SparkSession) -> str:
    if is_connect(session):
        return cast("ConnectSession", session).session_id
    return session.sparkContext.applicationId


def _probe(session: SparkSession, area: StagingArea) -> str | None:
    """None when Spark reads a file staged here and this process reads one Spark wrote;
    else what failed. A clean answer is kept per session and root; an error is not."""
    key = (area.label, area.store_key, _session_key(session))
    with _locks_lock:
        lock = _probe_locks.setdefault(key, threading.Lock())
    with lock:  # one probe per key at a time; other keys and cached answers do not wait
        if key in _probed:
            return _probed[key]
        problem, clean = _run_probe(session, area)
        if clean:
            _probed[key] = problem
        else:
            log.warning(
                "Staging probe of %s failed, asking again next time: %s", area.label, problem
            )
        return problem


def _run_probe(session: SparkSession, area: StagingArea) -> tuple[str | None, bool]:
    """What the probe found (None: shared), and whether that answer is clean to keep."""
    token = uuid.uuid4().hex
    try:
        with area.directory("probe") as directory:
            sent, received = directory / "sent.txt", directory / "received"
            sent.write_text(token)
            area.push(sent)
            seen = [row[0] for row in session.read.text(area.spark_uri(sent)).collect()]
            if seen != [token]:
                return f"Spark read {len(seen)} lines of {area.spark_uri(sent)}, not 1", True
            frame = session.createDataFrame([(token,)], "token string")
            frame.write.parquet(area.spark_uri(received))
            area.pull(received)
            files = part_files(received)
            tokens = [t for f in files for t in pq.read_table(f)["token"].to_pylist()]
    except StagingStoreError as error:
        return str(error), False
    except SPARK_ERRORS as error:
        # The file is not there (on the driver, or an executor): a clean answer.
        clean = any(c in str(error) for c in ("PATH_NOT_FOUND", "FILE_NOT_EXIST"))
        return f"Spark said: {_spark_said(error)}", clean
    if tokens != [token]:
        return f"this process found {len(tokens)} of the 1 row Spark wrote", True
    return None, True


def _counted(df: DataFrame) -> tuple[DataFrame, Observation]:
    """`df` prepared for staging, counting its rows as Spark produces them."""
    observation = Observation(f"hyper_assets_{uuid.uuid4().hex}")
    counted = prepare_frame(df).observe(observation, F.count(F.lit(1)).alias("rows"))
    return counted, observation


def _observed_rows(observation: Observation) -> int | None:
    """The rows Spark counted while producing a frame; None when it did not say."""
    rows = observation.get.get("rows")
    return None if rows is None else int(rows)


#: Times a frame's rows are produced before a step fails for want of Spark's count. A Spark
#: Connect server without the fix of SPARK-54279 (4.0.5 among them) waits only 100 ms for
#: a write's observed metrics and, under load, answers without them; nothing is written
#: from such an attempt, and the next one usually has them.
OBSERVED_ATTEMPTS = 3


def observed(attempt: Callable[[], Staged | None], table: str) -> Staged:
    """What `attempt` staged, made again while Spark did not report how many rows it
    produced (`attempt` returns None), up to OBSERVED_ATTEMPTS times in all."""
    for number in range(1, OBSERVED_ATTEMPTS + 1):
        staged = attempt()
        if staged is not None:
            return staged
        if number < OBSERVED_ATTEMPTS:
            log.warning(
                "Spark did not report how many rows of %s it produced (a Spark Connect server "
                "without the fix of SPARK-54279 can drop them under load); producing them "
                "again (attempt %d of %d).",
                table,
                number + 1,
                OBSERVED_ATTEMPTS,
            )
    raise IngestError(
        f"Spark did not report how many rows of {table} it produced, {OBSERVED_ATTEMPTS} times "
        "running, so they cannot be checked; nothing was written. A Spark Connect server "
        "without the fix of SPARK-54279 drops them under load: run the step again, or use a "
        "Spark with that fix; if it persists, report the Spark version."
    )


def stage(
    df: DataFrame,
    mode: StagingMode,
    area: StagingArea,
    directory: Path,
    compression: str,
    table: str,
) -> Staged:
    """Brings `df`'s rows into local files under `directory`, the way `mode` says."""
    if mode is StagingMode.SHARED:
        return observed(lambda: _stage_shared(df, area, directory, compression, table), table)
    return observed(lambda: _stream(df, directory, compression, table), table)


#: How Spark writes dates and timestamps before 1582 to Parquet. Spark 3.x refuses them by
#: default (EXCEPTION), and LEGACY rebases them to the Julian calendar; Hyper reads the
#: proleptic Gregorian values that CORRECTED writes, Spark 4's default. No write option
#: sets it: the session's setting is changed for the write, and restored after it.
_REBASE_IN_WRITE = "spark.sql.parquet.datetimeRebaseModeInWrite"


@dataclass
class _Rebase:
    """The writes of one session inside `_proleptic_dates`, and its setting before them."""

    writers: int = 0
    before: str | None = None


_rebases: dict[str, _Rebase] = {}
_rebases_lock = threading.Lock()


@contextmanager
def _proleptic_dates(session: SparkSession) -> Iterator[None]:
    """Spark writes dates as they are, whatever its session says, while the block runs.

    The setting is the session's: writes of one session in several threads share one
    change, made by the first and undone by the last, so that none is left with the
    session's own setting while it writes. A failed restore is logged, never raised over
    what the block raised.
    """
    key = _session_key(session)
    with _rebases_lock:
        rebase = _rebases.setdefault(key, _Rebase())
        if rebase.writers == 0:
            rebase.before = session.conf.get(_REBASE_IN_WRITE, None)
            if rebase.before != "CORRECTED":
                session.conf.set(_REBASE_IN_WRITE, "CORRECTED")
        rebase.writers += 1
    try:
        yield
    finally:
        with _rebases_lock:
            rebase.writers -= 1
            if rebase.writers == 0:
                del _rebases[key]
                try:
                    _restore(session, rebase.before)
                except SPARK_ERRORS as error:
                    log.warning(
                        "Could not restore the session's %s to %r: %s",
                        _REBASE_IN_WRITE,
                        rebase.before,
                        error,
                    )


def _restore(session: SparkSession, before: str | None) -> None:
    if before == "CORRECTED":
        return
    if before is None:
        session.conf.unset(_REBASE_IN_WRITE)
    else:
        session.conf.set(_REBASE_IN_WRITE, before)


def _stage_shared(
    df: DataFrame, area: StagingArea, directory: Path, compression: str, table: str
) -> Staged | None:
    """Has Spark write `df` as Parquet parts; fails unless this process sees every row.
    None when Spark did not report how many rows it wrote (a later attempt overwrites)."""
    target = directory / "parts"
    counted, observation = _counted(df)
    writer = counted.write.mode("overwrite").option("compression", compression)
    # Dictionaries cost Spark time and mostly get thrown away on high-cardinality columns;
    # the files are read once, locally (docs/performance.md).
    with _proleptic_dates(df.sparkSession):
        writer.option("parquet.enable.dictionary", "false").parquet(area.spark_uri(target))
    written = _observed_rows(observation)
    if written is None:
        return None
    area.pull(target)
    files = part_files(target) if target.is_dir() else []
    seen = staged_row_count(files)
    if seen > written:
        raise IngestError(
            f"Spark wrote {written} rows of {table} to {area.spark_uri(target)}, but the "
            f"committed parts there hold {seen}: files of another attempt were left beside "
            f"them. Nothing was written; {table} is unchanged. Run the step again; if it "
            "persists, check the cluster's output committer."
        )
    if seen < written:
        raise StagingNotSharedError(
            f"Spark wrote {written} rows of {table} to {area.spark_uri(target)}, but this "
            f"process sees {seen} there: the cluster and this process do not share "
            f"{area.label}. Nothing was written; {table} is unchanged. {WAYS_OUT}"
        )
    return Staged(tuple(files), seen)


def _stream(df: DataFrame, directory: Path, compression: str, table: str) -> Staged | None:
    """Receives `df` (Spark Connect) as Arrow batches into local files (`_Sink`), counting
    the rows as they arrive: the files are not read back to count them. None when Spark
    did not report how many rows it produced (a later attempt writes the files anew).

    `to_table_as_iterator` is the Connect client's own batch iterator behind
    `toLocalIterator`; pyspark has no public API that yields Arrow batches.
    """
    counted, observation = _counted(df)
    connect = cast("ConnectDataFrame", counted)  # the caller checked is_connect
    client = connect.sparkSession.client
    batches = client.to_table_as_iterator(
        connect._plan.to_proto(client), connect._plan.observations
    )
    received = 0
    with _Sink(directory, compression) as sink:
        for item in batches:
            if not isinstance(item, T.StructType) and item.num_rows:
                sink.add(item)
                received += item.num_rows
    written = _observed_rows(observation)
    if written is None:
        return None
    if received != written:
        raise IngestError(
            f"Spark produced {written} rows of {table} but {received} arrived through the "
            "Spark Connect channel; nothing was written. Run the step again."
        )
    return Staged(tuple(sink.paths), received)


class _Sink:
    """Writes arriving Arrow tables to local files as they come.

    When Hyper reads every column type from Arrow: `STREAM_FILES` IPC streams (one per
    core, at most 8), filled in turn. Writing them costs next to nothing, and Hyper
    scans each stream on one thread, so several load in parallel. Otherwise one Parquet
    file, in row groups of about STREAM_ROW_GROUP_BYTES.
    """

    def __init__(self, directory: Path, compression: str) -> None:
        self.directory, self.compression = directory, compression
        self.paths: list[Path] = []
        self.writers: list[pa.ipc.RecordBatchStreamWriter | pq.ParquetWriter] = []
        self.pending: list[pa.Table] = []
        self.size = self.tables = 0
        self.closing = ExitStack()  # every writer opened is closed, whatever fails

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
            for path in self.paths:
                self.writers.append(self.closing.enter_context(pa.ipc.new_stream(path, schema)))
        else:
            self.paths = [self.directory / "streamed.parquet"]
            writer = pq.ParquetWriter(self.paths[0], schema, compression=self.compression)
            self.writers.append(self.closing.enter_context(writer))

    def _flush(self) -> None:
        if self.pending:
            table = pa.concat_tables(self.pending)
            self.writers[0].write_table(table, row_group_size=len(table))
            self.pending, self.size = [], 0

    def __exit__(self, *exc: object) -> None:
        with self.closing:
            if exc[0] is None:
                self._flush()


def to_spark(
    session: SparkSession, area: StagingArea, path: Path, mode: StagingMode, table: str
) -> DataFrame:
    """A DataFrame of the Parquet file `path`: read by Spark, or sent to it in chunks."""
    if mode is StagingMode.SHARED:
        area.push(path)
        try:
            # Hyper writes proleptic Gregorian dates; Spark 3.x asks how to read old ones.
            reader = session.read.option("datetimeRebaseMode", "CORRECTED")
            frame = reader.option("int96RebaseMode", "CORRECTED").parquet(area.spark_uri(path))
            frame.schema  # noqa: B018 -- analysis lists the path now, not at a later action
        except SPARK_ERRORS as error:
            raise StagingNotSharedError(
                f"Spark cannot read {area.spark_uri(path)}, where this process exported "
                f"{table}: the cluster and this process do not share {area.label}. "
                f"{WAYS_OUT} Spark said: {error}"
            ) from error
        return frame
    # A chunk at least the cache threshold is uploaded as an artifact at once; smaller
    # ones ride inside the plan, so only the last chunk stays in this process's memory.
    threshold = int(session.conf.get("spark.sql.session.localRelationCacheThreshold") or 0)
    with pq.ParquetFile(path) as file:
        # A timestamp without time zone is TimestampNTZ, as Spark reads it from Parquet.
        schema = from_arrow_schema(file.schema_arrow, prefer_timestamp_ntz=True)
        chunks = [session.createDataFrame(c, schema) for c in _chunks(file, threshold)]
    return _union(chunks)


def _union(frames: list[DataFrame]) -> DataFrame:
    """The frames' rows, unioned as a balanced tree (a chain grows the plan's depth)."""
    while len(frames) > 1:
        pairs = zip(frames[::2], frames[1::2], strict=False)
        frames = [a.union(b) for a, b in pairs] + frames[len(frames) - len(frames) % 2 :]
    return frames[0]


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
