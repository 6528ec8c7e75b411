"""landing_sensor against a real Dagster instance and real files in a temp directory."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pytest
from dagster import (
    AssetCheckResult,
    AssetKey,
    AssetRecordsFilter,
    DagsterInstance,
    DailyPartitionsDefinition,
    Definitions,
    DynamicPartitionsDefinition,
    SensorDefinition,
    asset,
    asset_check,
    build_sensor_context,
    materialize,
)
from dagster._core.definitions.sensor_definition import SensorExecutionData

from demo.assets import flights, weather
from demo.definitions import build_definitions
from hyper_assets import ConfigurationError
from hyper_assets._dagster.sensors import LANDING_FILE_TAG, landing_sensor

DAYS = DailyPartitionsDefinition(start_date="2013-01-01", end_date="2014-01-01")
DAY_REGEX = r"_(\d{4}-\d{2}-\d{2})\.parquet$"
T0 = 1_700_000_000_123_456_789  # an mtime in ns, with sub-second digits


@asset(partitions_def=DAYS)
def daily() -> None:
    """The asset the sensor's job runs."""


@asset(partitions_def=DailyPartitionsDefinition(start_date="2013-01-01", end_date="2014-01-01"))
def also_daily() -> None:
    """A second asset on equal days: one file gives a partition of both."""


@asset(partitions_def=DAYS)
def not_landed() -> None:
    """An asset no landing sensor is given."""


@asset_check(asset=daily)
def daily_check() -> AssetCheckResult:
    """A check the landing runs leave out unless given it."""
    return AssetCheckResult(passed=True)


@pytest.fixture
def instance():
    with DagsterInstance.ephemeral() as ephemeral:
        yield ephemeral


def land(directory: Path, name: str, content: bytes = b"x", mtime_ns: int = T0) -> Path:
    path = directory / name
    path.write_bytes(content)
    os.utime(path, ns=(mtime_ns, mtime_ns))
    return path


def make_sensor(directory: Path, **kwargs) -> SensorDefinition:
    options = {"assets": daily, "pattern": "flights_*.parquet", "partition_key": DAY_REGEX}
    return landing_sensor(directory=directory, **options | kwargs)


def tick(sensor: SensorDefinition, instance: DagsterInstance, cursor: str | None):
    defs = Definitions(assets=[daily, also_daily], sensors=[sensor])
    context = build_sensor_context(instance=instance, cursor=cursor, definitions=defs)
    return sensor.evaluate_tick(context)


def requested(data: SensorExecutionData) -> list[tuple[str, str]]:
    return [(r.partition_key, r.run_key) for r in data.run_requests]


def test_files_with_the_same_mtime_each_run_once_in_day_order(tmp_path, instance):
    for day in ("2013-01-03", "2013-01-01", "2013-01-02"):
        land(tmp_path, f"flights_{day}.parquet")
    land(tmp_path, "weather_2013-01-01.parquet")
    land(tmp_path, ".flights_2013-01-04.parquet.tmp")
    (tmp_path / "flights_2013-01-05.parquet").mkdir()
    sensor = make_sensor(tmp_path)

    first = tick(sensor, instance, None)
    assert requested(first) == [
        (f"2013-01-0{d}", f"flights_2013-01-0{d}.parquet:{T0}:1") for d in (1, 2, 3)
    ]
    assert first.run_requests[0].tags[LANDING_FILE_TAG] == str(
        tmp_path / "flights_2013-01-01.parquet"
    )
    assert json.loads(first.cursor) == {
        "v": 1,
        "files": {f"flights_2013-01-0{d}.parquet": [T0, 1] for d in (1, 2, 3)},
    }
    second = tick(sensor, instance, first.cursor)
    assert second.run_requests == []
    assert second.skip_message == "No new files."
    assert second.cursor == first.cursor


def test_a_tick_says_which_partition_each_run_is_for(tmp_path, instance, capfd):
    """`dagster sensor preview` prints a request's run config (`{}`) alone: the sensor's
    log says which day each run loads, and from which file."""
    for day in ("2013-01-02", "2013-01-01"):
        land(tmp_path, f"flights_{day}.parquet")
    sensor = make_sensor(tmp_path)
    assert len(tick(sensor, instance, None).run_requests) == 2
    said = capfd.readouterr().err
    assert (
        f"runs of {sensor.job_name} for 2013-01-01 (flights_2013-01-01.parquet), "
        "2013-01-02 (flights_2013-01-02.parquet)"
    ) in said


