"""Small helpers the tests share: read a .hyper file back through a real hyperd."""

from __future__ import annotations

import time
from pathlib import Path

from tableauhyperapi import Connection, CreateMode, HyperException

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


def crash_hyperd(hyper: SharedHyper, scratch: Path) -> None:
    """Kills `hyper`'s hyperd the way hyper-facts.md records: SET of a composite key's columns."""
    with Connection(hyper.endpoint, str(scratch), CreateMode.CREATE_AND_REPLACE) as connection:
        connection.execute_command(
            'CREATE TABLE "t" ("k1" BIGINT, "k2" TEXT, ASSUMED PRIMARY KEY ("k1", "k2"))'
        )
        connection.execute_command("""INSERT INTO "t" VALUES (1, 'a')""")
        connection.execute_command('CREATE TABLE "s" AS (SELECT * FROM "t")')
        try:
            connection.execute_command(
                'UPDATE "t" SET "k1" = "s"."k1", "k2" = "s"."k2" FROM "s" '
                'WHERE "t"."k1" = "s"."k1" AND "t"."k2" = "s"."k2"'
            )
        except HyperException as error:
            assert "closed the connection" in str(error)
        else:
            raise AssertionError("this hyperd survived the UPDATE that crashes 0.0.26963")
