"""Whether recorded changes can go as an update, or the data source must be sent whole.

Action batches change rows, not tables: a table added, dropped or changed in shape (its
`Fingerprint`), a new file format version, or an append a crash left uncertain make the
next publish send the whole file.
"""

from __future__ import annotations

import json

from tableauhyperapi import Connection, Nullability, TableName

from hyper_assets.outbox import Change
from hyper_assets.tableau.plan import (
    ColumnShape,
    Fingerprint,
    ForeignKeyShape,
    PublishState,
    TableShape,
)
from hyper_assets.tables import Catalog, table_label
from hyper_assets.types import sql_name


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


def forced_reason(full: bool, ours: bool, current: bool) -> str:
    """Why the next plan must publish the whole file, or "" when changes will do."""
    if full:
        return "asked for a full publish"
    if not ours:
        return "first publish to this data source"
    if not current:
        return "the data source is missing on the server or was replaced"
    return ""


def shape_reason(
    changes: list[Change], now: Fingerprint, version: int, state: PublishState | None
) -> str:
    """Why the recorded changes cannot be sent as an update, or "" when they can.

    A file whose format `version` changed since it was last published is sent whole:
    Tableau keeps the version of the file it was sent. A publish state written before
    versions were recorded counts as version 2, the default then.
    """
    uncertain = [c for c in changes if c.uncertain]
    if uncertain:
        return (
            f"a crash left an append to {table_label(uncertain[0].table)} whose outcome "
            "cannot be told"
        )
    published_version = state.database_version if state else None
    published_version = 2 if published_version is None else published_version
    if published_version != version:
        return f"the file's format version changed ({published_version} -> {version})"
    return now.change_since(state.fingerprint if state else Fingerprint({}))