def test_a_file_landing_later_in_the_same_tick_of_the_clock_is_seen(tmp_path, instance):
    land(tmp_path, "flights_2013-01-01.parquet")
    sensor = make_sensor(tmp_path)
    cursor = tick(sensor, instance, None).cursor
    land(tmp_path, "flights_2013-01-02.parquet")
    assert requested(tick(sensor, instance, cursor)) == [
        ("2013-01-02", f"flights_2013-01-02.parquet:{T0}:1")
    ]


def test_a_late_file_with_an_older_mtime_is_still_picked_up(tmp_path, instance):
    land(tmp_path, "flights_2013-01-02.parquet")
    sensor = make_sensor(tmp_path)
    cursor = tick(sensor, instance, None).cursor
    old = T0 - 86_400 * 10**9  # moved in with yesterday's mtime (mv, cp -p, rsync -t)
    land(tmp_path, "flights_2013-01-01.parquet", mtime_ns=old)
    later = tick(sensor, instance, cursor)
    assert requested(later) == [("2013-01-01", f"flights_2013-01-01.parquet:{old}:1")]
    assert tick(sensor, instance, later.cursor).run_requests == []


def test_a_rewritten_file_is_a_new_arrival_with_a_new_run_key(tmp_path, instance):
    land(tmp_path, "flights_2013-01-01.parquet")
    sensor = make_sensor(tmp_path)
    cursor = tick(sensor, instance, None).cursor
    land(tmp_path, "flights_2013-01-01.parquet", b"xy")  # same mtime, new size
    resized = tick(sensor, instance, cursor)
    assert requested(resized) == [("2013-01-01", f"flights_2013-01-01.parquet:{T0}:2")]
    land(tmp_path, "flights_2013-01-01.parquet", b"yz", mtime_ns=T0 + 1)  # same size
    touched = tick(sensor, instance, resized.cursor)
    assert requested(touched) == [("2013-01-01", f"flights_2013-01-01.parquet:{T0 + 1}:2")]
    assert tick(sensor, instance, touched.cursor).run_requests == []


def test_removed_files_leave_the_cursor_and_run_keys_survive_a_reset(tmp_path, instance):
    for day in ("2013-01-01", "2013-01-02"):
        land(tmp_path, f"flights_{day}.parquet")
    sensor = make_sensor(tmp_path)
    first = tick(sensor, instance, None)
    (tmp_path / "flights_2013-01-01.parquet").unlink()
    pruned = tick(sensor, instance, first.cursor)
    assert pruned.run_requests == []
    assert list(json.loads(pruned.cursor)["files"]) == ["flights_2013-01-02.parquet"]
    reset = tick(sensor, instance, "")  # Dagster skips run keys it already launched
    assert requested(reset) == requested(first)[1:]


def test_days_a_backfill_loaded_after_they_landed_do_not_run_again(tmp_path, instance):
    for day in ("2013-01-01", "2013-01-02"):
        assert materialize([daily], partition_key=day, instance=instance).success
    land(tmp_path, "flights_2013-01-01.parquet")  # landed before the backfill ran
    sensor = make_sensor(tmp_path)
    backfilled = tick(sensor, instance, None)
    assert backfilled.run_requests == []
    assert backfilled.skip_message == "1 file(s) were loaded by runs started after they landed"
    assert list(json.loads(backfilled.cursor)["files"]) == ["flights_2013-01-01.parquet"]
    after = time.time_ns() + 10**9
    land(tmp_path, "flights_2013-01-02.parquet", mtime_ns=after)  # landed after it
    land(tmp_path, "flights_2013-01-01.parquet", b"new", mtime_ns=after)  # rewritten
    assert requested(tick(sensor, instance, backfilled.cursor)) == [
        ("2013-01-01", f"flights_2013-01-01.parquet:{after}:3"),
        ("2013-01-02", f"flights_2013-01-02.parquet:{after}:1"),
    ]


