"""Every foreign key declared in metadata is in the file once both its tables exist,
whatever order the writes come in (`hyper_assets._rows.pending_keys`).

A star of three assets, `stores` (primary key) and two append facts referencing it, is
written as a new user would: in one run (Dagster picks the order), and facts first in
runs of their own, with Arrow and Spark frames. The file is read back through a real
hyperd: its keys, its rows, and the record of the keys still waiting.
"""

import json
import logging
from collections.abc import Callable
from pathlib import Path
from typing import Any

import dagster as dg
import pyarrow as pa
import pytest
from helpers import arrow, query, table_rows
from tableauhyperapi import Connection, TableName

from hyper_assets import (
    ConfigurationError,
    HomeSettings,
    HyperDatabase,
    HyperIOManager,
    InvalidGeographyError,
)
from hyper_assets._engine.tables import Catalog, ForeignKey, Keys
from hyper_assets._rows.pending_keys import PendingKeys

STORES, SALES, RETURNS = (TableName("Extract", t) for t in ("stores", "sales", "returns"))
TO_STORES = ForeignKey(("store_id",), STORES, ("store_id",))
STAR = {STORES: Keys(("store_id",)), SALES: Keys((), (TO_STORES,)), RETURNS: Keys((), (TO_STORES,))}
DAYS = dg.DailyPartitionsDefinition(start_date="2024-01-01", end_date="2024-01-05")
FACT_ROWS = {"sales": [(1, 9.5), (2, 3.0)], "returns": [(2, 1.0)]}
STORE_ROWS = [(1, "north"), (2, "south")]

Frames = Callable[[list[tuple[Any, ...]], list[str]], Any]


def spark_frames(spark: Any) -> Frames:
    return lambda rows, names: spark.createDataFrame(rows, names)


def stores_asset(frame: Frames = arrow, **metadata: Any) -> dg.AssetsDefinition:
    metadata = {"primary_key": ["store_id"]} | metadata

    @dg.asset(name="stores", metadata={k: v for k, v in metadata.items() if v is not None})
    def stores() -> Any:
        return frame(STORE_ROWS, ["store_id", "name"])

    return stores


def fact_asset(name: str, frame: Frames = arrow, **metadata: Any) -> dg.AssetsDefinition:
    metadata = {"write_mode": "append", "foreign_keys": {"store_id": "stores.store_id"}} | metadata

    @dg.asset(name=name, metadata={k: v for k, v in metadata.items() if v is not None})
    def fact() -> Any:
        return frame(FACT_ROWS[name], ["store_id", "amount"])

    return fact


def star(frame: Frames = arrow) -> list[dg.AssetsDefinition]:
    return [stores_asset(frame), fact_asset("sales", frame), fact_asset("returns", frame)]


def default_io(database: Path) -> HyperIOManager:
    """An IO manager of `database` with every other setting at its default."""
    return HyperIOManager(database=str(database))


def run(
    assets: list[dg.AssetsDefinition], database: Path, **kwargs: Any
) -> tuple[dg.ExecuteInProcessResult, list[str]]:
    """Materialises `assets`; the result and the warnings the run logged."""
    instance = dg.DagsterInstance.ephemeral()
    result = dg.materialize(
        assets, resources={"io_manager": default_io(database)}, instance=instance, **kwargs
    )
    warnings = [
        r.user_message
        for r in instance.all_logs(result.run_id)
        if r.level == logging.WARNING and r.user_message
    ]
    return result, warnings


def file_keys(hyper: Any, database: Path) -> dict[TableName, Keys]:
    with Connection(hyper.endpoint, str(database)) as connection:
        catalog = Catalog(connection)
        return {table: catalog.keys(table) for table in catalog.tables()}


def written_order(result: dg.ExecuteInProcessResult) -> list[str]:
    return [e.asset_key.path[-1] for e in result.get_asset_materialization_events()]


def assert_star_rows(hyper: Any, database: Path) -> None:
    assert table_rows(hyper, database, '"Extract".stores') == STORE_ROWS
    for fact, rows in FACT_ROWS.items():
        assert table_rows(hyper, database, f'"Extract".{fact}') == rows


@pytest.mark.parametrize("frames", ["arrow", "spark"])
def test_a_star_from_one_run_has_every_key_whatever_order_dagster_takes(
    request: pytest.FixtureRequest, hyper: Any, tmp_path: Path, frames: str
) -> None:
    frame = arrow if frames == "arrow" else spark_frames(request.getfixturevalue("spark"))
    database = tmp_path / "shop.hyper"
    result, _ = run(star(frame), database)
    assert written_order(result) == ["returns", "sales", "stores"]  # the facts first
    assert file_keys(hyper, database) == STAR
    assert_star_rows(hyper, database)


