"""Small-run benchmark: where the fixed cost of a one-partition run goes.

Run: `PYTHONPATH=. .venv/bin/python benchmarks/small_run.py [--repeats 3] [--connect]`. What it
measures and recorded runs are in docs/performance.md ("Small runs").

A Dagster project of its own, defined in this file: a Spark dimension `stores` (50 rows,
primary key), a daily-partitioned Spark fact `sales` (4,000 rows a day, primary key,
foreign key to `stores`) stored by `HyperIOManager`, and the library's four checks on it
(`build_hyper_checks`: primary key, foreign keys, row count, NULLs). Every run is one
partition (2024-01-02), executed by `dagster.execute_job` on a real `DagsterInstance`
(a temporary DAGSTER_HOME) in a fresh Python process (as `dagster asset materialize`
starts one), each step in its own process unless a path says otherwise.

Paths, each run in turn, `--repeats` times, on the same instance:

- bare:        the same frame returned as `df.toArrow()` (a Spark frame does not pickle)
               to Dagster's default IO manager (`FilesystemIOManager`). The baseline.
- hyper:       `sales` and its checks in one run, default multiprocess executor: every
               step a new process, the fact's with a JVM. The checks are partitioned
               (one result per partition), `build_hyper_checks`' default.
- hyper-unpart: the same with `build_hyper_checks(partitioned=False)`: the checks read
               the whole table and give one result each.
- hyper-only:  `sales` alone (no checks).
- checks-inproc: the four checks in a job of their own with `in_process_executor`,
               right after hyper-only; the row shows hyper-only + this run.
- hyper-inproc: `sales` and its checks with `in_process_executor` (one process).
- hyper-fork:  `sales` and its checks, multiprocess with `start_method: forkserver`
               (each step forks from a server that imported the project once).
- bare-connect / hyper-connect: bare and hyper with steps that reach a Spark Connect
               server (local[2], started once by the benchmark, like a cluster): no JVM
               in any step. `--connect` adds them.

Phases come from the run's event log: `start` is a step's process start until its
resources begin (spawn, imports), `resources` their initialisation (the Spark session:
a JVM for local Spark), `body+io` the asset's own code and its output, `io` the IO
manager's stage + load seconds (from the materialisation metadata). `checks` is the span
from the first check step's process start to the last check step's end.
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path

import dagster as dg
import pyarrow as pa
from dagster_pyspark import PySparkResource

from hyper_assets import HyperIOManager, build_hyper_checks

DATA = Path(os.environ.get("SMALL_RUN_DATA", tempfile.gettempdir() + "/small-run"))
REMOTE = os.environ.get("SMALL_RUN_REMOTE")  # sc:// URL of the Connect paths
ROWS, STORES = 4000, 50
DAY = "2024-01-02"
days = dg.DailyPartitionsDefinition(start_date="2024-01-01", end_date="2024-02-01")

SPARK_CONF = {
    "spark.master": "local[2]",
    "spark.ui.enabled": "false",
    "spark.sql.session.timeZone": "UTC",
    "spark.sql.shuffle.partitions": "2",
}


def _frame(pyspark: PySparkResource, day: str):
    offset = days.get_partition_keys().index(day)
    return pyspark.spark_session.range(ROWS).selectExpr(
        f"id + {offset * ROWS} AS sale_id",
        f"DATE'{day}' AS sale_date",
        f"id % {STORES} AS store_id",
        "CAST(id % 997 AS DECIMAL(10, 2)) AS amount",
    )


@dg.asset(metadata={"primary_key": ["store_id"]})
def stores(pyspark: PySparkResource):
    return pyspark.spark_session.range(STORES).selectExpr(
        "id AS store_id", "concat('store-', id) AS name"
    )


@dg.asset(
    partitions_def=days,
    deps=[stores],
    metadata={
        "partition_expr": "sale_date",
        "primary_key": ["sale_id"],
        "foreign_keys": {"store_id": "Extract.stores.store_id"},
    },
)
def sales(context: dg.AssetExecutionContext, pyspark: PySparkResource):
    return _frame(pyspark, context.partition_key)


@dg.asset(partitions_def=days, io_manager_key="bare_io")
def sales_bare(context: dg.AssetExecutionContext, pyspark: PySparkResource) -> pa.Table:
    return _frame(pyspark, context.partition_key).toArrow()


checks = build_hyper_checks([sales], not_null={"sales": ["amount"]})
unpartitioned_checks = build_hyper_checks(
    [sales], not_null={"sales": ["amount"]}, partitioned=False
)
in_process = dg.in_process_executor
jobs = [
    dg.define_asset_job("dims", [stores]),
    dg.define_asset_job("bare", [sales_bare]),
    dg.define_asset_job("hyper", dg.AssetSelection.assets(sales)),
    dg.define_asset_job("hyper_only", dg.AssetSelection.assets(sales).without_checks()),
    dg.define_asset_job(  # checks of a partitioned asset run without a partition
        "checks_only", dg.AssetSelection.checks_for_assets(sales), executor_def=in_process
    ),
    dg.define_asset_job("hyper_inproc", dg.AssetSelection.assets(sales), executor_def=in_process),
]
RESOURCES = {
    "io_manager": HyperIOManager(database=str(DATA / "sales.hyper")),
    "bare_io": dg.FilesystemIOManager(base_dir=str(DATA / "bare")),
    "pyspark": PySparkResource(
        spark_config={"spark.remote": REMOTE, "spark.sql.session.timeZone": "UTC"}
        if REMOTE
        else SPARK_CONF
    ),
}
defs = dg.Definitions(
    assets=[stores, sales, sales_bare], asset_checks=checks, jobs=jobs, resources=RESOURCES
)
unpartitioned_defs = dg.Definitions(  # the same assets, their checks unpartitioned
    assets=[sales],
    asset_checks=unpartitioned_checks,
    jobs=[dg.define_asset_job("hyper", dg.AssetSelection.assets(sales))],
    resources=RESOURCES,
)


def dims_job() -> dg.JobDefinition:
    return defs.resolve_job_def("dims")


def bare_job() -> dg.JobDefinition:
    return defs.resolve_job_def("bare")


def hyper_job() -> dg.JobDefinition:
    return defs.resolve_job_def("hyper")


def hyper_unpartitioned_job() -> dg.JobDefinition:
    return unpartitioned_defs.resolve_job_def("hyper")


def hyper_only_job() -> dg.JobDefinition:
    return defs.resolve_job_def("hyper_only")


def checks_only_job() -> dg.JobDefinition:
    return defs.resolve_job_def("checks_only")


def hyper_inproc_job() -> dg.JobDefinition:
    return defs.resolve_job_def("hyper_inproc")


QUIET = {"loggers": {"console": {"config": {"log_level": "WARNING"}}}}
FORKSERVER = QUIET | {
    "execution": {"config": {"multiprocess": {"start_method": {"forkserver": {}}}}}
}
#: path: the runs it makes, each (job, run config)
PATHS = {
    "bare": [(bare_job, None)],
    "hyper": [(hyper_job, None)],
    "hyper-unpart": [(hyper_unpartitioned_job, None)],
    "hyper-only": [(hyper_only_job, None)],
    "checks-inproc": [(hyper_only_job, None), (checks_only_job, None)],
    "hyper-inproc": [(hyper_inproc_job, None)],
    "hyper-fork": [(hyper_job, FORKSERVER)],
}
CONNECT_PATHS = {"bare-connect": PATHS["bare"], "hyper-connect": PATHS["hyper"]}


@dataclass
class Measured:
    """One path's run(s): wall seconds and the phases read from the event log."""

    wall: float
    phases: dict[str, float]


