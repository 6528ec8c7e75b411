"""Compaction: rewrite a fragmented `.hyper` file compactly, in place.

Every partition replace deletes a window of rows. Hyper frees a storage block only once
all its rows are deleted, and reuses freed blocks only in part, so a file whose
partitions are rewritten keeps growing. `compact()` copies the file with
`CREATE DATABASE copy WITH VERSION n FROM file`, which leaves free blocks behind and
keeps the file's own format version. When a window's rows were scattered over many
blocks (rows not stored in window order), those blocks stay partly empty after a
delete; `rewrite_rows` (the default) therefore also loads every table of the copy
afresh from the original before copying it once more. The result replaces the file
with `os.replace`.

It holds the database's lock throughout, so no write through `HyperIOManager` (nor a
publish) runs meanwhile. The change outbox beside the file (`<database>.outbox/`) names
tables and windows, never file offsets: it stays valid and is left alone.

Hyper cannot say how much of a file is free space, so the file's size and rows at its
densest (right after a compaction, or when first seen) are recorded beside it
(`<database>.compacted.json`): what its rows need.
`compact_if_grown`, which `HyperIOManager` calls after each write (`AutoCompact`),
compacts once the file holds `ratio` times that size per row, and `min_bytes` more.
Replaced windows and deleted partitions trigger it; appends grow rows and bytes
about alike (small ones leave partly filled blocks, which `min_bytes` makes not worth it).
"""

from __future__ import annotations

import json
import logging
import os
import time
from dataclasses import dataclass
from pathlib import Path

from dagster import Config
from pydantic import Field
from tableauhyperapi import (
    Connection,
    HyperException,
    TableName,
    escape_name,
    escape_string_literal,
)

from hyper_assets._files import MEGABYTE, fsync_path, write_json
from hyper_assets._sql import attach, count_rows
from hyper_assets.errors import CompactionError, DatabaseLockedError
from hyper_assets.resource import HyperResource, is_locked_error
from hyper_assets.tables import Catalog

_log = logging.getLogger(__name__)


class AutoCompact(Config):
    """When `HyperIOManager` compacts its file after a write."""

    ratio: float = Field(
        default=1.5,
        gt=1.0,
        description="Compact once the file is this many times the size its rows took at "
        "the last compaction (scaled by the rows it holds now).",
    )
    min_bytes: int = Field(
        default=4 * MEGABYTE,
        ge=0,
        description="... and compaction would save at least this many bytes.",
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
class Compacted:
    """The file's size and rows at its densest: what its rows need."""

    bytes: int
    rows: int

    @staticmethod
    def path(database: Path) -> Path:
        return database.with_name(f"{database.name}.compacted.json")

    @classmethod
    def read(cls, database: Path) -> Compacted | None:
        """The record, or None when there is none (or it cannot be read: it is advice)."""
        try:
            body = json.loads(cls.path(database).read_text())
            return cls(int(body["bytes"]), int(body["rows"]))
        except FileNotFoundError:
            return None
        except (ValueError, KeyError, TypeError) as error:
            _log.warning("Ignoring %s (%s); it is written again.", cls.path(database), error)
            return None

    def write(self, database: Path) -> None:
        write_json(self.path(database), {"bytes": self.bytes, "rows": self.rows})

    def expected_bytes(self, rows: int) -> float:
        """The size `rows` rows would take, packed as they were at the compaction."""
        return self.bytes * rows / self.rows


def file_version(connection: Connection, database: Path) -> int:
    """The format version of `database`, which `connection` has attached."""
    return int(
        connection.execute_scalar_query(
            "SELECT database_version FROM pg_catalog.hyper_database WHERE datname = "
            + escape_string_literal(str(database))
        )
    )


def compact(
    hyper: HyperResource, database: str | Path, *, rewrite_rows: bool = True
) -> CompactResult:
    """Rewrites `database` compactly, keeping its format version, tables, keys and rows.

    `rewrite_rows=False` only copies the file's used blocks (fast, but blocks that deletes
    left partly empty stay so). Holding the file's lock, the copy is written beside the
    file, flushed to disk, then replaces it atomically; it needs up to twice the file's
    size of free disk meanwhile. On any failure (or a crash) the original is untouched; a
    copy left by a crash is removed by the next compaction. Raises `DatabaseLockedError`
    when another program keeps the file open, `TableNotFoundError` when it is missing,
    `CompactionError` when Hyper fails otherwise (a full disk, say).
    """
    path = Path(database).absolute()
    copies = [path.with_name(f"{path.name}.compacting{n}") for n in (1, 2)]
    started = time.perf_counter()
    with hyper.lock(path):
        before = path.stat().st_size if path.exists() else 0
        try:
            with hyper.open(path, create=False) as connection:  # waits for other programs
                version = file_version(connection, path)
                rows = total_rows(connection)
            for copy in copies:
                copy.unlink(missing_ok=True)
            _copy(hyper, path, copies[0], version)
            result = copies[0]
            if rewrite_rows:
                _reload_tables(hyper, copies[0], path)
                _copy(hyper, copies[0], copies[1], version)
                result = copies[1]
            fsync_path(result)
            os.replace(result, path)
            fsync_path(path.parent)
        except HyperException as error:
            if is_locked_error(error):
                raise DatabaseLockedError(
                    f"{path} was opened by another program (Tableau Desktop, another Hyper "
                    "process) during its compaction, which was abandoned: the file is "
                    "unchanged. Close it there and compact again."
                ) from error
            raise CompactionError(
                f"Compacting {path} failed in Hyper: {error.main_message or error}; the "
                "compaction was abandoned and the file is unchanged. If the disk is full, "
                f"free {2 * before} bytes (twice the file) beside it and compact again."
            ) from error
        finally:
            for copy in copies:
                copy.unlink(missing_ok=True)
        after = path.stat().st_size
        Compacted(after, rows).write(path)
    return CompactResult(before, after, round(time.perf_counter() - started, 3))


def compact_if_grown(
    hyper: HyperResource, database: str | Path, policy: AutoCompact
) -> CompactResult | None:
    """Compacts `database` when it pays by `policy`; None when it did not.

    A file seen for the first time, or denser now than recorded, is recorded as it is.
    """
    path = Path(database).absolute()
    with hyper.lock(path), hyper.open(path, create=False) as connection:
        rows = total_rows(connection)
        size = path.stat().st_size
    last = Compacted.read(path)
    if rows and (last is None or size * last.rows < last.bytes * rows):
        Compacted(size, rows).write(path)  # denser than recorded: the better estimate
        return None
    if last is None or last.rows == 0:
        return None
    expected = last.expected_bytes(rows)
    if size < policy.ratio * expected or size - expected < policy.min_bytes:
        return None
    return compact(hyper, path)


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
