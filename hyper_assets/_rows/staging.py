"""Internal (`S3Staging` is public): staging areas for the files Hyper loads and exports.

Staged files are Parquet (Spark's parts, an Arrow table) or an Arrow IPC stream (rows
streamed from Spark Connect, `hyper_assets._rows.transfer`). Whatever stages them returns a
`Staged`: the files and their rows, counted once, which the write checks and records.

A staging directory lives under a root on this machine: a local temp directory by
default, or a shared file system that a cluster writes to. With a remote root (an
object store or HDFS URI) each directory has a twin there that Spark reads and writes,
and files are copied between the two (`StagingArea.push` / `pull`). Each write gets its own
directory, removed on success and on failure; local directories left by killed
processes are removed by the next process on the same host that stages under the same
root (remote twins are not: give the remote prefix a lifecycle rule).
"""

from __future__ import annotations

import os
import shutil
import socket
import tempfile
import uuid
from collections.abc import Iterator, Sequence
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path
from urllib.parse import urlparse
from urllib.request import url2pathname

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.fs as pafs
import pyarrow.parquet as pq

from hyper_assets._base.env import plain
from hyper_assets._base.store_settings import S3Settings, checked_endpoint
from hyper_assets.errors import ConfigurationError, DataError, StagingStoreError


class StagingMode(StrEnum):
    """How a Spark DataFrame reaches Hyper (`HyperIOManager.staging_mode`;
    `hyper_assets._rows.transfer` carries it out)."""

    AUTO = "auto"  # shared when verified by a probe, else stream (Spark Connect)
    SHARED = "shared"  # Parquet parts in a directory both sides see; checked every write
    STREAM = "stream"  # Arrow batches through the Spark Connect channel


def default_staging_root() -> Path:
    return Path(tempfile.gettempdir()) / f"hyper-assets-staging-{os.getuid()}"


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _owner_prefix() -> str:
    """`host~pid~`: a shared staging root may serve several machines."""
    return f"{socket.gethostname()}~{os.getpid()}~"


def _remove_orphans(root: Path) -> None:
    """Removes this host's directories whose owning process is gone."""
    host = socket.gethostname()
    for entry in root.iterdir() if root.is_dir() else ():
        owner_host, _, rest = entry.name.partition("~")
        pid = rest.partition("~")[0]
        if owner_host == host and pid.isdigit() and not _pid_alive(int(pid)):
            shutil.rmtree(entry, ignore_errors=True)


#: Stores a cluster writes and this process reaches through pyarrow's file systems, by
#: the schemes Spark knows them under (s3a and s3n are Hadoop's names for s3).
REMOTE_SCHEMES = {
    "s3": "s3",
    "s3a": "s3",
    "s3n": "s3",
    "gs": "gs",
    "gcs": "gs",
    "abfs": "abfs",
    "abfss": "abfss",
    "hdfs": "hdfs",
    "viewfs": "viewfs",
}


#: How this process reaches an s3:// staging_dir (`HyperIOManager(staging_s3=...)`): the
#: home's `S3Settings`, one model. Unset fields fall back to the AWS default chain
#: (environment, profile, instance role); Spark uses its own settings (fs.s3a.*).
S3Staging = S3Settings


@dataclass(frozen=True)
class RemoteRoot:
    """A staging root in an object store or HDFS: `uri` as Spark is given it."""

    uri: str
    scheme: str  # pyarrow's name for the store
    s3: S3Settings | None = None

    def connect(self) -> tuple[pafs.FileSystem, str]:
        """pyarrow's file system for the store, and the root's path in it."""
        parsed = urlparse(self.uri)
        if self.scheme != "s3":
            return pafs.FileSystem.from_uri(self.scheme + self.uri[len(parsed.scheme) :])
        options = self.s3 or S3Settings()
        endpoint_url = plain(options.endpoint_url, "staging_s3.endpoint_url")
        endpoint = urlparse(checked_endpoint(endpoint_url)) if endpoint_url else None
        given_region = plain(options.region, "staging_s3.region")
        region = given_region or (None if endpoint else pafs.resolve_s3_region(parsed.netloc))
        filesystem = pafs.S3FileSystem(
            access_key=plain(options.access_key_id, "staging_s3.access_key_id"),
            secret_key=plain(options.secret_access_key, "staging_s3.secret_access_key"),
            session_token=plain(options.session_token, "staging_s3.session_token"),
            region=region,
            endpoint_override=endpoint.netloc if endpoint else None,
            scheme=endpoint.scheme if endpoint else "https",
        )
        return filesystem, parsed.netloc + parsed.path


