"""Spark for the demo: no web UI or progress bars, and what its JVM prints in a log file.

The JVM writes to the standard error it inherits (a banner, "WARNING: Using incubator
modules", log4j's errors) without any setting to stop it. So it is started with file
descriptor 2 pointing at the log: by `make demo` itself, and by each run `make ui`
launches (`DemoSpark`), whose terminal would show it otherwise.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from dagster import InitResourceContext
from dagster_pyspark import PySparkResource
from pydantic import Field

#: Spark's own log: errors only, no banner.
LOG4J = Path(__file__).with_name("log4j2.properties").absolute()


def spark_config(master: str) -> dict[str, str]:
    """Spark for the demo: no web UI, no progress bars, errors only in its log."""
    return {
        "spark.master": master,
        "spark.ui.enabled": "false",
        "spark.ui.showConsoleProgress": "false",
        "spark.driver.extraJavaOptions": f"-Dlog4j2.configurationFile={LOG4J.as_uri()}",
    }


class DemoSpark(PySparkResource):
    """`PySparkResource` whose JVM, when this run starts it, prints into `log`."""

    log: str = Field(description="File the JVM's standard error goes to.")

    def setup_for_execution(self, context: InitResourceContext) -> None:
        with stderr_to(Path(self.log)):
            super().setup_for_execution(context)


@contextmanager
def stderr_to(path: Path) -> Iterator[None]:
    """File descriptor 2 goes to `path` inside the block, for what the JVM prints at start.

    A process started inside (Spark's JVM) keeps writing there; this one gets its
    terminal back.
    """
    path.parent.mkdir(parents=True, exist_ok=True)
    sys.stderr.flush()
    saved = os.dup(2)
    with path.open("ab") as log:
        os.dup2(log.fileno(), 2)
    try:
        yield
    finally:
        sys.stderr.flush()
        os.dup2(saved, 2)
        os.close(saved)
