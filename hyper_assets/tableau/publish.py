"""Publish a `.hyper` file to a Tableau data source: whole the first time, then what changed.

A publish sends the tables of one data source (every table of the file, or those given),
which must be one star (`hyper_assets.tableau.model`). It makes a plan while holding the
database's lock, saves it in the data source's directory of the outbox
(`hyper_assets.tableau.positions`), and then sends it:

- a *full* plan holds a copy of the file (of its tables, for a data source holding some),
  published with overwrite. It is made for the first publish, when asked, when the data
  source is gone from the server, when a table was added or dropped or changed its shape
  (columns, types, nullability, collations, keys) or the file its format version, and
  when a crash left an append whose outcome cannot be told;
- an *update* plan holds batches, each a payload file and its actions, which the server
  applies atomically, in order (`hyper_assets.tableau.changes` says which actions).

The plan and its progress are saved around every request, so a re-run after a crash at
any point resumes it. A refused publish changes nothing, and an unfinished update plan is
replaced only by a full plan, once that one is saved: no change is ever sent twice.

Each batch's RequestID is derived from the plan, the changes it carries and its attempt
number: a batch the server accepted but whose job was never seen is sent again with the
same RequestID, which the server runs once. A failed job bumps the attempt (the server
answers a RequestID with its first job for 24 hours), and the next run sends the batch
again. Changes leave the outbox only once every data source holding their table has sent
them.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import shutil
import socket
import time
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Literal

from filelock import FileLock, Timeout
from tableauhyperapi import Connection, Nullability, TableName

from hyper_assets._files import MEGABYTE, file_mode, write_json
from hyper_assets._sql import count_rows
from hyper_assets.compaction import file_version
from hyper_assets.errors import (
    PayloadTooLargeError,
    PublishError,
    PublishLockedError,
    TableauError,
    TableauJobError,
    TableauJobTimeoutError,
    TableauRequestError,
)
from hyper_assets.outbox import Change, Outbox, read_json
from hyper_assets.resource import HyperResource
from hyper_assets.tableau import positions
from hyper_assets.tableau.actions import Action, parse_batch
from hyper_assets.tableau.changes import net_steps
from hyper_assets.tableau.client import DataSource, Job, TableauClient
from hyper_assets.tableau.model import held_tables, read_model, server_refusal
from hyper_assets.tableau.payload import build_parts, pack, split_batch, write_batch
from hyper_assets.tableau.subset import write_subset
from hyper_assets.tables import Catalog, table_label
from hyper_assets.types import sql_name

log = logging.getLogger(__name__)

DEFAULT_MAX_PAYLOAD_BYTES = 100 * MEGABYTE
#: Longer than a publish takes within the client's default job and request timeouts.
DEFAULT_LOCK_TIMEOUT_SECONDS = 2 * 3600.0


@dataclass
class Batch:
    """One update request: actions, the payload file they read, what it carries."""

    actions: list[Action]
    payload: str | None
    rows: list[dict[str, Any]]
    changes: list[str]
    payload_bytes: int = 0
    attempt: int = 0
    job_id: str | None = None
    done: bool = False
    units: list[int] = field(default_factory=list)  # actions per part, in order
    requested: bool = False  # sent in this attempt: maybe applied, so never cut

    def to_json(self) -> dict[str, Any]:
        """The batch as plan.json holds it: actions in the wire format Tableau reads."""
        return {**vars(self), "actions": [a.to_json() for a in self.actions]}

    @classmethod
    def from_json(cls, body: dict[str, Any]) -> Batch:
        return cls(**{**body, "actions": parse_batch(body["actions"])})


@dataclass
class Plan:
    """What one publish sends; saved as JSON so that a re-run resumes it."""

    kind: Literal["full", "update"]
    reason: str
    changes: list[dict[str, Any]]
    fingerprint: dict[str, Any]
    target: dict[str, str]
    rows: list[dict[str, Any]] = field(default_factory=list)
    batches: list[Batch] = field(default_factory=list)
    payload_bytes: int = 0
    tables: list[str] = field(default_factory=list)  # the tables of the data source
    position: int = 0  # the outbox's changes through this one are in the plan
    started_tracking: bool = False  # its making started the outbox's tracking
    id: str = field(default_factory=lambda: uuid.uuid4().hex)
    database_version: int | None = None  # the file's format version; None in older plans

    def request_id(self, index: int) -> str:
        """Stable for one batch attempt: derived from the plan, its changes and the attempt."""
        batch = self.batches[index]
        text = "|".join([self.id, *batch.changes, str(index), str(batch.attempt)])
        return "hyper-assets-" + hashlib.sha256(text.encode()).hexdigest()[:40]

    def to_json(self) -> dict[str, Any]:
        return {**vars(self), "batches": [b.to_json() for b in self.batches]}

    @classmethod
    def from_json(cls, body: dict[str, Any]) -> Plan:
        batches = [Batch.from_json(b) for b in body.pop("batches")]
        return cls(**{"target": {}, **body}, batches=batches)


@dataclass(frozen=True)
class PublishResult:
    """What a publish sent, for logs and Dagster metadata."""

    datasource_id: str
    webpage_url: str | None  # the data source's page as the server gave it; None: it gave none
    kind: str
    reason: str
    job_ids: tuple[str, ...]
    batches: int
    payload_bytes: int
    rows: tuple[dict[str, Any], ...]
    changes: int
    seconds: float


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
    ) -> None:
        """`saved` runs after each step the publish saves beside the file (its plan, a
        batch's progress, the publish state, the changes cleared): an object-store home
        commits the file's working copy there (`HyperDatabase.publishing`)."""
        self.database = Path(database).absolute()
        self._saved = saved
        self.hyper, self.client, self.log = hyper, client, logger
        self.datasource, self.project = datasource, project
        self.tables = list(tables) if tables is not None else None
        self.max_payload_bytes = max_payload_bytes
        self.lock_timeout_seconds = lock_timeout_seconds
        self.outbox = Outbox(self.database)
        self._home = positions.home(self.outbox, self._target())
        self._lock_path = Path(f"{self.database}.publish.{self._home.name}.lock")
        self._holder_path = Path(f"{self.database}.publish.{self._home.name}.holder.json")
        self._plan_dir = self._home / "plan"
        self._state_path = self._home / positions.STATE

    # --- the publish ---------------------------------------------------------------------------

    def publish(self, *, full: bool = False) -> PublishResult:
        """Sends a plan left by an earlier run, then what changed since; returns what was sent.

        `full` publishes the whole file, overwriting the data source, and drops a plan that
        an earlier run could not finish.

        One publish of a data source runs at a time: a second waits for the first (across
        processes), then sends what is still unsent, so two runs never send a change twice.
        `DataModelError`, before anything is sent or changed, when its tables are not one
        star (`hyper_assets.tableau.model`).
        It waits up to `lock_timeout_seconds`, then raises `PublishLockedError` naming the
        process that holds the file.
        """
        lock = FileLock(self._lock_path, mode=file_mode())
        try:
            lock.acquire(timeout=self.lock_timeout_seconds)
        except Timeout as error:
            raise self._locked() from error
        try:
            holder = {"pid": os.getpid(), "host": socket.gethostname(), "since": _now()}
            write_json(self._holder_path, holder)
            with self.hyper.lock(self.database):
                positions.adopt(self.outbox, self._home, self._target())
            return self._publish(full)
        finally:
            lock.release()

    def _locked(self) -> PublishLockedError:
        try:
            holder = json.loads(self._holder_path.read_text())
            who = f"process {holder['pid']} on {holder['host']}, publishing since {holder['since']}"
        except (OSError, ValueError, KeyError, TypeError):
            who = "a process that did not say who it is"
        return PublishLockedError(
            f"Another publish of {self.database} as {self.datasource!r} still runs after "
            f"{self.lock_timeout_seconds:g} s of waiting: {who}. If it hangs, stop it (the next "
            "publish resumes its plan); else wait for it, or raise lock_timeout_seconds."
        )

    def _publish(self, full: bool) -> PublishResult:
        started = time.perf_counter()
        project_id = self.client.project(self.project).id
        existing = self.client.find_datasource(self.datasource, project_id)
        # A full publish needs neither the state nor a plan: it replaces both, even unreadable.
        state = None if full else self._state()
        ours = state is not None and state["target"] == self._target()
        current = ours and existing is not None and existing.id == state["datasource_id"]
        plan = None if full else self._load_plan()
        # An update plan goes to the data source of the publish state; a full plan names its own.
        resume = plan is not None and (
            current if plan.kind == "update" else plan.target == self._target()
        )
        # Refuse before changing anything: an unfinished plan stays for the next run.
        if existing is not None and not ours and not full and not (resume and plan.kind == "full"):
            raise PublishError(
                f"Data source {self.datasource!r} in project {self.project!r} exists but was "
                f"not published from {self.database}. Publish with full=True to overwrite it, "
                "or pick another data source name."
            )
        sent: list[tuple[Plan, list[Job]]] = []
        if plan is not None and resume:
            self.log.info("Resuming the %s plan %s left by an earlier run", plan.kind, plan.id)
            sent.append((plan, self._send(plan, project_id)))
            if plan.kind == "full":
                full, ours, current = False, True, True
            plan = None
        elif plan is not None:
            # Replaced once the next plan is saved; for an update plan that is a full one.
            self.log.info("Replacing the unfinished %s plan %s", plan.kind, plan.id)
        new = self._make_plan(_forced_reason(full, ours, current), replaces=plan)
        if new is not None:
            sent.append((new, self._send(new, project_id)))
        return self._result(sent, time.perf_counter() - started, project_id, existing)

    def _target(self) -> dict[str, str]:
        """Where this publisher sends; a publish state for another target is not ours."""
        return {
            "site": self.client.site_url,
            "project": self.project,
            "datasource": self.datasource,
        }

    def _state(self) -> dict[str, Any] | None:
        if not self._state_path.exists():
            return None
        return read_json(self._state_path, _parse_state, _FULL_WAY_OUT)

    def _load_plan(self) -> Plan | None:
        path = self._plan_dir / "plan.json"
        return read_json(path, Plan.from_json, _FULL_WAY_OUT) if path.exists() else None

    def _save(self, plan: Plan) -> None:
        write_json(self._plan_dir / "plan.json", plan.to_json())
        self._saved()

    # --- making a plan -------------------------------------------------------------------------

    def _make_plan(self, full_reason: str, replaces: Plan | None) -> Plan | None:
        """The plan for the changes recorded so far; None when there is nothing to send.

        The plan's files go to a directory of their own; saving `plan.json` is the one
        step that replaces the plan `replaces`, so a failure before it leaves that plan.
        """
        with self.hyper.lock(self.database):
            with self.hyper.open(self.database, create=False) as connection:
                catalog = Catalog(connection)
                tables = held_tables(catalog, self.tables, self.datasource)
                read_model(connection, tables, self.datasource)  # refuses before any change
                whole_file = len(tables) == len(catalog.tables())
                self.outbox.settle(connection)
                recorded = self.outbox.changes()
                state = None if full_reason else self._state()
                sent = state.get("position", 0) if state else 0
                labels = [table_label(t) for t in tables]
                changes = [c for c in recorded if c.seq > sent and c.table in tables]
                position = max([sent, *(c.seq for c in recorded)])
                fingerprint = _fingerprint(connection, tables)
                version = file_version(connection, self.database)
                types = {
                    c.table: {col.name: col.sql_type for col in catalog.columns(c.table)}
                    for c in changes
                    if catalog.exists(c.table)
                }
                reason = full_reason or _shape_reason(changes, fingerprint, version, state)
                rows = [
                    {
                        "table": table_label(t),
                        "action": "publish",
                        "rows": count_rows(connection, t),
                    }
                    for t in (tables if reason else [])
                ]
            if not reason and not changes:
                if replaces is not None:  # a full plan for another data source: moot
                    shutil.rmtree(self._plan_dir)
                return None
            carried = [c.to_json() for c in changes]
            plan = Plan(
                "full" if reason else "update",
                reason,
                carried,
                fingerprint,
                self._target(),
                database_version=version,
            )
            plan.tables, plan.position = labels, position
            files = self._files(plan)
            shutil.rmtree(files, ignore_errors=True)
            files.mkdir(parents=True)
            if reason:
                snapshot = files / "snapshot.hyper"
                if whole_file:
                    shutil.copyfile(self.database, snapshot)
                else:
                    with self.hyper.open(self.database, create=False) as connection:
                        write_subset(connection, self.database, tables, snapshot)
                plan.started_tracking = not self.outbox.tracking
                self.outbox.start_tracking()
                plan.rows, plan.payload_bytes = rows, _size(snapshot)
            else:
                plan.reason = "changes since the last publish"
                plan.batches = self._batches(changes, types, files)
                if not plan.batches:  # only changes of tables no longer in the file
                    self.outbox.clear(changes)
                    shutil.rmtree(self._plan_dir)  # and a plan for another data source
                    return None
                plan.payload_bytes = sum(b.payload_bytes for b in plan.batches)
            self._save(plan)
            self._drop_files_but(plan)
        self.log.info(
            "Publish plan for %s: %s (%s), %d change(s), %d batch(es)",
            self.database.name,
            plan.kind,
            plan.reason,
            len(changes),
            len(plan.batches) or 1,
        )
        return plan

    def _files(self, plan: Plan) -> Path:
        """Where the payload files of `plan` are."""
        return self._plan_dir / plan.id

    def _drop_files_but(self, plan: Plan) -> None:
        """Removes what earlier plans left in the plan directory."""
        for path in self._plan_dir.iterdir():
            if path.name not in (plan.id, "plan.json"):
                shutil.rmtree(path) if path.is_dir() else path.unlink()

    def _batches(
        self, changes: list[Change], types: dict[TableName, Any], files: Path
    ) -> list[Batch]:
        steps = net_steps(changes, types)
        parts = build_parts(
            self.hyper.shared.endpoint,
            self.database,
            self.outbox,
            steps,
            files,
            self.max_payload_bytes,
        )
        batches = []
        for number, group in enumerate(pack(parts, self.max_payload_bytes)):
            path = files / f"batch-{number:03d}.hyper"
            payload = write_batch(self.hyper.shared.endpoint, group, path)
            sending = [p for p in group if p.actions()]
            if not sending:
                continue
            actions = [a for part in sending for a in part.actions()]
            rows = [
                {"table": table_label(p.step.table), "action": p.step.kind, "rows": p.rows}
                for p in sending
            ]
            carried = list(dict.fromkeys(c.id for p in group for c in p.step.changes))
            name = payload.name if payload else None
            units = [len(p.actions()) for p in sending]
            batches.append(Batch(actions, name, rows, carried, _size(payload), units=units))
        return batches

    # --- sending a plan ------------------------------------------------------------------------

    def _send(self, plan: Plan, project_id: str) -> list[Job]:
        if plan.kind == "full":
            jobs = self._send_full(plan, project_id)
        else:
            jobs = self._send_batches(plan)
        with self.hyper.lock(self.database):
            state = self._state()
            assert state is not None
            write_json(self._state_path, state | _sent(plan))
            shutil.rmtree(self._plan_dir)
            self.outbox.clear(positions.sent_by_all(self.outbox))
        self._saved()
        return jobs

    def _send_full(self, plan: Plan, project_id: str) -> list[Job]:
        snapshot = self._files(plan) / "snapshot.hyper"
        self.log.info(
            "Publishing %s whole (%d bytes): %s", self.database.name, _size(snapshot), plan.reason
        )
        try:
            source = self.client.publish_file(
                snapshot,
                self.datasource,
                project_id,
                overwrite=True,
                on_progress=self._upload_progress(snapshot.name),
            )
        except TableauRequestError as error:
            refusal = server_refusal(error, self.datasource)
            if refusal is None:
                raise
            self._forget(plan)
            raise refusal from error
        state = {"target": self._target(), "datasource_id": source.id}
        shape = {"fingerprint": plan.fingerprint, "database_version": plan.database_version}
        write_json(self._state_path, state | shape | _sent(plan))
        self._saved()
        return []

    def _forget(self, plan: Plan) -> None:
        """Drops a plan the server refused, and the tracking it started: as before it."""
        with self.hyper.lock(self.database):
            shutil.rmtree(self._plan_dir)
            if plan.started_tracking and not any(
                positions.position(d) for d in self._home.parent.glob("*")
            ):
                shutil.rmtree(self.outbox.directory)
        self._saved()

    def _send_batches(self, plan: Plan) -> list[Job]:
        state = self._state()
        assert state is not None
        jobs = []
        index = 0
        while index < len(plan.batches):
            batch = plan.batches[index]
            if batch.done:
                index += 1
                continue
            if not batch.requested and batch.payload_bytes > self.max_payload_bytes:
                self._split(plan, index, self.max_payload_bytes)
                batch = plan.batches[index]
            request_id = plan.request_id(index)
            payload = self._files(plan) / batch.payload if batch.payload else None
            self.log.info(
                "Batch %d/%d: %s; payload %d bytes; RequestID %s",
                index + 1,
                len(plan.batches),
                ", ".join(f"{r['action']} {r['rows']} rows of {r['table']}" for r in batch.rows),
                _size(payload),
                request_id,
            )
            try:
                # A job an earlier run started is waited for, never sent again: Tableau
                # forgets a RequestID after 24 hours, but not the job.
                job = self._known_job(batch.job_id) if batch.job_id else None
                if job is None:
                    batch.requested = True
                    self._save(plan)
                    job = self.client.update_data(
                        state["datasource_id"],
                        batch.actions,
                        request_id=request_id,
                        payload=payload,
                        on_progress=self._upload_progress(batch.payload or ""),
                    )
                    batch.job_id = job.id
                    self._save(plan)
                jobs.append(self.client.wait_for_job(job.id, on_progress=self._job_progress()))
            except PayloadTooLargeError as err:
                # Refused before it ran: sent again as smaller batches, down to one row.
                if self._split(plan, index, batch.payload_bytes // 2):
                    continue
                raise PublishError(
                    f"The server refused batch {index + 1} of {len(plan.batches)} "
                    f"({batch.payload_bytes} bytes) as too large, and it cannot be cut smaller "
                    "(one row). Raise the server's update payload limit, or publish the whole "
                    "file with full=True."
                ) from err
            except TableauJobTimeoutError as err:
                raise PublishError(
                    f"{err} Run the publish again: it waits for the same job (RequestID "
                    f"{request_id})."
                ) from err
            except TableauJobError as err:
                batch.attempt += 1
                batch.job_id, batch.requested = None, False
                self._save(plan)
                raise PublishError(
                    f"Batch {index + 1} of {len(plan.batches)} failed on the server, which left "
                    f"the data source as it was: {err.notes or err}. The outbox keeps the "
                    "changes and the next run sends them again. If it keeps failing, publish "
                    "the whole file with full=True."
                ) from err
            batch.done = True
            self._save(plan)
            index += 1
        return jobs

    def _split(self, plan: Plan, index: int, max_bytes: int) -> bool:
        """Replaces unsent batch `index` by smaller ones; False when it cannot be cut."""
        batch = plan.batches[index]
        payload = self._files(plan) / batch.payload if batch.payload else None
        pieces = split_batch(
            self.hyper.shared.endpoint, payload, batch.actions, batch.units, max_bytes
        )
        pieces = [p for p in pieces if p.actions]
        if len(pieces) <= 1:
            for piece in pieces:
                if piece.path is not None:
                    piece.path.unlink()
            return False
        self.log.info(
            "Cutting batch %d (%d bytes) into %d batches of at most about %d bytes",
            index + 1,
            batch.payload_bytes,
            len(pieces),
            max_bytes,
        )
        plan.batches[index : index + 1] = [
            Batch(
                list(piece.actions),
                piece.path.name if piece.path else None,
                [{**batch.rows[piece.unit], "rows": piece.rows}] if batch.rows else [],
                batch.changes,
                _size(piece.path),
                attempt=batch.attempt + 1,  # never the RequestID the server refused
                units=[len(piece.actions)],
            )
            for piece in pieces
        ]
        plan.payload_bytes = sum(b.payload_bytes for b in plan.batches)
        self._save(plan)
        if payload is not None:
            payload.unlink()
        return True

    def _known_job(self, job_id: str) -> Job | None:
        """The job `job_id`, or None when the server does not know it."""
        try:
            return self.client.get_job(job_id)
        except TableauRequestError as err:
            if err.status == 404:
                return None
            raise

    def _upload_progress(self, name: str) -> Callable[[int, int], None]:
        shown = [-1]

        def report(done: int, total: int) -> None:
            tenth = 10 * done // max(total, 1)
            if tenth != shown[0]:
                shown[0] = tenth
                self.log.info("Uploading %s: %d of %d bytes", name, done, total)

        return report

    def _job_progress(self) -> Callable[[Job], None]:
        shown: list[int] = [-1]

        def report(job: Job) -> None:
            if job.progress != shown[0]:
                shown[0] = job.progress
                self.log.info("Job %s: %d%%", job.id, job.progress)

        return report

    def _result(
        self,
        sent: list[tuple[Plan, list[Job]]],
        seconds: float,
        project_id: str,
        seen: DataSource | None,
    ) -> PublishResult:
        state = self._state()
        assert state is not None
        plans = [plan for plan, _ in sent]
        full = [p for p in plans if p.kind == "full"]
        return PublishResult(
            datasource_id=state["datasource_id"],
            webpage_url=self._webpage_url(state["datasource_id"], project_id, seen),
            kind="full" if full else "update" if plans else "none",
            reason="; ".join(p.reason for p in plans) or "nothing changed since the last publish",
            job_ids=tuple(job.id for _, jobs in sent for job in jobs),
            batches=sum(len(p.batches) for p in plans),
            payload_bytes=sum(p.payload_bytes for p in plans),
            rows=tuple(
                r for p in plans for r in (p.rows or [r for b in p.batches for r in b.rows])
            ),
            changes=sum(len(p.changes) for p in plans),
            seconds=round(seconds, 3),
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


_FULL_WAY_OUT = "Publish with full=True: a whole-file publish replaces it."


def _parse_state(body: Any) -> dict[str, Any]:
    """The publish state: where the file was published, and the tables' shapes then."""
    if not (isinstance(body["target"], dict) and isinstance(body["datasource_id"], str)):
        raise TypeError("target must be an object and datasource_id a string")
    return dict(body)


def _sent(plan: Plan) -> dict[str, Any]:
    """What the publish state records once `plan` was sent: its tables, and its position."""
    return {"position": plan.position, "tables": plan.tables}


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds")


def _forced_reason(full: bool, ours: bool, current: bool) -> str:
    """Why the next plan must publish the whole file, or "" when changes will do."""
    if full:
        return "asked for a full publish"
    if not ours:
        return "first publish to this data source"
    if not current:
        return "the data source is missing on the server or was replaced"
    return ""


def _shape_reason(
    changes: list[Change],
    fingerprint: dict[str, Any],
    version: int,
    state: dict[str, Any] | None,
) -> str:
    """Why the recorded changes cannot be sent as an update, or "" when they can.

    A file whose format `version` changed since it was last published is sent whole:
    Tableau keeps the version of the file it was sent. A publish state written before
    versions were recorded counts as version 2, the default then.
    """
    uncertain = [c for c in changes if c.uncertain]
    if uncertain:
        return (
            f"a crash left an append to {table_label(uncertain[0].table)} whose outcome "
            "cannot be told"
        )
    published_version = (state or {}).get("database_version")
    published_version = 2 if published_version is None else published_version
    if published_version != version:
        return f"the file's format version changed ({published_version} -> {version})"
    published = (state or {}).get("fingerprint", {})
    for label, shape in fingerprint.items():
        if label not in published:
            return f"table {label} is new"
        if published[label] != shape:
            return f"table {label} {_shape_change(published[label], shape)}"
    dropped = [label for label in published if label not in fingerprint]
    return f"table {dropped[0]} was dropped" if dropped else ""


def _shape_change(published: dict[str, Any], current: dict[str, Any]) -> str:
    """How a table's shape changed, for the reason of a whole-file publish."""
    before, after = published["columns"], current["columns"]
    same_keys = all(published[k] == current[k] for k in ("primary_key", "foreign_keys"))
    if same_keys and len(after) > len(before) and after[: len(before)] == before:
        names = ", ".join(c["name"] for c in after[len(before) :])
        return f"gained column(s) {names}, and action batches cannot change a table's shape"
    return "changed its columns, nullability or keys"


def _fingerprint(connection: Connection, tables: list[TableName]) -> dict[str, Any]:
    """What each table's shape on the server depends on; a change means a whole-file publish.

    Per table of the data source, in plain JSON values: every column's name, SQL type,
    nullability and collation, in order; the ASSUMED primary key and the foreign keys to
    the data source's tables.
    """
    catalog = Catalog(connection)
    shapes = {}
    for table in tables:
        definition = connection.catalog.get_table_definition(table)
        keys = catalog.keys(table)
        shapes[table_label(table)] = {
            "columns": [
                {
                    "name": c.name.unescaped,
                    "type": sql_name(c.type),
                    "nullable": c.nullability == Nullability.NULLABLE,
                    "collation": c.collation,
                }
                for c in definition.columns
            ],
            "primary_key": list(keys.primary_key),
            "foreign_keys": sorted(
                (
                    {
                        "columns": list(fk.columns),
                        "references": table_label(fk.ref_table),
                        "ref_columns": list(fk.ref_columns),
                    }
                    for fk in keys.foreign_keys
                    if fk.ref_table in tables
                ),
                key=json.dumps,
            ),
        }
    return shapes


def _size(path: Path | None) -> int:
    return path.stat().st_size if path is not None and path.exists() else 0
