"""Materialisations speak Dagster's table vocabulary: qualified name, URI, counts, key roles."""

import datetime as dt
from pathlib import Path

import dagster as dg
import pyarrow as pa

from hyper_assets import HyperIOManager, HyperResource

DAYS = dg.DailyPartitionsDefinition(start_date="2024-01-01", end_date="2024-02-01")


@dg.asset(metadata={"primary_key": ["carrier"]})
def carriers() -> pa.Table:
    return pa.table({"carrier": ["AA", "B6", "UA"], "name": ["American", "JetBlue", "United"]})


@dg.asset(
    partitions_def=DAYS,
    backfill_policy=dg.BackfillPolicy.single_run(),
    metadata={
        "partition_expr": "day",
        "foreign_keys": {"carrier": "Extract.carriers.carrier"},
    },
)
def flights(context: dg.AssetExecutionContext) -> pa.Table:
    """Day n of the month has n rows, so each partition's count is its own."""
    partitions = [dt.date.fromisoformat(k) for k in context.partition_keys]
    days = [day for day in partitions for _ in range(day.day)]
    return pa.table({"day": pa.array(days, pa.date32()), "carrier": ["UA"] * len(days)})


def materialise(database: Path, asset: dg.AssetsDefinition, **kwargs) -> list[dict]:
    io_manager = HyperIOManager(
        database=str(database), hyper=HyperResource(log_dir=str(database.parent / "logs"))
    )
    result = dg.materialize(
        [carriers, flights], selection=[asset], resources={"io_manager": io_manager}, **kwargs
    )
    return [e.materialization.metadata for e in result.get_asset_materialization_events()]


def test_tables_carry_their_file_uri_qualified_name_counts_and_key_roles(tmp_path: Path):
    database = tmp_path / "star.hyper"
    (dimension,) = materialise(database, carriers)
    assert dimension["dagster/table_name"].value == "star.Extract.carriers"
    assert dimension["dagster/uri"].value == database.absolute().as_uri()
    assert dimension["dagster/row_count"].value == 3
    assert "dagster/partition_row_count" not in dimension
    columns = {c.name: c.constraints for c in dimension["dagster/column_schema"].value.columns}
    assert (columns["carrier"].unique, columns["carrier"].other) == (
        True,
        ["primary key (carrier)"],
    )
    assert (columns["name"].unique, columns["name"].other) == (False, [])

    materialise(database, flights, partition_key="2024-01-01")
    (day,) = materialise(database, flights, partition_key="2024-01-02")
    assert day["dagster/partition_row_count"].value == 2
    assert day["dagster/row_count"].value == 3  # the whole table
    columns = {c.name: c.constraints for c in day["dagster/column_schema"].value.columns}
    assert columns["carrier"].other == ["foreign key -> Extract.carriers.carrier"]
    assert columns["day"].other == []

    tags = {
        "dagster/asset_partition_range_start": "2024-01-02",
        "dagster/asset_partition_range_end": "2024-01-04",
    }
    days = materialise(database, flights, tags=tags)
    # A backfill: each partition its own count, the range's and the table's on all.
    assert [m["dagster/partition_row_count"].value for m in days] == [2, 3, 4]
    assert [m["range_row_count"].value for m in days] == [9] * 3
    assert [m["dagster/row_count"].value for m in days] == [10] * 3
