"""Internal: the file's side of a write through `HyperIOManager`, each in one hold of the
file's lock (on an object-store home: one lease, committed as the next generation).

`FileWriter.write` refuses a file that is not the extract Dagster recorded
(`hyper_assets._dagster.identity`), brings the file to the version the columns need, makes
the write (`hyper_assets._rows.ingest`) recorded for the next publish
(`hyper_assets._rows.outbox`), counts the rows it left, compacts when that pays and gives
the file its identity. `FileWriter.delete` deletes a window's rows, recorded and compacted
the same way. The IO manager turns Dagster's contexts into these calls and their results
into metadata.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from functools import partial
from typing import TypeVar

from dagster import DagsterLogManager
from tableauhyperapi import Connection, TableName

from hyper_assets._dagster.identity import WriteGuard, give_identity
from hyper_assets._dagster.materialization import PartitionCounter, Written
from hyper_assets._engine.compaction import AutoCompact, CompactResult, compact_if_wasteful
from hyper_assets._engine.sql import count_rows, transaction
from hyper_assets._engine.types import Column, needed_version
from hyper_assets._engine.upgrade import file_for_write
from hyper_assets._home.home import HyperDatabase
from hyper_assets._rows.ingest import Write, write_table
from hyper_assets._rows.loading import stored_columns
from hyper_assets._rows.modes import WriteMode
from hyper_assets._rows.outbox import Outbox
from hyper_assets._rows.pending_keys import PendingKeys
from hyper_assets._rows.staging import Staged
from hyper_assets._rows.window import Window
from hyper_assets.errors import CompactionError, DatabaseLockedError

_T = TypeVar("_T")


@dataclass(frozen=True)
class FileWriter:
    """Writes into the file of `home`, compacted after a write that deleted or replaced rows
    when `auto_compact` says it pays (None: never)."""

    home: HyperDatabase
    auto_compact: AutoCompact | None

    def write(
        self,
        write: Write,
        staged: Staged,
        count_partitions: PartitionCounter | None,
        guard: WriteGuard,
        log: DagsterLogManager,
    ) -> Written:
        """Makes `write` in a file of the version its columns need, counts what it left and
        compacts if that pays, in one lock hold. `guard` refuses first when the file is not
        the extract Dagster recorded (`hyper_assets._dagster.identity`)."""
        with self.home.writing() as database:
            warning = guard.check(database, self.home.uri)
            if warning:
                log.warning(warning)
            created = not database.exists()
            needed = needed_version(write.columns)
            make = partial(write_table, write=write, staged=staged, pending=PendingKeys(database))
            with (
                file_for_write(self.home.hyper, database, needed) as upgraded,
                self._recorded(write, staged, make) as (connection, result),
            ):
                rows = count_rows(connection, write.table)
                window_rows = count_rows(connection, write.table, write.where)
                partition_rows = count_partitions(connection) if count_partitions else {}
            if upgraded:
                log.info(f"Upgraded {self.home.database} to file format version {upgraded}")
            compacted = self._compact_if_wasteful(result.rows_deleted, log)
            identity = give_identity(database, created)
        return Written(result, rows, window_rows, partition_rows, compacted, upgraded, identity)

    def delete(
        self,
        table: TableName,
        label: str,
        window_of: Callable[[list[Column]], Window],
        log: logging.Logger,
    ) -> int:
        """Deletes the rows of the window `window_of` makes of the stored columns of
        `table` (asset `label`'s), recorded for the next publish, in one lock hold; the
        rows deleted."""
        with self.home.writing() as database:
            with self.home.hyper.open(database, create=False) as connection:
                columns = stored_columns(connection, table, self.home.database, f"asset {label!r}")
            window = window_of(columns)
            write = Write(table, columns, WriteMode.PARTITION, window=window)
            delete = partial(_delete, table=table, window=window)
            nothing = Staged((), 0)  # a delete stages no rows
            with self._recorded(write, nothing, delete) as (_, deleted):
                pass  # the rows are deleted; the connection closes, durably
            self._compact_if_wasteful(deleted, log)
        return deleted

    @contextmanager
    def _recorded(
        self, write: Write, staged: Staged, make: Callable[[Connection], _T]
    ) -> Iterator[tuple[Connection, _T]]:
        """`make(connection)` makes `write` (of the `staged` rows), recorded for the next
        publish; the block gets the connection, still open, and what `make` returned.

        The caller holds the database's lock. A `make` that raises made no change and leaves
        no record; a crash leaves its record pending, settled by the next writer or
        publisher (`hyper_assets._rows.outbox`).
        """
        outbox = Outbox(self.home.local_path)
        with self.home.hyper.open(self.home.local_path) as connection:
            outbox.settle(connection)
            with outbox.recording(connection, write, staged) as change:
                made = make(connection)
            yield connection, made
        if change:
            outbox.commit(change)

    def _compact_if_wasteful(
        self, deleted_rows: int, log: logging.Logger | DagsterLogManager
    ) -> CompactResult | None:
        """Compacts the file when `auto_compact` says it pays (the caller holds its lock).

        A failure is a warning: the rows written are durable, and a failed compaction
        leaves the file's rows as they were.
        """
        if self.auto_compact is None:
            return None
        try:
            result = compact_if_wasteful(
                self.home.hyper, self.home.local_path, deleted_rows, self.auto_compact
            )
        except (DatabaseLockedError, CompactionError) as error:
            log.warning(f"{error} (The write itself is complete.)")
            return None
        if result:
            log.info(f"Compacted {self.home.database}: {result}")
        return result


def _delete(connection: Connection, table: TableName, window: Window) -> int:
    """Deletes the rows of `window`, in a transaction of its own; how many."""
    with transaction(connection):
        return connection.execute_command(f"DELETE FROM {table} WHERE {window.sql}")