def _phases(instance: dg.DagsterInstance, run_id: str) -> dict[str, float]:
    """Seconds per phase of the run's steps (see the module docstring)."""
    at: dict[str, dict[str, float]] = defaultdict(dict)
    io = 0.0
    for record in instance.all_logs(run_id):
        event = record.dagster_event
        if event is None:
            continue
        step = event.step_key or "run"
        at[step].setdefault(event.event_type.name, record.timestamp)
        if event.event_type.name == "ASSET_MATERIALIZATION":
            metadata = event.event_specific_data.materialization.metadata
            io += sum(metadata[k].value for k in ("stage_seconds", "load_seconds") if k in metadata)
    phases: dict[str, float] = {}
    run = at.pop("run")
    phases["run"] = run.get("RUN_SUCCESS", run.get("RUN_FAILURE", 0.0)) - run["RUN_START"]
    # the checks' step(s): one per asset (build_hyper_checks), or one per check (older)
    names = ("hyper_checks", "primary_key", "foreign_keys", "row_count", "not_null")
    check_steps = {k: v for k, v in at.items() if any(n in k for n in names)}
    for key in check_steps:
        at.pop(key)
    for events in at.values():  # the asset step; in one process, resources are the run's
        ev = run | events
        begun = ev.get("STEP_WORKER_STARTING", ev.get("RESOURCE_INIT_STARTED", ev["STEP_START"]))
        phases["start"] = ev.get("RESOURCE_INIT_STARTED", begun) - begun
        phases["resources"] = ev.get("RESOURCE_INIT_SUCCESS", 0) - ev.get(
            "RESOURCE_INIT_STARTED", 0
        )
        phases["body+io"] = ev["STEP_SUCCESS"] - ev["STEP_START"]
        phases["io"] = io
    if check_steps:
        first = min(e.get("STEP_WORKER_STARTING", e["STEP_START"]) for e in check_steps.values())
        phases["checks"] = max(e["STEP_SUCCESS"] for e in check_steps.values()) - first
    return phases


