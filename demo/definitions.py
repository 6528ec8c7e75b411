"""The demo's code location: assets, checks, jobs, the daily schedule and the landing sensors."""

from __future__ import annotations

import os
from pathlib import Path

from dagster import (
    AssetSelection,
    DagsterRunStatus,
    Definitions,
    EnvVar,
    RunRequest,
    RunStatusSensorContext,
    ScheduleDefinition,
    build_schedule_from_partitioned_job,
    build_sensor_for_freshness_checks,
    define_asset_job,
    in_process_executor,
    run_status_sensor,
)

from demo.assets import Landing, airlines, airports, flights, planes, weather
from demo.checks import FACTS, FRESHNESS_CHECKS, SCHEMA_CHECKS, build_checks, checks_of
from demo.spark import DemoSpark, spark_config
from hyper_assets import (
    HyperIOManager,
    TableauServerResource,
    TokenSignIn,
    landing_sensor,
    quality_warning_sensor,
    tableau_datasource_asset,
)

DAY_IN_NAME = r"_(\d{4}-\d{2}-\d{2})\.parquet$"
#: A project name or path ("Sales/EMEA"); the built-in project of a site is "Default".
PROJECT = os.environ.get("TABLEAU_PROJECT", "Default")

#: The published data sources: one fact each, as Tableau takes a published file. The file
#: holds two facts sharing `airports`, which Tableau refuses as one data source. In
#: "Flights" `airports` plays two roles, `origin` and `dest`: the publish sends a copy for
#: each, `airports (origin)` and `airports (dest)`. Their keys are under `tableau/`: the
#: default key of "Flights" is the table's, `flights` (`tableau_translator(DATASOURCES)`
#: hangs dagster-tableau's sheets below them).
TABLES = {
    "Flights": ["flights", "airlines", "airports", "planes"],
    "Weather": ["weather", "airports"],
}
flights_datasource = tableau_datasource_asset(
    datasource="Flights",
    key=["tableau", "flights"],
    project=PROJECT,
    deps=[flights, airlines, airports, planes],
    tables=TABLES["Flights"],
    group_name="tableau",
)
weather_datasource = tableau_datasource_asset(
    datasource="Weather",
    key=["tableau", "weather"],
    project=PROJECT,
    deps=[weather, airports],
    tables=TABLES["Weather"],
    group_name="tableau",
)
DATASOURCES = (flights_datasource, weather_datasource)


def build_definitions(
    landing: str = "data/landing",
    database: str = "data/flights.hyper",
    spark_master: str = "local[*]",
    tableau: TableauServerResource | None = None,
    lag_cron: str = "*/15 * * * *",
    sensor_interval: int = 30,
) -> Definitions:
    """The demo wired to a landing directory, a `.hyper` file, a Spark master and a server.

    The landing sensors start stopped: backfill the landed history first (one run for a
    partition range), then start them; they skip the days that backfill loaded. A fact run
    checks each day it wrote; after each successful one, `after_facts` publishes what
    changed. `lag_cron` is when the published copy's lag is checked; `sensor_interval` is
    the landing sensors' and `after_facts`' minimum seconds between ticks (Dagster's
    default, 30; the daemon test lowers it to wait less); it is also when each copy is
    compared with the file through the VizQL Data Service. The quality warning
    sensors show failed blocking checks and a late publish on each data source in Tableau.
    """
    dimensions_job = define_asset_job("dimensions_job", AssetSelection.groups("dimensions"))
    # The facts' checks are partitioned: a run checks the days it wrote, one result each.
    fact_checks = [c for fact in FACTS for c in checks_of(fact)]
    facts = AssetSelection.groups("facts").without_checks()
    facts_job = define_asset_job("daily_facts_job", facts | AssetSelection.checks(*fact_checks))
    # One sensor per fact, each with its job (`flights_job`, ...), which likewise writes
    # and checks, and reaches Definitions through its sensor.
    landing_sensors = [
        landing_sensor(
            assets=fact,
            directory=landing,
            pattern=f"{fact.key.path[-1]}_*.parquet",
            partition_key=DAY_IN_NAME,
            checks=checks_of(fact),
            minimum_interval_seconds=sensor_interval,
        )
        for fact in FACTS
    ]
    # Dagster's own column-schema and freshness checks are unpartitioned: they run with
    # the publish (and the freshness sensor), not in a partitioned run.
    publish_job = define_asset_job(
        "publish_job",
        AssetSelection.assets(*DATASOURCES)
        | AssetSelection.checks(*SCHEMA_CHECKS, *FRESHNESS_CHECKS),
    )
    # The published copy's lag, checked between publishes (right after one it is 0), and
    # Tableau's copy against the file (also checked by each publish, which runs its check).
    checks = build_checks(DATASOURCES)
    publish_lag_job = define_asset_job(
        "publish_lag_job", AssetSelection.checks_for_assets(*DATASOURCES)
    )

    @run_status_sensor(
        run_status=DagsterRunStatus.SUCCESS,
        monitored_jobs=[facts_job, *(s.job for s in landing_sensors)],
        request_job=publish_job,
        minimum_interval_seconds=sensor_interval,
    )
    def after_facts(context: RunStatusSensorContext) -> RunRequest:
        """A fact run succeeded (its checks included): send the change to Tableau."""
        return RunRequest(run_key=f"publish:{context.dagster_run.run_id}")

    return Definitions(
        assets=[
            airlines,
            airports,
            planes,
            flights,
            weather,
            *DATASOURCES,
        ],
        asset_checks=checks,
        # One process per run: Spark starts once for an asset and its checks, and local
        # Spark parallelises inside the step anyway.
        executor=in_process_executor,
        jobs=[
            dimensions_job,
            facts_job,
            publish_job,
            publish_lag_job,
        ],
        schedules=[
            build_schedule_from_partitioned_job(facts_job, hour_of_day=6),
            ScheduleDefinition(job=publish_lag_job, cron_schedule=lag_cron),
        ],
        sensors=[
            *landing_sensors,
            after_facts,
            build_sensor_for_freshness_checks(freshness_checks=FRESHNESS_CHECKS),
            *(quality_warning_sensor(d, checks) for d in DATASOURCES),
        ],
        resources={
            "io_manager": HyperIOManager(database=database),
            "pyspark": DemoSpark(
                spark_config=spark_config(spark_master),
                log=str(Path(database).parent / "spark.log"),
            ),
            "landing": Landing(directory=landing),
            "tableau": tableau or local_emulator(),
        },
    )


EMULATOR_URL = "http://127.0.0.1:8765"
EMULATOR_TOKEN = "demo"
EMULATOR_SITE = "flights"  # a site with a content URL, as every Tableau Cloud site has


def local_emulator(url: str = EMULATOR_URL) -> TableauServerResource:
    """The local Tableau emulator `make demo` starts; the secret comes from the environment."""
    return TableauServerResource(
        server_url=url,
        site=EMULATOR_SITE,
        sign_in=TokenSignIn(name=EMULATOR_TOKEN, secret=EnvVar("TABLEAU_TOKEN_SECRET")),
    )