def test_a_day_only_some_of_the_assets_hold_runs_for_all_of_them(tmp_path, instance):
    assert materialize([daily], partition_key="2013-01-01", instance=instance).success
    land(tmp_path, "flights_2013-01-01.parquet")
    sensor = make_sensor(tmp_path, assets=[daily, also_daily])
    assert requested(tick(sensor, instance, None)) == [
        ("2013-01-01", f"flights_2013-01-01.parquet:{T0}:1")
    ]
    assert materialize([also_daily], partition_key="2013-01-01", instance=instance).success
    assert tick(sensor, instance, None).run_requests == []  # both hold it now


def test_the_sensors_job_materialises_exactly_its_assets_and_the_checks_given(tmp_path, instance):
    sensor = make_sensor(tmp_path, assets=[daily, also_daily])
    assert sensor.job.name == "also_daily_daily_job"
    assert sensor.name == "also_daily_daily_job_landing_sensor"
    defs = Definitions(  # no jobs=: the sensor brings its job
        assets=[daily, also_daily, not_landed], asset_checks=[daily_check], sensors=[sensor]
    )
    result = defs.resolve_job_def(sensor.job.name).execute_in_process(
        partition_key="2013-01-02", instance=instance
    )
    assert result.success
    assert result.get_asset_check_evaluations() == []
    held = {
        key.path[-1]: [
            r.partition_key
            for r in instance.fetch_materializations(AssetRecordsFilter(asset_key=key), 10).records
        ]
        for key in (daily.key, also_daily.key, not_landed.key)
    }
    assert held == {"daily": ["2013-01-02"], "also_daily": ["2013-01-02"], "not_landed": []}
    checked = make_sensor(tmp_path, assets=[daily], checks=[daily_check], name="checked")
    defs = Definitions(assets=[daily], asset_checks=[daily_check], sensors=[checked])
    result = defs.resolve_job_def(checked.job.name).execute_in_process(
        partition_key="2013-01-03", instance=instance
    )
    assert [e.check_name for e in result.get_asset_check_evaluations()] == ["daily_check"]
    named = make_sensor(tmp_path, job_name="land_days", name="days")
    assert (named.job.name, named.name) == ("land_days", "days")


def test_two_sensors_of_the_same_assets_each_run_their_own_job(tmp_path, instance):
    """Two landing directories of one asset: each named sensor has a job of its name."""
    (tmp_path / "north").mkdir()
    (tmp_path / "south").mkdir()
    north = make_sensor(tmp_path / "north", name="north")
    south = make_sensor(tmp_path / "south", name="south")
    assert (north.job.name, south.job.name) == ("north_job", "south_job")
    land(tmp_path / "south", "flights_2013-01-02.parquet")
    defs = Definitions(assets=[daily], sensors=[north, south])
    for sensor, wanted in ((north, []), (south, ["2013-01-02"])):
        context = build_sensor_context(instance=instance, definitions=defs)
        assert [r.partition_key for r in sensor.evaluate_tick(context).run_requests] == wanted
    assert (
        defs.resolve_job_def("south_job")
        .execute_in_process(partition_key="2013-01-02", instance=instance)
        .success
    )


def test_files_without_a_partition_wait_and_are_named(tmp_path, instance):
    land(tmp_path, "flights_2014-01-01.parquet")  # after the last partition
    land(tmp_path, "flights_latest.parquet")  # no date in the name
    sensor = make_sensor(tmp_path)
    waiting = tick(sensor, instance, None)
    assert waiting.run_requests == []
    assert waiting.skip_message == (
        "2 file(s) give no partition of daily_job yet: "
        "['flights_2014-01-01.parquet', 'flights_latest.parquet']"
    )
    assert json.loads(waiting.cursor)["files"] == {}
    land(tmp_path, "flights_2013-12-31.parquet")
    assert requested(tick(sensor, instance, waiting.cursor)) == [
        ("2013-12-31", f"flights_2013-12-31.parquet:{T0}:1")
    ]


def test_a_callable_gives_the_partition_key(tmp_path, instance):
    land(tmp_path, "flights_20130105.parquet")
    sensor = make_sensor(
        tmp_path, partition_key=lambda n: f"{n[8:12]}-{n[12:14]}-{n[14:16]}", name="compact"
    )
    assert sensor.name == "compact"
    assert requested(tick(sensor, instance, None)) == [
        ("2013-01-05", f"flights_20130105.parquet:{T0}:1")
    ]


