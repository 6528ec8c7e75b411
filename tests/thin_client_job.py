"""Materialisations through Spark Connect's thin client (pyspark-client: no JVM, no py4j)
and no dagster-pyspark: `python thin_client_job.py SC_URL DATABASE`.

The Spark session comes from a resource of the user's own (`RemoteSpark`), so the
downstream Spark input is loaded into the session that is active, as a user without
dagster-pyspark has it. Prints one JSON line: which pyspark this is, and each run's success.
"""

from __future__ import annotations

import contextlib
import importlib.metadata
import importlib.util
import json
import sys

import dagster as dg
from pyspark.sql import DataFrame, SparkSession

from hyper_assets import HyperIOManager

DAYS = dg.DailyPartitionsDefinition(start_date="2024-01-01", end_date="2024-01-04")


class RemoteSpark(dg.ConfigurableResource):
    """A Spark Connect session, started when a step begins (made active by getOrCreate)."""

    url: str

    def setup_for_execution(self, context: dg.InitResourceContext) -> None:
        SparkSession.builder.remote(self.url).getOrCreate()

    @property
    def session(self) -> SparkSession:
        return SparkSession.builder.remote(self.url).getOrCreate()


@dg.asset(metadata={"primary_key": ["store_id"]})
def stores(spark: RemoteSpark) -> DataFrame:
    return spark.session.sql("SELECT id AS store_id, concat('store ', id) AS name FROM range(1, 4)")


@dg.asset(
    partitions_def=DAYS,
    metadata={"partition_expr": "day", "foreign_keys": {"store_id": "Extract.stores.store_id"}},
    deps=[stores],
)
def sales(context, spark: RemoteSpark) -> DataFrame:
    day = context.partition_key
    return spark.session.sql(
        f"SELECT DATE'{day}' AS day, (id % 3) + 1 AS store_id, "
        f"CAST(id AS DECIMAL(10, 2)) * 1.25 AS amount FROM range(0, 10)"
    )


@dg.asset
def store_names(stores: DataFrame) -> DataFrame:
    """Loads the dimension into the active session (no PySparkResource here)."""
    return stores.selectExpr("store_id", "upper(name) AS name")


def main() -> None:
    url, database = sys.argv[1:3]
    resources = {"io_manager": HyperIOManager(database=database), "spark": RemoteSpark(url=url)}
    runs = [
        dg.materialize([stores], resources=resources).success,
        dg.materialize([sales], partition_key="2024-01-01", resources=resources).success,
        dg.materialize([sales], partition_key="2024-01-02", resources=resources).success,
        dg.materialize(
            [store_names, stores], selection=[store_names.key], resources=resources
        ).success,
    ]
    distributions = ("pyspark", "pyspark-client", "pyspark-connect")
    installed = {}
    for name in distributions:
        with contextlib.suppress(importlib.metadata.PackageNotFoundError):
            installed[name] = importlib.metadata.version(name)
    print(
        json.dumps(
            {
                "installed": installed,
                "py4j": importlib.util.find_spec("py4j") is not None,
                "dagster_pyspark": importlib.util.find_spec("dagster_pyspark") is not None,
                "runs": runs,
            }
        )
    )


if __name__ == "__main__":
    main()