@pytest.mark.parametrize("frames", ["arrow", "spark"])
def test_facts_written_before_their_dimension_get_their_keys_from_its_write(
    request: pytest.FixtureRequest, hyper: Any, tmp_path: Path, frames: str
) -> None:
    frame = arrow if frames == "arrow" else spark_frames(request.getfixturevalue("spark"))
    database = tmp_path / "shop.hyper"
    stores, sales, returns = star(frame)
    _, warnings = run([sales, returns], database)
    assert {t: k.foreign_keys for t, k in file_keys(hyper, database).items()} == {
        SALES: (),
        RETURNS: (),
    }
    waiting = "the referenced table does not exist yet; the key is added when it is written"
    assert sorted(w for w in warnings if waiting in w) == [
        f"Extract.returns.store_id -> Extract.stores: {waiting}",
        f"Extract.sales.store_id -> Extract.stores: {waiting}",
    ]
    recorded = json.loads(PendingKeys(database).path.read_text())
    assert recorded["format_version"] == 1
    assert sorted(recorded["foreign_keys"], key=lambda k: k["table"]) == [
        {
            "schema": "Extract",
            "table": table,
            "columns": ["store_id"],
            "ref_schema": "Extract",
            "ref_table": "stores",
            "ref_columns": ["store_id"],
        }
        for table in ("returns", "sales")
    ]

    result, warnings = run([stores], database)  # this write alone adds both keys
    assert (written_order(result), warnings) == (["stores"], [])
    assert file_keys(hyper, database) == STAR
    assert_star_rows(hyper, database)


@pytest.mark.parametrize(
    "stores",
    [
        pytest.param(lambda: stores_asset(), id="full refresh"),
        pytest.param(lambda: stores_asset(write_mode="append"), id="append"),
        pytest.param(lambda: stores_asset(write_mode="upsert"), id="upsert"),
        pytest.param(lambda: partitioned_stores(), id="partition"),
    ],
)
def test_the_write_creating_the_referenced_table_adds_the_key_in_every_mode(
    hyper: Any, tmp_path: Path, stores: Callable[[], dg.AssetsDefinition]
) -> None:
    database = tmp_path / "shop.hyper"
    run([fact_asset("sales")], database)
    dimension = stores()
    partition = "2024-01-02" if dimension.partitions_def else None
    result, _ = run([dimension], database, partition_key=partition)
    assert result.success
    assert file_keys(hyper, database)[SALES].foreign_keys == (TO_STORES,)


def partitioned_stores() -> dg.AssetsDefinition:
    @dg.asset(
        name="stores",
        partitions_def=DAYS,
        metadata={"primary_key": ["store_id"], "partition_expr": "day"},
    )
    def stores(context: dg.AssetExecutionContext) -> pa.Table:
        day = context.partition_time_window.start.date()
        return arrow([(*r, day) for r in STORE_ROWS], ["store_id", "name", "day"])

    return stores


@pytest.mark.parametrize("status", [None, "open"], ids=["same columns", "a new column"])
def test_a_dimension_swapped_in_with_its_primary_key_takes_the_waiting_key(
    hyper: Any, tmp_path: Path, status: str | None
) -> None:
    """Written first without the primary key the fact references, the dimension gets it
    in a full refresh (a new table, swapped in by DROP + RENAME: Hyper adds a primary key
    in place over NOT NULL columns only), with its columns or new ones."""
    database = tmp_path / "shop.hyper"
    run([fact_asset("sales")], database)
    _, warnings = run([stores_asset(primary_key=None)], database)
    assert warnings == [
        "Foreign key Extract.sales.store_id -> Extract.stores.store_id stays out of the file: "
        "the primary key of Extract.stores is not declared: declare metadata "
        "primary_key=['store_id'] on it, or point the key at its primary key."
    ]
    assert file_keys(hyper, database)[SALES].foreign_keys == ()
    rows = [(*r, status) if status else r for r in STORE_ROWS]

    @dg.asset(name="stores", metadata={"primary_key": ["store_id"]})
    def keyed_stores() -> pa.Table:
        return arrow(rows, ["store_id", "name", "status"][: len(rows[0])])

    result, warnings = run([keyed_stores], database)
    assert (result.success, warnings) == (True, [])
    assert file_keys(hyper, database) == {STORES: Keys(("store_id",)), SALES: STAR[SALES]}
    assert table_rows(hyper, database, '"Extract".stores') == rows


