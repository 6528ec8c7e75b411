"""The contract Dagster's own table IO managers share (dagster-duckdb, -deltalake, -snowflake,
-gcp), run through real `materialize` calls and op jobs, Spark and Python frames alike:
self-dependent partitions and inputs mapped to no upstream partition load an empty frame,
op outputs are tables `<schema>.<output name>`, and an output that is None or has no
columns is refused by name. The stored rows are read back each time."""

from pathlib import Path

import pandas as pd
import polars as pl
import pyarrow as pa
import pytest
from dagster import (
    AssetIn,
    AssetKey,
    BackfillPolicy,
    DagsterInstance,
    DailyPartitionsDefinition,
    Out,
    TimeWindowPartitionMapping,
    asset,
    graph,
    graph_asset,
    job,
    materialize,
    op,
)
from helpers import io, query, staged_row_counts, table_rows
from pyspark.sql import DataFrame

from hyper_assets import OutputError

DAYS = DailyPartitionsDefinition(start_date="2024-01-01", end_date="2024-01-05")
EARLIER_DAY = TimeWindowPartitionMapping(start_offset=-1, end_offset=-1)


@pytest.fixture
def database(tmp_path: Path) -> Path:
    return tmp_path / "contract.hyper"


# --- Self-dependent partitions, and inputs mapped to no upstream partition ---------------

#: Each input type: how to build a day's frame, and how to read a loaded frame as
#: (column names, rows).
PYTHON_INPUTS = {
    "pyarrow": (pa.Table, lambda t: (t.column_names, [tuple(r.values()) for r in t.to_pylist()])),
    "pandas": (
        pd.DataFrame,
        lambda f: (list(f.columns), [tuple(r) for r in f.itertuples(index=False)]),
    ),
    "polars": (pl.DataFrame, lambda f: (f.columns, f.rows())),
}


def cumulative_asset(frame_type, make_day, read):
    """A running total per day: each partition reads the day before it from its own table."""
    seen: list[tuple[list[str], list[tuple]]] = []

    @asset(
        partitions_def=DAYS,
        metadata={"partition_expr": "day"},
        ins={"running": AssetIn(AssetKey("running"), partition_mapping=EARLIER_DAY)},
    )
    def running(context, running: frame_type):  # type: ignore[valid-type]
        seen.append(read(running))
        previous = sum(row[1] for row in read(running)[1])
        return make_day(context.partition_key, previous + 10)

    return running, seen


def arrow_day(day: str, total: int) -> pa.Table:
    return pa.table({"day": pa.array([pd.Timestamp(day).date()]), "total": [total]})


@pytest.mark.parametrize("frame", list(PYTHON_INPUTS))
def test_self_dependent_asset_loads_empty_then_the_day_before(frame, database, hyper):
    frame_type, read = PYTHON_INPUTS[frame]
    running, seen = cumulative_asset(frame_type, arrow_day, read)
    resources = {"io_manager": io(database)}
    with DagsterInstance.ephemeral() as instance:
        for day in ["2024-01-01", "2024-01-01", "2024-01-02", "2024-01-03"]:
            result = materialize(
                [running], partition_key=day, resources=resources, instance=instance
            )
            assert result.success
    # No file, then a table holding only the first day (which the first day does not read),
    # then the day before, whole.
    assert seen[0] == ([], [])
    assert seen[1] == (["day", "total"], [])
    assert [rows for _, rows in seen[2:]] == [
        [(pd.Timestamp("2024-01-01").date(), 10)],
        [(pd.Timestamp("2024-01-02").date(), 20)],
    ]
    stored = table_rows(hyper, database, '"Extract"."running"')
    assert [(str(d), t) for d, t in stored] == [
        ("2024-01-01", 10),
        ("2024-01-02", 20),
        ("2024-01-03", 30),
    ]


def test_self_dependent_spark_asset(spark, database, hyper):
    def spark_day(day: str, total: int) -> DataFrame:
        return spark.sql(f"SELECT DATE'{day}' AS day, CAST({total} AS BIGINT) AS total")

    def read(frame: DataFrame) -> tuple[list[str], list[tuple]]:
        return frame.columns, [tuple(r) for r in frame.collect()]

    running, seen = cumulative_asset(DataFrame, spark_day, read)
    resources = {"io_manager": io(database)}
    with DagsterInstance.ephemeral() as instance:
        for day in ["2024-01-01", "2024-01-01", "2024-01-02"]:
            result = materialize(
                [running], partition_key=day, resources=resources, instance=instance
            )
            assert result.success
    assert seen[0] == ([], [])
    assert seen[1] == (["day", "total"], [])
    assert [(str(d), t) for d, t in seen[2][1]] == [("2024-01-01", 10)]
    stored = table_rows(hyper, database, '"Extract"."running"')
    assert [(str(d), t) for d, t in stored] == [("2024-01-01", 10), ("2024-01-02", 20)]


