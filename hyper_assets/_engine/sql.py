"""Internal: SQL helpers every module that talks to Hyper shares (transactions, ATTACH,
creating a file)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager, suppress
from pathlib import Path

from tableauhyperapi import Connection, HyperException, TableName, escape_name

from hyper_assets._base.files import set_mode


@contextmanager
def transaction(connection: Connection) -> Iterator[None]:
    """BEGIN ... COMMIT, rolled back on any exception (a failed statement aborts it)."""
    connection.execute_command("BEGIN TRANSACTION")
    try:
        yield
    except BaseException:
        with suppress(HyperException):
            connection.execute_command("ROLLBACK")
        raise
    connection.execute_command("COMMIT")


#: The suffixes of the tables a swap makes beside the one it replaces
#: (`hyper_assets._rows.swap`): the new table, and the old one renamed aside. No
#: message names them: `user_names` puts the user's table in their place.
NEW_SUFFIX = "__hyper_assets_new"
OLD_SUFFIX = "__hyper_assets_old"


def user_names(text: str) -> str:
    """`text` (Hyper's words) naming the tables a swap makes as the table they stand for."""
    return text.replace(NEW_SUFFIX, "").replace(OLD_SUFFIX, "")


def table_label(table: TableName) -> str:
    """`schema.table` as a user reads it in an error message."""
    return ".".join(n.unescaped for n in (table.schema_name.name, table.name) if n)


def attach(
    connection: Connection, path: str | Path, alias: str, *, read_only: bool = False
) -> None:
    """ATTACH the `.hyper` at `path` as `alias`; read-only when it must not change."""
    mode = " WITH (access_mode = readonly)" if read_only else ""
    connection.execute_command(
        f"ATTACH DATABASE {escape_name(str(Path(path).resolve()))} AS {escape_name(alias)}{mode}"
    )


def create_database(connection: Connection, path: Path, *, version: int | None = None) -> None:
    """Creates the `.hyper` file `path` unless it exists (in format `version`, if given),
    with the library's one mode (`file_mode()`): hyperd would give it its own."""
    with_version = "" if version is None else f" WITH VERSION {version}"
    connection.execute_command(
        f"CREATE DATABASE IF NOT EXISTS {escape_name(str(path))}{with_version}"
    )
    set_mode(path)


def detach(connection: Connection, alias: str) -> None:
    connection.execute_command(f"DETACH DATABASE {escape_name(alias)}")


def count_rows(connection: Connection, table: TableName, where: str | None = None) -> int:
    """Rows of `table`, or of those matching the SQL predicate `where`."""
    condition = f" WHERE {where}" if where else ""
    return int(connection.execute_scalar_query(f"SELECT COUNT(*) FROM {table}{condition}"))