def test_the_latest_declaration_of_the_referencing_table_wins(hyper: Any, tmp_path: Path) -> None:
    database = tmp_path / "shop.hyper"
    run([fact_asset("sales", write_mode=None)], database)  # a full refresh, waiting for stores
    to_regions = {"store_id": "regions.store_id"}
    run([fact_asset("sales", write_mode=None, foreign_keys=to_regions)], database)
    run([stores_asset()], database)
    assert file_keys(hyper, database)[SALES] == Keys()
    run([fact_asset("sales", write_mode=None, foreign_keys=None)], database)
    assert not PendingKeys(database).path.exists()  # nothing waits any more

    @dg.asset(name="regions", metadata={"primary_key": ["store_id"]})
    def regions() -> pa.Table:
        return arrow(STORE_ROWS, ["store_id", "region"])

    run([regions], database)
    assert file_keys(hyper, database)[SALES] == Keys()


def test_a_key_to_a_column_that_is_not_the_primary_key_stays_out_as_before(
    hyper: Any, tmp_path: Path
) -> None:
    """Written after the fact, the dimension is stored, with a warning naming the key and
    why; a write of the fact once both exist is refused, as it always was."""
    database = tmp_path / "shop.hyper"
    run([fact_asset("sales")], database)
    result, warnings = run([stores_asset(primary_key=["name"])], database)
    assert result.success
    assert warnings == [
        "Foreign key Extract.sales.store_id -> Extract.stores.store_id stays out of the file: "
        "the primary key of Extract.stores is ['name']: declare metadata "
        "primary_key=['store_id'] on it, or point the key at its primary key."
    ]
    assert file_keys(hyper, database)[SALES] == Keys()
    with pytest.raises(
        ConfigurationError, match=r"but the primary key of Extract.stores is \['name'\]"
    ):
        run([fact_asset("sales")], database)


def test_a_key_hyper_refuses_stays_out_with_hyper_words(hyper: Any, tmp_path: Path) -> None:
    database = tmp_path / "shop.hyper"

    @dg.asset(name="sales", metadata={"foreign_keys": {"store_id": "stores.store_id"}})
    def text_keyed_sales() -> pa.Table:
        return arrow([("1", 9.5)], ["store_id", "amount"])

    run([text_keyed_sales], database)
    result, warnings = run([stores_asset()], database)
    assert result.success
    (warning,) = warnings
    assert warning.startswith(
        "Foreign key Extract.sales.store_id -> Extract.stores.store_id stays out of the file: "
    )
    assert "Hyper said: type mismatch when referencing primary key columns" in warning
    assert file_keys(hyper, database)[SALES] == Keys()
    assert table_rows(hyper, database, '"Extract".stores') == STORE_ROWS


def test_a_failed_write_of_the_referenced_table_changes_nothing(hyper: Any, tmp_path: Path) -> None:
    database = tmp_path / "shop.hyper"
    run([fact_asset("sales")], database)
    record = PendingKeys(database).path
    before = record.read_bytes()

    @dg.asset(name="stores", metadata={"primary_key": ["store_id"], "geography_columns": ["at"]})
    def unmappable_stores() -> pa.Table:
        return arrow([(1, "POINT(1 95)")], ["store_id", "at"])

    with pytest.raises(InvalidGeographyError):
        run([unmappable_stores], database)
    # No table, no key (the bytes differ: Hyper drops the table it created), the record kept.
    assert file_keys(hyper, database) == {SALES: Keys()}
    assert record.read_bytes() == before
    run([stores_asset()], database)
    assert file_keys(hyper, database)[SALES].foreign_keys == (TO_STORES,)


def test_a_failed_write_of_the_referencing_table_keeps_the_record(tmp_path: Path) -> None:
    database = tmp_path / "shop.hyper"
    run([fact_asset("sales")], database)
    record = PendingKeys(database).path
    before = record.read_bytes()

    @dg.asset(
        name="sales",
        metadata={"foreign_keys": {"region_id": "regions.region_id"}, "geography_columns": "at"},
    )
    def unmappable_sales() -> pa.Table:  # another key, then a value Hyper refuses
        return arrow([(1, 7, "POINT(1 95)")], ["store_id", "region_id", "at"])

    with pytest.raises(InvalidGeographyError):
        run([unmappable_sales], database)
    assert record.read_bytes() == before


def test_the_record_travels_with_the_file_in_an_object_store_home(
    hyper: Any, tmp_path: Path
) -> None:
    """Each run on a working copy of its own, as containers sharing only the store."""
    uri = (tmp_path / "store" / "shop.hyper").as_uri()
    (tmp_path / "store").mkdir()
    stores, sales, returns = star()
    for name, assets in (("facts", [sales, returns]), ("dimension", [stores])):
        io_manager = HyperIOManager(
            database=uri, home_settings=HomeSettings(working_dir=str(tmp_path / name))
        )
        assert dg.materialize(assets, resources={"io_manager": io_manager}).success
    reader = HyperDatabase(database=uri, settings=HomeSettings(working_dir=str(tmp_path / "r")))
    with reader.reading() as database:
        assert file_keys(hyper, database) == STAR
        assert query(hyper, database, 'SELECT COUNT(*) FROM "Extract".sales') == [[2]]
