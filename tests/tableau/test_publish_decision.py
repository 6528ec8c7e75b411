"""The publish decision as a table: what a publish does first (`decide`), and what its next
plan sends (`what_to_send`), from what it found. No HTTP, no hyperd: values in, values out.

The publishes of tests/tableau/test_publish.py take these paths against the emulator and a
real hyperd; here each row states one path and the whole decision it makes.
"""

from __future__ import annotations

from typing import Literal

import pytest
from tableauhyperapi import TableName

from hyper_assets._rows.modes import WriteMode
from hyper_assets._rows.outbox import Change
from hyper_assets.tableau._publish.decision import (
    UPDATE_REASON,
    Decision,
    Found,
    MakePlan,
    Refuse,
    Resume,
    Sending,
    decide,
    what_to_send,
)
from hyper_assets.tableau._publish.plan import (
    ColumnShape,
    Fingerprint,
    Plan,
    PublishState,
    TableShape,
    Target,
)

SALES = Target("site", "Finance", "Sales")
OTHER = Target("site", "Finance", "Stock")

ID = ColumnShape("id", "INTEGER", False, None)
AMOUNT = ColumnShape("amount", "DOUBLE PRECISION", False, None)
NAME = ColumnShape("name", "TEXT", True, "en_US")
SALES_SHAPE = TableShape((ID, AMOUNT), ("id",), ())
PRODUCTS_SHAPE = TableShape((ID, NAME), ("id",), ())
PUBLISHED = Fingerprint({"Extract.sales": SALES_SHAPE})


def state(target: Target = SALES, version: int | None = 4) -> PublishState:
    """The publish state of data source "ds-1", published with the shapes `PUBLISHED`."""
    return PublishState(target, "ds-1", PUBLISHED, version, position=7)


def plan(kind: Literal["full", "update"], target: Target | None = SALES) -> Plan:
    return Plan(kind, f"an earlier {kind} plan", (), PUBLISHED, target, ("Extract.sales",), 7)


UPDATE, FULL = plan("update"), plan("full")
FULL_OF_OTHER, FULL_WITHOUT_TARGET = plan("full", OTHER), plan("full", None)

FIRST = "first publish to this data source"
ASKED = "asked for a full publish"
GONE = "the data source is missing on the server or was replaced"

# state, unfinished plan, the id of the server's data source of that name, full; decision
DECISIONS = [
    pytest.param(None, None, None, False, MakePlan(FIRST), id="first publish"),
    pytest.param(None, None, "ds-9", False, Refuse("ds-9"), id="first, the name taken: refuse"),
    pytest.param(None, None, "ds-9", True, MakePlan(ASKED), id="first, full overwrites"),
    pytest.param(state(OTHER), None, None, False, MakePlan(FIRST), id="state of another"),
    pytest.param(state(OTHER), None, "ds-1", False, Refuse("ds-1"), id="state of another: refuse"),
    pytest.param(state(), None, "ds-1", False, MakePlan(None), id="ours: what changed says"),
    pytest.param(state(), None, "ds-1", True, MakePlan(ASKED), id="ours, asked for full"),
    pytest.param(state(), None, None, False, MakePlan(GONE), id="ours, gone from the server"),
    pytest.param(state(), None, "ds-2", False, MakePlan(GONE), id="ours, replaced on the server"),
    pytest.param(state(), UPDATE, "ds-1", False, Resume(UPDATE), id="update plan: resume"),
    pytest.param(
        state(), UPDATE, "ds-1", True, MakePlan(ASKED, UPDATE), id="update plan, full drops it"
    ),
    pytest.param(
        state(), UPDATE, None, False, MakePlan(GONE, UPDATE), id="update plan, its copy gone"
    ),
    pytest.param(
        state(), UPDATE, "ds-2", False, MakePlan(GONE, UPDATE), id="update plan, copy replaced"
    ),
    pytest.param(None, UPDATE, "ds-9", False, Refuse("ds-9"), id="update plan, no state: refuse"),
    pytest.param(None, FULL, None, False, Resume(FULL), id="full plan: resume"),
    pytest.param(None, FULL, "ds-9", False, Resume(FULL), id="full plan overwrites: resume"),
    pytest.param(state(), FULL, None, False, Resume(FULL), id="full plan, copy gone: resume"),
    pytest.param(state(), FULL, "ds-1", True, MakePlan(ASKED, FULL), id="full plan, full drops it"),
    pytest.param(
        None, FULL_OF_OTHER, None, False, MakePlan(FIRST, FULL_OF_OTHER), id="other's full plan"
    ),
    pytest.param(
        None, FULL_OF_OTHER, "ds-9", False, Refuse("ds-9"), id="other's full plan: refuse"
    ),
    pytest.param(
        state(),
        FULL_WITHOUT_TARGET,
        "ds-1",
        False,
        MakePlan(None, FULL_WITHOUT_TARGET),
        id="full plan of an earlier version, without target: replaced",
    ),
]


