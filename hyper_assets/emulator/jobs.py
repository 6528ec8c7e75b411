"""Jobs, run one at a time by a worker thread: update jobs and asynchronous publishes.

An update job (queued by the PATCH data endpoint) applies its batch through `apply_batch`
while holding the data source's lock; a publish job (`asJob=true`) moves the uploaded
file in. Either deletes its file when it ends. A `RequestID` seen within 24 hours returns
the job it first created instead of queuing the batch again.
"""

from __future__ import annotations

import logging
import queue
import threading
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from pathlib import Path

from tableauhyperapi import Endpoint

from hyper_assets.emulator.apply import Progress, apply_batch
from hyper_assets.emulator.batch import Action
from hyper_assets.emulator.errors import RestApiError
from hyper_assets.emulator.faults import Faults
from hyper_assets.emulator.store import Datasource
from hyper_assets.emulator.wire import not_found, now
from hyper_assets.errors import HyperAssetsError

log = logging.getLogger(__name__)

REQUEST_ID_TTL = timedelta(hours=24)
SUCCESS, FAILED, CANCELLED = 0, 1, 2
UPDATE, PUBLISH = "UpdateUploadedFile", "PublishDatasource"


@dataclass
class Job:
    id: str
    site_id: str
    type: str  # UPDATE or PUBLISH
    work: Callable[[Progress], object]  # runs the job
    file: Path | None  # the payload or the published file, deleted when the job ends
    datasource: Datasource | None = None  # the one an update changes (replies name it)
    connection_id: str = ""
    created_at: datetime = field(default_factory=now)
    started_at: datetime | None = None
    completed_at: datetime | None = None
    progress: int = 0
    finish_code: int | None = None
    notes: str | None = None

    def report(self, done: int, total: int) -> None:
        """The job's `Progress`: the share of its actions applied, in percent."""
        self.progress = 100 * done // total


class JobRunner:
    """Queues jobs and runs them on one worker thread."""

    def __init__(self, endpoint: Callable[[], Endpoint], faults: Faults) -> None:
        self._endpoint = endpoint
        self._faults = faults
        self._jobs: dict[str, Job] = {}
        self._request_ids: dict[tuple[str, str], tuple[Job, datetime]] = {}
        self._queue: queue.Queue[Job | None] = queue.Queue()
        self._lock = threading.Lock()
        self._thread = threading.Thread(target=self._work, name="emulator-jobs", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._faults.resume_jobs()
        self._queue.put(None)
        self._thread.join(timeout=60)

    def forget_request_ids(self) -> None:
        """As if 24 hours had passed: a repeated `RequestID` starts a new job."""
        with self._lock:
            self._request_ids.clear()

    def duplicate(self, site_id: str, request_id: str) -> Job | None:
        """The job a `RequestID` created on the site within the last 24 hours, if any."""
        with self._lock:
            seen = self._request_ids.get((site_id, request_id))
            if seen is None or now() - seen[1] > REQUEST_ID_TTL:
                return None
            return seen[0]

    def submit_update(
        self,
        site_id: str,
        request_id: str,
        datasource: Datasource,
        connection_id: str,
        actions: list[Action],
        payload: Path | None,
    ) -> Job:
        def work(progress: Progress) -> None:
            with datasource.lock:
                endpoint = self._endpoint()
                apply_batch(endpoint, datasource.path, payload, actions, on_progress=progress)

        job = Job(str(uuid.uuid4()), site_id, UPDATE, work, payload, datasource, connection_id)
        with self._lock:
            self._request_ids[(site_id, request_id)] = (job, job.created_at)
        return self._queue_job(job)

    def submit_publish(self, site_id: str, publish: Callable[[], object], staged: Path) -> Job:
        """Run `publish` (which moves `staged` in) as a job, as `asJob=true` asks."""
        return self._queue_job(
            Job(str(uuid.uuid4()), site_id, PUBLISH, lambda progress: publish(), staged)
        )

    def _queue_job(self, job: Job) -> Job:
        with self._lock:
            self._jobs[job.id] = job
        self._queue.put(job)
        return job

    def get(self, site_id: str, job_id: str) -> Job:
        with self._lock:
            job = self._jobs.get(job_id)
            if job is None or job.site_id != site_id:
                raise not_found("404003", f"Job {job_id!r} could not be found on this site.")
            return job

    def cancel(self, site_id: str, job_id: str) -> Job:
        """Cancel a queued job; a started or finished one answers 409."""
        job = self.get(site_id, job_id)
        with self._lock:
            if job.started_at is not None or job.completed_at is not None:
                raise RestApiError(
                    409,
                    "409000",
                    "Conflict",
                    f"Job {job_id} has already started or finished and cannot be cancelled.",
                )
            job.finish_code, job.completed_at = CANCELLED, now()
            job.notes = "Cancelled by request."
        return job

    def _work(self) -> None:
        while (job := self._queue.get()) is not None:
            while not self._faults.wait_until_jobs_may_run(timeout=0.2):
                pass
            with self._lock:
                cancelled = job.completed_at is not None
                if not cancelled:
                    job.started_at = now()
            while not cancelled and not self._faults.wait_until_jobs_may_run(0.2, started=True):
                pass
            try:
                if not cancelled:
                    self._run(job)
            finally:
                if job.file is not None:
                    job.file.unlink(missing_ok=True)

    def _run(self, job: Job) -> None:
        finish, notes = SUCCESS, None
        injected = self._faults.take_job_failure()
        try:
            if injected is not None:
                raise HyperAssetsError(injected)
            job.work(job.report)
        except RestApiError as err:  # a refused publish: the server's own words
            finish, notes = FAILED, err.detail
        except HyperAssetsError as err:
            finish, notes = FAILED, str(err)
        except Exception as err:  # the job must end and report, whatever went wrong
            log.exception("%s job %s failed unexpectedly", job.type, job.id)
            finish, notes = FAILED, f"Internal error: {err}"
        with self._lock:
            # A real server ends a failed job at progress 100 too.
            job.finish_code, job.notes, job.completed_at, job.progress = finish, notes, now(), 100