def test_dynamic_partitions_must_exist_in_the_instance(tmp_path, instance):
    stores = DynamicPartitionsDefinition(name="stores")

    @asset(partitions_def=stores)
    def sales() -> None:
        """Never executed here."""

    sensor = landing_sensor(
        assets=[sales], directory=tmp_path, pattern="sales_*.csv", partition_key=r"sales_(\w+)\.csv"
    )
    assert sensor.job.name == "sales_job"
    land(tmp_path, "sales_north.csv")
    land(tmp_path, "sales_south.csv")
    instance.add_dynamic_partitions("stores", ["north"])
    defs = Definitions(assets=[sales], sensors=[sensor])
    context = build_sensor_context(instance=instance, definitions=defs)
    result = sensor(context)  # evaluate_tick resolves dynamic keys only in a daemon
    assert [(r.partition_key, r.run_key) for r in result.run_requests] == [
        ("north", f"sales_north.csv:{T0}:1")
    ]
    assert list(json.loads(result.cursor)["files"]) == ["sales_north.csv"]


def test_a_missing_directory_is_a_clear_error(tmp_path, instance):
    sensor = make_sensor(tmp_path / "nowhere")
    with pytest.raises(
        ConfigurationError, match=r"nowhere of sensor daily_job_landing_sensor does not exist"
    ):
        tick(sensor, instance, None)
    land(tmp_path, "a_file")
    with pytest.raises(ConfigurationError, match="is not a directory"):
        tick(make_sensor(tmp_path / "a_file"), instance, None)


def test_a_foreign_cursor_is_a_clear_error(tmp_path, instance):
    with pytest.raises(ConfigurationError, match=r"not a landing_sensor cursor.*Clear it"):
        tick(make_sensor(tmp_path), instance, "1700000000.5")


@asset(partitions_def=DailyPartitionsDefinition(start_date="2014-01-01"))
def later_days() -> None:
    """Days from 2014 on: not the days of `daily`."""


@asset
def unpartitioned() -> None:
    """No partitions: no file can name one."""


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"pattern": "landing/*.parquet"}, "file-name glob"),
        ({"pattern": ""}, "file-name glob"),
        ({"partition_key": "(unclosed"}, "not a valid regex"),
        ({"assets": []}, r"needs assets to run: pass assets=\[\.\.\.\]"),
        ({"assets": "daily"}, r"takes the assets themselves \(what @asset returns\).*not 'daily'"),
        ({"assets": [AssetKey("daily")]}, r"assets themselves.*not AssetKey\(\['daily'\]\)"),
        ({"assets": [daily, unpartitioned]}, r"but unpartitioned has no partitions: give it"),
        (
            {"assets": [daily, also_daily, later_days]},
            r"must share one partitions definition, but daily, also_daily: "
            r"TimeWindowPartitionsDefinition\(start=1356998400.0, end=1388534400.0, .*\); "
            r"later_days: TimeWindowPartitionsDefinition\(start=1388534400.0, end=None, .*\)\. "
            r"Give them the same partitions_def, or give each its own landing_sensor\.",
        ),
    ],
)
def test_bad_arguments_fail_when_defined(tmp_path, kwargs, message):
    with pytest.raises(ConfigurationError, match=message):
        make_sensor(tmp_path, **kwargs)


def test_the_demo_serves_each_landing_sensor_with_its_job(tmp_path):
    """The names docs/demo.md, demo/__main__.py and tests/test_daemon.py use; no job twice."""
    defs = build_definitions(landing=str(tmp_path), database=str(tmp_path / "flights.hyper"))
    for fact in (flights, weather):
        job = defs.resolve_job_def(f"{fact.key.path[-1]}_job")
        assert job.partitions_def == fact.partitions_def
        sensor = defs.resolve_sensor_def(f"{job.name}_landing_sensor")
        assert sensor.job.name == job.name
    assert sorted(job.name for job in defs.resolve_all_job_defs()) == [
        "__ASSET_JOB",
        "daily_facts_job",
        "dimensions_job",
        "flights_job",
        "publish_job",
        "publish_lag_job",
        "weather_job",
    ]
