"""From recorded changes to the net change of each table, and the actions that send it.

Per table, in the order tables were first changed:

- a full refresh, or kinds that mix, become one `replace` with the table's current rows;
- partition windows become `delete` of the window + `insert` of its current rows, once
  per window (a window inside another one written since the last publish is dropped);
- appends become one `insert` of the captured rows;
- upserts become, as the local write does them, one `delete` of the upserted keys and
  one `insert` of the table's current rows for those keys (an `upsert` would have the
  server's Hyper SET key columns, which kills hyperd for a composite key).

Sending current rows makes a change that is sent twice, or whose write failed after it
was recorded, harmless: the server ends up with what the local file holds. The actions
that send a step read payload files: `hyper_assets.tableau._publish.payload` makes both.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Literal

from tableauhyperapi import SqlType, TableName, TypeTag

from hyper_assets._rows.modes import WriteMode
from hyper_assets._rows.outbox import Change
from hyper_assets._rows.window import TimeRange, Window
from hyper_assets.tableau.actions import (
    And,
    Condition,
    Const,
    Eq,
    Gte,
    Lt,
    Or,
)

StepKind = Literal["replace", "window", "insert", "upsert"]

_INTEGERS = (TypeTag.SMALL_INT, TypeTag.INT, TypeTag.BIG_INT)
_TEXTS = (TypeTag.TEXT, TypeTag.VARCHAR, TypeTag.CHAR)


@dataclass(frozen=True)
class Step:
    """The net change of one table; `condition` is the window's, set for `window` steps only."""

    kind: StepKind
    table: TableName
    changes: tuple[Change, ...]
    window: Window | None = None
    condition: Condition | None = None
    key: tuple[str, ...] = ()


def net_steps(
    changes: Sequence[Change], column_types: Mapping[TableName, Mapping[str, SqlType]]
) -> list[Step]:
    """The steps that bring a server copy from the last publish to the local file.

    `column_types` has the current columns of each changed table that still exists; a
    table missing from it is skipped (a write that created it failed).
    """
    by_table: dict[TableName, list[Change]] = {}
    for change in changes:
        by_table.setdefault(change.table, []).append(change)
    steps: list[Step] = []
    for table, mine in by_table.items():
        if table in column_types:
            steps += _table_steps(table, tuple(mine), column_types[table])
    return steps


def _table_steps(
    table: TableName, changes: tuple[Change, ...], types: Mapping[str, SqlType]
) -> list[Step]:
    kinds = {c.kind for c in changes}
    replace = [Step("replace", table, changes)]
    if kinds == {WriteMode.APPEND}:
        return [Step("insert", table, changes)]
    if kinds == {WriteMode.UPSERT} and len({c.key for c in changes}) == 1:
        return [Step("upsert", table, changes, key=changes[0].key)]
    if kinds != {WriteMode.PARTITION}:
        return replace
    windows = list(dict.fromkeys(c.window for c in changes))
    kept = [w for w in windows if w and not any(o != w and o.contains(w) for o in windows if o)]
    conditions = [window_condition(w, types) for w in kept]
    if None in windows or None in conditions:
        return replace
    return [
        Step("window", table, changes, window=w, condition=c)
        for w, c in zip(kept, conditions, strict=True)
    ]


def window_condition(window: Window, types: Mapping[str, SqlType]) -> Condition | None:
    """The window as a Tableau condition, or None when conditions cannot express it.

    Wall-clock bounds (DATE and TIMESTAMP columns) are sent as UTC date-times holding the
    same wall clock; TIMESTAMPTZ bounds as instants.
    """
    parts: list[Condition] = []
    for dimension in window.dimensions:
        if not dimension.is_column or dimension.expr not in types:
            return None
        column = dimension.expr
        if isinstance(dimension, TimeRange):
            start, end = (
                Const.datetime(_instant(v, dimension.instant))
                for v in (dimension.start, dimension.end)
            )
            parts += [Gte(column, const=start), Lt(column, const=end)]
            continue
        consts = [_key_const(v, types[column]) for v in dimension.values]
        if any(c is None for c in consts):
            return None
        matches: list[Condition] = [Eq(column, const=c) for c in consts]
        parts.append(matches[0] if len(matches) == 1 else Or(matches))
    return And(parts)


def _instant(value: datetime, instant: bool) -> datetime:
    return value if instant else value.replace(tzinfo=UTC)


def _key_const(value: str, sql_type: SqlType) -> Const | None:
    if sql_type.tag in _TEXTS:
        return Const.string(value)
    if sql_type.tag in _INTEGERS and value.lstrip("-").isdigit():
        return Const.integer(int(value))
    return None
