"""Where each data source of a file keeps its publish state, and what it has sent.

One `.hyper` file may feed several data sources, each holding some of its tables. Each
keeps its publish state (`published.json`) and unfinished plan (`plan/`) in a directory of
its own, `<database>.outbox/datasources/<name>-<hash>/`, and its position in the outbox:
the sequence number through which every recorded change is on its server copy (or in its
saved plan). A change leaves the outbox once every data source holding its table has
sent it. A data source never published needs no change (its first publish sends the
whole of its tables) until its first plan is taken (`TAKEN`, saved with the copy of the
file its tree file is written from) or saved, which records its position.

A data source that is no longer published keeps the changes of its tables in the outbox:
delete its directory to let them go. Versions before these directories kept one publish
state per file, in the outbox itself, for a data source of every table: `adopt` moves it.
"""

from __future__ import annotations

import hashlib
import logging
import re
import shutil
from contextlib import suppress
from dataclasses import dataclass
from pathlib import Path

from hyper_assets._engine.tables import table_label
from hyper_assets._rows.outbox import Change, Outbox
from hyper_assets.errors import CorruptFileError
from hyper_assets.tableau._publish.plan import Target, read_plan, read_state

log = logging.getLogger(__name__)

#: The files in a data source's directory that say which tables it holds and what it sent:
#: its publish state, its plan, and a full plan taken while its tree file is written.
STATE, PLAN, TAKEN = "published.json", "plan/plan.json", "plan/taken.json"


def home(outbox: Outbox, target: Target) -> Path:
    """The directory of the data source `target` (site, project, data source name)."""
    name = re.sub(r"[^A-Za-z0-9_]+", "_", target.datasource)[:40]
    text = "\n".join((target.site, target.project, target.datasource))
    digest = hashlib.sha256(text.encode()).hexdigest()[:10]
    return outbox.directory / "datasources" / f"{name}-{digest}"


def adopt(outbox: Outbox, directory: Path, target: Target) -> None:
    """Moves the file's one publish state (and plan) of an earlier version into `directory`,
    the data source's, when it was made for `target` and the data source has none yet."""
    legacy = outbox.directory / STATE
    if (directory / STATE).exists() or not legacy.exists():
        return
    state = read_state(legacy, "Delete it, and publish with full=True")
    if state is None or state.target != target:
        return
    directory.mkdir(parents=True, exist_ok=True)
    if (outbox.directory / "plan").exists():
        shutil.move(outbox.directory / "plan", directory / "plan")
    legacy.replace(directory / STATE)


@dataclass(frozen=True)
class Position:
    """A data source holds `tables` (None: every table) and sent every change through `seq`."""

    seq: int
    tables: tuple[str, ...] | None


def position(directory: Path) -> Position | None:
    """The data source's position: from its publish state, else from its first saved plan,
    else from its first plan taken. A state adopted from an earlier version, or a plan saved
    before plans named their tables, names none: it holds every table."""
    state = read_state(directory / STATE)
    if state is not None:
        return Position(state.position, state.tables)
    plan = read_plan(directory / PLAN) or read_plan(directory / TAKEN)
    return None if plan is None else Position(plan.position, plan.tables or None)


def highest(outbox: Outbox) -> int:
    """The highest position of the file's data sources (0: none has one); one whose files
    cannot be read counts as none (its next publish refuses until it is published whole)."""
    found = [0]
    for directory in (outbox.directory / "datasources").glob("*"):
        with suppress(CorruptFileError):
            found.append(p.seq if (p := position(directory)) else 0)
    return max(found)


def unsent(outbox: Outbox, directory: Path) -> list[Change]:
    """The recorded changes of the tables the data source of `directory` holds that are not
    on its server copy yet (nor in its saved plan); none before its first publish."""
    held = position(directory)
    if held is None:
        return []
    return [
        change
        for change in outbox.changes()
        if change.seq > held.seq
        and (held.tables is None or table_label(change.table) in held.tables)
    ]


def sent_by_all(outbox: Outbox) -> list[Change]:
    """The changes every data source holding their table has sent (or saved in a plan).

    When a data source's files cannot be read, none: the outbox keeps every change.
    """
    try:
        positions = [
            p
            for d in sorted((outbox.directory / "datasources").glob("*"))
            if (p := position(d)) is not None
        ]
    except CorruptFileError as error:
        log.warning("Keeping every change in the outbox: %s", error)
        return []
    return [
        change
        for change in outbox.changes()
        if all(
            change.seq <= p.seq
            for p in positions
            if p.tables is None or table_label(change.table) in p.tables
        )
    ]
