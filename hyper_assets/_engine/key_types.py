"""Internal: whether a write keeps its key columns of types the foreign keys between its
table and the others can hold.

Hyper takes an ASSUMED FOREIGN KEY only over columns of the type family of the primary key
it references (measured with hyperd 0.0.2x: the integers, NUMERIC and the floating types
among themselves; TEXT, VARCHAR and CHAR; DATE, TIMESTAMP and TIMESTAMPTZ; any other type
only with itself), and says only `type mismatch when referencing primary key columns of
table ...`, naming a table of its own when a swap is under way. So a write is judged here,
from the stored table's columns and keys and the new rows' columns, before Spark runs where
the file is local (`hyper_assets._dagster.preflight`) and again under the file's lock
(`hyper_assets._rows.ingest`):

- a referenced key column retyped across families (a CSV read without a schema: BIGINT
  becomes TEXT), or a foreign key column of a type its referenced key cannot be compared
  with, is a `KeyTypeError` naming the column, both types, the keys and the fix;
- a referenced key column retyped within its family (BIGINT to INTEGER, as `inferSchema`
  guesses) keeps its keys: the write goes on and says so (`Retyped.note`), as the next
  publish sends the whole file.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from tableauhyperapi import SqlType, TableName, TypeTag

from hyper_assets._engine.sql import NEW_SUFFIX, OLD_SUFFIX, table_label
from hyper_assets._engine.tables import Catalog, ForeignKey
from hyper_assets._engine.types import Column, sql_name
from hyper_assets.errors import KeyTypeError

_NUMBERS = "numbers"
#: The family of each type Hyper compares with others; a type not listed, only with itself.
_FAMILIES = {
    TypeTag.SMALL_INT: _NUMBERS,
    TypeTag.INT: _NUMBERS,
    TypeTag.BIG_INT: _NUMBERS,
    TypeTag.NUMERIC: _NUMBERS,
    TypeTag.FLOAT: _NUMBERS,
    TypeTag.DOUBLE: _NUMBERS,
    TypeTag.TEXT: "text",
    TypeTag.VARCHAR: "text",
    TypeTag.CHAR: "text",
    TypeTag.DATE: "dates and times",
    TypeTag.TIMESTAMP: "dates and times",
    TypeTag.TIMESTAMP_TZ: "dates and times",
}
_INTEGER_BYTES = {TypeTag.SMALL_INT: 2, TypeTag.INT: 4, TypeTag.BIG_INT: 8}


def family(sql_type: SqlType) -> str:
    """The types a key of `sql_type` can reference or be referenced by share this."""
    return _FAMILIES.get(sql_type.tag, sql_name(sql_type))


def change(stored: SqlType, new: SqlType) -> str:
    """How a type changes: "narrows" or "widens" (integers), else "changes"."""
    old_bytes, new_bytes = _INTEGER_BYTES.get(stored.tag), _INTEGER_BYTES.get(new.tag)
    if old_bytes and new_bytes and old_bytes != new_bytes:
        return "narrows" if new_bytes < old_bytes else "widens"
    return "changes"


@dataclass(frozen=True)
class KeyColumn:
    """Column `column` of `table`, of type `sql_type`."""

    table: TableName
    column: str
    sql_type: SqlType

    def __str__(self) -> str:
        return f"{table_label(self.table)}.{self.column} ({sql_name(self.sql_type)})"


@dataclass(frozen=True)
class Retyped:
    """Key column `stored` of the table written, which the foreign key columns `referencing`
    reference, written as `new`."""

    stored: KeyColumn
    new: Column
    referencing: tuple[KeyColumn, ...]

    @property
    def breaks(self) -> tuple[KeyColumn, ...]:
        """The referencing columns the new type cannot be compared with."""
        return tuple(r for r in self.referencing if family(r.sql_type) != family(self.new.sql_type))

    @property
    def summary(self) -> str:
        """One line for the write's metadata."""
        stored = self.stored
        how = change(stored.sql_type, self.new.sql_type)
        return (
            f"{table_label(stored.table)}.{stored.column}: {sql_name(stored.sql_type)} -> "
            f"{self.new.sql} ({how}); referenced by {', '.join(map(str, self.referencing))}"
        )

    @property
    def note(self) -> str:
        """The warning of a write that retypes the key within its family."""
        stored, new = self.stored, self.new
        how = change(stored.sql_type, new.sql_type)
        return (
            f"Key column {stored.column!r} of {table_label(stored.table)} {how} from "
            f"{sql_name(stored.sql_type)} to {_shown(new)}, while the foreign key(s) "
            f"referencing it keep their types ({', '.join(map(str, self.referencing))}): the "
            "keys hold, and the next publish sends the whole file (a column's type changed). "
            f"To keep {sql_name(stored.sql_type)}, cast {new.name} to it in the asset (a CSV "
            "read with inferSchema guesses types); to match, full-refresh "
            f"{_tables(self.referencing)} with {new.name} as {new.sql}."
        )

    def refusal(self) -> KeyTypeError:
        stored, new, breaks = self.stored, self.new, self.breaks
        return KeyTypeError(
            f"Key column {stored.column!r} of {table_label(stored.table)} is "
            f"{sql_name(stored.sql_type)} in the stored table but {_shown(new)} in the new "
            f"rows, and the foreign key(s) {', '.join(map(str, breaks))} reference it: Hyper "
            "keeps a foreign key only between types of one family (numbers; text; dates and "
            f"times), so the write would break them. Nothing was written. Cast {new.name} to "
            f"{sql_name(stored.sql_type)} in the asset (a CSV read without a schema gives "
            "strings: give the reader a schema); or, to change the key's type, drop the key "
            f"from the metadata of {_tables(breaks)} and full-refresh it, then write this "
            f"table, then declare the key again and full-refresh {_tables(breaks)} with "
            f"{new.name} as {new.sql}.",
            column=stored.column,
        )


