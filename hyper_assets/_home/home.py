"""The extract's home: where the `.hyper` file, its outbox and its publish state live.

`database` is a local path (the default, as it always was), or the URI of an object
store that every run reaches (`s3://bucket/path/shop.hyper`, `az://`, `abfss://`,
`file://`: `hyper_assets._home.stores`). In a store, each committed
state is an immutable generation (`hyper_assets._home.generations`), writers take turns through
a lease (`hyper_assets._home.lease`), and each run works on a local copy of the current
generation. A URI whose store this library cannot serve is an `UnsupportedHomeError` when
the IO manager is defined: it is never taken as a relative local path (`s3://b/x.hyper`
would otherwise become `./s3:/b/x.hyper`, and every row written would die with the
container).
"""

from __future__ import annotations

import hashlib
import os
import re
import tempfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from dagster import ConfigurableResource
from pydantic import Field, ModelWrapValidatorHandler, model_validator

from hyper_assets._base.env import changed, from_env
from hyper_assets._engine.resource import HyperResource
from hyper_assets._home import chunks
from hyper_assets._home.collect import collect_quietly
from hyper_assets._home.generations import Generations, Manifest, WorkingCopy
from hyper_assets._home.lease import Lease
from hyper_assets._home.stores import StoreCredentials, StoreHome, credentials_for, parse_store
from hyper_assets.errors import ConfigurationError

#: `scheme:` at the start of a URI (RFC 3986); one letter would be a Windows drive.
_SCHEME = re.compile(r"^([A-Za-z][A-Za-z0-9+.-]+):")


def parse_home(database: str) -> Path | StoreHome:
    """`database` as a local path, or an object-store home (`hyper_assets._home.stores`);
    `UnsupportedHomeError` for any other URI. Nothing connects to the store here."""
    found = _SCHEME.match(database)
    if not found:
        return Path(database)
    return parse_store(database, found.group(1).lower())


def relative_to(database: str, root: Path) -> str:
    """`database` as given relative to `root` (a project's): a path is joined to it, an
    object-store URI kept."""
    home = parse_home(database)
    return home.uri if isinstance(home, StoreHome) else str(root / home)


class HomeSettings(StoreCredentials):
    """How a run works with an object-store home, and how it reaches the store (its
    `s3` or `azure` settings); refused for a local path (`check_home`)."""

    working_dir: str | None = Field(
        default=None,
        description="Where a run keeps its copy of the home's current generation. "
        "Default: a directory under the temp directory.",
    )
    lease_seconds: float = Field(
        default=60.0,
        description="How long a writer's lease lasts without renewal (it renews every "
        "third of it); a killed writer's lease is taken over after it.",
    )
    keep_generations: int = Field(
        default=10,
        ge=1,
        description="How many of the newest generations are kept: every this-many-th "
        "commit deletes the chunks none of them names (old generations', killed writers').",
    )
    transfer_concurrency: int = Field(
        default=chunks.CONCURRENCY,
        ge=1,
        description="How many chunks a download or a commit moves at once (each is one "
        "request to the store, which answers after its latency); 1: one at a time.",
    )
    keep_seconds: float = Field(
        default=3600.0,
        ge=0.0,
        description="An object is deleted only once older than this plus lease_seconds, "
        "and a generation's only this plus lease_seconds after it stopped being "
        "current: a reader still downloading it, or a writer still uploading, finishes.",
    )


def check_home(database: str, settings: HomeSettings, name: str) -> None:
    """Refuses `settings` (given as `name`=) that the home `database` would ignore: any
    for a local path, a store's settings for another kind of store."""
    home = parse_home(database)
    if isinstance(home, StoreHome):
        credentials_for(settings, home)
        return
    ignored = changed(settings)
    if ignored:
        given = ", ".join(f"{field}=..." for field in ignored)
        raise ConfigurationError(
            f"database={database!r} is a local path, and {name}=HomeSettings({given}) serves "
            f"an object-store home only: it would be ignored. Remove {name}, or give the "
            "URI of a store (file:///absolute/path/extract.hyper for one machine)."
        )


