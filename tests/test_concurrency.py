"""Several processes writing one file, and kill -9 in the middle of a large load."""

from __future__ import annotations

import itertools
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from unittest.mock import patch

import cluster
import pytest
import writer_job
from dagster import DagsterInstance
from filelock import FileLock, Timeout
from helpers import query

HERE = Path(__file__).parent


@pytest.mark.slow
def test_four_assets_in_four_processes_write_one_file(hyper, tmp_path):
    database = tmp_path / "shared.hyper"
    home = tmp_path / "dagster_home"
    home.mkdir()
    (home / "dagster.yaml").write_text("")
    # The CLI with the default executor (one process per step): no pools, no settings.
    completed = subprocess.run(
        [
            Path(sys.executable).parent / "dagster",
            "job",
            "execute",
            "-f",
            str(HERE / "writer_job.py"),
            "-j",
            "four_tables",
        ],
        env={**os.environ, "HYPER_TEST_DB": str(database), "DAGSTER_HOME": str(home)},
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert completed.returncode == 0, completed.stderr[-3000:]
    with DagsterInstance.from_config(str(home)) as instance:
        (run,) = instance.get_runs()
        events = [e for e in instance.all_logs(run.run_id) if e.dagster_event]
    starts = {
        e.step_key: (e.timestamp, e.dagster_event.pid)
        for e in events
        if e.dagster_event.event_type_value == "STEP_START"
    }
    ends = {
        e.step_key: e.timestamp
        for e in events
        if e.dagster_event.event_type_value == "STEP_SUCCESS"
    }
    assert len({pid for _, pid in starts.values()}) == 4
    # Each step's work is Spark (seconds) and a short Hyper write: two steps side by side
    # for most of the shorter one ran their Spark work in parallel. (A fixed number of
    # seconds failed on an idle machine, where a whole step took 1.7 s and two overlapped
    # by 1.6.)
    spans = sorted((starts[s][0], ends[s]) for s in starts)
    shares = [
        (min(a[1], b[1]) - max(a[0], b[0])) / min(a[1] - a[0], b[1] - b[0])
        for a, b in itertools.combinations(spans, 2)
    ]
    assert max(shares) > 0.5, spans
    for name in ("alpha", "beta", "gamma", "delta"):
        assert query(hyper, database, f'SELECT COUNT(*), MIN(source) FROM "Extract".{name}') == [
            [1000, name]
        ]


def _writer(
    database: Path, label: str, rows: int, staging: Path, mode: str = "2024-01-02"
) -> subprocess.Popen:
    env = {
        **os.environ,
        "HYPER_TEST_DB": str(database),
        "HYPER_TEST_LABEL": label,
        "HYPER_TEST_ROWS": str(rows),
        "TMPDIR": str(staging),
        "PYTHONPATH": str(HERE),
    }
    return subprocess.Popen(
        [sys.executable, str(HERE / "writer_job.py"), mode],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )


def _lock_held(database: Path) -> bool:
    lock = FileLock(f"{database}.lock")
    try:
        lock.acquire(timeout=0)
    except Timeout:
        return True
    lock.release()
    return False


def _kill(process: subprocess.Popen) -> None:
    os.killpg(process.pid, signal.SIGKILL)
    process.wait()


def _labels(hyper, database: Path) -> list[list]:
    return query(
        hyper,
        database,
        'SELECT label, COUNT(*), COUNT(DISTINCT id) FROM "Extract".big GROUP BY label',
    )


# Rows of the kill -9 tests' table: enough that a write holds the file's lock for a good
# part of a second on two busy cores, so that kills at fractions of that hold land inside it.
KILL_ROWS = 300_000


def _write_here(database: Path, label: str, rows: int, mode: str) -> float:
    """A writer in this process, on the test session's Spark (no JVM to start); the
    seconds it held the file's lock, as a thread watching the lock saw it."""
    seen: list[float] = []
    done = threading.Event()

    def watch() -> None:
        while not done.is_set():
            if _lock_held(database):
                seen.append(time.monotonic())
            time.sleep(0.005)

    watcher = threading.Thread(target=watch)
    watcher.start()
    try:
        with patch.dict(os.environ, {"HYPER_TEST_LABEL": label, "HYPER_TEST_ROWS": str(rows)}):
            assert writer_job.write_big(mode, str(database))
    finally:
        done.set()
        watcher.join()
    return seen[-1] - seen[0] if seen else 0.0


def _staged(staging: Path) -> bool:
    """Whether Spark wrote a Parquet part under `staging` yet (its temporary directories
    come and go while it is listed)."""
    try:
        return any(staging.rglob("*.parquet"))
    except FileNotFoundError:
        return False


@pytest.mark.slow
@pytest.mark.parametrize(
    ("mode", "moment"),
    [
        ("2024-01-02", "spark"),
        ("2024-01-02", "hyper+0.0"),
        ("2024-01-02", "hyper+0.2"),
        ("2024-01-02", "hyper+0.4"),
        ("2024-01-02", "hyper+0.6"),
        ("full", "hyper+0.0"),
        ("full", "hyper+0.5"),
    ],
)
def test_kill_9_leaves_the_previous_committed_state(spark, hyper, tmp_path, mode, moment):
    """A partition replace, and a full refresh that swaps tables, killed mid-way: while
    Spark stages, or after the killed writer took the file's lock, at a fraction of the
    time that the first write, just before, held it (a replace or a swap holds it longer)."""
    rows = KILL_ROWS
    database = tmp_path / "big.hyper"
    staging = tmp_path / "tmp"
    staging.mkdir()
    hold = _write_here(database, "old", rows, mode)
    assert _labels(hyper, database) == [["old", rows, rows]]
    assert hold > 0.05, "the first write's lock hold was not seen"

    second = _writer(database, "new", rows, staging, mode)
    deadline = time.monotonic() + 240
    if moment == "spark":
        while not _staged(staging) and time.monotonic() < deadline:
            time.sleep(0.05)
    else:
        while not _lock_held(database) and second.poll() is None and time.monotonic() < deadline:
            time.sleep(0.005)
        time.sleep(float(moment.split("+")[1]) * hold)
    held, finished = _lock_held(database), second.poll() is not None
    _kill(second)

    # The kill landed where it was meant to: before the write, or while it held the lock.
    assert not finished
    assert held == (moment != "spark"), (moment, hold)
    # Nothing partial, nothing doubled: exactly the old rows, or the new ones if the kill
    # came after the commit (the lock is held a little longer).
    labels = _labels(hyper, database)
    assert labels in ([["old", rows, rows]], [["new", rows, rows]])
    if moment in ("spark", "hyper+0.0"):
        assert labels == [["old", rows, rows]]
    # The next writer is not blocked by anything the killed one left behind.
    _write_here(database, "third", 1000, mode)
    assert _labels(hyper, database) == [["third", 1000, 1000]]


@pytest.fixture
def connect_server(tmp_path):
    """A Spark Connect server from the pyspark distribution (local[2]), on loopback."""
    with cluster.connect_server(tmp_path) as url:
        yield url


@pytest.mark.slow
def test_spark_connect_write_partition_replace_and_load(hyper, tmp_path, connect_server):
    database = tmp_path / "connect.hyper"
    completed = subprocess.run(
        [sys.executable, str(HERE / "connect_job.py"), connect_server, str(database)],
        env={**os.environ, "PYTHONPATH": str(HERE)},
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert completed.returncode == 0, completed.stderr[-3000:]
    assert '{"frames": ["pyspark.sql.connect.dataframe"]}' in completed.stdout
    assert query(
        hyper,
        database,
        'SELECT CAST(day AS TEXT), COUNT(*) FROM "Extract".readings GROUP BY 1 ORDER BY 1',
    ) == [["2024-01-01", 100], ["2024-01-02", 100]]
    assert query(
        hyper,
        database,
        'SELECT CAST(day AS TEXT), CAST(last_at AS TEXT) FROM "Extract".summary ORDER BY 1',
    ) == [["2024-01-01", "2024-01-01 08:30:00"], ["2024-01-02", "2024-01-02 08:30:00"]]
