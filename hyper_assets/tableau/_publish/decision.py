"""What a publish does, decided from what it found: pure functions, tested as tables.

A publish (`hyper_assets.tableau._publish.publish`) first surveys its data source: the publish
state and the unfinished plan saved in its directory of the outbox, and the data source
of its name on the server. `decide` says what comes first:

- *refuse*, when the server holds a data source of that name that this file did not
  publish, unless a full publish was asked for or an unfinished full plan overwrites it;
- *resume* the unfinished plan, when it still goes where it was made for: an update plan
  to the data source of the publish state, still on the server; a full plan to its target.
  Once sent, the data source is ours and current, so what changed since decides the next;
- else *plan* the next, which replaces the unfinished plan, and which sends the whole file
  when asked, on a first publish, or when the server lost or replaced the data source.

Then, with the file read under its lock, `what_to_send` says what the next plan sends:
the whole file when `decide` said so, or when a change cannot go as an update (a crash
left an append whose outcome cannot be told, the file's format version changed, or a
table was added, dropped or changed its shape: action batches change rows, not tables);
else the changes recorded since the last publish, or nothing.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from hyper_assets._engine.tables import table_label
from hyper_assets._rows.outbox import Change
from hyper_assets.tableau._publish.plan import Fingerprint, Plan, PublishState, Target

#: The reason of an update plan.
UPDATE_REASON = "changes since the last publish"


@dataclass(frozen=True)
class Found:
    """What a publish to `target` found before deciding: `full` (asked for a whole-file
    publish), the publish state and unfinished plan saved for the data source (None: none,
    or not read, as a full publish reads neither), and the id of the data source of its
    name in its project on the server (None: there is none)."""

    target: Target
    full: bool
    state: PublishState | None
    plan: Plan | None
    server_id: str | None


@dataclass(frozen=True)
class Refuse:
    """The server's data source of that name, `server_id`, was not published from the file:
    refuse before changing anything (an unfinished plan stays for the next run)."""

    server_id: str


@dataclass(frozen=True)
class Resume:
    """Send the unfinished `plan` first, then plan what changed since."""

    plan: Plan


@dataclass(frozen=True)
class MakePlan:
    """Make the next plan: `full_reason` says why it sends the whole file (None: what
    changed says); it replaces the unfinished plan `replaces` (None: there is none)."""

    full_reason: str | None
    replaces: Plan | None = None


#: What a publish does first.
Decision = Refuse | Resume | MakePlan


def decide(found: Found) -> Decision:
    """What a publish does first, from what it `found` (see the module's docstring)."""
    state, plan = found.state, found.plan
    ours = state is not None and state.target == found.target
    # The server holds the data source this file published there.
    current = ours and state is not None and found.server_id == state.datasource_id
    # An update plan goes to the data source of the publish state; a full plan names its own.
    if (
        plan is not None
        and not found.full  # which drops it
        and (current if plan.kind == "update" else plan.target == found.target)
    ):
        return Resume(plan)
    if found.server_id is not None and not ours and not found.full:
        return Refuse(found.server_id)
    if found.full:
        return MakePlan("asked for a full publish", plan)
    if not ours:
        return MakePlan("first publish to this data source", plan)
    if not current:
        return MakePlan("the data source is missing on the server or was replaced", plan)
    return MakePlan(None, plan)


@dataclass(frozen=True)
class Sending:
    """What the next plan sends: `kind` "full" (the whole file) or "update" (the changes
    recorded), and why."""

    kind: Literal["full", "update"]
    reason: str


def what_to_send(
    full_reason: str | None,
    changes: Sequence[Change],
    now: Fingerprint,
    version: int,
    state: PublishState | None,
) -> Sending | None:
    """What the next plan sends (None: nothing): the whole file for `full_reason` (from
    `decide`), or when the recorded `changes` cannot go as an update to the copy `state`
    describes (the file's tables are `now`, its format `version`); else the changes."""
    reason = full_reason or _shape_reason(changes, now, version, state)
    if reason is not None:
        return Sending("full", reason)
    return Sending("update", UPDATE_REASON) if changes else None


def _shape_reason(
    changes: Sequence[Change], now: Fingerprint, version: int, state: PublishState | None
) -> str | None:
    """Why the recorded changes cannot be sent as an update, or None when they can.

    A file whose format `version` changed since it was last published is sent whole:
    Tableau keeps the version of the file it was sent. A publish state written before
    versions were recorded counts as version 2, the default then.
    """
    uncertain = [c for c in changes if c.uncertain]
    if uncertain:
        return (
            f"a crash left an append to {table_label(uncertain[0].table)} whose outcome "
            "cannot be told"
        )
    published_version = state.database_version if state else None
    published_version = 2 if published_version is None else published_version
    if published_version != version:
        return f"the file's format version changed ({published_version} -> {version})"
    return now.change_since(state.fingerprint if state else Fingerprint({})) or None
