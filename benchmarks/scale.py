"""Scale benchmark: TPC-H (tpchgen-cli) as a star schema through HyperIOManager.

Run: `.venv/bin/python benchmarks/scale.py [--scale 1] [--json sf1.json]`; then
`benchmarks/scale.py --curve sf1.json sf3.json sf10.json` prints how the costs grow with
the scale factor, and the ratios of the largest to the smallest (files of one scale
factor are merged, the later one's paths replacing the earlier one's). What it measures and
recorded runs are in docs/performance.md ("Scale: TPC-H", "The cost curve").

Paths, each in a child process of its own (the parent samples the peak RSS of the
child's JVM and hyperd, and waits for a quiet machine before each):

- local:    initial load of every table (dimensions, then a single-run backfill of all
            80 months of the facts) with Spark local[2].
- cluster:  the same against a Spark standalone master with one worker (1 core, 1g),
            started by the parent on loopback (tests/cluster.py).
- changes:  the same load with local[2], then: replacing one month of `lineitem` when
            the table holds that month only vs all months (interleaved, median of
            `--repeats`); publishing to the REST emulator (in-process, loopback) the
            data source of `lineitem`'s tree (PUBLISHED), then the one-month change; 12
            monthly rewrites of `lineitem`, then `compact()` of the file with and without
            `rewrite_rows`.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import psutil
from ingest import (
    TreeSampler,
    busy_cpu_seconds,
    own_cpu_seconds,
    python_peak_rss,
    setup_description,
    wait_for_quiet,
)

warnings.filterwarnings("ignore", message=".*is currently in beta")  # backfill_policy
ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT), str(ROOT / "tests")]

MB = 1024 * 1024
REPLACED_MONTH = "1995-06-01"
REWRITTEN_MONTHS = [f"1996-{m:02d}-01" for m in range(1, 13)]
TOKEN = ("bench", "bench-secret")
#: What the publish sends: lineitem's tree (one fact per data source; nation in two roles).
#: partsupp, a second fact, would be a data source of its own.
PUBLISHED = ["lineitem", "orders", "customer", "part", "supplier", "nation", "region"]
PATHS = {
    "local": "initial load, Spark local[2]",
    "cluster": "initial load, standalone 1 worker x 1 core",
    "changes": "load, replace, publish, compact (local[2])",
}


# ---------------------------------------------------------------- child process


def spark_config(master: str) -> dict[str, str]:
    """The same driver settings for every path; executors as in the cluster tests."""
    from cluster import EXECUTOR_CONF

    config = {
        "spark.master": master,
        "spark.app.name": "hyper-assets-scale",
        "spark.ui.enabled": "false",
        "spark.ui.showConsoleProgress": "false",
        "spark.driver.memory": "4g",
        "spark.sql.session.timeZone": "UTC",
    }
    if master.startswith("spark://"):
        config |= EXECUTOR_CONF | {"spark.executor.memory": "1g"}
    return config


@dataclass
class Bench:
    """One child's setup: where the data is, where to work, which Spark."""

    data: Path
    work: Path
    master: str

    def resources(self, database: Path, **extra: Any) -> dict[str, Any]:
        from dagster_pyspark import PySparkResource

        from hyper_assets import HyperIOManager, HyperResource
        from tpch import TpchParquet

        return {
            "io_manager": HyperIOManager(
                database=str(database),
                hyper=HyperResource(log_dir=str(self.work / "hyperd-logs")),
                staging_dir=str(self.work / "staging"),
            ),
            "pyspark": PySparkResource(spark_config=spark_config(self.master)),
            "tpch": TpchParquet(directory=str(self.data)),
            **extra,
        }


def written(result: Any) -> dict[str, dict[str, float]]:
    """rows, stage and load seconds of every asset a materialize call wrote."""
    out = {}
    for event in result.get_asset_materialization_events():
        metadata = event.materialization.metadata
        out[event.asset_key.path[-1]] = {
            k: float(metadata[k].value) for k in ("rows_loaded", "stage_seconds", "load_seconds")
        }
    return out


