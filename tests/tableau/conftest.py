"""Fixtures for the action-batch and emulator tests: write and read real `.hyper` files."""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import pytest
import tableauserverclient as TSC
from sales_world import Setup, World
from tableauhyperapi import (
    Connection,
    CreateMode,
    Inserter,
    SchemaName,
    TableDefinition,
    TableName,
    escape_name,
)

from hyper_assets._engine.process import SharedHyper
from hyper_assets.emulator import ConnectedApp, Emulator

Column = TableDefinition.Column
Tables = Mapping[tuple[str, str], tuple[Sequence[Column], Sequence[tuple[Any, ...]]]]


def _plain(value: Any) -> Any:
    """Hyper's Date/Timestamp values as Python's, so rows compare with literals."""
    if hasattr(value, "to_datetime"):
        return value.to_datetime()
    if hasattr(value, "to_date"):
        return value.to_date()
    return value


class HyperFiles:
    """Create `.hyper` files from table specs and read every table back as sorted rows."""

    def __init__(self, hyper: SharedHyper) -> None:
        self.hyper = hyper

    def create(
        self, path: Path, tables: Tables, references: Sequence[tuple[str, str, str]] = ()
    ) -> Path:
        """`references` are ASSUMED foreign keys (table, column, dimension), all in schema
        Extract, each to the dimension's NOT NULL `id`, made its primary key."""
        with Connection(self.hyper.endpoint, path, CreateMode.CREATE_AND_REPLACE) as conn:
            for (schema, table), (columns, rows) in tables.items():
                conn.catalog.create_schema_if_not_exists(SchemaName(schema))
                definition = TableDefinition(TableName(schema, table), columns)
                conn.catalog.create_table(definition)
                with Inserter(conn, definition) as inserter:
                    inserter.add_rows(rows)
                    inserter.execute()
            for dimension in dict.fromkeys(d for _, _, d in references):
                conn.execute_command(
                    f"ALTER TABLE {TableName('Extract', dimension)} ADD ASSUMED PRIMARY KEY (id)"
                )
            for table, column, dimension in references:
                conn.execute_command(
                    f"ALTER TABLE {TableName('Extract', table)} ADD ASSUMED FOREIGN KEY "
                    f"({escape_name(column)}) REFERENCES {TableName('Extract', dimension)} (id)"
                )
        return path

    def read(self, path: Path) -> dict[str, list[tuple[Any, ...]]]:
        """Every table as `schema.table` -> rows sorted by their repr."""
        out: dict[str, list[tuple[Any, ...]]] = {}
        with Connection(self.hyper.endpoint, path) as conn:
            for schema in conn.catalog.get_schema_names():
                for table in conn.catalog.get_table_names(schema):
                    rows = conn.execute_list_query(f"SELECT * FROM {table}")
                    key = f"{schema.name.unescaped}.{table.name.unescaped}"
                    out[key] = sorted((tuple(_plain(v) for v in row) for row in rows), key=repr)
        return out

    def column_names(self, path: Path, schema: str, table: str) -> list[str]:
        with Connection(self.hyper.endpoint, path) as conn:
            definition = conn.catalog.get_table_definition(TableName(schema, table))
            return [c.name.unescaped for c in definition.columns]


@pytest.fixture(scope="session")
def hyper_files(hyper: SharedHyper) -> HyperFiles:
    return HyperFiles(hyper)


TOKEN_NAME, TOKEN_SECRET = "ci", "s3cret-tøken"
SITE = "analytics"  # tests run on a site with a content URL, as on Tableau Cloud
APP = ConnectedApp("app-client-id", "app-secret-id", "app-s3cret-value-0xBEEF")
RAW_TOKEN = ("raw", "raw-secret")  # a second token, so an httpx session and TSC coexist


def _tests_emulator(data_dir: Path, hyper: SharedHyper) -> Emulator:
    """The tests' emulator (not started) on `data_dir`: the default site and `SITE`, both
    tokens and the connected app, 1 MiB payloads, the session's hyperd."""
    return Emulator(
        data_dir,
        tokens={TOKEN_NAME: TOKEN_SECRET, RAW_TOKEN[0]: RAW_TOKEN[1]},
        hyper=hyper,
        max_payload_bytes=2**20,
        sites=("", SITE),
        connected_apps=[APP],
    )


@pytest.fixture
def emulator(tmp_path: Path, hyper: SharedHyper) -> Iterator[Emulator]:
    """A started emulator on a free port, sharing the session's hyperd."""
    data_dir = tmp_path / "server"
    data_dir.mkdir()
    with _tests_emulator(data_dir, hyper) as running:
        yield running


@pytest.fixture(scope="module")
def module_emulator(
    tmp_path_factory: pytest.TempPathFactory, hyper: SharedHyper
) -> Iterator[Emulator]:
    """As `emulator`, one for the test module: its tests share what it holds."""
    with _tests_emulator(tmp_path_factory.mktemp("server"), hyper) as running:
        yield running


@pytest.fixture
def server(emulator: Emulator) -> Iterator[TSC.Server]:
    """A real tableauserverclient signed in to site `SITE` with a personal access token."""
    tsc = TSC.Server(emulator.url, use_server_version=True)
    tsc.auth.sign_in(TSC.PersonalAccessTokenAuth(TOKEN_NAME, TOKEN_SECRET, site_id=SITE))
    yield tsc
    tsc.auth.sign_out()


@pytest.fixture
def setup(tmp_path: Path, emulator: Emulator, hyper_files: Any, hyper: SharedHyper) -> Setup:
    """The sales star (`sales_world`) in a fresh file, to publish to the emulator."""
    return Setup(World(), tmp_path / "sales.hyper", emulator, hyper_files, hyper)
