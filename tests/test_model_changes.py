"""A model changes without a rebuild: a dimension that facts reference changes its columns
(a full refresh), and the tables whose keys reach it are copied in the same transaction,
their rows and keys unchanged. Read back from Hyper's own catalog."""

from pathlib import Path

import dagster as dg
import pyarrow as pa
import pytest
from helpers import io, query, table_rows
from tableauhyperapi import Connection

from hyper_assets import (
    InvalidGeographyError,
    SchemaMismatchError,
)


def foreign_keys(hyper, database: Path) -> list[list]:
    """(table, referenced table) of every foreign key in the file."""
    return query(
        hyper,
        database,
        "SELECT cl.relname, ref.relname FROM pg_catalog.pg_constraint con "
        "JOIN pg_catalog.pg_class cl ON cl.oid = con.conrelid "
        "JOIN pg_catalog.pg_class ref ON ref.oid = con.confrelid "
        "WHERE con.contype = 'f' ORDER BY 1, 2",
    )


def shop(makers_columns: dict[str, list], makers_key: str = "maker_id"):
    """makers <- planes <- flights -> airports <- weather: a snowflake and a shared dimension."""

    @dg.asset(metadata={"primary_key": [makers_key]})
    def makers() -> pa.Table:
        return pa.table(makers_columns)

    @dg.asset(
        deps=[makers],
        metadata={"primary_key": ["tailnum"], "foreign_keys": {"maker_id": "makers.maker_id"}},
    )
    def planes() -> pa.Table:
        return pa.table({"tailnum": ["N1", "N2"], "maker_id": [1, 2]})

    @dg.asset(metadata={"primary_key": ["faa"]})
    def airports() -> pa.Table:
        return pa.table({"faa": ["JFK", "LAX"]})

    @dg.asset(
        deps=[planes, airports],
        metadata={"foreign_keys": {"tailnum": "planes.tailnum", "origin": "airports.faa"}},
    )
    def flights() -> pa.Table:
        return pa.table({"tailnum": ["N1", "N2", "N1"], "origin": ["JFK", "LAX", "LAX"]})

    @dg.asset(deps=[airports], metadata={"foreign_keys": {"origin": "airports.faa"}})
    def weather() -> pa.Table:
        return pa.table({"origin": ["JFK"], "temp": [3.5]})

    return [makers, planes, airports, flights, weather]


BEFORE = {"maker_id": [1, 2], "name": ["Boeing", "Airbus"]}
KEYS = [
    ["flights", "airports"],
    ["flights", "planes"],
    ["planes", "makers"],
    ["weather", "airports"],
]


def test_a_referenced_dimension_changes_its_columns_in_place(tmp_path: Path, hyper) -> None:
    database = tmp_path / "model.hyper"
    resources = {"io_manager": io(database)}
    assert dg.materialize(shop(BEFORE), resources=resources).success
    assert foreign_keys(hyper, database) == KEYS
    rows = {t: table_rows(hyper, database, f'"Extract"."{t}"') for t in ("planes", "flights")}

    after = {"maker_id": [1, 2, 3], "country": ["US", "FR", "BR"], "name": ["B", "A", "E"]}
    makers = shop(after)[0]
    result = dg.materialize([makers], resources=resources)
    assert result.success
    assert table_rows(hyper, database, '"Extract"."makers"') == [
        (1, "US", "B"),
        (2, "FR", "A"),
        (3, "BR", "E"),
    ]
    assert foreign_keys(hyper, database) == KEYS  # every key still there, and no other
    for table, before in rows.items():  # the copied tables hold the same rows
        assert table_rows(hyper, database, f'"Extract"."{table}"') == before
    tables = query(hyper, database, "SELECT relname FROM pg_catalog.pg_class WHERE relkind = 'r'")
    assert not [t for t in tables if "hyper_assets_new" in t[0]]


