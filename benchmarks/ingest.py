"""Ingest benchmark: ways of getting a Spark DataFrame into a .hyper file.

Run: `.venv/bin/python benchmarks/ingest.py [--rows N]` (or `make bench`). What it
measures and a recorded run are in docs/performance.md.

Paths, each on the same generated frame of N rows (bigint, date, timestamp, double,
int, string):

- spark:    Spark alone (`write.format("noop")`): the cost of producing the rows.
- a:        `HyperIOManager` inside `dagster.materialize` with its defaults (staging
            snappy, no dictionaries); headline = its handle_output time (stage_seconds +
            load_seconds).
- a-none:   the same with `staging_compression="none"`.
- b:        by hand: `df.write.parquet` (Spark's defaults: snappy, INT96 timestamps) and
            Hyper `COPY` of the part files into a created table.
- c:        `df.toArrow()` and `pantab.frame_to_hyper`.
- d:        `Inserter.add_row` over `toLocalIterator()` on 200,000 rows, extrapolated.
- e:        (a) through a Spark Connect server (local[2], started by the benchmark, on
            this machine) with `staging_mode="shared"`: the server writes the parts.
- f:        the same server with `staging_mode="stream"`: the rows come through the
            Connect channel as Arrow batches (what a remote cluster gets). f/e is the
            price of streaming. The server's JVM is not a child of the path's process,
            so its memory is not in the JVM column for e and f.

Fairness: every path runs in its own child process with its own local Spark session
(same settings), so each one's peak RSS is its own, and none inherits another's JIT or
caches. Nothing is cached in Spark: every run computes the frame from `spark.range`.
Each path runs twice in its process: "cold" (first run in a fresh process, like a
Dagster step) and "warm" (the same again, JIT compiled). Every run starts its own hyperd
and writes a new file inside its timing, and the file is read back afterwards.
"""

from __future__ import annotations

import argparse
import importlib.metadata
import importlib.util
import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager, nullcontext
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import psutil

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession
    from tableauhyperapi import Connection, HyperProcess, TableDefinition

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_ROWS = 5_000_000
SAMPLE_ROWS = 200_000
RUNS = ("cold", "warm")
MB = 1024 * 1024
TABLE = "facts"


# ---------------------------------------------------------------- measuring


@contextmanager
def timed(laps: dict[str, float], name: str) -> Iterator[None]:
    """Adds the wall-clock seconds of the block to `laps[name]`."""
    started = time.perf_counter()
    try:
        yield
    finally:
        laps[name] = laps.get(name, 0.0) + time.perf_counter() - started


class TreeSampler:
    """Samples a process tree from outside: peak RSS of the JVM and of hyperd, and the CPU
    seconds the tree used (to tell how much CPU other programs took meanwhile).

    It runs in the parent process: a thread inside the measured process would stall
    whenever a C extension holds the GIL (pantab does, for the whole write).
    """

    def __init__(self, root: psutil.Process) -> None:
        self.root = root
        self.peaks: dict[str, int] = {}
        self._cpu: dict[int, float] = {}

    def cpu_seconds(self) -> float:
        """CPU seconds used by the tree's processes, as last seen alive."""
        return sum(self._cpu.values())

    def sample(self) -> None:
        totals: dict[str, int] = {}
        try:
            processes = [self.root, *self.root.children(recursive=True)]
        except psutil.Error:
            return
        for process in processes:
            try:
                with process.oneshot():
                    name, rss = process.name(), process.memory_info().rss
                    cpu = process.cpu_times()
            except psutil.Error:
                continue
            self._cpu[process.pid] = cpu.user + cpu.system
            kind = "hyperd" if "hyperd" in name else "jvm" if "java" in name else None
            if kind:
                totals[kind] = totals.get(kind, 0) + rss
        for kind, rss in totals.items():
            self.peaks[kind] = max(self.peaks.get(kind, 0), rss)


