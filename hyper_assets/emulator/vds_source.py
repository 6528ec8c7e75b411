"""A stored data source as the VizQL Data Service sees it: logical tables, relationships,
fields.

As Tableau does for a published `.hyper` file, each table of the file is a logical table
and each ASSUMED foreign key a relationship from the table holding it to the table it
references (a role copy the publish made is a table of the file, so a logical table of
its own). The keys are read with the emulator's own `catalog`, never the client's code.

Each column is a field: `fieldName` is the column's name, unique within its logical
table; `fieldCaption` is the name people see, which the emulator makes as Tableau's
client does from a column name (`dep_delay` -> "Dep Delay"), and, where several logical
tables have the caption, adds the table's caption to each after the first ("Name
(airports (dest))"). A query names fields by caption, so a client must find a caption
through `read-metadata` rather than guess it from the column name.
"""

from __future__ import annotations

import uuid
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

from tableauhyperapi import Connection, Endpoint, SqlType, TableName, TypeTag

from hyper_assets.emulator.catalog import read_keys

_NAMESPACE = uuid.UUID("0d7a3d8e-6a55-4f59-9a53-2c1f3d0b6e21")
_TYPES = {
    TypeTag.BOOL: "BOOLEAN",
    TypeTag.SMALL_INT: "INTEGER",
    TypeTag.INT: "INTEGER",
    TypeTag.BIG_INT: "INTEGER",
    TypeTag.OID: "INTEGER",
    TypeTag.DOUBLE: "REAL",
    TypeTag.FLOAT: "REAL",
    TypeTag.NUMERIC: "REAL",
    TypeTag.TEXT: "STRING",
    TypeTag.VARCHAR: "STRING",
    TypeTag.CHAR: "STRING",
    TypeTag.JSON: "STRING",
    TypeTag.DATE: "DATE",
    TypeTag.TIMESTAMP: "DATETIME",
    TypeTag.TIMESTAMP_TZ: "DATETIME",
    TypeTag.GEOGRAPHY: "SPATIAL",
}


@dataclass(frozen=True)
class Field:
    name: str  # the column's
    caption: str
    data_type: str  # one of the schema's DataType values
    table: LogicalTable

    @property
    def numeric(self) -> bool:
        return self.data_type in ("INTEGER", "REAL")

    def metadata(self) -> dict[str, str]:
        """The field as `read-metadata` lists it (a `FieldMetadata`)."""
        return {
            "fieldName": self.name,
            "fieldCaption": self.caption,
            "dataType": self.data_type,
            "defaultAggregation": "SUM" if self.numeric else "COUNT",
            "columnClass": "COLUMN",
            "logicalTableId": self.table.id,
        }


@dataclass(frozen=True)
class LogicalTable:
    id: str
    caption: str
    table: TableName  # where its rows are in the stored file


@dataclass(frozen=True)
class Source:
    """What one stored file offers a query."""

    tables: tuple[LogicalTable, ...]
    relationships: tuple[tuple[LogicalTable, LogicalTable], ...]
    fields: tuple[Field, ...]

    def model(self) -> dict[str, list[dict[str, object]]]:
        """The reply of `get-datasource-model` (a `DatasourceModelOutput`)."""
        return {
            "logicalTables": [{"logicalTableId": t.id, "caption": t.caption} for t in self.tables],
            "logicalTableRelationships": [
                {
                    "fromLogicalTable": {"logicalTableId": a.id},
                    "toLogicalTable": {"logicalTableId": b.id},
                }
                for a, b in self.relationships
            ],
        }

    def field(self, caption: str) -> Field | None:
        return next((f for f in self.fields if f.caption == caption), None)


def caption(column: str) -> str:
    """The caption Tableau's client gives a column: words split at `_`, each capitalised."""
    words = column.replace("_", " ").split()
    return " ".join(w[:1].upper() + w[1:] for w in words) or column


def data_type(sql_type: SqlType) -> str:
    return _TYPES.get(sql_type.tag, "UNKNOWN")


def read_source(endpoint: Endpoint, path: Path, datasource_id: str) -> Source:
    """The logical tables, relationships and fields of the stored file at `path`."""
    with Connection(endpoint, path) as connection:
        keys = read_keys(connection)
        tables = {
            name: LogicalTable(
                _table_id(datasource_id, name[1], name[0]), name[1], TableName(*name)
            )
            for name in keys.tables
        }
        columns = {
            name: [
                (c.name.unescaped, data_type(c.type))
                for c in connection.catalog.get_table_definition(TableName(*name)).columns
            ]
            for name in keys.tables
        }
    relationships = tuple(
        (tables[a], tables[b]) for a, b in keys.references if a != b and b in tables
    )
    counts = Counter(caption(c) for cols in columns.values() for c, _ in cols)
    seen: set[str] = set()
    fields = []
    for name, cols in columns.items():
        table = tables[name]
        for column, kind in cols:
            shown = caption(column)
            if counts[shown] > 1 and shown in seen:
                shown = f"{shown} ({table.caption})"
            seen.add(caption(column))
            fields.append(Field(column, shown, kind, table))
    return Source(tuple(tables.values()), relationships, tuple(fields))


def _table_id(datasource_id: str, name: str, schema: str) -> str:
    """As Tableau's look: the table's name, `_`, 32 hex digits (stable per data source)."""
    digits = uuid.uuid5(_NAMESPACE, f"{datasource_id}/{schema}/{name}").hex.upper()
    return f"{name}_{digits}"
