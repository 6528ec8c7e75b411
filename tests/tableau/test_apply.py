"""Every action and condition op applied to real `.hyper` files, with NULLs and non-ASCII names.

Each batch travels as it would to a server: the client's JSON (`batch_to_json`), read by
the emulator's own parser (`hyper_assets.emulator.batch`), applied by the emulator.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from tableauhyperapi import (
    NOT_NULLABLE,
    Connection,
    CreateMode,
    SqlType,
    TableDefinition,
    TableName,
)

from hyper_assets._engine.process import HyperSettings, SharedHyper
from hyper_assets.emulator.apply import apply_batch
from hyper_assets.emulator.batch import parse_batch
from hyper_assets.emulator.errors import ActionBatchError
from hyper_assets.tableau.actions import (
    Action,
    Always,
    And,
    Condition,
    Const,
    Delete,
    Eq,
    Gt,
    Gte,
    Has,
    Insert,
    Is,
    Lt,
    Lte,
    Neq,
    Or,
    Replace,
    Update,
    Upsert,
    batch_to_json,
)

Column = TableDefinition.Column
KUNDEN = ("Extract", "Kunden_ü")
KEY = "Extract.Kunden_ü"
NAME = "Näme"

CUSTOMER_COLUMNS = [
    Column("id", SqlType.int(), NOT_NULLABLE),
    Column(NAME, SqlType.text()),
    Column("score", SqlType.double()),
    Column("active", SqlType.bool()),
    Column("seen", SqlType.timestamp()),
    Column("seen_tz", SqlType.timestamp_tz()),
]
CUSTOMERS = [
    (1, "Ada", 1.5, True, datetime(2024, 1, 1, 10), datetime(2024, 1, 1, 10, tzinfo=UTC)),
    (2, None, None, None, None, None),
    (3, "Bradley", 3.0, False, datetime(2024, 3, 1), datetime(2024, 3, 1, tzinfo=UTC)),
    (4, "Zoë", 4.5, True, datetime(2024, 6, 1, 12), datetime(2024, 6, 1, 12, tzinfo=UTC)),
]
ORDER_COLUMNS = [Column("order_id", SqlType.int()), Column("id", SqlType.int())]
ORDERS = [(10, 1), (11, 4)]


@pytest.fixture
def target(tmp_path: Path, hyper_files: Any) -> Path:
    return hyper_files.create(
        tmp_path / "target.hyper",
        {KUNDEN: (CUSTOMER_COLUMNS, CUSTOMERS), ("Extract", "orders"): (ORDER_COLUMNS, ORDERS)},
    )


def payload(tmp_path: Path, hyper_files: Any, tables: dict[str, tuple[list, list]]) -> Path:
    """A payload with its tables in the `public` schema."""
    specs = {("public", name): spec for name, spec in tables.items()}
    return hyper_files.create(tmp_path / "payload.hyper", specs)


def ids(hyper_files: Any, path: Path) -> list[int]:
    return sorted(row[0] for row in hyper_files.read(path)[KEY])


def run(hyper: Any, target: Path, source: Path | None, *actions: Action) -> list[int]:
    sent = json.loads(json.dumps(batch_to_json(actions)))
    return apply_batch(hyper.endpoint, target, source, parse_batch(sent))


def at(moment: str) -> Const:
    return Const.datetime(moment)


CONST_CASES: list[tuple[Condition, list[int]]] = [
    (Eq(NAME, const=Const.string("Ada")), [2, 3, 4]),
    (Neq(NAME, const=Const.string("Ada")), [1, 2]),
    (Gt("score", const=Const.double(3.0)), [1, 2, 3]),
    (Lt("score", const=Const.double(3.0)), [2, 3, 4]),
    (Gte("score", const=Const.double(3)), [1, 2]),
    (Lte("score", const=Const.double(3.0)), [2, 4]),
    (Is(NAME, const=Const.string(None)), [1, 3, 4]),
    (Is(NAME, const=Const.string("Ada")), [2, 3, 4]),
    (Has(NAME, const=Const.string("ad")), [1, 2, 4]),
    (Has(NAME, const=Const.string("%")), [1, 2, 3, 4]),
    (Eq(NAME, const=Const.string(None)), [1, 2, 3, 4]),
    (Eq("id", const=Const.integer(2)), [1, 3, 4]),
    (Eq("active", const=Const.boolean(True)), [2, 3]),
    (Lt("seen", const=at("2024-03-01T01:00:00+01:00")), [2, 3, 4]),
    (Lte("seen", const=at("2024-03-01T01:00:00+0100")), [2, 4]),
    (Gte("seen_tz", const=at("2024-03-01T00:00:00Z")), [1, 2]),
    (
        Or(
            [
                And(
                    [Eq("active", const=Const.boolean("TRUE")), Gt("score", const=Const.integer(2))]
                ),
                Eq("id", const=Const.integer(2)),
            ]
        ),
        [1, 3],
    ),
    (Always(True), []),
    (Always(False), [1, 2, 3, 4]),
]


@pytest.mark.parametrize(("condition", "remaining"), CONST_CASES, ids=lambda c: repr(c)[:60])
def test_delete_with_constant_conditions(
    hyper: Any, hyper_files: Any, target: Path, condition: Condition, remaining: list[int]
) -> None:
    run(hyper, target, None, Delete(target_table=KUNDEN[1], condition=condition))
    assert ids(hyper_files, target) == remaining
    assert hyper_files.read(target)["Extract.orders"] == sorted(ORDERS, key=repr)


@pytest.mark.parametrize(
    ("condition", "remaining"),
    [
        (Eq(NAME, source_col="name_key"), [1, 2, 4]),  # eq never matches the NULL
        (Is(NAME, source_col="name_key"), [1, 4]),  # is matches NULL with NULL
        (Neq(NAME, source_col="name_key"), [2, 3]),
        (Has(NAME, source_col="name_key"), [1, 2, 4]),
    ],
)
def test_delete_with_source_compares_columns(
    hyper: Any,
    hyper_files: Any,
    tmp_path: Path,
    target: Path,
    condition: Condition,
    remaining: list[int],
) -> None:
    source = payload(
        tmp_path,
        hyper_files,
        {"keys": ([Column("name_key", SqlType.text())], [(None,), ("Bradley",)])},
    )
    before = hyper_files.read(source)
    run(
        hyper,
        target,
        source,
        Delete(target_table=KUNDEN[1], source_table="keys", condition=condition),
    )
    assert ids(hyper_files, target) == remaining
    assert hyper_files.read(source) == before  # the payload is attached read-only


def test_delete_refuses_source_columns_the_condition_does_not_use(
    hyper: Any, hyper_files: Any, tmp_path: Path, target: Path
) -> None:
    cols = [Column("id", SqlType.int()), Column("extra", SqlType.text())]
    source = payload(tmp_path, hyper_files, {"gone": (cols, [(1, "x")])})
    with pytest.raises(ActionBatchError, match=r"action 0 \(delete\).*extra.*not used"):
        run(
            hyper,
            target,
            source,
            Delete(
                target_table=KUNDEN[1], source_table="gone", condition=Eq("id", source_col="id")
            ),
        )
    assert ids(hyper_files, target) == [1, 2, 3, 4]


def test_insert_matches_columns_by_name_and_fills_missing_with_null(
    hyper: Any, hyper_files: Any, tmp_path: Path, target: Path
) -> None:
    cols = [
        Column("score", SqlType.double()),
        Column("id", SqlType.int()),
        Column(NAME, SqlType.text()),
    ]
    source = payload(tmp_path, hyper_files, {"neu": (cols, [(9.5, 5, "Émile"), (None, 6, None)])})
    assert run(hyper, target, source, Insert(source_table="neu", target_table=KUNDEN[1])) == [2]
    rows = hyper_files.read(target)[KEY]
    assert (5, "Émile", 9.5, None, None, None) in rows
    assert (6, None, None, None, None, None) in rows
    assert len(rows) == 6


@pytest.mark.parametrize(
    ("cols", "message"),
    [
        ([Column("id", SqlType.int()), Column("Name", SqlType.text())], "Name.*match no column"),
        ([Column(NAME, SqlType.text())], "NOT NULL column.*id"),
    ],
)
def test_insert_refuses_columns_that_do_not_fit(
    hyper: Any, hyper_files: Any, tmp_path: Path, target: Path, cols: list, message: str
) -> None:
    source = payload(tmp_path, hyper_files, {"neu": (cols, [])})
    with pytest.raises(ActionBatchError, match=message):
        run(hyper, target, source, Insert(source_table="neu", target_table=KUNDEN[1]))


def test_update_sets_matched_rows_and_eq_skips_nulls(
    hyper: Any, hyper_files: Any, tmp_path: Path, target: Path
) -> None:
    cols = [
        Column("key", SqlType.int()),
        Column(NAME, SqlType.text()),
        Column("score", SqlType.double()),
    ]
    source = payload(
        tmp_path,
        hyper_files,
        {"changed": (cols, [(1, "Ada Lovelace", 10.0), (99, "nobody", 0.0), (None, "x", 1.0)])},
    )
    counts = run(
        hyper,
        target,
        source,
        Update(
            source_table="changed", target_table=KUNDEN[1], condition=Eq("id", source_col="key")
        ),
    )
    assert counts == [1]
    rows = {row[0]: row for row in hyper_files.read(target)[KEY]}
    assert rows[1][:4] == (1, "Ada Lovelace", 10.0, True)
    assert rows[2] == CUSTOMERS[1] and rows[3] == CUSTOMERS[2] and 99 not in rows


def test_update_with_is_matches_null_keys(
    hyper: Any, hyper_files: Any, tmp_path: Path, target: Path
) -> None:
    cols = [Column(NAME, SqlType.text()), Column("score", SqlType.double())]
    source = payload(tmp_path, hyper_files, {"fix": (cols, [(None, 7.0)])})
    eq = Update(source_table="fix", target_table=KUNDEN[1], condition=Eq(NAME, source_col=NAME))
    assert run(hyper, target, source, eq) == [0]
    isnull = Update(source_table="fix", target_table=KUNDEN[1], condition=Is(NAME, source_col=NAME))
    assert run(hyper, target, source, isnull) == [1]
    assert {r[0]: r[2] for r in hyper_files.read(target)[KEY]} == {1: 1.5, 2: 7.0, 3: 3.0, 4: 4.5}


def test_upsert_updates_matches_and_inserts_the_rest(
    hyper: Any, hyper_files: Any, tmp_path: Path, target: Path
) -> None:
    cols = [
        Column("id", SqlType.int()),
        Column(NAME, SqlType.text()),
        Column("score", SqlType.double()),
    ]
    source = payload(tmp_path, hyper_files, {"up": (cols, [(1, "A2", 2.0), (5, "Neu", 5.0)])})
    run(
        hyper,
        target,
        source,
        Upsert(
            source_table="up",
            source_schema="public",
            target_table=KUNDEN[1],
            target_schema="Extract",
            condition=Eq("id", source_col="id"),
        ),
    )
    rows = {row[0]: row for row in hyper_files.read(target)[KEY]}
    assert sorted(rows) == [1, 2, 3, 4, 5]
    assert rows[1][:4] == (1, "A2", 2.0, True)
    assert rows[5] == (5, "Neu", 5.0, None, None, None)


def test_replace_swaps_rows_when_columns_match_in_any_order(
    hyper: Any, hyper_files: Any, tmp_path: Path, target: Path
) -> None:
    cols = [Column("id", SqlType.int(), NOT_NULLABLE), Column("order_id", SqlType.int())]
    source = payload(tmp_path, hyper_files, {"orders_new": (cols, [(7, 70)])})
    run(hyper, target, source, Replace(source_table="orders_new", target_table="orders"))
    assert hyper_files.read(target)["Extract.orders"] == [(70, 7)]


def test_replace_refuses_different_types(
    hyper: Any, hyper_files: Any, tmp_path: Path, target: Path
) -> None:
    cols = [Column("id", SqlType.big_int()), Column("order_id", SqlType.int())]
    source = payload(tmp_path, hyper_files, {"orders_new": (cols, [(7, 70)])})
    with pytest.raises(ActionBatchError, match=r"action 0 \(replace\).*id: target INT, source BIG"):
        run(hyper, target, source, Replace(source_table="orders_new", target_table="orders"))


def test_a_failing_action_in_the_middle_leaves_every_table_unchanged(
    hyper: Any, hyper_files: Any, tmp_path: Path, target: Path
) -> None:
    cols = [Column("id", SqlType.int()), Column(NAME, SqlType.text())]
    source = payload(tmp_path, hyper_files, {"neu": (cols, [(5, "ok"), (None, "breaks NOT NULL")])})
    before = hyper_files.read(target)
    batch = [
        Delete(target_table="orders", condition=Always()),
        Insert(source_table="neu", target_table=KUNDEN[1]),  # fails while running
        Delete(target_table=KUNDEN[1], condition=Always()),
    ]
    with pytest.raises(ActionBatchError) as caught:
        run(hyper, target, source, *batch)
    assert caught.value.index == 1
    assert hyper_files.read(target) == before


def test_a_missing_table_is_refused_before_anything_runs(
    hyper: Any, hyper_files: Any, target: Path
) -> None:
    before = hyper_files.read(target)
    batch = [
        Delete(target_table="orders", condition=Always()),
        Delete(target_table="nope", condition=Always()),
    ]
    with pytest.raises(ActionBatchError, match=r'action 1 \(delete\).*"Extract"."nope" does not'):
        run(hyper, target, None, *batch)
    assert hyper_files.read(target) == before


def test_schema_defaults_to_the_single_schema_holding_tables(
    hyper: Any, hyper_files: Any, tmp_path: Path
) -> None:
    two = hyper_files.create(
        tmp_path / "two.hyper",
        {("a", "t"): (ORDER_COLUMNS, ORDERS), ("b", "t"): (ORDER_COLUMNS, ORDERS)},
    )
    with pytest.raises(ActionBatchError, match=r"2 schemas.*set target-schema"):
        run(hyper, two, None, Delete(target_table="t", condition=Always()))
    run(hyper, two, None, Delete(target_table="t", target_schema="b", condition=Always()))
    assert hyper_files.read(two) == {"a.t": sorted(ORDERS, key=repr), "b.t": []}


def test_source_columns_need_a_source_table(hyper: Any, target: Path) -> None:
    with pytest.raises(ActionBatchError, match="source-col 'id' needs a source-table"):
        run(hyper, target, None, Delete(target_table="orders", condition=Eq("id", source_col="id")))
    with pytest.raises(ActionBatchError, match="needs a payload"):
        run(hyper, target, None, Insert(source_table="x", target_table="orders"))


STOCK = TableName("Extract", "stock")


@pytest.fixture
def own_hyper(tmp_path: Path) -> Iterator[SharedHyper]:
    """A hyperd of this test's own: a crash must not take the session's down."""
    shared = SharedHyper(HyperSettings(log_dir=str(tmp_path / "logs")))
    yield shared
    shared.close()


def stock_target(hyper: SharedHyper, path: Path) -> Path:
    """A table with a two-column ASSUMED PRIMARY KEY, the shape that crashed hyperd."""
    with Connection(hyper.endpoint, path, CreateMode.CREATE_AND_REPLACE) as connection:
        connection.execute_command('CREATE SCHEMA "Extract"')
        connection.execute_command(
            f'CREATE TABLE {STOCK} ("k1" BIGINT NOT NULL, "k2" TEXT NOT NULL, "v" BIGINT, '
            'ASSUMED PRIMARY KEY ("k1", "k2"))'
        )
        connection.execute_command(
            f"INSERT INTO {STOCK} VALUES (1, 'a', 1), (1, 'b', 2), (2, 'a', 3)"
        )
    return path


def test_upsert_on_a_two_column_key_never_sets_the_key(
    own_hyper: SharedHyper, hyper_files: Any, tmp_path: Path
) -> None:
    target = stock_target(own_hyper, tmp_path / "stock.hyper")
    cols = [
        Column("k1", SqlType.big_int()),
        Column("k2", SqlType.text()),
        Column("v", SqlType.big_int()),
    ]
    source = payload(tmp_path, hyper_files, {"up": (cols, [(1, "b", 20), (3, "c", 30)])})
    by_key = And([Eq("k1", source_col="k1"), Eq("k2", source_col="k2")])
    upsert = Upsert(source_table="up", target_table="stock", condition=by_key)
    assert run(own_hyper, target, source, upsert) == [2]
    assert hyper_files.read(target)["Extract.stock"] == [
        (1, "a", 1),
        (1, "b", 20),
        (2, "a", 3),
        (3, "c", 30),
    ]
    keys_only = payload(tmp_path, hyper_files, {"keys": (cols[:2], [(2, "a")])})
    update = Update(source_table="keys", target_table="stock", condition=by_key)
    assert run(own_hyper, target, keys_only, update) == [0]  # nothing to set: no statement


def test_update_that_would_change_a_composite_key_is_refused(
    own_hyper: SharedHyper, hyper_files: Any, tmp_path: Path
) -> None:
    target = stock_target(own_hyper, tmp_path / "stock.hyper")
    cols = [Column("k2", SqlType.text()), Column("v", SqlType.big_int())]
    source = payload(tmp_path, hyper_files, {"rekey": (cols, [("z", 1)])})
    rekey = Update(source_table="rekey", target_table="stock", condition=Eq("v", source_col="v"))
    with pytest.raises(ActionBatchError, match=r"would set k2 of the primary key \(k1, k2\)"):
        run(own_hyper, target, source, rekey)
    assert len(hyper_files.read(target)["Extract.stock"]) == 3
