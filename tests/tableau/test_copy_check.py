"""The copy check against the emulator's VizQL Data Service: a galaxy whose Flights data
source holds two role copies of airports passes; rows deleted from one partition of the
emulator's stored copy behind the publish's back fail it naming that partition and both
counts, and show as a data quality warning; a site with the service off skips it."""

from __future__ import annotations

import datetime as dt
import json
import shutil
import threading
from collections.abc import Iterator
from decimal import Decimal
from pathlib import Path
from typing import Any

import dagster as dg
import pytest
import tableauserverclient as TSC
from tableauhyperapi import Connection
from test_galaxy import SITE, TOKEN_NAME, TOKEN_SECRET, Galaxy

from hyper_assets import (
    ConnectedAppSignIn,
    CopyCheckSetupError,
    CopyFigure,
    CopyReport,
    HyperDatabase,
    HyperResource,
    TableauServerResource,
    VizqlDataServiceError,
    check_tableau_copy,
    quality_warning_sensor,
    tableau_copy_check,
    tableau_datasource_asset,
)
from hyper_assets._engine.process import SharedHyper
from hyper_assets.emulator import Emulator
from hyper_assets.tableau._publish.copy_check import _key, _plain
from hyper_assets.tableau._rest.client import TableauClient
from hyper_assets.tableau._rest.connected_app import unb64url
from hyper_assets.tableau._rest.settings import ClientSettings, ConnectedAppCredentials
from hyper_assets.tableau._rest.transport import HttpSettings

DAYS = ("2024-03-01", "2024-03-02", "2024-03-03")
FLIGHTS_TABLES = ["flights", "airports"]


@pytest.fixture(scope="module")
def built(
    tmp_path_factory: pytest.TempPathFactory, module_emulator: Emulator, hyper: SharedHyper
) -> Galaxy:
    """Airports, three days of flights and weather, published as Flights and Weather: made
    once for the module (nine materialisations), both sides' files copied as they are."""
    galaxy = Galaxy(tmp_path_factory.mktemp("galaxy") / "galaxy.hyper", module_emulator, hyper)
    galaxy.write("airports")
    for day in DAYS:
        galaxy.write("flights", day)
        galaxy.write("weather", day)
    assert galaxy.publish("Flights", FLIGHTS_TABLES)["publish"] == "full"
    assert galaxy.publish("Weather", ["weather", "airports"])["publish"] == "full"
    for side in _sides(galaxy):
        shutil.copytree(side, side.with_name(f"{side.name}-as-built"))
    return galaxy


def _sides(galaxy: Galaxy) -> tuple[Path, Path]:
    """The galaxy's directory (its file, publish state, staging) and the emulator's."""
    return galaxy.database.parent, galaxy.emulator.data_dir


@pytest.fixture
def galaxy(built: Galaxy) -> Iterator[Galaxy]:
    """The module's galaxy as built. After the test, what it changed is put back: both
    sides' files (the local file and its publish state, the emulator's copies), the site's
    VDS setting and any paused request. The emulator keeps the data sources' ids, which
    come from their names, so the publish state still names them."""
    yield built
    built.emulator.faults.resume_requests()
    built.emulator.set_vds_enabled(True, site=SITE)
    for side in _sides(built):
        shutil.rmtree(side)
        shutil.copytree(side.with_name(f"{side.name}-as-built"), side)


def _check(
    galaxy: Galaxy,
    datasource: str,
    tables: list[str],
    tableau: TableauServerResource | None = None,
    **options: Any,
) -> Any:
    return check_tableau_copy(
        HyperDatabase(database=str(galaxy.database)),
        tableau or galaxy.resources()["tableau"],
        datasource,
        "Default",
        tables=tables,
        **options,
    )


def _delete_behind_the_publish(galaxy: Galaxy, where: str) -> None:
    remote = galaxy.emulator.site_dir(SITE) / "Flights.hyper"
    with Connection(galaxy.hyper.endpoint, remote) as connection:
        assert connection.execute_command(f'DELETE FROM "Extract"."flights" WHERE {where}') == 1


