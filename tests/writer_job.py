"""Jobs that the concurrency tests run in other processes (importable by path)."""

from __future__ import annotations

import os
import sys

from dagster import (
    DailyPartitionsDefinition,
    Definitions,
    asset,
    define_asset_job,
    materialize,
)
from dagster_pyspark import PySparkResource
from pyspark.sql import DataFrame

from hyper_assets import HyperIOManager

DATABASE = os.environ.get("HYPER_TEST_DB", "unset.hyper")
SPARK = PySparkResource(
    spark_config={
        "spark.master": "local[1]",
        "spark.ui.enabled": "false",
        "spark.ui.showConsoleProgress": "false",
        "spark.sql.shuffle.partitions": "2",
    }
)


def table_asset(name: str):
    @asset(name=name, metadata={"primary_key": ["id"]})
    def _table(pyspark: PySparkResource) -> DataFrame:
        return pyspark.spark_session.sql(f"SELECT id, '{name}' AS source FROM range(1000)")

    return _table


FOUR = [table_asset(n) for n in ("alpha", "beta", "gamma", "delta")]

defs = Definitions(
    assets=FOUR,
    jobs=[define_asset_job("four_tables", selection=[a.key for a in FOUR])],
    resources={"io_manager": HyperIOManager(database=DATABASE), "pyspark": SPARK},
)


DAYS = DailyPartitionsDefinition(start_date="2024-01-01", end_date="2024-01-05")


@asset(partitions_def=DAYS, metadata={"partition_expr": "day"})
def big(context, pyspark: PySparkResource) -> DataFrame:
    """Rows of one day, tagged with the run's label so a test can tell old from new."""
    label = os.environ["HYPER_TEST_LABEL"]
    day = context.partition_key
    rows = int(os.environ.get("HYPER_TEST_ROWS", "2000000"))
    return pyspark.spark_session.sql(
        f"SELECT id, DATE'{day}' AS day, '{label}' AS label, rand() AS x FROM range({rows})"
    )


@asset(name="big")
def big_full(pyspark: PySparkResource) -> DataFrame:
    """The whole table; the "new" label adds a column, so the refresh swaps tables."""
    label = os.environ["HYPER_TEST_LABEL"]
    rows = int(os.environ.get("HYPER_TEST_ROWS", "2000000"))
    extra = ", id * 2 AS extra" if label == "new" else ""
    return pyspark.spark_session.sql(
        f"SELECT id, DATE'2024-01-02' AS day, '{label}' AS label{extra} FROM range({rows})"
    )


def write_big(mode: str, database: str) -> bool:
    """Materialises `big`: the partition `mode`, or the whole table if `mode` is "full"."""
    result = materialize(
        [big_full] if mode == "full" else [big],
        partition_key=None if mode == "full" else mode,
        resources={"io_manager": HyperIOManager(database=database), "pyspark": SPARK},
    )
    return result.success


if __name__ == "__main__":
    print("DONE" if write_big(sys.argv[1], DATABASE) else "FAILED", flush=True)
