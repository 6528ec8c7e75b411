"""The server's reading of an action batch, the body of "Update Data in Hyper Data Source".

Written from the specification (Tableau's help page "Update Data in Published
Live-to-Hyper Data Sources" and the REST reference), not from the client's
`hyper_assets.tableau.actions`: the emulator judges what the client sends, so a bug in the
client's serialiser or parser cannot agree with itself here. Where the specification is
silent, this reading is strict (unknown fields are refused) so a client's slip shows.

    {"actions": [                                   # required, a non-empty list
      {"action": "delete",                          # insert, update, delete, replace, upsert
       "target-table": "t", "target-schema": "s",   # the schemas default to the only one
       "source-table": "keys", "source-schema": "p",
       "condition": {"op": "and", "args": [         # update, upsert and delete only
         {"op": "eq", "target-col": "id", "source-col": "id"},
         {"op": "lt", "target-col": "day",
          "const": {"type": "datetime", "v": "2018-12-06T19:21:12.12Z"}}]}}]}

A malformed batch is refused with 400000, its detail naming the action and the field.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from typing import Any, TypeAlias

from hyper_assets.emulator.errors import RestApiError
from hyper_assets.emulator.wire import bad_request

#: Per action: its required fields and its optional ones ("action" aside).
_FROM_SOURCE = ({"target-table", "source-table"}, {"target-schema", "source-schema"})
_MATCHING = ({"target-table", "source-table", "condition"}, {"target-schema", "source-schema"})
FIELDS: dict[str, tuple[set[str], set[str]]] = {
    "insert": _FROM_SOURCE,
    "replace": _FROM_SOURCE,
    "update": _MATCHING,
    "upsert": _MATCHING,
    "delete": ({"target-table", "condition"}, {"target-schema", "source-table", "source-schema"}),
}
COMPARISONS = ("eq", "neq", "gt", "lt", "gte", "lte", "is", "has")
JUNCTIONS = ("and", "or")
CONST_TYPES = ("boolean", "integer", "double", "string", "datetime")

Value: TypeAlias = bool | int | float | str | datetime | None


@dataclass(frozen=True)
class Literal:
    """A typed constant; `value` None is SQL NULL, a date-time carries its offset."""

    type: str
    value: Value


@dataclass(frozen=True)
class Comparison:
    """`op` between two of: a target column, a source column, a constant."""

    op: str
    target_col: str | None
    source_col: str | None
    const: Literal | None


@dataclass(frozen=True)
class Junction:
    """`and` / `or` of one or more conditions."""

    op: str
    args: tuple[Condition, ...]


@dataclass(frozen=True)
class Constant:
    """The top-level constant condition: every row (True) or none."""

    value: bool


Condition: TypeAlias = Comparison | Junction | Constant


@dataclass(frozen=True)
class Action:
    kind: str  # a key of FIELDS
    target_table: str
    target_schema: str | None = None
    source_table: str | None = None
    source_schema: str | None = None
    condition: Condition | None = None


def comparisons(condition: Condition) -> list[Comparison]:
    """Every comparison of a condition, left to right."""
    if isinstance(condition, Comparison):
        return [condition]
    if isinstance(condition, Constant):
        return []
    return [c for arg in condition.args for c in comparisons(arg)]


class _Malformed(Exception):
    def __init__(self, field: str, problem: str) -> None:
        super().__init__(problem)
        self.field = field
        self.problem = problem


def parse_batch(body: object) -> list[Action]:
    """The actions of a request body; a 400000 naming the action and field otherwise."""
    try:
        items = _actions(body)
    except _Malformed as err:
        raise _refusal(f"field '{err.field}': {err.problem}") from None
    actions = []
    for index, item in enumerate(items):
        try:
            actions.append(_action(item))
        except _Malformed as err:
            raise _refusal(f"action {index}, field '{err.field}': {err.problem}") from None
    return actions


def _refusal(detail: str) -> RestApiError:
    return bad_request(f"invalid action batch: {detail}")


def _actions(body: object) -> list[Any]:
    if not isinstance(body, Mapping):
        raise _Malformed("actions", 'the body must be a JSON object {"actions": [...]}')
    _only(body, {"actions"}, "")
    items = body.get("actions")
    if not isinstance(items, list) or not items:
        raise _Malformed("actions", "must be a non-empty list of actions")
    return items


def _action(item: object) -> Action:
    body = _object(item, "action")
    kind = body.get("action")
    if kind not in FIELDS:
        raise _Malformed("action", f"unknown action {kind!r}; use one of {', '.join(FIELDS)}")
    required, optional = FIELDS[kind]
    _only(body, {"action", *required, *optional}, "")
    for key in sorted(required):
        if key not in body:
            raise _Malformed(key, f"missing; '{kind}' requires it")
    names = {
        key: _name(body[key], key)
        for key in ("target-table", "target-schema", "source-table", "source-schema")
        if key in body
    }
    if "source-schema" in names and "source-table" not in names:
        raise _Malformed("source-schema", "is set but there is no source-table")
    condition = None
    if "condition" in body:
        condition = _condition(body["condition"], "condition", top=True)
    return Action(
        kind,
        names["target-table"],
        names.get("target-schema"),
        names.get("source-table"),
        names.get("source-schema"),
        condition,
    )


def _condition(obj: object, field: str, *, top: bool = False) -> Condition:
    body = _object(obj, field)
    op = body.get("op")
    if op is None and top and "const" in body:
        _only(body, {"const"}, field)
        constant = _const(body["const"], f"{field}.const")
        if constant.type != "boolean" or constant.value is None:
            raise _Malformed(f"{field}.const", "a condition without op is boolean true or false")
        return Constant(bool(constant.value))
    if op in JUNCTIONS:
        _only(body, {"op", "args"}, field)
        args = body.get("args")
        if not isinstance(args, list) or not args:
            raise _Malformed(f"{field}.args", f"'{op}' needs a non-empty list of conditions")
        return Junction(
            op, tuple(_condition(arg, f"{field}.args[{i}]") for i, arg in enumerate(args))
        )
    if op not in COMPARISONS:
        raise _Malformed(
            f"{field}.op", f"unknown op {op!r}; use one of {', '.join(COMPARISONS + JUNCTIONS)}"
        )
    _only(body, {"op", "target-col", "source-col", "const"}, field)
    target = _name(body["target-col"], f"{field}.target-col") if "target-col" in body else None
    source = _name(body["source-col"], f"{field}.source-col") if "source-col" in body else None
    const = _const(body["const"], f"{field}.const") if "const" in body else None
    operands = [x for x in (target, source, const) if x is not None]
    if len(operands) != 2:
        raise _Malformed(field, f"'{op}' compares exactly two of target-col, source-col and const")
    if op == "has" and const is not None and const.type != "string":
        raise _Malformed(f"{field}.const.type", "'has' looks for a string; use type string")
    return Comparison(op, target, source, const)


def _const(obj: object, field: str) -> Literal:
    body = _object(obj, field)
    _only(body, {"type", "v"}, field)
    kind = body.get("type")
    if kind not in CONST_TYPES:
        raise _Malformed(f"{field}.type", f"unknown type {kind!r}; use one of {CONST_TYPES}")
    if "v" not in body:
        raise _Malformed(f"{field}.v", "missing; give the value (null for NULL)")
    return Literal(kind, _value(kind, body["v"], f"{field}.v"))


def _value(kind: str, v: object, field: str) -> Value:
    if v is None:
        return None
    if kind == "boolean":
        # "Boolean specifies either "true" or "false". It is not case sensitive."
        if isinstance(v, bool):
            return v
        if isinstance(v, str) and v.lower() in ("true", "false"):
            return v.lower() == "true"
        raise _Malformed(field, f"{v!r} is not a boolean (true or false)")
    if kind == "integer":
        if isinstance(v, int) and not isinstance(v, bool):
            return v
        raise _Malformed(field, f"{v!r} is not an integer")
    if kind == "double":
        if isinstance(v, int | float) and not isinstance(v, bool) and math.isfinite(v):
            return float(v)
        raise _Malformed(field, f"{v!r} is not a finite number")
    if kind == "string":
        if isinstance(v, str):
            return v
        raise _Malformed(field, f"{v!r} is not a string")
    return _datetime(v, field)


#: "A date-time with a time-zone in the ISO-8601 calendar system, such as
#: 2007-12-03T10:15:30Z (for UTC time) or 2007-12-03T10:15:30+0100": extended date and
#: time, seconds and fraction optional, then Z or an offset with or without its colon.
_DATETIME = re.compile(
    r"(\d{4})-(\d\d)-(\d\d)T(\d\d):(\d\d)(?::(\d\d)(?:\.(\d{1,9}))?)?"
    r"(?:(Z)|([+-])(\d\d):?(\d\d))"
)


def _datetime(v: object, field: str) -> datetime:
    match = _DATETIME.fullmatch(v) if isinstance(v, str) else None
    if match is None:
        raise _Malformed(
            field, f"{v!r} is not a date-time with a zone such as 2007-12-03T10:15:30Z"
        )
    year, month, day, hour, minute, second, fraction, utc, sign, zh, zm = match.groups()
    try:
        offset = timedelta(0)
        if not utc:
            if int(zh) > 23 or int(zm) > 59:
                raise ValueError(f"offset {sign}{zh}:{zm} is out of range")
            offset = (1 if sign == "+" else -1) * timedelta(hours=int(zh), minutes=int(zm))
        return datetime(
            int(year),
            int(month),
            int(day),
            int(hour),
            int(minute),
            int(second or 0),
            int((fraction or "0").ljust(6, "0")[:6]),
            tzinfo=timezone(offset),
        )
    except ValueError as err:
        raise _Malformed(field, f"{v!r} is not a valid date-time: {err}") from None


def _object(obj: object, field: str) -> Mapping[str, Any]:
    if not isinstance(obj, Mapping):
        raise _Malformed(field, f"must be a JSON object, got {type(obj).__name__}")
    return obj


def _only(body: Mapping[str, Any], allowed: set[str], field: str) -> None:
    extra = sorted(set(body) - allowed)
    if extra:
        where = f"{field}.{extra[0]}" if field else extra[0]
        raise _Malformed(where, f"unknown field; allowed here: {', '.join(sorted(allowed))}")


def _name(value: object, field: str) -> str:
    if not isinstance(value, str) or not value:
        raise _Malformed(field, f"must be a non-empty string, got {value!r}")
    return value