def load_all(bench: Bench, database: Path) -> dict[str, Any]:
    """Dimensions, then all months of the facts in one run; seconds and per-table figures."""
    from dagster import AssetSelection, materialize

    from tpch import ASSETS, DIMENSIONS, FACTS, MONTHS

    months = MONTHS.get_partition_keys()
    backfill = {
        "dagster/asset_partition_range_start": months[0],
        "dagster/asset_partition_range_end": months[-1],
    }
    tables: dict[str, dict[str, float]] = {}
    started = time.perf_counter()
    for selection, tags in ((DIMENSIONS, {}), (FACTS, backfill)):
        result = materialize(
            ASSETS,
            selection=AssetSelection.assets(*selection),
            resources=bench.resources(database),
            tags=tags,
        )
        assert result.success
        tables |= written(result)
    seconds = time.perf_counter() - started
    return {"seconds": seconds, "tables": tables, "file_bytes": database.stat().st_size}


def replace_month(bench: Bench, database: Path, month: str) -> dict[str, float]:
    """Writes one month of lineitem; the IO manager's seconds and the whole call's."""
    from dagster import materialize

    from tpch.assets import lineitem

    started = time.perf_counter()
    result = materialize([lineitem], resources=bench.resources(database), partition_key=month)
    assert result.success
    figures = written(result)["lineitem"]
    return figures | {"wall_seconds": time.perf_counter() - started}


def publish(bench: Bench, database: Path, emulator: Any) -> dict[str, Any]:
    """Publishes the file to the emulator through `tableau_datasource_asset`."""
    from dagster import materialize

    from hyper_assets import TableauServerResource, TokenSignIn, tableau_datasource_asset
    from tpch import ASSETS

    published = tableau_datasource_asset(
        datasource="TPC-H", project="Default", deps=ASSETS, tables=PUBLISHED
    )
    tableau = TableauServerResource(
        server_url=emulator.url, sign_in=TokenSignIn(name=TOKEN[0], secret=TOKEN[1])
    )
    result = materialize(
        [*ASSETS, published],
        selection=[published.key],
        resources=bench.resources(database, tableau=tableau),
    )
    assert result.success
    (event,) = result.asset_materializations_for_node(published.op.name)
    metadata = {k: v.value for k, v in event.metadata.items()}
    return {k: metadata[k] for k in ("publish", "payload_bytes", "seconds", "batches")}


def path_load(bench: Bench) -> dict[str, Any]:
    return {"load": load_all(bench, bench.work / "tpch.hyper")}


def path_changes(bench: Bench, repeats: int, compaction: bool) -> dict[str, Any]:
    from hyper_assets import HyperResource, compact
    from hyper_assets.emulator import Emulator

    full, one = bench.work / "tpch.hyper", bench.work / "one-month.hyper"
    out: dict[str, Any] = {"load": load_all(bench, full)}
    replace_month(bench, one, REPLACED_MONTH)
    (bench.work / "server").mkdir()
    with Emulator(bench.work / "server", tokens=dict([TOKEN])) as emulator:
        out["publish_full"] = publish(bench, full, emulator)
        out["replace_one"], out["replace_all"] = [], []
        for _ in range(repeats):
            out["replace_one"].append(replace_month(bench, one, REPLACED_MONTH))
            out["replace_all"].append(replace_month(bench, full, REPLACED_MONTH))
        out["publish_month"] = publish(bench, full, emulator)
    out["rows_one"] = out["replace_one"][0]["rows_loaded"]
    if not compaction:
        return out
    for month in REWRITTEN_MONTHS:
        replace_month(bench, full, month)
    blocks_only = bench.work / "blocks-only.hyper"
    shutil.copyfile(full, blocks_only)
    hyper = HyperResource(log_dir=str(bench.work / "hyperd-logs"))
    out["compact_blocks"] = asdict(compact(hyper, blocks_only, rewrite_rows=False))
    out["compact_rows"] = asdict(compact(hyper, full))
    hyper.close()
    return out


def run_child(name: str, args: argparse.Namespace) -> None:
    """Runs one path in this fresh process; writes its figures as JSON."""
    bench = Bench(args.data, args.work / name, args.master or "local[2]")
    bench.work.mkdir()
    started = time.perf_counter()
    if name == "changes":
        figures = path_changes(bench, args.repeats, args.compaction)
    else:
        figures = path_load(bench)
    figures |= {"python_peak_rss": python_peak_rss(), "seconds": time.perf_counter() - started}
    (args.work / f"{name}.json").write_text(json.dumps(figures))


# ---------------------------------------------------------------- parent process


@dataclass
class Measured:
    figures: dict[str, Any]
    peaks: dict[str, int] = field(default_factory=dict)
    other: float = 0.0  # share of the CPUs other programs used meanwhile


