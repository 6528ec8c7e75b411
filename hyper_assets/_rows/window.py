"""The rows some partitions own, as a value: SQL for Hyper, JSON for the outbox.

Time windows are `expr >= start AND expr < end` (never BETWEEN: it would take the next
partition's first instant); bounds are wall-clock times in the partitions' time zone
(TIMESTAMP and DATE columns hold wall clocks), or instants for TIMESTAMPTZ columns.
Static and dynamic partitions are `expr IN (...)`. Multi-partitions AND one condition per
dimension. `hyper_assets._dagster.partitions` makes windows from Dagster's partitions.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from tableauhyperapi import escape_name, escape_string_literal

from hyper_assets._base.saved import Fields


@dataclass(frozen=True)
class TimeRange:
    """`expr >= start AND expr < end`; `instant` for TIMESTAMPTZ columns, else wall clocks."""

    expr: str
    is_column: bool
    start: datetime
    end: datetime
    instant: bool

    @property
    def sql(self) -> str:
        ref = escape_name(self.expr) if self.is_column else self.expr
        return f"({ref} >= {self._bound(self.start)} AND {ref} < {self._bound(self.end)})"

    def _bound(self, value: datetime) -> str:
        if self.instant:
            return "TIMESTAMPTZ " + escape_string_literal(value.isoformat(sep=" "))
        naive = value.replace(tzinfo=None)
        return "TIMESTAMP " + escape_string_literal(naive.isoformat(sep=" "))

    def contains(self, other: Dimension) -> bool:
        return (
            isinstance(other, TimeRange)
            and (other.expr, other.is_column) == (self.expr, self.is_column)
            and self.start <= other.start
            and other.end <= self.end
        )


@dataclass(frozen=True)
class KeySet:
    """`expr IN (values)` for static and dynamic partitions."""

    expr: str
    is_column: bool
    values: tuple[str, ...]

    @property
    def sql(self) -> str:
        ref = escape_name(self.expr) if self.is_column else self.expr
        return f"{ref} IN ({', '.join(escape_string_literal(v) for v in self.values)})"

    def contains(self, other: Dimension) -> bool:
        return (
            isinstance(other, KeySet)
            and (other.expr, other.is_column) == (self.expr, self.is_column)
            and set(other.values) <= set(self.values)
        )


Dimension = TimeRange | KeySet


@dataclass(frozen=True)
class Window:
    """The rows some partitions own: the AND of one condition per partition dimension."""

    dimensions: tuple[Dimension, ...]

    @property
    def sql(self) -> str:
        return " AND ".join(d.sql for d in self.dimensions)

    def contains(self, other: Window) -> bool:
        """True when every row of `other` is a row of this window."""
        return len(self.dimensions) == len(other.dimensions) and all(
            mine.contains(theirs)
            for mine, theirs in zip(self.dimensions, other.dimensions, strict=True)
        )

    def to_json(self) -> list[dict[str, Any]]:
        out: list[dict[str, Any]] = []
        for d in self.dimensions:
            item: dict[str, Any] = {"expr": d.expr, "is_column": d.is_column}
            if isinstance(d, TimeRange):
                item |= {"start": d.start.isoformat(), "end": d.end.isoformat()}
                item["instant"] = d.instant
            else:
                item["values"] = list(d.values)
            out.append(item)
        return out


def saved_dimension(f: Fields) -> Dimension:
    """One dimension of a window as `Window.to_json` wrote it (in a saved change)."""
    expr, is_column = f.take("expr", str), f.take("is_column", bool)
    if f.has("values"):
        return KeySet(expr, is_column, f.strings("values"))
    start, end = (datetime.fromisoformat(f.take(k, str)) for k in ("start", "end"))
    return TimeRange(expr, is_column, start, end, f.take("instant", bool))