def test_the_copies_of_flights_and_weather_pass_with_their_roles_among_the_tables(
    galaxy: Galaxy,
) -> None:
    report = _check(galaxy, "Flights", FLIGHTS_TABLES, partition_column="day", last_partitions=2)
    assert report.passed and not report.skipped, report.failures
    assert sorted(report.tables) == ["airports (dest)", "airports (origin)", "flights"]
    assert report.queries == 3 + 3  # fields, model, a count per table, the last partitions
    figures = {(f.table, f.partition, f.measure): (f.local, f.tableau) for f in report.figures}
    # flights' seats: day.day and day.day + 100 on each day; the last two days compared.
    assert figures["flights", None, "SUM(seats)"] == (306 + 6, 306 + 6)
    assert figures["flights", "2024-03-03", "SUM(seats)"] == (106, 106)
    assert figures["flights", "2024-03-02", "COUNT(day)"] == (2, 2)
    assert ("flights", "2024-03-01", "COUNT(day)") not in figures  # not among the last 2
    assert figures["airports (dest)", None, "COUNT(faa)"] == (3, 3)
    assert "6 VizQL Data Service queries" in report.describe()

    weather = _check(galaxy, "Weather", ["weather", "airports"], partition_column="day")
    assert weather.passed, weather.failures
    assert sorted(weather.tables) == ["airports", "weather"]
    assert {f.partition for f in weather.figures} == {None, *DAYS}


def test_rows_deleted_behind_the_publish_fail_naming_the_partition_and_both_counts(
    galaxy: Galaxy,
) -> None:
    _delete_behind_the_publish(galaxy, "day = DATE '2024-03-02' AND origin = 'LAX'")
    report = _check(galaxy, "Flights", FLIGHTS_TABLES, partition_column="day")
    assert not report.passed
    failures = report.failures
    assert (
        "table 'flights' partition '2024-03-02': COUNT(day) is 1 in Tableau's copy, 2 in the file"
        in failures
    )
    assert (
        "table 'flights' partition '2024-03-02': SUM(seats) is 2 in Tableau's copy, 104 in the "
        "file" in failures
    )
    assert "table 'flights': COUNT(day) is 5 in Tableau's copy, 6 in the file" in failures
    assert len(failures) == 4  # the table's and the partition's count and sum; no other
    assert report.describe().startswith("Tableau's copy of 'Flights' is not the file's (4 ")


def test_the_file_is_free_while_the_check_waits_on_tableau(galaxy: Galaxy) -> None:
    """While the emulator holds a VDS query, a writer opens the file at once: the check
    read the file's figures and let it go before asking Tableau."""
    held = galaxy.emulator.faults.pause_requests("POST", r"/vizql-data-service/query-datasource$")
    reports: list[CopyReport] = []
    checking = threading.Thread(
        target=lambda: reports.append(_check(galaxy, "Flights", FLIGHTS_TABLES))
    )
    checking.start()
    try:
        assert held.wait(30), "the check sent no query-datasource"
        writer = HyperDatabase(
            database=str(galaxy.database), hyper=HyperResource(lock_timeout_seconds=1)
        )
        with writer.writing() as path, writer.hyper.open(path, create=False) as connection:
            rows = connection.execute_scalar_query('SELECT COUNT(*) FROM "Extract"."flights"')
        assert rows == 6
    finally:
        galaxy.emulator.faults.resume_requests()
        checking.join(30)
    [report] = reports
    assert report.passed, report.failures


def test_a_model_that_is_not_the_tree_names_what_differs(galaxy: Galaxy) -> None:
    """Flights checked as if it held flights alone: Tableau's two role copies differ."""
    report = _check(galaxy, "Flights", ["flights"])
    assert not report.passed
    assert report.model_differences == (
        "logical table 'airports (dest)' is in Tableau's model, not the file's tree",
        "logical table 'airports (origin)' is in Tableau's model, not the file's tree",
        "relationship 'flights' -> 'airports (dest)' is in Tableau's model, not the file's tree",
        "relationship 'flights' -> 'airports (origin)' is in Tableau's model, not the file's tree",
    )


