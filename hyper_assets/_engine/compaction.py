"""Compaction: rewrite a fragmented `.hyper` file compactly, in place.

Every partition replace deletes a window of rows. Hyper frees a storage block only once
all its rows are deleted, and reuses freed blocks only in part, so a file whose
partitions are rewritten keeps growing. Compaction (`compact()`, in
`hyper_assets._home.maintenance`, for users) copies the file with
`CREATE DATABASE copy WITH VERSION n FROM file`, which leaves free blocks behind and
keeps the file's own format version. When a window's rows were scattered over many
blocks (rows not stored in window order), those blocks stay partly empty after a
delete; `rewrite_rows` (the default) therefore also loads every table of the copy
afresh from the original before copying it once more. The result replaces the file
with `os.replace`. `hyper_assets._engine.upgrade` rewrites a file the same way at a newer format
version.

It holds the database's lock throughout, so no write through `HyperIOManager` (nor a
publish) runs meanwhile. The change outbox beside the file (`<database>.outbox/`) names
tables and windows, never file offsets: it stays valid and is left alone.

Hyper cannot say how much of a file is free space, but each write knows the rows it
deleted or replaced, which is at most the space left behind. `HyperIOManager` adds them
up beside the file (`<database>.deletions.json`, with the file's device and inode, so a
file replaced by another starts from 0) and compacts once they reach `deleted_fraction`
of the rows the file holds and their share of its bytes is `min_bytes` or more
(`AutoCompact`, `compact_if_wasteful`). Appends delete nothing and never trigger it.
"""

from __future__ import annotations

import logging
import os
import time
from dataclasses import dataclass
from pathlib import Path

from dagster import Config
from pydantic import Field
from tableauhyperapi import Connection, TableName, escape_name, escape_string_literal

from hyper_assets._base.files import MEGABYTE, file_size, fsync_path, set_mode
from hyper_assets._base.saved import Fields, SavedFormat
from hyper_assets._engine.hyper_errors import hyper_errors
from hyper_assets._engine.resource import HyperResource
from hyper_assets._engine.sql import attach, count_rows
from hyper_assets._engine.tables import Catalog
from hyper_assets.errors import CompactionError, CorruptFileError

_log = logging.getLogger(__name__)


class AutoCompact(Config):
    """When `HyperIOManager` compacts its file after a write that deleted or replaced rows."""

    deleted_fraction: float = Field(
        default=0.5,
        gt=0.0,
        description="Compact once the rows deleted or replaced since the file was last "
        "compact reach this fraction of the rows it holds...",
    )
    min_bytes: int = Field(
        default=4 * MEGABYTE,
        ge=0,
        description="... and their share of the file's bytes is at least this many.",
    )


@dataclass(frozen=True)
class CompactResult:
    """File sizes before and after, and how long the compaction took."""

    before_bytes: int
    after_bytes: int
    seconds: float

    @property
    def saved_bytes(self) -> int:
        return self.before_bytes - self.after_bytes

    def __str__(self) -> str:
        return (
            f"{self.before_bytes / MEGABYTE:.1f} MiB -> {self.after_bytes / MEGABYTE:.1f} MiB "
            f"in {self.seconds:.1f} s"
        )


@dataclass(frozen=True)
class Deletions:
    """Rows deleted or replaced in one file (device, inode) since it was last compact."""

    file_id: tuple[int, int]
    rows: int

    @staticmethod
    def path(database: Path) -> Path:
        return database.with_name(f"{database.name}.deletions.json")

    @classmethod
    def read(cls, database: Path) -> Deletions:
        """The count for the file now at `database`: 0 if none is recorded for that file
        (or the record cannot be read: it is advice, counted again from 0)."""
        here = _file_id(database)
        try:
            recorded = DELETIONS.read(cls.path(database))
        except FileNotFoundError:
            return cls(here, 0)
        except CorruptFileError as error:  # of a newer version too: it is advice
            _log.warning("Ignoring the count of deleted rows: %s", error)
            return cls(here, 0)
        return recorded if recorded.file_id == here else cls(here, 0)

    def write(self, database: Path) -> None:
        DELETIONS.write(self.path(database), self)

    def to_json(self) -> dict[str, int]:
        device, inode = self.file_id
        return {"device": device, "inode": inode, "rows": self.rows}

    @classmethod
    def from_json(cls, f: Fields) -> Deletions:
        return cls((f.take("device", int), f.take("inode", int)), f.take("rows", int))