def busy_cpu_seconds() -> float:
    """CPU seconds the whole machine has spent busy, all processes together."""
    t = psutil.cpu_times()
    return t.user + t.nice + t.system + t.irq + t.softirq


def own_cpu_seconds() -> float:
    """CPU seconds used by this process so far."""
    t = psutil.Process().cpu_times()
    return t.user + t.system


def wait_for_quiet(limit: float, busy_below: float = 15.0, quiet_for: int = 3) -> float:
    """Waits up to `limit` s until the CPUs stay below `busy_below` % for `quiet_for` s
    (nothing of ours runs meanwhile); returns the seconds waited."""
    started = time.monotonic()
    quiet = 0
    while quiet < quiet_for and time.monotonic() - started < limit:
        quiet = quiet + 1 if psutil.cpu_percent(interval=1.0) < busy_below else 0
    return time.monotonic() - started


def python_peak_rss() -> int:
    """Peak RSS of this Python process (not its children) since it started, in bytes."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


@dataclass
class Run:
    """One timed run of a path; `seconds` is the headline for N rows."""

    seconds: float
    laps: dict[str, float]
    rows_in_file: int


@dataclass
class PathResult:
    runs: list[Run]
    python_rss_start: int = 0  # after Spark started, before the first run
    python_peak_rss: int = 0
    jvm_peak_rss: int = 0
    hyperd_peak_rss: int = 0
    process_seconds: float = 0.0  # lifetime of the path's process
    other_cpu: float = 0.0  # CPU seconds other programs used meanwhile


# ---------------------------------------------------------------- the frame


def start_spark(remote: str | None = None) -> SparkSession:
    """A local session, or a Spark Connect session to `remote` with the same time zone."""
    from pyspark.sql import SparkSession

    if remote:
        builder = SparkSession.builder.remote(remote)
        return builder.config("spark.sql.session.timeZone", "UTC").getOrCreate()
    spark = (
        SparkSession.builder.master("local[2]")
        .appName("hyper-assets-benchmark")
        .config("spark.ui.enabled", "false")
        .config("spark.driver.memory", "4g")
        .config("spark.driver.maxResultSize", "2g")
        .config("spark.sql.session.timeZone", "UTC")
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("ERROR")
    return spark


def make_frame(spark: SparkSession, rows: int) -> DataFrame:
    """`rows` rows of bigint, date, timestamp, double, int, string, computed from range."""
    return spark.range(rows).selectExpr(
        "id",
        "date_add(DATE'2000-01-01', CAST(id % 9000 AS INT)) AS day",
        "timestamp_micros(1700000000000000 + id * 1000003) AS at",
        "CAST(id % 1000003 AS DOUBLE) * 0.37 AS amount",
        "CAST(id % 5000 AS INT) AS quantity",
        "concat('customer-', CAST(id * 7919 % 1000003 AS STRING)) AS customer",
    )


# ---------------------------------------------------------------- Hyper helpers


@contextmanager
def hyperd(log_dir: Path) -> Iterator[HyperProcess]:
    """A new hyperd, usage data off (as the library starts it)."""
    from tableauhyperapi import HyperProcess, Telemetry

    log_dir.mkdir(parents=True, exist_ok=True)
    telemetry = Telemetry.DO_NOT_SEND_USAGE_DATA_TO_TABLEAU
    with HyperProcess(telemetry, parameters={"log_dir": str(log_dir)}) as hyper:
        yield hyper


@contextmanager
def new_file(path: Path, log_dir: Path) -> Iterator[Connection]:
    """A new hyperd with a connection to a new file at `path`; both closed at the end."""
    from tableauhyperapi import Connection, CreateMode

    with (
        hyperd(log_dir) as hyper,
        Connection(hyper.endpoint, str(path), CreateMode.CREATE_AND_REPLACE) as connection,
    ):
        yield connection


def count_rows(path: Path, log_dir: Path, table: str) -> int:
    """Rows of `table` in the file (read back after the timed part)."""
    from tableauhyperapi import Connection

    with hyperd(log_dir) as hyper, Connection(hyper.endpoint, str(path)) as connection:
        return int(connection.execute_scalar_query(f"SELECT COUNT(*) FROM {table}"))


def table_definition(timestamp_tz: bool) -> TableDefinition:
    """The benchmark table, every column nullable (COPY does not cast: types must match)."""
    from tableauhyperapi import SqlType, TableDefinition

    column = TableDefinition.Column
    at = SqlType.timestamp_tz() if timestamp_tz else SqlType.timestamp()
    return TableDefinition(
        TABLE,
        [
            column("id", SqlType.big_int()),
            column("day", SqlType.date()),
            column("at", at),
            column("amount", SqlType.double()),
            column("quantity", SqlType.int()),
            column("customer", SqlType.text()),
        ],
    )


# ---------------------------------------------------------------- the paths


@dataclass(frozen=True)
class Context:
    spark: SparkSession
    rows: int
    work: Path  # empty directory of this run

    @property
    def logs(self) -> Path:
        return self.work / "hyperd-logs"


def path_spark(ctx: Context) -> Run:
    laps: dict[str, float] = {}
    with timed(laps, "noop write"):
        make_frame(ctx.spark, ctx.rows).write.format("noop").mode("overwrite").save()
    return Run(laps["noop write"], laps, rows_in_file=0)


def io_manager_path(compression: str, mode: str = "auto") -> Callable[[Context], Run]:
    def path_io_manager(ctx: Context) -> Run:
        from dagster import asset, materialize

        from hyper_assets import HyperIOManager, HyperResource
        from hyper_assets._engine.process import stop_idle

        @asset(name=TABLE)
        def facts() -> object:  # a Spark DataFrame
            return make_frame(ctx.spark, ctx.rows)

        database = ctx.work / "io-manager.hyper"
        io_manager = HyperIOManager(
            database=str(database),
            hyper=HyperResource(log_dir=str(ctx.logs)),
            staging_dir=str(ctx.work / "staging"),
            staging_compression=compression,
            staging_mode=mode,
        )
        laps: dict[str, float] = {}
        with timed(laps, "materialize"):
            result = materialize([facts], resources={"io_manager": io_manager})
        assert result.success
        stop_idle()  # as the other paths' runs, each run's hyperd ends with it
        (event,) = result.get_asset_materialization_events()
        metadata = event.materialization.metadata
        laps["stage"] = float(metadata["stage_seconds"].value)  # type: ignore[arg-type]
        laps["load"] = float(metadata["load_seconds"].value)  # type: ignore[arg-type]
        rows = count_rows(database, ctx.logs, f'"Extract"."{TABLE}"')
        return Run(laps["stage"] + laps["load"], laps, rows)

    return path_io_manager


def path_parquet_copy(ctx: Context) -> Run:
    from tableauhyperapi import escape_string_literal

    staged = ctx.work / "parquet"
    database = ctx.work / "parquet-copy.hyper"
    laps: dict[str, float] = {}
    with timed(laps, "write.parquet"):
        make_frame(ctx.spark, ctx.rows).write.parquet(str(staged))
    with timed(laps, "COPY"), new_file(database, ctx.logs) as connection:
        # Spark writes timestamps as INT96, which Hyper reads as TIMESTAMPTZ.
        connection.catalog.create_table(table_definition(timestamp_tz=True))
        files = ", ".join(escape_string_literal(str(p)) for p in sorted(staged.glob("*.parquet")))
        connection.execute_command(f"COPY {TABLE} FROM ARRAY[{files}] WITH (FORMAT => 'parquet')")
    return Run(sum(laps.values()), laps, count_rows(database, ctx.logs, TABLE))


def path_arrow_pantab(ctx: Context) -> Run:
    import pantab

    database = ctx.work / "pantab.hyper"
    laps: dict[str, float] = {}
    with timed(laps, "toArrow"):
        table = make_frame(ctx.spark, ctx.rows).toArrow()
    with timed(laps, "frame_to_hyper"):
        pantab.frame_to_hyper(table, database, table=TABLE)
    del table
    return Run(sum(laps.values()), laps, count_rows(database, ctx.logs, TABLE))


def path_inserter(ctx: Context) -> Run:
    """Times `SAMPLE_ROWS` rows; the headline is setup + the per-row time times N."""
    from tableauhyperapi import Inserter

    sample = min(SAMPLE_ROWS, ctx.rows)
    database = ctx.work / "inserter.hyper"
    definition = table_definition(timestamp_tz=False)
    laps: dict[str, float] = {}
    with timed(laps, "setup"), new_file(database, ctx.logs) as connection:
        connection.catalog.create_table(definition)
        with timed(laps, "rows"), Inserter(connection, definition) as inserter:
            for row in make_frame(ctx.spark, sample).toLocalIterator():
                inserter.add_row(row)
            inserter.execute()
    laps["setup"] -= laps["rows"]
    laps[f"{sample:,} rows"] = laps.pop("rows")
    seconds = laps["setup"] + laps[f"{sample:,} rows"] * ctx.rows / sample
    return Run(seconds, laps, count_rows(database, ctx.logs, TABLE))


PATHS: dict[str, tuple[str, Callable[[Context], Run]]] = {
    "spark": ("Spark alone (noop write)", path_spark),
    "a": ("(a) HyperIOManager, defaults", io_manager_path("snappy")),
    "a-none": ("(a') HyperIOManager, staging none", io_manager_path("none")),
    "b": ("(b) write.parquet + COPY", path_parquet_copy),
    "c": ("(c) toArrow + pantab", path_arrow_pantab),
    "d": ("(d) Inserter.add_row, extrapolated", path_inserter),
    "e": ("(e) Connect, shared staging", io_manager_path("snappy", "shared")),
    "f": ("(f) Connect, streamed", io_manager_path("snappy", "stream")),
}
CONNECT_PATHS = {"e", "f"}


# ---------------------------------------------------------------- child process


def warm_up(rows: int, work: Path, remote: str) -> None:
    """Has the Connect server serve paths e and f once each; nothing is measured."""
    spark = start_spark(remote)
    for name in sorted(CONNECT_PATHS):
        run_dir = work / f"warm-up-{name}"
        run_dir.mkdir()
        PATHS[name][1](Context(spark, rows, run_dir))
        shutil.rmtree(run_dir)
    spark.stop()


def run_child(name: str, rows: int, work: Path, remote: str | None) -> None:
    """Runs one path cold and warm in this fresh process; writes a PathResult as JSON."""
    spark = start_spark(remote if name in CONNECT_PATHS else None)
    result = PathResult(runs=[], python_rss_start=psutil.Process().memory_info().rss)
    for label in RUNS:
        run_dir = work / f"{name}-{label}"
        run_dir.mkdir()
        result.runs.append(PATHS[name][1](Context(spark, rows, run_dir)))
        shutil.rmtree(run_dir)
    result.python_peak_rss = python_peak_rss()
    (work / f"{name}.json").write_text(json.dumps(asdict(result)))
    spark.stop()


# ---------------------------------------------------------------- parent process


@contextmanager
def connect_server(work: Path) -> Iterator[str]:
    """The Spark Connect server of paths e and f: local[2], the same 4g as the sessions."""
    sys.path[:0] = [str(ROOT / "tests")]
    from cluster import connect_server as start

    directory = work / "connect-server"
    directory.mkdir()
    with start(directory, driver_memory="4g") as url:
        yield url


def run_path(name: str, rows: int, work: Path, remote: str | None) -> PathResult:
    """Runs one path in a child process, sampling that process tree meanwhile."""
    log_file = work / f"{name}.log"
    command = [sys.executable, __file__, "--rows", str(rows), "--child", name, "--work", str(work)]
    command += ["--remote", remote] if remote else []
    # Sampling costs this process CPU too; that is not "other programs".
    busy, mine, started = busy_cpu_seconds(), own_cpu_seconds(), time.monotonic()
    with log_file.open("w") as log:
        child = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT)
        sampler = TreeSampler(psutil.Process(child.pid))
        while child.poll() is None:
            sampler.sample()
            time.sleep(0.05)
    if child.returncode != 0:
        sys.exit(f"path {name} failed:\n{log_file.read_text()[-5000:]}")
    data = json.loads((work / f"{name}.json").read_text())
    measured = {
        "runs": [Run(**r) for r in data["runs"]],
        "jvm_peak_rss": sampler.peaks.get("jvm", 0),
        "hyperd_peak_rss": sampler.peaks.get("hyperd", 0),
        "process_seconds": time.monotonic() - started,
        "other_cpu": busy_cpu_seconds() - busy - sampler.cpu_seconds() - own_cpu_seconds() + mine,
    }
    return PathResult(**(data | measured))


def setup_description() -> str:
    """Library versions, and which hyper_assets is measured (its commit, if in git)."""
    versions = ", ".join(
        f"{name} {importlib.metadata.version(name)}"
        for name in ("pyspark", "tableauhyperapi", "dagster", "pantab", "pyarrow")
    )
    spec = importlib.util.find_spec("hyper_assets")
    package = Path(spec.origin).parent if spec and spec.origin else Path.cwd()

    def git(*args: str) -> str:
        command = ["git", "-C", str(package), *args]
        return subprocess.run(command, capture_output=True, text=True, check=False).stdout.strip()

    commit = git("rev-parse", "--short", "HEAD")
    source = f"hyper_assets from {package}"
    if commit:
        dirty = " plus uncommitted changes" if git("status", "--porcelain", "--", ".") else ""
        source = f"hyper_assets at commit {commit}{dirty}"
    return f"{source}; {versions}"


def report(rows: int, results: dict[str, PathResult]) -> str:
    """The results table, the ratios and the RSS figures, as printed text."""
    cpus = os.cpu_count() or 1
    lines = [
        f"{'path':<36} {'cold s':>7} {'warm s':>7} {'rows/s':>10} {'py peak':>8} "
        f"{'JVM':>7} {'hyperd':>7} {'other':>6}  warm breakdown (s)"
    ]
    for name, r in results.items():
        cold, warm = r.runs
        other = r.other_cpu / (r.process_seconds * cpus)
        breakdown = ", ".join(f"{k} {v:.2f}" for k, v in warm.laps.items())
        lines.append(
            f"{PATHS[name][0]:<36} {cold.seconds:7.2f} {warm.seconds:7.2f} "
            f"{rows / warm.seconds:10,.0f} {r.python_peak_rss / MB:6.0f}MB "
            f"{r.jvm_peak_rss / MB:5.0f}MB {r.hyperd_peak_rss / MB:5.0f}MB {other:6.0%}  "
            f"{breakdown}"
        )
    lines += [
        "",
        "rows/s: of the warm run. JVM, hyperd: peak RSS, sampled every 50 ms. other: CPU",
        f"that other programs used while the path's process ran, as a share of the {cpus} CPUs",
        "(high = noisy numbers).",
        "",
    ]
    ratios = [
        ("a/b", "a", "b"),
        ("c/a", "c", "a"),
        ("d/a", "d", "a"),
        ("a'/a", "a-none", "a"),
        ("f/e", "f", "e"),
    ]
    for label, top, bottom in ratios:
        if top in results and bottom in results:
            cold, warm = (
                results[top].runs[i].seconds / results[bottom].runs[i].seconds for i in (0, 1)
            )
            lines.append(f"{label:<5} cold {cold:.2f}  warm {warm:.2f}")
    if "a" in results:
        a = results["a"]
        lines.append(
            f"(a) Python peak RSS {a.python_peak_rss / MB:.0f} MB ({a.python_rss_start / MB:.0f}"
            f" MB after Spark started); whole materialize call: cold "
            f"{a.runs[0].laps['materialize']:.2f} s, warm {a.runs[1].laps['materialize']:.2f} s"
        )
    for name in sorted(CONNECT_PATHS & set(results)):
        r = results[name]
        lines.append(
            f"({name}) Python peak RSS {r.python_peak_rss / MB:.0f} MB "
            f"({r.python_rss_start / MB:.0f} MB after the Connect session started)"
        )
    expected = {"spark": 0, "d": min(SAMPLE_ROWS, rows)}
    wrong = {
        n for n, r in results.items() for x in r.runs if x.rows_in_file != expected.get(n, rows)
    }
    if wrong:
        lines.append(f"WARNING: the file holds a wrong number of rows for {sorted(wrong)}")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=DEFAULT_ROWS)
    parser.add_argument("--paths", default=",".join(PATHS), help=f"subset of {','.join(PATHS)}")
    parser.add_argument("--json", type=Path, help="also write the results here")
    parser.add_argument(
        "--wait",
        type=float,
        default=300.0,
        help="before each path, wait up to this many seconds for other programs to leave "
        "the CPUs idle (default 300; 0 to start at once)",
    )
    parser.add_argument("--child", choices=list(PATHS), help=argparse.SUPPRESS)
    parser.add_argument("--work", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--remote", help=argparse.SUPPRESS)
    parser.add_argument("--warm-up", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.warm_up:
        warm_up(args.rows, args.work, args.remote)
        return
    if args.child:
        run_child(args.child, args.rows, args.work, args.remote)
        return

    names = [n.strip() for n in args.paths.split(",") if n.strip()]
    if unknown := sorted(set(names) - set(PATHS)):
        parser.error(f"unknown paths {unknown}; choose from {', '.join(PATHS)}")
    print(
        f"{args.rows:,} rows; {os.cpu_count()} CPUs, "
        f"{psutil.virtual_memory().total / 2**30:.0f} GiB; Spark local[2]; "
        f"load average {os.getloadavg()[0]:.2f}\n{setup_description()}",
        flush=True,
    )
    results: dict[str, PathResult] = {}
    with (
        tempfile.TemporaryDirectory(prefix="hyper-bench-") as tmp,
        connect_server(Path(tmp)) if CONNECT_PATHS & set(names) else nullcontext() as remote,
    ):
        if remote:
            print("  warming the Spark Connect server up (e and f once each) ...", flush=True)
            command = [sys.executable, __file__, "--rows", str(args.rows), "--warm-up"]
            command += ["--work", tmp, "--remote", remote]
            warmed = subprocess.run(command, capture_output=True, text=True, check=False)
            if warmed.returncode:  # the same paths would fail measured: say why now
                sys.exit(f"The warm-up failed:\n{warmed.stderr[-3000:]}")
        for name in names:
            waited = wait_for_quiet(args.wait)
            print(
                f"  {PATHS[name][0]} (after {waited:.0f} s waiting for a quiet machine) ...",
                end=" ",
                flush=True,
            )
            results[name] = run_path(name, args.rows, Path(tmp), remote)
            print(", ".join(f"{r.seconds:.2f} s" for r in results[name].runs), flush=True)
    print(f"load average {os.getloadavg()[0]:.2f}\n")
    print(report(args.rows, results))
    if args.json:
        data = {"rows": args.rows, "paths": {n: asdict(r) for n, r in results.items()}}
        args.json.write_text(json.dumps(data, indent=1))


if __name__ == "__main__":
    main()
