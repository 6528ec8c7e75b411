"""The file a data source's full publish sends when it is not the whole file as it is: some
of its tables, or a tree with role copies (`hyper_assets.tableau._publish.model`)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from tableauhyperapi import (
    Connection,
    Nullability,
    SchemaName,
    TableDefinition,
    TableName,
    escape_name,
    escape_string_literal as literal,
)

from hyper_assets._engine.compaction import file_version
from hyper_assets._engine.sql import attach, detach
from hyper_assets._engine.tables import Catalog, Keys
from hyper_assets._engine.types import SPARK_TYPE_COMMENT, sql_name
from hyper_assets.tableau._publish.model import DataModel

_ALIAS = "hyper_assets_subset"


def write_subset(connection: Connection, database: Path, model: DataModel, target: Path) -> None:
    """Writes `target`: the tree `model` of tables of `database` (the connection's own).

    In the file's format version; each published table (a copy of its role, or the
    table itself) with its file table's columns (types, nullability, collations), the
    comments recording Spark types, the rows and the ASSUMED primary key; then a foreign
    key per relationship of the tree, and no other.
    """
    version = file_version(connection, database)
    source = str(connection.execute_scalar_query("SELECT current_database()"))
    # Read before ATTACH: with two databases attached, two-part names are ambiguous.
    catalog = Catalog(connection)
    sources = {model.source(t) for t in model.tables}
    keys = {t: catalog.keys(t) for t in sources}
    shapes = {t: (connection.catalog.get_table_definition(t), catalog.columns(t)) for t in sources}
    connection.execute_command(
        f"CREATE DATABASE {escape_name(str(target))} WITH VERSION {int(version)}"
    )
    attach(connection, target, _ALIAS)
    try:
        for table in model.tables:
            rows = model.source(table)
            definition, columns = shapes[rows]
            connection.catalog.create_schema_if_not_exists(
                SchemaName(_ALIAS, table.schema_name.name.unescaped)
            )
            published = _in(_ALIAS, table)
            connection.execute_command(_create_sql(published, definition, keys[rows]))
            for column in columns:
                if column.spark_type:
                    connection.execute_command(
                        f"COMMENT ON COLUMN {published}.{escape_name(column.name)} IS "
                        + literal(SPARK_TYPE_COMMENT + column.spark_type)
                    )
            connection.execute_command(f"INSERT INTO {published} SELECT * FROM {_in(source, rows)}")
        for r in model.relationships:
            connection.execute_command(
                f"ALTER TABLE {_in(_ALIAS, r.table)} ADD ASSUMED FOREIGN KEY "
                f"({_names(r.columns)}) REFERENCES {_in(_ALIAS, r.dimension)} "
                f"({_names(r.ref_columns)})"
            )
    finally:
        detach(connection, _ALIAS)


def _create_sql(table: TableName, definition: TableDefinition, keys: Keys) -> str:
    """CREATE TABLE with the columns of `definition` and the primary key of `keys`.

    Inline, as the file's tables were made: Hyper takes an ASSUMED PRIMARY KEY over
    nullable columns in CREATE TABLE only.
    """
    parts = [
        f"{escape_name(c.name.unescaped)} {sql_name(c.type)}"
        + (f" COLLATE {escape_name(c.collation)}" if c.collation else "")
        + ("" if c.nullability == Nullability.NULLABLE else " NOT NULL")
        for c in definition.columns
    ]
    if keys.primary_key:
        parts.append(f"ASSUMED PRIMARY KEY ({_names(keys.primary_key)})")
    return f"CREATE TABLE {table} ({', '.join(parts)})"


def _in(database: str, table: TableName) -> TableName:
    """`table` in the attached `database`."""
    return TableName(database, table.schema_name.name.unescaped, table.name.unescaped)


def _names(columns: Sequence[str]) -> str:
    return ", ".join(escape_name(c) for c in columns)
