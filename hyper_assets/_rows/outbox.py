"""The change outbox: what each write changed since the last publish, kept beside the database.

A publish sends only what changed. Once a first publish has started tracking (before it,
a publish sends the whole file), every write through `HyperIOManager` records one change
in `<database>.outbox/`:

- `replace` of a table, `partition` window of a table: the publish sends the table's (or
  the window's) rows as they are then, so nothing else is kept, and sending twice is
  harmless;
- `append`: the appended rows, captured in `<seq>.hyper` before they are inserted;
- `upsert`: the upserted keys, captured likewise; the publish sends the table's current
  rows for those keys.

Writers and publishers touch the outbox only while holding the database's lock. A change
is written as `<seq>.pending.json` before the write and renamed to `<seq>.json` once the
connection has closed, that is once the write is durable. A write refused before its
transaction committed takes its record back (`recording`): the outbox is as it was. A
pending record left behind by a crash is settled by the next holder of the lock: an append
by comparing the table's row count with the count recorded before it, the others by
keeping them (a crash cannot tell whether they committed).

`state.json` (`OutboxState`, saved as `STATE`) and each record (`CHANGE_RECORD`) carry
`format_version` (`FORMAT_VERSION`; `hyper_assets._base.saved`): a file of a version this
library does not know is refused with `UnknownFormatVersionError`, one with a field it
does not know with `CorruptFileError`; one without a version (as versions before this one
wrote `state.json`) is version 1. `read` reads
them all at once, so one that cannot be read refuses before any record is acted on.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from tableauhyperapi import Connection, TableName, escape_name

from hyper_assets._base.files import fsync_path
from hyper_assets._base.saved import Fields, SavedFormat
from hyper_assets._engine.hyper_errors import hyper_errors
from hyper_assets._engine.sql import attach, count_rows, create_database, detach
from hyper_assets._engine.tables import Catalog, table_label
from hyper_assets._rows.ingest import Write, source_sql
from hyper_assets._rows.modes import DECLARED_MODES, WriteMode
from hyper_assets._rows.staging import Staged
from hyper_assets._rows.window import Window, saved_dimension
from hyper_assets.errors import IngestError

#: The table inside `<seq>.hyper` that holds captured rows or keys.
CAPTURED = TableName("public", "captured")
_ALIAS = "hyper_assets_outbox"
#: The version of `state.json` and of the change records this library writes and reads.
FORMAT_VERSION = 1


@dataclass(frozen=True)
class Change:
    """One recorded write. `uncertain`: a crashed append whose outcome cannot be told."""

    seq: int
    kind: WriteMode
    table: TableName
    id: str = field(default_factory=lambda: uuid.uuid4().hex)
    window: Window | None = None
    key: tuple[str, ...] = ()
    rows: int = 0
    rows_before: int | None = None
    uncertain: bool = False
    recorded_at: datetime = field(default_factory=lambda: datetime.now(UTC))

    def to_json(self) -> dict[str, Any]:
        """The record as `<seq>.json` (and a plan) holds it (`CHANGE_RECORD`)."""
        return {
            "seq": self.seq,
            "id": self.id,
            "kind": str(self.kind),
            "schema": self.table.schema_name.name.unescaped,
            "table": self.table.name.unescaped,
            "window": self.window.to_json() if self.window else None,
            "key": list(self.key),
            "rows": self.rows,
            "rows_before": self.rows_before,
            "uncertain": self.uncertain,
            "recorded_at": self.recorded_at.isoformat(),
        }

    @classmethod
    def from_json(cls, f: Fields) -> Change:
        return cls(
            seq=f.take("seq", int),
            id=f.take("id", str),
            kind=WriteMode(f.take("kind", str)),
            table=TableName(f.take("schema", str), f.take("table", str)),
            window=None if f.absent("window") else Window(f.each("window", saved_dimension)),
            key=f.strings("key"),
            rows=f.take("rows", int),
            rows_before=f.optional("rows_before", int),
            uncertain=f.take("uncertain", bool),
            recorded_at=datetime.fromisoformat(f.take("recorded_at", str)),
        )


@dataclass(frozen=True)
class OutboxState:
    """`state.json`, there from the first publish on: the number the next change takes."""

    next_seq: int = 1

    def to_json(self) -> dict[str, int]:
        return {"next_seq": self.next_seq}

    @classmethod
    def from_json(cls, f: Fields) -> OutboxState:
        return cls(next_seq=f.take("next_seq", int))


@dataclass(frozen=True)
class Recorded:
    """Every record of the outbox, each read and checked: the committed changes and the
    pending ones, oldest first."""

    committed: tuple[Change, ...]
    pending: tuple[Change, ...]


#: What to do about the outbox's `state.json` when it cannot be read.
STATE_WAY_OUT = (
    "Delete it and publish each data source of the file with full=True: no write is "
    "recorded until then, and the first such publish starts recording changes again."
)

_WHOLE = (
    "a whole-file publish makes the data source equal to the file without the outbox's records."
)
#: What to do about a change record that cannot be read.
RECORD_WAY_OUT = "Move it out of the outbox and publish with full=True: " + _WHOLE

#: `<seq>.json`, `<seq>.pending.json`, and each change of a plan.
CHANGE_RECORD = SavedFormat(FORMAT_VERSION, Change.from_json, Change.to_json, RECORD_WAY_OUT)
#: The outbox's `state.json`.
STATE = SavedFormat(FORMAT_VERSION, OutboxState.from_json, OutboxState.to_json, STATE_WAY_OUT)
#: What to do about a change's captured rows that Hyper cannot read or find.
ROWS_WAY_OUT = "Publish with full=True: " + _WHOLE


class Outbox:
    """The changes recorded beside one `.hyper` file. Use it while holding the file's lock."""

    def __init__(self, database: str | Path) -> None:
        self.database = Path(database).absolute()
        self.directory = self.database.with_name(self.database.name + ".outbox")
        self._state = self.directory / "state.json"

    @property
    def tracking(self) -> bool:
        """Whether writes are recorded: true from the first publish on."""
        return self._state.exists()

    def start_tracking(self, after: int = 0) -> None:
        """Records writes from now on, numbering them on from `after` and from every record
        still in the outbox: with `state.json` deleted, a new change must not take the
        number of a change kept for a data source, overwriting it or sent after it."""
        if not self.tracking:
            self.directory.mkdir(parents=True, exist_ok=True)
            names = (p.name.split(".")[0] for p in self.directory.iterdir())
            numbers = [int(name) for name in names if name.isdigit()]
            STATE.write(self._state, OutboxState(max([after, *numbers]) + 1))

    def last_seq(self) -> int:
        """The number of the latest change recorded (0 before any), once tracking started."""
        return self._read_state().next_seq - 1

    def rows_path(self, change: Change) -> Path:
        """The `.hyper` holding an append's rows or an upsert's keys (table `CAPTURED`)."""
        return self.directory / f"{change.seq:08d}.hyper"

    def _path(self, seq: int, pending: bool) -> Path:
        return self.directory / f"{seq:08d}{'.pending' if pending else ''}.json"

    def read(self) -> Recorded | None:
        """Every record, pending ones included; None before tracking starts.

        Raises `CorruptFileError` (`UnknownFormatVersionError`) naming the first file it
        cannot read, the state included: callers read before they act on any record, so
        that leaves every file as it was.
        """
        if not self.tracking:
            return None
        self._read_state()
        committed, pending = (
            tuple(self._read(p) for p in sorted(self.directory.glob(pattern)))
            for pattern in ("[0-9]*[0-9].json", "*.pending.json")
        )
        return Recorded(committed, pending)

    def changes(self) -> list[Change]:
        """The committed changes, oldest first (after `read` has checked every record)."""
        recorded = self.read()
        return list(recorded.committed) if recorded else []

    def _read_state(self) -> OutboxState:
        return STATE.read(self._state)

    def _read(self, path: Path) -> Change:
        return CHANGE_RECORD.read(path)

    def record(self, connection: Connection, write: Write, staged: Staged) -> Change | None:
        """Before `write` runs with the `staged` rows: its pending record, and the rows or
        keys it must keep.

        Returns None when nothing needs recording (no tracking yet, or no rows to add).
        """
        if not self.tracking or (write.mode in DECLARED_MODES and not staged.files):
            return None
        seq = self._read_state().next_seq
        change = Change(seq, write.mode, write.table, window=write.window)
        captured = None
        if write.mode == WriteMode.APPEND:
            before = _count(connection, write.table)
            change = replace(change, rows=staged.rows, rows_before=before)
            captured = "*"
        elif write.mode == WriteMode.UPSERT:
            change = replace(change, key=write.keys.primary_key, rows=staged.rows)
            captured = "DISTINCT " + ", ".join(escape_name(k) for k in change.key)
        STATE.write(self._state, OutboxState(seq + 1))
        CHANGE_RECORD.write(self._path(seq, pending=True), change)
        if captured:
            source = source_sql(staged.files, write.columns)
            try:
                self._capture(connection, change, f"SELECT {captured} FROM {source}")
            except BaseException:
                self.discard(change)
                raise
        return change

    @contextmanager
    def recording(
        self, connection: Connection, write: Write, staged: Staged
    ) -> Iterator[Change | None]:
        """`record` of `write`, taken back when the block (the write) raises: a write
        that raises has not committed, so there is nothing to publish."""
        change = self.record(connection, write, staged)
        try:
            yield change
        except BaseException:
            if change is not None:
                self.discard(change)
            raise

    def discard(self, change: Change) -> None:
        """Takes back the pending record of a write that did not commit, and its sequence
        number (`change` is the last one recorded: the caller still holds the lock)."""
        self.clear([change])
        STATE.write(self._state, OutboxState(change.seq))

    def _capture(self, connection: Connection, change: Change, select: str) -> None:
        """Stores the rows of `select` in the change's own `.hyper`, durably (detached).

        Hyper's failure is a `HyperFileError` naming that file and table `CAPTURED` (an
        `IngestError` unless Hyper says more).
        """
        path = self.rows_path(change)
        advice = (
            f"The rows written to {table_label(change.table)} could not be kept in the outbox; "
            "the write was not made: free space there, or fix what Hyper says, and run it again."
        )
        with hyper_errors(file=path, table=CAPTURED, otherwise=IngestError, advice=advice):
            create_database(connection, path)
            attach(connection, path, _ALIAS)
            try:
                connection.execute_command(f"DROP TABLE IF EXISTS {_ALIAS}.{CAPTURED}")
                connection.execute_command(f"CREATE TABLE {_ALIAS}.{CAPTURED} AS ({select})")
            finally:
                detach(connection, _ALIAS)

    def commit(self, change: Change) -> None:
        """After the write is durable (its connection closed): the change is to be sent."""
        pending = self._path(change.seq, pending=True)
        if pending.exists():
            os.replace(pending, self._path(change.seq, pending=False))
            fsync_path(self.directory)

    def settle(self, connection: Connection) -> list[Change]:
        """Commits or drops the pending records a crash or an error left behind, once every
        record is read (`read`); returns the committed changes then, oldest first."""
        recorded = self.read()
        if recorded is None:
            return []
        settled = list(recorded.committed)
        for change in recorded.pending:
            if change.kind == WriteMode.APPEND and change.rows_before is not None:
                count = _count(connection, change.table)
                if count == change.rows_before:
                    self.clear([change])
                    continue
                if count != change.rows_before + change.rows:
                    change = replace(change, uncertain=True)
                    CHANGE_RECORD.write(self._path(change.seq, pending=True), change)
            self.commit(change)
            settled.append(change)
        return sorted(settled, key=lambda c: c.seq)

    def clear(self, changes: list[Change]) -> None:
        """Forgets changes that were sent (or made moot by a whole-file publish)."""
        for change in changes:
            for path in (
                self._path(change.seq, pending=False),
                self._path(change.seq, pending=True),
                self.rows_path(change),
            ):
                path.unlink(missing_ok=True)
        if changes:
            fsync_path(self.directory)


def _count(connection: Connection, table: TableName) -> int:
    return count_rows(connection, table) if Catalog(connection).exists(table) else 0
