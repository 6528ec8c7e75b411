"""`HyperResource`: one hyperd per process, and connections that are safe to write through.

A `.hyper` file can be open in one hyperd at a time, and Dagster's default executor runs
every step in its own process (with its own hyperd). `connect()` therefore takes an
inter-process file lock beside the database, then opens the file, retrying while
another program still holds it. Closing the connection makes the changes durable: a
step reports success only after `connect()`'s block has ended.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from dagster import ConfigurableResource, InitResourceContext
from filelock import FileLock, Timeout
from pydantic import Field, PrivateAttr, model_validator
from tableauhyperapi import Connection, CreateMode, HyperException

from hyper_assets._base.files import file_mode, set_mode
from hyper_assets._engine.hyper_errors import hyper_errors, is_locked
from hyper_assets._engine.process import HyperSettings, SharedHyper, acquire, release
from hyper_assets._engine.types import NEWEST_VERSION
from hyper_assets.errors import ConfigurationError, DatabaseLockedError, TableNotFoundError

#: hyperd parameters that `HyperResource` sets from a field of its own.
_FIELD_PARAMETERS = {"log_dir", "default_database_version"}


class HyperResource(ConfigurableResource):
    """Owns one Hyper process per Python process, started on first use."""

    log_dir: str | None = Field(
        default=None,
        description="Where hyperd writes its logs. Default: a temp directory, not the cwd.",
    )
    default_database_version: int = Field(
        default=2,
        ge=0,
        le=NEWEST_VERSION,
        description="File format of new .hyper files, unless their columns need a newer one: "
        "2 (default) is read by Tableau 2020.4.15+; 3 adds NUMERIC(19..38); 4 stores floats "
        "as REAL.",
    )
    max_database_version: int = Field(
        default=NEWEST_VERSION,
        ge=0,
        le=NEWEST_VERSION,
        description="The newest file format a write may create or upgrade a file to: 2 for "
        "Tableau before Desktop 2022.4.1 / Server 2023.1 (then decimals wider than 18 digits "
        "are refused), 3 for Tableau before 2024.3. Default: no cap.",
    )
    send_usage_data: bool = Field(
        default=False, description="Opt in to sending Hyper usage data to Tableau."
    )
    parameters: dict[str, str] = Field(
        default_factory=dict, description="Extra hyperd process parameters, passed through."
    )
    lock_timeout_seconds: float = Field(
        default=600.0,
        description="How long to wait for a .hyper file that another step or program holds.",
    )

    _hyper: SharedHyper | None = PrivateAttr(default=None)

    @model_validator(mode="after")
    def _settings_agree(self) -> HyperResource:
        fields = sorted(_FIELD_PARAMETERS & self.parameters.keys())
        if fields:
            given = " and ".join(f"{name}=" for name in fields)
            raise ConfigurationError(
                f"HyperResource got parameters holding {', '.join(map(repr, fields))}, which "
                f"its fields {given} set: hyperd would follow the parameters, this library the "
                f"fields. Give {given} to HyperResource itself, and leave them out of "
                "parameters."
            )
        if self.default_database_version > self.max_database_version:
            raise ConfigurationError(
                f"HyperResource(default_database_version={self.default_database_version}) is "
                f"above max_database_version={self.max_database_version}: lower the first or "
                "raise the second."
            )
        return self

    @property
    def settings(self) -> HyperSettings:
        return HyperSettings(
            log_dir=self.log_dir,
            default_database_version=self.default_database_version,
            send_usage_data=self.send_usage_data,
            parameters=tuple(sorted(self.parameters.items())),
        )

    @property
    def shared(self) -> SharedHyper:
        """This process's hyperd for these settings (shared with equal resources)."""
        if self._hyper is None:
            self._hyper = acquire(self.settings)
        return self._hyper

    def teardown_after_execution(self, context: InitResourceContext) -> None:
        self.close()

    def close(self) -> None:
        """Lets go of the hyperd; it stops `IDLE_SECONDS` (10) after no resource of this
        process uses it, unless one takes it up again meanwhile."""
        if self._hyper is not None:
            release(self.settings)
            self._hyper = None

    @contextmanager
    def connect(self, database: str | Path, *, create: bool = True) -> Iterator[Connection]:
        """An exclusive connection to `database`, durable once the block ends.

        Waits up to `lock_timeout_seconds` for other writers; raises `DatabaseLockedError`
        past that, and `TableNotFoundError` when `create` is False and the file is missing.
        Hyper's failures in the block leave it as `HyperFileError`s naming the file.
        """
        with self.lock(database), self.open(database, create=create) as connection:
            yield connection

    @contextmanager
    def connect_if_free(self, database: str | Path) -> Iterator[Connection | None]:
        """`connect` to the existing `database` if no writer holds its lock now, else None
        at once: for a read that is only worth it if it waits for no one (a check before
        staging, which the write makes again under the lock)."""
        path = Path(database).absolute()
        lock = FileLock(f"{path}.lock", mode=file_mode())
        try:
            lock.acquire(timeout=0)
        except Timeout:
            yield None
            return
        try:
            with self.open(path, create=False) as connection:
                yield connection
        finally:
            lock.release()

    @contextmanager
    def lock(self, database: str | Path) -> Iterator[None]:
        """Holds the inter-process lock beside `database`: one writer at a time.

        Hold it around several connections, or a connection and the files kept beside the
        database (the change outbox), to make them one step for other processes.
        """
        path = Path(database).absolute()
        path.parent.mkdir(parents=True, exist_ok=True)
        lock = FileLock(f"{path}.lock", mode=file_mode())
        try:
            lock.acquire(timeout=self.lock_timeout_seconds)
        except Timeout as error:
            raise self._locked(path) from error
        try:
            yield
        finally:
            lock.release()

    @contextmanager
    def open(self, database: str | Path, *, create: bool = True) -> Iterator[Connection]:
        """A connection to `database` for a caller that holds `lock(database)`; Hyper's
        failures, opening it or in the block, leave as `HyperFileError`s naming the file."""
        path = Path(database).absolute()
        if not create and not path.exists():
            raise TableNotFoundError(
                f"The database {path} does not exist: materialise an asset into it first."
            )
        new = not path.exists()
        with hyper_errors(file=path):
            connection = self._open(path, time.monotonic() + self.lock_timeout_seconds)
            if new:
                set_mode(path)
            try:
                yield connection
            finally:
                connection.close()

    def _open(self, path: Path, deadline: float) -> Connection:
        delay = 0.05
        while True:
            try:
                return Connection(self.shared.endpoint, str(path), CreateMode.CREATE_IF_NOT_EXISTS)
            except HyperException as error:
                if not is_locked(error):
                    raise
                if time.monotonic() + delay > deadline:
                    raise self._locked(path) from error
            time.sleep(delay)
            delay = min(delay * 2, 2.0)

    def _locked(self, path: Path) -> DatabaseLockedError:
        return DatabaseLockedError(
            f"{path} stayed locked by another program for {self.lock_timeout_seconds:g} s "
            "(Tableau Desktop, another Hyper process, or a long write). Close it there, or "
            "raise HyperResource(lock_timeout_seconds=...)."
        )
