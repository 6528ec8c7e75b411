"""Making a publish's plan: what the file holds for a data source, what to send of it, and
the plan with its payload written and saved (`hyper_assets.tableau._publish.plan`).

`Planner.make` reads the file under its lock (the data source's tables, their tree and
shapes, the outbox's changes settled) and decides what to send
(`hyper_assets.tableau._publish.decision.what_to_send`). An update plan's payload files are
written there, from the file's rows. A full plan takes a copy of the file; one of a tree
(some of the file's tables, or role copies) is finished by `Planner.build` once the lock
is let go: it writes the tree file from that copy, so writers do not wait for it.
"""

from __future__ import annotations

import logging
import shutil
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from tableauhyperapi import Connection, SqlType, TableName

from hyper_assets._base.files import file_size, fsync_path, make_equal
from hyper_assets._engine.compaction import file_version
from hyper_assets._engine.resource import HyperResource
from hyper_assets._engine.sql import count_rows
from hyper_assets._engine.tables import Catalog, table_label
from hyper_assets._rows.outbox import Change, Outbox
from hyper_assets._rows.pending_keys import PendingKey, PendingKeys
from hyper_assets.tableau._publish import positions
from hyper_assets.tableau._publish.changes import net_steps
from hyper_assets.tableau._publish.decision import what_to_send
from hyper_assets.tableau._publish.model import DataModel, held_tables, read_model
from hyper_assets.tableau._publish.payload import batch_of, build_parts, pack
from hyper_assets.tableau._publish.plan import (
    Fingerprint,
    Plan,
    PublishState,
    SentRows,
    Target,
    save,
)
from hyper_assets.tableau._publish.shape import fingerprint
from hyper_assets.tableau._publish.subset import write_subset


@dataclass(frozen=True)
class _File:
    """What a plan is made from, read from the file under its lock."""

    tables: list[TableName]  # the file's tables the data source holds
    model: DataModel  # the tree the data source's copy holds
    whole: bool  # the data source holds the whole file, as it is
    changes: list[Change]  # the changes recorded since the publish state, settled
    position: int  # the last change recorded, or the publish state's position
    shapes: Fingerprint
    version: int  # the file's format version
    types: dict[TableName, dict[str, SqlType]]  # the columns of the changes' tables


@dataclass(frozen=True)
class Taken:
    """A full plan whose tree file is still to be written, outside the database's lock,
    from `copy`: the file copied under the lock when `plan` was made from it."""

    plan: Plan
    model: DataModel
    copy: Path


