"""Mistakes caught before Spark runs: what an asset's metadata and its frame's schema (with
the stored tables' key types), or the IO manager's `database` path, already show to be wrong.

Each check raises a `ConfigurationError` naming the asset or op output (or path), what is wrong and
the fix, before any row is staged and with the stored data untouched.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Sequence
from pathlib import Path

from hyper_assets._dagster.target import Target
from hyper_assets._engine import key_types
from hyper_assets._engine.resource import HyperResource
from hyper_assets._engine.tables import Catalog
from hyper_assets._engine.types import Column
from hyper_assets._rows.ingest import Write
from hyper_assets._rows.modes import WriteMode
from hyper_assets.errors import ConfigurationError, OutputError

#: A partition_expr that looks like this names a column; anything else is SQL.
_COLUMN_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def check_frame(target: Target, columns: Sequence[Column]) -> None:
    """The frame stored as `target` has columns, among them the partition column(s), the
    primary key and the foreign-key columns its metadata names; an upsert has a primary
    key."""
    spec, subject = target.spec, target.subject
    if not columns:
        raise OutputError(
            f"{subject} returned a frame with no columns: a table needs one. Return the "
            "frame with its columns. Nothing was staged or written."
        )
    names = [c.name for c in columns]
    named = [("primary_key", k) for k in spec.keys.primary_key]
    named += [("foreign_keys", c) for fk in spec.keys.foreign_keys for c in fk.columns]
    if target.partitions is not None:
        declared = spec.partition_expr or {}
        exprs = [declared] if isinstance(declared, str) else list(declared.values())
        named += [("partition_expr", e) for e in exprs if _COLUMN_NAME.fullmatch(e)]
    for field, column in named:
        if column not in names:
            close = difflib.get_close_matches(column, names, n=1)
            hint = f"Did you mean {close[0]!r}? " if close else ""
            raise ConfigurationError(
                f"{subject}: metadata {field} names column {column!r}, which the frame it "
                f"returned does not have (its columns: {', '.join(names)}). {hint}Fix "
                f"{field} in its metadata, or add the column to the frame. Nothing "
                "was staged or written."
            )
    if spec.declared_mode == WriteMode.UPSERT and not spec.keys.primary_key:
        raise ConfigurationError(
            f'{subject}: write_mode="upsert" needs metadata primary_key=[...] naming the '
            f"columns that identify a row (its columns: {', '.join(names)}). Nothing was "
            "staged or written."
        )


def check_key_types(hyper: HyperResource, database: Path, write: Write) -> None:
    """A write to a local file whose key columns' types would break a foreign key between
    its table and another (`hyper_assets._engine.key_types`) is refused from the stored
    tables' types and the frame's schema, before anything is staged. The write judges it
    again under the file's lock (and notes a key retyped within its family), so this
    check is skipped when it would wait: for a write declaring no key (only a primary key
    is referenced), and while another writer holds the file, whose Spark work would
    otherwise wait for that writer's turn."""
    if not database.exists() or not (write.keys.primary_key or write.keys.foreign_keys):
        return
    with hyper.connect_if_free(database) as connection:
        if connection is not None:
            replaces = write.mode in (WriteMode.REPLACE, WriteMode.PARTITION)
            key_types.check(
                Catalog(connection),
                write.table,
                write.columns,
                write.keys.foreign_keys,
                replaces=replaces,
            )


def check_database_path(database: str | Path) -> None:
    """A local `database` path can be a file: it is no directory, and its nearest existing
    parent is a directory (the lock and the outbox go beside it)."""
    path = Path(database).absolute()
    if path.is_dir():
        raise ConfigurationError(
            f"HyperIOManager database {path} is a directory; give the path of a .hyper file, "
            f"e.g. {path / 'extract.hyper'}."
        )
    parent = path.parent
    while not parent.exists():
        parent = parent.parent
    if not parent.is_dir():
        raise ConfigurationError(
            f"HyperIOManager database {path}: {parent} is a file, not a directory, so the "
            ".hyper file cannot be created below it. Choose a path under a directory."
        )
