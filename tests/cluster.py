"""A Spark standalone cluster on loopback for tests, and the job they run against it.

`standalone_cluster(directory)` starts a master and one worker (1 core, 1g) from the
pyspark distribution; `connect_server(directory, master)` starts a Spark Connect server
whose executors run on `master` (that cluster, or local threads). Each daemon runs in
its own process group and is killed with it (the worker's executors included) when the
block ends.

`private_mounts(command, hidden)` runs a daemon the way a remote machine would: in a
mount namespace of its own where /tmp, the repository and the test's directories are
empty, so it sees none of the files of the test or of the Dagster process.

`python cluster.py SPARK_CONFIG_JSON DATABASE STAGING_DIR` writes, replaces and loads
partitions through `HyperIOManager` with the Spark session that config describes
(classic `spark.master` or `spark.remote`), in a process of its own.
"""

import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager, suppress
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyspark
import pytest
from dagster import (
    AssetExecutionContext,
    AssetIn,
    DailyPartitionsDefinition,
    asset,
    materialize,
)
from dagster_pyspark import PySparkResource
from helpers import free_port
from pyspark.sql import DataFrame
from spark_archive import jvm_options

from hyper_assets import HyperIOManager

SPARK_HOME = Path(pyspark.__file__).parent
START_TIMEOUT = 180.0


def _listening(port: int) -> bool:
    with socket.socket() as probe:
        return probe.connect_ex(("127.0.0.1", port)) == 0


class Daemon:
    """A process started in a new process group, its output in `log`; `stop()` kills the group."""

    def __init__(self, command: list[str], log: Path, env: dict[str, str]) -> None:
        self.log = log
        with log.open("w") as out:
            self.process = subprocess.Popen(
                command, stdout=out, stderr=subprocess.STDOUT, env=env, start_new_session=True
            )

    def wait_until(self, ready: Any, what: str, timeout: float = START_TIMEOUT) -> None:
        """Polls `ready()` until true; fails with the log's tail if the process dies or stalls."""
        deadline = time.monotonic() + timeout
        while not ready():
            if self.process.poll() is not None:
                raise RuntimeError(f"{what} exited:\n{self.log.read_text()[-3000:]}")
            if time.monotonic() > deadline:
                raise RuntimeError(f"{what} not ready after {timeout:g} s:\n{self.log_tail()}")
            time.sleep(0.5)

    def log_tail(self) -> str:
        return self.log.read_text()[-3000:]

    def stop(self) -> None:
        """SIGTERM to the group, SIGKILL after 15 s; returns once the process is gone."""
        for sig, wait in ((signal.SIGTERM, 15), (signal.SIGKILL, 30)):
            try:
                os.killpg(self.process.pid, sig)
            except ProcessLookupError:
                break
            try:
                self.process.wait(wait)
                break
            except subprocess.TimeoutExpired:
                continue
        # Children (executors) may outlive a SIGTERMed parent: make sure none is left.
        with suppress(ProcessLookupError):
            os.killpg(self.process.pid, signal.SIGKILL)


REPOSITORY = Path(__file__).resolve().parent.parent

# Runs in the new namespace: set the kept directories (the venv, where pyspark and its
# jars live, and any shared ones) aside on /mnt, hide each hidden directory under an
# empty tmpfs, then put the kept ones back where they were.
_PRIVATE_MOUNTS = """
set -e
mount -t tmpfs none /mnt
keep=()
while [ "$1" != "--" ]; do
    mkdir "/mnt/${#keep[@]}"; mount --bind "$1" "/mnt/${#keep[@]}"; keep+=("$1"); shift
done
shift
while [ "$1" != "--" ]; do
    if [ -d "$1" ]; then mount -t tmpfs none "$1"; fi
    shift
done
shift
for i in "${!keep[@]}"; do mkdir -p "${keep[$i]}"; mount --move "/mnt/$i" "${keep[$i]}"; done
cd /tmp
exec "$@"
"""


def private_mounts(command: list[str], hidden: list[Path], shared: list[Path] = ()) -> list[str]:
    """`command` in a private mount namespace where /tmp, the repo and `hidden` are empty.

    The virtual environment and the `shared` directories (a file system both sides
    mount, as NFS would be) stay visible at their paths.
    """
    kept = [sys.prefix, *map(str, shared)]
    dirs = [Path("/tmp"), REPOSITORY, *hidden]
    return [
        "unshare", "-m", "--propagation", "private", "bash", "-c", _PRIVATE_MOUNTS,
        "private-mounts", *kept, "--", *map(str, dirs), "--", *command,
    ]  # fmt: skip


