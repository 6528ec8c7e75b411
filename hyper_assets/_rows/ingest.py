"""Internal: the ingest engine, which bulk-loads staged files into one table of a `.hyper`.

Each write is one of four modes, each done in as few transactions as Hyper allows (in a
transaction, DDL may come before DML, as in CREATE TABLE + INSERT, but no DDL may follow
DML; and a failed statement aborts the transaction):

- `replace`: full refresh. The same columns (names, types, NOT NULL; in any order) and
  no stored key to drop or change: TRUNCATE + INSERT in one transaction (new keys are
  added first). Otherwise, a swap: a new table loaded, then renamed in place of the old
  one (Hyper cannot drop a key; `hyper_assets._rows.swap`).
- `partition`: DELETE the partition's rows + INSERT the new ones, in one transaction;
  rows outside the partition abort it. Columns whose names or types differ swap the
  table like a full refresh when the window holds every row of it; otherwise they are
  refused, or added (below).
- `append`: INSERT.
- `upsert`: DELETE the rows whose key arrives + INSERT, in one transaction.

Appends, upserts and partition writes keep the table's columns, unless the write may add
new ones (`schema_evolution="add_columns"`): ALTER TABLE ... ADD COLUMN first. Hyper's
ROLLBACK does not undo ADD COLUMN (measured: the column stays), so a write that fails
after it drops the columns it added before the connection closes. A writer killed in
between leaves them (measured: hyperd keeps autocommitted DDL when it closes a dead
client's connection), as nullable columns that are NULL in every row.

A write that raises made no change (a table it created is dropped again: Hyper keeps a
CREATE TABLE that a ROLLBACK undoes the rows of). The caller closes the connection
afterwards: only then is the change durable. A foreign key to a table that does not exist
yet waits in a record beside the file, and is added once a write made its table
(`hyper_assets._rows.pending_keys`).
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from contextlib import suppress
from dataclasses import dataclass, field, replace
from pathlib import Path

from tableauhyperapi import (
    Connection,
    HyperException,
    TableName,
    escape_name,
    escape_string_literal,
)

from hyper_assets._engine import key_types
from hyper_assets._engine.hyper_errors import load_errors
from hyper_assets._engine.sql import count_rows, transaction
from hyper_assets._engine.tables import (
    Catalog,
    Keys,
    add_columns_sql,
    create_table_sql,
    require_same_schema,
    schema_differences,
    table_label,
)
from hyper_assets._engine.types import Column, columns_from_arrow
from hyper_assets._rows.geography import as_text, invalid_value, is_geography
from hyper_assets._rows.modes import WriteMode
from hyper_assets._rows.pending_keys import PendingKeys, add_pending_keys
from hyper_assets._rows.staging import Staged, is_arrow_stream, stream_schema
from hyper_assets._rows.swap import recover_swap, swap_table
from hyper_assets._rows.window import Window
from hyper_assets.errors import (
    ConfigurationError,
    IngestError,
    InvalidGeographyError,
    NullInNotNullColumnError,
    PrimaryKeyError,
    SchemaMismatchError,
)


@dataclass(frozen=True)
class Write:
    """What to write where: the target, its columns and keys, and how."""

    table: TableName
    columns: list[Column]
    mode: WriteMode = WriteMode.REPLACE
    keys: Keys = field(default_factory=Keys)
    window: Window | None = None
    add_columns: bool = False  # new columns of an append/upsert/partition write are added

    @property
    def where(self) -> str | None:
        """The SQL predicate of the partition window being written, if any."""
        return self.window.sql if self.window else None


@dataclass(frozen=True)
class WriteResult:
    """Rows loaded, and rows the write deleted or replaced."""

    rows_loaded: int
    rows_deleted: int
    seconds: float
    notes: tuple[str, ...] = ()
    retyped_keys: tuple[str, ...] = ()  # referenced key columns retyped within their family


def external_sql(files: Sequence[Path]) -> str:
    """The staged files as a FROM item: Parquet parts, or Arrow IPC streams.

    Hyper infers a Parquet file's columns; an Arrow stream's it must be told, with the
    nullability of the stream's fields, and it scans one stream per `external`.
    """
    if not is_arrow_stream(files[0]):
        paths = ", ".join(escape_string_literal(str(f)) for f in files)
        return f"external(ARRAY[{paths}], FORMAT => 'parquet')"
    # Version 4 maps each Arrow type to the one Hyper's stream reader requires (float32: REAL).
    columns = ", ".join(
        f"{escape_name(c.name)} {c.sql}" + ("" if c.nullable else " NOT NULL")
        for c in columns_from_arrow(stream_schema(files[0]), "streamed rows", version=4)
    )
    scans = " UNION ALL ".join(
        f"SELECT * FROM external({escape_string_literal(str(f))}, FORMAT => 'arrowstream', "
        f"COLUMNS => DESCRIPTOR({columns}))"
        for f in files
    )
    return f"({scans}) AS staged"


def source_sql(files: Sequence[Path], columns: list[Column]) -> str:
    """The staged `files` as a subquery `src` with `columns`' Hyper types."""
    select = ", ".join(f"{c.load_sql} AS {escape_name(c.name)}" for c in columns)
    return f"(SELECT {select} FROM {external_sql(files)}) AS src"


