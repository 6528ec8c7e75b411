"""Shared fixtures: one real hyperd and one local Spark session per test session, and the
library's log records."""

from __future__ import annotations

import importlib.util
import logging
import os
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from spark_archive import jvm_options

from hyper_assets._engine.process import HyperSettings, SharedHyper

# Every Spark JVM the tests start compiles with C1 only, collects with the serial collector
# and maps the archive of Spark's classes `make test` wrote (tests/spark_archive.py): the
# tests' small jobs start and finish sooner on two cores (side by side, three kill -9 cases
# of test_concurrency.py took 62 s and 53 s with neither, 49 s and 45 s with the first
# two). Users' Spark is not affected.
os.environ.setdefault("SPARK_SUBMIT_OPTS", jvm_options())
# Spark's Python workers run this interpreter, not the `python3` on PATH: PySpark refuses
# a worker of another minor version (make test's environments run 3.11, 3.12 and 3.13).
os.environ.setdefault("PYSPARK_PYTHON", sys.executable)


def _parse_dagster_migrations_once() -> None:
    """Each `materialize()` without an instance makes an ephemeral one, whose in-memory
    storages Dagster stamps with alembic; alembic parses every migration script of Dagster
    anew for it: a quarter of the test process's Python time in test_io_manager.py (py-spy),
    2 to 8% of the module's CPU with its hyperd and JVM. The scripts do not change while the
    tests run: parse them once per location. The instances and their storages stay real."""
    from alembic.script import ScriptDirectory

    parse = ScriptDirectory.from_config.__func__  # type: ignore[attr-defined]
    parsed: dict[tuple[type, str | None], ScriptDirectory] = {}

    def from_config(cls: type[ScriptDirectory], config: Any) -> ScriptDirectory:
        key = (cls, config.get_main_option("script_location"))
        if key not in parsed:
            parsed[key] = parse(cls, config)
        return parsed[key]

    ScriptDirectory.from_config = classmethod(from_config)  # type: ignore[method-assign,assignment]


_parse_dagster_migrations_once()

# `make test` runs pytest-xdist workers with `--dist loadfile`: each module runs on one
# worker, so its module fixtures start once, and the modules are handed out in
# collection order. The longest go first, so that a worker that starts them does not leave
# the others idle at the end: the demo's three (the longest under make test's load, mostly
# waiting on dagster dev), then by each module's time alone (2026-12-01: 221 s down to 53;
# pantab's port, tests/pantab/test_roundtrip.py, 196 s on 2026-12-03 at a load of 11 on
# two cores, where it had taken 458 s through a Dagster run per call).
LONGEST_FIRST = [
    "test_demo.py",
    "test_daemon.py",
    "test_ui.py",
    "test_component.py",
    "test_roundtrip.py",
    "test_remote_spark.py",
    "test_publish.py",
    "test_concurrency.py",
    "test_home.py",
    "test_client.py",
    "test_io_manager.py",
    "test_compact.py",
    "test_cluster.py",
]
# These modules read the demo's run (`demo_data`, about a minute): the scheduler hands
# them to one worker as one unit, so the demo runs once, not once on each worker.
DEMO_MODULES = {"test_demo.py", "test_daemon.py", "test_ui.py"}


#: Whether this environment has a pyspark module (make test's no-Spark one has none).
HAS_PYSPARK = importlib.util.find_spec("pyspark") is not None
#: Modules that need Spark to be collected (a pyspark import, a Spark job, the demo): every
#: test of theirs is a Spark-path test (marker `spark`), as is each test that asks for the
#: `spark` fixture or is the `spark` case of a parametrised test. Without pyspark they are
#: not collected.
SPARK_MODULES = {
    "test_cluster.py",
    "test_component.py",
    "test_concurrency.py",
    "test_daemon.py",
    "test_dagster_contract.py",
    "test_demo.py",
    "test_galaxy_location.py",
    "test_home.py",
    "test_io_manager.py",
    "test_refusals.py",
    "test_remote_spark.py",
    "test_sensors.py",
    "test_settings.py",
    "test_staging.py",
    "test_thin_client.py",
    "test_tpch.py",
    "test_types.py",
    "test_ui.py",
    "test_warnings.py",
    "test_keys.py",
}


#: Spark paths the fast tests do not reach (a standalone cluster, a Connect server): slow,
#: and run on every Spark line all the same (marker `spark_line`, make test's suites).
SPARK_LINE_MODULES = {"test_cluster.py", "test_remote_spark.py"}

#: The newest of everything is two environments of one Python and one set of versions: the
#: main one (`.venv`) and the no-pyspark one (`.venv-nospark`), which lacks pyspark and
#: dagster-pyspark alone. Each test runs once in them: a Spark-path test in the main one,
#: every other test (marker `no_spark_suite`, slow ones included) in the no-pyspark one,
#: where it shows too that it needs no Spark; the main suite leaves those to it (marker
#: `no_spark_only`). The tests of `BOTH_SUITES_MODULES` run in both: they read what is
#: installed (`dir()` without dagster-pyspark, the frames a pyspark makes).
BOTH_SUITES_MODULES = {"test_public_api.py", "test_frames.py"}


