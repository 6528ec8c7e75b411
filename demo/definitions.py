"""The demo's code location: assets, checks, jobs, the daily schedule and the landing sensors."""

from __future__ import annotations

from dagster import (
    AssetSelection,
    Definitions,
    build_schedule_from_partitioned_job,
    build_sensor_for_freshness_checks,
    define_asset_job,
)
from dagster_pyspark import PySparkResource

from demo.assets import Landing, airlines, airports, flights, planes, weather
from demo.checks import FACTS, FRESHNESS_CHECKS, build_checks
from hyper_assets import HyperIOManager
from hyper_assets.sensors import landing_sensor

DAY_IN_NAME = r"_(\d{4}-\d{2}-\d{2})\.parquet$"


def build_definitions(
    landing: str = "data/landing",
    database: str = "data/flights.hyper",
    spark_master: str = "local[*]",
) -> Definitions:
    """The demo wired to a landing directory, a `.hyper` file and a Spark master.

    The landing sensors start stopped: backfill the landed history first (one run for a
    partition range), then start them; they skip the days that backfill loaded.
    """
    dimensions_job = define_asset_job("dimensions_job", AssetSelection.groups("dimensions"))
    facts_job = define_asset_job("daily_facts_job", AssetSelection.groups("facts"))
    fact_jobs = {f.key.path[-1]: define_asset_job(f"{f.key.path[-1]}_job", [f]) for f in FACTS}
    sensors = [
        landing_sensor(
            job=job, directory=landing, pattern=f"{name}_*.parquet", partition_key=DAY_IN_NAME
        )
        for name, job in fact_jobs.items()
    ]
    return Definitions(
        assets=[
            airlines,
            airports,
            planes,
            flights,
            weather,
            # PUBLISH: the asset publishing data/flights.hyper to Tableau goes here.
        ],
        asset_checks=build_checks(),
        jobs=[dimensions_job, facts_job, *fact_jobs.values()],
        schedules=[build_schedule_from_partitioned_job(facts_job, hour_of_day=6)],
        sensors=[*sensors, build_sensor_for_freshness_checks(freshness_checks=FRESHNESS_CHECKS)],
        resources={
            "io_manager": HyperIOManager(database=database),
            "pyspark": PySparkResource(
                spark_config={"spark.master": spark_master, "spark.ui.enabled": "false"}
            ),
            "landing": Landing(directory=landing),
        },
    )
