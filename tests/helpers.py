"""Small helpers the tests share: read a .hyper file back through a real hyperd."""

from __future__ import annotations

from pathlib import Path

from tableauhyperapi import Connection

from hyper_assets.process import SharedHyper


def query(hyper: SharedHyper, database: Path, sql: str) -> list[list]:
    """Rows of `sql` run against `database`; the connection is closed before returning."""
    with Connection(hyper.endpoint, str(database)) as connection:
        return connection.execute_list_query(sql)


def table_rows(hyper: SharedHyper, database: Path, table: str, order: str = "1") -> list[tuple]:
    return [tuple(r) for r in query(hyper, database, f"SELECT * FROM {table} ORDER BY {order}")]