class Planner:
    """Makes the plans of one data source of `database`, in its directory `home`; `save`
    saves a plan as `plan.json` (and commits it where the publisher's home asks to)."""

    def __init__(
        self,
        database: Path,
        hyper: HyperResource,
        outbox: Outbox,
        target: Target,
        home: Path,
        early_copy: Path,
        *,
        tables: list[str] | None,
        declared: tuple[PendingKey, ...],
        max_payload_bytes: int,
        logger: logging.Logger | logging.LoggerAdapter[Any],
        save: Callable[[Plan], None],
    ) -> None:
        """`early_copy`: where `copy_early` copies the file, which the publisher removes
        when its publish ends; `tables`, `declared`: as `Publisher` takes them."""
        self.database, self.hyper, self.outbox, self.target = database, hyper, outbox, target
        self.datasource = target.datasource
        self.tables, self.declared = tables, declared
        self.max_payload_bytes, self.log, self._save = max_payload_bytes, logger, save
        self.early_copy = early_copy
        self._home = home
        self._plan_dir = home / "plan"
        self._state_path = home / positions.STATE

    def copy_early(self, full: bool) -> None:
        """Copies the file without its lock when the publish will likely send it whole (it
        is asked to, or the data source has no publish state and no plan): under the lock,
        `make` makes the copy equal to the file by reading both, not by writing
        it all, so writers wait less."""
        first = not (self._state_path.exists() or (self._plan_dir / "plan.json").exists())
        if (full or first) and self.database.exists():
            shutil.copyfile(self.database, self.early_copy)
            fsync_path(self.early_copy)  # so that the lock waits only for what `make` changes
            self.log.debug("Copied %s before taking its lock", self.database.name)

    def make(
        self, full_reason: str | None, state: PublishState | None, replaces: Plan | None
    ) -> tuple[Plan | Taken | None, DataModel]:
        """The plan for the changes recorded since the publish `state` (None when there is
        nothing to send), and the tree the data source's copy holds; for a caller holding
        the database's lock, so the payload holds the rows of the changes planned.

        `full_reason` (from `decide`) makes it send the whole file, with every change so
        far. An update plan, or a full plan of the whole file, is saved here; a full plan
        of a tree is returned as taken (`Taken`), for `build` to finish once the lock is
        let go. The plan's files go to a directory of their own; saving `plan.json` is the
        one step that replaces the plan `replaces`, so a failure before it leaves that plan.
        """
        since = None if full_reason else state
        with self.hyper.open(self.database, create=False) as connection:
            file = self._read_file(connection, since.position if since else 0)
            sending = what_to_send(full_reason, file.changes, file.shapes, file.version, since)
            # Each table of the tree sent, a role copy by its own name.
            rows = tuple(
                SentRows(table_label(t), "publish", count_rows(connection, file.model.source(t)))
                for t in (file.model.tables if sending and sending.kind == "full" else [])
            )
        if sending is None:
            if replaces is not None:  # a full plan for another data source: moot
                shutil.rmtree(self._plan_dir)
            return None, file.model
        plan = Plan(
            sending.kind,
            sending.reason,
            tuple(file.changes),
            file.shapes,
            self.target,
            tuple(table_label(t) for t in file.tables),
            file.position,
            database_version=file.version,
        )
        files = self.files(plan)
        shutil.rmtree(files, ignore_errors=True)
        files.mkdir(parents=True)
        if sending.kind == "full":
            taken = self._take_snapshot(plan, file, rows)
            if isinstance(taken, Taken):
                return taken, file.model
            written: Plan | None = taken
        else:
            written = self._write_batches(plan, file)
        if written is None:  # only changes of tables no longer in the file
            self.outbox.clear(file.changes)
            shutil.rmtree(self._plan_dir)  # and a plan for another data source
            return None, file.model
        self._keep(written)
        return written, file.model

    def _keep(self, plan: Plan) -> None:
        """Saves `plan`, the one step that replaces an earlier plan, and drops the rest."""
        self._save(plan)
        self._drop_files_but(plan)
        self.log.info(
            "Publish plan for %s: %s (%s), %d change(s), %d batch(es)",
            self.database.name,
            plan.kind,
            plan.reason,
            len(plan.changes),
            len(plan.batches) or 1,
        )

    def _read_file(self, connection: Connection, since: int) -> _File:
        """What the plan is made from: the file's tables the data source holds, their tree
        and shapes, and the changes recorded after position `since`, settled."""
        catalog = Catalog(connection)
        tables = held_tables(catalog, self.tables, self.datasource)
        pending = PendingKeys(self.database).read()
        # Refuses before any change; the tree each full publish sends.
        model, missing = read_model(
            connection,
            tables,
            self.datasource,
            pending,
            chosen=self.tables is not None,
            declared=self.declared,
        )
        for key in missing:
            self.log.warning(
                "Foreign key %s is not in the file (%s); data source %r holds %s without it.",
                key.key,
                key.why,
                self.datasource,
                table_label(key.key.table),
            )
        recorded = self.outbox.settle(connection)
        changes = [c for c in recorded if c.seq > since and c.table in tables]
        return _File(
            tables,
            model,
            whole=len(tables) == len(catalog.tables()) and not model.copies,
            changes=changes,
            position=max([since, *(c.seq for c in recorded)]),
            shapes=fingerprint(connection, tables),
            version=file_version(connection, self.database),
            types={
                c.table: {col.name: col.sql_type for col in catalog.columns(c.table)}
                for c in changes
                if catalog.exists(c.table)
            },
        )

    def _take_snapshot(self, plan: Plan, file: _File, rows: tuple[SentRows, ...]) -> Plan | Taken:
        """`plan` with the copy of the file it sends written, for a data source holding the
        whole file; else taken: the file copied, its tree file for `build` to write from
        the copy. For a caller holding the database's lock; it starts the outbox's tracking
        on a first publish.

        A taken plan is saved as `positions.TAKEN` until `build` saves it as `plan.json`:
        its position keeps the changes writers record meanwhile in the outbox for it (the
        changes after the copy), which other data sources' publishes would otherwise clear.
        """
        files = self.files(plan)
        # The file is as the plan was read: no connection holds it while the lock is held.
        copy = files / ("snapshot.hyper" if file.whole else "source.hyper")
        if self.early_copy.exists():  # made before the lock: now made the file's equal
            make_equal(self.early_copy, self.database)
            self.early_copy.replace(copy)
        else:
            shutil.copyfile(self.database, copy)
        if file.whole:  # the payload of the plan saved next: on disk before it
            fsync_path(copy)
        tracking = self.outbox.tracking
        if not tracking:  # from a first publish, or after state.json was deleted
            self.outbox.start_tracking(after=positions.highest(self.outbox))
        plan = replace(
            plan,
            position=self.outbox.last_seq(),  # every change so far is in the copy
            rows=rows,
            payload_bytes=file_size(copy),
            started_tracking=not tracking,
        )
        if file.whole:
            return plan
        save(self._home / positions.TAKEN, plan)
        return Taken(plan, file.model, copy)

    def build(self, taken: Taken) -> Plan:
        """The taken plan with its tree file written from the file's copy, saved; for a
        caller not holding the database's lock (the copy is this publish's own)."""
        snapshot = self.files(taken.plan) / "snapshot.hyper"
        self.log.info("Writing the tree file of %r from a copy of the file", self.datasource)
        try:
            with self.hyper.open(taken.copy, create=False) as connection:
                write_subset(connection, taken.copy, taken.model, snapshot)
        finally:
            taken.copy.unlink(missing_ok=True)
        fsync_path(snapshot)  # the payload of the plan saved next: on disk before it
        plan = replace(taken.plan, payload_bytes=file_size(snapshot))
        self.log.info("Wrote the tree file of %r", self.datasource)
        self._keep(plan)
        return plan

    def _write_batches(self, plan: Plan, file: _File) -> Plan | None:
        """`plan` with the update batches that send its changes to each published copy of
        their table, their payload files written; None when the changes net to none."""
        files = self.files(plan)
        endpoint = self.hyper.shared.endpoint
        steps = net_steps(file.changes, file.types)
        parts = build_parts(
            endpoint,
            self.database,
            self.outbox,
            steps,
            files,
            self.max_payload_bytes,
            file.model.published,
        )
        batches = [
            batch
            for number, group in enumerate(pack(parts, self.max_payload_bytes))
            if (batch := batch_of(endpoint, group, files / f"batch-{number:03d}.hyper"))
        ]
        if not batches:
            return None
        return replace(
            plan, batches=tuple(batches), payload_bytes=sum(b.payload_bytes for b in batches)
        )

    def files(self, plan: Plan) -> Path:
        """Where the payload files of `plan` are."""
        return self._plan_dir / plan.id

    def _drop_files_but(self, plan: Plan) -> None:
        """Removes what earlier plans left in the plan directory."""
        for path in self._plan_dir.iterdir():
            if path.name not in (plan.id, "plan.json"):
                shutil.rmtree(path) if path.is_dir() else path.unlink()
