"""Every Spark atomic type through a .hyper file and back, with NULLs and extremes; the
Arrow and pandas type tables (Python frames through the IO manager: test_frames.py)."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pytest
from dagster import AssetIn, asset, materialize
from helpers import ROWS_SQL, as_text, query
from pyspark.sql import DataFrame, types as T
from tableauhyperapi import SqlType

from hyper_assets import HyperIOManager, HyperResource, UnsupportedTypeError
from hyper_assets._engine.types import columns_from_arrow, columns_from_spark
from hyper_assets._rows.frames import pandas_dtype


def test_every_type_round_trips_with_wall_clock_timestamps(spark, hyper, tmp_path: Path):
    from pyspark.sql import functions as F

    source = (
        spark.sql(ROWS_SQL)
        .withColumn("row", F.monotonically_increasing_id())
        .withColumn("nothing", F.lit(None))
        .withColumn("vc", F.col("vc").cast("varchar(5)"))
        .withColumn("ch", F.col("vc").cast("char(3)"))
        .coalesce(1)
    )
    seen = {}

    @asset
    def typed() -> DataFrame:
        return source

    @asset(ins={"typed": AssetIn()})
    def back(typed: DataFrame) -> None:
        seen["schema"] = typed.schema
        seen["rows"] = as_text(typed)

    database = tmp_path / "types.hyper"
    io = HyperIOManager(
        database=str(database),
        hyper=HyperResource(default_database_version=3, log_dir=str(tmp_path)),
    )
    assert materialize([typed, back], resources={"io_manager": io}).success

    expected = as_text(source.drop("nothing", "vc", "ch"))
    assert seen["rows"] == expected
    by_name = {f.name: f.dataType.simpleString() for f in seen["schema"].fields}
    for field in source.schema.fields:
        if field.name not in ("vc", "ch", "nothing"):
            assert by_name[field.name] == field.dataType.simpleString(), field.name

    # Hyper holds the wall clock the user saw in Spark (session time zone: New York).
    shown = source.orderBy("row").select(F.date_format("ts", "yyyy-MM-dd HH:mm:ss")).collect()
    stored = query(hyper, database, 'SELECT CAST(ts AS TEXT) FROM "Extract".typed ORDER BY "row"')
    assert [s[0] for s in stored] == [r[0] for r in shown]
    assert shown[1][0] == "2024-03-10 03:30:00"
    assert query(
        hyper, database, 'SELECT CAST(ts_ntz AS TEXT) FROM "Extract".typed ORDER BY "row"'
    )[1] == ["9999-12-31 23:59:59.999999"]


def test_spark_mapping_table():
    schema = T.StructType(
        [
            T.StructField("b", T.ByteType()),
            T.StructField("l", T.LongType(), nullable=False),
            T.StructField("f", T.FloatType()),
            T.StructField("ts", T.TimestampType()),
            T.StructField("ntz", T.TimestampNTZType()),
            T.StructField("dec", T.DecimalType(18, 3)),
        ]
    )
    cols = columns_from_spark(schema, "Extract.t", version=2)
    assert [(c.name, c.sql, c.nullable, c.spark_type) for c in cols] == [
        ("b", "SMALLINT", True, "tinyint"),
        ("l", "BIGINT", False, None),
        ("f", "DOUBLE PRECISION", True, "float"),
        ("ts", "TIMESTAMP", True, "timestamp"),
        ("ntz", "TIMESTAMP", True, None),
        ("dec", "NUMERIC(18, 3)", True, None),
    ]
    assert (
        columns_from_spark(T.StructType([T.StructField("f", T.FloatType())]), "t", version=4)[
            0
        ].sql_type
        == SqlType.float()
    )


@pytest.mark.parametrize(
    ("data_type", "fix"),
    [
        (T.ArrayType(T.IntegerType()), "Explode"),
        (T.MapType(T.StringType(), T.IntegerType()), "to_json"),
        (T.StructType([T.StructField("a", T.IntegerType())]), "separate columns"),
        (T.DecimalType(38, 2), "max_database_version=2"),
        # Types Hyper has no column for, with no fix of their own, where the Spark line
        # has them (both are new in 4.0).
        *[
            (getattr(T, name)(), "Cast it")
            for name in ("VariantType", "CalendarIntervalType")
            if hasattr(T, name)
        ],
    ],
)
def test_unsupported_spark_types_name_column_type_and_fix(data_type, fix):
    schema = T.StructType([T.StructField("bad col", data_type)])
    with pytest.raises(UnsupportedTypeError) as info:
        columns_from_spark(schema, "Extract.facts", version=2, cap=2)
    message = str(info.value)
    assert "'bad col'" in message and "Extract.facts" in message
    assert data_type.simpleString() in message and fix in message


def test_arrow_mapping_table():
    schema = pa.schema(
        [
            ("i", pa.int32()),
            ("ts", pa.timestamp("us")),
            ("tz", pa.timestamp("us", tz="Europe/Berlin")),
            ("s", pa.large_string()),
            ("d", pa.dictionary(pa.int8(), pa.string())),
            ("polars_categorical", pa.dictionary(pa.uint32(), pa.string_view())),
            ("polars_binary", pa.binary_view()),
            ("d_int", pa.dictionary(pa.int32(), pa.int64())),
            ("t_ns", pa.time64("ns")),
        ]
    )
    cols = columns_from_arrow(schema, "t", version=2)
    assert [c.sql for c in cols] == [
        "INTEGER", "TIMESTAMP", "TIMESTAMPTZ", "TEXT", "TEXT", "TEXT", "BYTEA", "BIGINT", "TIME"
    ]  # fmt: skip


@pytest.mark.parametrize(
    ("arrow_type", "nearest"),
    [
        (pa.float16(), "float32"),
        (pa.uint64(), "int64 (values below 2**63) or decimal128(20, 0)"),
        (pa.decimal256(40, 2), "decimal128(38, 2) or float64"),
        (pa.binary(4), "binary"),
        (pa.duration("ms"), "int64 (its microseconds"),
        (pa.month_day_nano_interval(), "a string, or int64 columns of its months"),
        (pa.struct([("a", pa.int8())]), "separate columns (one per field)"),
        (pa.list_(pa.int8()), "rows (explode it), or a string of JSON"),
        (pa.large_list(pa.string()), "rows (explode it)"),
        (pa.map_(pa.string(), pa.int8()), "rows (explode it)"),
        (pa.dictionary(pa.int8(), pa.float16()), "float32"),
    ],
)
def test_an_unsupported_arrow_type_names_column_and_the_nearest_type_that_works(
    arrow_type, nearest
):
    with pytest.raises(UnsupportedTypeError) as info:
        columns_from_arrow(pa.schema([("bad col", arrow_type)]), "Extract.facts", version=2)
    message = str(info.value)
    assert message.startswith("Column 'bad col' of Extract.facts has type ")
    assert f"Cast it first, to {nearest}" in message


@pytest.mark.parametrize(
    ("arrow_type", "numpy_nullable"),
    [
        (pa.bool_(), "boolean"),
        (pa.int16(), "Int16"),
        (pa.int64(), "Int64"),
        (pa.float32(), "Float32"),
        (pa.large_string(), "string"),
        (pa.timestamp("us"), None),  # to_pandas' datetime64[us]: NaT is its NULL
        (pa.timestamp("us", "UTC"), None),
        (pa.date32(), "date32[day][pyarrow]"),
        (pa.time64("us"), "time64[us][pyarrow]"),
        (pa.decimal128(38, 10), "decimal128(38, 10)[pyarrow]"),
        (pa.large_binary(), "large_binary[pyarrow]"),
    ],
)
def test_pandas_dtypes_of_each_backend(arrow_type, numpy_nullable):
    import pandas as pd

    assert pandas_dtype(arrow_type, "pyarrow") == pd.ArrowDtype(arrow_type)
    dtype = pandas_dtype(arrow_type, "numpy_nullable")
    assert (None if dtype is None else str(dtype)) == numpy_nullable


def test_an_arrow_null_column_is_refused_before_anything_is_written(tmp_path: Path):
    rows = {"id": pa.array([1, 2], pa.int64())}

    @asset
    def nulls() -> pa.Table:
        return pa.table({**rows, "nothing": pa.nulls(2)})

    database = tmp_path / "nulls.hyper"
    io = HyperIOManager(database=str(database))
    with pytest.raises(UnsupportedTypeError, match=r"'nothing' of Extract.nulls has type null"):
        materialize([nulls], resources={"io_manager": io})
    assert not database.exists()