@pytest.mark.parametrize(("saved", "unfinished", "server_id", "full", "expected"), DECISIONS)
def test_what_a_publish_does_first(
    saved: PublishState | None,
    unfinished: Plan | None,
    server_id: str | None,
    full: bool,
    expected: Decision,
) -> None:
    assert decide(Found(SALES, full, saved, unfinished, server_id)) == expected


def change(seq: int, table: str = "sales", *, uncertain: bool = False) -> Change:
    return Change(seq, WriteMode.APPEND, TableName("Extract", table), uncertain=uncertain)


def shapes(**tables: TableShape) -> Fingerprint:
    return Fingerprint({f"Extract.{name}": shape for name, shape in tables.items()})


APPENDED = [change(8), change(9)]
UNCERTAIN = [change(8), change(9, uncertain=True)]
NOTE = ColumnShape("note", "TEXT", True, None)
GAINED = TableShape((ID, AMOUNT, NOTE), ("id",), ())
NULLABLE = TableShape((ID, ColumnShape("amount", "DOUBLE PRECISION", True, None)), ("id",), ())
REKEYED = TableShape((ID, AMOUNT, NOTE), ("id", "note"), ())
NOW = shapes(sales=SALES_SHAPE)
WITH_PRODUCTS = shapes(sales=SALES_SHAPE, products=PRODUCTS_SHAPE)

# why decide forced a whole file, the changes since, the file's shapes and format version,
# the publish state; what the next plan sends
SENDINGS = [
    pytest.param(FIRST, [], NOW, 4, None, Sending("full", FIRST), id="forced, no changes"),
    pytest.param(GONE, APPENDED, NOW, 4, None, Sending("full", GONE), id="forced, changes"),
    pytest.param(
        ASKED, UNCERTAIN, NOW, 5, state(), Sending("full", ASKED), id="forced reason first"
    ),
    pytest.param(None, [], NOW, 4, state(), None, id="nothing changed: nothing to send"),
    pytest.param(
        None, APPENDED, NOW, 4, state(), Sending("update", UPDATE_REASON), id="changes: update"
    ),
    pytest.param(
        None,
        UNCERTAIN,
        WITH_PRODUCTS,
        5,
        state(),
        Sending("full", "a crash left an append to Extract.sales whose outcome cannot be told"),
        id="an uncertain append, before all else",
    ),
    pytest.param(
        None,
        APPENDED,
        NOW,
        5,
        state(),
        Sending("full", "the file's format version changed (4 -> 5)"),
        id="format version changed",
    ),
    pytest.param(
        None,
        [],
        NOW,
        5,
        state(),
        Sending("full", "the file's format version changed (4 -> 5)"),
        id="format version changed, no changes",
    ),
    pytest.param(
        None,
        APPENDED,
        NOW,
        2,
        state(version=None),
        Sending("update", UPDATE_REASON),
        id="state without a version is version 2",
    ),
    pytest.param(
        None,
        APPENDED,
        NOW,
        3,
        state(version=None),
        Sending("full", "the file's format version changed (2 -> 3)"),
        id="state without a version, file version 3",
    ),
    pytest.param(
        None,
        [],
        WITH_PRODUCTS,
        4,
        state(),
        Sending("full", "table Extract.products is new"),
        id="a table added",
    ),
    pytest.param(
        None,
        APPENDED,
        shapes(sales=GAINED),
        4,
        state(),
        Sending(
            "full",
            "table Extract.sales gained column(s) note, and action batches cannot change a "
            "table's shape",
        ),
        id="a column added",
    ),
    pytest.param(
        None,
        APPENDED,
        shapes(sales=NULLABLE),
        4,
        state(),
        Sending("full", "table Extract.sales changed its columns, nullability or keys"),
        id="a column made nullable",
    ),
    pytest.param(
        None,
        APPENDED,
        shapes(sales=REKEYED),
        4,
        state(),
        Sending("full", "table Extract.sales changed its columns, nullability or keys"),
        id="a column added to the key",
    ),
    pytest.param(
        None,
        [change(8, "products")],
        shapes(products=PRODUCTS_SHAPE),
        4,
        PublishState(SALES, "ds-1", WITH_PRODUCTS, 4),
        Sending("full", "table Extract.sales was dropped"),
        id="a table dropped",
    ),
]


@pytest.mark.parametrize(
    ("full_reason", "changes", "now", "version", "saved", "expected"), SENDINGS
)
def test_what_the_next_plan_sends(
    full_reason: str | None,
    changes: list[Change],
    now: Fingerprint,
    version: int,
    saved: PublishState | None,
    expected: Sending | None,
) -> None:
    assert what_to_send(full_reason, changes, now, version, saved) == expected
