"""Running the demo as a user does: `python -m demo`, then `python -m demo.ui` (`dagster dev`
with its daemon, and the emulator), driven through Dagster's GraphQL API."""

from __future__ import annotations

import datetime as dt
import os
import signal
import subprocess
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import httpx
import psutil
import pytest
from helpers import free_port
from rest_schema import assert_schema_kept, with_rest_schema

from demo.__main__ import SENSOR_DAY

ROOT = Path(__file__).resolve().parents[1]
T = TypeVar("T")

#: The tests' demo starts its history here (`python -m demo --since`): `make demo`'s story,
#: every step of it, over 29 days of history rather than 363. Its one-run backfill records
#: each day's materialisations and five checks in Dagster's SQLite (about 3,300 events for
#: the year, 80 of the demo's 120 seconds on a quiet machine).
DEMO_SINCE = dt.date(2013, 12, 1)
#: The days whose facts the demo loads: its history, then the day its sensors run.
DEMO_DAYS = [DEMO_SINCE + dt.timedelta(n) for n in range((SENSOR_DAY - DEMO_SINCE).days + 1)]


def run_demo(data: Path, emulator_port: int) -> Path:
    """`python -m demo --data DATA --since DEMO_SINCE`; its terminal output goes to
    DATA/demo.out.

    The emulator's port goes to DATA/emulator_port: `demo_ui` serves the emulator there
    again, as `make demo` and `make ui` share 8765 (the publish state names the server).
    """
    data.mkdir(parents=True)
    (data / "emulator_port").write_text(str(emulator_port))
    env = {**os.environ, "SPARK_LOCAL_IP": "127.0.0.1"}
    saved = data.parent / "demo-rest-bodies.json"
    command = [*with_rest_schema(saved, "demo"), "--data", str(data)]
    command += ["--port", str(emulator_port), "--since", str(DEMO_SINCE)]
    done = subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True, timeout=900)
    (data / "demo.out").write_text(done.stdout + done.stderr)
    assert done.returncode == 0, f"the demo failed:\n{done.stdout}\n{done.stderr}"
    assert_schema_kept(saved, "python -m demo")
    return data


@dataclass(frozen=True)
class DagsterUI:
    """A running `python -m demo.ui`: the UI's URL and its code location."""

    url: str
    log: Path

    def graphql(self, query: str, **variables: Any) -> dict[str, Any]:
        reply = httpx.post(
            f"{self.url}/graphql", json={"query": query, "variables": variables}, timeout=60
        )
        reply.raise_for_status()
        body = reply.json()
        assert "errors" not in body, body["errors"]
        return body["data"]

    @property
    def repository(self) -> dict[str, str]:
        """The selector fields of the demo's repository."""
        data = self.graphql(
            "{ repositoriesOrError { ... on RepositoryConnection "
            "{ nodes { name location { name } } } } }"
        )
        (node,) = data["repositoriesOrError"]["nodes"]
        return {"repositoryName": node["name"], "repositoryLocationName": node["location"]["name"]}

    def start_sensor(self, name: str) -> None:
        data = self.graphql(
            "mutation($s: SensorSelector!) { startSensor(sensorSelector: $s) "
            "{ __typename ... on Sensor { sensorState { status } } "
            "... on PythonError { message } } }",
            s={**self.repository, "sensorName": name},
        )
        assert data["startSensor"]["__typename"] == "Sensor", data
        assert data["startSensor"]["sensorState"]["status"] == "RUNNING", data

    def start_schedule(self, name: str) -> None:
        data = self.graphql(
            "mutation($s: ScheduleSelector!) { startSchedule(scheduleSelector: $s) "
            "{ __typename ... on ScheduleStateResult { scheduleState { status } } "
            "... on PythonError { message } } }",
            s={**self.repository, "scheduleName": name},
        )
        assert data["startSchedule"]["__typename"] == "ScheduleStateResult", data

    def sensor_ticks(self, name: str) -> list[dict[str, Any]]:
        """The sensor's ticks, newest first: status, skip reason, run ids."""
        data = self.graphql(
            "query($s: SensorSelector!) { sensorOrError(sensorSelector: $s) { ... on Sensor "
            "{ sensorState { ticks(limit: 10) { status skipReason runIds "
            "error { message } } } } } }",
            s={**self.repository, "sensorName": name},
        )
        return data["sensorOrError"]["sensorState"]["ticks"]

    def runs(self) -> list[dict[str, Any]]:
        """The instance's runs, newest first: id, job, status and tags."""
        data = self.graphql(
            "{ runsOrError(limit: 100) { ... on Runs { results "
            "{ runId jobName status tags { key value } } } } }"
        )
        return [
            {**r, "tags": {t["key"]: t["value"] for t in r["tags"]}}
            for r in data["runsOrError"]["results"]
        ]