def test_only_the_check_asks_a_connected_app_for_the_scope_the_service_needs(
    galaxy: Galaxy,
) -> None:
    """The publish's JWT asks for the publish's scopes alone; the check's sign-in, with the
    same credentials, adds VDS's for its own session, so a sign-in whose scopes lack it
    (even one that could not publish) passes the check."""
    app = ("app-client-id", "app-secret-id", "app-s3cret-value-0xBEEF")  # conftest.py's APP

    def sign_in(**scopes: Any) -> ConnectedAppSignIn:
        return ConnectedAppSignIn(
            client_id=app[0], secret_id=app[1], secret_value=app[2], username="etl", **scopes
        )

    jwt = sign_in().credentials().credentials()["jwt"]
    claims = json.loads(unb64url(jwt.split(".")[1]))
    assert claims["scp"] == [
        "tableau:content:read",
        "tableau:file_uploads:create",
        "tableau:datasources:create",
        "tableau:datasources:update",
        "tableau:jobs:read",
    ]
    for scopes in ({}, {"scopes": ["tableau:content:read"]}):
        tableau = TableauServerResource(
            server_url=galaxy.emulator.url, site=SITE, sign_in=sign_in(**scopes)
        )
        assert _check(galaxy, "Weather", ["weather", "airports"], tableau).passed


def test_without_the_scope_the_service_refuses_naming_it(galaxy: Galaxy) -> None:
    """A session whose JWT lacks VDS's scope is refused with an error naming the scope,
    not a pass."""
    app = ("app-client-id", "app-secret-id", "app-s3cret-value-0xBEEF")  # conftest.py's APP
    credentials = ConnectedAppCredentials(*app, "etl", ("tableau:content:read",))
    settings = ClientSettings(
        http=HttpSettings(galaxy.emulator.url), sign_in=credentials, site=SITE
    )
    with TableauClient(settings) as client, pytest.raises(VizqlDataServiceError) as refused:
        luid = client.find_datasource("Weather", client.project("Default").id)
        assert luid is not None
        client.vds("read-metadata", {"datasource": {"datasourceLuid": luid.id}})
    assert (refused.value.status, refused.value.code) == (403, "403000")
    assert "tableau:viz_data_service:read" in str(refused.value)
    assert not refused.value.disabled


def test_with_the_service_off_the_check_is_skipped_not_failed(galaxy: Galaxy) -> None:
    galaxy.emulator.set_vds_enabled(False, site=SITE)
    report = _check(galaxy, "Flights", FLIGHTS_TABLES, partition_column="day")
    assert report.passed and report.figures == ()
    assert report.skipped is not None and "not enabled for this site" in report.skipped
    assert report.describe().startswith("Skipped: The VizQL Data Service feature is not enabled")
    # The status and path are said: a proxy's or an old server's reply looks the same.
    assert "HTTP 403 at /api/v1/vizql-data-service/get-datasource-model)" in report.skipped


@pytest.mark.slow
def test_the_asset_check_fails_and_the_quality_warning_appears(galaxy: Galaxy) -> None:
    assets = galaxy.assets()
    published = tableau_datasource_asset(
        datasource="Flights",
        project="Default",
        deps=assets,
        tables=FLIGHTS_TABLES,
        key="tableau_flights",  # as Galaxy.publish made it
    )
    copy = tableau_copy_check(published)  # its tables and partition column: the publish's
    sensor = quality_warning_sensor(published, [copy])
    resources = galaxy.resources()
    with dg.DagsterInstance.ephemeral() as instance:

        def run() -> Any:
            result = dg.materialize(
                [published, *assets, copy],
                selection=dg.AssetSelection.assets(published),  # and its check
                resources=resources,
                instance=instance,
            )
            [evaluation] = result.get_asset_check_evaluations()
            return evaluation

        def tick() -> str | None:
            tableau = {"tableau": resources["tableau"]}
            context = dg.build_sensor_context(instance=instance, resources=tableau)
            return sensor.evaluate_tick(context).skip_message

        passing = run()
        assert passing.passed and passing.check_name == "tableau_copy_matches"
        assert passing.metadata["queries"].value == 6
        _delete_behind_the_publish(galaxy, "day = DATE '2024-03-01' AND origin = 'JFK'")
        failing = run()  # nothing to send: the publish cannot see what the server lost
        assert not failing.passed
        assert "partition '2024-03-01': COUNT(day) is 1 in Tableau's copy, 2 in the file" in (
            failing.description
        )
        assert (tick() or "").startswith("Data quality warning on 'Flights' added: 1 check(s)")
        server = TSC.Server(galaxy.emulator.url, use_server_version=True)
        server.auth.sign_in(TSC.PersonalAccessTokenAuth(TOKEN_NAME, TOKEN_SECRET, site_id=SITE))
        (item,) = [d for d in TSC.Pager(server.datasources) if d.name == "Flights"]
        server.datasources.populate_dqw(item)
        [warning] = item.dqws
        assert warning.active and warning.severe is False
        assert (
            "tableau_flights tableau_copy_matches: Tableau's copy of 'Flights'" in warning.message
        )
        assert "partition '2024-03-01'" in warning.message
        server.auth.sign_out()


