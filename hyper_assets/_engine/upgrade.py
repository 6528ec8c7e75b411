"""File format versions: each file at the version its columns need, upgraded in place.

A `.hyper` file keeps the format version it was created with, and newer versions store
more types (docs/types.md): a decimal wider than 18 digits (a Spark `sum` of a
decimal(12,2) is a decimal(22,2)) needs version 3, REAL needs version 4. Around a write,
`file_for_write` creates a missing file at the version its columns need (or
`default_database_version`, if newer), and upgrades an older file by compaction's code
path: `CREATE DATABASE copy WITH VERSION n FROM file`, flushed, then `os.replace`, under
the database's lock, keeping every table, key and row. The original stays beside the file
as a hard link until the write ends: a write that fails puts it back, so a refused write
leaves the file byte for byte as it was.

Tableau keeps the version of the file it was sent, so a publish sends the file whole when
its version differs from the one last published (`hyper_assets.tableau._publish.publish`).
`upgrade_database()` (`hyper_assets._home.maintenance`) upgrades a file for a caller, with the
same lock.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from tableauhyperapi import Connection

from hyper_assets._base.files import fsync_path
from hyper_assets._engine.compaction import compact_locked, file_version
from hyper_assets._engine.hyper_errors import hyper_errors
from hyper_assets._engine.resource import HyperResource
from hyper_assets._engine.sql import create_database


@dataclass(frozen=True)
class VersionUpgrade:
    """A file's format version before and after an upgrade."""

    before: int
    after: int

    def __str__(self) -> str:
        return f"{self.before} -> {self.after}"


@contextmanager
def file_for_write(
    hyper: HyperResource, database: str | Path, needed: int
) -> Iterator[VersionUpgrade | None]:
    """For a caller holding the database's lock, around a write whose columns need format
    version `needed`: the file exists at that version or a newer one during the block.

    Yields the upgrade made, if any. If the block raises, the file is as it was before:
    absent, or the original bytes.
    """
    path = Path(database).absolute()
    if not path.exists():
        _create(hyper, path, max(needed, hyper.default_database_version))
        try:
            yield None
        except BaseException:
            path.unlink(missing_ok=True)
            raise
        return
    before = database_version(hyper, path)
    if before >= needed:
        yield None
        return
    original = path.with_name(f"{path.name}.before-upgrade")
    original.unlink(missing_ok=True)  # left by a crash: the file itself is whole
    os.link(path, original)
    try:
        compact_locked(hyper, path, rewrite_rows=False, version=needed)
        yield VersionUpgrade(before, needed)
    except BaseException:
        os.replace(original, path)
        fsync_path(path.parent)
        raise
    finally:
        original.unlink(missing_ok=True)


def database_version(hyper: HyperResource, path: Path) -> int:
    with hyper.open(path, create=False) as connection:
        return file_version(connection, path)


def _create(hyper: HyperResource, path: Path, version: int) -> None:
    """An empty `.hyper` at `path`; Hyper's refusal is a `HyperFileError` naming it."""
    created = hyper_errors(file=path, advice="Nothing was written.")
    with created, Connection(hyper.shared.endpoint) as connection:
        create_database(connection, path, version=version)
