"""The rule Tableau applies to a published file's keys: one star per data source; and the
publish asset's preview of it is what its run does."""

from pathlib import Path

import dagster as dg
import pyarrow as pa
import pytest
from helpers import digest
from tableauhyperapi import TableName

from hyper_assets import HyperIOManager, TableauServerResource, TokenSignIn
from hyper_assets._engine.tables import ForeignKey, Keys
from hyper_assets.emulator import Emulator
from hyper_assets.errors import ConfigurationError, DataModelError, PublishError
from hyper_assets.tableau._dagster.assets import build_publish_op, tableau_datasource_asset
from hyper_assets.tableau._publish.model import data_model


def table(name: str) -> TableName:
    return TableName("Extract", name)


def fk(column: str, target: str, ref: str = "id") -> ForeignKey:
    return ForeignKey((column,), table(target), (ref,))


DIM = Keys(("id",))


def test_a_single_table_is_always_a_model() -> None:
    assert data_model({table("sales"): Keys()}, "S").tables == (table("sales"),)


def test_a_snowflake_has_its_fact_and_a_key_to_each_dimension() -> None:
    model = data_model(
        {
            table("planes"): Keys(("id",), (fk("maker", "makers"),)),
            table("flights"): Keys((), (fk("carrier", "airlines"), fk("plane", "planes"))),
            table("airlines"): DIM,
            table("makers"): DIM,
        },
        "Flights",
    )
    assert model.fact == table("flights")
    assert sorted(str(r) for r in model.relationships) == [
        "Extract.flights.carrier -> Extract.airlines.id",
        "Extract.flights.plane -> Extract.planes.id",
        "Extract.planes.maker -> Extract.makers.id",
    ]


def test_two_facts_sharing_a_dimension_are_refused_with_one_data_source_per_fact() -> None:
    keys = {
        table("flights"): Keys((), (fk("origin", "airports"),)),
        table("weather"): Keys((), (fk("origin", "airports"),)),
        table("airports"): DIM,
    }
    with pytest.raises(DataModelError) as refused:
        data_model(keys, "All")
    assert isinstance(refused.value, PublishError)
    assert refused.value.facts == ["Extract.flights", "Extract.weather"]
    assert str(refused.value) == (
        "Data source 'All' cannot be one tree, which Tableau requires: it holds 2 fact "
        "tables (referenced by no foreign key): Extract.flights, Extract.weather. Publish one "
        "data source per fact: tableau_datasource_asset(..., tables=[fact, its dimensions]). "
        "Nothing was sent."
    )
    with pytest.raises(DataModelError, match=r"Keep one fact in its tables=\[\.\.\.\]"):
        data_model(keys, "All", chosen=True)


def test_unrelated_tables_are_several_facts() -> None:
    with pytest.raises(DataModelError) as refused:
        data_model({table("a"): Keys(), table("b"): Keys()}, "AB")
    assert refused.value.facts == ["Extract.a", "Extract.b"]


def test_a_cycle_leaves_tables_no_path_reaches() -> None:
    keys = {
        table("fact"): Keys((), (fk("x", "x"),)),
        table("x"): DIM,
        table("y"): Keys(("id",), (fk("z", "z"),)),
        table("z"): Keys(("id",), (fk("y", "y"),)),
    }
    with pytest.raises(DataModelError) as refused:
        data_model(keys, "C")
    assert refused.value.facts == ["Extract.fact"]
    assert refused.value.unreachable == ["Extract.y", "Extract.z"]
    assert "leave them out of tables=" not in str(refused.value)


def test_a_cycle_reached_from_the_fact_names_its_tables() -> None:
    keys = {
        table("fact"): Keys((), (fk("x", "x"),)),
        table("x"): Keys(("id",), (fk("y", "y"),)),
        table("y"): Keys(("id",), (fk("x", "x"),)),
    }
    with pytest.raises(DataModelError, match=r"cycle \(Extract\.x -> Extract\.y -> Extract\.x\)"):
        data_model(keys, "C")


