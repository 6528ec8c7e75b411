"""Python frames in and out of the IO manager, without Spark.

Out: any object that exports an Arrow stream (the Arrow PyCapsule interface,
`__arrow_c_stream__`: pyarrow, pandas 2.2+, polars, DuckDB results) is read as a
`pyarrow.RecordBatchReader`, so the staging step writes it batch by batch. A pandas
frame's unnamed index (which pandas exports as a column `__index_level_0__` unless it is
a plain range) is left out: it is row order, not data; a named index is stored.

In: the table's rows, exported by Hyper to one Parquet file, become the type the input's
annotation names, every value as it was stored (docs/types.md has the table of types).
pandas and polars are imported only when an annotation names them.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from functools import partial
from pathlib import Path
from typing import Literal, get_args

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


def loaded_type(exported: pa.DataType) -> pa.DataType:
    """The Arrow type a Python input gets for a column Hyper exported as `exported`: text
    and bytes as their large kind (what pantab, the reference for frames and Hyper,
    returns, and what polars holds), the rest as Hyper exported it."""
    if pa.types.is_string(exported):
        return pa.large_string()
    if pa.types.is_binary(exported):
        return pa.large_binary()
    return exported


def _loaded_schema(schema: pa.Schema) -> pa.Schema:
    return pa.schema([f.with_type(loaded_type(f.type)) for f in schema])


def _batches(path: Path) -> pa.RecordBatchReader:
    """The file's rows, read one row group at a time as the consumer asks for them.

    Hyper writes row groups of 200,000 rows. pyarrow's `iter_batches` is not used: its
    allocations grew with the file (77 MB at the end of 6M rows, against 11 MB here).
    """
    parquet = pq.ParquetFile(path)
    schema = _loaded_schema(parquet.schema_arrow)

    def read() -> Iterator[pa.RecordBatch]:
        with parquet:
            for group in range(parquet.num_row_groups):
                rows = parquet.read_row_group(group).cast(schema)
                yield from rows.to_batches(max_chunksize=BATCH_ROWS)

    return pa.RecordBatchReader.from_batches(schema, read())


def _table(path: Path) -> pa.Table:
    """The file's rows as one table, read row group by row group (`pq.read_table` peaked
    at 2.2x the table's size on 6M rows, this at 1.7x)."""
    with pq.ParquetFile(path) as parquet:
        schema = _loaded_schema(parquet.schema_arrow)
        groups = [parquet.read_row_group(g).cast(schema) for g in range(parquet.num_row_groups)]
        return pa.concat_tables(groups) if groups else schema.empty_table()


#: pandas' `dtype_backend` (as in `pandas.read_parquet`): how a pandas input holds its
#: columns. NumPy's own dtypes, pandas' default, are not offered: they lose integers
#: with NULLs to float64, and dates, decimals and bytes to object.
DtypeBackend = Literal["pyarrow", "numpy_nullable"]
DTYPE_BACKENDS: tuple[DtypeBackend, ...] = get_args(DtypeBackend)


def pandas_dtype(t: pa.DataType, backend: DtypeBackend) -> object:
    """The pandas dtype of a loaded Arrow column of type `t` (a `types_mapper`):
    `pd.ArrowDtype(t)` for "pyarrow"; for "numpy_nullable" pandas' masked dtypes where
    they exist (Int*, Float*, boolean, string), NumPy's datetime64 for timestamps (NaT is
    their NULL), and `pd.ArrowDtype` for the types NumPy has none for (date, time,
    decimal, bytes) rather than object."""
    import pandas as pd

    if backend == "numpy_nullable" and pa.types.is_timestamp(t):
        return None  # to_pandas' own: datetime64[us], with the time zone of TIMESTAMPTZ
    masked = {
        pa.bool_(): pd.BooleanDtype(),
        pa.int16(): pd.Int16Dtype(),
        pa.int32(): pd.Int32Dtype(),
        pa.int64(): pd.Int64Dtype(),
        pa.float32(): pd.Float32Dtype(),
        pa.float64(): pd.Float64Dtype(),
        pa.large_string(): pd.StringDtype(),
    }
    if backend == "numpy_nullable" and t in masked:
        return masked[t]
    return pd.ArrowDtype(t)


def _pandas(path: Path, backend: DtypeBackend) -> object:
    # self_destruct frees each Arrow column once converted.
    return _table(path).to_pandas(
        self_destruct=True, split_blocks=True, types_mapper=partial(pandas_dtype, backend=backend)
    )


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
    ("polars", "DataFrame"): _polars,
    ("polars", "LazyFrame"): _polars_lazy,
}

_PANDAS = ("pandas", "DataFrame")


def _named(annotation: object) -> tuple[str, str] | None:
    if not isinstance(annotation, type):
        return None
    return annotation.__module__.partition(".")[0], annotation.__name__


def is_pandas(annotation: object) -> bool:
    return _named(annotation) == _PANDAS


def is_spark_annotation(annotation: object) -> bool:
    """Whether `annotation` is a class of a `pyspark` module (a Spark DataFrame's)."""
    named = _named(annotation)
    return named is not None and named[0] == "pyspark"


def python_loader(
    annotation: object, dtype_backend: DtypeBackend
) -> Callable[[Path], object] | None:
    """How to load an input annotated `annotation` from the exported Parquet file (a
    pandas frame with `dtype_backend`); None for anything else (a Spark DataFrame, or no
    annotation)."""
    named = _named(annotation)
    if named == _PANDAS:
        return partial(_pandas, backend=dtype_backend)
    return _LOADERS.get(named) if named else None
