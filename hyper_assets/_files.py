"""Durable file writes and size units, shared by the outbox, the publisher and the emulator."""

from __future__ import annotations

import json
import os
import uuid
from pathlib import Path

MEGABYTE = 1024 * 1024


def write_json(path: Path, body: object) -> None:
    """Writes `path` atomically and durably: a crash leaves the old file or the new one."""
    temporary = path.with_name(f".{path.name}.{uuid.uuid4().hex[:8]}.tmp")
    with temporary.open("w") as out:
        json.dump(body, out, indent=1)
        out.flush()
        os.fsync(out.fileno())
    os.replace(temporary, path)
    fsync_path(path.parent)


def fsync_path(path: Path) -> None:
    """Flushes a file to disk, or makes renames and removals in a directory durable."""
    handle = os.open(path, os.O_RDONLY)
    try:
        os.fsync(handle)
    finally:
        os.close(handle)