#: `<database>.deletions.json` (written without a version before this one: version 1).
DELETIONS = SavedFormat(
    1, Deletions.from_json, Deletions.to_json, "They are counted again from 0 (it is advice)."
)


def _file_id(path: Path) -> tuple[int, int]:
    stat = path.stat()
    return stat.st_dev, stat.st_ino


def file_version(connection: Connection, database: Path) -> int:
    """The format version of `database`, which `connection` has attached."""
    return int(
        connection.execute_scalar_query(
            "SELECT database_version FROM pg_catalog.hyper_database WHERE datname = "
            + escape_string_literal(str(database))
        )
    )


def compact_locked(
    hyper: HyperResource, path: Path, rewrite_rows: bool, version: int | None = None
) -> CompactResult:
    """Compacts `path` for a caller holding the database's lock (`compact()` takes it);
    `version`: the copy's format version (default: the file's own; `hyper_assets._engine.upgrade`
    passes a newer one)."""
    copies = [path.with_name(f"{path.name}.compacting{n}") for n in (1, 2)]
    started = time.perf_counter()
    before = file_size(path)
    doing = "Compacting" if version is None else f"Upgrading to format version {version}"
    abandoned = (
        f"{doing} was abandoned and the file is unchanged; it needs {2 * before} bytes "
        "(twice the file) of free disk beside the file."
    )
    try:
        with hyper.open(path, create=False) as connection:  # waits for other programs
            version = file_version(connection, path) if version is None else version
        for copy in copies:
            copy.unlink(missing_ok=True)
        with hyper_errors(file=path, otherwise=CompactionError, advice=abandoned):
            _copy(hyper, path, copies[0], version)
            result = copies[0]
            if rewrite_rows:
                _reload_tables(hyper, copies[0], path)
                _copy(hyper, copies[0], copies[1], version)
                result = copies[1]
        set_mode(result)
        fsync_path(result)
        os.replace(result, path)
        fsync_path(path.parent)
        Deletions(_file_id(path), 0).write(path)
    except OSError as error:  # flushing or renaming the copy, or recording it
        raise CompactionError(
            f"{doing} {path} failed: {error}. The file holds the rows it held (the "
            "original, or its rewritten copy); check the disk and try again."
        ) from error
    finally:
        for copy in copies:
            copy.unlink(missing_ok=True)
    return CompactResult(before, path.stat().st_size, round(time.perf_counter() - started, 3))


def compact_if_wasteful(
    hyper: HyperResource, database: str | Path, deleted_rows: int, policy: AutoCompact
) -> CompactResult | None:
    """After a write that deleted or replaced `deleted_rows`, by a caller holding the
    database's lock: counts them, and compacts when `policy` says it pays (else None)."""
    if not deleted_rows:
        return None
    path = Path(database).absolute()
    deletions = Deletions.read(path)
    deletions = Deletions(deletions.file_id, deletions.rows + deleted_rows)
    deletions.write(path)  # kept if the compaction fails: the next write tries again
    with hyper.open(path, create=False) as connection:
        rows = total_rows(connection)
    wasted = path.stat().st_size * deletions.rows / (rows + deletions.rows)
    if deletions.rows < policy.deleted_fraction * rows or wasted < policy.min_bytes:
        return None
    return compact_locked(hyper, path, rewrite_rows=True)


def total_rows(connection: Connection) -> int:
    """Rows of every table of the connection's database."""
    return sum(count_rows(connection, table) for table in Catalog(connection).tables())


def _copy(hyper: HyperResource, source: Path, target: Path, version: int) -> None:
    """`target` holds the used blocks of `source` (which no connection may have open)."""
    with Connection(hyper.shared.endpoint) as connection:
        connection.execute_command(
            f"CREATE DATABASE {escape_name(str(target))} WITH VERSION {version} "
            f"FROM {escape_name(str(source))}"
        )


def _reload_tables(hyper: HyperResource, copy: Path, original: Path) -> None:
    """Empties every table of `copy` and loads it again from `original`, densely."""
    with Connection(hyper.shared.endpoint) as connection:
        attach(connection, copy, "compacted")
        attach(connection, original, "original", read_only=True)
        for table in Catalog(connection).tables("compacted"):
            source = TableName("original", table.schema_name.name, table.name)
            connection.execute_command(f"TRUNCATE TABLE {table}")
            connection.execute_command(f"INSERT INTO {table} SELECT * FROM {source}")
