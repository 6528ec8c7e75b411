"""Materialisations speak Dagster's table vocabulary: qualified name, URI, counts, key roles;
and the metadata keys the library reads are checked: a misspelling is refused, naming the
key meant, where the definitions load and before a write; a wrong shape is named."""

import datetime as dt
import logging
import re
from pathlib import Path

import dagster as dg
import pyarrow as pa
import pytest
from helpers import digest

from hyper_assets import (
    HyperIOManager,
    MetadataKeyError,
    MetadataValueError,
    build_hyper_checks,
    build_publish_op,
    tableau_datasource_asset,
)
from hyper_assets._dagster.metadata_keys import INPUT_KEYS, PUBLISH_KEYS, TABLE_KEYS, misspelt

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
    io_manager = HyperIOManager(database=str(database))
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


def test_a_one_run_backfill_of_many_multi_partitions_reports_each_cells_count(tmp_path: Path):
    """213 (day, region) cells: more than one count query, and keys in Dagster's order."""
    cells = dg.MultiPartitionsDefinition(
        {
            "day": dg.DailyPartitionsDefinition(start_date="2024-01-01", end_date="2024-03-12"),
            "region": dg.StaticPartitionsDefinition(["a", "b", "c"]),
        }
    )
    width = {"a": 1, "b": 2, "c": 3}

    @dg.asset(
        partitions_def=cells,
        backfill_policy=dg.BackfillPolicy.single_run(),
        metadata={"partition_expr": {"day": "day", "region": "region"}},
    )
    def sales(context: dg.AssetExecutionContext) -> pa.Table:
        """Cell (day, region) has day-of-month times the region's width rows."""
        keys = [k.keys_by_dimension for k in context.partition_keys]
        rows = [
            (dt.date.fromisoformat(k["day"]), k["region"])
            for k in keys
            for _ in range(dt.date.fromisoformat(k["day"]).day * width[k["region"]])
        ]
        days, regions = zip(*rows, strict=True)
        return pa.table({"day": pa.array(days, pa.date32()), "region": list(regions)})

    keys = cells.get_partition_keys()
    assert len(keys) == 213
    io_manager = HyperIOManager(database=str(tmp_path / "cells.hyper"))
    result = dg.materialize(
        [sales],
        resources={"io_manager": io_manager},
        tags={
            "dagster/asset_partition_range_start": keys[0],
            "dagster/asset_partition_range_end": keys[-1],
        },
    )
    counts = {
        e.partition: e.materialization.metadata["dagster/partition_row_count"].value
        for e in result.get_asset_materialization_events()
    }
    expected = {
        str(k): dt.date.fromisoformat(k.keys_by_dimension["day"]).day
        * width[k.keys_by_dimension["region"]]
        for k in keys
    }
    assert counts == expected


def test_each_write_logs_its_table_mode_rows_and_seconds_at_info(tmp_path: Path):
    with dg.DagsterInstance.ephemeral() as instance:
        materialise(tmp_path / "star.hyper", carriers, instance=instance)
        materialise(tmp_path / "star.hyper", flights, instance=instance, partition_key="2024-01-03")
        logged = [
            (r.level, r.user_message)
            for run in instance.get_runs()
            for r in instance.all_logs(run.run_id)
            if r.user_message.startswith("Wrote ")
        ]
    assert len(logged) == 2
    assert all(level == logging.INFO for level, _ in logged)
    messages = "\n".join(m for _, m in logged)
    assert re.search(r"Wrote Extract\.carriers \(replace\): 3 rows in \d+\.\d s, into ", messages)
    assert re.search(r"Wrote Extract\.flights \(partition\): 3 rows in \d+\.\d s", messages)


# --- The keys the library reads: a misspelling refused, a wrong shape named --------------

MISSPELT = [
    ("foreign_key", "foreign_keys"),
    ("primary_keys", "primary_key"),
    ("partition_exp", "partition_expr"),
    ("write-mode", "write_mode"),
    ("Primary_Key", "primary_key"),
    ("partition_expression", "partition_expr"),
    ("geography_column", "geography_columns"),
    ("schema evolution", "schema_evolution"),
    ("tabel", "table"),
    ("dagster/column_schemas", "dagster/column_schema"),
]
#: Keys of the user's own, far from ours: they pass.
THEIRS = ["owner", "label", "table_name", "schema_version", "partition", "source", "dagster/uri"]


