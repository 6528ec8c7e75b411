"""The actions each net change of a table is sent as."""

from __future__ import annotations

from tableauhyperapi import TableName

from hyper_assets._rows.outbox import Change
from hyper_assets.tableau._publish.changes import Step, net_steps
from hyper_assets.tableau._publish.payload import step_actions
from hyper_assets.tableau.actions import And, Delete, Eq, Insert, Replace


def test_an_upsert_is_sent_as_delete_by_key_then_insert() -> None:
    """As the local write does it; an `upsert` would have the server SET the key columns."""
    table = TableName("Extract", "stock")
    changes = [Change(seq, "upsert", table, key=("id", "site")) for seq in (1, 2)]
    (step,) = net_steps(changes, {table: {}})
    assert step == Step("upsert", table, tuple(changes), key=("id", "site"))
    by_key = And([Eq("id", source_col="id"), Eq("site", source_col="site")])
    target = {"target_schema": "Extract", "target_table": "stock", "source_schema": "payload"}
    for first in (True, False):
        assert step_actions(step, "0001_stock", first, [table]) == [
            Delete(**target, source_table="0001_stock_keys", condition=by_key),
            Insert(**target, source_table="0001_stock"),
        ]
    assert step_actions(step, None, True, [table]) == []


def test_a_step_is_sent_to_each_copy_of_its_table_from_one_payload_table() -> None:
    """A dimension published twice, for two roles: one payload table, actions for each."""
    table = TableName("Extract", "airports")
    copies = [TableName("Extract", "airports (origin)"), TableName("Extract", "airports (dest)")]
    (step,) = net_steps([Change(1, "replace", table)], {table: {}})
    rows = {"source_schema": "payload", "source_table": "0000_airports"}
    assert step_actions(step, "0000_airports", True, copies) == [
        Replace(target_schema="Extract", target_table="airports (origin)", **rows),
        Replace(target_schema="Extract", target_table="airports (dest)", **rows),
    ]
