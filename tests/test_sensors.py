"""landing_sensor against a real Dagster instance and real files in a temp directory."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pytest
from dagster import (
    DagsterInstance,
    DailyPartitionsDefinition,
    Definitions,
    DynamicPartitionsDefinition,
    SensorDefinition,
    asset,
    build_sensor_context,
    define_asset_job,
    materialize,
)
from dagster._core.definitions.sensor_definition import SensorExecutionData

from hyper_assets import ConfigurationError
from hyper_assets.sensors import LANDING_FILE_TAG, landing_sensor

DAYS = DailyPartitionsDefinition(start_date="2013-01-01", end_date="2014-01-01")
DAY_REGEX = r"_(\d{4}-\d{2}-\d{2})\.parquet$"
T0 = 1_700_000_000_123_456_789  # an mtime in ns, with sub-second digits


@asset(partitions_def=DAYS)
def daily() -> None:
    """The asset the sensor's job runs; never executed here."""


JOB = define_asset_job("daily_job", selection=[daily])


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
    options = {"pattern": "flights_*.parquet", "partition_key": DAY_REGEX} | kwargs
    return landing_sensor(job=JOB, directory=directory, **options)


def tick(sensor: SensorDefinition, instance: DagsterInstance, cursor: str | None):
    defs = Definitions(assets=[daily], jobs=[JOB], sensors=[sensor])
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

    job = define_asset_job("sales_job", selection=[sales])
    sensor = landing_sensor(
        job=job, directory=tmp_path, pattern="sales_*.csv", partition_key=r"sales_(\w+)\.csv"
    )
    land(tmp_path, "sales_north.csv")
    land(tmp_path, "sales_south.csv")
    instance.add_dynamic_partitions("stores", ["north"])
    defs = Definitions(assets=[sales], jobs=[job], sensors=[sensor])
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


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"pattern": "landing/*.parquet"}, "file-name glob"),
        ({"pattern": ""}, "file-name glob"),
        ({"partition_key": "(unclosed"}, "not a valid regex"),
    ],
)
def test_bad_arguments_fail_when_defined(tmp_path, kwargs, message):
    with pytest.raises(ConfigurationError, match=message):
        make_sensor(tmp_path, **kwargs)
