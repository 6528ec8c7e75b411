"""Internal: start and own `hyperd` processes with the settings this library wants.

`HyperResource` (Dagster) and the REST emulator both start their process here, so the
defaults (telemetry off, logs bounded and out of the working directory, file format
version) are written once. Resources with the same settings share one hyperd per Python
process, which outlives its last user by `IDLE_SECONDS`: the process's next run reuses it.
"""

from __future__ import annotations

import atexit
import logging
import os
import shutil
import tempfile
import threading
from collections.abc import Callable
from contextlib import suppress
from dataclasses import dataclass, field
from pathlib import Path

from tableauhyperapi import Connection, Endpoint, HyperException, HyperProcess, Telemetry

from hyper_assets._engine.hyper_errors import is_unreachable
from hyper_assets.errors import HyperStartError

log = logging.getLogger(__name__)


#: hyperd's own log rotation: at most two files (it checks their size only now and then,
#: so one may pass the limit before it starts the next).
LOG_LIMITS = {"log_file_max_count": "2", "log_file_size_limit": "10M"}


@dataclass(frozen=True)
class HyperSettings:
    """How to start a hyperd; equal settings share one process."""

    log_dir: str | None = None
    default_database_version: int = 2
    send_usage_data: bool = False
    parameters: tuple[tuple[str, str], ...] = field(default_factory=tuple)


def start_hyper(settings: HyperSettings, log_dir: Path) -> HyperProcess:
    """Start a `hyperd` logging into `log_dir` (rotated, `LOG_LIMITS`); usage data goes to
    Tableau only when `send_usage_data` is True. `settings.parameters` override both.
    Raises `HyperStartError` with Hyper's words when it does not start."""
    log_dir.mkdir(parents=True, exist_ok=True)
    params = {
        "log_dir": str(log_dir),
        "default_database_version": str(settings.default_database_version),
        **LOG_LIMITS,
        **dict(settings.parameters),
    }
    telemetry = (
        Telemetry.SEND_USAGE_DATA_TO_TABLEAU
        if settings.send_usage_data
        else Telemetry.DO_NOT_SEND_USAGE_DATA_TO_TABLEAU
    )
    try:
        return HyperProcess(telemetry=telemetry, parameters=params)
    except HyperException as error:
        words = " ".join(str(error).split())
        raise HyperStartError(
            f"hyperd did not start with the parameters {params}: {words}. Check "
            f"HyperResource(parameters=...) and its log_dir (hyperd's logs, if any: {log_dir})."
        ) from error


class SharedHyper:
    """One lazily started `hyperd`, shut down by `close()`; safe to share across threads.

    A hyperd that died (a crash, a kill) is noticed on the next use and replaced by a new
    one: connections opened before are lost, files stay as their last close left them.

    Without `settings.log_dir`, each hyperd logs into a temporary directory of its own,
    removed when it is closed; a dead one's logs are kept, and the warning names them.
    """

    def __init__(self, settings: HyperSettings | None = None) -> None:
        self.settings = settings or HyperSettings()
        self._process: HyperProcess | None = None
        self._own_logs: Path | None = None
        self._lock = threading.Lock()
        #: The process that started the hyperd: a forked child inherits this object, and
        #: its exit must not stop its parent's hyperd (`_stop_all`).
        self.started_by: int | None = None

    @property
    def process(self) -> HyperProcess:
        with self._lock:
            if self._process is not None and self._process.is_open and not _answers(self._process):
                logs = self.settings.log_dir or self._own_logs
                log.warning(
                    "hyperd at %s died (its logs: %s); starting a new one",
                    self._process.endpoint,
                    logs,
                )
                with suppress(HyperException):
                    self._process.close()
                self._own_logs = None  # kept for whoever looks into the crash
            if self._process is None or not self._process.is_open:
                self._process = start_hyper(self.settings, self._log_dir())
                self.started_by = os.getpid()
            return self._process

    def _log_dir(self) -> Path:
        if self.settings.log_dir:
            return Path(self.settings.log_dir)
        if self._own_logs is None:
            self._own_logs = Path(tempfile.mkdtemp(prefix="hyper-assets-logs-"))
        return self._own_logs

    @property
    def endpoint(self) -> Endpoint:
        return self.process.endpoint

    def close(self) -> None:
        with self._lock:
            if self._process is not None and self._process.is_open:
                self._process.close()
            self._process = None
            if self._own_logs is not None:
                shutil.rmtree(self._own_logs, ignore_errors=True)
                self._own_logs = None


def _answers(process: HyperProcess) -> bool:
    """False when nothing accepts a connection at the hyperd's endpoint any more.

    About a millisecond when it does. Any other failure leaves it to the caller's own
    connection to report.
    """
    try:
        Connection(process.endpoint).close()
    except HyperException as error:
        return not is_unreachable(error)
    return True


#: Seconds a process-wide hyperd runs on once its last user let go: a process that runs
#: Dagster runs one after another (`execute_in_process`, `materialize`, a notebook, tests)
#: starts one hyperd for them, not one per run. hyperd exits with the Python process anyway.
IDLE_SECONDS = 10.0

#: Each settings' hyperd, its users, and the number of its latest release (a stop timer
#: stops it only if no user came and went since that release).
_shared: dict[HyperSettings, tuple[SharedHyper, int, int]] = {}
_registry_lock = threading.Lock()


def acquire(settings: HyperSettings) -> SharedHyper:
    """The process-wide hyperd for `settings`; pair every call with `release`."""
    with _registry_lock:
        shared, users, releases = _shared.get(settings, (None, 0, 0))
        shared = shared or SharedHyper(settings)
        _shared[settings] = (shared, users + 1, releases)
        return shared


def release(settings: HyperSettings) -> None:
    """Lets go of the hyperd for `settings`; it stops `IDLE_SECONDS` after its last user
    let go, unless a new user came meanwhile."""
    with _registry_lock:
        shared, users, releases = _shared.get(settings, (None, 0, 0))
        if shared is None or users == 0:
            return
        _shared[settings] = (shared, users - 1, releases + 1)
        if users > 1:
            return
    timer = threading.Timer(IDLE_SECONDS, _stop_if_idle, (settings, releases + 1))
    timer.daemon = True  # never holds the interpreter's exit: `_stop_all` runs then
    timer.start()


def _stop_if_idle(settings: HyperSettings, release_number: int) -> None:
    with _registry_lock:
        shared, users, releases = _shared.get(settings, (None, 0, 0))
        if shared is None or users or releases != release_number:
            return
        del _shared[settings]
    shared.close()


def stop_idle() -> None:
    """Stops each hyperd no resource uses now (and removes its own logs), without waiting
    for its `IDLE_SECONDS`."""
    _stop(lambda shared, users: not users)


@atexit.register
def _stop_all() -> None:
    """At the interpreter's exit, stops every hyperd this process started, used or not, and
    removes its own logs: a resource nobody closed (a `compact()` or `connect()` outside
    Dagster's runs) left them in the temp directory at each exit. hyperd would exit with
    the process anyway; a forked child's exit leaves its parent's hyperd alone."""
    _stop(lambda shared, users: shared.started_by == os.getpid())


def _stop(chosen: Callable[[SharedHyper, int], bool]) -> None:
    """Takes the hyperds `chosen` picks (by themselves and their number of users) out of
    the registry, then closes each."""
    with _registry_lock:
        stopped = [s for s, users, _ in _shared.values() if chosen(s, users)]
        for shared in stopped:
            del _shared[shared.settings]
    for shared in stopped:
        shared.close()