def can_unshare() -> bool:
    """Whether this user may create mount namespaces (root, as in CI)."""
    probe = subprocess.run(
        private_mounts(["true"], []), capture_output=True, text=True, timeout=30, check=False
    )
    return probe.returncode == 0


def spark_env(directory: Path) -> dict[str, str]:
    """Daemons and executors bind to loopback and keep their files under `directory`; the
    daemons' JVMs start as the tests' others do (`spark_archive`)."""
    return {
        **os.environ,
        "SPARK_DAEMON_JAVA_OPTS": jvm_options(),
        "SPARK_HOME": str(SPARK_HOME),
        "SPARK_LOCAL_IP": "127.0.0.1",
        "SPARK_LOCAL_DIRS": str(directory / "local"),
        "PYSPARK_PYTHON": sys.executable,
    }


@dataclass(frozen=True)
class SparkCluster:
    """A running standalone master with its worker."""

    master_url: str
    web_port: int
    work_dir: Path  # the worker's: one folder per application that got an executor
    env: dict[str, str]
    pids: list[int]  # the master's and the worker's (its executors are its children)

    def state(self) -> dict[str, Any]:
        """The master's JSON status: workers, active and completed applications."""
        url = f"http://127.0.0.1:{self.web_port}/json/"
        with urllib.request.urlopen(url, timeout=5) as response:
            return json.load(response)

    def executor_logs(self, app_id: str) -> str:
        """Everything the executors of `app_id` wrote to stderr."""
        return "".join(p.read_text() for p in sorted((self.work_dir / app_id).glob("*/stderr")))


@contextmanager
def standalone_cluster(directory: Path, hidden: list[Path] | None = None) -> Iterator[SparkCluster]:
    """A master and one worker (1 core, 1g) on free loopback ports, stopped at the end.

    With `hidden`, the worker and its executors run in a private mount namespace
    (`private_mounts`), as on another host; their logs then stay inside it.
    """
    env = spark_env(directory)
    daemon_env = env | {"SPARK_DAEMON_MEMORY": "256m"}  # the master's and worker's own heap
    spark_class = str(SPARK_HOME / "bin" / "spark-class")
    port, web_port = free_port(), free_port()
    work_dir = directory / "worker"
    work_dir.mkdir(parents=True)
    with ExitStack() as stack:
        master = Daemon(
            [
                spark_class,
                "org.apache.spark.deploy.master.Master",
                "--host",
                "127.0.0.1",
                "--port",
                str(port),
                "--webui-port",
                str(web_port),
            ],
            directory / "master.log",
            daemon_env,
        )
        stack.callback(master.stop)
        pids = [master.process.pid]
        cluster = SparkCluster(f"spark://127.0.0.1:{port}", web_port, work_dir, env, pids)
        master.wait_until(lambda: _listening(port) and _listening(web_port), "Spark master")
        command = [
            spark_class,
            "org.apache.spark.deploy.worker.Worker",
            "--host",
            "127.0.0.1",
            "--webui-port",
            str(free_port()),
            "--cores",
            "1",
            "--memory",
            "1g",
            "--work-dir",
            "/tmp/worker" if hidden is not None else str(work_dir),
            cluster.master_url,
        ]
        if hidden is not None:
            command = private_mounts(command, hidden)
            daemon_env = daemon_env | {"SPARK_LOCAL_DIRS": "/tmp"}
        worker = Daemon(command, directory / "worker.log", daemon_env)
        stack.callback(worker.stop)
        pids.append(worker.process.pid)
        worker.wait_until(lambda: _workers_alive(cluster) == 1, "Spark worker")
        yield cluster


def _workers_alive(cluster: SparkCluster) -> int:
    """Workers the master counts; 0 while its web UI, though listening, answers 404 or,
    before its JSON handler is attached, an HTML page (seen once in a full run), or does
    not answer within the probe's 5 s (seen on a loaded machine): `wait_until` bounds it."""
    try:
        return int(cluster.state().get("aliveworkers", 0))
    except (urllib.error.URLError, json.JSONDecodeError, TimeoutError):
        return 0