def test_every_table_referenced_is_a_cycle() -> None:
    keys = {table("x"): Keys(("id",), (fk("y", "y"),)), table("y"): Keys(("id",), (fk("x", "x"),))}
    with pytest.raises(DataModelError, match=r"cycle .*Drop one of these keys"):
        data_model(keys, "C")


def test_a_role_playing_dimension_is_a_copy_per_key_named_for_its_role() -> None:
    keys = {
        table("flights"): Keys((), (fk("origin", "airports"), fk("dest", "airports"))),
        table("airports"): DIM,
    }
    model = data_model(keys, "Flights")
    assert [str(r) for r in model.relationships] == [
        "Extract.flights.origin -> Extract.airports (origin).id",
        "Extract.flights.dest -> Extract.airports (dest).id",
    ]
    assert model.published(table("airports")) == (
        table("airports (origin)"),
        table("airports (dest)"),
    )
    assert model.source(table("airports (dest)")) == table("airports")
    assert model.published(table("flights")) == (table("flights"),)


def test_a_snowflake_reaching_a_dimension_twice_copies_the_branch() -> None:
    """TPC-DS: store_sales references customer_address directly and through customer, and
    customer and the sale both reference date_dim: every way is a table of the tree."""
    keys = {
        table("store_sales"): Keys(
            (), (fk("ss_customer_sk", "customer"), fk("ss_addr_sk", "customer_address"))
        ),
        table("customer"): Keys(
            ("id",), (fk("c_addr_sk", "customer_address"), fk("c_first_sales_date_sk", "date_dim"))
        ),
        table("customer_address"): DIM,
        table("date_dim"): DIM,
    }
    model = data_model(keys, "Store sales")
    assert [str(r) for r in model.relationships] == [
        "Extract.store_sales.ss_customer_sk -> Extract.customer.id",
        "Extract.customer.c_addr_sk -> Extract.customer_address (ss_customer_sk.c_addr_sk).id",
        "Extract.customer.c_first_sales_date_sk -> Extract.date_dim.id",
        "Extract.store_sales.ss_addr_sk -> Extract.customer_address (ss_addr_sk).id",
    ]
    assert len(set(model.tables)) == len(model.tables) == 5


def test_a_composite_key_names_its_role_by_every_column() -> None:
    returns = Keys((), (ForeignKey(("item", "ticket"), table("sales"), ("item", "ticket")),))
    keys = {table("returns"): returns, table("sales"): Keys(("item", "ticket"))}
    (relationship,) = data_model(keys, "Returns").relationships
    assert str(relationship) == "Extract.returns.item, ticket -> Extract.sales.item, ticket"


def test_a_tree_larger_than_the_limit_is_refused() -> None:
    """Each level holds two keys to the next: 2 + 4 + ... copies."""
    keys = {
        table(f"d{n}"): Keys(("id",), (fk("a", f"d{n + 1}"), fk("b", f"d{n + 1}")))
        for n in range(6)
    }
    keys[table("d6")] = DIM
    with pytest.raises(DataModelError, match=r"more than 64 tables"):
        data_model(keys, "Wide")


def test_keys_to_tables_the_data_source_does_not_hold_do_not_count() -> None:
    keys = {table("weather"): Keys((), (fk("origin", "airports"), fk("plane", "planes")))}
    keys[table("airports")] = DIM
    model = data_model(keys, "Weather")
    assert [str(r) for r in model.relationships] == [
        "Extract.weather.origin -> Extract.airports.id"
    ]


