"""HyperResource: process settings, and connections that wait for other holders."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
from helpers import crash_hyperd
from tableauhyperapi import (
    Connection,
    CreateMode,
    Endpoint,
    HyperException,
    HyperProcess,
    Telemetry,
)

from hyper_assets import DatabaseLockedError, HyperResource, TableNotFoundError
from hyper_assets._engine import process as hyper_process


def test_logs_go_to_log_dir_and_parameters_pass_through(tmp_path: Path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    logs = tmp_path / "logs"
    resource = HyperResource(
        log_dir=str(logs), default_database_version=3, parameters={"log_file_max_count": "2"}
    )
    try:
        with resource.connect(tmp_path / "v3.hyper") as connection:
            connection.execute_command("CREATE TABLE t (n NUMERIC(38, 2))")
        assert any(p.name.startswith("hyperd") for p in logs.iterdir())
        assert not list(tmp_path.glob("hyperd*.log"))
    finally:
        resource.close()


DEFAULT_LOGS = """
import json, sys, tempfile
from pathlib import Path

import psutil

from hyper_assets import HyperResource

temp = Path(tempfile.gettempdir())
resource = HyperResource()
try:
    with resource.connect(Path("a.hyper")):
        (logs,) = temp.glob("hyper-assets-logs-*")  # this hyperd's own directory
        (hyperd,) = [p for p in psutil.Process().children(recursive=True) if "hyperd" in p.name()]
        args = [a[2:] for a in hyperd.cmdline() if a.startswith("--") and "=" in a]
        flags = dict(a.split("=", 1) for a in args)
        written = [p.name for p in logs.glob("hyperd*.log")]
finally:
    resource.close()
json.dump({"logs": str(logs), "flags": flags, "written": written}, sys.stdout)
"""


def run_alone(script: str, tmp_path: Path) -> tuple[str, Path]:
    """Runs `script` in a fresh interpreter in `tmp_path`, with a temp directory of its
    own (returned beside what it printed): a default hyperd is shared by a process, so
    one another test left open would be found here instead."""
    temp = tmp_path / "temp"
    temp.mkdir()
    done = subprocess.run(
        [sys.executable, "-c", script],
        cwd=tmp_path,
        env={**os.environ, "TMPDIR": str(temp)},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return done.stdout, temp


def test_default_logs_are_bounded_and_removed_at_close(tmp_path: Path):
    printed, temp = run_alone(DEFAULT_LOGS, tmp_path)
    seen = json.loads(printed)
    flags = seen["flags"]
    assert flags["log-dir"] == seen["logs"]
    assert (flags["log-file-max-count"], flags["log-file-size-limit"]) == ("2", "10M")
    assert seen["written"]
    assert not list(tmp_path.glob("hyperd*.log"))  # never the working directory
    assert not Path(seen["logs"]).exists()
    assert list(temp.iterdir()) == []


UNCLOSED = """
import os
from pathlib import Path

from hyper_assets import HyperResource
from hyper_assets._engine.process import _stop_all

resource = HyperResource()  # never closed, as a script's or a notebook's
with resource.connect(Path("a.hyper")) as connection:
    connection.execute_command("CREATE TABLE t (n INT)")
child = os.fork()
if child == 0:
    _stop_all()  # the exit handler, as a forked child's exit runs it
    os._exit(0)  # not the rest of the child's finalisation (see the test's docstring)
os.waitpid(child, 0)
with resource.connect(Path("a.hyper")) as connection:  # the parent's hyperd still serves
    connection.execute_command("INSERT INTO t VALUES (1)")
    assert connection.execute_scalar_query("SELECT SUM(n) FROM t") == 1
print(len(list(Path(os.environ["TMPDIR"]).glob("hyper-assets-logs-*"))))
"""


def test_a_resource_never_closed_leaves_no_logs_and_a_forked_childs_exit_stops_nothing(
    tmp_path: Path,
):
    """The process's exit stops the hyperd a resource still holds and removes its logs;
    the exit handler run in a forked child leaves its parent's hyperd running. (Only the
    handler: on Python 3.11 a forked child's whole finalisation hangs, with or without
    it, in tableauhyperapi's `HyperProcess.__del__` closing the inherited hyperd.)"""
    printed, temp = run_alone(UNCLOSED, tmp_path)
    assert printed.split() == ["1"]  # its logs while it ran
    assert list(temp.iterdir()) == []


def test_hyperd_keeps_at_most_two_log_files(tmp_path: Path):
    # The default limits with a small size, so that a few hundred queries rotate the log
    # (queried until it did: on a loaded machine hyperd writes its log later).
    logs = tmp_path / "logs"
    resource = HyperResource(log_dir=str(logs), parameters={"log_file_size_limit": "100k"})

    def logged() -> int:
        return sum(f.stat().st_size for f in logs.glob("hyperd*.log"))

    try:
        with resource.connect(tmp_path / "a.hyper") as connection:
            for _ in range(50):
                for _ in range(200):
                    connection.execute_scalar_query("SELECT 1")
                if logged() > 2 * 100 * 1024:  # it did rotate
                    break
            assert logged() > 2 * 100 * 1024, "the log never rotated"
    finally:
        resource.close()
    # hyperd opens the next file before it deletes the oldest: once settled, two are left
    # (a fresh clone's run at load 30 once counted three at this point)
    deadline = time.monotonic() + 10
    while len(list(logs.glob("hyperd*.log"))) > 2 and time.monotonic() < deadline:
        time.sleep(0.1)
    assert len(list(logs.glob("hyperd*.log"))) == 2


