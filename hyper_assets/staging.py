"""Staging areas: the files Hyper bulk-loads, and the Parquet exports that loads read.

Staged files are Parquet (Spark's parts, an Arrow table) or an Arrow IPC stream (rows
streamed from Spark Connect, `hyper_assets.transfer`).

A staging directory lives under a root on this machine (a local temp directory by
default, or a shared file system that a cluster writes too: `hyper_assets.transfer`).
Each write gets its own directory, removed on success and on failure; directories left
by killed processes are removed by the next process on the same host that stages under
the same root.
"""

from __future__ import annotations

import os
import shutil
import socket
import tempfile
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from urllib.parse import urlparse
from urllib.request import url2pathname

import pyarrow as pa
import pyarrow.parquet as pq
from tableauhyperapi import escape_name, escape_string_literal

from hyper_assets.errors import ConfigurationError


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


def local_root(root: str) -> Path:
    """`root` as a directory of this machine: a path, or a file:// URI."""
    parsed = urlparse(root)
    if parsed.scheme == "file":
        return Path(url2pathname(parsed.path)).absolute()
    if len(parsed.scheme) > 1:  # a one-letter scheme is a Windows drive
        raise ConfigurationError(
            f"staging_dir {root!r}: {parsed.scheme}:// is not a store hyper-assets stages "
            "in. Give a directory that the Spark cluster and this process both mount (a "
            "path or file:// URI), or leave staging_dir out: with Spark Connect the rows "
            "then stream through the Connect channel."
        )
    return Path(root).absolute()


class StagingArea:
    """Hands out per-write directories below `root` and cleans them up."""

    def __init__(self, root: str | None = None) -> None:
        self.root = local_root(root) if root else default_staging_root()
        self._swept = False
        self._kept: list[Path] = []

    def _new(self, label: str) -> Path:
        self.root.mkdir(parents=True, exist_ok=True)
        if not self._swept:
            _remove_orphans(self.root)
            self._swept = True
        path = self.root / f"{_owner_prefix()}{label}-{uuid.uuid4().hex[:12]}"
        path.mkdir()
        return path

    @contextmanager
    def directory(self, label: str) -> Iterator[Path]:
        """A fresh directory for one write, removed when the block ends."""
        path = self._new(label)
        try:
            yield path
        finally:
            shutil.rmtree(path, ignore_errors=True)

    def keep(self, label: str) -> Path:
        """A fresh directory that lives until `release()`: Spark reads loaded data lazily."""
        path = self._new(label)
        self._kept.append(path)
        return path

    def release(self) -> None:
        """Removes every directory handed out by `keep()`."""
        for path in self._kept:
            shutil.rmtree(path, ignore_errors=True)
        self._kept.clear()


def part_files(directory: Path) -> list[Path]:
    """The Parquet part files Spark committed (Hyper takes no globs: list them)."""
    return sorted(p for p in directory.rglob("*.parquet") if not p.name.startswith(("_", ".")))


def stage_arrow(table: pa.Table, directory: Path, compression: str) -> list[Path]:
    """Writes an Arrow table as one Parquet file."""
    path = directory / "part-0.parquet"
    pq.write_table(table, path, compression=compression)
    return [path]


#: Arrow types Hyper reads from an Arrow IPC stream, and the SQL type it requires for each.
_ARROW_STREAM_TYPES: dict[pa.DataType, str] = {
    pa.bool_(): "BOOLEAN",
    pa.int8(): "SMALLINT",
    pa.int16(): "SMALLINT",
    pa.int32(): "INTEGER",
    pa.int64(): "BIGINT",
    pa.float32(): "REAL",
    pa.float64(): "DOUBLE PRECISION",
    pa.string(): "TEXT",
    pa.binary(): "BYTEA",
    pa.date32(): "DATE",
    pa.timestamp("us"): "TIMESTAMP",
}


def _arrow_stream_type(t: pa.DataType) -> str | None:
    if pa.types.is_decimal128(t):
        return f"NUMERIC({t.precision}, {t.scale})"
    if pa.types.is_timestamp(t) and t.unit == "us" and t.tz:
        return "TIMESTAMPTZ"
    return _ARROW_STREAM_TYPES.get(t)


def arrow_stream_readable(schema: pa.Schema) -> bool:
    """Whether Hyper reads every column of `schema` from an Arrow IPC stream."""
    return all(_arrow_stream_type(f.type) for f in schema)


def is_arrow_stream(path: Path) -> bool:
    return path.suffix == ".arrows"


def _stream_schema(path: Path) -> pa.Schema:
    with pa.memory_map(str(path)) as source, pa.ipc.open_stream(source) as reader:
        return reader.schema


def external_sql(files: list[Path]) -> str:
    """The staged files as a FROM item: Parquet parts, or Arrow IPC streams.

    Hyper infers a Parquet file's columns; an Arrow stream's it must be told, with the
    nullability of the stream's fields, and it scans one stream per `external`.
    """
    if not is_arrow_stream(files[0]):
        paths = ", ".join(escape_string_literal(str(f)) for f in files)
        return f"external(ARRAY[{paths}], FORMAT => 'parquet')"
    columns = ", ".join(
        f"{escape_name(f.name)} {_arrow_stream_type(f.type)}" + ("" if f.nullable else " NOT NULL")
        for f in _stream_schema(files[0])
    )
    scans = " UNION ALL ".join(
        f"SELECT * FROM external({escape_string_literal(str(f))}, FORMAT => 'arrowstream', "
        f"COLUMNS => DESCRIPTOR({columns}))"
        for f in files
    )
    return f"({scans}) AS staged"


def staged_row_count(files: list[Path]) -> int:
    """Rows in the staged files, from Parquet footers or Arrow batch headers."""
    rows = 0
    for path in files:
        if is_arrow_stream(path):
            with pa.memory_map(str(path)) as source, pa.ipc.open_stream(source) as reader:
                rows += sum(batch.num_rows for batch in reader)  # memory-mapped: no copy
        else:
            rows += pq.read_metadata(path).num_rows
    return rows
