"""How `HyperIOManager` reads a table back: its stored columns, the ones an input asks
for, and the rows of the partitions it loads, exported to Parquet inside Hyper (or, for a
load of no partitions of a table not there yet, a file of no columns)."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
from tableauhyperapi import Connection, TableName, escape_string_literal

from hyper_assets._engine.tables import Catalog, table_label
from hyper_assets._engine.types import Column, export_sql
from hyper_assets.errors import ConfigurationError, TableNotFoundError


def stored_columns(
    connection: Connection, table: TableName, database: str, who: str
) -> list[Column]:
    """The columns of `table` in `database`; `TableNotFoundError` naming `who` (the asset
    or op output it stores, "asset 'sales'") if absent."""
    catalog = Catalog(connection)
    if not catalog.exists(table):
        raise TableNotFoundError(
            f"Table {table_label(table)} is not in {database}: materialise {who} first."
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
    where: str | None,
    path: Path,
    spark: bool,
) -> None:
    """Writes `columns` of the rows matching SQL `where` (all rows without it) to Parquet
    `path`, for Spark to read, or else Arrow (`export_sql`)."""
    select = ", ".join(export_sql(c, spark) for c in columns)
    query = f"SELECT {select} FROM {table}" + (f" WHERE {where}" if where else "")
    connection.execute_command(
        f"COPY ({query}) TO {escape_string_literal(str(path))} WITH (FORMAT => 'parquet')"
    )


def export_no_columns(path: Path) -> list[Column]:
    """Writes a Parquet file of no columns and no rows to `path` (what a load of no
    partitions of a table not there yet reads); its columns, none."""
    pq.write_table(pa.table({}), path)
    return []
