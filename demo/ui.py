"""`make ui` (`python -m demo.ui`): the Dagster UI on the demo, with the Tableau emulator.

Starts the emulator on 127.0.0.1:8765 (data in data/emulator/) and `dagster dev` on
127.0.0.1:3000 with its instance in data/dagster_home/, so runs are kept between
sessions. Ctrl-C stops both.
"""

from __future__ import annotations

import argparse
import os
import secrets
import signal
import subprocess
import sys
from pathlib import Path

from demo.definitions import EMULATOR_SITE, PROJECT
from hyper_assets.emulator import Emulator


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m demo.ui", description=__doc__.split("\n")[0])
    parser.add_argument("--data", type=Path, default=Path("data"), help="default: %(default)s")
    parser.add_argument("--port", type=int, default=3000, help="UI port (%(default)s)")
    parser.add_argument("--emulator-port", type=int, default=8765, help="(%(default)s)")
    args = parser.parse_args(argv)
    home = (args.data / "dagster_home").absolute()
    home.mkdir(parents=True, exist_ok=True)
    settings = home / "dagster.yaml"
    if not settings.exists():
        settings.write_text("telemetry:\n  enabled: false\n")
    emulator_dir = args.data / "emulator"
    emulator_dir.mkdir(parents=True, exist_ok=True)
    secret = os.environ.get("TABLEAU_TOKEN_SECRET") or secrets.token_urlsafe(24)
    env = {
        **os.environ,
        "DAGSTER_HOME": str(home),
        "TABLEAU_TOKEN_SECRET": secret,
        "DEMO_LANDING_DIR": str(args.data / "landing"),
        "DEMO_DATABASE": str(args.data / "flights.hyper"),
    }
    with Emulator(
        emulator_dir, port=args.emulator_port, tokens={"demo": secret}, sites=("", EMULATOR_SITE)
    ) as emulator:
        emulator.add_project(PROJECT, EMULATOR_SITE)
        print(f"Tableau emulator on {emulator.url}; Dagster UI on http://127.0.0.1:{args.port}")
        dagster = str(Path(sys.executable).with_name("dagster"))
        command = [dagster, "dev", "-w", "workspace.yaml", "-h", "127.0.0.1", "-p", str(args.port)]
        ui = subprocess.Popen(command, env=env, start_new_session=True)
        try:
            return ui.wait()
        except KeyboardInterrupt:
            os.killpg(ui.pid, signal.SIGINT)
            try:
                return ui.wait(timeout=10)
            except subprocess.TimeoutExpired:
                os.killpg(ui.pid, signal.SIGKILL)
                return ui.wait()


if __name__ == "__main__":
    sys.exit(main())
