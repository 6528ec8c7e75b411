"""Internal: a full refresh that changes its table's columns or keys, as a swap.

Hyper cannot drop a key (no DROP CONSTRAINT), nor a table another one's key references,
and does not roll DDL back (measured: a ROLLBACK keeps a CREATE and a DROP). So the
ingest engine (`hyper_assets._rows.ingest`) loads a new table beside the old one, with
copies of the tables whose keys reach it, and swaps them in (`swap_table`) in steps each
undone on failure; a swap a crash interrupted is finished or undone by the next write
(`recover_swap`). The tables a swap makes carry the suffixes of `hyper_assets._engine.sql`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from contextlib import suppress
from dataclasses import replace

from tableauhyperapi import Connection, HyperException, TableName, escape_name

from hyper_assets._engine.sql import NEW_SUFFIX, OLD_SUFFIX, count_rows, transaction
from hyper_assets._engine.tables import Catalog, Keys, create_table_sql, table_label
from hyper_assets._engine.types import Column
from hyper_assets.errors import SchemaMismatchError


def swap_table(
    connection: Connection,
    catalog: Catalog,
    table: TableName,
    columns: list[Column],
    keys: Keys,
    load: Callable[[TableName], int],
) -> tuple[int, int]:
    """Full refresh of `table` with new `columns` or `keys`: a new table made and filled
    by `load` (given its name; the rows it loaded), then swapped in.

    The tables whose keys reach this one (`_referencing`) are copied beside the new table,
    their keys pointing at the new tables, and swapped in with it; their rows do not
    change. The swap is made of steps each undone on failure (`_swap_in`). Rows loaded,
    and the rows of the table dropped.
    """
    rebuilt = _referencing(catalog, table, keys.primary_key)
    news = {t: _suffixed(t, NEW_SUFFIX) for t in [table, *rebuilt]}  # the order they are made
    try:
        # Hyper takes DDL then DML in a transaction, not DDL after DML.
        with transaction(connection):
            for statement in create_table_sql(news[table], columns, keys):
                connection.execute_command(statement)
            for old, (old_columns, old_keys) in rebuilt.items():
                pointed = tuple(
                    replace(fk, ref_table=news.get(fk.ref_table, fk.ref_table))
                    for fk in old_keys.foreign_keys
                )
                for statement in create_table_sql(
                    news[old], old_columns, replace(old_keys, foreign_keys=pointed)
                ):
                    connection.execute_command(statement)
            loaded = load(news[table])
            for old in rebuilt:
                connection.execute_command(f"INSERT INTO {news[old]} SELECT * FROM {old}")
        dropped = count_rows(connection, table)
    except BaseException:
        _drop_all(connection, list(news.values())[::-1])
        raise
    _swap_in(connection, news)
    return loaded, dropped


def _suffixed(table: TableName, suffix: str) -> TableName:
    return TableName(table.schema_name, table.name.unescaped + suffix)


def _swap_in(connection: Connection, news: Mapping[TableName, TableName]) -> None:
    """Puts each new table (`news`: by the table it replaces, referenced before
    referencing) in place of the old one: the old ones renamed aside, the new ones renamed
    in, then the old ones dropped. A failure before the drops renames everything back and
    drops the new tables; the old ones left by a failure in the drops go at the next write
    (`recover_swap`)."""
    aside: list[TableName] = []
    moved_in: list[TableName] = []
    try:
        for old in news:
            connection.execute_command(_rename_sql(old, old.name.unescaped + OLD_SUFFIX))
            aside.append(old)
        for old, new in news.items():
            connection.execute_command(_rename_sql(new, old.name.unescaped))
            moved_in.append(old)
    except BaseException:
        for old in moved_in:
            _attempt(connection, _rename_sql(old, old.name.unescaped + NEW_SUFFIX))
        for old in aside:
            _attempt(connection, _rename_sql(_suffixed(old, OLD_SUFFIX), old.name.unescaped))
        _drop_all(connection, list(news.values())[::-1])
        raise
    _drop_all(connection, [_suffixed(old, OLD_SUFFIX) for old in reversed(news)])


def recover_swap(connection: Connection, catalog: Catalog) -> None:
    """Finishes or undoes a swap a crash interrupted: when a table renamed aside has no
    table in its place, every table renamed in goes back to being new and every table
    renamed aside comes back; then what is left aside, and every new table, is dropped."""
    tables = catalog.tables()
    aside = [t for t in tables if t.name.unescaped.endswith(OLD_SUFFIX)]
    originals = {
        t: TableName(t.schema_name, t.name.unescaped.removesuffix(OLD_SUFFIX)) for t in aside
    }
    if any(original not in tables for original in originals.values()):
        for t, original in originals.items():
            if original in tables:
                _attempt(connection, _rename_sql(original, original.name.unescaped + NEW_SUFFIX))
            _attempt(connection, _rename_sql(t, original.name.unescaped))
        tables = catalog.tables()
    leftovers = [t for t in tables if t.name.unescaped.endswith((OLD_SUFFIX, NEW_SUFFIX))]
    _drop_all(connection, leftovers)


def _rename_sql(table: TableName, name: str) -> str:
    return f"ALTER TABLE {table} RENAME TO {escape_name(name)}"


def _attempt(connection: Connection, sql: str) -> None:
    """Runs `sql` in undoing a failed step: what fails is left for the next write."""
    with suppress(HyperException):
        connection.execute_command(sql)


def _drop_all(connection: Connection, tables: Sequence[TableName]) -> None:
    """Drops those of `tables` that exist, each once nothing references it any more (in as
    many rounds as their keys need); what cannot be dropped is left."""
    left = list(tables)
    while left:
        kept = []
        for table in left:
            try:
                connection.execute_command(f"DROP TABLE IF EXISTS {table}")
            except HyperException:
                kept.append(table)
        if len(kept) == len(left):
            return
        left = kept


def _referencing(
    catalog: Catalog, table: TableName, primary_key: tuple[str, ...]
) -> dict[TableName, tuple[list[Column], Keys]]:
    """The tables whose foreign keys reach `table`, directly or through one another, each
    after the tables it references, with their columns and keys: what a swap of `table`
    (to `primary_key`) copies. `SchemaMismatchError` when a key to `table` names columns
    that are not its new primary key, or when their keys form a cycle."""
    keys: dict[TableName, Keys] = {}
    frontier = [table]
    while frontier:
        for other in catalog.referencing_tables(frontier.pop()):
            if other not in keys:
                keys[other] = catalog.keys(other)
                frontier.append(other)
    for other, other_keys in keys.items():
        for fk in other_keys.foreign_keys:
            if fk.ref_table == table and fk.ref_columns != primary_key:
                raise SchemaMismatchError(
                    f"{table_label(table)} changes its primary key to {list(primary_key)}, "
                    f"but the foreign key {table_label(other)}.{', '.join(fk.columns)} "
                    f"references {list(fk.ref_columns)}: keep {list(fk.ref_columns)} as its "
                    f"primary key, or drop that key from {table_label(other)}'s metadata and "
                    "materialise it first. Nothing was written."
                )
    ordered: dict[TableName, tuple[list[Column], Keys]] = {}
    while len(ordered) < len(keys):
        ready = [
            t
            for t, k in keys.items()
            if t not in ordered
            and all(
                fk.ref_table not in keys or fk.ref_table in ordered
                for fk in k.foreign_keys
                if fk.ref_table != t
            )
        ]
        if not ready:
            cycle = ", ".join(table_label(t) for t in keys if t not in ordered)
            raise SchemaMismatchError(
                f"{table_label(table)} changes its columns or keys, but the tables whose keys "
                f"reference it ({cycle}) reference one another in a cycle, which Hyper cannot "
                "rebuild. Nothing was written."
            )
        for t in ready:
            ordered[t] = (catalog.columns(t), keys[t])
    return ordered