def retyped_keys(
    table: TableName,
    stored: Sequence[Column],
    new: Sequence[Column],
    referencing: Sequence[tuple[str, KeyColumn]],
) -> list[Retyped]:
    """The key columns of `table` (`stored`, written as `new`) whose type the write
    changes, each with the `referencing` foreign key columns (by the column they
    reference). Pure: the catalog's part is `references`."""
    old = {c.name: c for c in stored}
    retyped = []
    for column in new:
        was = old.get(column.name)
        refs = tuple(ref for name, ref in referencing if name == column.name)
        if was is not None and refs and was.sql_type != column.sql_type:
            retyped.append(Retyped(KeyColumn(table, was.name, was.sql_type), column, refs))
    return retyped


def mismatched_reference(
    table: TableName, new: Sequence[Column], references: Sequence[tuple[str, KeyColumn]]
) -> KeyTypeError | None:
    """The refusal of the write's first foreign key column (of `new`) that cannot be
    compared with the key column it `references` (by the write's column); None if none."""
    types = {c.name: c for c in new}
    for name, target in references:
        column = types.get(name)
        if column is not None and family(column.sql_type) != family(target.sql_type):
            return KeyTypeError(
                f"Foreign key column {name!r} of {table_label(table)} is {_shown(column)} in "
                f"the new rows, but the key it references, {target}, is not of its family "
                "(numbers; text; dates and times), and Hyper keeps no foreign key between "
                f"them. Nothing was written. Cast {name} to {sql_name(target.sql_type)} in the "
                "asset (a CSV read without a schema gives strings: give the reader a schema).",
                column=name,
            )
    return None


def _shown(column: Column) -> str:
    return column.sql + (f" (Spark {column.spark_type})" if column.spark_type else "")


def _tables(columns: Sequence[KeyColumn]) -> str:
    return ", ".join(dict.fromkeys(table_label(c.table) for c in columns))


def check(
    catalog: Catalog,
    table: TableName,
    columns: Sequence[Column],
    foreign_keys: Sequence[ForeignKey],
    *,
    replaces: bool,
) -> list[Retyped]:
    """The key columns of `table` that a write of `columns` retypes within their family,
    after refusing (`KeyTypeError`) a foreign key column of the write that its referenced
    key cannot be compared with, and, for a write that `replaces` the table's columns (a
    full refresh, a partition write), a retype that breaks the keys referencing it."""
    targets = []
    for fk in foreign_keys:
        if fk.ref_table != table and catalog.exists(fk.ref_table):
            types = {c.name: c.sql_type for c in catalog.columns(fk.ref_table)}
            targets += [
                (name, KeyColumn(fk.ref_table, ref, types[ref]))
                for name, ref in zip(fk.columns, fk.ref_columns, strict=True)
                if ref in types
            ]
    refused = mismatched_reference(table, columns, targets)
    if refused is not None:
        raise refused
    if not replaces or not catalog.exists(table):
        return []
    referencing = []
    for other in catalog.referencing_tables(table):
        if other.name.unescaped.endswith((NEW_SUFFIX, OLD_SUFFIX)):
            continue  # a crashed swap's table, which the write drops first
        types = {c.name: c.sql_type for c in catalog.columns(other)}
        for fk in catalog.keys(other).foreign_keys:
            if fk.ref_table == table:
                referencing += [
                    (ref, KeyColumn(other, name, types[name]))
                    for name, ref in zip(fk.columns, fk.ref_columns, strict=True)
                ]
    retyped = retyped_keys(table, catalog.columns(table), columns, referencing)
    for key in retyped:
        if key.breaks:
            raise key.refusal()
    return retyped
