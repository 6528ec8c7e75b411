"""Small helpers the tests share: read a .hyper file back through a real hyperd."""

from __future__ import annotations

import sys
import time
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path

from tableauhyperapi import Connection, CreateMode, HyperException, TableName, escape_name

from hyper_assets import staging
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


def same_rows(connection: Connection, mine: TableName, theirs: TableName) -> bool:
    """Whether two tables (of databases the connection attached) hold the same rows, as
    multisets: the same counts, and no row of one missing from the other."""
    counts = [connection.execute_scalar_query(f"SELECT COUNT(*) FROM {t}") for t in (mine, theirs)]
    differ = connection.execute_scalar_query(
        f"SELECT COUNT(*) FROM ((SELECT * FROM {mine} EXCEPT ALL SELECT * FROM {theirs}) "
        f"UNION ALL (SELECT * FROM {theirs} EXCEPT ALL SELECT * FROM {mine})) AS d"
    )
    return counts[0] == counts[1] and differ == 0


def assert_copy(
    hyper: SharedHyper, database: Path, remote: Path, sources: Mapping[str, str]
) -> None:
    """The published file `remote` holds exactly the tables of `sources` (schema Extract),
    each the rows of the table of `database` it names, compared by content (EXCEPT ALL both
    ways, so duplicate rows count)."""
    with Connection(hyper.endpoint) as connection:
        for alias, path in (("local", database), ("remote", remote)):
            connection.execute_command(f"ATTACH DATABASE {escape_name(str(path))} AS {alias}")
        names = {
            t.name.unescaped
            for schema in connection.catalog.get_schema_names("remote")
            for t in connection.catalog.get_table_names(schema)
        }
        assert names == set(sources)
        for copy, table in sources.items():
            local, theirs = (
                TableName("local", "Extract", table),
                TableName("remote", "Extract", copy),
            )
            assert same_rows(connection, local, theirs), f"{remote.name}: {copy!r} differs"


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


@contextmanager
def staged_row_counts() -> Iterator[list[list[Path]]]:
    """The files of each call of `staging.staged_row_count` while the block runs, from
    whichever module of hyper_assets calls it; the real count runs (a spy, not a mock)."""
    count = staging.staged_row_count
    calls: list[list[Path]] = []

    def counting(files: Sequence[Path]) -> int:
        calls.append(list(files))
        return count(files)

    callers = [
        module
        for name, module in list(sys.modules.items())
        if name.split(".")[0] == "hyper_assets"
        and getattr(module, "staged_row_count", None) is count
    ]
    for module in callers:
        module.staged_row_count = counting
    try:
        yield calls
    finally:
        for module in callers:
            module.staged_row_count = count
