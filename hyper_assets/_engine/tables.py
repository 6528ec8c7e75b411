"""Internal: what a `.hyper` file holds: table definitions, assumed keys, column comments.

Reads the catalog and builds the DDL for tables and their ASSUMED keys, so Tableau can
build a star schema's relationships from the file itself.
"""

from __future__ import annotations

import difflib
import functools
import json
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Concatenate, ParamSpec, TypeVar

from tableauhyperapi import (
    Connection,
    TableDefinition,
    TableName,
    escape_name,
    escape_string_literal,
)

from hyper_assets._engine.hyper_errors import hyper_errors
from hyper_assets._engine.sql import table_label
from hyper_assets._engine.types import SPARK_TYPE_COMMENT, Column, columns_from_table
from hyper_assets.errors import ConfigurationError, MetadataValueError, SchemaMismatchError


@dataclass(frozen=True)
class ForeignKey:
    """`columns` of the table reference `ref_columns` of `ref_table` (its primary key)."""

    columns: tuple[str, ...]
    ref_table: TableName
    ref_columns: tuple[str, ...]


@dataclass(frozen=True)
class Keys:
    primary_key: tuple[str, ...] = ()
    foreign_keys: tuple[ForeignKey, ...] = field(default_factory=tuple)


def parse_foreign_keys(spec: object, default_schema: str, table: str) -> tuple[ForeignKey, ...]:
    """Reads metadata `foreign_keys`: `{"col": "schema.table.col"}`, one key per column, or
    a list of keys of one or more columns (a composite key):
    `[{"columns": ["item", "ticket"], "references": "schema.table", "ref_columns": [...]}]`.

    A reference may also be a list (`["schema", "table", "col"]`, `["schema", "table"]`),
    for names holding dots; without a schema it is `default_schema`.
    """
    if spec is None:
        return ()
    if isinstance(spec, dict):
        return tuple(
            _one_column_key(column, ref, default_schema, table) for column, ref in spec.items()
        )
    if isinstance(spec, list | tuple):
        return tuple(_key(entry, default_schema, table) for entry in spec)
    raise MetadataValueError(
        f"Metadata foreign_keys of {table} must be a dict like "
        '{"carrier": "Extract.airlines.carrier"}, or a list of keys like [{"columns": '
        '["item", "ticket"], "references": "Extract.sales", "ref_columns": ["item", '
        f'"ticket"]}}], got {spec!r}',
        key="foreign_keys",
    )


def _one_column_key(column: object, ref: object, default_schema: str, table: str) -> ForeignKey:
    parts = _parts(ref)
    if len(parts) == 2:
        parts = [default_schema, *parts]
    if len(parts) != 3 or not all(isinstance(p, str) and p for p in parts):
        raise MetadataValueError(
            f"Metadata foreign_keys[{column!r}] of {table} is {ref!r}; write it as "
            '"schema.table.column", or as ["schema", "table", "column"] when a name '
            "holds a dot.",
            key="foreign_keys",
        )
    return ForeignKey((str(column),), TableName(parts[0], parts[1]), (str(parts[2]),))


def _key(entry: object, default_schema: str, table: str) -> ForeignKey:
    """One entry of the list form: `{"columns": [...], "references": ..., "ref_columns": [...]}`."""
    fields = ("columns", "references", "ref_columns")
    example = (
        '{"columns": ["item", "ticket"], "references": "Extract.sales", '
        '"ref_columns": ["item", "ticket"]}'
    )
    if not isinstance(entry, dict) or set(entry) != set(fields):
        raise MetadataValueError(
            f"Metadata foreign_keys of {table} holds {entry!r}; each key of the list is a dict "
            f"of exactly {', '.join(fields)}, e.g. {example}.",
            key="foreign_keys",
        )
    ref = entry["references"]
    parts = _parts(ref)
    if len(parts) == 1:
        parts = [default_schema, *parts]
    columns, ref_columns = (_names(entry[f]) for f in ("columns", "ref_columns"))
    if (
        len(parts) != 2
        or not all(isinstance(p, str) and p for p in parts)
        or not columns
        or len(columns) != len(ref_columns)
    ):
        raise MetadataValueError(
            f"Metadata foreign_keys of {table} holds {entry!r}: give `columns` and "
            "`ref_columns` as lists of as many column names, and `references` as "
            f'"schema.table" (or ["schema", "table"] when a name holds a dot), e.g. {example}.',
            key="foreign_keys",
        )
    return ForeignKey(columns, TableName(parts[0], parts[1]), ref_columns)


