"""Publish a `.hyper` file to a Tableau data source: whole the first time, then what changed.

A publish sends the tables of one data source (every table of the file, or those given),
which must be one star (`hyper_assets.tableau._publish.model`). It surveys what it finds, decides
(`hyper_assets.tableau._publish.decision`: refuse, resume an unfinished plan, or plan anew), makes
a plan while holding the database's lock, saves it in the data source's directory of the
outbox (`hyper_assets.tableau._publish.positions`), and then sends it:

- a *full* plan holds a copy of the file (of its tables, for a data source holding some),
  published with overwrite. It is made for the first publish, when asked, when the data
  source is gone from the server, when a table was added or dropped or changed its shape
  (columns, types, nullability, collations, keys) or the file its format version, and
  when a crash left an append whose outcome cannot be told;
- an *update* plan holds batches, each a payload file and its actions, which the server
  applies atomically, in order (`hyper_assets.tableau._publish.changes` nets the changes into
  steps, `hyper_assets.tableau._publish.payload` writes their rows and the actions that read them).

The plan (`hyper_assets.tableau._publish.plan`) and its progress are saved around every request
(`hyper_assets.tableau._publish.sending`), so a re-run after a crash at any point resumes it. A
refused publish changes nothing, and an unfinished update plan is replaced only by a full
plan, once that one is saved: no change is ever sent twice.

Each batch's RequestID is derived from the plan, the changes it carries and its attempt
number: a batch the server accepted but whose job was never seen is sent again with the
same RequestID, which the server runs once. A failed job bumps the attempt (the server
answers a RequestID with its first job for 24 hours), and the next run sends the batch
again. Changes leave the outbox only once every data source holding their table has sent
them.
"""

from __future__ import annotations

import logging
import shutil
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from tableauhyperapi import Connection, SqlType, TableName

from hyper_assets._base.files import MEGABYTE, file_size, make_equal
from hyper_assets._engine.compaction import file_version
from hyper_assets._engine.resource import HyperResource
from hyper_assets._engine.sql import count_rows
from hyper_assets._engine.tables import Catalog, table_label
from hyper_assets._rows.outbox import Change, Outbox
from hyper_assets._rows.pending_keys import PendingKey, PendingKeys
from hyper_assets.errors import CorruptFileError, PublishError, TableauError, TableauRequestError
from hyper_assets.tableau._publish import positions
from hyper_assets.tableau._publish.changes import net_steps
from hyper_assets.tableau._publish.decision import (
    Found,
    MakePlan,
    Refuse,
    Resume,
    decide,
    what_to_send,
)
from hyper_assets.tableau._publish.model import (
    DataModel,
    describe,
    held_tables,
    read_model,
    server_refusal,
)
from hyper_assets.tableau._publish.payload import batch_of, build_parts, pack
from hyper_assets.tableau._publish.plan import (
    FULL_WAY_OUT,
    Fingerprint,
    Plan,
    PublishResult,
    PublishState,
    SentRows,
    Target,
    read_plan,
    read_state,
    save,
)
from hyper_assets.tableau._publish.progress import upload_progress
from hyper_assets.tableau._publish.publish_lock import DEFAULT_LOCK_TIMEOUT_SECONDS, publishing
from hyper_assets.tableau._publish.sending import BatchSender
from hyper_assets.tableau._publish.server_rows import (
    RowCounts,
    count_tables,
    rows_at_stake,
    server_rows,
)
from hyper_assets.tableau._publish.shape import fingerprint
from hyper_assets.tableau._publish.subset import write_subset
from hyper_assets.tableau._rest.client import DataSource, Job, TableauClient

log = logging.getLogger(__name__)

#: The size the publisher packs a batch's payload file to, at most: a server's default
#: limit for one update request. A server whose limit is lower answers 413, and the batch
#: is cut smaller and sent again.
DEFAULT_MAX_PAYLOAD_BYTES = 100 * MEGABYTE

__all__ = [
    "DEFAULT_MAX_PAYLOAD_BYTES",
    "PublishResult",
    "Publisher",
]


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
class _Taken:
    """A full plan whose tree file is still to be written, outside the database's lock,
    from `copy`: the file copied under the lock when `plan` was made from it."""

    plan: Plan
    model: DataModel
    copy: Path


