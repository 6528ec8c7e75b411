"""What a Tableau background job's state means: success, or the error saying what to do;
and the progress log of a job being waited for."""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from hyper_assets.errors import TableauJobCancelledError, TableauJobError
from hyper_assets.tableau._rest.replies import Job

SUCCESS_CODES = (0, 3)  # finishCode 3 means "completed": a success too
CANCELLED = 2
BATCH_ADVICE = (
    "An update batch is atomic, so the data source is unchanged: fix the cause and send the "
    "batch again with a new RequestID (the same one returns this job for 24 hours)."
)


def succeeded(job: Job, jobs_page: str, advice: str = BATCH_ADVICE) -> Job:
    """The completed `job` if it succeeded; else its error, with Tableau's notes (or where
    to look: `jobs_page`, the site's Jobs page) and `advice`."""
    if job.finish_code in SUCCESS_CODES:
        return job
    cancelled = job.finish_code == CANCELLED
    outcome = "was cancelled" if cancelled else f"failed (finishCode {job.finish_code})"
    cause = (
        f"Tableau's notes: {job.notes}"
        if job.notes
        else f"Tableau gave no notes: look job {job.id} up on the site's Jobs page "
        f"({jobs_page}) or in the server's backgrounder logs"
    )
    raise (TableauJobCancelledError if cancelled else TableauJobError)(
        f"Tableau job {job.id} {outcome}. {cause}. {advice}",
        job_id=job.id,
        finish_code=job.finish_code,
        notes=job.notes,
    )


def progress_log(
    logger: logging.Logger | logging.LoggerAdapter[Any], label: str = "Job"
) -> Callable[[Job], None]:
    """An `on_progress` for `wait_for_job` that logs `<label> <id>: <n>%` when n changes."""
    shown = -1

    def report(job: Job) -> None:
        nonlocal shown
        if job.progress != shown:
            shown = job.progress
            logger.info("%s %s: %d%%", label, job.id, job.progress)

    return report
