"""One error tree: drawn at the top of errors.py, exported, none from the emulator; and
Hyper's errors mapped into it, naming the file and the table, by a real hyperd."""

from __future__ import annotations

import inspect
import re
from collections.abc import Iterator
from pathlib import Path

import pytest
from tableauhyperapi import Connection, HyperException, SqlType, TableName

import hyper_assets
from hyper_assets import HyperResource, compact, errors
from hyper_assets._engine.hyper_errors import load_errors
from hyper_assets._engine.tables import Catalog
from hyper_assets._engine.types import Column
from hyper_assets._rows.ingest import Write, write_table
from hyper_assets._rows.modes import WriteMode
from hyper_assets._rows.pending_keys import PendingKeys
from hyper_assets._rows.staging import Staged
from hyper_assets.emulator.errors import ActionBatchError, EmulatorConfigError, RestApiError

CLASSES = {
    name: cls
    for name, cls in vars(errors).items()
    if inspect.isclass(cls) and cls.__module__ == errors.__name__
}


def test_the_drawing_is_the_tree():
    """Each class appears in the docstring's drawing under its own base class."""
    drawn: dict[str, str] = {}
    parents: list[tuple[int, str]] = []
    for line in errors.__doc__.splitlines():
        match = re.match(r"^([│ ├└─]*)(\w+Error)\b", line)
        if not match:
            continue
        depth = len(match.group(1)) // 4
        parents = [(d, n) for d, n in parents if d < depth]
        drawn[match.group(2)] = parents[-1][1] if parents else "Exception"
        parents.append((depth, match.group(2)))
    actual = {name: cls.__bases__[0].__name__ for name, cls in CLASSES.items()}
    assert drawn == actual


def test_every_error_is_exported_and_no_client_error_is_the_emulators():
    for name, cls in CLASSES.items():
        assert getattr(hyper_assets, name) is cls
        assert issubclass(cls, errors.HyperAssetsError)
        assert not issubclass(cls, RestApiError)
    assert issubclass(errors.TableauJobTimeoutError, errors.TableauError)


def test_the_taxonomy_reads_right():
    """Causes, not symptoms: each error sits under what it is about."""
    assert not issubclass(errors.StagingStoreError, errors.ConfigurationError)
    assert not issubclass(errors.TableauJobTimeoutError, errors.TableauJobError)
    assert issubclass(errors.ProjectLookupError, errors.TableauError)
    assert not issubclass(errors.ProjectLookupError, errors.ConfigurationError)
    for emulators in (ActionBatchError, EmulatorConfigError):  # caught by the root all the same
        assert issubclass(emulators, errors.HyperAssetsError) and emulators.__name__ not in CLASSES
        assert not hasattr(hyper_assets, emulators.__name__)


# --- Hyper's errors, mapped at the boundary: through a real hyperd ----------------------


@pytest.fixture(scope="module")
def resource(tmp_path_factory: pytest.TempPathFactory) -> Iterator[HyperResource]:
    logs = tmp_path_factory.mktemp("logs")
    resource = HyperResource(log_dir=str(logs), lock_timeout_seconds=0.3)
    yield resource
    resource.close()


def a_file(resource: HyperResource, path: Path) -> Path:
    with resource.connect(path) as connection:
        connection.execute_command('CREATE SCHEMA "Extract"')
        connection.execute_command('CREATE TABLE "Extract"."t" (x BIGINT)')
        connection.execute_command('INSERT INTO "Extract"."t" VALUES (1), (2)')
    return path


def test_a_missing_table_names_the_file_and_the_table(resource, tmp_path):
    database = a_file(resource, tmp_path / "shop.hyper")
    with pytest.raises(errors.TableNotFoundError) as caught, resource.connect(database) as c:
        Catalog(c).columns(TableName("Extract", "orders"))
    assert str(database) in str(caught.value) and "Extract.orders" in str(caught.value)
    assert (caught.value.file, caught.value.table) == (str(database), "Extract.orders")
    assert isinstance(caught.value.__cause__, HyperException)
    # Plain SQL in a connection's block: the file named, Hyper's words name the table.
    with pytest.raises(errors.TableNotFoundError) as caught, resource.connect(database) as c:
        c.execute_list_query('SELECT * FROM "Extract"."orders"')
    assert str(database) in str(caught.value) and '"orders" does not exist' in str(caught.value)


