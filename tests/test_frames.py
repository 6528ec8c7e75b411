"""Python frames through HyperIOManager: pandas, polars, pyarrow and DuckDB results out,
loaded back as the input's annotation asks; no Spark anywhere. The stored file is read back."""

from __future__ import annotations

import datetime as dt
import os
import subprocess
import sys
import textwrap
from decimal import Decimal

import pandas as pd
import polars as pl
import pyarrow as pa
import pytest
from dagster import AssetIn, DailyPartitionsDefinition, asset, materialize
from helpers import io, query, table_rows
from tableauhyperapi import Connection, Date, TableName, Timestamp

from hyper_assets import ConfigurationError, DataError, HyperIOManager
from hyper_assets._engine.types import sql_name
from hyper_assets._rows.frames import BATCH_ROWS, is_spark_annotation

DAYS = DailyPartitionsDefinition(start_date="2024-01-01", end_date="2024-01-10")

#: The rows every round trip stores and reads back, as Python values.
ROWS = [
    (1, "ä", 1.5, dt.date(2024, 1, 1)),
    (2, None, -2.25, dt.date(2024, 1, 2)),
    (3, "c", None, None),
]
NAMES = ["id", "name", "amount", "day"]


def arrow_rows() -> pa.Table:
    return pa.table([pa.array(column) for column in zip(*ROWS, strict=True)], names=NAMES)


def duckdb_rows():
    duckdb = pytest.importorskip("duckdb", reason="duckdb is not installed")
    connection = duckdb.connect()
    connection.register("source", arrow_rows())
    return connection.sql("SELECT * FROM source ORDER BY id")


#: Each frame type: its rows as the frame, and the frame read back as rows.
FRAMES = {
    "pyarrow": (arrow_rows, pa.Table, lambda t: [tuple(r.values()) for r in t.to_pylist()]),
    "pandas": (
        lambda: arrow_rows().to_pandas(),
        pd.DataFrame,
        lambda f: [tuple(None if pd.isna(v) else v for v in r) for r in f.itertuples(index=False)],
    ),
    "polars": (lambda: pl.from_arrow(arrow_rows()), pl.DataFrame, lambda f: f.rows()),
    "duckdb": (duckdb_rows, pa.Table, lambda t: [tuple(r.values()) for r in t.to_pylist()]),
}


@pytest.mark.parametrize("kind", FRAMES)
def test_a_python_frame_round_trips(hyper, tmp_path, kind):
    make, annotation, as_rows = FRAMES[kind]
    seen = {}

    @asset
    def frame():
        return make()

    def read(frame) -> None:
        assert isinstance(frame, annotation)
        seen["rows"] = sorted(as_rows(frame), key=lambda r: r[0])

    read.__annotations__["frame"] = annotation  # the type itself, not its name as a string
    reader = asset(name="reader")(read)

    database = tmp_path / "frames.hyper"
    assert materialize([frame, reader], resources={"io_manager": io(database)}).success
    sql = 'SELECT id, name, amount, CAST(day AS TEXT) FROM "Extract".frame ORDER BY id'
    stored = query(hyper, database, sql)
    assert [tuple(r) for r in stored] == [(i, n, a, d and d.isoformat()) for i, n, a, d in ROWS]
    assert seen["rows"] == ROWS


def test_a_partition_and_columns_load_as_polars_and_pandas(hyper, tmp_path):
    seen = {}

    @asset(partitions_def=DAYS, metadata={"partition_expr": "day"})
    def events(context) -> pd.DataFrame:
        day = context.partition_time_window.start.date()
        return pd.DataFrame(
            {"day": [day] * 3, "id": [1, 2, 3], "v": [f"{day}-{i}" for i in range(3)]}
        )

    wanted = AssetIn(key="events", metadata={"columns": ["v", "id"]})

    @asset(partitions_def=DAYS, ins={"events": wanted})
    def as_polars(events: pl.DataFrame) -> None:
        seen["polars"] = events.rows()

    @asset(partitions_def=DAYS, ins={"events": wanted})
    def as_pandas(events: pd.DataFrame) -> None:
        seen["pandas"] = list(events.itertuples(index=False, name=None))

    database = tmp_path / "frames.hyper"
    for day in ("2024-01-02", "2024-01-03"):
        materialize([events], resources={"io_manager": io(database)}, partition_key=day)
    result = materialize(
        [events, as_polars, as_pandas],
        resources={"io_manager": io(database)},
        partition_key="2024-01-03",
        selection=[as_polars, as_pandas],
    )
    assert result.success
    expected = [(f"2024-01-03-{i}", i + 1) for i in range(3)]
    assert sorted(seen["polars"]) == sorted(seen["pandas"]) == expected
    assert query(hyper, database, 'SELECT COUNT(*) FROM "Extract".events') == [[6]]