@pytest.mark.parametrize("opt_in", [False, True])
def test_usage_data_is_sent_only_after_opting_in(tmp_path: Path, opt_in: bool):
    import psutil

    resource = HyperResource(log_dir=str(tmp_path), send_usage_data=opt_in)
    try:
        with resource.connect(tmp_path / "t.hyper"):
            (hyperd,) = [
                p
                for p in psutil.Process().children(recursive=True)
                if "hyperd" in p.name() and any(str(tmp_path) in a for a in p.cmdline())
            ]
            flags = [a for a in hyperd.cmdline() if a.startswith("--telemetry-opt-in")]
        assert bool(flags) is opt_in
    finally:
        resource.close()


def test_unknown_process_parameter_fails_at_start(tmp_path: Path):
    resource = HyperResource(log_dir=str(tmp_path), parameters={"no_such_setting": "1"})
    with pytest.raises(Exception, match="no_such_setting"), resource.connect(tmp_path / "x.hyper"):
        pass


def test_a_file_held_by_another_program_times_out_with_a_clear_error(tmp_path: Path):
    database = tmp_path / "held.hyper"
    with (
        HyperProcess(
            Telemetry.DO_NOT_SEND_USAGE_DATA_TO_TABLEAU, parameters={"log_dir": str(tmp_path)}
        ) as other,
        Connection(other.endpoint, str(database), CreateMode.CREATE) as holder,
    ):
        holder.execute_command("CREATE TABLE kept (x INT)")
        holder.execute_command("INSERT INTO kept VALUES (1)")
        resource = HyperResource(log_dir=str(tmp_path), lock_timeout_seconds=1.0)
        with (
            pytest.raises(DatabaseLockedError, match=r"held\.hyper stayed locked"),
            resource.connect(database),
        ):
            pass
        resource.close()
    with (
        HyperProcess(
            Telemetry.DO_NOT_SEND_USAGE_DATA_TO_TABLEAU, parameters={"log_dir": str(tmp_path)}
        ) as again,
        Connection(again.endpoint, str(database)) as reader,
    ):
        assert reader.execute_list_query("SELECT * FROM kept") == [[1]]


def test_loading_from_a_missing_file_is_a_clear_error(tmp_path: Path):
    resource = HyperResource(log_dir=str(tmp_path))
    with (
        pytest.raises(TableNotFoundError, match="does not exist"),
        resource.connect(tmp_path / "nowhere.hyper", create=False),
    ):
        pass
    assert not (tmp_path / "nowhere.hyper").exists()


def test_resources_with_equal_settings_share_one_hyperd_which_outlives_them_a_while(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    monkeypatch.setattr(hyper_process, "IDLE_SECONDS", 2.0)
    first = HyperResource(log_dir=str(tmp_path))
    second = HyperResource(log_dir=str(tmp_path))
    other = HyperResource(log_dir=str(tmp_path), default_database_version=3)
    try:
        assert first.shared is second.shared
        assert first.shared is not other.shared
        process = first.shared.process
        first.close()
        second.close()
        assert process.is_open  # idle: the process's next run takes it up again
        third = HyperResource(log_dir=str(tmp_path))
        assert third.shared.process is process
        time.sleep(3)  # the first idle period's end comes while third uses it: it stays
        assert process.is_open
        third.close()
        deadline = time.monotonic() + 30
        while process.is_open and time.monotonic() < deadline:
            time.sleep(0.1)
        assert not process.is_open
        fourth = HyperResource(log_dir=str(tmp_path))  # a new one starts when next needed
        assert fourth.shared.process is not process and fourth.shared.process.is_open
        fourth.close()
    finally:
        other.close()


def test_an_idle_period_that_a_later_release_began_again_stops_nothing_early(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    """The stop of each release's idle period, called by hand (its timer waits an hour):
    once the hyperd was taken up and let go again, the first release's stop must not
    cut the second idle period short."""
    monkeypatch.setattr(hyper_process, "IDLE_SECONDS", 3600.0)
    resource = HyperResource(log_dir=str(tmp_path))
    settings = resource.settings
    process = resource.shared.process
    resource.close()  # release 1: its stop would come in an hour
    assert resource.shared.process is process  # taken up again, then let go: release 2
    resource.close()
    hyper_process._stop_if_idle(settings, 1)  # the first timer, late
    assert process.is_open
    hyper_process._stop_if_idle(settings, 2)  # the latest release's: it stops
    assert not process.is_open
    assert settings not in hyper_process._shared


def test_a_process_exits_at_once_and_its_idle_hyperd_and_logs_with_it(tmp_path: Path):
    script = textwrap.dedent(f"""
        from hyper_assets import HyperResource
        from hyper_assets._engine import process
        process.IDLE_SECONDS = 3600.0
        resource = HyperResource()
        with resource.connect({str(tmp_path / "x.hyper")!r}) as connection:
            connection.execute_command("CREATE TABLE t (n INT)")
        print(resource.shared.endpoint.connection_descriptor, resource.shared._log_dir())
        resource.close()
    """)
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=120, check=True
    )
    descriptor, logs = done.stdout.split()
    with pytest.raises(HyperException):
        Connection(Endpoint(descriptor, "hyper-assets-tests")).close()
    assert not Path(logs).exists()


def test_a_hyperd_that_died_is_replaced_on_the_next_use(tmp_path: Path) -> None:
    resource = HyperResource(log_dir=str(tmp_path / "logs"))  # settings of its own
    database = tmp_path / "kept.hyper"
    try:
        with resource.connect(database) as connection:
            connection.execute_command("CREATE TABLE t (n INT)")
            connection.execute_command("INSERT INTO t VALUES (1)")
        crash_hyperd(resource.shared, tmp_path / "scratch.hyper")
        with resource.connect(database) as connection:
            assert connection.execute_list_query("SELECT n FROM t") == [[1]]
    finally:
        resource.close()
