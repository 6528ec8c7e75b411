"""Materialisations through a Spark session given on the command line, one run per step.

`python remote_job.py SPARK_CONFIG_JSON DATABASE STAGING_MODE STEPS_JSON [STAGING_DIR]`
runs each step `[asset, tags]` with `dagster.materialize` (the asset's upstream, if any,
is loaded from the file) and prints one JSON line: per step, whether it succeeded, its error's class
and message, its materialisation metadata, the process's peak RSS before and after, and how
often staged files were counted (`staged_row_counts`).
Tags: `start` / `end` (the ids), `label`, `partitions` (Spark's, default 2), `day`
(the partition key of `readings`) and `staging_mode` (this step's, instead of
STAGING_MODE: several modes share one Spark session and its executors).
"""

from __future__ import annotations

import json
import resource
import sys
from typing import Any

from dagster import AssetIn, DailyPartitionsDefinition, asset, materialize
from dagster_pyspark import PySparkResource
from helpers import ROWS_SQL, as_text, staged_row_counts
from pyspark.sql import DataFrame, functions as F

from hyper_assets import HyperIOManager, HyperResource

DAYS = DailyPartitionsDefinition(start_date="2024-01-01", end_date="2024-01-05")


def _rows(context: Any, pyspark: PySparkResource, extra: str = "") -> DataFrame:
    tags = context.run.tags
    return pyspark.spark_session.sql(
        f"SELECT id, '{tags['label']}' AS label, CAST(id AS DOUBLE) * 1.5 AS price, "
        f"TIMESTAMP'2024-01-01 08:30:00' + make_interval(0, 0, 0, 0, 0, 0, id) AS at{extra} "
        f"FROM range({tags['start']}, {tags['end']}, 1, {tags.get('partitions', 2)})"
    )


@asset(metadata={"primary_key": ["id"]})
def items(context, pyspark: PySparkResource) -> DataFrame:
    """Full refresh."""
    return _rows(context, pyspark)


@asset(metadata={"write_mode": "append"})
def events(context, pyspark: PySparkResource) -> DataFrame:
    return _rows(context, pyspark)


@asset(metadata={"write_mode": "upsert", "primary_key": ["id"]})
def prices(context, pyspark: PySparkResource) -> DataFrame:
    return _rows(context, pyspark)


@asset(partitions_def=DAYS, metadata={"partition_expr": "day"})
def readings(context, pyspark: PySparkResource) -> DataFrame:
    return _rows(context, pyspark, f", DATE'{context.partition_key}' AS day")


@asset(metadata={"primary_key": ["id"]})
def wide(context, pyspark: PySparkResource) -> DataFrame:
    """A frame far larger than the memory it may take here: 100-character strings."""
    return _rows(context, pyspark, ", repeat(sha2(CAST(id AS STRING), 256), 2) AS payload")


@asset(ins={"items": AssetIn(metadata={"columns": ["id", "label", "at"]})})
def summary(items: DataFrame) -> DataFrame:
    """A downstream asset that loads `items` back into the (remote) session."""
    return items.groupBy("label").agg({"id": "count", "at": "max"}).toDF("label", "n", "last_at")


@asset
def typed(pyspark: PySparkResource) -> DataFrame:
    """Every Spark atomic type, with NULLs and extremes (helpers.ROWS_SQL)."""
    frame = pyspark.spark_session.sql(ROWS_SQL)
    return frame.withColumn("row", F.monotonically_increasing_id()).coalesce(1)


@asset
def typed_back(context, typed: DataFrame) -> None:
    """Writes what the loaded `typed` holds, as text, and its types to the tag `out`."""
    types = {f.name: f.dataType.simpleString() for f in typed.schema.fields}
    with open(context.run.tags["out"], "w") as out:
        json.dump({"rows": as_text(typed), "types": types}, out)


ASSETS = {
    a.key.to_user_string(): a
    for a in (items, events, prices, readings, wide, summary, typed, typed_back)
}
UPSTREAM = {"summary": items, "typed_back": typed}


def _outcome(result: Any) -> dict[str, Any]:
    outcome: dict[str, Any] = {"success": result.success, "metadata": {}}
    for event in result.all_events:
        if event.event_type_value == "STEP_FAILURE":
            error = event.event_specific_data.error
            error = error.cause or error  # what handle_output raised
            outcome["error"] = error.cls_name
            outcome["message"] = error.message
        if event.event_type_value == "ASSET_MATERIALIZATION":
            metadata = event.event_specific_data.materialization.metadata
            values = {k: v.value for k, v in metadata.items()}
            outcome["metadata"] = {
                k: v for k, v in values.items() if isinstance(v, str | int | float | bool)
            }
    return outcome


def main(
    config: dict[str, str], database: str, mode: str, steps: list[list[Any]], staging: str | None
) -> None:
    pyspark = PySparkResource(spark_config=config)
    outcomes = []
    for name, tags in steps:
        io_manager = HyperIOManager(
            database=database,
            staging_mode=tags.get("staging_mode", mode),
            staging_dir=staging,
            hyper=HyperResource(default_database_version=3),  # for decimal(38)
        )
        resources = {"io_manager": io_manager, "pyspark": pyspark}
        assets = [ASSETS[name], *([UPSTREAM[name]] if name in UPSTREAM else [])]
        before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss // 1024
        with staged_row_counts() as counts:
            result = materialize(
                assets,
                resources=resources,
                selection=[name],
                partition_key=tags.get("day"),
                tags={k: str(v) for k, v in tags.items()},
                raise_on_error=False,
            )
        after = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss // 1024
        measured = {"peak_mb_before": before, "peak_mb_after": after}
        outcomes.append(_outcome(result) | measured | {"staged_row_counts": len(counts)})
    print(json.dumps(outcomes))


if __name__ == "__main__":
    staging_dir = sys.argv[5] if len(sys.argv) > 5 else None
    main(json.loads(sys.argv[1]), sys.argv[2], sys.argv[3], json.loads(sys.argv[4]), staging_dir)