def executor_rss(work_dir: Path) -> int:
    """RSS of the cluster's executor JVMs: they run in the worker's work directory."""
    total = 0
    for process in psutil.process_iter(["name"]):
        try:
            if "java" in (process.info["name"] or "") and process.cwd().startswith(str(work_dir)):
                total += process.memory_info().rss
        except psutil.Error:
            continue
    return total


def run_path(name: str, args: argparse.Namespace, cluster: Any = None) -> Measured:
    """Runs one path in a child process, sampling its tree (and the cluster's) meanwhile."""
    command = [sys.executable, __file__, "--child", name, "--work", str(args.work)]
    command += ["--data", str(args.data), "--repeats", str(args.repeats)]
    command += [] if args.compaction else ["--no-compaction"]
    daemons = [TreeSampler(psutil.Process(pid)) for pid in cluster.pids] if cluster else []
    if cluster is not None:
        command += ["--master", cluster.master_url]
    for daemon in daemons:
        daemon.sample()
    log_file = args.work / f"{name}.log"
    # CPU that our own processes used is not "other programs": this one's, the child's,
    # and the cluster's since now.
    busy, mine, started = busy_cpu_seconds(), own_cpu_seconds(), time.monotonic()
    ours_before = sum(d.cpu_seconds() for d in daemons)
    executor_peak = 0
    with log_file.open("w") as log:
        child = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT)
        sampler = TreeSampler(psutil.Process(child.pid))
        while child.poll() is None:
            for each in (sampler, *daemons):
                each.sample()
            if cluster is not None:
                executor_peak = max(executor_peak, executor_rss(cluster.work_dir))
            time.sleep(0.1)
    if child.returncode != 0:
        sys.exit(f"path {name} failed:\n{log_file.read_text()[-5000:]}")
    elapsed = time.monotonic() - started
    ours = sampler.cpu_seconds() + sum(d.cpu_seconds() for d in daemons) - ours_before
    other = busy_cpu_seconds() - busy - ours - own_cpu_seconds() + mine
    peaks = sampler.peaks | ({"executor": executor_peak} if cluster is not None else {})
    figures = json.loads((args.work / f"{name}.json").read_text())
    return Measured(figures, peaks, other / (elapsed * (os.cpu_count() or 1)))


@contextmanager
def maybe_cluster(name: str, work: Path) -> Iterator[Any]:
    if name != "cluster":
        yield None
        return
    from cluster import standalone_cluster

    with standalone_cluster(work / "spark-cluster") as cluster:
        yield cluster


def median(runs: list[dict[str, float]], key: str) -> float:
    return statistics.median(r[key] for r in runs)


def report(scale: float, rows: dict[str, int], results: dict[str, Measured]) -> str:
    total = sum(rows.values())
    lines = [
        f"{'path':<44} {'seconds':>8} {'rows/s':>9} {'file MB':>8} {'py peak':>8} "
        f"{'JVM':>7} {'executor':>8} {'hyperd':>7} {'other':>6}"
    ]
    for name, measured in results.items():
        load, peaks = measured.figures["load"], measured.peaks
        executor = f"{peaks['executor'] / MB:6.0f}MB" if "executor" in peaks else f"{'-':>8}"
        lines.append(
            f"{PATHS[name]:<44} {load['seconds']:8.1f} {total / load['seconds']:9,.0f} "
            f"{load['file_bytes'] / MB:8.0f} {measured.figures['python_peak_rss'] / MB:6.0f}MB "
            f"{peaks.get('jvm', 0) / MB:5.0f}MB {executor} {peaks.get('hyperd', 0) / MB:5.0f}MB "
            f"{measured.other:6.0%}"
        )
    for name, measured in results.items():
        tables = measured.figures["load"]["tables"]
        lines.append(f"  {name}: stage / load seconds per table")
        for table, t in tables.items():
            lines.append(
                f"    {table:<9} {t['rows_loaded']:>11,.0f} rows  stage {t['stage_seconds']:6.2f}"
                f"  load {t['load_seconds']:6.2f}"
            )
    if "local" in results and "cluster" in results:
        ratio = (
            results["cluster"].figures["load"]["seconds"]
            / results["local"].figures["load"]["seconds"]
        )
        lines.append(f"cluster / local[2] load time: {ratio:.2f}")
    if "changes" in results:
        lines += changes_report(results["changes"].figures)
    lines.append(f"scale factor {scale:g}: {total:,} rows in {len(rows)} tables")
    return "\n".join(lines)