class HyperDatabase(ConfigurableResource):
    """One `.hyper` extract's home: a local path, or an object store with a local
    working copy and a lease, and the Hyper process that opens it."""

    database: str = Field(
        description="Path of the .hyper file, or its object-store URI "
        "(s3://bucket/path/shop.hyper, az://container/path/shop.hyper, "
        "abfss://container@account.dfs.core.windows.net/path/shop.hyper, "
        "file:///path/shop.hyper)."
    )
    hyper: HyperResource = Field(
        default_factory=HyperResource, description="The Hyper process settings."
    )
    settings: HomeSettings = Field(
        default_factory=HomeSettings,
        description="The working copy and the lease of an object-store home.",
    )

    @model_validator(mode="wrap")
    @classmethod
    def _settings_it_uses(
        cls, data: Any, validate: ModelWrapValidatorHandler[HyperDatabase]
    ) -> HyperDatabase:
        database = validate(data)
        if not from_env(data, "database"):  # else checked when the run reads it
            check_home(database.database, database.settings, "settings")
        return database

    @property
    def home(self) -> Path | StoreHome:
        return parse_home(self.database)

    @property
    def uri(self) -> str:
        """The home's URI: the store's, or the local file's (file://)."""
        home = self.home
        return home.uri if isinstance(home, StoreHome) else home.absolute().as_uri()

    @property
    def local_path(self) -> Path:
        """The file Hyper opens: the database, or this run's copy of the home's."""
        home = self.home
        return home if isinstance(home, Path) else self._working(home).database

    def _working(self, home: StoreHome, part: str = "") -> WorkingCopy:
        if self.settings.working_dir:
            directory = Path(self.settings.working_dir)
        else:
            digest = hashlib.sha256(home.uri.encode()).hexdigest()[:16]
            directory = Path(tempfile.gettempdir()) / f"hyper-assets-home-{os.getuid()}" / digest
        directory = directory / part if part else directory
        directory.mkdir(parents=True, exist_ok=True)
        return WorkingCopy(directory, home.name)

    def _generations(self, home: StoreHome) -> Generations:
        store = home.connect(self.settings)
        return Generations(store, home.uri, home.name, self.settings.transfer_concurrency)

    @contextmanager
    def _leased(self, home: StoreHome, working: WorkingCopy, *, locked: bool) -> Iterator[_Held]:
        """The home's lease, and `working` brought to the current generation under the
        file's lock (taken here unless the caller holds it, `locked`): a download may
        patch the file in place, which no connection to it may see. The caller commits
        (the lease is released when the block ends)."""
        generations = self._generations(home)
        timeout = self.hyper.lock_timeout_seconds
        with Lease(generations.store, home.uri, self.settings.lease_seconds, timeout) as lease:
            held = _Held(generations, working, lease, generations.current(), self.settings)
            with nullcontext() if locked else self.hyper.lock(working.database):
                generations.download(held.base, working)
            working.changing()
            yield held

    @contextmanager
    def writing(self) -> Iterator[Path]:
        """The file to write, held for this writer alone; on an object-store home its
        changes are committed as the next generation when the block ends without error.

        Local: the file's inter-process lock. Store: the lease, the working copy's lock,
        the copy brought to the current generation, and after the block the upload and
        the commit (`LeaseLostError`, `HomeConflictError` when refused).
        """
        home = self.home
        if isinstance(home, Path):
            with self.hyper.lock(home):
                yield home
            return
        working = self._working(home)
        with self.hyper.lock(working.database), self._leased(home, working, locked=True) as held:
            yield working.database
            held.commit()

    @contextmanager
    def publishing(self) -> Iterator[tuple[Path, Callable[[], None]]]:
        """The file to publish, and `save`, which the publish calls after each step it
        saves (its plan, a batch sent, the changes it cleared).

        Local: the file itself, and `save` does nothing (the publish takes the file's lock
        where it needs it). Store: the home's lease for the whole publish, so no write
        runs between its plan and its end; a working copy of its own; and `save` commits
        the copy as the next generation, so a publish run in any container resumes where
        the last one stopped and never sends a change twice.
        """
        home = self.home
        if isinstance(home, Path):
            yield home, lambda: None
            return
        working = self._working(home, "publishing")
        with self._leased(home, working, locked=False) as held:
            yield working.database, held.save
            held.commit()

    @contextmanager
    def reading(self) -> Iterator[Path]:
        """The file to read: the database, or the working copy brought to the home's
        current generation (downloaded only if it holds another)."""
        home = self.home
        if isinstance(home, StoreHome):
            generations = self._generations(home)
            working = self._working(home)
            with self.hyper.lock(working.database):
                generations.download(generations.current(), working)
        yield self.local_path


@dataclass
class _Held:
    """A store home held under `lease`, its working copy made from generation `base`."""

    generations: Generations
    working: WorkingCopy
    lease: Lease
    base: Manifest | None
    settings: HomeSettings

    def commit(self) -> None:
        """Makes the working copy the next generation (fenced by the lease's renewal);
        every `keep_generations`-th also deletes what no kept generation names."""
        base, keep = self.base, self.settings.keep_generations
        self.base = committed = self.generations.commit(
            base, self.working, self.lease.id, self.lease.renew
        )
        if committed != base and committed.number % keep == 0:  # every keep-th commit
            grace = self.settings.keep_seconds + self.settings.lease_seconds
            collect_quietly(self.generations, keep, grace, self.lease.renew)

    def save(self) -> None:
        """`commit`, and goes on changing the copy."""
        self.commit()
        self.working.changing()
