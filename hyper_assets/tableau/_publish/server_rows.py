"""What overwriting a data source would replace: the rows of the server's copy, per table.

A publish refuses to overwrite a data source it did not publish from this file, and its
advice (publish with `full=True`) would replace the server's copy with the file. So the
refusal states the rows of both: the server's copy is downloaded ("Download Data Source")
into a temporary directory beside the file and counted with the shared hyperd. When that
fails the count is unknown, and the refusal says why.
"""

from __future__ import annotations

import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from tableauhyperapi import Connection, TableName

from hyper_assets._base.files import MEGABYTE
from hyper_assets._engine.resource import HyperResource
from hyper_assets._engine.sql import count_rows, table_label
from hyper_assets._engine.tables import Catalog
from hyper_assets.errors import HyperFileError, TableauError
from hyper_assets.tableau._rest.client import TableauClient

#: The largest server copy downloaded to count its rows; a larger one's count is unknown.
MAX_DOWNLOAD_BYTES = 2048 * MEGABYTE


@dataclass(frozen=True)
class RowCounts:
    """The rows of each table of a `.hyper` file, as (label, rows) in the file's order."""

    tables: tuple[tuple[str, int], ...]

    def __str__(self) -> str:
        total = sum(rows for _, rows in self.tables)
        each = ", ".join(f"{label} {rows:,}" for label, rows in self.tables)
        return f"{total:,} rows ({each})"


def count_tables(connection: Connection, tables: Sequence[TableName]) -> RowCounts:
    """The rows of `tables` in the file of `connection`."""
    return RowCounts(tuple((table_label(t), count_rows(connection, t)) for t in tables))


def server_rows(
    client: TableauClient,
    hyper: HyperResource,
    datasource_id: str,
    beside: Path,
    max_bytes: int = MAX_DOWNLOAD_BYTES,
) -> RowCounts | str:
    """The rows of the data source's copy on the server, or why they are unknown."""
    try:
        with tempfile.TemporaryDirectory(prefix=".server-copy-", dir=beside) as temporary:
            copy = client.download_datasource(datasource_id, Path(temporary), max_bytes=max_bytes)
            with hyper.lock(copy), hyper.open(copy, create=False) as connection:
                return count_tables(connection, Catalog(connection).tables())
    except (TableauError, HyperFileError, OSError) as err:
        return f"an unknown number of rows (its download failed: {err})"


def rows_at_stake(server: RowCounts | str, local: RowCounts) -> str:
    """The sentence a refusal states: the server copy's rows against this file's."""
    return f"the server's copy holds {server}; this file holds {local}."
