"""Constants and conditions of an action batch, as the REST API's JSON writes them.

A condition is a predicate (`Eq`, `Lt`, ... comparing two of a target column, a source
column and a typed `Const`), an `And`/`Or` of conditions, or at the top the constant
`Always`. Each serialises to the documented JSON and parses back from it; a malformed one
is an `ActionValidationError` naming the field at fault. `hyper_assets.tableau.actions`
builds actions on them and re-exports every name.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import KW_ONLY, dataclass
from datetime import datetime
from typing import Any, ClassVar, Literal, TypeAlias

from hyper_assets.errors import ActionValidationError

ConstType: TypeAlias = Literal["boolean", "integer", "double", "string", "datetime"]
ConstValue: TypeAlias = bool | int | float | str | datetime | None
CONST_TYPES: tuple[ConstType, ...] = ("boolean", "integer", "double", "string", "datetime")


# --- constants ---------------------------------------------------------------------------


@dataclass(frozen=True)
class Const:
    """A typed constant: `{"type": "integer", "v": 3}`; `v` None is SQL NULL."""

    type: ConstType
    v: ConstValue

    def __post_init__(self) -> None:
        object.__setattr__(self, "v", _coerce_const(self.type, self.v, "v"))

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
        body = json_object(obj, field)
        only_keys(body, {"type", "v"}, field)
        kind = required(body, "type", field)
        if kind not in CONST_TYPES:
            raise ActionValidationError(
                f"unknown const type {kind!r}; use one of {CONST_TYPES}", field=f"{field}.type"
            )
        if "v" not in body:
            raise ActionValidationError(
                "missing; give the value (null for NULL)", field=f"{field}.v"
            )
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
        raise ActionValidationError(f"{v!r} is not a boolean; use true or false", field=field)
    if kind == "integer":
        if isinstance(v, int) and not isinstance(v, bool):
            return v
        raise ActionValidationError(f"{v!r} is not an integer", field=field)
    if kind == "double":
        if isinstance(v, int | float) and not isinstance(v, bool) and math.isfinite(v):
            return float(v)
        raise ActionValidationError(f"{v!r} is not a finite number", field=field)
    if kind == "string":
        if isinstance(v, str):
            return v
        raise ActionValidationError(f"{v!r} is not a string", field=field)
    return _coerce_datetime(v, field)


def _coerce_datetime(v: object, field: str) -> datetime:
    if isinstance(v, str):
        try:
            parsed = datetime.fromisoformat(v)
        except ValueError:
            raise ActionValidationError(
                f"{v!r} is not an ISO-8601 date-time such as 2007-12-03T10:15:30Z", field=field
            ) from None
        if "T" not in v.upper():
            raise ActionValidationError(f"{v!r} has no time; write e.g. {v}T00:00:00Z", field=field)
        v = parsed
    if not isinstance(v, datetime):
        raise ActionValidationError(f"{v!r} is not a date-time", field=field)
    if v.tzinfo is None:
        raise ActionValidationError(
            f"{_iso(v)} has no time zone; add Z or an offset like +01:00", field=field
        )
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
    body = json_object(obj, field)
    if "op" not in body:
        if top and "const" in body:
            only_keys(body, {"const"}, field)
            value = Const.from_json(body["const"], f"{field}.const")
            if value.type != "boolean" or value.v is None:
                raise ActionValidationError(
                    "a condition without op must be boolean true/false", field=f"{field}.const"
                )
            return Always(bool(value.v))
        raise ActionValidationError(
            "missing; use one of eq, neq, gt, lt, gte, lte, is, has, and, or", field=f"{field}.op"
        )
    op = body["op"]
    if op in ("and", "or"):
        only_keys(body, {"op", "args"}, field)
        args = required(body, "args", field)
        if not isinstance(args, list) or not args:
            raise ActionValidationError(
                f"'{op}' needs a non-empty list of conditions", field=f"{field}.args"
            )
        parsed = [
            condition_from_json(arg, f"{field}.args[{i}]", top=False) for i, arg in enumerate(args)
        ]
        return And(parsed) if op == "and" else Or(parsed)
    if op not in PREDICATES:
        raise ActionValidationError(
            f"unknown op {op!r}; use one of {', '.join(PREDICATES)}, and, or", field=f"{field}.op"
        )
    only_keys(body, {"op", "target-col", "source-col", "const"}, field)
    const = Const.from_json(body["const"], f"{field}.const") if "const" in body else None
    target, source = body.get("target-col"), body.get("source-col")
    problem = _operand_problem(op, target, source, const)
    if problem:
        raise ActionValidationError(problem, field=field)
    return PREDICATES[op](target, source_col=source, const=const)


def predicates(condition: Condition) -> list[Predicate]:
    """Every predicate in a condition tree, left to right."""
    if isinstance(condition, Predicate):
        return [condition]
    if isinstance(condition, Always):
        return []
    return [p for arg in condition.args for p in predicates(arg)]


# --- JSON field checks (actions.py parses with them too) ---------------------------------


def json_object(obj: object, field: str) -> Mapping[str, Any]:
    if not isinstance(obj, Mapping):
        raise ActionValidationError(
            f"must be a JSON object, got {type(obj).__name__}", field=field or "action"
        )
    return obj


def only_keys(body: Mapping[str, Any], allowed: set[str], field: str) -> None:
    extra = sorted(set(body) - allowed)
    if extra:
        where = f"{field}.{extra[0]}" if field else extra[0]
        raise ActionValidationError(
            f"unknown field; allowed here: {', '.join(sorted(allowed))}", field=where
        )


def required(body: Mapping[str, Any], key: str, field: str) -> Any:
    if key not in body:
        raise ActionValidationError("missing", field=f"{field}.{key}" if field else key)
    return body[key]


def non_empty_string(value: object, field: str) -> str:
    if not isinstance(value, str) or not value:
        raise ActionValidationError(f"must be a non-empty string, got {value!r}", field=field)
    return value