def test_the_check_reads_its_tables_and_partition_column_from_the_publish_asset(
    galaxy: Galaxy,
) -> None:
    airports, flights, _ = galaxy.assets()
    published = tableau_datasource_asset(
        datasource="Flights",
        project="Default",
        deps=[flights, airports],
        tables=[flights, "airports"],
        key="tableau_flights",
    )
    recorded = published.metadata_by_key[published.key]
    assert (recorded["tables"], recorded["fact"], recorded["partition_column"]) == (
        ["flights", "airports"],
        "Extract.flights",
        "day",
    )
    assert tableau_copy_check(published).check_specs  # nothing to pass twice

    by_keys = tableau_datasource_asset(
        datasource="Flights", project="Default", deps=[flights.key, airports.key], key="by_keys"
    )
    with pytest.raises(CopyCheckSetupError) as unknown:
        tableau_copy_check(by_keys)
    assert str(unknown.value).startswith(
        "tableau_copy_check: publish asset 'by_keys' records no fact table"
    )
    assert "Pass partition_column=" in str(unknown.value)
    assert tableau_copy_check(by_keys, partition_column="day").check_specs  # an override
    assert "or False where it has none" in str(unknown.value)
    assert tableau_copy_check(by_keys, partition_column=False).check_specs  # not partitioned


def test_a_file_ahead_of_its_publish_is_skipped_without_asking_tableau(galaxy: Galaxy) -> None:
    """A day of flights written again after the publish: Flights' copy cannot equal the file
    until the next publish, so its check is skipped, naming the change, and sends no query;
    Weather, which holds no flights, is compared; after the publish, Flights is too."""
    galaxy.write("flights", DAYS[1])
    ahead = _check(galaxy, "Flights", FLIGHTS_TABLES, partition_column="day")
    assert ahead.passed and ahead.unpublished == 1 and ahead.queries == 0
    assert ahead.skipped == (
        "1 change(s) of Extract.flights written since the last publish are not in Tableau's "
        "copy yet; the check compares the copy once they are published."
    )
    weather = _check(galaxy, "Weather", ["weather", "airports"])
    assert weather.passed and weather.skipped is None and weather.figures
    assert galaxy.publish("Flights", FLIGHTS_TABLES)["publish"] != "full"
    caught_up = _check(galaxy, "Flights", FLIGHTS_TABLES, partition_column="day")
    assert caught_up.passed and caught_up.skipped is None and caught_up.figures


@pytest.mark.parametrize(
    ("value", "shown", "sent"),
    [
        (Decimal("202401"), "202401", 202401),  # a NUMERIC(6,0) month, as yyyymm
        (Decimal("1.50"), "1.5", 1.5),  # as the service's JSON has it
        (dt.date(2024, 3, 1), "2024-03-01", "2024-03-01"),
        (dt.datetime(2024, 3, 1, 6), "2024-03-01T06:00:00", "2024-03-01T06:00:00"),
        (7, "7", 7),
        ("JFK", "JFK", "JFK"),
    ],
)
def test_a_partition_value_is_shown_and_sent_as_the_service_has_it(
    value: Any, shown: str, sent: Any
) -> None:
    assert (_key(value), _plain(value)) == (shown, sent)


def test_a_figure_matches_within_float_noise_and_names_both_sides() -> None:
    assert CopyFigure("flights", "SUM(seats)", 0.1 + 0.2, 0.3).matches
    assert not CopyFigure("flights", "SUM(seats)", 0.3, 0.31).matches
    lost = CopyFigure("flights", "COUNT(day)", 2, None, "2024-03-02")
    assert not lost.matches
    assert str(lost) == (
        "table 'flights' partition '2024-03-02': COUNT(day) is absent in Tableau's copy, "
        "2 in the file"
    )
    report = CopyReport("Flights", figures=(lost,) * 21, queries=4)
    assert report.describe().endswith("; and 1 more.")
    assert CopyReport("Flights", skipped="off").describe() == "Skipped: off"