def changes_report(f: dict[str, Any]) -> list[str]:
    one, everything = f["replace_one"], f["replace_all"]
    io_one = median(one, "stage_seconds") + median(one, "load_seconds")
    io_all = median(everything, "stage_seconds") + median(everything, "load_seconds")
    full, month = f["publish_full"], f["publish_month"]
    loaded = f["load"]["file_bytes"]
    lines = [
        "",
        f"replace lineitem {REPLACED_MONTH[:7]} ({f['rows_one']:,.0f} rows), median of "
        f"{len(one)} interleaved runs:",
        f"  table holds 1 month:    IO manager {io_one:6.2f} s (stage "
        f"{median(one, 'stage_seconds'):.2f}, load {median(one, 'load_seconds'):.2f}); "
        f"materialize {median(one, 'wall_seconds'):.2f} s",
        f"  table holds all months: IO manager {io_all:6.2f} s (stage "
        f"{median(everything, 'stage_seconds'):.2f}, load "
        f"{median(everything, 'load_seconds'):.2f}); materialize "
        f"{median(everything, 'wall_seconds'):.2f} s",
        f"  all / one: IO manager {io_all / io_one:.2f}, load alone "
        f"{median(everything, 'load_seconds') / median(one, 'load_seconds'):.2f} "
        "(target <= 1.5)",
        "",
        "publish to the emulator (loopback):",
        f"  whole file ({full['publish']}):        {full['payload_bytes'] / MB:9.1f} MB "
        f"{full['seconds']:7.2f} s",
        f"  one-month change ({month['publish']}): {month['payload_bytes'] / MB:9.1f} MB "
        f"{month['seconds']:7.2f} s",
        f"  change / whole: 1/{full['payload_bytes'] / month['payload_bytes']:.0f} of the "
        "bytes (target < 1/50)",
    ]
    if "compact_rows" not in f:  # --no-compaction
        return lines
    return [
        *lines,
        "",
        f"compact() after {len(REWRITTEN_MONTHS)} more monthly rewrites of lineitem (file "
        f"{loaded / MB:.0f} MB after the initial load):",
        *(
            f"  {label:<26} {c['before_bytes'] / MB:6.0f} MB -> {c['after_bytes'] / MB:6.0f} MB "
            f"({1 - c['after_bytes'] / c['before_bytes']:.0%} saved) in {c['seconds']:.2f} s"
            for label, c in (
                ("rewrite_rows=False:", f["compact_blocks"]),
                ("rewrite_rows=True (default):", f["compact_rows"]),
            )
        ),
    ]


