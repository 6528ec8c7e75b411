"""The action model serialises to the documented JSON and rejects malformed input clearly."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta, timezone
from typing import Any

import pytest

from hyper_assets.errors import ActionValidationError
from hyper_assets.tableau.actions import (
    Always,
    And,
    Const,
    Delete,
    Eq,
    Has,
    Insert,
    Is,
    Lt,
    Or,
    Replace,
    Update,
    Upsert,
    batch_to_json,
    condition_from_json,
    parse_batch,
)

DOCUMENTED = {
    "actions": [
        {
            "action": "insert",
            "source-schema": "extract",
            "source-table": "new_data",
            "target-schema": "Extract",
            "target-table": "Extract",
        },
        {
            "action": "update",
            "target-table": "my_data",
            "source-table": "uploaded_table",
            "condition": {"op": "eq", "target-col": "row_id", "source-col": "update_row_id"},
        },
        {
            "action": "delete",
            "target-table": "my_extract_table",
            "condition": {
                "op": "lt",
                "target-col": "col1",
                "const": {"type": "datetime", "v": "2018-12-06T19:21:12.12Z"},
            },
        },
        {
            "action": "delete",
            "target-table": "t",
            "source-table": "keys",
            "condition": {
                "op": "and",
                "args": [
                    {"op": "eq", "source-col": "k1", "target-col": "k1"},
                    {"op": "is", "target-col": "k2", "const": {"type": "string", "v": None}},
                ],
            },
        },
        {"action": "replace", "source-table": "campaigns", "target-table": "marketing"},
        {
            "action": "upsert",
            "target-table": "my_data",
            "source-table": "uploaded_table",
            "condition": {"op": "gt", "target-col": "row_id", "source-col": "update_row_id"},
        },
        {
            "action": "delete",
            "target-table": "users",
            "condition": {"const": {"type": "boolean", "v": True}},
        },
    ]
}


def test_documented_examples_parse_to_typed_actions_and_back() -> None:
    batch = parse_batch(json.loads(json.dumps(DOCUMENTED)))
    assert [type(a) for a in batch] == [Insert, Update, Delete, Delete, Replace, Upsert, Delete]
    assert batch[2].condition == Lt(
        "col1", const=Const.datetime(datetime(2018, 12, 6, 19, 21, 12, 120000, tzinfo=UTC))
    )
    assert batch[6].condition == Always(True)
    again = parse_batch(json.loads(json.dumps(batch_to_json(batch))))
    assert again == batch


def test_python_construction_gives_the_documented_field_names() -> None:
    action = Update(
        source_table="changed",
        target_table="extract",
        target_schema="Extract",
        condition=And([Eq("k1", source_col="k1"), Or([Has("name", const=Const.string("ad"))])]),
    )
    assert action.to_json() == {
        "action": "update",
        "target-table": "extract",
        "target-schema": "Extract",
        "source-table": "changed",
        "condition": {
            "op": "and",
            "args": [
                {"op": "eq", "target-col": "k1", "source-col": "k1"},
                {
                    "op": "or",
                    "args": [
                        {"op": "has", "target-col": "name", "const": {"type": "string", "v": "ad"}}
                    ],
                },
            ],
        },
    }


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("2007-12-03T10:15:30Z", datetime(2007, 12, 3, 10, 15, 30, tzinfo=UTC)),
        ("2007-12-03T10:15:30+0100", datetime(2007, 12, 3, 9, 15, 30, tzinfo=UTC)),
        ("2007-12-03T10:15:30+01:00", datetime(2007, 12, 3, 9, 15, 30, tzinfo=UTC)),
    ],
)
def test_datetime_constants_accept_iso_offsets(text: str, expected: datetime) -> None:
    assert Const.datetime(text).v == expected
    assert Const.datetime(text).v.utcoffset() in (timedelta(0), timedelta(hours=1))


def test_constants_serialise_plainly() -> None:
    assert Const.boolean("TRUE").to_json() == {"type": "boolean", "v": True}
    tz = timezone(timedelta(hours=1))
    assert (
        Const.datetime(datetime(2020, 1, 1, tzinfo=tz)).to_json()["v"]
        == "2020-01-01T00:00:00+01:00"
    )
    assert Const.datetime(datetime(2020, 1, 1, tzinfo=UTC)).to_json()["v"] == "2020-01-01T00:00:00Z"


def _delete(condition: object) -> list[object]:
    return [
        {"action": "insert", "source-table": "a", "target-table": "b"},
        {"action": "delete", "target-table": "t", "condition": condition},
    ]


@pytest.mark.parametrize(
    ("batch", "field", "message"),
    [
        (
            _delete({"op": "like", "target-col": "a", "const": {"type": "string", "v": "x"}}),
            "condition.op",
            "unknown op",
        ),
        (_delete({"op": "eq", "target-col": "a"}), "condition", "exactly two"),
        (
            _delete({"op": "eq", "target-col": "a", "const": {"type": "integer", "v": "3"}}),
            "condition.const.v",
            "not an integer",
        ),
        (
            _delete({"op": "eq", "target-col": "a", "const": {"type": "money", "v": 3}}),
            "condition.const.type",
            "unknown const type",
        ),
        (
            _delete(
                {
                    "op": "lt",
                    "target-col": "a",
                    "const": {"type": "datetime", "v": "2020-06-00T00:00:00.00Z"},
                }
            ),
            "condition.const.v",
            "ISO-8601",
        ),
        (
            _delete(
                {
                    "op": "lt",
                    "target-col": "a",
                    "const": {"type": "datetime", "v": "2020-06-01T00:00:00"},
                }
            ),
            "condition.const.v",
            "no time zone",
        ),
        (
            _delete({"op": "has", "target-col": "a", "const": {"type": "integer", "v": 1}}),
            "condition",
            "type string",
        ),
        (
            _delete({"op": "and", "args": [{"op": "eq", "target-col": "a"}]}),
            "condition.args[0]",
            "exactly two",
        ),
        (_delete({"op": "and", "args": []}), "condition.args", "non-empty"),
        ([{"action": "insert", "target-table": "b"}], "source-table", "missing"),
        (
            [{"action": "insert", "target_table": "b", "source-table": "a"}],
            "target_table",
            "unknown field",
        ),
        ([{"action": "merge", "target-table": "b"}], "action", "unknown action"),
        ([{"action": "update", "target-table": "b", "source-table": "a"}], "condition", "missing"),
    ],
)
def test_malformed_input_names_the_action_index_and_field(
    batch: list, field: str, message: str
) -> None:
    with pytest.raises(ActionValidationError) as caught:
        parse_batch({"actions": batch})
    err = caught.value
    assert err.index == len(batch) - 1
    assert err.field == field
    assert message in str(err)
    assert f"action {err.index}" in str(err)


def test_empty_batches_and_bad_python_values_are_refused() -> None:
    with pytest.raises(ActionValidationError, match="non-empty"):
        parse_batch({"actions": []})
    with pytest.raises(ActionValidationError, match="exactly two"):
        Is("a")
    with pytest.raises(ActionValidationError, match="condition"):
        Delete(target_table="t", condition="id = 1")  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("parse", "field"),
    [
        (lambda: Const.from_json({"type": "money", "v": 1}), "const.type"),
        (lambda: Const.from_json({"type": "integer", "v": "3"}), "const.v"),
        (lambda: condition_from_json({"op": "like", "target-col": "a"}), "condition.op"),
        (lambda: condition_from_json({"const": {"type": "integer", "v": 1}}), "condition.const"),
    ],
)
def test_the_public_parsers_of_parts_raise_the_public_error(parse: Any, field: str) -> None:
    with pytest.raises(ActionValidationError) as caught:
        parse()
    assert caught.value.field == field
    assert caught.value.index is None
