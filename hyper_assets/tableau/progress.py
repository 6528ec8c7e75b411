"""Progress of an upload or a job in the log: a line each time it moves a step on."""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any, Protocol

Logger = logging.Logger | logging.LoggerAdapter[Any]


class ProgressLog:
    """Logs `message` with its arguments when the progress `step` differs from the last.

    An upload's step is the tenth of its bytes sent, a job's its percent done."""

    def __init__(self, log: Logger, message: str) -> None:
        self._log, self._message = log, message
        self._shown: int | None = None

    def show(self, step: int, *args: object) -> None:
        if step != self._shown:
            self._shown = step
            self._log.info(self._message, *args)


class _Progressing(Protocol):
    """A job, as far as its progress goes."""

    @property
    def id(self) -> str: ...

    @property
    def progress(self) -> int: ...


def upload_progress(log: Logger, name: str) -> Callable[[int, int], None]:
    """A line per tenth of file `name` uploaded."""
    shown = ProgressLog(log, "Uploading %s: %d of %d bytes")
    return lambda done, total: shown.show(10 * done // max(total, 1), name, done, total)


def job_progress(log: Logger) -> Callable[[_Progressing], None]:
    """A line per percent a job reports done."""
    shown = ProgressLog(log, "Job %s: %d%%")
    return lambda job: shown.show(job.progress, job.id, job.progress)