@pytest.mark.parametrize("damage", ["garbage", "truncated"])
def test_a_corrupt_file_is_named_and_left_alone(resource, tmp_path, damage):
    database = a_file(resource, tmp_path / "shop.hyper")
    whole = database.read_bytes()
    bad = b"not a hyper file" * 100 if damage == "garbage" else whole[: len(whole) // 2]
    database.write_bytes(bad)
    corrupt = pytest.raises(errors.CorruptDatabaseError, match="remove it and materialise")
    with corrupt as caught, resource.connect(database, create=False):
        pass
    assert caught.value.file == str(database) and str(database) in str(caught.value)
    with pytest.raises(errors.CorruptDatabaseError, match=re.escape(str(database))):
        compact(resource, database)
    assert database.read_bytes() == bad


def test_a_locked_file_is_named(resource, hyper, tmp_path):
    database = a_file(resource, tmp_path / "shop.hyper")
    # The session's hyperd plays Tableau Desktop: another process with the file open.
    locked = pytest.raises(errors.DatabaseLockedError)
    with Connection(hyper.endpoint, str(database)), locked as e, resource.connect(database):
        pass
    assert e.value.file == str(database) and "stayed locked" in str(e.value)


def test_a_load_hyper_refuses_names_the_file_and_the_table(resource, tmp_path):
    database = a_file(resource, tmp_path / "shop.hyper")
    staged = tmp_path / "part-0.parquet"
    staged.write_bytes(b"PAR1 but not parquet at all PAR1")
    write = Write(TableName("Extract", "t"), [Column("x", SqlType.big_int())], WriteMode.APPEND)
    refused = pytest.raises(errors.IngestError, match="rows are unchanged")
    with refused as caught, resource.connect(database) as connection:
        write_table(connection, write, Staged((staged,), 1), PendingKeys(database))
    assert str(database) in str(caught.value) and "table Extract.t" in str(caught.value)
    assert (caught.value.file, caught.value.table) == (str(database), "Extract.t")
    with resource.connect(database) as connection:
        assert connection.execute_list_query('SELECT x FROM "Extract"."t" ORDER BY x') == [[1], [2]]


def test_a_key_type_hyper_refuses_is_a_key_type_error_naming_no_table_of_a_swap(resource, tmp_path):
    """The fallback of what `key_types` refuses before: Hyper's words about the new table
    a swap makes name the user's table instead."""
    database = a_file(resource, tmp_path / "shop.hyper")
    stores = TableName("Extract", "stores")
    with resource.connect(database) as connection:
        connection.execute_command(
            'CREATE TABLE "Extract"."stores__hyper_assets_new" (k TEXT, ASSUMED PRIMARY KEY (k))'
        )
        with pytest.raises(errors.KeyTypeError) as caught, load_errors(stores):
            connection.execute_command(
                'CREATE TABLE "Extract"."sales" (k BIGINT, ASSUMED FOREIGN KEY (k) '
                'REFERENCES "Extract"."stores__hyper_assets_new" (k))'
            )
    message = str(caught.value)
    assert message.startswith("Extract.stores: a foreign key's columns and the primary key")
    assert 'table "Extract"."stores"' in message and "__hyper_assets" not in message
    assert "Cast the key columns in the asset" in message


def test_a_hyperd_that_cannot_start_is_named(tmp_path):
    resource = HyperResource(log_dir=str(tmp_path / "logs"), parameters={"no_such_knob": "1"})
    failed = pytest.raises(errors.HyperStartError, match=r"no_such_knob.*HyperResource\(param")
    with failed, resource.connect(tmp_path / "shop.hyper"):
        pass
    assert not (tmp_path / "shop.hyper").exists()
