"""Spark-side column casts around staging and loading.

Before staging, columns that Parquet or Hyper cannot take as they are get cast inside
Spark (lazily: nothing is collected). After loading, columns get their recorded Spark
types back.
"""

from __future__ import annotations

import sys

from pyspark.sql import Column as SparkColumn, DataFrame, SparkSession, functions as F, types as T

from hyper_assets._engine.types import Column
from hyper_assets.errors import ConfigurationError


def _col(name: str) -> SparkColumn:
    """A column reference that survives dots, spaces and backticks in the name."""
    return F.col("`" + name.replace("`", "``") + "`")


def prepare_frame(df: DataFrame) -> DataFrame:
    """Casts the columns that Parquet or Hyper cannot take as they are.

    TimestampType becomes TimestampNTZ (the wall clock of the session time zone, which is
    what a Tableau user should see); TIME and NULL-typed columns become strings;
    intervals become their microseconds or months (`Column.staged_as`), which both
    Parquet and Arrow carry.
    """
    casts = {}
    for field in df.schema.fields:
        ref = _col(field.name)
        if type(field.dataType) is T.TimestampType:
            casts[field.name] = ref.cast("timestamp_ntz")
        elif type(field.dataType).__name__ in ("TimeType", "NullType"):  # TIME: 4.1+
            casts[field.name] = ref.cast("string")
        elif isinstance(field.dataType, T.DayTimeIntervalType):
            seconds = ref.cast("interval second").cast("decimal(38, 6)")
            casts[field.name] = (seconds * F.lit(1_000_000)).cast("bigint")
        elif isinstance(field.dataType, T.YearMonthIntervalType):
            casts[field.name] = ref.cast("interval month").cast("int")
    return df.withColumns(casts) if casts else df


def restore_types(df: DataFrame, columns: list[Column]) -> DataFrame:
    """Casts loaded columns back to the Spark types recorded when they were written."""
    casts = {}
    for column in columns:
        if not column.spark_type or column.spark_type == "void":
            continue
        ref = _col(column.name)
        if column.spark_type.startswith("interval year"):
            value = F.make_ym_interval(months=ref)
        elif column.spark_type.startswith("interval"):
            seconds = (ref.cast("decimal(38, 0)") / F.lit(1_000_000)).cast("decimal(18, 6)")
            value = F.make_dt_interval(secs=seconds)
        else:
            value = ref
        casts[column.name] = value.cast(column.spark_type)
    return df.withColumns(casts) if casts else df


def active_session(table: str) -> SparkSession:
    """The step's Spark session (classic or Connect): the one a resource of the step started
    (dagster-pyspark's PySparkResource, or any that calls getOrCreate()).

    pyspark 3.5's classic `getActiveSession` does not see Connect sessions, which its
    Connect client keeps apart: that one is asked too, when it is loaded.
    """
    session = SparkSession.getActiveSession()
    connect = sys.modules.get("pyspark.sql.connect.session")
    if session is None and connect is not None:
        session = connect.SparkSession.getActiveSession()
    if session is None:
        raise ConfigurationError(
            f"Loading {table} as a Spark DataFrame needs the step's Spark session, and none "
            "is active. Give the asset a resource that starts it: dagster-pyspark's "
            "(`pyspark: PySparkResource`), or one of yours that calls "
            "SparkSession.builder...getOrCreate() (DatabricksSession.builder...getOrCreate() "
            "for Databricks Connect). Or annotate the input as a Python frame "
            "(pyarrow.Table, pandas.DataFrame, polars.DataFrame, ...)."
        )
    return session
