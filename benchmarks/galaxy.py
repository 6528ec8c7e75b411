"""Galaxy benchmark: the `galaxy/` code location's data sources published to the emulator.

Run: `.venv/bin/python benchmarks/galaxy.py [--scale 1]`. What it measures and a recorded
run are in docs/performance.md ("A galaxy: one data source per fact").

In one process, with Spark local[2]: TPC-H (tpchgen-cli) loaded into one `.hyper` file
through the location's jobs (the unpartitioned tables, then all 80 months of `orders` and
`lineitem` in one run); its three data sources (`Line items`, `Supply`, `Orders`)
published whole to the REST emulator (in-process, loopback); then, `--repeats` times,
one month of `lineitem` written again and published, and `nation` written again and
published. Each publish's seconds and payload bytes are the publish asset's metadata,
side by side with the file's size. During the first publishes a writer (a thread with a
hyperd of its own) takes the file again and again, as every write does first, and each
of its waits is timed.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import threading
import time
import warnings
from contextlib import suppress
from pathlib import Path
from typing import Any

import psutil
from ingest import busy_cpu_seconds, setup_description, wait_for_quiet
from scale import spark_config

warnings.filterwarnings("ignore", message=".*is currently in beta")  # backfill_policy
ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT)]

MB = 1024 * 1024
REPLACED_MONTH = "1995-06-01"
TOKEN = ("bench", "bench-secret")


class Location:
    """The galaxy's Definitions on a file in `work`, publishing to `server_url`."""

    def __init__(self, data: Path, work: Path, server_url: str) -> None:
        import dagster as dg
        from dagster_pyspark import PySparkResource

        from galaxy.definitions import build_definitions
        from hyper_assets import HyperIOManager, HyperResource, TableauServerResource, TokenSignIn
        from tpch import TpchParquet

        self.database = work / "tpch.hyper"
        self.instance = dg.DagsterInstance.ephemeral()
        self.defs = build_definitions(
            io_manager=HyperIOManager(
                database=str(self.database),
                hyper=HyperResource(log_dir=str(work / "hyperd-logs")),
                staging_dir=str(work / "staging"),
            ),
            pyspark=PySparkResource(spark_config=spark_config("local[2]")),
            tpch=TpchParquet(directory=str(data)),
            tableau=TableauServerResource(
                server_url=server_url, sign_in=TokenSignIn(name=TOKEN[0], secret=TOKEN[1])
            ),
        )

    def run(self, job: str, **kwargs: Any) -> Any:
        quiet = {"loggers": {"console": {"config": {"log_level": "WARNING"}}}}
        job_def = self.defs.resolve_job_def(job)
        result = job_def.execute_in_process(run_config=quiet, instance=self.instance, **kwargs)
        assert result.success
        return result

    def timed(self, job: str, **kwargs: Any) -> float:
        started = time.perf_counter()
        self.run(job, **kwargs)
        return time.perf_counter() - started

    def publish(self) -> dict[str, dict[str, Any]]:
        """Each data source's publish kind, seconds, payload bytes and rows sent."""
        out = {}
        for event in self.run("publish_job").get_asset_materialization_events():
            metadata = {k: v.value for k, v in event.materialization.metadata.items()}
            out[metadata["datasource"]] = {
                k: metadata[k] for k in ("publish", "seconds", "payload_bytes", "rows_sent")
            }
        return out


class Writer(threading.Thread):
    """Takes `database` as a writer does before it writes (its lock, then a connection),
    every 50 ms until `stop` is set; `waits` holds the seconds each wait for the lock
    took, `takes` those of the lock and the connection."""

    def __init__(self, database: Path, work: Path) -> None:
        from hyper_assets import HyperResource

        super().__init__(daemon=True)
        self.database = database
        # Its own hyperd, as a writer in another process has.
        self.hyper = HyperResource(log_dir=str(work / "writer-logs"))
        self.waits: list[float] = []
        self.takes: list[float] = []
        self.stop = threading.Event()

    def run(self) -> None:
        while not self.stop.is_set():
            started = time.perf_counter()
            with self.hyper.lock(self.database):
                self.waits.append(time.perf_counter() - started)
                with self.hyper.open(self.database, create=False):
                    self.takes.append(time.perf_counter() - started)
            self.stop.wait(0.05)
        self.hyper.close()