class Publisher:
    """Keeps data source `datasource` of `project` equal to the `.hyper` file `database`."""

    def __init__(
        self,
        database: str | Path,
        hyper: HyperResource,
        client: TableauClient,
        datasource: str,
        project: str,
        *,
        max_payload_bytes: int = DEFAULT_MAX_PAYLOAD_BYTES,
        lock_timeout_seconds: float = DEFAULT_LOCK_TIMEOUT_SECONDS,
        logger: logging.Logger | logging.LoggerAdapter[Any] = log,
        saved: Callable[[], None] = lambda: None,
        tables: Sequence[str] | None = None,
        declared: Sequence[PendingKey] = (),
    ) -> None:
        """`saved` runs after each step the publish saves beside the file (its plan, a
        batch's progress, the publish state, the changes cleared): an object-store home
        commits the file's working copy there (`HyperDatabase.publishing`). `declared`:
        the foreign keys the tables' assets declare in their metadata; one between held
        tables that the file lacks refuses the publish, naming it."""
        self.database = Path(database).absolute()
        self._saved = saved
        self.hyper, self.client, self.log = hyper, client, logger
        self.datasource, self.project = datasource, project
        self.tables = list(tables) if tables is not None else None
        self.declared = tuple(declared)
        self.max_payload_bytes = max_payload_bytes
        self.lock_timeout_seconds = lock_timeout_seconds
        self.outbox = Outbox(self.database)
        #: Where this publisher sends; a publish state for another target is not ours.
        self.target = Target(client.site_url, project, datasource)
        self._home = positions.home(self.outbox, self.target)
        # One directory beside the file holds every data source's lock and holder record.
        locks = Path(f"{self.database}.publish")
        self._lock_path = locks / f"{self._home.name}.lock"
        self._holder_path = locks / f"{self._home.name}.holder.json"
        self._early_copy = locks / f"{self._home.name}.copy.hyper"
        self._plan_dir = self._home / "plan"
        self._state_path = self._home / positions.STATE
        self._sender = BatchSender(
            client, hyper.shared.endpoint, self._files, self._save, max_payload_bytes, logger
        )

    # --- the publish ---------------------------------------------------------------------------

    def publish(self, *, full: bool = False) -> PublishResult:
        """Sends a plan left by an earlier run, then what changed since; returns what was sent.

        `full` publishes the whole file, overwriting the data source, and drops a plan that
        an earlier run could not finish.

        One publish of a data source runs at a time: a second waits for the first (across
        processes), then sends what is still unsent, so two runs never send a change twice.
        `DataModelError`, before anything is sent or changed, when its tables cannot be
        published as one tree or lack a foreign key declared between them
        (`hyper_assets.tableau._publish.model`); a declared key to a table it does not hold that the
        file lacks is a warning.
        It waits up to `lock_timeout_seconds`, then raises `PublishLockedError` naming the
        process that holds the file.
        """
        what = f"{self.database} as {self.datasource!r}"
        with publishing(self._lock_path, self._holder_path, self.lock_timeout_seconds, what):
            try:
                self._copy_early(full)
                return self._publish(full)
            finally:
                self._early_copy.unlink(missing_ok=True)

    def _copy_early(self, full: bool) -> None:
        """Copies the file without its lock when the publish will likely send it whole (it
        is asked to, or the data source has no publish state and no plan): under the lock,
        `_take_snapshot` makes the copy equal to the file by reading both, not by writing
        it all, so writers wait less."""
        first = not (self._state_path.exists() or (self._plan_dir / "plan.json").exists())
        if (full or first) and self.database.exists():
            shutil.copyfile(self.database, self._early_copy)
            self.log.debug("Copied %s before taking its lock", self.database.name)

    def _publish(self, full: bool) -> PublishResult:
        """Survey, decide (`hyper_assets.tableau._publish.decision`), make the plan, send, commit.

        The database's lock is held for each step that must be one for the file's writers,
        and never while sending (writers go on meanwhile): the survey with what it decides
        (the outbox read, then its changes settled and their rows written into the plan's
        payload, or the file copied for a full plan, no write between), and the commit of
        each plan sent (its publish state saved, and the changes every data source sent
        cleared from the outbox that writers add to). A full plan's tree file is written
        from its copy after the lock is let go (`_build`), so writers do not wait for it. A
        resumed plan's commit and the making of the next plan are one step. So a publish
        takes the lock once, and once more for each plan it sends.
        """
        started = time.perf_counter()
        project_id = self.client.project(self.project).id
        server = self.client.find_datasource(self.datasource, project_id)
        with self.hyper.lock(self.database):
            found = self._survey(full, server)
            decision = decide(found)
            if isinstance(decision, Refuse):
                held = self._held_rows()
            elif isinstance(decision, MakePlan):
                if decision.replaces is not None:  # replaced once the next plan is saved
                    self.log.info(
                        "Replacing the unfinished %s plan %s",
                        decision.replaces.kind,
                        decision.replaces.id,
                    )
                made = self._make_plan(decision.full_reason, found.state, decision.replaces)
        if isinstance(decision, Refuse):
            raise self._refusal(decision.server_id, held)
        sent: list[tuple[Plan, list[Job]]] = []
        if isinstance(decision, Resume):
            resumed = decision.plan
            self.log.info(
                "Resuming the %s plan %s left by an earlier run", resumed.kind, resumed.id
            )
            resumed, jobs, state = self._send(resumed, project_id)
            sent.append((resumed, jobs))
            with self.hyper.lock(self.database):  # its commit, and the next plan
                state = self._commit(resumed, state)
                made = self._make_plan(None, state, replaces=None)
        taken, model = made
        new = self._build(taken) if isinstance(taken, _Taken) else taken
        if new is not None:
            new, jobs, state = self._send(new, project_id)
            sent.append((new, jobs))
            with self.hyper.lock(self.database):
                self._commit(new, state)
        seconds = time.perf_counter() - started
        return self._result(sent, seconds, project_id, server, describe(model))

    def _survey(self, full: bool, server: DataSource | None) -> Found:
        """What the publish finds beside the file, for a caller holding the database's lock,
        and on the server (`server`, the data source of its name there).

        Every outbox record is read first: one it cannot read refuses before anything
        changes. A full publish reads neither the publish state nor the plan: it replaces
        both, even unreadable.
        """
        self.outbox.read()
        positions.adopt(self.outbox, self._home, self.target)
        return Found(
            self.target,
            full,
            state=None if full else self._state(),
            plan=None if full else read_plan(self._plan_dir / "plan.json"),
            server_id=server.id if server is not None else None,
        )

    def _held_rows(self) -> RowCounts:
        """The rows of each table the data source holds, for a caller holding the lock."""
        with self.hyper.open(self.database, create=False) as db:
            return count_tables(db, held_tables(Catalog(db), self.tables, self.datasource))

    def _refusal(self, server_id: str, held: RowCounts) -> PublishError:
        """The refusal to overwrite data source `server_id`, not published from the file,
        stating the rows of its copy against those the file `held`, per table."""
        server = server_rows(self.client, self.hyper, server_id, self.database.parent)
        return PublishError(
            f"Data source {self.datasource!r} in project {self.project!r} exists but was "
            f"not published from {self.database}: {rows_at_stake(server, held)} Publish "
            "with full=True to overwrite it, or pick another data source name."
        )

    def _state(self) -> PublishState | None:
        return read_state(self._state_path)

    def _sent_state(self) -> PublishState:
        """The publish state, which a data source sent to has."""
        state = self._state()
        if state is None:
            raise CorruptFileError(
                f"{self._state_path} was removed during the publish of {self.datasource!r}; "
                f"nothing more was sent. {FULL_WAY_OUT}"
            )
        return state

    def _save(self, plan: Plan) -> None:
        save(self._plan_dir / "plan.json", plan)
        self._saved()

    # --- making a plan -------------------------------------------------------------------------

    def _make_plan(
        self, full_reason: str | None, state: PublishState | None, replaces: Plan | None
    ) -> tuple[Plan | _Taken | None, DataModel]:
        """The plan for the changes recorded since the publish `state` (None when there is
        nothing to send), and the tree the data source's copy holds; for a caller holding
        the database's lock, so the payload holds the rows of the changes planned.

        `full_reason` (from `decide`) makes it send the whole file, with every change so
        far. An update plan, or a full plan of the whole file, is saved here; a full plan
        of a tree is returned as taken (`_Taken`), for `_build` to finish once the lock is
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
        files = self._files(plan)
        shutil.rmtree(files, ignore_errors=True)
        files.mkdir(parents=True)
        if sending.kind == "full":
            taken = self._take_snapshot(plan, file, rows)
            if isinstance(taken, _Taken):
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

    def _take_snapshot(self, plan: Plan, file: _File, rows: tuple[SentRows, ...]) -> Plan | _Taken:
        """`plan` with the copy of the file it sends written, for a data source holding the
        whole file; else taken: the file copied, its tree file for `_build` to write from
        the copy. For a caller holding the database's lock; it starts the outbox's tracking
        on a first publish.

        A taken plan is saved as `positions.TAKEN` until `_build` saves it as `plan.json`:
        its position keeps the changes writers record meanwhile in the outbox for it (the
        changes after the copy), which other data sources' publishes would otherwise clear.
        """
        files = self._files(plan)
        # The file is as the plan was read: no connection holds it while the lock is held.
        copy = files / ("snapshot.hyper" if file.whole else "source.hyper")
        if self._early_copy.exists():  # made before the lock: now made the file's equal
            make_equal(self._early_copy, self.database)
            self._early_copy.replace(copy)
        else:
            shutil.copyfile(self.database, copy)
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
        return _Taken(plan, file.model, copy)

    def _build(self, taken: _Taken) -> Plan:
        """The taken plan with its tree file written from the file's copy, saved; for a
        caller not holding the database's lock (the copy is this publish's own)."""
        snapshot = self._files(taken.plan) / "snapshot.hyper"
        self.log.info("Writing the tree file of %r from a copy of the file", self.datasource)
        try:
            with self.hyper.open(taken.copy, create=False) as connection:
                write_subset(connection, taken.copy, taken.model, snapshot)
        finally:
            taken.copy.unlink(missing_ok=True)
        plan = replace(taken.plan, payload_bytes=file_size(snapshot))
        self.log.info("Wrote the tree file of %r", self.datasource)
        self._keep(plan)
        return plan

    def _write_batches(self, plan: Plan, file: _File) -> Plan | None:
        """`plan` with the update batches that send its changes to each published copy of
        their table, their payload files written; None when the changes net to none."""
        files = self._files(plan)
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

    def _files(self, plan: Plan) -> Path:
        """Where the payload files of `plan` are."""
        return self._plan_dir / plan.id

    def _drop_files_but(self, plan: Plan) -> None:
        """Removes what earlier plans left in the plan directory."""
        for path in self._plan_dir.iterdir():
            if path.name not in (plan.id, "plan.json"):
                shutil.rmtree(path) if path.is_dir() else path.unlink()

    # --- sending a plan ------------------------------------------------------------------------

    def _send(self, plan: Plan, project_id: str) -> tuple[Plan, list[Job], PublishState]:
        """Sends `plan`; returns it as sent (its batches maybe cut smaller), its jobs, and
        the publish state of the data source it went to."""
        if plan.kind == "full":
            return plan, [], self._send_full(plan, project_id)
        state = self._sent_state()
        plan, jobs = self._sender.send(plan, state.datasource_id)
        return plan, jobs, state

    def _commit(self, plan: Plan, state: PublishState) -> PublishState:
        """Records that `plan` was sent to the data source of `state`, for a caller holding
        the database's lock: saves the state it makes, returned; drops the plan; clears the
        changes every data source has sent."""
        state = state.after(plan)
        save(self._state_path, state)
        shutil.rmtree(self._plan_dir)
        self.outbox.clear(positions.sent_by_all(self.outbox))
        self._saved()
        return state

    def _send_full(self, plan: Plan, project_id: str) -> PublishState:
        """Sends the plan's snapshot; returns the publish state it makes, saved."""
        snapshot = self._files(plan) / "snapshot.hyper"
        size = file_size(snapshot)
        self.log.info("Publishing %s whole (%d bytes): %s", self.database.name, size, plan.reason)
        try:
            source = self.client.publish_file(
                snapshot,
                self.datasource,
                project_id,
                overwrite=True,
                on_progress=upload_progress(self.log, snapshot.name),
            )
        except TableauRequestError as error:
            refusal = server_refusal(error, self.datasource)
            if refusal is None:
                raise
            self._forget(plan)
            raise refusal from error
        state = PublishState(
            self.target, source.id, plan.fingerprint, plan.database_version, copy_bytes=size
        )
        save(self._state_path, state.after(plan))
        self._saved()
        return state

    def _forget(self, plan: Plan) -> None:
        """Drops a plan the server refused, and the tracking it started: as before it.
        Under the database's lock: the outbox it may remove is the writers' too."""
        with self.hyper.lock(self.database):
            shutil.rmtree(self._plan_dir)
            if plan.started_tracking and not any(
                positions.position(d) for d in self._home.parent.glob("*")
            ):
                shutil.rmtree(self.outbox.directory)
        self._saved()

    def _result(
        self,
        sent: list[tuple[Plan, list[Job]]],
        seconds: float,
        project_id: str,
        seen: DataSource | None,
        model: str,
    ) -> PublishResult:
        state = self._sent_state()
        url = self._webpage_url(state.datasource_id, project_id, seen)
        jobs = [(plan, tuple(job.id for job in jobs)) for plan, jobs in sent]
        return PublishResult.of(
            jobs, state.datasource_id, url, seconds, model, copy_bytes=state.copy_bytes
        )

    def _webpage_url(
        self, datasource_id: str, project_id: str, seen: DataSource | None
    ) -> str | None:
        """The data source's page as the server gives it (`webpageUrl`); None if it gives none.

        Real servers give it in lists, not in the reply to a publish: the lookup made before
        sending serves when it found this data source, else it is looked up again. The data
        is on the server by then, so a failing lookup is a warning, not a failed publish.
        """
        if seen is None or seen.id != datasource_id:
            try:
                seen = self.client.find_datasource(self.datasource, project_id)
            except TableauError as error:
                self.log.warning("Published; its page address is unknown: %s", error)
                return None
        return seen.webpage_url if seen is not None and seen.id == datasource_id else None