def run_path(instance: dg.DagsterInstance, runs: list) -> Measured:
    wall, phases = 0.0, {}
    for job, config in runs:
        started = time.perf_counter()
        # a fresh interpreter per run, as `dagster asset materialize` or a run launcher
        # starts: nothing (a JVM, imports) carries over from one run to the next
        command = [sys.executable, __file__, "--run", job.__name__]
        command += ["--config", json.dumps(config or QUIET)]
        done = subprocess.run(command, capture_output=True, text=True, check=False)
        wall += time.perf_counter() - started
        run_id = done.stdout.split()[-1] if done.returncode == 0 else None
        if run_id is None:
            raise SystemExit(f"{job.__name__} failed:\n{done.stdout}\n{done.stderr[-3000:]}")
        for name, seconds in _phases(instance, run_id).items():
            phases[name] = phases.get(name, 0.0) + seconds
    return Measured(wall, phases)


def _run(job_name: str, config: dict) -> None:
    """One run of `job_name` on the instance of DAGSTER_HOME; prints its run id."""
    job = globals()[job_name]
    with dg.DagsterInstance.get() as instance:
        result = dg.execute_job(
            dg.reconstructable(job),
            instance,
            run_config=config,
            tags={"dagster/partition": DAY} if job().partitions_def else {},
        )
    if not result.success:
        raise SystemExit(f"{job_name} failed: see run {result.run_id}")
    print(result.run_id)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--paths", default=",".join(PATHS))
    parser.add_argument("--connect", action="store_true", help="add the Spark Connect paths")
    parser.add_argument("--run", help=argparse.SUPPRESS)  # one run, in a child process
    parser.add_argument("--config", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.run:
        return _run(args.run, json.loads(args.config))
    names = args.paths.split(",") + (list(CONNECT_PATHS) if args.connect else [])
    with tempfile.TemporaryDirectory(prefix="small-run-") as work:
        os.environ["SMALL_RUN_DATA"] = str(Path(work) / "data")
        os.environ["DAGSTER_HOME"] = str(Path(work) / "home")
        Path(os.environ["DAGSTER_HOME"]).mkdir()
        (Path(work) / "home" / "dagster.yaml").write_text("telemetry:\n  enabled: false\n")
        measured = _measure(names, args.repeats, Path(work))
    _report(measured)


def _measure(names: list[str], repeats: int, work: Path) -> dict[str, list[Measured]]:
    measured: dict[str, list[Measured]] = defaultdict(list)
    with dg.DagsterInstance.get() as instance:
        run_path(instance, [(dims_job, None)])
        run_path(instance, [(hyper_job, None)])  # the previous run the row count compares to
        for repeat in range(repeats):
            local = [n for n in names if n not in CONNECT_PATHS]
            for name in local if repeat % 2 == 0 else local[::-1]:
                measured[name].append(run_path(instance, PATHS[name]))
                print(f"{repeat + 1}/{repeats} {name}: {measured[name][-1].wall:.1f} s", flush=True)
        connect = [n for n in names if n in CONNECT_PATHS]
        if connect:
            _measure_connect(instance, connect, repeats, work, measured)
    return measured


def _measure_connect(
    instance: dg.DagsterInstance,
    names: list[str],
    repeats: int,
    work: Path,
    measured: dict[str, list[Measured]],
) -> None:
    sys.path[:0] = [str(Path(__file__).resolve().parent.parent / "tests")]
    from cluster import connect_server

    server = work / "connect-server"
    server.mkdir()
    with connect_server(server) as url:
        os.environ["SMALL_RUN_REMOTE"] = url
        for repeat in range(repeats):
            for name in names if repeat % 2 == 0 else names[::-1]:
                measured[name].append(run_path(instance, CONNECT_PATHS[name]))
                print(f"{repeat + 1}/{repeats} {name}: {measured[name][-1].wall:.1f} s", flush=True)
        os.environ.pop("SMALL_RUN_REMOTE")


def _report(measured: dict[str, list[Measured]]) -> None:
    phase_names = ["run", "start", "resources", "body+io", "io", "checks"]
    print()
    print(
        f"{'path':<15}{'wall s (median, min-max)':>27}{'/ bare':>8}  "
        + "".join(f"{p:>10}" for p in phase_names)
    )
    base = {
        "": statistics.median(m.wall for m in measured.get("bare", []))
        if "bare" in measured
        else None,
        "-connect": statistics.median(m.wall for m in measured["bare-connect"])
        if "bare-connect" in measured
        else None,
    }
    for name, runs in measured.items():
        walls = [m.wall for m in runs]
        median = statistics.median(walls)
        bare = base["-connect" if name.endswith("-connect") else ""]
        ratio = f"{median / bare:8.2f}" if bare else f"{'':>8}"
        phases = "".join(
            f"{statistics.median(m.phases.get(p, 0.0) for m in runs):10.2f}" for p in phase_names
        )
        spread = f"{median:.1f} ({min(walls):.1f}-{max(walls):.1f})"
        print(f"{name:<15}{spread:>27}{ratio}  {phases}")


if __name__ == "__main__":
    main()
