"""Several processes writing one file, and kill -9 in the middle of a large load."""

from __future__ import annotations

import itertools
import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import cluster
import pytest
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
    # Each step's work is Spark (seconds) and a short Hyper write: two steps that ran
    # side by side for seconds ran their Spark work in parallel.
    spans = sorted((starts[s][0], ends[s]) for s in starts)
    overlaps = [min(a[1], b[1]) - max(a[0], b[0]) for a, b in itertools.combinations(spans, 2)]
    assert max(overlaps) > 2.0, spans
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


KILL_ROWS = 1_500_000


@pytest.fixture(scope="module")
def old_file(tmp_path_factory: pytest.TempPathFactory) -> Callable[[str], Path]:
    """The file holding the "old" rows for a write mode, written once by a real writer."""
    made: dict[str, Path] = {}

    def get(mode: str) -> Path:
        if mode not in made:
            folder = tmp_path_factory.mktemp(f"old-{mode}")
            (folder / "tmp").mkdir()
            first = _writer(folder / "big.hyper", "old", KILL_ROWS, folder / "tmp", mode)
            assert first.communicate(timeout=300)[0].strip().endswith(b"DONE")
            made[mode] = folder / "big.hyper"
        return made[mode]

    return get


@pytest.mark.slow
@pytest.mark.parametrize(
    ("mode", "moment"),
    [
        ("2024-01-02", "spark"),
        ("2024-01-02", "hyper+0.0"),
        ("2024-01-02", "hyper+0.3"),
        ("2024-01-02", "hyper+0.8"),
        ("2024-01-02", "hyper+1.5"),
        ("full", "hyper+0.0"),
        ("full", "hyper+0.6"),
    ],
)
def test_kill_9_leaves_the_previous_committed_state(hyper, tmp_path, mode, moment, old_file):
    """A partition replace, and a full refresh that swaps tables, killed mid-way."""
    rows = KILL_ROWS
    database = tmp_path / "big.hyper"
    staging = tmp_path / "tmp"
    staging.mkdir()
    shutil.copyfile(old_file(mode), database)
    assert _labels(hyper, database) == [["old", rows, rows]]

    second = _writer(database, "new", rows, staging, mode)
    deadline = time.monotonic() + 240
    if moment == "spark":
        while not list(staging.rglob("*.parquet")) and time.monotonic() < deadline:
            time.sleep(0.05)
    else:
        while not _lock_held(database) and second.poll() is None and time.monotonic() < deadline:
            time.sleep(0.01)
        time.sleep(float(moment.split("+")[1]))
    finished = second.poll() is not None
    _kill(second)

    # Nothing partial, nothing doubled: exactly the old rows, or (if it finished) the new.
    labels = _labels(hyper, database)
    assert labels in ([["old", rows, rows]], [["new", rows, rows]])
    if moment in ("spark", "hyper+0.0"):
        assert not finished
        assert labels == [["old", rows, rows]]
    # The next writer is not blocked by anything the killed one left behind.
    third = _writer(database, "third", 1000, staging, mode)
    assert third.communicate(timeout=300)[0].strip().endswith(b"DONE")
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
