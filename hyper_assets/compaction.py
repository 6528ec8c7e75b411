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
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass
from pathlib import Path

from tableauhyperapi import (
    Connection,
    HyperException,
    TableName,
    escape_name,
    escape_string_literal,
)

from hyper_assets._files import fsync_path
from hyper_assets._sql import attach
from hyper_assets.errors import CompactionError, DatabaseLockedError
from hyper_assets.resource import HyperResource, is_locked_error


@dataclass(frozen=True)
class CompactResult:
    """File sizes before and after, and how long the compaction took."""

    before_bytes: int
    after_bytes: int
    seconds: float

    @property
    def saved_bytes(self) -> int:
        return self.before_bytes - self.after_bytes


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
    return CompactResult(before, after, round(time.perf_counter() - started, 3))


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
        for schema in connection.catalog.get_schema_names("compacted"):
            for table in connection.catalog.get_table_names(schema):
                source = TableName("original", table.schema_name.name, table.name)
                connection.execute_command(f"TRUNCATE TABLE {table}")
                connection.execute_command(f"INSERT INTO {table} SELECT * FROM {source}")