def test_input_mapped_to_no_upstream_partition(database, hyper):
    """A downstream asset reading yesterday's upstream partition, on the first day."""

    @asset(partitions_def=DAYS, metadata={"partition_expr": "day"})
    def events(context) -> pa.Table:
        return arrow_day(context.partition_key, 1)

    loaded = []

    @asset(
        partitions_def=DAYS,
        metadata={"partition_expr": "day"},
        ins={"events": AssetIn(partition_mapping=EARLIER_DAY)},
    )
    def change(context, events: pa.Table) -> pa.Table:
        loaded.append(events.num_rows)
        return arrow_day(context.partition_key, events.num_rows)

    resources = {"io_manager": io(database)}
    with DagsterInstance.ephemeral() as instance:
        for day in ["2024-01-01", "2024-01-02"]:
            result = materialize(
                [events, change], partition_key=day, resources=resources, instance=instance
            )
            assert result.success
    assert loaded == [0, 1]
    assert [t for _, t in table_rows(hyper, database, '"Extract"."change"')] == [0, 1]


# --- Op outputs ------------------------------------------------------------------------


@op(out=Out(metadata={"schema": "a_df"}))
def a_df() -> pa.Table:
    return pa.table({"a": [1, 2, 3], "b": [4, 5, 6]})


@op(out=Out(metadata={"schema": "add_one"}))
def add_one(df: pa.Table) -> pa.Table:
    return pa.table({"a": pa.compute.add(df["a"], 1), "b": pa.compute.add(df["b"], 1)})


@graph
def add_one_to_dataframe():
    add_one(a_df())


def test_op_outputs_are_tables_named_for_their_output(database, hyper):
    job_def = add_one_to_dataframe.to_job(resource_defs={"io_manager": io(database)})
    for _ in range(2):  # the second run replaces the tables, no duplicates
        assert job_def.execute_in_process().success
        assert table_rows(hyper, database, '"a_df"."result"') == [(1, 4), (2, 5), (3, 6)]
        assert table_rows(hyper, database, '"add_one"."result"') == [(2, 5), (3, 6), (4, 7)]


def test_op_output_in_the_default_schema_with_keys_and_append(database, hyper):
    @op(out={"stores": Out(metadata={"primary_key": ["id"]})})  # table "Extract"."stores"
    def stores() -> pa.Table:
        return pa.table({"id": [1, 2], "name": ["north", "south"]})

    @op(
        out=Out(
            metadata={
                "table": "sales",
                "write_mode": "append",
                "foreign_keys": {"store": "Extract.stores.id"},
            }
        )
    )
    def sell(stores: pa.Table) -> pa.Table:  # table "Extract"."sales"
        return pa.table({"store": stores["id"], "amount": [10.0, 20.0]})

    @job(resource_defs={"io_manager": io(database)})
    def shop():
        sell(stores())

    for _ in range(2):
        assert shop.execute_in_process().success
    assert table_rows(hyper, database, '"Extract"."stores"') == [(1, "north"), (2, "south")]
    assert table_rows(hyper, database, '"Extract"."sales"', "1, 2") == [
        (1, 10.0),
        (1, 10.0),
        (2, 20.0),
        (2, 20.0),
    ]
    assert constraints(hyper, database, "stores") == [("p", None)]
    assert constraints(hyper, database, "sales") == [("f", "stores")]


def constraints(hyper, database: Path, table: str) -> list[tuple]:
    """(kind, referenced table) of each key of `table`, from Hyper's own catalog."""
    sql = (
        "SELECT con.contype, ref.relname FROM pg_catalog.pg_constraint con "
        "JOIN pg_catalog.pg_class cl ON cl.oid = con.conrelid "
        "LEFT JOIN pg_catalog.pg_class ref ON ref.oid = con.confrelid "
        f"WHERE cl.relname = '{table}' ORDER BY 1"
    )
    return [tuple(row) for row in query(hyper, database, sql)]


def test_partitioned_op_job_replaces_its_partition(database, hyper):
    @op(out=Out(metadata={"partition_expr": "day"}))
    def readings(context) -> pa.Table:
        return arrow_day(context.partition_key, len(context.partition_key))

    @job(partitions_def=DAYS, resource_defs={"io_manager": io(database)})
    def daily():
        readings()

    for day in ["2024-01-01", "2024-01-02", "2024-01-01"]:
        assert daily.execute_in_process(partition_key=day).success
    stored = table_rows(hyper, database, '"Extract"."result"')
    assert [str(d) for d, _ in stored] == ["2024-01-01", "2024-01-02"]


