"""Compaction: rewrite a fragmented `.hyper` file compactly, in place.

Every partition replace deletes a window of rows, and Hyper reuses the freed space only
in part, so a file whose partitions are rewritten keeps growing. `compact()` copies the
file with `CREATE DATABASE copy WITH VERSION n FROM file`, which writes every table
afresh in the file's own format version, then swaps the copy in with `os.replace`.

It holds the database's lock throughout, so no write through `HyperIOManager` (nor a
publish) runs meanwhile. The change outbox beside the file (`<database>.outbox/`) names
tables and windows, never file offsets: it stays valid and is left alone.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass
from pathlib import Path

from tableauhyperapi import Connection, HyperException, escape_name, escape_string_literal

from hyper_assets.errors import DatabaseLockedError
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


def compact(hyper: HyperResource, database: str | Path) -> CompactResult:
    """Rewrites `database` compactly, keeping its format version, its tables and keys.

    Holding the file's lock: the copy is written beside the file, flushed to disk, then
    replaces it atomically. On any failure (or a crash) the original is untouched; a copy
    left by a crash is removed by the next compaction. Raises `DatabaseLockedError` when
    another program keeps the file open, and `TableNotFoundError` when it does not exist.
    """
    path = Path(database).absolute()
    copy = path.with_name(f"{path.name}.compacting")
    started = time.perf_counter()
    with hyper.lock(path):
        with hyper.open(path, create=False) as connection:  # waits for other programs
            version = file_version(connection, path)
        before = path.stat().st_size
        try:
            copy.unlink(missing_ok=True)
            with Connection(hyper.shared.endpoint) as connection:
                connection.execute_command(
                    f"CREATE DATABASE {escape_name(str(copy))} WITH VERSION {version} "
                    f"FROM {escape_name(str(path))}"
                )
            _fsync(copy)
            os.replace(copy, path)
            _fsync(path.parent)
        except HyperException as error:
            if is_locked_error(error):
                raise DatabaseLockedError(
                    f"{path} was opened by another program (Tableau Desktop, another Hyper "
                    "process) during its compaction, which was abandoned: the file is "
                    "unchanged. Close it there and compact again."
                ) from error
            raise
        finally:
            copy.unlink(missing_ok=True)
        after = path.stat().st_size
    return CompactResult(before, after, round(time.perf_counter() - started, 3))


def _fsync(path: Path) -> None:
    """Flushes a file, or a directory's entries, to disk."""
    descriptor = os.open(path, os.O_RDONLY)
    try:
        os.fsync(descriptor)
    finally:
        os.close(descriptor)
