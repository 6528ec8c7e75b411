"""Sending an update plan: its batches in order, each a request whose job is waited for.

The plan is saved around every request, so a re-run after a crash at any point resumes
it: a batch whose job is known is waited for, never sent again; one requested but whose
job was never seen goes again with the same RequestID, which the server runs once. A
batch above the payload limit, or refused by the server as too large, is cut into
smaller ones (`hyper_assets.tableau._publish.payload.split_batch`).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

from tableauhyperapi import Endpoint

from hyper_assets._base.files import file_size
from hyper_assets.errors import (
    PayloadTooLargeError,
    PublishError,
    TableauJobError,
    TableauJobTimeoutError,
    TableauRequestError,
)
from hyper_assets.tableau._publish.payload import split_batch
from hyper_assets.tableau._publish.plan import Batch, Plan
from hyper_assets.tableau._publish.progress import upload_progress
from hyper_assets.tableau._rest.client import Job, TableauClient
from hyper_assets.tableau._rest.jobs import progress_log


class BatchSender:
    """Sends the batches of update plans to data source `datasource_id`, saving each step."""

    def __init__(
        self,
        client: TableauClient,
        endpoint: Endpoint,
        files: Callable[[Plan], Path],
        save: Callable[[Plan], None],
        max_payload_bytes: int,
        logger: logging.Logger | logging.LoggerAdapter[Any],
    ) -> None:
        """`files` is where a plan's payload files are; `save` saves a plan's progress."""
        self.client, self.endpoint, self.log = client, endpoint, logger
        self._files, self._save = files, save
        self.max_payload_bytes = max_payload_bytes

    def send(self, plan: Plan, datasource_id: str) -> tuple[Plan, list[Job]]:
        """Sends every batch of `plan` not done yet, in order; returns the plan as sent
        (its batches maybe cut smaller) and their finished jobs."""
        jobs = []
        index = 0
        while index < len(plan.batches):
            batch = plan.batches[index]
            if batch.done:
                index += 1
                continue
            if not batch.requested and batch.payload_bytes > self.max_payload_bytes:
                plan = self._split(plan, index, self.max_payload_bytes) or plan
                batch = plan.batches[index]
            request_id = plan.request_id(index)
            payload = self._files(plan) / batch.payload if batch.payload else None
            self.log.info(
                "Batch %d/%d: %s; payload %d bytes; RequestID %s",
                index + 1,
                len(plan.batches),
                ", ".join(f"{r.action} {r.rows} rows of {r.table}" for r in batch.rows),
                file_size(payload),
                request_id,
            )
            try:
                # A job an earlier run started is waited for, never sent again: Tableau
                # forgets a RequestID after 24 hours, but not the job.
                job = self._known_job(batch.job_id) if batch.job_id else None
                if job is None:
                    plan = self._update(plan, index, requested=True)
                    job = self.client.update_data(
                        datasource_id,
                        list(batch.actions),
                        request_id=request_id,
                        payload=payload,
                        on_progress=upload_progress(self.log, batch.payload or ""),
                    )
                    plan = self._update(plan, index, job_id=job.id)
                jobs.append(self.client.wait_for_job(job.id, on_progress=progress_log(self.log)))
            except PayloadTooLargeError as err:
                # Refused before it ran: sent again as smaller batches, down to one row.
                smaller = self._split(plan, index, batch.payload_bytes // 2)
                if smaller is not None:
                    plan = smaller
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
                retry = {"attempt": batch.attempt + 1, "job_id": None, "requested": False}
                self._update(plan, index, **retry)
                raise PublishError(
                    f"Batch {index + 1} of {len(plan.batches)} failed on the server, which left "
                    f"the data source as it was: {err.notes or err}. The outbox keeps the "
                    "changes and the next run sends them again. If it keeps failing, publish "
                    "the whole file with full=True."
                ) from err
            plan = self._update(plan, index, done=True)
            index += 1
        return plan, jobs

    def _update(self, plan: Plan, index: int, **changes: Any) -> Plan:
        """`plan` with batch `index` changed as `changes` say, saved."""
        plan = plan.with_batches(index, [replace(plan.batches[index], **changes)])
        self._save(plan)
        return plan

    def _split(self, plan: Plan, index: int, max_bytes: int) -> Plan | None:
        """`plan` with unsent batch `index` cut into smaller ones, saved; None when it
        cannot be cut."""
        batch = plan.batches[index]
        payload = self._files(plan) / batch.payload if batch.payload else None
        pieces = split_batch(self.endpoint, payload, batch.actions, batch.units, max_bytes)
        pieces = [p for p in pieces if p.actions]
        if len(pieces) <= 1:
            for piece in pieces:
                if piece.path is not None:
                    piece.path.unlink()
            return None
        self.log.info(
            "Cutting batch %d (%d bytes) into %d batches of at most about %d bytes",
            index + 1,
            batch.payload_bytes,
            len(pieces),
            max_bytes,
        )
        smaller = [
            Batch(
                tuple(piece.actions),
                piece.path.name if piece.path else None,
                (replace(batch.rows[piece.unit], rows=piece.rows),) if batch.rows else (),
                batch.changes,
                file_size(piece.path),
                attempt=batch.attempt + 1,  # never the RequestID the server refused
                units=(len(piece.actions),),
            )
            for piece in pieces
        ]
        plan = plan.with_batches(index, smaller)
        self._save(plan)
        if payload is not None:
            payload.unlink()
        return plan

    def _known_job(self, job_id: str) -> Job | None:
        """The job `job_id`, or None when the server does not know it."""
        try:
            return self.client.get_job(job_id)
        except TableauRequestError as err:
            if err.status == 404:
                return None
            raise