def ours_cpu_seconds() -> float:
    """CPU seconds of this process and its children (Spark's JVM, the hyperds), running or
    ended."""
    me = psutil.Process()
    t = me.cpu_times()
    total = t.user + t.system + t.children_user + t.children_system
    for child in me.children(recursive=True):
        with suppress(psutil.Error):
            c = child.cpu_times()
            total += c.user + c.system
    return total


def build_seconds(database: Path, work: Path) -> dict[str, float]:
    """Seconds to write each data source's tree file (what its first publish sends) from
    `database`, alone: the part of a first publish before anything is sent."""
    from tableauhyperapi import Connection

    from galaxy.datasources import TABLES
    from hyper_assets._engine.process import HyperSettings, SharedHyper
    from hyper_assets._engine.tables import Catalog
    from hyper_assets.tableau._publish.model import held_tables, read_model
    from hyper_assets.tableau._publish.subset import write_subset

    out = {}
    hyper = SharedHyper(HyperSettings(log_dir=str(work / "hyperd-logs")))
    with Connection(hyper.endpoint, database) as connection:
        for name, assets in TABLES.items():
            names = [a.key.path[-1] for a in assets]
            tables = held_tables(Catalog(connection), names, name)
            started = time.perf_counter()
            model, _ = read_model(connection, tables, name, (), chosen=True)
            target = work / f"{name}.hyper"
            write_subset(connection, database, model, target)
            out[name] = time.perf_counter() - started
            target.unlink()
    hyper.close()
    return out


def measure(data: Path, work: Path, repeats: int) -> dict[str, Any]:
    from dagster import AssetKey

    from hyper_assets.emulator import Emulator
    from tpch import MONTHS

    months = MONTHS.get_partition_keys()
    backfill = {
        "dagster/asset_partition_range_start": months[0],
        "dagster/asset_partition_range_end": months[-1],
    }
    (work / "server").mkdir()
    busy, ours, started = busy_cpu_seconds(), ours_cpu_seconds(), time.monotonic()
    with Emulator(work / "server", tokens=dict([TOKEN])) as emulator:
        location = Location(data, work, emulator.url)
        out: dict[str, Any] = {
            "load_seconds": location.timed("refresh_job")
            + location.timed("monthly_job", tags=backfill)
        }
        out["file_bytes"] = location.database.stat().st_size
        writer = Writer(location.database, work)
        writer.start()
        out["first"] = location.publish()
        writer.stop.set()
        writer.join()
        out["writer_waits"], out["writer_takes"] = writer.waits, writer.takes
        out["month"], out["nation"], out["write_seconds"] = [], [], {"month": [], "nation": []}
        for _ in range(repeats):
            out["write_seconds"]["month"].append(
                location.timed(
                    "monthly_job",
                    partition_key=REPLACED_MONTH,
                    asset_selection=[AssetKey("lineitem")],
                )
            )
            out["month"].append(location.publish())
            out["write_seconds"]["nation"].append(
                location.timed("refresh_job", asset_selection=[AssetKey("nation")])
            )
            out["nation"].append(location.publish())
        out["file_bytes_after"] = location.database.stat().st_size
        other = busy_cpu_seconds() - busy - (ours_cpu_seconds() - ours)
    out["other"] = other / ((time.monotonic() - started) * (os.cpu_count() or 1))
    out["build"] = build_seconds(location.database, work)
    return out


def median(runs: list[dict[str, dict[str, Any]]], datasource: str, key: str) -> float:
    return statistics.median(r[datasource][key] for r in runs)