def _parts(ref: object) -> list[object]:
    """A reference's dotted parts ("schema.table.col"), or its list's; [] for anything else."""
    if isinstance(ref, str):
        return list(ref.split("."))
    return list(ref) if isinstance(ref, list | tuple) else []


def _names(value: object) -> tuple[str, ...]:
    """Column names of a list form key; () when they are not a list of names."""
    if isinstance(value, list | tuple) and all(isinstance(v, str) and v for v in value):
        return tuple(value)
    return ()


def _columns_sql(names: tuple[str, ...]) -> str:
    return ", ".join(escape_name(n) for n in names)


def _fk_sql(fk: ForeignKey) -> str:
    return (
        f"ASSUMED FOREIGN KEY ({_columns_sql(fk.columns)}) "
        f"REFERENCES {fk.ref_table} ({_columns_sql(fk.ref_columns)})"
    )


def create_table_sql(table: TableName, columns: list[Column], keys: Keys) -> list[str]:
    """CREATE TABLE with its keys, then the comments that record Spark types."""
    parts = [f"{escape_name(c.name)} {c.sql}{'' if c.nullable else ' NOT NULL'}" for c in columns]
    if keys.primary_key:
        parts.append(f"ASSUMED PRIMARY KEY ({_columns_sql(keys.primary_key)})")
    parts.extend(_fk_sql(fk) for fk in keys.foreign_keys)
    return [f"CREATE TABLE {table} ({', '.join(parts)})", *_comments_sql(table, columns)]


def add_columns_sql(table: TableName, columns: list[Column]) -> list[str]:
    """ALTER TABLE ... ADD COLUMN, nullable whatever the rows say (the existing rows get
    NULL), then the comments that record Spark types."""
    return [
        *(f"ALTER TABLE {table} ADD COLUMN {escape_name(c.name)} {c.sql}" for c in columns),
        *_comments_sql(table, columns),
    ]


def _comments_sql(table: TableName, columns: list[Column]) -> list[str]:
    return [
        f"COMMENT ON COLUMN {table}.{escape_name(c.name)} IS "
        + escape_string_literal(SPARK_TYPE_COMMENT + c.spark_type)
        for c in columns
        if c.spark_type
    ]


_P = ParamSpec("_P")
_R = TypeVar("_R")


def _about_table(
    method: Callable[Concatenate[Catalog, TableName, _P], _R],
) -> Callable[Concatenate[Catalog, TableName, _P], _R]:
    """Hyper's failure in `method` as an error of our tree naming its `table` argument."""

    @functools.wraps(method)
    def wrapper(self: Catalog, table: TableName, *args: _P.args, **kwargs: _P.kwargs) -> _R:
        with hyper_errors(table=table):
            return method(self, table, *args, **kwargs)

    return wrapper