def test_a_partition_without_rows_loads_as_empty_frames(tmp_path):
    """Hyper exports no row group at all for no rows: each type still gets the columns."""
    seen = {}

    @asset(partitions_def=DAYS, metadata={"partition_expr": "day"})
    def events(context) -> pa.Table:
        return pa.table({"day": [dt.date(2024, 1, 2)], "id": [1]}).filter(
            pa.array([context.partition_key == "2024-01-02"])
        )

    @asset(partitions_def=DAYS)
    def loaded(events: pa.Table) -> None:
        seen["arrow"] = (events.num_rows, events.column_names)

    @asset(partitions_def=DAYS)
    def as_pandas(events: pd.DataFrame) -> None:
        seen["pandas"] = (len(events), list(events.columns))

    @asset(partitions_def=DAYS)
    def batches(events: pa.RecordBatchReader) -> None:
        seen["batches"] = (sum(b.num_rows for b in events), events.schema.names)

    resources = {"io_manager": io(tmp_path / "frames.hyper")}
    materialize([events], resources=resources, partition_key="2024-01-02")
    materialize([events], resources=resources, partition_key="2024-01-03")
    assets = [events, loaded, as_pandas, batches]
    selection = [loaded, as_pandas, batches]
    assert materialize(assets, resources=resources, partition_key="2024-01-03", selection=selection)
    assert seen == {k: (0, ["day", "id"]) for k in ("arrow", "pandas", "batches")}


def test_a_pandas_index_is_stored_only_when_named(hyper, tmp_path):
    """A sorted frame's unnamed index is row order, not a column; a named one is data."""

    @asset
    def sorted_rows() -> pd.DataFrame:
        return pd.DataFrame({"id": [1, 2, 3], "v": ["c", "a", "b"]}).sort_values("v")

    @asset
    def totals() -> pd.DataFrame:
        return pd.DataFrame({"k": ["a", "b", "a"], "v": [1, 2, 3]}).groupby("k").sum()

    database = tmp_path / "frames.hyper"
    assert materialize([sorted_rows, totals], resources={"io_manager": io(database)}).success
    stored = table_rows(hyper, database, '"Extract".sorted_rows', order="v")
    assert stored == [(2, "a"), (3, "b"), (1, "c")]  # every column: no index column
    assert table_rows(hyper, database, '"Extract".totals', order="k") == [(4, "a"), (2, "b")]