def _insert(connection: Connection, write: Write, target: TableName, staged: Staged) -> int:
    """INSERTs the staged rows; returns the row count.

    Every staged row must arrive: with a partition filter, rows outside it abort the
    transaction; without one, a count that differs from `staged.rows` is an error.
    """
    if not staged.files:
        return 0
    names = ", ".join(escape_name(c.name) for c in write.columns)
    where = f" WHERE {write.where}" if write.where else ""
    source = source_sql(staged.files, write.columns)
    loaded = connection.execute_command(
        f"INSERT INTO {target} ({names}) SELECT {names} FROM {source}{where}"
    )
    expected = staged.rows
    if loaded != expected and write.where:
        raise _outside_window(write, expected - loaded, expected)
    if loaded != expected:
        raise IngestError(
            f"Hyper loaded {loaded} of the {expected} rows staged for "
            f"{table_label(write.table)}; nothing was written. Run the step again.",
            table=table_label(write.table),
        )
    return loaded


def _outside_window(write: Write, outside: int, rows: int) -> SchemaMismatchError:
    return SchemaMismatchError(
        f"{outside} of {rows} rows for {table_label(write.table)} fall outside the "
        f"partition being written ({write.where}) or have NULL there; nothing was written. "
        "Filter the DataFrame to the partition's window (context.partition_time_window) "
        "before returning it."
    )


