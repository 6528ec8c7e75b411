"""HyperIOManager against a real Spark standalone cluster (one worker on loopback).

Two sessions: a classic SparkSession with master spark://..., and a Spark Connect server
whose executors run on the cluster. Each writes a partition, replaces it and loads the
table back, from a process of its own (the test session holds a local SparkSession).
Staging goes to a directory that the executors and the driver's hyperd both see; the
executors' own logs show that they wrote and read it.

The worker has one core, which an application keeps while it lives: the classic case
runs first, and the Connect server (module-scoped) starts only after it.
"""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from cluster import EXECUTOR_CONF, SparkCluster, connect_server, standalone_cluster
from helpers import query

from hyper_assets._engine.process import SharedHyper

pytestmark = pytest.mark.slow
HERE = Path(__file__).parent


@pytest.fixture(scope="session")
def spark_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SparkCluster]:
    with standalone_cluster(tmp_path_factory.mktemp("spark-cluster")) as cluster:
        yield cluster


@pytest.fixture(scope="module")
def connect_url(spark_cluster: SparkCluster, tmp_path_factory: pytest.TempPathFactory):
    directory = tmp_path_factory.mktemp("spark-connect")
    with connect_server(directory, spark_cluster.master_url, spark_cluster.env) as url:
        yield url


def run_job(config: dict[str, str], tmp_path: Path) -> tuple[dict[str, Any], Path, Path]:
    """Runs cluster.py's job in a child process; its output, database and staging dir."""
    database, staging = tmp_path / "cluster.hyper", tmp_path / "staging"
    completed = subprocess.run(
        [sys.executable, str(HERE / "cluster.py"), json.dumps(config), str(database), staging],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert completed.returncode == 0, completed.stderr[-3000:]
    return json.loads(completed.stdout.strip().splitlines()[-1]), database, staging


def assert_written_replaced_and_loaded(hyper: SharedHyper, database: Path, staging: Path) -> None:
    assert query(
        hyper,
        database,
        "SELECT CAST(day AS TEXT), label, COUNT(*), COUNT(DISTINCT id), CAST(MIN(at) AS TEXT) "
        'FROM "Extract".readings GROUP BY 1, 2 ORDER BY 1',
    ) == [
        ["2024-01-01", "first", 100, 100, "2024-01-01 08:30:00"],
        ["2024-01-02", "again", 100, 100, "2024-01-02 08:30:00"],
    ]
    assert query(
        hyper,
        database,
        'SELECT CAST(day AS TEXT), label, CAST(last_at AS TEXT) FROM "Extract".summary ORDER BY 1',
    ) == [
        ["2024-01-01", "first", "2024-01-01 08:30:00"],
        ["2024-01-02", "again", "2024-01-02 08:30:00"],
    ]
    assert list(staging.rglob("*.parquet")) == []  # every staging directory was removed


def assert_executors_used_staging(cluster: SparkCluster, app_id: str, staging: Path) -> None:
    """The executors (not the driver) wrote the staged parts and read the loaded table."""
    logs = cluster.executor_logs(app_id)
    assert f"{staging}/" in logs, logs[-2000:]
    assert "Saved output of task" in logs
    assert "table.parquet" in logs  # the load: Hyper's export, read by the executors


#: Where the classic DataFrame class lives: its own module from Spark 4.0 on.
CLASSIC_FRAMES = (
    "pyspark.sql.classic.dataframe"
    if importlib.util.find_spec("pyspark.sql.classic")
    else "pyspark.sql.dataframe"
)


def app_named(cluster: SparkCluster, kind: str, name: str) -> dict[str, Any]:
    (app,) = [a for a in cluster.state()[kind] if a["name"] == name]
    return app


def test_classic_session_with_a_spark_master(hyper, spark_cluster, tmp_path):
    assert not spark_cluster.state()["activeapps"], "another application holds the one core"
    config = EXECUTOR_CONF | {
        "spark.master": spark_cluster.master_url,
        "spark.app.name": "hyper-assets-classic",
        "spark.sql.session.timeZone": "America/New_York",
    }
    output, database, staging = run_job(config, tmp_path)
    assert output == {
        "frames": [CLASSIC_FRAMES],
        "masters": [spark_cluster.master_url],
    }
    assert_written_replaced_and_loaded(hyper, database, staging)
    app = app_named(spark_cluster, "completedapps", "hyper-assets-classic")
    assert app["cores"] == 1
    assert_executors_used_staging(spark_cluster, app["id"], staging)


def test_spark_connect_server_on_the_cluster(hyper, spark_cluster, connect_url, tmp_path):
    config = {"spark.remote": connect_url, "spark.sql.session.timeZone": "Asia/Tokyo"}
    output, database, staging = run_job(config, tmp_path)
    assert output == {
        "frames": ["pyspark.sql.connect.dataframe"],
        "masters": [spark_cluster.master_url],
    }
    assert_written_replaced_and_loaded(hyper, database, staging)
    app = app_named(spark_cluster, "activeapps", "hyper-assets-connect")
    assert app["cores"] == 1
    assert_executors_used_staging(spark_cluster, app["id"], staging)