class Catalog:
    """Catalog queries on one open connection; Hyper's failures name the table."""

    def __init__(self, connection: Connection) -> None:
        self.connection = connection

    def exists(self, table: TableName) -> bool:
        return self.connection.catalog.has_table(table)

    def tables(self, database: str | None = None) -> list[TableName]:
        """Every table of `database` (an attached alias; default: the connection's own)."""
        catalog = self.connection.catalog
        return [
            table
            for schema in catalog.get_schema_names(database)
            for table in catalog.get_table_names(schema)
        ]

    @_about_table
    def columns(self, table: TableName) -> list[Column]:
        definition: TableDefinition = self.connection.catalog.get_table_definition(table)
        return columns_from_table(definition, self._spark_types(table))

    def _oid_filter(self, table: TableName) -> str:
        schema = table.schema_name.name.unescaped
        return (
            "cl.relname = "
            + escape_string_literal(table.name.unescaped)
            + " AND ns.nspname = "
            + escape_string_literal(schema)
        )

    _CLASS_JOIN = (
        "pg_catalog.pg_class cl JOIN pg_catalog.pg_namespace ns ON ns.oid = cl.relnamespace"
    )

    def _spark_types(self, table: TableName) -> dict[str, str]:
        rows = self.connection.execute_list_query(
            "SELECT a.attname, d.description FROM pg_catalog.pg_description d "
            f"JOIN {self._CLASS_JOIN} ON cl.oid = d.objoid "
            "JOIN pg_catalog.pg_attribute a ON a.attrelid = d.objoid AND a.attnum = d.objsubid "
            f"WHERE {self._oid_filter(table)}"
        )
        return {
            name: text.removeprefix(SPARK_TYPE_COMMENT)
            for name, text in rows
            if text and text.startswith(SPARK_TYPE_COMMENT)
        }

    def _attnames(self, oid: int) -> dict[int, str]:
        rows = self.connection.execute_list_query(
            f"SELECT attnum, attname FROM pg_catalog.pg_attribute WHERE attrelid = {int(oid)}"
        )
        return {int(num): name for num, name in rows}

    @_about_table
    def keys(self, table: TableName) -> Keys:
        """The ASSUMED keys stored for `table`."""
        rows = self.connection.execute_list_query(
            "SELECT con.contype, cl.oid, con.confrelid, CAST(con.conkey AS TEXT), "
            f"CAST(con.confkey AS TEXT) FROM pg_catalog.pg_constraint con JOIN {self._CLASS_JOIN} "
            f"ON cl.oid = con.conrelid WHERE {self._oid_filter(table)}"
        )
        primary: tuple[str, ...] = ()
        foreign = []
        for kind, oid, ref_oid, conkey, confkey in rows:
            names = self._attnames(oid)
            cols = tuple(names[n] for n in json.loads(conkey))
            if kind == "p":
                primary = cols
            elif kind == "f":
                ref_table, ref_names = self._table_of(ref_oid)
                ref_cols = tuple(ref_names[n] for n in json.loads(confkey))
                foreign.append(ForeignKey(cols, ref_table, ref_cols))
        return Keys(primary, tuple(foreign))

    def _table_of(self, oid: int) -> tuple[TableName, dict[int, str]]:
        ((name, schema),) = self.connection.execute_list_query(
            f"SELECT cl.relname, ns.nspname FROM {self._CLASS_JOIN} WHERE cl.oid = {int(oid)}"
        )
        return TableName(schema, name), self._attnames(oid)

    @_about_table
    def referencing_tables(self, table: TableName) -> list[TableName]:
        """Tables whose ASSUMED FOREIGN KEYs point at `table` (Hyper won't drop it)."""
        rows = self.connection.execute_list_query(
            "SELECT DISTINCT ref.relname, refns.nspname FROM pg_catalog.pg_constraint con "
            f"JOIN {self._CLASS_JOIN} ON cl.oid = con.confrelid "
            "JOIN pg_catalog.pg_class ref ON ref.oid = con.conrelid "
            "JOIN pg_catalog.pg_namespace refns ON refns.oid = ref.relnamespace "
            f"WHERE con.contype = 'f' AND {self._oid_filter(table)}"
        )
        found = (TableName(schema, name) for name, schema in rows)
        return [t for t in found if t != table]

    @_about_table
    def check_foreign_keys(
        self, table: TableName, keys: Keys
    ) -> tuple[Keys, tuple[ForeignKey, ...]]:
        """The keys with the foreign keys whose target exists, and those whose target does
        not exist yet (`hyper_assets._rows.pending_keys` adds them once it does).

        A reference to a column that is not the target's ASSUMED PRIMARY KEY is an error
        (Hyper refuses it, and Tableau could not use it).
        """
        usable, postponed = [], []
        for fk in keys.foreign_keys:
            if fk.ref_table == table:
                raise ConfigurationError(
                    f"Foreign key {table_label(table)}.{', '.join(fk.columns)} references its "
                    "own table; Hyper cannot declare that in CREATE TABLE. Leave it out."
                )
            if not self.exists(fk.ref_table):
                postponed.append(fk)
                continue
            target_pk = self.keys(fk.ref_table).primary_key
            if tuple(target_pk) != fk.ref_columns:
                raise ConfigurationError(
                    f"Foreign key {table_label(table)}.{', '.join(fk.columns)} references "
                    f"{table_label(fk.ref_table)}.{', '.join(fk.ref_columns)}, but the primary "
                    f"key of {table_label(fk.ref_table)} is {list(target_pk) or 'not declared'}. "
                    "Declare metadata primary_key on that asset (and materialise it) or "
                    "point the foreign key at its primary key."
                )
            usable.append(fk)
        return Keys(keys.primary_key, tuple(usable)), tuple(postponed)

    def postponed_note(self, table: TableName, fk: ForeignKey) -> str:
        """The warning for foreign key `fk` of `table`, whose target does not exist yet."""
        return (
            f"{table_label(table)}.{', '.join(fk.columns)} -> {table_label(fk.ref_table)}: "
            "the referenced table does not exist yet; the key is added when it is written"
            f"{self._did_you_mean(fk.ref_table)}"
        )

    def _did_you_mean(self, missing: TableName) -> str:
        """ ". Did you mean X?" when a table of the file has a name close to `missing`."""
        labels = [table_label(t) for t in self.tables()]
        close = difflib.get_close_matches(table_label(missing), labels, n=1, cutoff=0.8)
        return f". Did you mean {close[0]}? Then fix metadata foreign_keys" if close else ""

    @_about_table
    def add_missing_keys(self, table: TableName, wanted: Keys) -> None:
        """ALTER TABLE ... ADD the ASSUMED keys `wanted` that the table lacks."""
        stored = self.keys(table)
        if wanted.primary_key and not stored.primary_key:
            self.connection.execute_command(
                f"ALTER TABLE {table} ADD ASSUMED PRIMARY KEY ({_columns_sql(wanted.primary_key)})"
            )
        for fk in wanted.foreign_keys:
            if fk not in stored.foreign_keys:
                self.connection.execute_command(f"ALTER TABLE {table} ADD {_fk_sql(fk)}")

    @_about_table
    def keys_conflict(self, table: TableName, wanted: Keys) -> bool:
        """True when the stored keys cannot become `wanted` in place: one would have to be
        dropped (Hyper cannot drop a key), or a primary key added (Hyper adds one in place
        over NOT NULL columns only; a new table takes it over any)."""
        stored = self.keys(table)
        if wanted.primary_key != stored.primary_key:
            return True
        return any(fk not in wanted.foreign_keys for fk in stored.foreign_keys)