def pytest_configure(config: pytest.Config) -> None:
    """With HYPER_ASSETS_CPU_PROFILE=DIR, each test's CPU seconds into DIR (cpu_profile.py)."""
    from cpu_profile import VARIABLE, CpuProfile

    if directory := os.environ.get(VARIABLE):
        config.pluginmanager.register(CpuProfile(Path(directory)), "cpu_profile")


def pytest_ignore_collect(collection_path: Path) -> bool | None:
    """Without pyspark, the Spark modules are not collected (the rest are, and run)."""
    return True if not HAS_PYSPARK and collection_path.name in SPARK_MODULES else None


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Marks the Spark-path tests `spark` and what the no-pyspark suite runs (see
    BOTH_SUITES_MODULES), and runs the longest modules first (see LONGEST_FIRST)."""
    for item in items:
        params = item.callspec.id.split("-") if hasattr(item, "callspec") else []
        fixtures = getattr(item, "fixturenames", ())
        if item.path.name in SPARK_MODULES or "spark" in fixtures or "spark" in params:
            item.add_marker(pytest.mark.spark)
        if item.path.name in SPARK_LINE_MODULES:
            item.add_marker(pytest.mark.spark_line)
        if item.get_closest_marker("spark") is None:
            item.add_marker(pytest.mark.no_spark_suite)
            if item.path.name not in BOTH_SUITES_MODULES:
                item.add_marker(pytest.mark.no_spark_only)

    def rank(item: pytest.Item) -> int:
        name = item.path.name
        return LONGEST_FIRST.index(name) if name in LONGEST_FIRST else len(LONGEST_FIRST)

    items.sort(key=rank)  # stable: collection order within a rank


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
    """`--dist loadfile`, with the DEMO_MODULES as one unit of work."""
    if config.getvalue("dist") != "loadfile":
        return None
    from xdist.scheduler import LoadFileScheduling

    class DemoOnce(LoadFileScheduling):
        def _split_scope(self, nodeid: str) -> str:
            module = super()._split_scope(nodeid)
            return "demo" if Path(module).name in DEMO_MODULES else module

    return DemoOnce(config, log)


@pytest.fixture(scope="session", autouse=True)
def _rest_bodies() -> Iterator[Any]:
    """Every XML reply of an emulator in this process and every XML request of our client,
    recorded from the start of the session (`tests/rest_schema.py`)."""
    from rest_schema import RestBodies

    bodies = RestBodies()
    with pytest.MonkeyPatch.context() as patch:
        bodies.install(patch)
        yield bodies


@pytest.fixture(autouse=True)
def rest_xml(_rest_bodies: Any) -> Iterator[Any]:
    """Fails the test, at its teardown, if an XML body sent during it (or during a fixture
    it set up) breaks Tableau's REST schema, ts-api_3_28.xsd."""
    yield _rest_bodies
    violations = _rest_bodies.violations()
    if violations:
        pytest.fail("\n".join(violations), pytrace=False)


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
    """`python -m demo` (what `make demo` runs, over a shorter history: `DEMO_SINCE`), once
    per test session, into a temp data dir.

    It holds the landed files, flights.hyper, the emulator's copy and the Dagster instance
    with every run; the demo's terminal output is in `demo.out`. Copy it before changing it.
    """
    from dagster_ui import run_demo
    from helpers import free_port

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


@pytest.fixture(scope="module")
def moto_s3() -> Iterator[str]:
    """moto's S3 server on loopback, reached through the standard AWS environment."""
    from object_stores import moto_server

    with moto_server() as (host, port):
        endpoint = f"http://{host}:{port}"
        saved = dict(os.environ)
        os.environ.update(
            AWS_ENDPOINT_URL=endpoint,
            AWS_ACCESS_KEY_ID="test",
            AWS_SECRET_ACCESS_KEY="test-secret",
            AWS_REGION="us-east-1",
        )
        yield endpoint
        os.environ.clear()
        os.environ.update(saved)


@pytest.fixture
def bucket(moto_s3: str) -> str:
    """A new, empty bucket of `moto_s3`."""
    import boto3

    name = f"home-{uuid.uuid4().hex[:12]}"
    boto3.client("s3", endpoint_url=moto_s3).create_bucket(Bucket=name)
    return name


@pytest.fixture(scope="module")
def namespaces() -> None:
    """Skips the module's tests that run steps in private mount namespaces, but as root."""
    from cluster import can_unshare

    if not can_unshare():
        pytest.skip("a private mount namespace needs root (unshare -m); CI runs as root")