def report(f: dict[str, Any]) -> str:
    file = f["file_bytes"]
    first, month, nation = f["first"], f["month"], f["nation"]
    writes, waits, takes = f["write_seconds"], f["writer_waits"], f["writer_takes"]
    lines = [
        f"load (unpartitioned tables, then 80 months of orders and lineitem): "
        f"{f['load_seconds']:.1f} s; file {file / MB:.1f} MB "
        f"({f['file_bytes_after'] / MB:.1f} MB after the changes)",
        f"rewrite of lineitem {REPLACED_MONTH[:7]}: {statistics.median(writes['month']):.2f} s; "
        f"of nation: {statistics.median(writes['nation']):.2f} s (medians of {len(month)})",
        "",
        f"{'':<12} {'first publish (full)':>41} {'one month of lineitem':>33} "
        f"{'nation (25 rows)':>26}",
        f"{'data source':<12} {'MB':>9} {'/ file':>7} {'s':>7} {'build s':>7} {'rows':>9}   "
        f"{'kind':<7} {'MB':>7} {'/ first':>7} {'s':>7}   {'kind':<7} {'KB':>7} {'s':>7}",
    ]
    for name, full in first.items():
        kind_month, kind_nation = month[0][name]["publish"], nation[0][name]["publish"]
        month_bytes = median(month, name, "payload_bytes")
        share = f"1/{full['payload_bytes'] / month_bytes:.0f}" if month_bytes else "-"
        lines.append(
            f"{name:<12} {full['payload_bytes'] / MB:9.1f} {full['payload_bytes'] / file:7.2f} "
            f"{full['seconds']:7.2f} {f['build'][name]:7.2f} {full['rows_sent']:9,}   "
            f"{kind_month:<7} "
            f"{month_bytes / MB:7.2f} {share:>7} {median(month, name, 'seconds'):7.2f}   "
            f"{kind_nation:<7} {median(nation, name, 'payload_bytes') / 1024:7.0f} "
            f"{median(nation, name, 'seconds'):7.2f}"
        )
    total = sum(d["payload_bytes"] for d in first.values())
    lines += [
        f"{'all three':<12} {total / MB:9.1f} {total / file:7.2f} "
        f"{sum(d['seconds'] for d in first.values()):7.2f} {sum(f['build'].values()):7.2f}",
        "",
        f"a writer taking the file {len(waits)} times during the first publishes waited for "
        f"its lock at most {max(waits):.2f} s (median {statistics.median(waits):.3f} s); with "
        f"the connection opened, at most {max(takes):.2f} s (median "
        f"{statistics.median(takes):.3f} s)",
        f"before, each tree file was written under the lock: a writer waited up to the "
        f"longest build s, {max(f['build'].values()):.2f} s, and the survey and upload's "
        "start",
        "",
        "bytes and seconds are each publish's own (`payload_bytes`, `seconds` of its "
        "metadata); changes: medians; build s: writing the data source's tree file alone, "
        "afterwards (part of its first publish)",
        f"other programs used {f['other']:.0%} of the CPUs meanwhile",
    ]
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--scale", type=float, default=1.0, help="TPC-H scale factor")
    parser.add_argument("--repeats", type=int, default=3, help="runs of each change")
    parser.add_argument(
        "--data",
        type=Path,
        help="where the Parquet is generated (and reused; default: a folder in the temp dir)",
    )
    parser.add_argument(
        "--wait",
        type=float,
        default=300.0,
        help="first wait up to this many seconds for a quiet machine (0: don't)",
    )
    args = parser.parse_args()

    from tpch import generate

    data = args.data or Path(tempfile.gettempdir()) / f"hyper-assets-tpch-sf{args.scale:g}"
    rows = generate(args.scale, data)
    waited = wait_for_quiet(args.wait)
    print(
        f"TPC-H scale factor {args.scale:g} ({sum(rows.values()):,} rows) in {data}; "
        f"{os.cpu_count()} CPUs, {psutil.virtual_memory().total / 2**30:.0f} GiB; load "
        f"average {os.getloadavg()[0]:.2f} after {waited:.0f} s waiting\n{setup_description()}",
        flush=True,
    )
    with tempfile.TemporaryDirectory(prefix="hyper-bench-galaxy-") as work:
        figures = measure(data, Path(work), args.repeats)
    print(f"load average {os.getloadavg()[0]:.2f}\n")
    print(report(figures))


if __name__ == "__main__":
    main()