def schema_differences(stored: list[Column], new: list[Column]) -> list[str]:
    """Human-readable differences in column names and types (order and NOT NULL ignored)."""
    old = {c.name: c for c in stored}
    fresh = {c.name: c for c in new}
    diffs = [f"{n!r} is missing from the new rows" for n in old if n not in fresh]
    diffs += [f"{n!r} is not in the stored table" for n in fresh if n not in old]
    diffs += [
        f"{n!r} is {_shown(fresh[n])} in the new rows but {_shown(old[n])} in the table"
        for n in fresh
        if n in old and (fresh[n].sql, fresh[n].spark_type) != (old[n].sql, old[n].spark_type)
    ]
    return diffs


def _shown(column: Column) -> str:
    return column.sql + (f" (Spark {column.spark_type})" if column.spark_type else "")


def require_same_schema(
    table: TableName, stored: list[Column], new: list[Column], advice: str
) -> None:
    """Refuses `new` columns that differ from the `stored` ones, with `advice` on what to do."""
    diffs = schema_differences(stored, new)
    if diffs:
        names = {c.name for c in stored}
        adding = any(c.name not in names for c in new)
        raise SchemaMismatchError(
            f"The rows for {table_label(table)} do not match the stored table: "
            + "; ".join(diffs)
            + f". {advice}"
            + (
                " To add the new columns (NULL in the stored rows) instead, set the asset's "
                'metadata schema_evolution="add_columns".'
                if adding
                else ""
            )
        )
