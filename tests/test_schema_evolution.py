"""schema_evolution="add_columns": a new nullable column joins a partitioned, append or
upsert table (the stored rows get NULL); a refused write adds nothing; dropping or
retyping a column stays an error. The stored file is read back."""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import pyarrow as pa
import pytest
from dagster import DailyPartitionsDefinition, asset, materialize
from helpers import io, query, table_rows

from hyper_assets import (
    ConfigurationError,
    SchemaMismatchError,
)

DAYS = DailyPartitionsDefinition(start_date="2024-01-01", end_date="2024-01-10")
EVOLVING = {"partition_expr": "day", "schema_evolution": "add_columns"}


def daily(columns: dict[str, list], metadata: dict | None = None):
    """A partitioned asset `events` whose rows are `columns`, with `day` the partition's
    unless `columns` give it."""

    @asset(name="events", partitions_def=DAYS, metadata=metadata or EVOLVING)
    def events(context) -> pa.Table:
        day = context.partition_time_window.start.date()
        rows = len(next(iter(columns.values())))
        return pa.table({"day": [day] * rows, **columns})

    return events


def write(database: Path, events, day: str) -> None:
    materialize([events], resources={"io_manager": io(database)}, partition_key=day)


def stored_rows(hyper, database: Path) -> list[tuple]:
    """Every column of `events`, by id; Hyper's dates as `datetime.date`."""
    rows = table_rows(hyper, database, '"Extract".events', order='"id"')
    return [tuple(v.to_date() if hasattr(v, "to_date") else v for v in r) for r in rows]


def stored_columns(hyper, database: Path) -> list[str]:
    return [
        r[0]
        for r in query(
            hyper,
            database,
            "SELECT a.attname FROM pg_catalog.pg_attribute a "
            "JOIN pg_catalog.pg_class c ON a.attrelid = c.oid "
            "WHERE c.relname = 'events' AND a.attnum > 0 ORDER BY a.attnum",
        )
    ]


def test_a_new_column_is_added_to_a_partitioned_table(hyper, tmp_path):
    database = tmp_path / "evolve.hyper"
    write(database, daily({"id": [1, 2]}), "2024-01-01")
    write(database, daily({"id": [3], "note": ["new"]}), "2024-01-02")
    # The next write may leave the new column out no more: it is the table's now.
    write(database, daily({"note": ["again"], "id": [4]}), "2024-01-03")
    assert stored_rows(hyper, database) == [
        (dt.date(2024, 1, 1), 1, None),
        (dt.date(2024, 1, 1), 2, None),
        (dt.date(2024, 1, 2), 3, "new"),
        (dt.date(2024, 1, 3), 4, "again"),
    ]


def test_an_append_adds_the_column_only_when_the_asset_allows_it(hyper, tmp_path):
    database = tmp_path / "evolve.hyper"

    def appended(columns: dict[str, list], allow: bool):
        metadata = {"write_mode": "append"}
        if allow:
            metadata["schema_evolution"] = "add_columns"

        @asset(name="events", metadata=metadata)
        def events() -> pa.Table:
            return pa.table(columns)

        return materialize([events], resources={"io_manager": io(database)})

    assert appended({"id": [1]}, allow=False).success
    with pytest.raises(SchemaMismatchError, match=r"'note' is not in the stored table.*add_col"):
        appended({"id": [2], "note": ["x"]}, allow=False)
    assert stored_columns(hyper, database) == ["id"]
    assert appended({"id": [2], "note": ["x"]}, allow=True).success
    assert stored_rows(hyper, database) == [(1, None), (2, "x")]


def test_a_refused_write_adds_no_column(hyper, tmp_path):
    """Hyper's ROLLBACK keeps an added column: the write must drop it again."""
    database = tmp_path / "evolve.hyper"
    write(database, daily({"id": [1]}), "2024-01-01")
    wrong_day = daily({"id": [2], "note": ["x"], "day": [dt.date(2024, 1, 5)]})
    with pytest.raises(SchemaMismatchError, match="outside the partition"):
        write(database, wrong_day, "2024-01-02")
    assert stored_columns(hyper, database) == ["day", "id"]
    assert stored_rows(hyper, database) == [(dt.date(2024, 1, 1), 1)]


@pytest.mark.parametrize(
    ("columns", "named"),
    [
        ({"note": ["x"]}, r"'id' is missing from the new rows"),
        ({"id": ["one"], "note": ["x"]}, r"'id' is TEXT in the new rows but BIGINT"),
    ],
)
def test_dropping_or_retyping_a_column_stays_an_error(hyper, tmp_path, columns, named):
    database = tmp_path / "evolve.hyper"
    write(database, daily({"id": [1]}), "2024-01-01")
    with pytest.raises(
        SchemaMismatchError, match=named + r".*partitions the table holds in one run"
    ):
        write(database, daily(columns | {"day": [dt.date(2024, 1, 2)]}), "2024-01-02")
    assert stored_columns(hyper, database) == ["day", "id"]


def test_an_unknown_schema_evolution_is_named(tmp_path):
    events = daily({"id": [1]}, {"partition_expr": "day", "schema_evolution": "add"})
    with pytest.raises(ConfigurationError, match=r"schema_evolution of Extract\.events.*'add'"):
        write(tmp_path / "evolve.hyper", events, "2024-01-01")


def test_a_spark_column_is_added_with_its_spark_type(spark, hyper, tmp_path):
    """The Spark type is recorded for the added column, so the next write matches it."""
    database = tmp_path / "evolve.hyper"

    def rows(sql: str):
        @asset(name="events", partitions_def=DAYS, metadata=EVOLVING)
        def events(context):
            return spark.sql(sql)

        return events

    write(database, rows("SELECT DATE'2024-01-01' AS day, 1 AS id"), "2024-01-01")
    added = "SELECT DATE'{}' AS day, 2 AS id, CAST(7 AS TINYINT) AS level"
    write(database, rows(added.format("2024-01-02")), "2024-01-02")
    write(database, rows(added.format("2024-01-03")), "2024-01-03")
    assert [r[1:] for r in stored_rows(hyper, database)] == [
        (1, None),
        (2, 7),
        (2, 7),
    ]
