"""How `HyperIOManager` reads a table back: its stored columns, the ones an input asks
for, and the rows of the partitions it loads, exported to Parquet inside Hyper."""

from __future__ import annotations

from pathlib import Path

from tableauhyperapi import Connection, TableName, escape_string_literal

from hyper_assets.errors import ConfigurationError, TableNotFoundError
from hyper_assets.partitions import Window
from hyper_assets.tables import Catalog, table_label
from hyper_assets.types import Column, export_sql


def stored_columns(
    connection: Connection, table: TableName, database: str, asset: str
) -> list[Column]:
    """The columns of `table` in `database`; `TableNotFoundError` naming `asset` if absent."""
    catalog = Catalog(connection)
    if not catalog.exists(table):
        raise TableNotFoundError(
            f"Table {table_label(table)} is not in {database}: materialise asset {asset} first."
        )
    return catalog.columns(table)


def select_columns(
    columns: list[Column], wanted: tuple[str, ...] | None, label: str
) -> list[Column]:
    """The `wanted` columns (an input's metadata `columns`), in its order; all without it."""
    if not wanted:
        return columns
    by_name = {c.name: c for c in columns}
    missing = [w for w in wanted if w not in by_name]
    if missing:
        raise ConfigurationError(
            f"Input metadata columns asks for {missing} of {label}, which has "
            f"{list(by_name)}. Fix the names in AssetIn(metadata={{'columns': [...]}})."
        )
    return [by_name[w] for w in wanted]


def export_parquet(
    connection: Connection,
    table: TableName,
    columns: list[Column],
    window: Window | None,
    path: Path,
) -> None:
    """Writes `columns` of the rows of `window` (all rows without it) to Parquet `path`."""
    select = ", ".join(export_sql(c) for c in columns)
    query = f"SELECT {select} FROM {table}" + (f" WHERE {window.sql}" if window else "")
    connection.execute_command(
        f"COPY ({query}) TO {escape_string_literal(str(path))} WITH (FORMAT => 'parquet')"
    )
