"""The progress log of an upload: a line per tenth of the file sent.

A job's progress log is `hyper_assets.tableau._rest.jobs.progress_log`."""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any


def upload_progress(
    logger: logging.Logger | logging.LoggerAdapter[Any], name: str
) -> Callable[[int, int], None]:
    """An `on_progress` for an upload of file `name` that logs each tenth of it sent."""
    shown = -1

    def report(done: int, total: int) -> None:
        nonlocal shown
        tenth = 10 * done // max(total, 1)
        if tenth != shown:
            shown = tenth
            logger.info("Uploading %s: %d of %d bytes", name, done, total)

    return report
