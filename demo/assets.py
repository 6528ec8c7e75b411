"""The star schema Tableau users get: three dimensions and two daily facts, made by Spark.

`flights` references `airports` twice, by `origin` and by `dest`; the publish gives the
"Flights" data source a copy of `airports` for each role. Real data flaws are kept:
flights whose plane is not in `planes` or whose destination is not in `airports` stay
(the orphan checks count them), and 2013-12-31 has no weather.
"""

import datetime as dt
from pathlib import Path

from dagster import (
    AssetExecutionContext,
    BackfillPolicy,
    ConfigurableResource,
    DailyPartitionsDefinition,
    Failure,
    TableColumn,
    TableSchema,
    asset,
)
from dagster_pyspark import PySparkResource
from pydantic import Field
from pyspark.sql import DataFrame, SparkSession

from demo.data import day_file, dimension_file

DAYS = DailyPartitionsDefinition(
    start_date="2013-01-01", end_date="2014-01-01", timezone="America/New_York"
)
KINDS = {"spark", "hyper"}


def described(**columns: str) -> TableSchema:
    """Column descriptions, as asset metadata `dagster/column_schema`.

    The HyperIOManager puts them into each materialisation's column schema, beside the
    stored types and key roles; the types here stay empty.
    """
    return TableSchema(
        columns=[TableColumn(name, "", description=d) for name, d in columns.items()]
    )


class Landing(ConfigurableResource):
    """The directory `python -m demo.arrive` lands files in, which the assets read."""

    directory: str = Field(default="data/landing", description="Folder of the landed files.")

    def dimension(self, spark: SparkSession, table: str) -> DataFrame:
        return spark.read.parquet(str(self._existing([dimension_file(table)])[0]))

    def days(self, spark: SparkSession, table: str, partition_keys: list[str]) -> DataFrame:
        """All the days' files in one read; a missing day fails the run instead of emptying it."""
        names = [day_file(table, dt.date.fromisoformat(key)) for key in partition_keys]
        return spark.read.parquet(*(str(p) for p in self._existing(names)))

    def _existing(self, names: list[str]) -> list[Path]:
        paths = [Path(self.directory).absolute() / name for name in names]
        missing = [p.name for p in paths if not p.is_file()]
        if missing:
            raise Failure(
                f"{len(missing)} file(s) have not landed in {Path(self.directory).absolute()}: "
                f"{missing[:5]}{' ...' if len(missing) > 5 else ''}. Land them with "
                "`python -m demo.arrive --through <last day>`."
            )
        return paths


@asset(
    group_name="dimensions",
    kinds=KINDS,
    metadata={
        "primary_key": ["carrier"],
        "dagster/column_schema": described(
            carrier="Two-letter carrier code, e.g. UA.", airline_name="The airline's name."
        ),
    },
)
def airlines(pyspark: PySparkResource, landing: Landing) -> DataFrame:
    """Airline names by carrier code; every run replaces the table."""
    return landing.dimension(pyspark.spark_session, "airlines").selectExpr(
        "carrier", "name AS airline_name"
    )


@asset(
    group_name="dimensions",
    kinds=KINDS,
    metadata={
        "primary_key": ["faa"],
        "geography_columns": ["location"],  # WKT, stored as GEOGRAPHY: Tableau maps it
        "dagster/column_schema": described(
            faa="FAA airport code, e.g. JFK.",
            location="The airport as a point Tableau can map (longitude, latitude).",
            utc_offset_hours="Offset from UTC in hours, outside daylight saving time.",
            time_zone="IANA time zone, e.g. America/New_York.",
        ),
    },
)
def airports(pyspark: PySparkResource, landing: Landing) -> DataFrame:
    """Airports by FAA code, with location and time zone."""
    return landing.dimension(pyspark.spark_session, "airports").selectExpr(
        "faa",
        "name AS airport_name",
        "lat AS latitude",
        "lon AS longitude",
        "format_string('POINT(%.6f %.6f)', lon, lat) AS location",
        "CAST(alt AS INT) AS altitude_ft",
        "CAST(tz AS INT) AS utc_offset_hours",
        "dst",
        "tzone AS time_zone",
    )


@asset(
    group_name="dimensions",
    kinds=KINDS,
    metadata={
        "primary_key": ["tailnum"],
        "dagster/column_schema": described(tailnum="Tail number, e.g. N14228."),
    },
)
def planes(pyspark: PySparkResource, landing: Landing) -> DataFrame:
    """Aircraft by tail number: maker, model, year built, seats."""
    return landing.dimension(pyspark.spark_session, "planes").selectExpr(
        "tailnum",
        "CAST(year AS INT) AS year_built",
        "type AS aircraft_type",
        "manufacturer",
        "model",
        "CAST(engines AS INT) AS engines",
        "CAST(seats AS INT) AS seats",
        "CAST(speed AS INT) AS cruise_speed_mph",
        "engine AS engine_type",
    )


