"""Typed action batches for Tableau's "Update Data in Hyper Data Source" endpoint.

Each action and condition is a frozen dataclass that serialises to exactly the JSON the
REST API documents (`target-table`, `source-col`, `const`, `args`, ...) and parses back
from it. Parsing rejects malformed input with an `ActionValidationError` naming the
action's index and the field at fault, so a bad batch fails before it is sent.

    batch = [
        Replace(source_table="campaigns", target_table="marketing_campaigns"),
        Delete(target_table="ad_views", condition=Lt("day", const=Const.datetime(cutoff))),
        Update(source_table="changed", target_table="users",
               condition=And([Eq("k1", source_col="k1"), Eq("k2", source_col="k2")])),
    ]
    body = batch_to_json(batch)          # {"actions": [...]}
    assert parse_batch(body) == batch
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping, Sequence
from dataclasses import KW_ONLY, dataclass
from datetime import datetime
from typing import Any, ClassVar, Literal, TypeAlias

from hyper_assets.errors import ActionValidationError

ConstType: TypeAlias = Literal["boolean", "integer", "double", "string", "datetime"]
ConstValue: TypeAlias = bool | int | float | str | datetime | None
CONST_TYPES: tuple[ConstType, ...] = ("boolean", "integer", "double", "string", "datetime")


class _Invalid(Exception):
    """A problem found while parsing, with the dotted field path where it was found."""

    def __init__(self, field: str, problem: str):
        super().__init__(problem)
        self.field = field
        self.problem = problem


# --- constants ---------------------------------------------------------------------------


@dataclass(frozen=True)
class Const:
    """A typed constant: `{"type": "integer", "v": 3}`; `v` None is SQL NULL."""

    type: ConstType
    v: ConstValue

    def __post_init__(self) -> None:
        try:
            object.__setattr__(self, "v", _coerce_const(self.type, self.v, "v"))
        except _Invalid as err:
            raise ActionValidationError(err.problem, field=err.field) from None

    @classmethod
    def boolean(cls, v: bool | None) -> Const:
        return cls("boolean", v)

    @classmethod
    def integer(cls, v: int | None) -> Const:
        return cls("integer", v)

    @classmethod
    def double(cls, v: float | None) -> Const:
        return cls("double", v)

    @classmethod
    def string(cls, v: str | None) -> Const:
        return cls("string", v)

    @classmethod
    def datetime(cls, v: datetime | str | None) -> Const:
        """A point in time; a `datetime` must carry a time zone, a string is ISO-8601."""
        return cls("datetime", v)

    def to_json(self) -> dict[str, Any]:
        if isinstance(self.v, datetime):
            return {"type": self.type, "v": _iso(self.v)}
        return {"type": self.type, "v": self.v}

    @classmethod
    def from_json(cls, obj: object, field: str = "const") -> Const:
        body = _object(obj, field)
        _only_keys(body, {"type", "v"}, field)
        kind = _required(body, "type", field)
        if kind not in CONST_TYPES:
            raise _Invalid(
                f"{field}.type", f"unknown const type {kind!r}; use one of {CONST_TYPES}"
            )
        if "v" not in body:
            raise _Invalid(f"{field}.v", "missing; give the value (null for NULL)")
        return cls(kind, _coerce_const(kind, body["v"], f"{field}.v"))


def _iso(value: datetime) -> str:
    text = value.isoformat()
    return text[:-6] + "Z" if text.endswith("+00:00") else text


def _coerce_const(kind: str, v: object, field: str) -> ConstValue:
    """Check `v` against `kind` and return it in its Python form (datetimes parsed)."""
    if v is None:
        return None
    if kind == "boolean":
        if isinstance(v, bool):
            return v
        if isinstance(v, str) and v.lower() in ("true", "false"):
            return v.lower() == "true"
        raise _Invalid(field, f"{v!r} is not a boolean; use true or false")
    if kind == "integer":
        if isinstance(v, int) and not isinstance(v, bool):
            return v
        raise _Invalid(field, f"{v!r} is not an integer")
    if kind == "double":
        if isinstance(v, int | float) and not isinstance(v, bool) and math.isfinite(v):
            return float(v)
        raise _Invalid(field, f"{v!r} is not a finite number")
    if kind == "string":
        if isinstance(v, str):
            return v
        raise _Invalid(field, f"{v!r} is not a string")
    return _coerce_datetime(v, field)


def _coerce_datetime(v: object, field: str) -> datetime:
    if isinstance(v, str):
        try:
            parsed = datetime.fromisoformat(v)
        except ValueError:
            raise _Invalid(
                field, f"{v!r} is not an ISO-8601 date-time such as 2007-12-03T10:15:30Z"
            ) from None
        if "T" not in v.upper():
            raise _Invalid(field, f"{v!r} has no time; write e.g. {v}T00:00:00Z")
        v = parsed
    if not isinstance(v, datetime):
        raise _Invalid(field, f"{v!r} is not a date-time")
    if v.tzinfo is None:
        raise _Invalid(field, f"{_iso(v)} has no time zone; add Z or an offset like +01:00")
    return v


# --- conditions --------------------------------------------------------------------------


@dataclass(frozen=True)
class Predicate:
    """Compares two of: a target column, a source column, a constant."""

    op: ClassVar[str]
    target_col: str | None = None
    _: KW_ONLY
    source_col: str | None = None
    const: Const | None = None

    def __post_init__(self) -> None:
        problem = _operand_problem(self.op, self.target_col, self.source_col, self.const)
        if problem:
            raise ActionValidationError(problem, field="condition")

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"op": self.op}
        if self.target_col is not None:
            out["target-col"] = self.target_col
        if self.source_col is not None:
            out["source-col"] = self.source_col
        if self.const is not None:
            out["const"] = self.const.to_json()
        return out


class Eq(Predicate):
    """Equal; never matches NULL (use `Is` for NULL-safe equality)."""

    op = "eq"


class Neq(Predicate):
    op = "neq"


class Gt(Predicate):
    op = "gt"


class Lt(Predicate):
    op = "lt"


class Gte(Predicate):
    op = "gte"


class Lte(Predicate):
    op = "lte"


class Is(Predicate):
    """NULL-safe equality (IS NOT DISTINCT FROM); `const` v None tests for NULL."""

    op = "is"


class Has(Predicate):
    """The left text contains the right text as a substring."""

    op = "has"


PREDICATES: dict[str, type[Predicate]] = {
    cls.op: cls for cls in (Eq, Neq, Gt, Lt, Gte, Lte, Is, Has)
}


def _operand_problem(
    op: str, target_col: str | None, source_col: str | None, const: Const | None
) -> str | None:
    given = [x for x in (target_col, source_col, const) if x is not None]
    if len(given) != 2:
        return f"'{op}' compares exactly two of target-col, source-col and const; got {len(given)}"
    for name in (target_col, source_col):
        if name is not None and (not isinstance(name, str) or not name):
            return f"'{op}' needs column names as non-empty strings, got {name!r}"
    if op == "has" and const is not None and const.type != "string":
        return f"'has' looks for a substring; its const must be of type string, not {const.type}"
    if const is not None and const.v is None and op not in ("is", "eq", "neq"):
        return f"'{op}' against NULL never matches; use 'is' with v null to test for NULL"
    return None


@dataclass(frozen=True)
class _Junction:
    op: ClassVar[str]
    args: Sequence[Condition]

    def __post_init__(self) -> None:
        object.__setattr__(self, "args", tuple(self.args))
        if not self.args:
            raise ActionValidationError(f"'{self.op}' needs at least one argument", field="args")
        for arg in self.args:
            if not isinstance(arg, Predicate | _Junction):
                raise ActionValidationError(
                    f"'{self.op}' takes predicates, And or Or, not {arg!r}", field="args"
                )

    def to_json(self) -> dict[str, Any]:
        return {"op": self.op, "args": [arg.to_json() for arg in self.args]}


class And(_Junction):
    op = "and"


class Or(_Junction):
    op = "or"


@dataclass(frozen=True)
class Always:
    """The top-level constant condition: True matches every row, False none."""

    value: bool = True

    def to_json(self) -> dict[str, Any]:
        return {"const": Const.boolean(self.value).to_json()}


Condition: TypeAlias = Predicate | And | Or | Always


def condition_from_json(obj: object, field: str = "condition", *, top: bool = True) -> Condition:
    """Parse a condition; `Always` (a bare boolean const) is accepted only at the top."""
    body = _object(obj, field)
    if "op" not in body:
        if top and "const" in body:
            _only_keys(body, {"const"}, field)
            const = Const.from_json(body["const"], f"{field}.const")
            if const.type != "boolean" or const.v is None:
                raise _Invalid(
                    f"{field}.const", "a condition without op must be boolean true/false"
                )
            return Always(bool(const.v))
        raise _Invalid(
            f"{field}.op", "missing; use one of eq, neq, gt, lt, gte, lte, is, has, and, or"
        )
    op = body["op"]
    if op in ("and", "or"):
        _only_keys(body, {"op", "args"}, field)
        args = _required(body, "args", field)
        if not isinstance(args, list) or not args:
            raise _Invalid(f"{field}.args", f"'{op}' needs a non-empty list of conditions")
        parsed = [
            condition_from_json(arg, f"{field}.args[{i}]", top=False) for i, arg in enumerate(args)
        ]
        return And(parsed) if op == "and" else Or(parsed)
    if op not in PREDICATES:
        raise _Invalid(
            f"{field}.op", f"unknown op {op!r}; use one of {', '.join(PREDICATES)}, and, or"
        )
    _only_keys(body, {"op", "target-col", "source-col", "const"}, field)
    const = Const.from_json(body["const"], f"{field}.const") if "const" in body else None
    target, source = body.get("target-col"), body.get("source-col")
    problem = _operand_problem(op, target, source, const)
    if problem:
        raise _Invalid(field, problem)
    return PREDICATES[op](target, source_col=source, const=const)


def predicates(condition: Condition) -> list[Predicate]:
    """Every predicate in a condition tree, left to right."""
    if isinstance(condition, Predicate):
        return [condition]
    if isinstance(condition, Always):
        return []
    return [p for arg in condition.args for p in predicates(arg)]


# --- actions -----------------------------------------------------------------------------


@dataclass(frozen=True, kw_only=True)
class Action:
    """Fields every action has; the `*-schema` fields default to the single schema with tables."""

    name: ClassVar[str]
    target_table: str
    target_schema: str | None = None
    source_schema: str | None = None

    def __post_init__(self) -> None:
        for f in dataclasses.fields(self):
            value = getattr(self, f.name)
            if (
                f.name != "condition"
                and value is not None
                and (not isinstance(value, str) or not value)
            ):
                raise ActionValidationError(
                    f"must be a non-empty string, got {value!r}", field=_json_key(f.name)
                )
        condition = getattr(self, "condition", None)
        if condition is not None and not isinstance(condition, Predicate | _Junction | Always):
            raise ActionValidationError(
                f"must be a predicate, And, Or or Always, got {condition!r}", field="condition"
            )
        if self.source_schema is not None and getattr(self, "source_table", None) is None:
            raise ActionValidationError(
                "is set but there is no source-table; drop it or name the source table",
                field="source-schema",
            )

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"action": self.name}
        for f in dataclasses.fields(self):
            value = getattr(self, f.name)
            if value is not None:
                out[_json_key(f.name)] = value.to_json() if f.name == "condition" else value
        return out


@dataclass(frozen=True, kw_only=True)
class _FromSource(Action):
    source_table: str


@dataclass(frozen=True, kw_only=True)
class _Matching(_FromSource):
    condition: Condition


class Insert(_FromSource):
    """Append every row of the source table; columns are matched by name."""

    name = "insert"


class Replace(_FromSource):
    """Delete every target row, then insert the source; both must have the same columns."""

    name = "replace"


class Update(_Matching):
    """Set the target rows matching `condition` from the matching source row."""

    name = "update"


class Upsert(_Matching):
    """Update the target rows that match `condition`, insert the source rows that match none."""

    name = "upsert"


@dataclass(frozen=True, kw_only=True)
class Delete(Action):
    """Delete target rows matching `condition` (with a source: matching any source row)."""

    name = "delete"
    condition: Condition
    source_table: str | None = None


ACTIONS: dict[str, type[Action]] = {
    cls.name: cls for cls in (Insert, Replace, Update, Upsert, Delete)
}


def _json_key(field_name: str) -> str:
    return field_name.replace("_", "-")


def action_from_json(obj: object, index: int) -> Action:
    """Parse one action; errors name `index` and the field at fault."""
    try:
        return _action_from_json(obj)
    except _Invalid as err:
        raise ActionValidationError(err.problem, index=index, field=err.field) from None
    except ActionValidationError as err:
        raise ActionValidationError(err.problem, index=index, field=err.field) from None


def _action_from_json(obj: object) -> Action:
    body = _object(obj, "")
    kind = _required(body, "action", "")
    if kind not in ACTIONS:
        raise _Invalid("action", f"unknown action {kind!r}; use one of {', '.join(ACTIONS)}")
    cls = ACTIONS[kind]
    fields = {_json_key(f.name): f for f in dataclasses.fields(cls)}
    _only_keys(body, {"action", *fields}, "")
    values: dict[str, Any] = {}
    for key, f in fields.items():
        if key not in body:
            if f.default is dataclasses.MISSING:
                raise _Invalid(key, f"missing; '{kind}' requires it")
            continue
        if key == "condition":
            values[f.name] = condition_from_json(body[key])
        else:
            values[f.name] = _string(body[key], key)
    return cls(**values)


def parse_batch(obj: object) -> list[Action]:
    """Parse `{"actions": [...]}` (or the bare list) into actions, checking every field."""
    if isinstance(obj, Mapping):
        extra = set(obj) - {"actions"}
        if extra:
            raise ActionValidationError(
                f"unknown top-level field(s) {sorted(extra)}; only 'actions'"
            )
        if "actions" not in obj:
            raise ActionValidationError("missing", field="actions")
        obj = obj["actions"]
    if not isinstance(obj, list) or not obj:
        raise ActionValidationError("must be a non-empty list of actions", field="actions")
    return [action_from_json(item, i) for i, item in enumerate(obj)]


def batch_to_json(actions: Sequence[Action]) -> dict[str, list[dict[str, Any]]]:
    """The request body for a batch: `{"actions": [...]}`."""
    if not actions:
        raise ActionValidationError("must be a non-empty list of actions", field="actions")
    return {"actions": [action.to_json() for action in actions]}


# --- parsing helpers ---------------------------------------------------------------------


def _object(obj: object, field: str) -> Mapping[str, Any]:
    if not isinstance(obj, Mapping):
        raise _Invalid(field or "action", f"must be a JSON object, got {type(obj).__name__}")
    return obj


def _only_keys(body: Mapping[str, Any], allowed: set[str], field: str) -> None:
    extra = sorted(set(body) - allowed)
    if extra:
        where = f"{field}.{extra[0]}" if field else extra[0]
        raise _Invalid(where, f"unknown field; allowed here: {', '.join(sorted(allowed))}")


def _required(body: Mapping[str, Any], key: str, field: str) -> Any:
    if key not in body:
        raise _Invalid(f"{field}.{key}" if field else key, "missing")
    return body[key]


def _string(value: object, field: str) -> str:
    if not isinstance(value, str) or not value:
        raise _Invalid(field, f"must be a non-empty string, got {value!r}")
    return value


__all__ = [
    "ACTIONS",
    "CONST_TYPES",
    "PREDICATES",
    "Action",
    "Always",
    "And",
    "Condition",
    "Const",
    "Delete",
    "Eq",
    "Gt",
    "Gte",
    "Has",
    "Insert",
    "Is",
    "Lt",
    "Lte",
    "Neq",
    "Or",
    "Predicate",
    "Replace",
    "Update",
    "Upsert",
    "action_from_json",
    "batch_to_json",
    "condition_from_json",
    "parse_batch",
    "predicates",
]
