"""Staging areas: Parquet files for Hyper to bulk-load, and Parquet exports for loading.

A staging directory lives under a root on this machine (a local temp directory by
default, or a shared file system that a cluster writes too: `hyper_assets.transfer`).
Each write gets its own directory, removed on success and on failure; directories left
by killed processes are removed by the next process on the same host that stages under
the same root.
"""

from __future__ import annotations

import os
import shutil
import socket
import tempfile
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from urllib.parse import urlparse
from urllib.request import url2pathname

import pyarrow as pa
import pyarrow.parquet as pq

from hyper_assets.errors import ConfigurationError


def default_staging_root() -> Path:
    return Path(tempfile.gettempdir()) / f"hyper-assets-staging-{os.getuid()}"


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _owner_prefix() -> str:
    """`host~pid~`: a shared staging root may serve several machines."""
    return f"{socket.gethostname()}~{os.getpid()}~"


def _remove_orphans(root: Path) -> None:
    """Removes this host's directories whose owning process is gone."""
    host = socket.gethostname()
    for entry in root.iterdir() if root.is_dir() else ():
        owner_host, _, rest = entry.name.partition("~")
        pid = rest.partition("~")[0]
        if owner_host == host and pid.isdigit() and not _pid_alive(int(pid)):
            shutil.rmtree(entry, ignore_errors=True)


def local_root(root: str) -> Path:
    """`root` as a directory of this machine: a path, or a file:// URI."""
    parsed = urlparse(root)
    if parsed.scheme == "file":
        return Path(url2pathname(parsed.path)).absolute()
    if len(parsed.scheme) > 1:  # a one-letter scheme is a Windows drive
        raise ConfigurationError(
            f"staging_dir {root!r}: {parsed.scheme}:// is not a store hyper-assets stages "
            "in. Give a directory that the Spark cluster and this process both mount (a "
            "path or file:// URI), or leave staging_dir out: with Spark Connect the rows "
            "then stream through the Connect channel."
        )
    return Path(root).absolute()


class StagingArea:
    """Hands out per-write directories below `root` and cleans them up."""

    def __init__(self, root: str | None = None) -> None:
        self.root = local_root(root) if root else default_staging_root()
        self._swept = False
        self._kept: list[Path] = []

    def _new(self, label: str) -> Path:
        self.root.mkdir(parents=True, exist_ok=True)
        if not self._swept:
            _remove_orphans(self.root)
            self._swept = True
        path = self.root / f"{_owner_prefix()}{label}-{uuid.uuid4().hex[:12]}"
        path.mkdir()
        return path

    @contextmanager
    def directory(self, label: str) -> Iterator[Path]:
        """A fresh directory for one write, removed when the block ends."""
        path = self._new(label)
        try:
            yield path
        finally:
            shutil.rmtree(path, ignore_errors=True)

    def keep(self, label: str) -> Path:
        """A fresh directory that lives until `release()`: Spark reads loaded data lazily."""
        path = self._new(label)
        self._kept.append(path)
        return path

    def release(self) -> None:
        """Removes every directory handed out by `keep()`."""
        for path in self._kept:
            shutil.rmtree(path, ignore_errors=True)
        self._kept.clear()


def part_files(directory: Path) -> list[Path]:
    """The Parquet part files Spark committed (Hyper takes no globs: list them)."""
    return sorted(p for p in directory.rglob("*.parquet") if not p.name.startswith(("_", ".")))


def stage_arrow(table: pa.Table, directory: Path, compression: str) -> list[Path]:
    """Writes an Arrow table as one Parquet file."""
    path = directory / "part-0.parquet"
    pq.write_table(table, path, compression=compression)
    return [path]


def staged_row_count(files: list[Path]) -> int:
    """Rows in the staged files, from their footers (no data is read)."""
    return sum(pq.read_metadata(f).num_rows for f in files)