def parse_root(root: str, s3: S3Settings | None = None) -> Path | RemoteRoot:
    """`root` as a directory of this machine (a path or file:// URI) or a remote store.

    Only the URI is checked: nothing connects to the store until a write needs it.
    """
    parsed = urlparse(root)
    if parsed.scheme == "file":
        if parsed.netloc not in ("", "localhost"):
            raise ConfigurationError(
                f"staging_dir {root!r} names host {parsed.netloc!r}; a file:// URI is a "
                "directory of this machine. Mount the share and give its local path."
            )
        return Path(url2pathname(parsed.path)).absolute()
    if len(parsed.scheme) <= 1:  # no scheme, or a Windows drive letter
        if s3 is not None:
            raise ConfigurationError("staging_s3 is set, but staging_dir is not an s3:// URI.")
        return Path(root).absolute()
    if parsed.scheme not in REMOTE_SCHEMES:
        raise ConfigurationError(
            f"staging_dir {root!r}: {parsed.scheme}:// is not a store hyper-assets stages "
            f"in. Use one of {sorted(REMOTE_SCHEMES)}, a directory both the Spark cluster "
            "and this process mount (a path or file:// URI), or leave staging_dir out: with "
            "Spark Connect the rows then stream through the Connect channel."
        )
    if parsed.password is not None:
        raise ConfigurationError(
            f"staging_dir {parsed.scheme}://{parsed.hostname}{parsed.path} holds a secret in "
            "its URI, where it would be shown in messages and logs. Remove it: give this "
            "process's credentials through staging_s3 (dagster.EnvVar) or the store's "
            "environment, and Spark's through its own settings."
        )
    scheme = REMOTE_SCHEMES[parsed.scheme]
    if s3 is not None and scheme != "s3":
        raise ConfigurationError(f"staging_s3 is set, but staging_dir {root!r} is not in S3.")
    return RemoteRoot(root.rstrip("/"), scheme, s3)


