"""Typed action batches for Tableau's "Update Data in Hyper Data Source" endpoint.

A public module (like `hyper_assets.emulator`): build the `actions` of a client's
`update_data` from these.

Each action and condition (from `hyper_assets.tableau.conditions`, re-exported here) is a
frozen dataclass that serialises to exactly the JSON the REST API documents
(`target-table`, `source-col`, `const`, `args`, ...) and parses back from it. Parsing
rejects malformed input with an `ActionValidationError` naming the action's index and the
field at fault, so a bad batch fails before it is sent.

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
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

from hyper_assets.errors import ActionValidationError
from hyper_assets.tableau.conditions import (
    CONST_TYPES,
    PREDICATES,
    Always,
    And,
    Condition,
    Const,
    Eq,
    Gt,
    Gte,
    Has,
    Is,
    Lt,
    Lte,
    Neq,
    Or,
    Predicate,
    condition_from_json,
    json_object,
    non_empty_string,
    only_keys,
    predicates,
    required,
)


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
        if condition is not None and not isinstance(condition, Predicate | And | Or | Always):
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
    except ActionValidationError as err:
        raise ActionValidationError(err.problem, index=index, field=err.field) from None


def _action_from_json(obj: object) -> Action:
    body = json_object(obj, "")
    kind = required(body, "action", "")
    if kind not in ACTIONS:
        raise ActionValidationError(
            f"unknown action {kind!r}; use one of {', '.join(ACTIONS)}", field="action"
        )
    cls = ACTIONS[kind]
    fields = {_json_key(f.name): f for f in dataclasses.fields(cls)}
    only_keys(body, {"action", *fields}, "")
    values: dict[str, Any] = {}
    for key, f in fields.items():
        if key not in body:
            if f.default is dataclasses.MISSING:
                raise ActionValidationError(f"missing; '{kind}' requires it", field=key)
            continue
        if key == "condition":
            values[f.name] = condition_from_json(body[key])
        else:
            values[f.name] = non_empty_string(body[key], key)
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
