"""The server's own reading of a `.hyper` file's tables and ASSUMED keys.

Read straight from Hyper's catalog (`pg_constraint`, `pg_attribute`), not through the
client's `hyper_assets._engine.tables`, so the keys the client wrote are judged by a reading the
client does not share.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from tableauhyperapi import Connection

#: (schema, table), both unescaped.
Table = tuple[str, str]

_CONSTRAINTS = (
    "SELECT con.conrelid, ns.nspname, cl.relname, con.contype, CAST(con.conkey AS TEXT), "
    "refns.nspname, ref.relname "
    "FROM pg_catalog.pg_constraint con "
    "JOIN pg_catalog.pg_class cl ON cl.oid = con.conrelid "
    "JOIN pg_catalog.pg_namespace ns ON ns.oid = cl.relnamespace "
    "LEFT JOIN pg_catalog.pg_class ref ON ref.oid = con.confrelid "
    "LEFT JOIN pg_catalog.pg_namespace refns ON refns.oid = ref.relnamespace "
    "WHERE con.contype IN ('p', 'f')"
)
_KEY_COLUMNS = (
    "SELECT a.attrelid, a.attnum, a.attname FROM pg_catalog.pg_attribute a "
    "WHERE a.attrelid IN (SELECT conrelid FROM pg_catalog.pg_constraint WHERE contype = 'p')"
)


@dataclass(frozen=True)
class FileKeys:
    """Every table of a file, its ASSUMED PRIMARY KEY columns and its foreign keys."""

    tables: tuple[Table, ...]
    primary_keys: dict[Table, tuple[str, ...]]
    references: tuple[tuple[Table, Table], ...]  # (table, the table one of its keys references)


def read_keys(connection: Connection) -> FileKeys:
    """The keys of the database `connection` opened."""
    catalog = connection.catalog
    tables = tuple(
        (schema.name.unescaped, table.name.unescaped)
        for schema in catalog.get_schema_names()
        for table in catalog.get_table_names(schema)
    )
    names: dict[tuple[int, int], str] = {
        (int(rel), int(num)): name for rel, num, name in connection.execute_list_query(_KEY_COLUMNS)
    }
    primary_keys: dict[Table, tuple[str, ...]] = {}
    references: list[tuple[Table, Table]] = []
    for rel, schema, table, kind, key, ref_schema, ref_table in connection.execute_list_query(
        _CONSTRAINTS
    ):
        if kind == "p":
            numbers = (int(n) for n in re.findall(r"\d+", key))
            primary_keys[(schema, table)] = tuple(names[(int(rel), n)] for n in numbers)
        else:
            references.append(((schema, table), (ref_schema, ref_table)))
    return FileKeys(tables, primary_keys, tuple(references))
