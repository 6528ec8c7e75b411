"""Shared fixtures: one real hyperd and one local Spark session per test session, and the
library's log records."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from pathlib import Path

import pytest

from hyper_assets.process import HyperSettings, SharedHyper

# `make test` runs two pytest-xdist workers with `--dist loadgroup`: each module is a group,
# so its module fixtures start once; the demo's modules share `demo_data`, one demo run.
DEMO_MODULES = {"test_demo.py", "test_daemon.py", "test_ui.py"}
# The longest groups, longest first (measured with --durations): a worker that starts them
# first does not leave the other idle at the end.
LONGEST_FIRST = ["demo", "test_component.py", "test_concurrency.py", "test_tpch.py"]


@pytest.hookimpl(tryfirst=True)  # before xdist reads the groups
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Groups each test by module (the demo's modules together) and runs the longest first."""

    def group(item: pytest.Item) -> str:
        name = item.path.name
        return "demo" if name in DEMO_MODULES else name

    def rank(item: pytest.Item) -> int:
        name = group(item)
        return LONGEST_FIRST.index(name) if name in LONGEST_FIRST else len(LONGEST_FIRST)

    for item in items:
        item.add_marker(pytest.mark.xdist_group(group(item)))
    items.sort(key=rank)  # stable: collection order within a rank


@pytest.fixture(scope="session")
def hyper(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SharedHyper]:
    """A real hyperd for tests that work on `.hyper` files directly."""
    shared = SharedHyper(HyperSettings(log_dir=str(tmp_path_factory.mktemp("hyperd-logs"))))
    yield shared
    shared.close()


@pytest.fixture(scope="session")
def spark():
    """One local Spark session for the whole run, in a non-UTC session time zone."""
    from pyspark.sql import SparkSession

    session = (
        SparkSession.builder.master("local[2]")
        .appName("hyper-assets-tests")
        .config("spark.sql.session.timeZone", "America/New_York")
        .config("spark.ui.enabled", "false")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.driver.memory", "2g")
        .getOrCreate()
    )
    session.sparkContext.setLogLevel("ERROR")
    yield session
    session.stop()


@pytest.fixture(scope="session")
def demo_data(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """`python -m demo` (what `make demo` runs), once per test session, into a temp data dir.

    It holds the landed files, flights.hyper, the emulator's copy and the Dagster instance
    with every run; the demo's terminal output is in `demo.out`. Copy it before changing it.
    """
    from dagster_ui import free_port, run_demo

    return run_demo(tmp_path_factory.mktemp("demo") / "data", free_port())


@pytest.fixture
def records() -> Iterator[list[logging.LogRecord]]:
    """Every log record of hyper_assets, DEBUG and up, while the test runs."""
    found: list[logging.LogRecord] = []
    handler = logging.Handler(logging.DEBUG)
    handler.emit = found.append  # type: ignore[method-assign]
    logger = logging.getLogger("hyper_assets")
    level = logger.level
    logger.addHandler(handler)
    logger.setLevel(logging.DEBUG)
    yield found
    logger.removeHandler(handler)
    logger.setLevel(level)
