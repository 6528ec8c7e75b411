"""`make ui` (`python -m demo.ui`): the Dagster UI on the demo, with the Tableau emulator.

Starts the emulator on 127.0.0.1:8765 (data in data/emulator/) and `dagster dev` on
127.0.0.1:3000 with its instance in data/dagster_home/, the instance `make demo` records
into: the UI shows the demo's runs, and runs are kept between sessions. Ctrl-C or `kill`
(SIGINT or SIGTERM, even in the background) stops both.
"""

from __future__ import annotations

import argparse
import os
import secrets
import signal
import subprocess
import sys
from contextlib import suppress
from pathlib import Path

from demo.definitions import EMULATOR_SITE, PROJECT
from hyper_assets.emulator import Emulator

#: The repository: `dagster dev` serves its workspace.yaml from there.
ROOT = Path(__file__).resolve().parents[1]

#: The instance's settings: no telemetry, no "Join the Dagster community" dialog over the
#: UI's first page, and runs log from INFO up (Dagster's default, DEBUG, prints every event
#: of every step; set DEBUG here to see them again).
SETTINGS = (
    "telemetry:\n  enabled: false\nnux:\n  enabled: false\npython_logs:\n  python_log_level: INFO\n"
)
#: What earlier versions of the demo wrote there, replaced by SETTINGS.
EARLIER_SETTINGS = (
    "telemetry:\n  enabled: false\n",
    "telemetry:\n  enabled: false\npython_logs:\n  python_log_level: INFO\n",
)


def dagster_home(data: Path) -> Path:
    """The demo's Dagster instance directory, `data/dagster_home`, made if missing."""
    home = (data / "dagster_home").absolute()
    home.mkdir(parents=True, exist_ok=True)
    settings = home / "dagster.yaml"
    if not settings.exists() or settings.read_text() in EARLIER_SETTINGS:
        settings.write_text(SETTINGS)  # new, or as an earlier version of the demo left it
    return home


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m demo.ui", description=__doc__.split("\n")[0])
    parser.add_argument("--data", type=Path, default=Path("data"), help="default: %(default)s")
    parser.add_argument("--port", type=int, default=3000, help="UI port (%(default)s)")
    parser.add_argument("--emulator-port", type=int, default=8765, help="(%(default)s)")
    args = parser.parse_args(argv)
    home = dagster_home(args.data)
    emulator_dir = args.data / "emulator"
    emulator_dir.mkdir(parents=True, exist_ok=True)
    secret = os.environ.get("TABLEAU_TOKEN_SECRET") or secrets.token_urlsafe(24)
    with Emulator(
        emulator_dir, port=args.emulator_port, tokens={"demo": secret}, sites=("", EMULATOR_SITE)
    ) as emulator:
        emulator.add_project(PROJECT, EMULATOR_SITE)
        env = {
            **os.environ,
            "DAGSTER_HOME": str(home),
            "TABLEAU_TOKEN_SECRET": secret,
            "DEMO_LANDING_DIR": str((args.data / "landing").absolute()),
            "DEMO_DATABASE": str((args.data / "flights.hyper").absolute()),
        }
        env.setdefault("TABLEAU_SERVER_URL", emulator.url)  # unless a real server is set
        # `dagster dev` says it is superseded by `dg dev`, which needs a dg project
        quiet = "ignore:Function `dev_command` is superseded"
        env["PYTHONWARNINGS"] = ",".join(filter(None, [env.get("PYTHONWARNINGS"), quiet]))
        print(f"Tableau emulator on {emulator.url}; Dagster UI on http://127.0.0.1:{args.port}")
        dagster = str(Path(sys.executable).with_name("dagster"))
        command = [dagster, "dev", "-w", str(ROOT / "workspace.yaml")]
        command += ["-h", "127.0.0.1", "-p", str(args.port)]
        return serve(command, env)


class Stopped(Exception):
    """SIGINT or SIGTERM reached demo.ui."""


def _stopped(signum: int, frame: object) -> None:
    raise Stopped(signal.Signals(signum).name)


def serve(command: list[str], env: dict[str, str]) -> int:
    """Runs `dagster dev` (`command`) in a process group of its own until it exits, or until
    demo.ui gets SIGINT (Ctrl-C) or SIGTERM (`kill`); then stops that whole group.

    Both signals are caught before `dagster dev` starts, even where SIGINT came in ignored
    (a shell's `&` starts background jobs so): demo.ui must outlive a signal to stop the
    group, and `dagster dev`, which takes SIGTERM as SIGINT, gets the default SIGINT back
    from exec rather than an inherited SIG_IGN.
    """
    for number in (signal.SIGINT, signal.SIGTERM):
        signal.signal(number, _stopped)
    ui = subprocess.Popen(command, cwd=ROOT, env=env, start_new_session=True)
    try:
        return ui.wait()
    except Stopped:
        _ignore_stops()  # a second signal must not cut the stop short
        with suppress(ProcessLookupError):
            os.killpg(ui.pid, signal.SIGINT)  # dagster dev stops its webserver and daemon
        with suppress(subprocess.TimeoutExpired):
            ui.wait(timeout=10)
    finally:
        _ignore_stops()
        with suppress(ProcessLookupError):  # whatever of the group is left
            os.killpg(ui.pid, signal.SIGKILL)
    return ui.wait()


def _ignore_stops() -> None:
    for number in (signal.SIGINT, signal.SIGTERM):
        signal.signal(number, signal.SIG_IGN)


if __name__ == "__main__":
    sys.exit(main())