def test_the_publish_asset_shows_the_model_tableau_will_build() -> None:
    @dg.asset(metadata={"primary_key": ["faa"]})
    def airports() -> None: ...

    @dg.asset(metadata={"foreign_keys": {"origin": "airports.faa"}})
    def weather() -> None: ...

    @dg.asset(metadata={"foreign_keys": {"origin": "airports.faa"}})
    def flights() -> None: ...

    deps = [airports, weather, flights]
    one = tableau_datasource_asset(
        datasource="Weather", project="p", deps=deps, tables=["weather", "airports"], key="w"
    )
    assert one.metadata_by_key[one.key]["data_model"].value == (
        "| Table | Role | Joined by |\n|---|---|---|\n| Extract.weather | fact | |\n"
        "| Extract.airports | dimension | Extract.weather.origin -> Extract.airports.faa |"
    )
    galaxy = tableau_datasource_asset(datasource="All", project="p", deps=deps)
    shown = galaxy.metadata_by_key[galaxy.key]["data_model"].value
    assert shown.startswith("Would refuse: ") and "tables=[" in shown


def test_tables_takes_what_deps_takes_an_asset_standing_for_its_stored_table() -> None:
    """Was `AttributeError: 'AssetsDefinition' object has no attribute 'rsplit'`."""

    @dg.asset(metadata={"schema": "Ref", "table": "Airports", "primary_key": ["faa"]})
    def airports() -> None: ...

    weather = dg.AssetSpec("weather", metadata={"foreign_keys": {"origin": "Ref.Airports.faa"}})

    @dg.asset(metadata={"foreign_keys": {"origin": "Ref.Airports.faa"}})
    def flights() -> None: ...

    expected = (
        "| Table | Role | Joined by |\n|---|---|---|\n| Extract.weather | fact | |\n"
        "| Ref.Airports | dimension | Extract.weather.origin -> Ref.Airports.faa |"
    )
    deps = [airports, weather, flights]
    for tables in (
        [weather, airports],
        [dg.AssetKey("weather"), dg.AssetDep("airports")],
        ["weather", "Ref.Airports"],
    ):
        one = tableau_datasource_asset(
            datasource="Weather", project="p", deps=deps, tables=tables, key="w"
        )
        assert one.metadata_by_key[one.key]["data_model"].value == expected, tables
        assert one.asset_deps[one.key] == {a.key for a in (airports, weather, flights)}


@pytest.mark.parametrize(
    ("options", "message", "refused_by_the_op_too"),
    [
        (
            {"tables": ["weather", 42]},
            "tables= of data source 'Weather' holds 42 (int); pass assets (@asset definitions "
            'or AssetSpecs), AssetKeys, or table names ("table", "schema.table").',
            True,
        ),
        (
            {"tables": "weather"},
            "tables= of data source 'Weather' is 'weather' (str); give a list, e.g. "
            'tables=[sales, "products"].',
            True,
        ),
        (
            {"tables": [dg.AssetKey(["shop", "stock"])]},
            "tables= of data source 'Weather' holds asset 'shop/stock', which is not in its "
            "deps; add it to deps=.",
            False,  # an op has no deps
        ),
        (
            {"deps": ["weather", ("shop", "stock")]},
            "deps= of data source 'Weather' holds ('shop', 'stock') (tuple); pass assets "
            '(@asset definitions or AssetSpecs), AssetKeys, or the names of assets ("flights").',
            False,
        ),
    ],
)
def test_anything_else_in_tables_or_deps_is_refused_naming_it(
    options: dict, message: str, refused_by_the_op_too: bool
) -> None:
    with pytest.raises(ConfigurationError) as refused:
        tableau_datasource_asset(
            **{"datasource": "Weather", "project": "p", "deps": ["weather"], **options}
        )
    assert str(refused.value) == message
    if refused_by_the_op_too:
        with pytest.raises(ConfigurationError) as by_the_op:
            build_publish_op(datasource="Weather", project="p", tables=options["tables"])
        assert str(by_the_op.value) == message


def test_a_cycle_beside_a_dead_end_is_named() -> None:
    """Every table referenced, the walk from `a` first meeting `c`, which references none."""
    keys = {
        table("a"): Keys(("id",), (fk("c", "c"), fk("b", "b"))),
        table("b"): Keys(("id",), (fk("a", "a"),)),
        table("c"): DIM,
    }
    with pytest.raises(DataModelError, match=r"cycle \(Extract\.a -> Extract\.b -> Extract\.a\)"):
        data_model(keys, "C")