def test_graph_backed_asset_and_spark_op_outputs(spark, database, hyper):
    @op(out=Out(metadata={"schema": "staging", "table": "raw_orders"}))
    def raw() -> DataFrame:
        return spark.sql("SELECT id, id * 2 AS amount FROM range(4)")

    @op
    def doubled(raw: DataFrame) -> DataFrame:
        return raw.selectExpr("id", "amount * 2 AS amount")

    @graph_asset
    def orders() -> DataFrame:
        return doubled(raw())

    result = materialize([orders], resources={"io_manager": io(database)})
    assert result.success
    assert table_rows(hyper, database, '"staging"."raw_orders"') == [
        (0, 0),
        (1, 2),
        (2, 4),
        (3, 6),
    ]
    assert table_rows(hyper, database, '"Extract"."orders"') == [(0, 0), (1, 4), (2, 8), (3, 12)]


# --- None and frames of no columns -----------------------------------------------------


def test_asset_that_forgets_to_return_is_refused_by_name(database, hyper):
    @asset
    def kept() -> pa.Table:
        return pa.table({"id": [1]})

    @asset
    def forgot(context):
        pa.table({"id": [1]})  # no return

    materialize([kept], resources={"io_manager": io(database)})
    with pytest.raises(OutputError, match=r"Asset 'forgot' returned None"):
        materialize([forgot], resources={"io_manager": io(database)})
    assert table_rows(hyper, database, '"Extract"."kept"') == [(1,)]


def test_output_typed_none_stores_nothing(database):
    @asset
    def side_effect() -> None:
        return None

    assert materialize([side_effect], resources={"io_manager": io(database)}).success
    assert not database.exists()


def test_frame_of_no_columns_is_refused_before_anything_is_written(spark, database, hyper):
    @asset(name="wide")
    def first() -> pa.Table:
        return pa.table({"id": [1, 2]})

    @asset(name="wide")
    def no_columns_arrow() -> pa.Table:
        return pa.table({})

    @asset(name="wide")
    def no_columns_spark() -> DataFrame:
        return spark.range(3).select()

    materialize([first], resources={"io_manager": io(database)})
    for refused in (no_columns_arrow, no_columns_spark):
        with pytest.raises(OutputError, match=r"Asset 'wide' returned a frame with no columns"):
            materialize([refused], resources={"io_manager": io(database)})
    assert table_rows(hyper, database, '"Extract"."wide"') == [(1,), (2,)]


# --- A lost extract: refused before Spark runs, rebuilt by a backfill of every partition --


def test_a_lost_extract_refuses_before_spark_and_a_backfill_of_every_partition_rebuilds_it(
    spark, database, hyper
):
    @asset(
        partitions_def=DAYS,
        metadata={"partition_expr": "day"},
        backfill_policy=BackfillPolicy.single_run(),
    )
    def readings(context) -> DataFrame:
        start, end = (d.date() for d in context.partition_time_window)
        return spark.sql(
            f"SELECT day, 1 AS reading FROM (SELECT explode(sequence(DATE'{start}', "
            f"date_sub(DATE'{end}', 1))) AS day)"
        )

    resources = {"io_manager": io(database)}
    with DagsterInstance.ephemeral() as instance:
        for day in ("2024-01-01", "2024-01-02"):
            assert materialize(
                [readings], partition_key=day, resources=resources, instance=instance
            ).success
        database.unlink()  # the extract is lost: a volume not mounted, a new container

        with staged_row_counts() as staged:
            lost = materialize(
                [readings],
                partition_key="2024-01-03",
                resources=resources,
                instance=instance,
                raise_on_error=False,
            )
        assert not lost.success
        failure = lost.failure_data_for_node("readings")
        assert failure and "ExtractRecreatedError" in str(failure.error)
        assert staged == [], "refused before Spark staged a row"
        assert not database.exists()

        every = {
            "dagster/asset_partition_range_start": "2024-01-01",
            "dagster/asset_partition_range_end": "2024-01-04",
        }
        rebuilt = materialize([readings], resources=resources, instance=instance, tags=every)
        assert rebuilt.success
        warnings = [
            r.user_message
            for r in instance.all_logs(rebuilt.run_id)
            if r.level >= 30 and "goes ahead, as it rewrites every row" in r.user_message
        ]
        assert len(warnings) == 1
    stored = table_rows(hyper, database, '"Extract"."readings"')
    assert [str(day) for day, _ in stored] == [
        "2024-01-01",
        "2024-01-02",
        "2024-01-03",
        "2024-01-04",
    ]
