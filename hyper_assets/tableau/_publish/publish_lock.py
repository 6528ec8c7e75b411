"""One publish of a data source at a time, across processes; its holder says who it is."""

from __future__ import annotations

import os
import socket
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from filelock import FileLock, Timeout

from hyper_assets._base.files import file_mode
from hyper_assets._base.saved import Fields, SavedFormat
from hyper_assets.errors import CorruptFileError, PublishLockedError

#: Longer than a publish takes within the client's default job and request timeouts.
DEFAULT_LOCK_TIMEOUT_SECONDS = 2 * 3600.0


@dataclass(frozen=True)
class Holder:
    """The process holding the lock, in its holder file; `since`: an ISO 8601 time."""

    pid: int
    host: str
    since: str

    def to_json(self) -> dict[str, Any]:
        return {"pid": self.pid, "host": self.host, "since": self.since}

    @classmethod
    def from_json(cls, f: Fields) -> Holder:
        return cls(f.take("pid", int), f.take("host", str), f.take("since", str))


#: The holder file (written without a version before this one: version 1).
HOLDER = SavedFormat(1, Holder.from_json, Holder.to_json, "It only names the holder.")


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
        HOLDER.write(holder_path, Holder(os.getpid(), socket.gethostname(), since))
        yield
    finally:
        lock.release()


def _holder(path: Path) -> str:
    try:
        holder = HOLDER.read(path)
    except (OSError, CorruptFileError):
        return "a process that did not say who it is"
    return f"process {holder.pid} on {holder.host}, publishing since {holder.since}"