@pytest.mark.parametrize(("key", "meant"), MISSPELT)
def test_a_key_close_to_one_of_ours_is_taken_for_it(key: str, meant: str):
    assert misspelt(key, TABLE_KEYS) == meant


@pytest.mark.parametrize("key", [*TABLE_KEYS, *THEIRS])
def test_our_keys_and_the_users_own_are_no_misspelling(key: str):
    assert misspelt(key, TABLE_KEYS) is None


def fact(**metadata: object) -> dg.AssetsDefinition:
    @dg.asset(name="flights", partitions_def=DAYS, metadata={"partition_expr": "day", **metadata})
    def flights(context: dg.AssetExecutionContext) -> pa.Table:
        day = dt.date.fromisoformat(context.partition_key)
        return pa.table({"day": pa.array([day], pa.date32()), "carrier": ["UA"]})

    return flights


TYPO = {"foreign_key": {"carrier": "Extract.carriers.carrier"}}
REFUSAL = (
    "Metadata key 'foreign_key' of asset 'flights' is not one hyper-assets reads: did you "
    f"mean 'foreign_keys' ({TABLE_KEYS['foreign_keys']})? Rename it; as it is, it would be "
    "ignored."
)


def test_a_misspelt_key_fails_the_write_and_leaves_the_file_as_it_was(tmp_path: Path):
    database = tmp_path / "star.hyper"
    materialise(database, carriers)
    before = digest(database)
    with pytest.raises(MetadataKeyError) as refused:
        dg.materialize(
            [carriers, fact(**TYPO)],
            selection=["flights"],
            partition_key="2024-01-02",
            resources={"io_manager": HyperIOManager(database=str(database))},
        )
    assert str(refused.value) == REFUSAL
    assert (refused.value.key, refused.value.meant) == ("foreign_key", "foreign_keys")
    assert digest(database) == before


def test_a_misspelt_key_fails_the_definitions_wherever_the_library_sees_them():
    """The checks, the publish asset and the publish op refuse it as the code loads."""
    typo = fact(**TYPO)
    for define in (
        lambda: build_hyper_checks([carriers, typo]),
        lambda: tableau_datasource_asset(datasource="F", project="p", deps=[carriers, typo]),
        lambda: build_publish_op(datasource="F", project="p", tables=[typo]),
    ):
        with pytest.raises(MetadataKeyError) as refused:
            define()
        assert str(refused.value) == REFUSAL


def test_a_value_of_the_wrong_shape_names_the_key_the_asset_and_the_shape():
    with pytest.raises(MetadataValueError) as refused:
        build_hyper_checks([fact(write_mode="merge")])
    assert str(refused.value) == (
        "Metadata write_mode of Extract.flights (asset 'flights') is 'merge'; give 'append' "
        "or 'upsert' (left out: a full refresh, or a partition replace)."
    )
    with pytest.raises(MetadataValueError, match=r"primary_key of Extract\.flights \(asset"):
        build_hyper_checks([fact(primary_key=[1])])


def test_the_users_own_keys_pass_and_a_misspelt_input_key_fails_before_the_asset_runs(
    tmp_path: Path,
):
    database = tmp_path / "star.hyper"
    own = {"owner": "team:ops", "label": "core", "table_name": "documented elsewhere"}
    result = dg.materialize(
        [fact(**own, foreign_keys={"carrier": "Extract.carriers.carrier"}), carriers],
        partition_key="2024-01-02",
        resources={"io_manager": HyperIOManager(database=str(database))},
    )
    assert result.success
    ran = []

    @dg.asset(ins={"carriers": dg.AssetIn(metadata={"column": ["carrier"]})})
    def names(carriers: pa.Table) -> None:
        ran.append(carriers)

    with pytest.raises(MetadataKeyError, match=r"key 'column' of the input loading Extract"):
        dg.materialize(
            [carriers.to_source_asset(), names],
            resources={"io_manager": HyperIOManager(database=str(database))},
        )
    assert ran == []


def test_the_docs_list_every_key_with_its_shape():
    """docs/metadata.md lists each key the library reads, once."""
    text = (Path(__file__).parent.parent / "docs" / "metadata.md").read_text()
    rows = re.findall(r"^\| `([^`]+)` \|", text, flags=re.MULTILINE)
    assert sorted(rows) == sorted([*TABLE_KEYS, *INPUT_KEYS, *PUBLISH_KEYS])
