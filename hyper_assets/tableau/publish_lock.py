"""One publish of a data source at a time, across processes; its holder says who it is."""

from __future__ import annotations

import json
import os
import socket
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path

from filelock import FileLock, Timeout

from hyper_assets._files import file_mode, write_json
from hyper_assets.errors import PublishLockedError

#: Longer than a publish takes within the client's default job and request timeouts.
DEFAULT_LOCK_TIMEOUT_SECONDS = 2 * 3600.0


@contextmanager
def publishing(lock_path: Path, holder_path: Path, timeout: float, what: str) -> Iterator[None]:
    """Holds `lock_path` for the block, recording this process in `holder_path`.

    Waits up to `timeout` seconds for another holder, then raises `PublishLockedError`
    naming it (`what` says which publish waited). Makes their directory if missing.
    """
    lock_path.parent.mkdir(parents=True, exist_ok=True)
    lock = FileLock(lock_path, mode=file_mode())
    try:
        lock.acquire(timeout=timeout)
    except Timeout as error:
        raise PublishLockedError(
            f"Another publish of {what} still runs after {timeout:g} s of waiting: "
            f"{_holder(holder_path)}. If it hangs, stop it (the next publish resumes its "
            "plan); else wait for it, or raise lock_timeout_seconds."
        ) from error
    try:
        since = datetime.now(UTC).isoformat(timespec="seconds")
        write_json(holder_path, {"pid": os.getpid(), "host": socket.gethostname(), "since": since})
        yield
    finally:
        lock.release()


def _holder(path: Path) -> str:
    try:
        holder = json.loads(path.read_text())
        return f"process {holder['pid']} on {holder['host']}, publishing since {holder['since']}"
    except (OSError, ValueError, KeyError, TypeError):
        return "a process that did not say who it is"
