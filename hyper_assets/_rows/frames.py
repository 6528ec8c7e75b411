"""Python frames in and out of the IO manager, without Spark.

Out: any object that exports an Arrow stream (the Arrow PyCapsule interface,
`__arrow_c_stream__`: pyarrow, pandas 2.2+, polars, DuckDB results) is read as a
`pyarrow.RecordBatchReader`, so the staging step writes it batch by batch. A pandas
frame's unnamed index (which pandas exports as a column `__index_level_0__` unless it is
a plain range) is left out: it is row order, not data; a named index is stored.

In: the table's rows, exported by Hyper to one Parquet file, become the type the input's
annotation names. pandas and polars are imported only when an annotation names them.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

#: Rows per batch when an input is read as a `pyarrow.RecordBatchReader`.
BATCH_ROWS = 65_536


def is_spark_frame(obj: object) -> bool:
    """A Spark DataFrame, classic or Connect, of whichever pyspark module is installed;
    told by its classes, so that nothing imports pyspark to ask."""
    return any(
        cls.__name__ == "DataFrame" and cls.__module__.startswith("pyspark.sql.")
        for cls in type(obj).__mro__
    )


def arrow_stream(obj: object) -> pa.RecordBatchReader | None:
    """`obj`'s rows as a stream of Arrow batches; None when it exports no Arrow stream."""
    if not hasattr(type(obj), "__arrow_c_stream__"):
        return None
    reader = pa.RecordBatchReader.from_stream(obj)
    unnamed = _unnamed_pandas_index(reader.schema)
    if not unnamed:
        return reader
    schema = pa.schema([f for f in reader.schema if f.name not in unnamed])
    return pa.RecordBatchReader.from_batches(
        schema, (batch.select(schema.names) for batch in reader)
    )


def _unnamed_pandas_index(schema: pa.Schema) -> set[str]:
    """The columns pandas exported for index levels that have no name."""
    described = json.loads((schema.metadata or {}).get(b"pandas", b"{}"))
    return {
        level
        for level in described.get("index_columns", [])
        if isinstance(level, str) and level.startswith("__index_level_")
    }


def _batches(path: Path) -> pa.RecordBatchReader:
    """The file's rows, read one row group at a time as the consumer asks for them.

    Hyper writes row groups of 200,000 rows. pyarrow's `iter_batches` is not used: its
    allocations grew with the file (77 MB at the end of 6M rows, against 11 MB here).
    """
    parquet = pq.ParquetFile(path)

    def read() -> Iterator[pa.RecordBatch]:
        with parquet:
            for group in range(parquet.num_row_groups):
                yield from parquet.read_row_group(group).to_batches(max_chunksize=BATCH_ROWS)

    return pa.RecordBatchReader.from_batches(parquet.schema_arrow, read())


def _table(path: Path) -> pa.Table:
    """The file's rows as one table, read row group by row group (`pq.read_table` peaked
    at 2.2x the table's size on 6M rows, this at 1.7x)."""
    with pq.ParquetFile(path) as parquet:
        groups = [parquet.read_row_group(g) for g in range(parquet.num_row_groups)]
        return pa.concat_tables(groups) if groups else parquet.schema_arrow.empty_table()


def _pandas(path: Path) -> object:
    # self_destruct frees each Arrow column once converted.
    return _table(path).to_pandas(self_destruct=True, split_blocks=True)


def _polars(path: Path) -> object:
    import polars

    return polars.read_parquet(path)


def _polars_lazy(path: Path) -> object:
    import polars

    return polars.scan_parquet(path)


#: Loaders by (top-level package, class name), so naming a type needs no import of it.
_LOADERS: dict[tuple[str, str], Callable[[Path], object]] = {
    ("pyarrow", "Table"): _table,
    ("pyarrow", "RecordBatchReader"): _batches,
    ("pandas", "DataFrame"): _pandas,
    ("polars", "DataFrame"): _polars,
    ("polars", "LazyFrame"): _polars_lazy,
}


def python_loader(annotation: object) -> Callable[[Path], object] | None:
    """How to load an input annotated `annotation` from the exported Parquet file; None
    for anything else (a Spark DataFrame, or no annotation)."""
    if not isinstance(annotation, type):
        return None
    package = annotation.__module__.partition(".")[0]
    return _LOADERS.get((package, annotation.__name__))
