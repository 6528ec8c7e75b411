"""Memory of Python frames through HyperIOManager: each load annotation side by side.

Run: `.venv/bin/python benchmarks/frames.py [--rows N]`. One process stores N rows
(bigint, double, 24-character string) as a one-pass `pyarrow.RecordBatchReader` output;
then each input annotation loads the table in a fresh process of its own, and the
benchmark prints that process's peak RSS above what it held before the run, and above a
baseline run that loads nothing, next to the table's size in Arrow. docs/python-frames.md
quotes these ratios.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

WRITE = """
import resource, pyarrow as pa
from dagster import asset, materialize
from hyper_assets import HyperIOManager, HyperResource
rows, database = {rows}, {database!r}
schema = pa.schema([("id", pa.int64()), ("x", pa.float64()), ("s", pa.string())])
def batches():
    for start in range(0, rows, 100_000):
        ids = pa.array(range(start, min(start + 100_000, rows)), pa.int64())
        yield pa.record_batch([ids, ids.cast(pa.float64()),
                               pa.compute.utf8_lpad(ids.cast(pa.string()), 24, "0")], schema=schema)
before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
@asset
def wide() -> pa.RecordBatchReader:
    return pa.RecordBatchReader.from_batches(schema, batches())
io = HyperIOManager(database=database, hyper=HyperResource(log_dir=database + ".logs"))
assert materialize([wide], resources={{"io_manager": io}}).success
print(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before)
"""

LOAD = """
import gc, resource, sys, pandas, polars, pyarrow as pa
from dagster import AssetIn, asset, materialize
from hyper_assets import HyperIOManager, HyperResource
database, annotation, rows = {database!r}, {annotation}, {rows}
held = {{}}
io = HyperIOManager(database=database, hyper=HyperResource(log_dir=database + ".logs"))
gc.collect()
before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
if annotation is None:  # the baseline: the same run, loading nothing
    @asset(deps=["wide"])
    def load() -> None:
        held["rows"] = rows
else:
    @asset(ins={{"wide": AssetIn(key="wide")}})
    def load(wide: annotation) -> None:
        if isinstance(wide, pa.RecordBatchReader):  # every value read, a batch at a time
            held["rows"] = sum(len(pa.compute.utf8_length(b.column("s"))) for b in wide)
        elif isinstance(wide, polars.LazyFrame):
            lengths = wide.select(polars.col("s").str.len_bytes(), "id", "x")
            held["rows"] = lengths.collect(engine="streaming").height
        else:
            held["rows"] = len(wide)
@asset(name="wide")
def wide_source() -> None: ...
result = materialize([wide_source, load], resources={{"io_manager": io}}, selection=[load])
assert result.success
print(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before, held["rows"])
"""

ANNOTATIONS = [
    "None",
    "pa.RecordBatchReader",
    "pa.Table",
    "pandas.DataFrame",
    "polars.DataFrame",
    "polars.LazyFrame",
]


def _run(script: str) -> list[str]:
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True)
    if done.returncode:
        raise SystemExit(done.stderr[-3000:])
    return done.stdout.split()


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rows", type=int, default=3_000_000)
    rows = parser.parse_args().rows
    with tempfile.TemporaryDirectory() as scratch:
        database = str(Path(scratch) / "frames.hyper")
        (written,) = _run(WRITE.format(rows=rows, database=database))
        arrow_mb = rows * (8 + 8 + 24 + 4) / 2**20  # values + string offsets
        print(f"{rows:,} rows, {arrow_mb:.0f} MB in Arrow")
        print(f"{'store (one-pass stream)':28} peak +{int(written) / 1024:6.0f} MB")
        figures = {}
        for annotation in ANNOTATIONS:
            script = LOAD.format(database=database, annotation=annotation, rows=rows)
            grown, loaded = _run(script)
            assert int(loaded) == rows, (annotation, loaded)
            figures[annotation] = int(grown) / 1024
            above = figures[annotation] - figures["None"]
            name = "no load (baseline)" if annotation == "None" else "load as " + annotation
            print(
                f"{name:28} peak +{figures[annotation]:6.0f} MB, above the baseline "
                f"{above:6.0f} MB = {above / arrow_mb:.2f}x the Arrow size"
            )
        print(json.dumps({"rows": rows, "arrow_mb": round(arrow_mb), "peak_mb": figures}))


if __name__ == "__main__":
    main()
