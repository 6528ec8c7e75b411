"""The shape of a data source's tables on the server, read from the file (`Fingerprint`).

Action batches change rows, not tables: a table added, dropped or changed in shape since
the last publish makes the next send the whole file (`hyper_assets.tableau._publish.decision`).
"""

from __future__ import annotations

import json

from tableauhyperapi import Connection, Nullability, TableName

from hyper_assets._engine.tables import Catalog, table_label
from hyper_assets._engine.types import sql_name
from hyper_assets.tableau._publish.plan import (
    ColumnShape,
    Fingerprint,
    ForeignKeyShape,
    TableShape,
)


def fingerprint(connection: Connection, tables: list[TableName]) -> Fingerprint:
    """What each table's shape on the server depends on: every column's name, SQL type,
    nullability and collation, in order; the ASSUMED primary key and the foreign keys to
    the data source's `tables`."""
    catalog = Catalog(connection)
    shapes = {}
    for table in tables:
        definition = connection.catalog.get_table_definition(table)
        keys = catalog.keys(table)
        foreign_keys = (
            ForeignKeyShape(tuple(fk.columns), table_label(fk.ref_table), tuple(fk.ref_columns))
            for fk in keys.foreign_keys
            if fk.ref_table in tables
        )
        shapes[table_label(table)] = TableShape(
            tuple(
                ColumnShape(
                    c.name.unescaped,
                    sql_name(c.type),
                    c.nullability == Nullability.NULLABLE,
                    c.collation,
                )
                for c in definition.columns
            ),
            tuple(keys.primary_key),
            # in the order saved states have them
            tuple(sorted(foreign_keys, key=lambda fk: json.dumps(fk.to_json()))),
        )
    return Fingerprint(shapes)
