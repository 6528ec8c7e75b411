"""`python -m hyper_assets.emulator --host 127.0.0.1 --port 8080 --data-dir DIR`."""

from __future__ import annotations

import argparse
import signal
import threading
from pathlib import Path

from hyper_assets.emulator import SERVER_MAX_PAYLOAD_BYTES, Emulator
from hyper_assets.emulator.errors import EmulatorConfigError


def _token(text: str) -> tuple[str, str]:
    name, sep, secret = text.partition("=")
    if not sep or not name or not secret:
        raise argparse.ArgumentTypeError(f"{text!r} is not NAME=SECRET")
    return name, secret


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        prog="python -m hyper_assets.emulator",
        description="Serve a local emulation of Tableau's publish and update-data REST API.",
    )
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8080, help="0 picks a free port")
    parser.add_argument("--data-dir", type=Path, required=True, help="where <name>.hyper live")
    parser.add_argument(
        "--token",
        type=_token,
        action="append",
        default=[],
        metavar="NAME=SECRET",
        help="a personal access token to accept (repeatable); none: one is generated",
    )
    parser.add_argument(
        "--site",
        action="append",
        default=[],
        metavar="CONTENT_URL",
        help='a site to host besides the default site "" (repeatable)',
    )
    parser.add_argument(
        "--max-payload-mb",
        type=float,
        default=SERVER_MAX_PAYLOAD_BYTES / 2**20,
        help="largest update payload accepted; above it the server answers 413",
    )
    args = parser.parse_args(argv)
    args.data_dir.mkdir(parents=True, exist_ok=True)
    try:
        emulator = Emulator(
            args.data_dir,
            args.host,
            args.port,
            tokens=dict(args.token) or None,
            max_payload_bytes=int(args.max_payload_mb * 2**20),
            sites=("", *args.site),
        ).start()
    except EmulatorConfigError as err:
        parser.exit(2, f"error: {err}\n")
    print(f"Tableau REST emulator on {emulator.url}, data in {args.data_dir}", flush=True)
    if not args.token:
        for name, secret in emulator.tokens.items():
            print(f"Personal access token: name={name} secret={secret}", flush=True)
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    try:
        stop.wait()
    except KeyboardInterrupt:
        pass
    finally:
        emulator.stop()


if __name__ == "__main__":
    main()
