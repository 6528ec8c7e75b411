"""Write, partition replace and load through a Spark Connect server (run by a test).

`connect_job.py URL DB` materialises as a client with no local Spark session at all.
"""

from __future__ import annotations

import json
import sys

from dagster import AssetIn, DailyPartitionsDefinition, asset, materialize
from dagster_pyspark import PySparkResource
from pyspark.sql import DataFrame

from hyper_assets import HyperIOManager

DAYS = DailyPartitionsDefinition(start_date="2024-01-01", end_date="2024-01-05")
FRAME_TYPES: set[str] = set()


@asset(partitions_def=DAYS, metadata={"partition_expr": "day"})
def readings(context, pyspark: PySparkResource) -> DataFrame:
    day = context.partition_key
    frame = pyspark.spark_session.sql(
        f"SELECT id, DATE'{day}' AS day, TIMESTAMP'{day} 08:30:00' AS at FROM range(100)"
    )
    FRAME_TYPES.add(type(frame).__module__)
    return frame


@asset(ins={"readings": AssetIn(metadata={"columns": ["day", "at"]})})
def summary(readings: DataFrame, pyspark: PySparkResource) -> DataFrame:
    FRAME_TYPES.add(type(readings).__module__)
    return readings.groupBy("day").agg({"at": "max"}).withColumnRenamed("max(at)", "last_at")


def main(url: str, database: str) -> None:
    spark = PySparkResource(
        spark_config={"spark.remote": url, "spark.sql.session.timeZone": "Asia/Tokyo"}
    )
    resources = {"io_manager": HyperIOManager(database=database), "pyspark": spark}
    for day in ["2024-01-01", "2024-01-02", "2024-01-02"]:
        result = materialize([readings], resources=resources, partition_key=day)
        assert result.success
    result = materialize([readings, summary], resources=resources, selection=[summary])
    assert result.success
    print(json.dumps({"frames": sorted(FRAME_TYPES)}))


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