def test_a_new_primary_key_that_breaks_a_reference_is_refused_naming_it(
    tmp_path: Path, hyper
) -> None:
    database = tmp_path / "model.hyper"
    resources = {"io_manager": io(database)}
    assert dg.materialize(shop(BEFORE), resources=resources).success
    makers = shop({"maker_id": [1, 2], "name": ["Boeing", "Airbus"]}, makers_key="name")[0]
    with pytest.raises(SchemaMismatchError) as refused:
        dg.materialize([makers], resources=resources)
    assert str(refused.value) == (
        "Extract.makers changes its primary key to ['name'], but the foreign key "
        "Extract.planes.maker_id references ['maker_id']: keep ['maker_id'] as its primary "
        "key, or drop that key from Extract.planes's metadata and materialise it first. "
        "Nothing was written."
    )
    assert table_rows(hyper, database, '"Extract"."makers"') == [(1, "Boeing"), (2, "Airbus")]
    assert foreign_keys(hyper, database) == KEYS


def internal_tables(hyper, database: Path) -> list[list]:
    return query(
        hyper,
        database,
        "SELECT relname FROM pg_catalog.pg_class WHERE relname LIKE '%hyper_assets%'",
    )


def test_a_failed_refresh_of_a_referenced_dimension_leaves_nothing_behind(
    tmp_path: Path, hyper
) -> None:
    """Hyper keeps DDL a ROLLBACK should undo: the new tables are dropped by hand, the
    tables referencing others last, so that the next refresh finds the file as it was."""
    database = tmp_path / "model.hyper"
    resources = {"io_manager": io(database)}
    assert dg.materialize(shop(BEFORE), resources=resources).success
    bad = {**BEFORE, "hq": ["POINT(1 2)", "POINT(1 95)"]}  # latitude 95: Hyper refuses it

    @dg.asset(name="makers", metadata={"primary_key": ["maker_id"], "geography_columns": ["hq"]})
    def makers_with_hq() -> pa.Table:
        return pa.table(bad)

    with pytest.raises(InvalidGeographyError):
        dg.materialize([makers_with_hq], resources=resources)
    assert internal_tables(hyper, database) == []
    assert table_rows(hyper, database, '"Extract"."makers"') == [(1, "Boeing"), (2, "Airbus")]
    assert foreign_keys(hyper, database) == KEYS

    after = {"maker_id": [1, 2], "name": ["B", "A"], "country": ["US", "FR"]}
    assert dg.materialize([shop(after)[0]], resources=resources).success
    assert table_rows(hyper, database, '"Extract"."makers"') == [(1, "B", "US"), (2, "A", "FR")]
    assert foreign_keys(hyper, database) == KEYS


def test_a_swap_a_crash_interrupted_is_undone_by_the_next_write(tmp_path: Path, hyper) -> None:
    """The state a crash leaves between renaming the old tables aside and the new ones in:
    `makers` and `planes` aside, a new `planes` made. The next swap puts them back first."""
    database = tmp_path / "model.hyper"
    resources = {"io_manager": io(database)}
    assert dg.materialize(shop(BEFORE), resources=resources).success
    rows = {t: table_rows(hyper, database, f'"Extract"."{t}"') for t in ("planes", "flights")}
    with Connection(hyper.endpoint, str(database)) as connection:
        for table in ("makers", "planes"):
            connection.execute_command(
                f'ALTER TABLE "Extract"."{table}" RENAME TO "{table}__hyper_assets_old"'
            )
        connection.execute_command(
            'CREATE TABLE "Extract"."planes__hyper_assets_new" AS '
            '(SELECT * FROM "Extract"."planes__hyper_assets_old")'
        )

    after = {"maker_id": [1, 2], "name": ["B", "A"], "country": ["US", "FR"]}
    assert dg.materialize([shop(after)[0]], resources=resources).success
    assert internal_tables(hyper, database) == []
    assert table_rows(hyper, database, '"Extract"."makers"') == [(1, "B", "US"), (2, "A", "FR")]
    assert foreign_keys(hyper, database) == KEYS
    for table, before in rows.items():
        assert table_rows(hyper, database, f'"Extract"."{table}"') == before
