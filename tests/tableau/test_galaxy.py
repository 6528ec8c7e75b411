"""A galaxy published from its true model: two facts share `airports`, and `flights` holds two
keys to it (origin and destination). Each data source's copy is the tree Tableau takes, a
copy of `airports` per role; the emulator (which refuses anything but a tree) holds the
copies, each with exactly the rows of the local `airports`, and every change follows."""

from pathlib import Path
from typing import Any

import dagster as dg
import pyarrow as pa
import pytest
from helpers import assert_copy, query
from tableauhyperapi import Connection

from hyper_assets import HyperIOManager, TableauServerResource, TokenSignIn
from hyper_assets._engine.process import SharedHyper
from hyper_assets._rows.outbox import Outbox
from hyper_assets.emulator import Emulator
from hyper_assets.tableau._dagster.assets import tableau_datasource_asset

TOKEN_NAME, TOKEN_SECRET, SITE = "ci", "s3cret-tøken", "analytics"  # as in conftest.py
DAYS = dg.DailyPartitionsDefinition(start_date="2024-03-01", end_date="2024-03-10")
AIRPORT_KEY = "Extract.airports.faa"

#: Each data source, and the local table each table of its copy holds the rows of.
FLIGHTS = {"flights": "flights", "airports (origin)": "airports", "airports (dest)": "airports"}
WEATHER = {"weather": "weather", "airports": "airports"}


class Galaxy:
    def __init__(self, database: Path, emulator: Emulator, hyper: SharedHyper) -> None:
        self.database, self.emulator, self.hyper = database, emulator, hyper
        self.airports_metadata: dict[str, Any] = {"primary_key": ["faa"]}
        self.airports = [("JFK", "New York"), ("LAX", "Los Angeles"), ("SFO", "San Francisco")]

    def assets(self) -> list[dg.AssetsDefinition]:
        galaxy = self

        @dg.asset(metadata=self.airports_metadata)
        def airports() -> pa.Table:
            faa, names = zip(*galaxy.airports, strict=True)
            return pa.table({"faa": list(faa), "name": list(names)})

        @dg.asset(
            partitions_def=DAYS,
            metadata={
                "partition_expr": "day",
                "foreign_keys": {"origin": AIRPORT_KEY, "dest": AIRPORT_KEY},
            },
        )
        def flights(context: dg.AssetExecutionContext) -> pa.Table:
            day = context.partition_time_window.start.date()
            return pa.table(
                {
                    "day": [day, day],
                    "origin": ["JFK", "LAX"],
                    "dest": ["SFO", "JFK"],
                    "seats": [day.day, day.day + 100],
                }
            )

        @dg.asset(
            partitions_def=DAYS,
            metadata={"partition_expr": "day", "foreign_keys": {"origin": AIRPORT_KEY}},
        )
        def weather(context: dg.AssetExecutionContext) -> pa.Table:
            day = context.partition_time_window.start.date()
            return pa.table({"day": [day], "origin": ["JFK"], "temp": [float(day.day)]})

        return [airports, flights, weather]

    def resources(self) -> dict[str, Any]:
        tableau = TableauServerResource(
            server_url=self.emulator.url,
            site=SITE,
            sign_in=TokenSignIn(name=TOKEN_NAME, secret=TOKEN_SECRET),
        )
        io_manager = HyperIOManager(
            database=str(self.database), staging_dir=str(self.database.parent / "staging")
        )
        return {"io_manager": io_manager, "tableau": tableau}

    def write(self, name: str, partition: str | None = None) -> None:
        (chosen,) = [a for a in self.assets() if a.key.path[-1] == name]
        result = dg.materialize([chosen], resources=self.resources(), partition_key=partition)
        assert result.success

    def publish(self, datasource: str, tables: list[str]) -> dict[str, Any]:
        assets = self.assets()
        published = tableau_datasource_asset(
            datasource=datasource,
            project="Default",
            deps=assets,
            tables=tables,
            key=f"tableau_{datasource.lower()}",
        )
        result = dg.materialize(
            [published, *assets], selection=[published.key], resources=self.resources()
        )
        (materialization,) = result.asset_materializations_for_node(published.op.name)
        metadata = {k: v.value for k, v in materialization.metadata.items()}
        sent = metadata["sent"].records
        metadata["rows"] = sorted((r.data["table"], r.data["action"], r.data["rows"]) for r in sent)
        return metadata

    def assert_copy(self, datasource: str, sources: dict[str, str]) -> None:
        """The copy holds exactly the tables of `sources`, each the rows of its local table."""
        remote = self.emulator.site_dir(SITE) / f"{datasource}.hyper"
        assert_copy(self.hyper, self.database, remote, sources)

    def remote_keys(self, datasource: str) -> list[tuple[str, str, str]]:
        """(table, its columns, the table they reference) of each foreign key of the copy,
        from Hyper's catalog."""
        remote = self.emulator.site_dir(SITE) / f"{datasource}.hyper"
        with Connection(self.hyper.endpoint, remote) as connection:
            rows = connection.execute_list_query(
                "SELECT cl.relname, CAST(con.conkey AS TEXT), ref.relname "
                "FROM pg_catalog.pg_constraint con "
                "JOIN pg_catalog.pg_class cl ON cl.oid = con.conrelid "
                "JOIN pg_catalog.pg_class ref ON ref.oid = con.confrelid "
                "WHERE con.contype = 'f' ORDER BY 2"
            )
        return [tuple(row) for row in rows]