def test_two_ways_named_alike_are_refused_naming_the_name() -> None:
    """One column `x` referencing two tables, each reaching `c` by a column `c`."""
    keys = {
        table("fact"): Keys((), (fk("x", "b1"), fk("x", "b2"))),
        table("b1"): Keys(("id",), (fk("c", "c"),)),
        table("b2"): Keys(("id",), (fk("c", "c"),)),
        table("c"): DIM,
    }
    with pytest.raises(DataModelError, match=r"would be named Extract\.c \(x\.c\)"):
        data_model(keys, "Twins")


def test_the_publish_assets_preview_is_what_its_run_does(tmp_path: Path, emulator: Emulator):
    """Refusal included: a preview of two facts is the run's refusal, word for word; a
    tree shown from keys the file lacks (a key declared after its table was written) is
    refused naming that key, and published once the table is written again."""

    @dg.asset(metadata={"primary_key": ["store_id"]})
    def stores() -> pa.Table:
        return pa.table({"store_id": [1, 2], "name": ["north", "south"]})

    def sales_asset(**metadata: object) -> dg.AssetsDefinition:
        @dg.asset(name="sales", metadata=metadata)
        def sales() -> pa.Table:
            return pa.table({"id": [10, 11], "store_id": [1, 2]})

        return sales

    database = tmp_path / "shop.hyper"
    resources = {
        "io_manager": HyperIOManager(database=str(database)),
        "tableau": TableauServerResource(
            server_url=emulator.url,
            site="analytics",
            sign_in=TokenSignIn(name="ci", secret="s3cret-tøken"),
            job_poll_initial_seconds=0.02,
        ),
    }

    def define(sales: dg.AssetsDefinition) -> tuple[dg.AssetsDefinition, str]:
        published = tableau_datasource_asset(
            datasource="Shop", project="Default", deps=[stores, sales]
        )
        return published, published.metadata_by_key[published.key]["data_model"].value

    unkeyed = sales_asset()
    dg.materialize([stores, unkeyed], resources=resources)
    published, shown = define(unkeyed)
    refusal, note = shown.split("\n\n")
    assert note.startswith("Without tables=, the data source holds every table of the file")
    assert (
        refusal.startswith("Would refuse: Data source 'Shop' cannot be one tree, ")
        and ("it holds 2 fact tables (referenced by no foreign key): Extract.stores, Extract.sales")
        in refusal
    )
    before = digest(database)
    with pytest.raises(DataModelError) as refused:
        dg.materialize([published], resources=resources)
    assert str(refused.value) == refusal.removeprefix("Would refuse: ") + " Nothing was sent."
    assert digest(database) == before

    keyed = sales_asset(foreign_keys={"store_id": "stores.store_id"})
    published, shown = define(keyed)
    tree = shown.split("\n\n")[0]
    assert tree.splitlines()[2:] == [
        "| Extract.sales | fact | |",
        "| Extract.stores | dimension | Extract.sales.store_id -> Extract.stores.store_id |",
    ]
    with pytest.raises(DataModelError) as refused:  # the file's sales has no key yet
        dg.materialize([published], resources=resources)
    assert (
        "foreign keys declared in metadata are not in the file: Extract.sales.store_id -> "
        "Extract.stores.store_id (Extract.sales was written before its metadata declared it: "
        "materialise Extract.sales again)"
    ) in str(refused.value)
    assert refused.value.missing == ["Extract.sales.store_id -> Extract.stores.store_id"]
    assert digest(database) == before

    dg.materialize([stores, keyed], resources=resources, selection=["sales"])
    result = dg.materialize([published], resources=resources)
    (materialization,) = result.asset_materializations_for_node(published.op.name)
    assert materialization.metadata["data_model"].value == tree
    assert materialization.metadata["publish"].value == "full"
