"""Foreign keys declared before the file could take them, recorded beside it until it can.

Hyper refuses an ASSUMED FOREIGN KEY to a table that does not exist, and nothing orders a
run's assets that only declare keys: Dagster may write a star's facts before the
dimension they reference. A write whose metadata declares such a key records it in
`<database>.pending-keys.json` (`PendingKeys`), named after the file, so it travels with
it in each generation of an object-store home. Then:

- each write of a table replaces that table's pending keys with the ones it could not
  add, before its transaction (the latest declaration wins), and puts the record back
  when it fails;
- after each write's own transaction committed, every pending key the file can take now
  is added (`ALTER TABLE ... ADD ASSUMED FOREIGN KEY`, as keys are added in place): the
  write that creates the referenced table, in any write mode, adds the keys waiting for
  it, and a write of any table adds one a crash left out. Not inside the transaction:
  Hyper's ROLLBACK keeps DDL (measured: a table created and a key added in a transaction
  rolled back both stay), and a referenced table cannot be dropped, so a failed write
  would leave its key and an empty table behind. A key to the written table that stays
  out is a warning saying why;
- a publish refuses a data source whose tables lack a key declared between them, naming
  the key and why (`hyper_assets.tableau._publish.model`).

A key whose table references a column that is not the referenced table's primary key
stays out (Hyper refuses it, and Tableau could not use it), as when both tables exist at
its write. A recorded key already in the file, or whose table is gone, waits for nothing.

The record carries `format_version` (`FORMAT_VERSION`) and `foreign_keys`, a list of
`{"schema", "table", "columns", "ref_schema", "ref_table", "ref_columns"}`: the key of
`schema.table` on `columns`, referencing `ref_columns` of `ref_schema.ref_table`.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tableauhyperapi import TableName

from hyper_assets._base.saved import Fields, SavedFormat
from hyper_assets._engine.sql import table_label
from hyper_assets._engine.tables import Catalog, ForeignKey, Keys
from hyper_assets.errors import HyperFileError

#: The version of the record this library writes and reads.
FORMAT_VERSION = 1
#: What to do about a record that cannot be read.
WAY_OUT = (
    "Delete it, then materialise each asset declaring metadata foreign_keys again: each "
    "write records the keys its table still waits for."
)
#: Why a key both tables could take is not in the file: Hyper refused it when tried.
REFUSED = (
    "Hyper refused it (the warning of the write that tried quotes why: the columns' types "
    "may differ); materialise the asset declaring it to see Hyper's words"
)


@dataclass(frozen=True)
class PendingKey:
    """Foreign key `key` of `table`, declared in its metadata, not in the file yet."""

    table: TableName
    key: ForeignKey

    def __str__(self) -> str:
        return (
            f"{table_label(self.table)}.{', '.join(self.key.columns)} -> "
            f"{table_label(self.key.ref_table)}.{', '.join(self.key.ref_columns)}"
        )

    def to_json(self) -> dict[str, Any]:
        ref = self.key.ref_table
        return {
            "schema": self.table.schema_name.name.unescaped,
            "table": self.table.name.unescaped,
            "columns": list(self.key.columns),
            "ref_schema": ref.schema_name.name.unescaped,
            "ref_table": ref.name.unescaped,
            "ref_columns": list(self.key.ref_columns),
        }

    @classmethod
    def from_json(cls, f: Fields) -> PendingKey:
        table = TableName(f.take("schema", str), f.take("table", str))
        columns = f.strings("columns")
        ref = TableName(f.take("ref_schema", str), f.take("ref_table", str))
        return cls(table, ForeignKey(columns, ref, f.strings("ref_columns")))


@dataclass(frozen=True)
class MissingKey:
    """A declared key the file lacks, and why (with what to do)."""

    key: PendingKey
    why: str

    def __str__(self) -> str:
        return f"{self.key} ({self.why})"


def outstanding(
    pending: Sequence[PendingKey], stored: Mapping[TableName, Keys]
) -> list[PendingKey]:
    """The `pending` keys the file's tables (`stored`: each table's keys) still lack; one
    already added, or whose table is gone (with its declaration), waits for nothing."""
    return [p for p in pending if p.table in stored and p.key not in stored[p.table].foreign_keys]


def blocker(key: PendingKey, stored: Mapping[TableName, Keys]) -> str | None:
    """Why the file (`stored`: each table's keys) cannot take `key` now, with what to do;
    None when Hyper may add it."""
    ref = key.key.ref_table
    target = stored.get(ref)
    if target is None:
        return f"{table_label(ref)} does not exist yet: materialise it"
    if target.primary_key != key.key.ref_columns:
        return (
            f"the primary key of {table_label(ref)} is "
            f"{list(target.primary_key) or 'not declared'}: declare metadata "
            f"primary_key={list(key.key.ref_columns)} on it, or point the key at its primary key"
        )
    return None


def missing_keys(
    pending: Sequence[PendingKey],
    stored: Mapping[TableName, Keys],
    declared: Sequence[PendingKey] = (),
) -> list[MissingKey]:
    """The declared keys the file (`stored`: each table's keys) lacks, each with why: those
    the writes recorded as `pending`, and those the assets' metadata declares now
    (`declared`) that no write of their table took (declared since it was written)."""
    waiting = [MissingKey(p, blocker(p, stored) or REFUSED) for p in outstanding(pending, stored)]
    return waiting + [
        MissingKey(d, blocker(d, stored) or _unwritten(d.table))
        for d in outstanding(declared, stored)
        if d not in pending
    ]


def _unwritten(table: TableName) -> str:
    label = table_label(table)
    return f"{label} was written before its metadata declared it: materialise {label} again"


def stored_keys(catalog: Catalog) -> dict[TableName, Keys]:
    """The keys of every table of the file."""
    return {table: catalog.keys(table) for table in catalog.tables()}


def add_pending_keys(
    catalog: Catalog, pending: Sequence[PendingKey], written: TableName
) -> list[str]:
    """After a write of `written` committed: adds each `pending` key the file can take now.

    Returns a warning for each key to `written` left out, saying why; Hyper refusing one
    (its columns' types differ, say) changes nothing, and it stays pending.
    """
    if not pending:
        return []
    stored = stored_keys(catalog)
    notes = []
    for key in outstanding(pending, stored):
        why = blocker(key, stored)
        if why is None:
            try:
                catalog.add_missing_keys(key.table, Keys(foreign_keys=(key.key,)))
                continue
            except HyperFileError as error:
                why = str(error)
        if key.key.ref_table == written:
            notes.append(f"Foreign key {key} stays out of the file: {why}.")
    return notes


class PendingKeys:
    """The foreign keys waiting beside one `.hyper` file. Use it while holding its lock."""

    def __init__(self, database: Path) -> None:
        self.path = database.with_name(database.name + ".pending-keys.json")

    def read(self) -> tuple[PendingKey, ...]:
        """The keys recorded; none without a record. `CorruptFileError` naming the record
        when it cannot be read (`UnknownFormatVersionError`: written by a newer version)."""
        if not self.path.exists():
            return ()
        return RECORD.read(self.path)

    def _write(self, keys: tuple[PendingKey, ...]) -> None:
        if keys:
            RECORD.write(self.path, keys)
        else:
            self.path.unlink(missing_ok=True)

    @contextmanager
    def declaring(
        self, table: TableName, postponed: Sequence[ForeignKey]
    ) -> Iterator[tuple[PendingKey, ...]]:
        """For a write of `table` (the block): its pending keys are `postponed` from now
        on, and the block gets every key recorded; put back as they were when it raises."""
        before = self.read()
        after = tuple(p for p in before if p.table != table)
        after += tuple(PendingKey(table, key) for key in postponed)
        if after != before:
            self._write(after)
        try:
            yield after
        except BaseException:
            if after != before:
                self._write(before)
            raise


#: `<database>.pending-keys.json`.
RECORD = SavedFormat(
    FORMAT_VERSION,
    lambda f: f.each("foreign_keys", PendingKey.from_json),
    lambda keys: {"foreign_keys": [k.to_json() for k in keys]},
    WAY_OUT,
)