@pytest.fixture
def galaxy(tmp_path: Path, emulator: Emulator, hyper: SharedHyper) -> Galaxy:
    return Galaxy(tmp_path / "galaxy.hyper", emulator, hyper)


def test_a_role_playing_dimension_is_published_as_a_copy_per_role(galaxy: Galaxy) -> None:
    galaxy.write("airports")
    for day in ("2024-03-01", "2024-03-02"):
        galaxy.write("flights", day)
        galaxy.write("weather", day)

    first = galaxy.publish("Flights", ["flights", "airports"])
    assert (first["publish"], first["rows"]) == (
        "full",
        [
            ("Extract.airports (dest)", "publish", 3),
            ("Extract.airports (origin)", "publish", 3),
            ("Extract.flights", "publish", 4),
        ],
    )
    assert galaxy.publish("Weather", ["weather", "airports"])["publish"] == "full"
    galaxy.assert_copy("Flights", FLIGHTS)
    galaxy.assert_copy("Weather", WEATHER)
    # flights' columns: day 1, origin 2, dest 3; each key to its own copy.
    assert galaxy.remote_keys("Flights") == [
        ("flights", "[2]", "airports (origin)"),
        ("flights", "[3]", "airports (dest)"),
    ]
    assert "copy of Extract.airports" in first["data_model"]

    # A dimension's change reaches every copy, in each data source, as an update.
    galaxy.airports = [("JFK", "New York JFK"), ("LAX", "Los Angeles"), ("BOS", "Boston")]
    galaxy.write("airports")
    flights = galaxy.publish("Flights", ["flights", "airports"])
    assert (flights["publish"], flights["rows"]) == ("update", [("Extract.airports", "replace", 3)])
    # Measured against the data source's copy (its tree), not the whole file of two facts.
    assert flights["copy_bytes"] == first["payload_bytes"]
    assert "sent, the data source's copy is" in flights["sent_vs_file"]
    galaxy.assert_copy("Flights", FLIGHTS)
    weather = galaxy.publish("Weather", ["weather", "airports"])
    assert weather["publish"] == "update"
    galaxy.assert_copy("Weather", WEATHER)
    assert not Outbox(galaxy.database).changes()

    # One partition of one fact goes to the one data source holding it.
    galaxy.write("flights", "2024-03-03")
    assert galaxy.publish("Weather", ["weather", "airports"])["publish"] == "none"
    flights = galaxy.publish("Flights", ["flights", "airports"])
    assert flights["rows"] == [("Extract.flights", "window", 2)]
    galaxy.assert_copy("Flights", FLIGHTS)


def test_the_emulator_refuses_a_file_that_is_not_a_tree(
    galaxy: Galaxy, hyper_files: Any, tmp_path: Path
) -> None:
    """The server's side, judged on its own: two keys from one table to one dimension."""
    import tableauserverclient as TSC
    from tableauhyperapi import Nullability, SqlType, TableDefinition

    Column = TableDefinition.Column
    path = hyper_files.create(
        tmp_path / "roles.hyper",
        {
            ("Extract", "flights"): (
                [Column("origin", SqlType.int()), Column("dest", SqlType.int())],
                [(1, 2)],
            ),
            ("Extract", "airports"): (
                [Column("id", SqlType.int(), Nullability.NOT_NULLABLE)],
                [(1,), (2,)],
            ),
        },
        [("flights", "origin", "airports"), ("flights", "dest", "airports")],
    )
    server = TSC.Server(galaxy.emulator.url, use_server_version=True)
    server.auth.sign_in(TSC.PersonalAccessTokenAuth(TOKEN_NAME, TOKEN_SECRET, site_id=SITE))
    project = next(p for p in TSC.Pager(server.projects) if p.name == "Default")
    with pytest.raises(TSC.ServerResponseError, match="exactly one fact table"):
        server.datasources.publish(
            TSC.DatasourceItem(project.id, name="Roles"),
            str(path),
            TSC.Server.PublishMode.Overwrite,
        )


def test_an_upsert_of_a_dimension_reaches_each_of_its_copies(galaxy: Galaxy) -> None:
    galaxy.airports_metadata |= {"write_mode": "upsert"}
    galaxy.write("airports")
    galaxy.write("flights", "2024-03-01")
    assert galaxy.publish("Flights", ["flights", "airports"])["publish"] == "full"

    galaxy.airports = [("JFK", "John F. Kennedy"), ("BOS", "Boston")]
    galaxy.write("airports")
    flights = galaxy.publish("Flights", ["flights", "airports"])
    assert (flights["publish"], flights["rows"]) == ("update", [("Extract.airports", "upsert", 2)])
    galaxy.assert_copy("Flights", FLIGHTS)  # both copies: JFK renamed, BOS added, LAX kept
    copy = galaxy.emulator.site_dir(SITE) / "Flights.hyper"
    names = query(galaxy.hyper, copy, 'SELECT name FROM "Extract"."airports (dest)" ORDER BY 1')
    assert names == [["Boston"], ["John F. Kennedy"], ["Los Angeles"], ["San Francisco"]]