class StagingArea:
    """Hands out per-write directories and cleans them up.

    Directories live under a local root. With a remote root, each has a twin there
    (same relative path): Spark reads and writes the twin, and `push` / `pull` copy
    files between the two, streamed, so Hyper always loads local files.
    """

    def __init__(
        self, root: str | Path | RemoteRoot | None = None, s3: S3Settings | None = None
    ) -> None:
        parsed = parse_root(root, s3) if isinstance(root, str) else root or default_staging_root()
        self.remote = parsed if isinstance(parsed, RemoteRoot) else None
        self.root = parsed if isinstance(parsed, Path) else default_staging_root()
        self._store: tuple[pafs.FileSystem, str] | None = None
        self._swept = False
        self._kept: list[Path] = []

    @property
    def label(self) -> str:
        """The root as the user gave it, for messages."""
        return self.remote.uri if self.remote else str(self.root)

    @property
    def store_key(self) -> str:
        """What besides the root tells stores apart (an S3 endpoint), for caching."""
        s3 = self.remote.s3 if self.remote else None
        return (s3.endpoint_url or "") if s3 else ""

    def spark_uri(self, path: Path) -> str:
        """Where Spark finds `path` (a file or directory under this area)."""
        if self.remote is None:
            # file://: not the cluster's default file system (HDFS, DBFS). Unquoted, as
            # Hadoop's Path takes it: it would not decode %20.
            return f"file://{path}"
        return f"{self.remote.uri}/{path.relative_to(self.root).as_posix()}"

    @contextmanager
    def _remote(self, remote: RemoteRoot, doing: str) -> Iterator[tuple[pafs.FileSystem, str]]:
        """The file system and root path of `remote` (this area's remote root); its
        failures as `StagingStoreError`."""
        try:
            if self._store is None:
                self._store = remote.connect()
            yield self._store
        except OSError as error:
            raise StagingStoreError(
                f"This process could not {doing} {self.label}, the staging_dir: {error}. "
                "Nothing was written. Check the bucket or container and its region, and "
                "this process's credentials (staging_s3, or the store's environment); or "
                "leave staging_dir out and let Spark Connect stream the rows."
            ) from error

    def _relative(self, path: Path) -> str:
        return path.relative_to(self.root).as_posix()

    def push(self, path: Path) -> None:
        """Makes the local file `path` visible to Spark (copies it to the remote twin)."""
        if self.remote is None:
            return
        with self._remote(self.remote, "upload to") as (filesystem, root):
            pafs.copy_files(
                str(path),
                f"{root}/{self._relative(path)}",
                source_filesystem=pafs.LocalFileSystem(),
                destination_filesystem=filesystem,
            )

    def pull(self, path: Path) -> None:
        """Makes what Spark wrote under the directory `path` visible here (copies it)."""
        if self.remote is None:
            return
        with self._remote(self.remote, "download from") as (filesystem, root):
            remote = f"{root}/{self._relative(path)}"
            if filesystem.get_file_info(remote).type is not pafs.FileType.Directory:
                return  # nothing written: the caller's row count check says so
            for info in filesystem.get_file_info(pafs.FileSelector(remote, recursive=True)):
                if info.type is pafs.FileType.File:
                    local = path / info.path[len(remote) + 1 :]
                    local.parent.mkdir(parents=True, exist_ok=True)
                    pafs.copy_files(
                        info.path,
                        str(local),
                        source_filesystem=filesystem,
                        destination_filesystem=pafs.LocalFileSystem(),
                    )

    def _new(self, label: str) -> Path:
        self.root.mkdir(parents=True, exist_ok=True)
        if not self._swept:
            _remove_orphans(self.root)
            self._swept = True
        path = self.root / f"{_owner_prefix()}{label}-{uuid.uuid4().hex[:12]}"
        path.mkdir()
        return path

    def _remove(self, path: Path) -> None:
        shutil.rmtree(path, ignore_errors=True)
        if self.remote is not None:
            # A twin never written is missing: nothing to remove.
            with (
                suppress(StagingStoreError),
                self._remote(self.remote, "clean up") as (filesystem, root),
            ):
                filesystem.delete_dir(f"{root}/{self._relative(path)}")

    @contextmanager
    def directory(self, label: str) -> Iterator[Path]:
        """A fresh directory for one write, removed (with its twin) when the block ends."""
        path = self._new(label)
        try:
            yield path
        finally:
            self._remove(path)

    def keep(self, label: str) -> Path:
        """A fresh directory that lives until `release()`: Spark reads loaded data lazily."""
        path = self._new(label)
        self._kept.append(path)
        return path

    def release(self) -> None:
        """Removes every directory handed out by `keep()`."""
        for path in self._kept:
            self._remove(path)
        self._kept.clear()


def part_files(directory: Path) -> list[Path]:
    """The Parquet part files Spark committed (Hyper takes no globs: list them).

    Paths with a part starting with `_` or `.` are a committer's (`_temporary`, markers).
    """
    return sorted(
        p
        for p in directory.rglob("*.parquet")
        if not any(part.startswith(("_", ".")) for part in p.relative_to(directory).parts)
    )


@dataclass(frozen=True)
class Staged:
    """The files staged for one write, and the rows they hold (counted once, when staged)."""

    files: tuple[Path, ...]
    rows: int


