"""Publish a `.hyper` file to a Tableau data source: whole the first time, then what changed.

A publish sends the tables of one data source (every table of the file, or those given),
which must be one star (`hyper_assets.tableau._publish.model`). It surveys what it finds, decides
(`hyper_assets.tableau._publish.decision`: refuse, resume an unfinished plan, or plan anew), makes
a plan (`hyper_assets.tableau._publish.planner`) while holding the database's lock, saves it in
the data source's directory of the outbox (`hyper_assets.tableau._publish.positions`), and then
sends it:

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
from pathlib import Path
from typing import Any

from hyper_assets._base.files import MEGABYTE, file_size
from hyper_assets._engine.resource import HyperResource
from hyper_assets._engine.tables import Catalog
from hyper_assets._rows.outbox import Outbox
from hyper_assets._rows.pending_keys import PendingKey
from hyper_assets.errors import CorruptFileError, PublishError, TableauError, TableauRequestError
from hyper_assets.tableau._publish import positions
from hyper_assets.tableau._publish.decision import Found, MakePlan, Refuse, Resume, decide
from hyper_assets.tableau._publish.model import describe, held_tables, server_refusal
from hyper_assets.tableau._publish.plan import (
    FULL_WAY_OUT,
    Plan,
    PublishResult,
    PublishState,
    Target,
    read_plan,
    read_state,
    save,
)
from hyper_assets.tableau._publish.planner import Planner, Taken
from hyper_assets.tableau._publish.progress import upload_progress
from hyper_assets.tableau._publish.publish_lock import DEFAULT_LOCK_TIMEOUT_SECONDS, publishing
from hyper_assets.tableau._publish.sending import BatchSender
from hyper_assets.tableau._publish.server_rows import (
    RowCounts,
    count_tables,
    rows_at_stake,
    server_rows,
)
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
        self._plan_dir = self._home / "plan"
        self._state_path = self._home / positions.STATE
        self._planner = Planner(
            self.database,
            hyper,
            self.outbox,
            self.target,
            self._home,
            locks / f"{self._home.name}.copy.hyper",
            tables=self.tables,
            declared=self.declared,
            max_payload_bytes=max_payload_bytes,
            logger=logger,
            save=self._save,
        )
        files, endpoint = self._planner.files, hyper.shared.endpoint
        self._sender = BatchSender(client, endpoint, files, self._save, max_payload_bytes, logger)

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
                self._planner.copy_early(full)
                return self._publish(full)
            finally:
                self._planner.early_copy.unlink(missing_ok=True)

    def _publish(self, full: bool) -> PublishResult:
        """Survey, decide (`hyper_assets.tableau._publish.decision`), make the plan, send, commit.

        The database's lock is held for each step that must be one for the file's writers,
        and never while sending (writers go on meanwhile): the survey with what it decides
        (the outbox read, then its changes settled and their rows written into the plan's
        payload, or the file copied for a full plan, no write between), and the commit of
        each plan sent (its publish state saved, and the changes every data source sent
        cleared from the outbox that writers add to). A full plan's tree file is written
        from its copy after the lock is let go (`Planner.build`), so writers do not wait for it. A
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
                made = self._planner.make(decision.full_reason, found.state, decision.replaces)
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
                made = self._planner.make(None, state, replaces=None)
        taken, model = made
        new = self._planner.build(taken) if isinstance(taken, Taken) else taken
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
        snapshot = self._planner.files(plan) / "snapshot.hyper"
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