def _null_error(
    connection: Connection, write: Write, files: Sequence[Path]
) -> NullInNotNullColumnError:
    """Names the columns that brought NULLs into a NOT NULL column."""
    counts = ", ".join(
        f"COUNT(*) FILTER (WHERE {escape_name(c.name)} IS NULL)" for c in write.columns
    )
    (row,) = connection.execute_list_query(
        f"SELECT {counts} FROM {source_sql(files, write.columns)}"
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


def _geography_error(
    connection: Connection, write: Write, files: Sequence[Path]
) -> InvalidGeographyError | None:
    """Names the column, the value and a row holding it, of a value that is not WKT."""
    columns = as_text(write.columns)
    source = source_sql(files, columns)
    for column in filter(is_geography, write.columns):
        ref = escape_name(column.name)
        found = invalid_value(connection, f"SELECT {ref} FROM {source}")
        if found:
            value, said = found
            (row,) = connection.execute_list_query(
                f"SELECT * FROM {source} WHERE {ref} = {escape_string_literal(value)} LIMIT 1"
            )
            shown = ", ".join(f"{c.name}={v!r}" for c, v in zip(columns, row, strict=True))
            return InvalidGeographyError(
                f"Column {column.name!r} of {table_label(write.table)} holds {value!r}, which "
                f"is not geography as well-known text ({said}), in the row ({shown}); nothing "
                "was written. Give WKT such as 'POINT(-73.78 40.64)' (longitude first, "
                "latitude within +/-90), or NULL."
            )
    return None


def _check_keys(write: Write) -> None:
    """Key columns must be columns of the rows; an upsert needs a primary key."""
    label = table_label(write.table)
    names = {c.name for c in write.columns}
    declared = list(write.keys.primary_key)
    declared += [c for fk in write.keys.foreign_keys for c in fk.columns]
    missing = [k for k in declared if k not in names]
    if missing:
        raise ConfigurationError(
            f"Metadata keys of {label} name {missing}, which are not columns of its rows "
            f"({sorted(names)}). Fix primary_key / foreign_keys."
        )
    if write.mode == WriteMode.UPSERT and not write.keys.primary_key:
        raise ConfigurationError(
            f'write_mode="upsert" for {label} needs metadata primary_key=[...] naming the '
            "columns that identify a row."
        )


def write_table(
    connection: Connection, write: Write, staged: Staged, pending: PendingKeys
) -> WriteResult:
    """Runs `write` with the `staged` rows, committed when it returns; when it raises, the
    table and the `pending` record are as they were (the outbox relies on it). Key
    columns retyped so that a foreign key cannot hold are refused first, and retyped
    within their family noted (`hyper_assets._engine.key_types`).

    The write's foreign keys to tables that do not exist yet are recorded in `pending`;
    once it committed, the keys recorded there that the file can take now are added
    (`hyper_assets._rows.pending_keys`). Its notes say which keys wait, and why.
    """
    started = time.perf_counter()
    _check_keys(write)
    catalog = Catalog(connection)
    recover_swap(connection, catalog)  # a swap a crash interrupted, before the file is read
    keys, postponed = catalog.check_foreign_keys(write.table, write.keys)
    notes = [catalog.postponed_note(write.table, fk) for fk in postponed]
    write = replace(write, keys=keys)
    replaces = write.mode in (WriteMode.REPLACE, WriteMode.PARTITION)
    retyped = key_types.check(
        catalog, write.table, write.columns, keys.foreign_keys, replaces=replaces
    )
    notes += [key.note for key in retyped]
    with pending.declaring(write.table, postponed) as recorded:
        try:
            with load_errors(write.table):
                loaded, deleted = _write(connection, catalog, write, staged)
        except NullInNotNullColumnError as error:
            raise _null_error(connection, write, staged.files) from error
        except InvalidGeographyError as error:
            named = _geography_error(connection, write, staged.files)
            if named is None:
                raise
            raise named from error
    notes += add_pending_keys(catalog, recorded, write.table)
    seconds = time.perf_counter() - started
    return WriteResult(
        loaded, deleted, seconds, tuple(notes), tuple(key.summary for key in retyped)
    )


def _write(
    connection: Connection, catalog: Catalog, write: Write, staged: Staged
) -> tuple[int, int]:
    """Rows loaded, and rows deleted or replaced (the space a compaction may win back)."""
    table = write.table
    if not catalog.exists(table):
        return _create(connection, write, staged), 0
    stored = catalog.columns(table)
    if write.mode == WriteMode.REPLACE:
        nullability = {c.name: c.nullable for c in stored}
        same = not schema_differences(stored, write.columns) and all(
            nullability[c.name] == c.nullable for c in write.columns
        )
        if not same or catalog.keys_conflict(table, write.keys):
            return _swap(connection, catalog, write, staged)
        added = []
    else:
        changed = schema_differences(stored, write.columns)
        if changed and write.mode == WriteMode.PARTITION and _holds_all(connection, write):
            return _swap(connection, catalog, write, staged)  # all its rows: a full refresh
        added = _columns_to_add(stored, write)
    try:
        for statement in add_columns_sql(table, added):
            connection.execute_command(statement)
        catalog.add_missing_keys(table, write.keys)
        with transaction(connection):
            deleted = 0
            if write.mode == WriteMode.REPLACE:
                deleted = count_rows(connection, table)
                connection.execute_command(f"TRUNCATE TABLE {table}")
            elif write.mode == WriteMode.PARTITION:
                deleted = connection.execute_command(f"DELETE FROM {table} WHERE {write.where}")
            elif write.mode == WriteMode.UPSERT and staged.files:
                deleted = _delete_upserted(connection, write, staged.files)
            return _insert(connection, write, table, staged), deleted
    except BaseException:
        for column in added:  # ROLLBACK leaves them; a crashed hyperd keeps the last close
            with suppress(HyperException):
                connection.execute_command(
                    f"ALTER TABLE {table} DROP COLUMN {escape_name(column.name)}"
                )
        raise


def _columns_to_add(stored: list[Column], write: Write) -> list[Column]:
    """The write's columns the table lacks, when it may add them; any other difference
    from the stored columns is a `SchemaMismatchError` naming it."""
    names = {c.name for c in stored}
    added = [c for c in write.columns if c.name not in names] if write.add_columns else []
    kept = [c for c in write.columns if c not in added]
    require_same_schema(write.table, stored, kept, _KEEP_COLUMNS[write.mode])
    return added


_KEEP_ROWS = (
    "Appends and upserts keep the table's columns: change the asset to produce them, or, to "
    "change them, run it once without write_mode, returning all of the table's rows (a full "
    "refresh)."
)
#: What to do about rows whose columns differ from the stored table's, by write mode.
_KEEP_COLUMNS = {
    WriteMode.APPEND: _KEEP_ROWS,
    WriteMode.UPSERT: _KEEP_ROWS,
    WriteMode.PARTITION: "A partition write keeps the table's columns unless it replaces "
    "every row of the table: change the asset to produce them, or, to change them, write "
    "all the partitions the table holds in one run (give the asset "
    "backfill_policy=BackfillPolicy.single_run() and launch a backfill of the whole range, "
    "e.g. dagster asset materialize --select <asset> --partition-range <first>...<last>).",
}


def _holds_all(connection: Connection, write: Write) -> bool:
    """Whether every row of the table is in the window `write` replaces."""
    return count_rows(connection, write.table) == count_rows(connection, write.table, write.where)


def _create(connection: Connection, write: Write, staged: Staged) -> int:
    """The first write of a table: CREATE + INSERT; a failure leaves no table (nor schema).

    Rows outside the partition are refused before the CREATE, with the file untouched (a
    table created and dropped again changes its bytes).
    """
    table, schema = write.table, write.table.schema_name
    if write.where and staged.files:
        source = source_sql(staged.files, write.columns)
        inside = connection.execute_scalar_query(
            f"SELECT COUNT(*) FROM {source} WHERE {write.where}"
        )
        if inside != staged.rows:
            raise _outside_window(write, staged.rows - inside, staged.rows)
    new_schema = schema not in connection.catalog.get_schema_names()
    try:
        with transaction(connection):
            connection.execute_command(f"CREATE SCHEMA IF NOT EXISTS {schema}")
            for statement in create_table_sql(table, write.columns, write.keys):
                connection.execute_command(statement)
            return _insert(connection, write, table, staged)
    except BaseException:
        with suppress(HyperException):
            connection.execute_command(f"DROP TABLE IF EXISTS {table}")
            if new_schema:
                connection.execute_command(f"DROP SCHEMA IF EXISTS {schema}")
        raise


def _delete_upserted(connection: Connection, write: Write, files: Sequence[Path]) -> int:
    """Deletes the rows whose key arrives (keys must be unique and not NULL); how many."""
    table, key = write.table, write.keys.primary_key
    names = ", ".join(escape_name(k) for k in key)
    any_null = " OR ".join(f"{escape_name(k)} IS NULL" for k in key)
    source = source_sql(files, write.columns)
    ((repeated, nulls),) = connection.execute_list_query(
        f"SELECT (SELECT COUNT(*) FROM (SELECT 1 FROM {source} GROUP BY {names} "
        f"HAVING COUNT(*) > 1) AS d), (SELECT COUNT(*) FROM {source} WHERE {any_null})"
    )
    if repeated or nulls:
        raise PrimaryKeyError(
            f"The upsert into {table_label(table)} has {repeated} key(s) that occur more "
            f"than once and {nulls} row(s) with a NULL key ({list(key)}); nothing was "
            "written. Deduplicate the rows on the primary key and drop NULL keys."
        )
    match = " AND ".join(f"{table}.{escape_name(k)} = src.{escape_name(k)}" for k in key)
    return connection.execute_command(
        f"DELETE FROM {table} WHERE EXISTS (SELECT 1 FROM {source} WHERE {match})"
    )


def _swap(
    connection: Connection, catalog: Catalog, write: Write, staged: Staged
) -> tuple[int, int]:
    """Full refresh with new columns or keys: the staged rows loaded into a new table,
    swapped in (`hyper_assets._rows.swap`). Rows loaded, and the rows of the table dropped."""

    def load(new: TableName) -> int:
        return _insert(connection, write, new, staged)

    return swap_table(connection, catalog, write.table, write.columns, write.keys, load)