def stage_arrow(
    rows: pa.Table | pa.RecordBatchReader, directory: Path, compression: str, table: str
) -> Staged:
    """Writes Arrow rows of `table` as one Parquet file, a batch at a time (a stream is
    read once)."""
    path = directory / "part-0.parquet"
    reader = rows.to_reader() if isinstance(rows, pa.Table) else rows
    schema = pa.schema([f.with_type(_parquet_type(f.type)) for f in reader.schema])
    count = 0
    with pq.ParquetWriter(path, schema, compression=compression) as writer:
        for batch in reader:
            if batch.schema != schema:
                columns = [
                    _as_type(column, field, table)
                    for column, field in zip(batch.columns, schema, strict=True)
                ]
                batch = pa.RecordBatch.from_arrays(columns, schema=schema)
            writer.write_batch(batch)
            count += batch.num_rows
    return Staged((path,), count)


def _parquet_type(t: pa.DataType) -> pa.DataType:
    """`t` as it is staged: view types as their large kind (Parquet stores them alike, and
    pyarrow < 19 cannot write views), times as time64[us] (Hyper reads no TIME(MILLIS)),
    nanosecond timestamps as microseconds (Hyper's), and a dictionary's values likewise."""
    if pa.types.is_dictionary(t):
        return pa.dictionary(t.index_type, _parquet_type(t.value_type), t.ordered)
    if pa.types.is_string_view(t):
        return pa.large_string()
    if pa.types.is_binary_view(t):
        return pa.large_binary()
    if pa.types.is_time(t):
        return pa.time64("us")
    if pa.types.is_timestamp(t) and t.unit == "ns":
        return pa.timestamp("us", t.tz)
    return t


def _as_type(array: pa.Array, field: pa.Field, table: str) -> pa.Array:
    """`array` cast to its staged type, `field`'s. A dictionary's values are cast on their
    own: Arrow casts no dictionary of views (polars' Categorical is dictionary<string_view>).
    A value finer than a microsecond is a `DataError`: Hyper would drop its nanoseconds."""
    t = field.type
    if pa.types.is_dictionary(t):
        return pa.DictionaryArray.from_arrays(
            array.indices, array.dictionary.cast(t.value_type), ordered=t.ordered
        )
    try:
        return array.cast(t)
    except pa.ArrowInvalid as error:
        value = _finer_than_microseconds(array, t)
        if value is None:  # not a truncation: Arrow's own words are the cause
            raise
        raise DataError(
            f"Column {field.name!r} of {table} holds {value}, finer than the microseconds a "
            ".hyper table keeps. Round the column to microseconds first (pandas: "
            '.dt.floor("us"); polars: .dt.truncate("1us"); Arrow: pc.floor_temporal(a, '
            'unit="microsecond")).'
        ) from error


def _finer_than_microseconds(array: pa.Array, t: pa.DataType) -> object | None:
    """The first value of `array` that casting to `t` would truncate; None if there is none
    (or the values cannot be compared that way)."""
    try:
        truncated = array.cast(t, safe=False).cast(array.type)
        return next(iter(array.filter(pc.not_equal(truncated, array))), None)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
        return None


def _stream_readable(t: pa.DataType) -> bool:
    """Whether Hyper's Arrow stream reader takes `t` (it refuses large and view types)."""
    return (
        t in (pa.bool_(), pa.string(), pa.binary(), pa.date32())
        or (pa.types.is_integer(t) and pa.types.is_signed_integer(t))
        or pa.types.is_float32(t)
        or pa.types.is_float64(t)
        or pa.types.is_decimal128(t)
        or (pa.types.is_timestamp(t) and t.unit == "us")
    )


def arrow_stream_readable(schema: pa.Schema) -> bool:
    """Whether Hyper reads every column of `schema` from an Arrow IPC stream."""
    return all(_stream_readable(f.type) for f in schema)


def is_arrow_stream(path: Path) -> bool:
    return path.suffix == ".arrows"


def stream_schema(path: Path) -> pa.Schema:
    """The schema of an Arrow IPC stream file."""
    with pa.memory_map(str(path)) as source, pa.ipc.open_stream(source) as reader:
        return reader.schema


def staged_row_count(files: Sequence[Path]) -> int:
    """Rows in Parquet files another process wrote (Spark's parts), from their footers."""
    return sum(pq.read_metadata(path).num_rows for path in files)
