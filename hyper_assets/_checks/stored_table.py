"""What a check reads: the asset's table in the `.hyper` file, open in Hyper.

A check finds the file through `hyper_assets._dagster.located` (a `HyperDatabase` resource, or the
`HyperIOManager`'s), reads it under the file's lock (on an object-store home, the current
generation), and first compares the file's identity with the one the asset's latest
materialisation recorded (`hyper_assets._dagster.identity`): a check of a file made anew after a
loss fails with `ExtractRecreatedError` instead of passing on what is left.
"""

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import dagster as dg
from tableauhyperapi import Connection, TableName, escape_name

from hyper_assets._dagster.identity import latest, read_identity, require_same
from hyper_assets._dagster.located import ExtractSource
from hyper_assets._dagster.spec import DEFAULT_SCHEMA, TableSpec
from hyper_assets._engine.tables import Catalog, table_label
from hyper_assets.errors import ConfigurationError, TableNotFoundError

#: How many offending values a failed check shows.
SAMPLE_SIZE = 5

ERROR, WARN = dg.AssetCheckSeverity.ERROR, dg.AssetCheckSeverity.WARN


def declared(asset: dg.AssetsDefinition) -> TableSpec:
    """The asset's metadata, parsed (and so checked) when the checks are defined.

    Only its keys are read here; the table's name needs the located default schema.
    """
    return TableSpec.parse(asset.key.path, asset.metadata_by_key.get(asset.key), DEFAULT_SCHEMA)


@dataclass(frozen=True)
class Stored:
    """The asset's table, open in Hyper, and what its metadata declares."""

    connection: Connection
    spec: TableSpec

    @property
    def table(self) -> TableName:
        return self.spec.table

    @property
    def label(self) -> str:
        return self.spec.label

    def rows(self, sql: str) -> list[list[Any]]:
        return self.connection.execute_list_query(sql)

    def unkeyed(self, columns: Sequence[str], name: str) -> str:
        """A temporary copy of `columns`, free of the table's ASSUMED keys.

        Hyper's planner trusts assumed keys: `GROUP BY` a primary key finds no repeats
        and `COUNT(DISTINCT key)` counts every row, so checks query a copy instead.
        """
        copy = escape_name(f"hyper_assets_check_{name}")
        self.connection.execute_command(f"DROP TABLE IF EXISTS {copy}")
        self.connection.execute_command(
            f"CREATE TEMPORARY TABLE {copy} AS (SELECT {sql_columns(columns)} FROM {self.table})"
        )
        return copy


@contextmanager
def open_stored(
    context: dg.AssetCheckExecutionContext,
    asset: dg.AssetsDefinition,
    source: ExtractSource,
    partitions: Sequence[str] | None = None,
) -> Iterator[Stored]:
    """The asset's table, open; `ExtractRecreatedError` when the file is not the extract
    the asset's latest materialisation (of each of `partitions`) was written to."""
    label = asset.key.to_user_string()
    located = source.locate(context.resources, f"The checks of {label}")
    spec = located.spec_for(asset.key.path, asset.metadata_by_key.get(asset.key))
    home, table = located.database, spec.table
    records = latest(context.instance, asset.key, partitions)
    with home.reading() as database:
        found = read_identity(database)
        require_same(found, records, home.uri, f"Checking {label}", asset.partitions_def)
        with home.hyper.connect(database, create=False) as connection:
            if not connection.catalog.has_table(table):
                raise TableNotFoundError(
                    f"Table {table_label(table)} is not in {home.database}: materialise "
                    f"asset {label} before checking it."
                )
            yield Stored(connection, spec)


def sql_columns(names: Sequence[str], alias: str = "") -> str:
    return ", ".join(f"{alias}{escape_name(n)}" for n in names)


def shown(values: Sequence[Any]) -> str:
    return str(values[0]) if len(values) == 1 else "(" + ", ".join(map(str, values)) + ")"


def require_columns(stored: Stored, columns: Sequence[str]) -> None:
    """`ConfigurationError` unless the stored table has each of `columns` (not_null_check)."""
    stored_names = [c.name for c in Catalog(stored.connection).columns(stored.table)]
    unknown = [c for c in columns if c not in stored_names]
    if unknown:
        raise ConfigurationError(
            f"not_null_check names {unknown}, which {stored.label} does not have; its "
            f"columns are {stored_names}. Fix the column names."
        )