EXECUTOR_CONF = {
    "spark.executor.memory": "512m",
    "spark.cores.max": "1",
    "spark.ui.enabled": "false",
    "spark.ui.showConsoleProgress": "false",
    "spark.driver.host": "127.0.0.1",
    "spark.driver.bindAddress": "127.0.0.1",
    "spark.sql.shuffle.partitions": "2",
    "spark.executor.extraJavaOptions": jvm_options(),
}


@contextmanager
def connect_server(
    directory: Path,
    master: str = "local[2]",
    env: dict[str, str] | None = None,
    hidden: list[Path] | None = None,
    shared: list[Path] = (),
    driver_memory: str = "1500m",  # results pass through the driver on their way out
) -> Iterator[str]:
    """A Spark Connect server (the driver) on a free loopback port; yields its sc:// URL.

    Its executors run on `master` (a cluster's URL, or local threads). With `hidden`, it
    runs in a private mount namespace (`private_mounts`) and sees none of the test's files
    but those under `shared`.
    """
    if pyspark.__version__.startswith("3."):
        # pyspark 3.5's wheel has no Connect server: it is a Maven artifact of its own. From
        # 4.0 on the wheel has one, and a jar that went missing fails the server's start.
        pytest.skip(f"pyspark {pyspark.__version__} ships no Spark Connect server")
    port = free_port()
    conf = EXECUTOR_CONF | {
        "spark.connect.grpc.binding.port": str(port),
        "spark.connect.grpc.binding.address": "127.0.0.1",
    }
    command = [
        str(SPARK_HOME / "bin" / "spark-submit"),
        "--class",
        "org.apache.spark.sql.connect.service.SparkConnectServer",
        "--master",
        master,
        "--driver-memory",
        driver_memory,
        "--name",
        "hyper-assets-connect",
    ]
    for key, value in conf.items():
        command += ["--conf", f"{key}={value}"]
    if hidden is not None:
        command = private_mounts(command, hidden, shared)
        # Inside the namespace the server's local dirs are on its own (empty) /tmp.
        env = (env or spark_env(directory)) | {"SPARK_LOCAL_DIRS": "/tmp"}
    server = Daemon(command, directory / "connect-server.log", env or spark_env(directory))
    try:
        server.wait_until(lambda: _listening(port), "Spark Connect server")
        yield f"sc://127.0.0.1:{port}"
    finally:
        server.stop()


# ---------------------------------------------------------------- the job

DAYS = DailyPartitionsDefinition(start_date="2024-01-01", end_date="2024-01-05")
SEEN: dict[str, set[str]] = {"frames": set(), "masters": set()}


@asset(partitions_def=DAYS, metadata={"partition_expr": "day"})
def readings(context: AssetExecutionContext, pyspark: PySparkResource) -> DataFrame:
    """100 rows of the day, labelled with the run's tag `label`."""
    day, label = context.partition_key, context.run.tags["label"]
    frame = pyspark.spark_session.sql(
        f"SELECT id, DATE'{day}' AS day, TIMESTAMP'{day} 08:30:00' AS at, "
        f"'{label}' AS label FROM range(100)"
    )
    SEEN["frames"].add(type(frame).__module__)
    SEEN["masters"].add(pyspark.spark_session.conf.get("spark.master"))
    return frame


@asset(ins={"readings": AssetIn(metadata={"columns": ["day", "at", "label"]})})
def summary(readings: DataFrame, pyspark: PySparkResource) -> DataFrame:
    SEEN["frames"].add(type(readings).__module__)
    latest = readings.groupBy("day", "label").agg({"at": "max"})
    return latest.withColumnRenamed("max(at)", "last_at")


def run_job(spark_config: dict[str, str], database: str, staging_dir: str) -> dict[str, Any]:
    """Writes day 1, day 2, day 2 again (replacing it), then loads the table into a summary."""
    resources = {
        "io_manager": HyperIOManager(database=database, staging_dir=staging_dir),
        "pyspark": PySparkResource(spark_config=spark_config),
    }
    for day, label in [("2024-01-01", "first"), ("2024-01-02", "first"), ("2024-01-02", "again")]:
        result = materialize(
            [readings], resources=resources, partition_key=day, tags={"label": label}
        )
        assert result.success
    result = materialize([readings, summary], resources=resources, selection=[summary])
    assert result.success
    return {key: sorted(values) for key, values in SEEN.items()}


if __name__ == "__main__":
    print(json.dumps(run_job(json.loads(sys.argv[1]), sys.argv[2], sys.argv[3])))