def curve_report(runs: list[dict[str, Any]]) -> str:
    """Each run's (a `--json` file's) costs by scale factor, and largest / smallest. Runs
    of one scale factor are merged, a later one's paths replacing an earlier one's (a
    `--paths changes` run again with more `--repeats`)."""
    merged: dict[float, dict[str, Any]] = {}
    for run in runs:
        earlier = merged.setdefault(run["scale"], {**run, "paths": {}})
        earlier["paths"] |= run["paths"]
    runs = sorted(merged.values(), key=lambda r: r["scale"])
    header = (
        f"{'SF':>4} {'rows':>11} {'load s':>7} {'s/M rows':>8} {'py peak':>8} {'hyperd':>7} "
        f"{'JVM':>7} {'month rows':>10} {'replace s':>9} {'payload MB':>10} "
        f"{'1st publish s':>13} {'file MB':>8}"
    )
    lines, row_of = [header], {}
    for run in runs:
        local, changes = run["paths"]["local"], run["paths"]["changes"]["figures"]
        load, everything = local["figures"]["load"], changes["replace_all"]
        rows = sum(run["rows"].values())
        row = {
            "load_per_mrow": load["seconds"] / rows * 1e6,
            "python_peak": local["figures"]["python_peak_rss"] / MB,
            "hyperd_peak": local["peaks"].get("hyperd", 0) / MB,
            "replace": median(everything, "stage_seconds") + median(everything, "load_seconds"),
            "replace_load": median(everything, "load_seconds"),
            "month_rows": changes["rows_one"],
            "payload": changes["publish_month"]["payload_bytes"] / MB,
            "first_publish": changes["publish_full"]["seconds"],
        }
        row_of[run["scale"]] = row
        lines.append(
            f"{run['scale']:>4g} {rows:>11,} {load['seconds']:7.1f} {row['load_per_mrow']:8.2f} "
            f"{row['python_peak']:6.0f}MB {row['hyperd_peak']:5.0f}MB "
            f"{local['peaks'].get('jvm', 0) / MB:5.0f}MB {row['month_rows']:>10,.0f} "
            f"{row['replace']:9.2f} {row['payload']:10.1f} {row['first_publish']:13.2f} "
            f"{load['file_bytes'] / MB:8.0f}"
        )
    small, large = runs[0]["scale"], runs[-1]["scale"]
    a, b = row_of[small], row_of[large]
    ratio = f"SF{large:g} / SF{small:g}"
    grown = b["month_rows"] / a["month_rows"]
    lines += [
        "",
        f"{ratio}: load seconds per million rows {b['load_per_mrow'] / a['load_per_mrow']:.2f} "
        "(goal <= 1.2)",
        f"{ratio}: the driver's Python peak {b['python_peak'] / a['python_peak']:.2f} (goal: "
        f"flat), hyperd's {b['hyperd_peak'] / a['hyperd_peak']:.2f}",
        f"{ratio}: a month's replace {b['replace'] / a['replace']:.2f} for "
        f"{grown:.1f} times the month's rows, {b['replace'] / a['replace'] / grown:.2f} a "
        f"row (goal <= 1.5); its Hyper load alone {b['replace_load'] / a['replace_load']:.2f}, "
        f"{b['replace_load'] / a['replace_load'] / grown:.2f} a row",
        f"{ratio}: the one-month publish payload {b['payload'] / a['payload']:.2f}, the first "
        f"publish {b['first_publish'] / a['first_publish']:.2f}",
    ]
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--scale", type=float, default=1.0, help="TPC-H scale factor")
    parser.add_argument("--paths", default=",".join(PATHS), help=f"subset of {','.join(PATHS)}")
    parser.add_argument("--repeats", type=int, default=3, help="replace runs per table size")
    parser.add_argument(
        "--no-compaction",
        dest="compaction",
        action="store_false",
        help="the changes path without its 12 rewrites and compactions (the cost curve needs none)",
    )
    parser.add_argument(
        "--data",
        type=Path,
        help="where the Parquet is generated (and reused; default: a folder in the temp dir)",
    )
    parser.add_argument("--json", type=Path, help="also write every figure here")
    parser.add_argument(
        "--wait",
        type=float,
        default=300.0,
        help="before each path, wait up to this many seconds for a quiet machine (0: don't)",
    )
    parser.add_argument(
        "--curve",
        type=Path,
        nargs="+",
        metavar="JSON",
        help="print the cost curve of earlier runs' --json files (each with local,changes)",
    )
    parser.add_argument("--child", choices=list(PATHS), help=argparse.SUPPRESS)
    parser.add_argument("--work", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--master", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        run_child(args.child, args)
        return
    if args.curve:
        print(curve_report([json.loads(path.read_text()) for path in args.curve]))
        return

    from tpch import generate

    names = [n.strip() for n in args.paths.split(",") if n.strip()]
    if unknown := sorted(set(names) - set(PATHS)):
        parser.error(f"unknown paths {unknown}; choose from {', '.join(PATHS)}")
    args.data = args.data or Path(tempfile.gettempdir()) / f"hyper-assets-tpch-sf{args.scale:g}"
    rows = generate(args.scale, args.data)
    print(
        f"TPC-H scale factor {args.scale:g} ({sum(rows.values()):,} rows) in {args.data}; "
        f"{os.cpu_count()} CPUs, {psutil.virtual_memory().total / 2**30:.0f} GiB; load "
        f"average {os.getloadavg()[0]:.2f}\n{setup_description()}",
        flush=True,
    )
    results: dict[str, Measured] = {}
    with tempfile.TemporaryDirectory(prefix="hyper-bench-scale-") as tmp:
        args.work = Path(tmp)
        for name in names:
            waited = wait_for_quiet(args.wait)
            print(f"  {PATHS[name]} (after {waited:.0f} s waiting) ...", end=" ", flush=True)
            with maybe_cluster(name, args.work) as cluster:
                results[name] = run_path(name, args, cluster)
            print(f"{results[name].figures['seconds']:.1f} s", flush=True)
    print(f"load average {os.getloadavg()[0]:.2f}\n")
    print(report(args.scale, rows, results))
    if args.json:
        data = {
            "scale": args.scale,
            "rows": rows,
            "paths": {n: asdict(r) for n, r in results.items()},
        }
        args.json.write_text(json.dumps(data, indent=1))


if __name__ == "__main__":
    main()
