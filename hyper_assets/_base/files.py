"""Durable file writes, the mode of the files we create, and size units; shared by the
resource, the saved formats (`hyper_assets._base.saved`), compaction and the emulator."""

from __future__ import annotations

import json
import os
import uuid
from pathlib import Path

MEGABYTE = 1024 * 1024


def file_size(path: Path | None) -> int:
    """The bytes of file `path`; 0 for no file (None, or none there)."""
    return path.stat().st_size if path is not None and path.exists() else 0


def file_mode() -> int:
    """The mode of every file this library creates: 0o666 less the process's umask (what
    `open()` gives). hyperd makes its files 0o660 less its own umask (0o640 beside our
    0o644 under the usual 0o022); `set_mode` brings them to this one, so a umask of 0o002
    lets a group of users (or containers of different uids) share the file and its
    companions.
    """
    try:
        status = Path("/proc/self/status").read_text()
        (line,) = [x for x in status.splitlines() if x.startswith("Umask:")]
        umask = int(line.split()[1], 8)
    except (OSError, ValueError):
        umask = os.umask(0o022)  # where /proc says nothing: read it by setting it back
        os.umask(umask)
    return 0o666 & ~umask


def set_mode(path: Path) -> None:
    """Gives the file `path`, which this process created, `file_mode()`."""
    os.chmod(path, file_mode())


def write_json(path: Path, body: object, *, durable: bool = True) -> None:
    """Writes `path` atomically and durably: a crash leaves the old file or the new one.
    Not `durable`: atomic for readers only (without waiting for the disk, a crash may leave
    the file empty or of any bytes), for a file whose loss or damage costs only time (a
    cache that its reader checks)."""
    temporary = path.with_name(f".{path.name}.{uuid.uuid4().hex[:8]}.tmp")
    descriptor = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL, file_mode())
    with os.fdopen(descriptor, "w") as out:
        json.dump(body, out, indent=1)
        out.flush()
        if durable:
            os.fsync(out.fileno())
    os.replace(temporary, path)
    if durable:
        fsync_path(path.parent)


def fsync_path(path: Path) -> None:
    """Flushes a file to disk, or makes renames and removals in a directory durable."""
    handle = os.open(path, os.O_RDONLY)
    try:
        os.fsync(handle)
    finally:
        os.close(handle)


def make_equal(copy: Path, source: Path, chunk: int = 4 * MEGABYTE) -> int:
    """Makes the file `copy` equal to `source` byte for byte, writing only the chunks that
    differ (and cutting what `source` lacks); returns the bytes written.

    A copy made while `source` changed is made good this way at the speed of reading both:
    for a caller that keeps `source` unchanged meanwhile. `copy` is not flushed to disk.
    """
    written = offset = 0
    want, have = bytearray(chunk), bytearray(chunk)
    with source.open("rb") as theirs, copy.open("r+b") as ours:
        while size := theirs.readinto(want):
            got = ours.readinto(have)
            same = got == size and (want == have if size == chunk else want[:size] == have[:size])
            if not same:
                ours.seek(offset)
                ours.write(memoryview(want)[:size])
                written += size
            offset += size
        ours.truncate(offset)
    return written
