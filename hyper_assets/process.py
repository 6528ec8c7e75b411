"""Start and own one `hyperd` with the settings this library wants.

`HyperResource` (Dagster) and the REST emulator both start their process here, so the
defaults (telemetry off, logs out of the working directory, file format version) are
written once.
"""

from __future__ import annotations

import os
import tempfile
import threading
from pathlib import Path

from tableauhyperapi import Endpoint, HyperProcess, Telemetry


def default_log_dir() -> Path:
    """A writable log directory outside the working directory (hyperd's own default)."""
    return Path(tempfile.gettempdir()) / f"hyper-assets-logs-{os.getuid()}"


def start_hyper(
    *,
    log_dir: str | Path | None = None,
    default_database_version: int = 2,
    send_usage_data: bool = False,
    parameters: dict[str, str] | None = None,
) -> HyperProcess:
    """Start a `hyperd`; usage data goes to Tableau only when `send_usage_data` is True."""
    log_path = Path(log_dir) if log_dir else default_log_dir()
    log_path.mkdir(parents=True, exist_ok=True)
    params = {
        "log_dir": str(log_path),
        "default_database_version": str(default_database_version),
        **(parameters or {}),
    }
    telemetry = (
        Telemetry.SEND_USAGE_DATA_TO_TABLEAU
        if send_usage_data
        else Telemetry.DO_NOT_SEND_USAGE_DATA_TO_TABLEAU
    )
    return HyperProcess(telemetry=telemetry, parameters=params)


class SharedHyper:
    """One lazily started `hyperd`, shut down by `close()`; safe to share across threads."""

    def __init__(self, **settings: object) -> None:
        self._settings = settings
        self._process: HyperProcess | None = None
        self._lock = threading.Lock()

    @property
    def process(self) -> HyperProcess:
        with self._lock:
            if self._process is None or not self._process.is_open:
                self._process = start_hyper(**self._settings)  # type: ignore[arg-type]
            return self._process

    @property
    def endpoint(self) -> Endpoint:
        return self.process.endpoint

    def close(self) -> None:
        with self._lock:
            if self._process is not None and self._process.is_open:
                self._process.close()
            self._process = None
