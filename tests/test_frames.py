"""Python frames through HyperIOManager: pandas, polars, pyarrow and DuckDB results out,
loaded back as the input's annotation asks; no Spark anywhere. The stored file is read back."""

from __future__ import annotations

import datetime as dt
import os
import subprocess
import sys
import textwrap

import pandas as pd
import polars as pl
import pyarrow as pa
import pytest
from dagster import AssetIn, DailyPartitionsDefinition, asset, materialize
from helpers import io, query, table_rows

from hyper_assets._rows.frames import BATCH_ROWS

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
