"""The file's maintenance for a caller: `compact()` and `upgrade_database()` open the
file's home for writing (a local path under its lock, or an object store's working copy,
committed as the next generation) and run the engine's compaction or upgrade on it
(`hyper_assets._engine.compaction`, `hyper_assets._engine.upgrade`)."""

from __future__ import annotations

from pathlib import Path

from hyper_assets._engine.compaction import CompactResult, compact_locked
from hyper_assets._engine.resource import HyperResource
from hyper_assets._engine.types import NEWEST_VERSION
from hyper_assets._engine.upgrade import VersionUpgrade, database_version
from hyper_assets._home.home import HyperDatabase
from hyper_assets.errors import ConfigurationError


def compact(
    hyper: HyperResource, database: str | Path | HyperDatabase, *, rewrite_rows: bool = True
) -> CompactResult:
    """Rewrites `database` (a path, or an object-store home: its current generation,
    committed as the next) compactly, keeping its format version, tables, keys and rows.
    Given a `HyperDatabase` resource, its own Hyper and home settings are used.

    `rewrite_rows=False` only copies the file's used blocks (fast, but blocks that deletes
    left partly empty stay so). Holding the file's lock, the copy is written beside the
    file, flushed to disk, then replaces it atomically; it needs up to twice the file's
    size of free disk meanwhile. On any failure (or a crash) the original is untouched; a
    copy left by a crash is removed by the next compaction. Raises `DatabaseLockedError`
    when another program keeps the file open, `TableNotFoundError` when it is missing,
    `CorruptDatabaseError` when Hyper cannot read it, `CompactionError` when Hyper fails
    otherwise (a full disk, say).
    """
    if not isinstance(database, HyperDatabase):
        database = HyperDatabase(database=str(database), hyper=hyper)
    with database.writing() as path:
        return compact_locked(database.hyper, path.absolute(), rewrite_rows)


def upgrade_database(
    database: str | Path, version: int, *, hyper: HyperResource | None = None
) -> VersionUpgrade | None:
    """Rewrites `database` (a path or an object-store URI) at format `version`, keeping
    every table, key and row.

    None when the file already has that version or a newer one. Holds the database's lock
    (waiting for writers and publishes, as `compact()` does); any failure leaves the file
    unchanged. The next publish sends the file whole. Raises `ConfigurationError` for a
    version Hyper does not write, `TableNotFoundError` when the file is missing.
    """
    if not 0 <= version <= NEWEST_VERSION:
        raise ConfigurationError(
            f"upgrade_database(version={version}): Hyper writes format versions 0 to "
            f"{NEWEST_VERSION}."
        )
    resource = hyper or HyperResource()
    try:
        with HyperDatabase(database=str(database), hyper=resource).writing() as local:
            path = local.absolute()
            before = database_version(resource, path)
            if before >= version:
                return None
            compact_locked(resource, path, rewrite_rows=False, version=version)
            return VersionUpgrade(before, version)
    finally:
        if hyper is None:
            resource.close()