def test_streams_are_written_and_read_a_batch_at_a_time(hyper, tmp_path):
    """An output that is a one-pass stream is stored whole; an input read as a
    RecordBatchReader arrives in batches of at most BATCH_ROWS rows."""
    total = 2 * BATCH_ROWS + 10
    schema = pa.schema([("id", pa.int64())])
    seen = {}

    @asset
    def numbers() -> pa.RecordBatchReader:
        chunks = (
            pa.record_batch([pa.array(range(s, min(s + 50_000, total)), pa.int64())], schema=schema)
            for s in range(0, total, 50_000)
        )
        return pa.RecordBatchReader.from_batches(schema, chunks)

    @asset
    def reader(numbers: pa.RecordBatchReader) -> None:
        seen["sizes"] = [batch.num_rows for batch in numbers]

    database = tmp_path / "frames.hyper"
    assert materialize([numbers, reader], resources={"io_manager": io(database)}).success
    assert query(hyper, database, 'SELECT COUNT(*), SUM(id) FROM "Extract".numbers') == [
        [total, total * (total - 1) // 2]
    ]
    assert sum(seen["sizes"]) == total
    assert len(seen["sizes"]) > 1 and max(seen["sizes"]) <= BATCH_ROWS


@pytest.mark.spark  # asks pyspark whether a JVM started; test_without_spark.py has none
def test_python_assets_start_no_jvm(tmp_path):
    """A pandas/Arrow pipeline runs in a process that never starts Spark's JVM."""
    script = textwrap.dedent(
        f"""
        import pandas as pd, polars as pl, psutil, pyarrow as pa
        from dagster import asset, materialize
        from pyspark import SparkContext
        from hyper_assets import HyperIOManager, HyperResource

        @asset
        def up() -> pd.DataFrame:
            return pd.DataFrame({{"x": [1, 2]}})

        @asset
        def down(up: pd.DataFrame) -> pl.DataFrame:
            return pl.from_pandas(up).with_columns(y=pl.col("x") * 2)

        @asset
        def arrow(down: pl.DataFrame) -> pa.Table:
            return down.to_arrow()

        @asset
        def last(arrow: pa.Table) -> None:
            assert arrow.to_pylist() == [{{"x": 1, "y": 2}}, {{"x": 2, "y": 4}}]

        io = HyperIOManager(database={str(tmp_path / "f.hyper")!r},
                            hyper=HyperResource(log_dir={str(tmp_path / "logs")!r}))
        assets = [up, down, arrow, last]
        assert materialize(assets, resources={{"io_manager": io}}).success
        names = [p.name() for p in psutil.Process().children(recursive=True)]
        assert SparkContext._active_spark_context is None, names
        assert not [n for n in names if "java" in n], names
        print("no jvm")
        """
    )
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, env=os.environ.copy()
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert "no jvm" in done.stdout


#: What each Hyper type loads back as, in a pyarrow input, a pandas input with
#: dtype_backend "numpy_nullable" (with "pyarrow" it is pd.ArrowDtype of the pyarrow
#: type) and a polars input: docs/types.md's table.
LOADS_AS = {
    "BOOLEAN": (pa.bool_(), "boolean", pl.Boolean),
    "SMALLINT": (pa.int16(), "Int16", pl.Int16),
    "INTEGER": (pa.int32(), "Int32", pl.Int32),
    "BIGINT": (pa.int64(), "Int64", pl.Int64),
    "REAL": (pa.float32(), "Float32", pl.Float32),
    "DOUBLE PRECISION": (pa.float64(), "Float64", pl.Float64),
    "NUMERIC(38, 10)": (pa.decimal128(38, 10), "decimal128(38, 10)[pyarrow]", pl.Decimal(38, 10)),
    "NUMERIC(9, 2)": (pa.decimal128(9, 2), "decimal128(9, 2)[pyarrow]", pl.Decimal(9, 2)),
    "TEXT": (pa.large_string(), "string", pl.String),
    "BYTEA": (pa.large_binary(), "large_binary[pyarrow]", pl.Binary),
    "DATE": (pa.date32(), "date32[day][pyarrow]", pl.Date),
    "TIME": (pa.time64("us"), "time64[us][pyarrow]", pl.Time),
    "TIMESTAMP": (pa.timestamp("us"), "datetime64[us]", pl.Datetime("us")),
    "TIMESTAMPTZ": (pa.timestamp("us", "UTC"), "datetime64[us, UTC]", pl.Datetime("us", "UTC")),
}

_NOON = dt.datetime(2024, 3, 10, 12, 0, 0, 1)
_UTC = dt.UTC

#: Every Arrow type the docs map, a NULL in the middle row of each: its values and the
#: Hyper column it is stored as (file version 4: float32 is REAL).
MATRIX = {
    "bool": (pa.array([True, None, False]), "BOOLEAN"),
    "int8": (pa.array([-128, None, 127], pa.int8()), "SMALLINT"),
    "uint8": (pa.array([0, None, 255], pa.uint8()), "SMALLINT"),
    "int16": (pa.array([-(2**15), None, 2**15 - 1], pa.int16()), "SMALLINT"),
    "uint16": (pa.array([0, None, 2**16 - 1], pa.uint16()), "INTEGER"),
    "int32": (pa.array([-(2**31), None, 2**31 - 1], pa.int32()), "INTEGER"),
    "uint32": (pa.array([0, None, 2**32 - 1], pa.uint32()), "BIGINT"),
    "int64": (pa.array([2**53 + 1, None, -(2**63)], pa.int64()), "BIGINT"),
    "float32": (pa.array([1.5, None, float("inf")], pa.float32()), "REAL"),
    "float64": (pa.array([5e-324, None, -1.7976931348623157e308]), "DOUBLE PRECISION"),
    "decimal": (
        pa.array(
            [Decimal("1234567890.123456789"), None, Decimal("-0.0000000001")], pa.decimal128(38, 10)
        ),
        "NUMERIC(38, 10)",
    ),
    "decimal256": (
        pa.array([Decimal("1.25"), None, Decimal("-9999999.99")], pa.decimal256(9, 2)),
        "NUMERIC(9, 2)",
    ),
    "string": (pa.array(["ä", None, ""]), "TEXT"),
    "large_string": (pa.array(["a", None, "b"], pa.large_string()), "TEXT"),
    "string_view": (pa.array(["longer_than_prefix_size", None, ""], pa.string_view()), "TEXT"),
    "dictionary": (pa.array(["x", None, "x"]).dictionary_encode(), "TEXT"),
    "categorical": (  # polars' Categorical
        pa.DictionaryArray.from_arrays(
            pa.array([1, None, 0], pa.uint32()), pa.array(["a", "b"], pa.string_view())
        ),
        "TEXT",
    ),
    "dictionary_int": (pa.array([7, None, 7]).dictionary_encode(), "BIGINT"),
    "binary": (pa.array([b"\x00\xff", None, b""]), "BYTEA"),
    "large_binary": (pa.array([b"\xde\xad", None, b"x"], pa.large_binary()), "BYTEA"),
    "binary_view": (
        pa.array([b"longer_than_prefix_size", None, b"\x00"], pa.binary_view()),
        "BYTEA",
    ),
    "date32": (pa.array([dt.date(1, 1, 1), None, dt.date(9999, 12, 31)]), "DATE"),
    "date64": (pa.array([dt.date(1970, 1, 1), None, dt.date(2262, 4, 12)], pa.date64()), "DATE"),
    "time32s": (pa.array([dt.time(0, 0), None, dt.time(23, 59, 59)], pa.time32("s")), "TIME"),
    "time32ms": (pa.array([dt.time(0, 0, 0, 1000), None, dt.time(12)], pa.time32("ms")), "TIME"),
    "time64us": (pa.array([dt.time(23, 59, 59, 999999), None, dt.time(0)]), "TIME"),
    "time64ns": (pa.array([dt.time(1, 2, 3, 4), None, dt.time(0)], pa.time64("ns")), "TIME"),
    "timestamp": (
        pa.array([dt.datetime(1, 1, 1), None, dt.datetime(9999, 12, 31, 23, 59, 59, 999999)]),
        "TIMESTAMP",
    ),
    "timestamp_ns": (
        pa.array([_NOON, None, dt.datetime(1970, 1, 1)], pa.timestamp("ns")),
        "TIMESTAMP",
    ),
    "timestamp_tz": (
        pa.array(
            [_NOON.replace(tzinfo=_UTC), None, dt.datetime(1, 1, 2, tzinfo=_UTC)],
            pa.timestamp("us", "Europe/Berlin"),
        ),
        "TIMESTAMPTZ",
    ),
}


def _stored(hyper, database, table: str) -> tuple[dict[str, str], list[list]]:
    """The stored table's column types (SQL names) and rows (Python values), by `row`."""
    with Connection(hyper.endpoint, str(database)) as connection:
        definition = connection.catalog.get_table_definition(TableName("Extract", table))
        types = {c.name.unescaped: sql_name(c.type) for c in definition.columns}
        rows = connection.execute_list_query(f'SELECT * FROM "Extract"."{table}" ORDER BY "row"')
    as_python = [
        [
            v.to_datetime()
            if isinstance(v, Timestamp)
            else v.to_date()
            if isinstance(v, Date)
            else v
            for v in row
        ]
        for row in rows
    ]
    return types, as_python


def test_every_arrow_type_is_stored_and_loads_back_into_every_frame_type(hyper, tmp_path):
    """The matrix's values are stored as their Hyper type and load back, every value and
    NULL as it went in, with the types of LOADS_AS: pyarrow, pandas in both dtype
    backends, polars."""
    source = pa.table({"row": pa.array([0, 1, 2]), **{k: a for k, (a, _) in MATRIX.items()}})
    values = {k: a.to_pylist() for k, (a, _) in MATRIX.items()}
    seen = {}

    @asset
    def typed() -> pa.Table:
        return source

    @asset
    def as_arrow(typed: pa.Table) -> None:
        seen["pyarrow"] = typed.sort_by("row")

    @asset
    def as_pandas(typed: pd.DataFrame) -> None:
        seen["pandas"] = typed.sort_values("row", ignore_index=True)

    @asset(ins={"typed": AssetIn(metadata={"dtype_backend": "numpy_nullable"})})
    def as_nullable(typed: pd.DataFrame) -> None:
        seen["numpy_nullable"] = typed.sort_values("row", ignore_index=True)

    @asset
    def as_polars(typed: pl.DataFrame) -> None:
        seen["polars"] = typed.sort("row")

    database = tmp_path / "matrix.hyper"
    assets = [typed, as_arrow, as_pandas, as_nullable, as_polars]
    resources = {"io_manager": io(database, default_database_version=4)}
    assert materialize(assets, resources=resources).success

    types, rows = _stored(hyper, database, "typed")
    assert types == {"row": "BIGINT", **{k: sql for k, (_, sql) in MATRIX.items()}}
    names = list(types)
    for name, expected in values.items():
        assert [r[names.index(name)] for r in rows] == expected, name

    arrow, pandas, nullable, polars = (
        seen[k] for k in ("pyarrow", "pandas", "numpy_nullable", "polars")
    )
    for name, (_, sql) in MATRIX.items():
        arrow_type, nullable_dtype, polars_dtype = LOADS_AS[sql]
        assert arrow.schema.field(name).type == arrow_type, name
        assert arrow[name].to_pylist() == values[name], name
        assert pandas[name].dtype == pd.ArrowDtype(arrow_type), name
        assert pa.array(pandas[name]).to_pylist() == values[name], name
        assert str(nullable[name].dtype) == nullable_dtype, name
        assert pa.array(nullable[name]).cast(arrow_type).to_pylist() == values[name], name
        assert polars.schema[name] == polars_dtype, name
        assert polars[name].to_list() == values[name], name


def test_polars_and_pandas_types_load_back_as_they_went_in(hyper, tmp_path):
    """polars' Categorical, Enum and Binary (dictionaries of views, binary_view) and
    pandas' nullable and Arrow-backed columns are stored as their Hyper types, and load
    back as their frame's: integers with NULLs stay integers, dates, times, decimals,
    booleans with NULLs and bytes keep their types (categories load as text)."""
    polars_source = pl.DataFrame(
        {
            "row": [0, 1, 2],
            "categorical": pl.Series(["a", None, "b"], dtype=pl.Categorical),
            "enum": pl.Series(["x", None, "y"], dtype=pl.Enum(["x", "y"])),
            "binary": [b"\x00", None, b"longer_than_prefix_size"],
            "int64": pl.Series([9007199254740993, None, 1], dtype=pl.Int64),
            "time": [dt.time(1, 2, 3, 4), None, dt.time(0)],
            "decimal": pl.Series(
                [Decimal("1.50"), None, Decimal("-2.25")], dtype=pl.Decimal(10, 2)
            ),
            "bool": [True, None, False],
        }
    )
    arrow_dtype = pd.ArrowDtype
    pandas_source = pd.DataFrame(
        {
            "row": [0, 1, 2],
            "Int64": pd.array([9007199254740993, None, 1], dtype="Int64"),
            "boolean": pd.array([True, None, False], dtype="boolean"),
            "Float64": pd.array([1.5, None, 2.0], dtype="Float64"),
            "string": pd.array(["ä", None, ""], dtype="string"),
            "category": pd.Series(["a", None, "a"], dtype="category"),
            "date": pd.Series(
                [dt.date(2024, 1, 1), None, dt.date(1, 1, 1)], dtype="date32[pyarrow]"
            ),
            "time": pd.Series(
                [dt.time(23, 59), None, dt.time(0)], dtype=arrow_dtype(pa.time64("us"))
            ),
            "decimal": pd.Series(
                [Decimal("1.5"), None, Decimal(0)], dtype=arrow_dtype(pa.decimal128(5, 1))
            ),
            "binary": pd.Series([b"\xde\xad", None, b""], dtype=arrow_dtype(pa.binary())),
            "datetime": pd.Series([_NOON, None, dt.datetime(2262, 1, 1)], dtype="datetime64[ns]"),
        }
    )
    seen = {}

    @asset
    def from_polars() -> pl.DataFrame:
        return polars_source

    @asset
    def from_pandas() -> pd.DataFrame:
        return pandas_source

    @asset
    def polars_back(from_polars: pl.DataFrame) -> None:
        seen["polars"] = from_polars.sort("row")

    @asset
    def nullable_back(from_pandas: pd.DataFrame) -> None:  # the IO manager's numpy_nullable
        seen["numpy_nullable"] = from_pandas.sort_values("row", ignore_index=True)

    @asset(ins={"from_pandas": AssetIn(metadata={"dtype_backend": "pyarrow"})})
    def arrow_back(from_pandas: pd.DataFrame) -> None:
        seen["pyarrow"] = from_pandas.sort_values("row", ignore_index=True)

    database = tmp_path / "frames.hyper"
    io_manager = HyperIOManager(
        database=str(database),
        staging_dir=str(tmp_path / "staging"),
        dtype_backend="numpy_nullable",
    )
    assets = [from_polars, from_pandas, polars_back, nullable_back, arrow_back]
    assert materialize(assets, resources={"io_manager": io_manager}).success

    types, rows = _stored(hyper, database, "from_polars")
    assert list(types.values())[1:] == [
        "TEXT",
        "TEXT",
        "BYTEA",
        "BIGINT",
        "TIME",
        "NUMERIC(10, 2)",
        "BOOLEAN",
    ]
    assert rows == [list(r) for r in polars_source.rows()]
    assert seen["polars"].dtypes == [
        pl.Int64,
        pl.String,
        pl.String,
        pl.Binary,
        pl.Int64,
        pl.Time,
        pl.Decimal(10, 2),
        pl.Boolean,
    ]
    assert seen["polars"].rows() == polars_source.rows()

    types, rows = _stored(hyper, database, "from_pandas")
    assert list(types.values())[1:] == [
        "BIGINT",
        "BOOLEAN",
        "DOUBLE PRECISION",
        "TEXT",
        "TEXT",
        "DATE",
        "TIME",
        "NUMERIC(5, 1)",
        "BYTEA",
        "TIMESTAMP",
    ]
    assert rows == [list(r.values()) for r in pa.Table.from_pandas(pandas_source).to_pylist()]
    nullable, arrow = seen["numpy_nullable"], seen["pyarrow"]
    assert [str(t) for t in nullable.dtypes] == [
        "Int64",
        "Int64",
        "boolean",
        "Float64",
        "string",
        "string",
        "date32[day][pyarrow]",
        "time64[us][pyarrow]",
        "decimal128(5, 1)[pyarrow]",
        "large_binary[pyarrow]",
        "datetime64[us]",
    ]
    assert all(isinstance(t, pd.ArrowDtype) for t in arrow.dtypes)
    for name in pandas_source:
        expected = pa.array(pandas_source[name]).to_pylist()
        assert pa.array(nullable[name]).to_pylist() == expected, name
        assert pa.array(arrow[name]).to_pylist() == expected, name
    assert nullable["Int64"][0] == 9007199254740993


def test_a_dtype_backend_not_pandas_offers_is_refused_naming_the_setting(tmp_path):
    database = str(tmp_path / "frames.hyper")
    with pytest.raises(ConfigurationError, match=r"dtype_backend=\.\.\.\) is 'numpy'; use 'pya"):
        HyperIOManager(database=database, dtype_backend="numpy")

    @asset
    def events() -> pa.Table:
        return arrow_rows()

    @asset(ins={"events": AssetIn(metadata={"dtype_backend": "arrow"})})
    def wrong(events: pd.DataFrame) -> None: ...

    @asset(ins={"events": AssetIn(metadata={"dtype_backend": "pyarrow"})})
    def ignored(events: pl.DataFrame) -> None: ...

    resources = {"io_manager": HyperIOManager(database=database)}
    assert materialize([events], resources=resources).success
    named = r"Input metadata dtype_backend of input 'events' of 'wrong' \(loading Extract.events\)"
    with pytest.raises(ConfigurationError, match=named + r" is 'arrow'; use 'pyarrow' or 'numpy_"):
        materialize([events, wrong], resources=resources, selection=[wrong])
    with pytest.raises(ConfigurationError, match=r"'ignored'.*not annotated pandas.DataFrame"):
        materialize([events, ignored], resources=resources, selection=[ignored])


def test_a_time_finer_than_a_microsecond_is_refused_naming_column_and_value(tmp_path):
    """Hyper keeps microseconds: it would drop the nanoseconds silently."""

    @asset
    def ticks() -> pl.DataFrame:
        stamps = [dt.datetime(2024, 1, 1), dt.datetime(2024, 1, 2)]
        return pl.DataFrame({"at": pl.Series(stamps, dtype=pl.Datetime("ns"))}).with_columns(
            pl.col("at") + pl.duration(nanoseconds=pl.Series([0, 7]))
        )

    database = tmp_path / "ticks.hyper"
    message = r"'at' of Extract.ticks holds 2024-01-02 00:00:00.000000007, finer than the micro"
    with pytest.raises(DataError, match=message):
        materialize([ticks], resources={"io_manager": io(database)})
    assert not database.exists()


def test_nan_stays_apart_from_null_with_the_pyarrow_backend_only(tmp_path):
    """pandas' masked floats keep one missing value: numpy_nullable turns NaN into NA."""
    seen = {}

    @asset
    def floats() -> pa.Table:
        return pa.table({"row": [0, 1, 2], "x": pa.array([float("nan"), None, 1.0])})

    @asset
    def as_arrow(floats: pd.DataFrame) -> None:
        seen["pyarrow"] = floats.sort_values("row")["x"].isna().tolist()

    @asset(ins={"floats": AssetIn(metadata={"dtype_backend": "numpy_nullable"})})
    def as_nullable(floats: pd.DataFrame) -> None:
        seen["numpy_nullable"] = floats.sort_values("row")["x"].isna().tolist()

    resources = {"io_manager": io(tmp_path / "floats.hyper")}
    assert materialize([floats, as_arrow, as_nullable], resources=resources).success
    assert seen == {"pyarrow": [False, True, False], "numpy_nullable": [True, True, False]}


def _class_of(module: str) -> type:
    return type("DataFrame", (), {"__module__": module})


@pytest.mark.parametrize(
    ("annotation", "spark"),
    [
        (_class_of("pyspark.sql.dataframe"), True),
        (_class_of("pyspark.sql.connect.dataframe"), True),
        (pa.Table, False),
        (_class_of("pysparkling"), False),
        (None, False),
        ("DataFrame", False),
    ],
)
def test_an_input_is_spark_typed_by_its_class_of_a_pyspark_module(annotation, spark):
    assert is_spark_annotation(annotation) is spark