def wait_for(what: str, probe: Callable[[], T | None], timeout: float, log: Path) -> T:
    """Polls `probe` every 2 s until it returns something; fails with `log` after `timeout`."""
    deadline = time.monotonic() + timeout
    while True:
        found = probe()
        if found:
            return found
        if time.monotonic() > deadline:
            pytest.fail(
                f"{what}: not within {timeout:.0f} s. dagster dev's log ({log}):\n"
                + log.read_text()[-6000:]
            )
        time.sleep(2)


@contextmanager
def demo_ui(
    data: Path,
    tmp_path: Path,
    env: dict[str, str] | None = None,
    stop: signal.Signals = signal.SIGTERM,
) -> Iterator[DagsterUI]:
    """`python -m demo.ui --data DATA` on free ports, started as a shell's `&` starts it:
    SIGINT ignored (and in a session of its own, away from the test's terminal).

    Stopped with `stop` (SIGTERM, as `kill` sends it, or SIGINT); fails when anything of
    dagster dev's process group outlives demo.ui.
    """
    port = free_port()
    emulator_port = int((data / "emulator_port").read_text())
    saved = tmp_path / "demo-ui-rest-bodies.json"
    command = [*with_rest_schema(saved, "demo.ui"), "--data", str(data), "--port", str(port)]
    command += ["--emulator-port", str(emulator_port)]
    log = tmp_path / "demo-ui.log"
    full_env = {
        **os.environ,
        "SPARK_MASTER": "local[1]",
        "SPARK_LOCAL_IP": "127.0.0.1",
        **(env or {}),
    }
    previous = signal.signal(signal.SIGINT, signal.SIG_IGN)  # the child inherits SIG_IGN
    try:
        with log.open("wb") as out:
            process = subprocess.Popen(
                command,
                cwd=ROOT,
                env=full_env,
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
    finally:
        signal.signal(signal.SIGINT, previous)
    ui = DagsterUI(f"http://127.0.0.1:{port}", log)
    group: int | None = None
    try:
        # 300 s: under make test's load at the start of the suites (load 25 on 2 cores),
        # dagster dev's webserver took over 80 s to import dagster, and 120 s ran out.
        wait_for(
            "dagster dev answers", lambda: process.poll() is None and _answers(ui.url), 300, log
        )
        # The webserver answers before it has loaded the demo's code (a process of its own):
        # until then its pages list no assets.
        wait_for("the demo's code location loads", lambda: _loaded(ui), 300, log)
        children = psutil.Process(process.pid).children()
        (group,) = (c.pid for c in children if "dev" in c.cmdline())  # dagster dev leads it
        yield ui
    finally:
        left = stop_ui(process, stop, group)
    assert not left, f"demo.ui exited after {stop.name}, leaving of dagster dev's group: {left}"
    assert_schema_kept(saved, "python -m demo.ui")


def _loaded(ui: DagsterUI) -> bool:
    """Whether every code location of the workspace has loaded; fails on a load error."""
    data = ui.graphql(
        "{ workspaceOrError { ... on Workspace { locationEntries { name loadStatus "
        "locationOrLoadError { __typename ... on PythonError { message } } } } } }"
    )
    entries = data["workspaceOrError"]["locationEntries"]
    for entry in entries:
        error = entry["locationOrLoadError"] or {}
        if error.get("__typename") == "PythonError":
            pytest.fail(f"code location {entry['name']!r} failed to load: {error['message']}")
    return bool(entries) and all(e["loadStatus"] == "LOADED" for e in entries)


def _answers(url: str) -> bool:
    try:
        return httpx.get(f"{url}/server_info", timeout=2).status_code == 200
    except httpx.TransportError:
        return False


def stop_ui(process: subprocess.Popen, stop: signal.Signals, group: int | None) -> list[str]:
    """Sends `stop` to demo.ui and waits for it to exit (SIGKILL after 60 s); returns the
    processes of process group `group` still running then, each killed."""
    with suppress(ProcessLookupError):
        os.kill(process.pid, stop)
    try:
        process.wait(timeout=60)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()
    members = []
    for found in psutil.process_iter():
        with suppress(ProcessLookupError):
            if os.getpgid(found.pid) == group:
                members.append(found)
    _, alive = psutil.wait_procs(members, timeout=5)  # a SIGKILL takes a moment
    left = []
    for found in alive:
        with suppress(psutil.NoSuchProcess):
            if found.status() != psutil.STATUS_ZOMBIE:  # dead, its parent gone too
                left.append(f"{found.pid}: {' '.join(found.cmdline()[:4])}")
                found.kill()
    return left
