"""Small helpers the tests share: read a .hyper file back through a real hyperd."""

from __future__ import annotations

import time
from pathlib import Path

from tableauhyperapi import Connection, HyperException

from hyper_assets.process import SharedHyper


def query(hyper: SharedHyper, database: Path, sql: str, wait: float = 20.0) -> list[list]:
    """Rows of `sql` run against `database`; the connection is closed before returning.

    Waits up to `wait` seconds for a hyperd of a killed process to let go of the file.
    """
    deadline = time.monotonic() + wait
    while True:
        try:
            with Connection(hyper.endpoint, str(database)) as connection:
                return connection.execute_list_query(sql)
        except HyperException as error:
            if "locked by another process" not in str(error) or time.monotonic() > deadline:
                raise
            time.sleep(0.2)


def table_rows(hyper: SharedHyper, database: Path, table: str, order: str = "1") -> list[tuple]:
    return [tuple(r) for r in query(hyper, database, f"SELECT * FROM {table} ORDER BY {order}")]
