"""The ingest engine: bulk-load staged Parquet parts into one table of an open `.hyper`.

Each write is one of four modes, each done in as few transactions as Hyper allows
(a transaction may not mix DDL and DML, and a failed statement aborts it):

- `replace`: full refresh. Same columns: TRUNCATE + INSERT in one transaction. New
  columns: load a new table, then DROP + RENAME in one DDL transaction.
- `partition`: DELETE the partition's rows + INSERT the new ones, in one transaction;
  rows outside the partition abort it.
- `append`: INSERT.
- `upsert`: DELETE the rows whose key arrives + INSERT, in one transaction.

The caller closes the connection afterwards: only then is the change durable.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from tableauhyperapi import (
    Connection,
    HyperException,
    TableName,
    escape_name,
    escape_string_literal,
)

from hyper_assets.errors import (
    ConfigurationError,
    IngestError,
    NullInNotNullColumnError,
    SchemaMismatchError,
)
from hyper_assets.staging import staged_row_count
from hyper_assets.tables import (
    Catalog,
    Keys,
    create_table_sql,
    require_same_schema,
    schema_differences,
    table_label,
)
from hyper_assets.types import Column

WriteMode = Literal["replace", "partition", "append", "upsert"]

_NEW_SUFFIX = "__hyper_assets_new"


@dataclass(frozen=True)
class Write:
    """What to write where: the target, its columns and keys, and how."""

    table: TableName
    columns: list[Column]
    mode: WriteMode = "replace"
    keys: Keys = field(default_factory=Keys)
    where: str | None = None


@dataclass(frozen=True)
class WriteResult:
    rows_loaded: int
    row_count: int
    seconds: float
    notes: tuple[str, ...] = ()


@contextmanager
def transaction(connection: Connection) -> Iterator[None]:
    """BEGIN ... COMMIT, rolled back on any exception (a failed statement aborts it)."""
    connection.execute_command("BEGIN TRANSACTION")
    try:
        yield
    except BaseException:
        with suppress(HyperException):
            connection.execute_command("ROLLBACK")
        raise
    connection.execute_command("COMMIT")


def _source_sql(files: list[Path], columns: list[Column]) -> str:
    paths = ", ".join(escape_string_literal(str(f)) for f in files)
    select = ", ".join(f"{c.load_sql} AS {escape_name(c.name)}" for c in columns)
    return f"(SELECT {select} FROM external(ARRAY[{paths}], FORMAT => 'parquet')) AS src"


def _insert(connection: Connection, write: Write, target: TableName, files: list[Path]) -> int:
    """INSERT the staged rows (only those inside `write.where`); returns the row count."""
    if not files:
        return 0
    names = ", ".join(escape_name(c.name) for c in write.columns)
    where = f" WHERE {write.where}" if write.where else ""
    source = _source_sql(files, write.columns)
    return connection.execute_command(
        f"INSERT INTO {target} ({names}) SELECT {names} FROM {source}{where}"
    )


def _explain(error: HyperException, write: Write) -> IngestError:
    return IngestError(
        f"Hyper could not load the rows for {table_label(write.table)}; the stored table is "
        f"unchanged. Hyper said: {str(error).strip()}"
    )


def _null_error(
    connection: Connection, write: Write, files: list[Path]
) -> NullInNotNullColumnError:
    """Names the columns that brought NULLs into a NOT NULL column."""
    counts = ", ".join(
        f"COUNT(*) FILTER (WHERE {escape_name(c.name)} IS NULL)" for c in write.columns
    )
    (row,) = connection.execute_list_query(
        f"SELECT {counts} FROM {_source_sql(files, write.columns)}"
    )
    catalog = Catalog(connection)
    stored = catalog.columns(write.table) if catalog.exists(write.table) else write.columns
    not_null = {c.name for c in stored if not c.nullable}
    culprits = [c.name for c, n in zip(write.columns, row, strict=True) if n and c.name in not_null]
    return NullInNotNullColumnError(
        f"NULLs arrived for NOT NULL column(s) {culprits} of {table_label(write.table)}; "
        "nothing was written. Fill or filter the NULLs, or make the column nullable with "
        "an unpartitioned full refresh."
    )


def write_table(connection: Connection, write: Write, files: list[Path]) -> WriteResult:
    """Runs `write` with the staged `files`; on any error the table is as it was."""
    started = time.perf_counter()
    catalog = Catalog(connection)
    schema = write.table.schema_name.name.unescaped
    catalog.ensure_schema(schema)
    keys, notes = catalog.check_foreign_keys(write.table, write.keys)
    write = Write(write.table, write.columns, write.mode, keys, write.where)
    if write.mode == "upsert" and not keys.primary_key:
        raise ConfigurationError(
            f'write_mode="upsert" for {table_label(write.table)} needs metadata '
            "primary_key=[...] naming the columns that identify a row."
        )
    expected = staged_row_count(files)
    try:
        loaded = _write(connection, catalog, write, files, expected)
    except HyperException as error:
        if "non-NULL value required" in str(error):
            raise _null_error(connection, write, files) from error
        raise _explain(error, write) from error
    where = f" WHERE {write.where}" if write.mode == "partition" else ""
    (count,) = connection.execute_list_query(f"SELECT COUNT(*) FROM {write.table}{where}")[0]
    return WriteResult(loaded, int(count), time.perf_counter() - started, tuple(notes))


def _write(
    connection: Connection, catalog: Catalog, write: Write, files: list[Path], expected: int
) -> int:
    table = write.table
    if not catalog.exists(table):
        with transaction(connection):
            for statement in create_table_sql(table, write.columns, write.keys):
                connection.execute_command(statement)
            return _checked_insert(connection, write, table, files, expected)
    stored = catalog.columns(table)
    if write.mode == "replace":
        return _replace(connection, catalog, write, files, stored)
    require_same_schema(table, stored, write.columns)
    with transaction(connection):
        if write.mode == "partition":
            connection.execute_command(f"DELETE FROM {table} WHERE {write.where}")
        elif write.mode == "upsert" and files:
            match = " AND ".join(
                f"{table}.{escape_name(k)} = src.{escape_name(k)}" for k in write.keys.primary_key
            )
            connection.execute_command(
                f"DELETE FROM {table} WHERE EXISTS "
                f"(SELECT 1 FROM {_source_sql(files, write.columns)} WHERE {match})"
            )
        loaded = _checked_insert(connection, write, table, files, expected)
    catalog.add_missing_keys(table, write.keys)
    return loaded


def _checked_insert(
    connection: Connection, write: Write, target: TableName, files: list[Path], expected: int
) -> int:
    loaded = _insert(connection, write, target, files)
    if write.mode == "partition" and loaded != expected:
        raise SchemaMismatchError(
            f"{expected - loaded} of {expected} rows for {table_label(write.table)} fall "
            f"outside the partition being written ({write.where}) or have NULL there; "
            "nothing was written. Filter the DataFrame to the partition's window "
            "(context.partition_time_window) before returning it."
        )
    return loaded


def _replace(
    connection: Connection,
    catalog: Catalog,
    write: Write,
    files: list[Path],
    stored: list[Column],
) -> int:
    table = write.table
    nullability = {c.name: c.nullable for c in stored}
    same_columns = not schema_differences(stored, write.columns) and all(
        nullability[c.name] == c.nullable for c in write.columns
    )
    if same_columns and not catalog.keys_conflict(table, write.keys):
        with transaction(connection):
            connection.execute_command(f"TRUNCATE TABLE {table}")
            loaded = _insert(connection, write, table, files)
        catalog.add_missing_keys(table, write.keys)
        return loaded
    referencing = catalog.referencing_tables(table)
    if referencing:
        raise SchemaMismatchError(
            f"{table_label(table)} changes its columns or keys, but "
            f"{', '.join(table_label(t) for t in referencing)} reference it with ASSUMED "
            "FOREIGN KEYs, and Hyper cannot drop a referenced table. Keep its columns and "
            "keys, or drop the referencing tables (or the file) and materialise them again."
        )
    staging = TableName(table.schema_name, table.name.unescaped + _NEW_SUFFIX)
    connection.execute_command(f"DROP TABLE IF EXISTS {staging}")
    try:
        with transaction(connection):
            for statement in create_table_sql(staging, write.columns, write.keys):
                connection.execute_command(statement)
            loaded = _insert(connection, write, staging, files)
        with transaction(connection):
            connection.execute_command(f"DROP TABLE {table}")
            connection.execute_command(
                f"ALTER TABLE {staging} RENAME TO {escape_name(table.name.unescaped)}"
            )
    finally:
        connection.execute_command(f"DROP TABLE IF EXISTS {staging}")
    return loaded
