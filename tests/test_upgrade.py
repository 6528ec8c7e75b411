"""`upgrade_database()`: a file rewritten at a newer format version, every table, key and
row kept, under the database's lock; and the resource's version settings."""

from __future__ import annotations

from decimal import Decimal
from pathlib import Path

import pytest
from helpers import digest, query, table_rows
from tableauhyperapi import Connection, CreateMode, HyperException, TableName

from hyper_assets import (
    ConfigurationError,
    DatabaseLockedError,
    HyperFileError,
    HyperResource,
    VersionUpgrade,
    upgrade_database,
)
from hyper_assets._engine.process import SharedHyper
from hyper_assets._engine.tables import Catalog
from hyper_assets._engine.upgrade import file_for_write


def version_of(hyper: SharedHyper, database: Path) -> int:
    (row,) = query(hyper, database, "SELECT database_version FROM pg_catalog.hyper_database")
    return int(row[0])


@pytest.fixture
def star(tmp_path: Path, hyper: SharedHyper) -> Path:
    """A version-2 file: a dimension with a primary key, a fact referencing it."""
    path = tmp_path / "star.hyper"
    with Connection(hyper.endpoint, str(path), CreateMode.CREATE_AND_REPLACE) as connection:
        for statement in (
            'CREATE SCHEMA "Extract"',
            'CREATE TABLE "Extract".stores (k INT NOT NULL, name TEXT, ASSUMED PRIMARY KEY (k))',
            'CREATE TABLE "Extract".sales (k INT, amount NUMERIC(18, 2), '
            'ASSUMED FOREIGN KEY (k) REFERENCES "Extract".stores (k))',
            "INSERT INTO \"Extract\".stores VALUES (1, 'north'), (2, 'south')",
            'INSERT INTO "Extract".sales VALUES (1, 1.25), (2, 99999999999999.99), (1, NULL)',
        ):
            connection.execute_command(statement)
    assert version_of(hyper, path) == 2
    return path


def test_upgrade_keeps_every_table_row_and_key(hyper: SharedHyper, star: Path, tmp_path: Path):
    tables = ('"Extract".stores', '"Extract".sales')
    before = {t: table_rows(hyper, star, t, order="1, 2") for t in tables}
    resource = HyperResource()

    assert upgrade_database(star, version=3, hyper=resource) == VersionUpgrade(2, 3)
    assert version_of(hyper, star) == 3
    assert {t: table_rows(hyper, star, t, order="1, 2") for t in tables} == before
    assert (2, Decimal("99999999999999.99")) in before['"Extract".sales']
    with Connection(hyper.endpoint, str(star)) as connection:
        catalog = Catalog(connection)
        stores, sales = (catalog.keys(TableName("Extract", t)) for t in ("stores", "sales"))
        connection.execute_command('CREATE TABLE "Extract".wide (x NUMERIC(38, 2))')  # v3 only
    assert stores.primary_key == ("k",)
    (fk,) = sales.foreign_keys
    assert (fk.columns, fk.ref_table, fk.ref_columns) == (
        ("k",),
        TableName("Extract", "stores"),
        ("k",),
    )
    assert upgrade_database(star, 3, hyper=resource) is None  # already there
    assert upgrade_database(star, 2, hyper=resource) is None  # never downgraded
    assert not list(tmp_path.glob("star.hyper.*ing*"))  # no copy left behind


def test_upgrade_waits_for_the_lock_and_changes_nothing_without_it(star: Path, tmp_path: Path):
    holder = HyperResource()
    waiting = HyperResource(lock_timeout_seconds=0.3)
    before = digest(star)
    with holder.lock(star), pytest.raises(DatabaseLockedError):
        upgrade_database(star, 3, hyper=waiting)
    assert digest(star) == before


def test_a_file_that_cannot_be_created_is_named(tmp_path: Path):
    """A missing file is created before a write: Hyper's refusal names it (a path under a
    regular file, which no user may create)."""
    blocker = tmp_path / "not-a-directory"
    blocker.write_text("a regular file")
    database = blocker / "shop.hyper"
    resource = HyperResource()
    try:
        with pytest.raises(HyperFileError) as caught, file_for_write(resource, database, 2):
            pytest.fail("the block runs only once the file exists")
    finally:
        resource.close()
    assert caught.value.file == str(database)
    assert str(caught.value).startswith(f"{database}: Hyper said: ")
    assert str(caught.value).endswith("Nothing was written.")
    assert isinstance(caught.value.__cause__, HyperException)
    assert blocker.read_text() == "a regular file"


def test_a_version_hyper_does_not_write_is_refused(star: Path):
    before = digest(star)
    with pytest.raises(ConfigurationError, match="versions 0 to 4"):
        upgrade_database(star, 5)
    assert digest(star) == before


def test_the_default_version_may_not_exceed_the_cap():
    assert HyperResource().max_database_version == 4
    assert HyperResource(default_database_version=3).default_database_version == 3
    with pytest.raises(
        ConfigurationError, match=r"default_database_version=3\) is above max_database_version=2"
    ):
        HyperResource(default_database_version=3, max_database_version=2)