FLIGHT_COLUMNS = [
    "make_date(year, month, day) AS flight_date",
    "make_timestamp_ntz(year, month, day, hour, minute, 0) AS sched_dep_at",
    "make_timestamp_ntz(year, month, day, hour, minute, 0)"
    " + make_dt_interval(0, 0, CAST(dep_delay AS INT), 0) AS dep_at",
    # the hour of `weather.observed_at` at the origin, for joining the two facts
    "make_timestamp_ntz(year, month, day, hour, 0, 0) AS sched_dep_hour",
    "carrier",
    "CAST(flight AS INT) AS flight_number",
    "concat(carrier, CAST(flight AS STRING)) AS flight_code",
    "tailnum",
    "origin",
    "dest",
    "concat(origin, '-', dest) AS route",
    "CAST(dep_delay AS INT) AS dep_delay_min",
    "CAST(arr_delay AS INT) AS arr_delay_min",
    "dep_time IS NULL AS cancelled",
    "dep_time IS NOT NULL AND arr_delay IS NULL AS diverted",
    "arr_delay >= 15 AS arrived_late",  # the DOT on-time measure; NULL if no arrival
    """CASE WHEN dep_time IS NULL THEN 'Cancelled'
        WHEN dep_delay <= 0 THEN 'On time'
        WHEN dep_delay < 15 THEN '1-14 min'
        WHEN dep_delay < 60 THEN '15-59 min'
        WHEN dep_delay < 180 THEN '1-3 h'
        ELSE '3 h or more' END AS dep_delay_bucket""",
    """CASE WHEN dep_time IS NULL THEN 5 WHEN dep_delay <= 0 THEN 0 WHEN dep_delay < 15 THEN 1
        WHEN dep_delay < 60 THEN 2 WHEN dep_delay < 180 THEN 3 ELSE 4 END
        AS dep_delay_bucket_order""",
    "CAST(air_time AS INT) AS air_time_min",
    "CAST(distance AS INT) AS distance_mi",
    "CAST(round(distance * 1.609344, 1) AS DECIMAL(7, 1)) AS distance_km",
]


@asset(
    group_name="facts",
    kinds=KINDS,
    partitions_def=DAYS,
    backfill_policy=BackfillPolicy.single_run(),
    deps=[airlines, airports, planes],
    metadata={
        "dagster/column_schema": described(
            flight_date="Local (New York) departure day; the partition.",
            sched_dep_at="Scheduled departure, local time.",
            dep_at="Actual departure, local time; NULL when cancelled.",
            sched_dep_hour="Hour of the scheduled departure: joins weather.observed_at.",
            carrier="Airline, a key of airlines.",
            tailnum="Plane, a key of planes (some are missing there).",
            origin="Departure airport (EWR, JFK, LGA), a key of airports.",
            dest="Destination airport, a key of airports (some are missing there).",
            dep_delay_min="Departure delay in minutes; negative is early.",
            arrived_late="Arrived 15 minutes late or more (the DOT on-time measure).",
            dep_delay_bucket="Departure delay band, ordered by dep_delay_bucket_order.",
        ),
        "partition_expr": "flight_date",
        "foreign_keys": {
            "carrier": "Extract.airlines.carrier",
            "tailnum": "Extract.planes.tailnum",
            "origin": "Extract.airports.faa",
            "dest": "Extract.airports.faa",
        },
    },
)
def flights(
    context: AssetExecutionContext, pyspark: PySparkResource, landing: Landing
) -> DataFrame:
    """Flights departing NYC, one partition per local departure day, with Tableau-ready fields.

    A backfill of many days is one run that reads their files in one Spark read.
    """
    rows = landing.days(pyspark.spark_session, "flights", context.partition_keys)
    return rows.selectExpr(*FLIGHT_COLUMNS)


@asset(
    group_name="facts",
    kinds=KINDS,
    partitions_def=DAYS,
    backfill_policy=BackfillPolicy.single_run(),
    deps=[airports],
    metadata={
        "dagster/column_schema": described(
            obs_date="Local (New York) day of the observation; the partition.",
            observed_at="Hour of the observation, local time.",
            origin="Airport observed, a key of airports.",
        ),
        "partition_expr": "obs_date",
        "foreign_keys": {"origin": "Extract.airports.faa"},
    },
)
def weather(
    context: AssetExecutionContext, pyspark: PySparkResource, landing: Landing
) -> DataFrame:
    """Hourly weather at the three NYC airports, one partition per local day."""
    rows = landing.days(pyspark.spark_session, "weather", context.partition_keys)
    return rows.selectExpr(
        "make_date(year, month, day) AS obs_date",
        "make_timestamp_ntz(year, month, day, hour, 0, 0) AS observed_at",
        "origin",
        "temp AS temp_f",
        "round((temp - 32) * 5 / 9, 1) AS temp_c",
        "dewp AS dewpoint_f",
        "humid AS humidity_pct",
        "CAST(wind_dir AS INT) AS wind_dir_deg",
        "wind_speed AS wind_speed_mph",
        "wind_gust AS wind_gust_mph",
        "precip AS precip_in",
        "pressure AS pressure_mb",
        "visib AS visibility_mi",
    )
