"""Composite foreign keys (returns -> sales on item and ticket number): declared in metadata,
stored as one ASSUMED FOREIGN KEY of two columns, checked by `foreign_keys_resolve`, and
published to the emulator as one relationship."""

from pathlib import Path

import dagster as dg
import pyarrow as pa
import pytest
from helpers import query
from tableauhyperapi import TableName

from hyper_assets import (
    ConfigurationError,
    HyperIOManager,
    TableauServerResource,
    TokenSignIn,
    foreign_key_check,
    tableau_datasource_asset,
)
from hyper_assets._engine.tables import ForeignKey, parse_foreign_keys
from hyper_assets.emulator import Emulator

RETURNS_TO_SALES = {
    "columns": ["item", "ticket"],
    "references": "sales",
    "ref_columns": ["item", "ticket"],
}


@pytest.mark.parametrize(
    ("spec", "expected"),
    [
        (
            [RETURNS_TO_SALES],
            ForeignKey(("item", "ticket"), TableName("Extract", "sales"), ("item", "ticket")),
        ),
        (
            [{**RETURNS_TO_SALES, "references": ["Shop", "sales.2024"]}],
            ForeignKey(("item", "ticket"), TableName("Shop", "sales.2024"), ("item", "ticket")),
        ),
        (
            [{"columns": ["store"], "references": "Ref.stores", "ref_columns": ["id"]}],
            ForeignKey(("store",), TableName("Ref", "stores"), ("id",)),
        ),
        ({"store": "stores.id"}, ForeignKey(("store",), TableName("Extract", "stores"), ("id",))),
    ],
)
def test_the_list_form_declares_keys_of_any_width(spec, expected) -> None:
    assert parse_foreign_keys(spec, "Extract", "Extract.returns") == (expected,)


@pytest.mark.parametrize(
    "entry",
    [
        {**RETURNS_TO_SALES, "ref_columns": ["item"]},  # widths differ
        {"columns": ["item"], "references": "sales"},  # a field missing
        {**RETURNS_TO_SALES, "references": "a.b.c"},  # a column where a table goes
        {**RETURNS_TO_SALES, "columns": "item"},  # not a list
        "item -> sales",
    ],
)
def test_a_malformed_key_of_the_list_is_named_with_an_example(entry) -> None:
    with pytest.raises(
        ConfigurationError, match=r"foreign_keys of Extract\.returns holds .*e\.g\."
    ):
        parse_foreign_keys([entry], "Extract", "Extract.returns")


def test_a_composite_key_is_stored_checked_and_published(tmp_path: Path, hyper) -> None:
    database = tmp_path / "shop.hyper"

    @dg.asset(metadata={"primary_key": ["item", "ticket"]})
    def sales() -> pa.Table:
        return pa.table({"item": [1, 1, 2], "ticket": [10, 11, 10], "amount": [5.0, 6.0, 7.0]})

    @dg.asset(deps=[sales], metadata={"foreign_keys": [RETURNS_TO_SALES]})
    def returns() -> pa.Table:
        # (2, 11) was never sold: one orphan.
        return pa.table({"item": [1, 2, 2], "ticket": [11, 10, 11], "refund": [6.0, 7.0, 1.0]})

    check = foreign_key_check(returns)
    published = tableau_datasource_asset(
        datasource="Returns", project="Default", deps=[sales, returns], key="tableau_returns"
    )
    (tmp_path / "server").mkdir()
    with Emulator(tmp_path / "server", tokens={"ci": "secret"}, hyper=hyper) as emulator:
        resources = {
            "io_manager": HyperIOManager(
                database=str(database),
                staging_dir=str(tmp_path / "staging"),
            ),
            "tableau": TableauServerResource(
                server_url=emulator.url, sign_in=TokenSignIn(name="ci", secret="secret")
            ),
        }
        result = dg.materialize([sales, returns, check, published], resources=resources)
        assert result.success
        (evaluation,) = result.get_asset_check_evaluations()
        assert not evaluation.passed
        assert evaluation.metadata["orphan_rows"].value == 1
        orphans = evaluation.metadata["orphans"].value
        assert orphans["item, ticket -> Extract.sales.item, ticket"]["sample"] == [
            "(2, 11) (1 rows)"
        ]

        key_sql = (
            "SELECT cl.relname, CAST(con.conkey AS TEXT), ref.relname, CAST(con.confkey AS TEXT) "
            "FROM pg_catalog.pg_constraint con "
            "JOIN pg_catalog.pg_class cl ON cl.oid = con.conrelid "
            "JOIN pg_catalog.pg_class ref ON ref.oid = con.confrelid WHERE con.contype = 'f'"
        )
        copy = emulator.site_dir("") / "Returns.hyper"
        for path in (database, copy):  # the file, and the server's copy
            assert query(hyper, path, key_sql) == [["returns", "[1,2]", "sales", "[1,2]"]]
        assert query(hyper, copy, 'SELECT * FROM "Extract"."returns" ORDER BY 1, 2') == [
            [1, 11, 6.0],
            [2, 10, 7.0],
            [2, 11, 1.0],
        ]
