"""A star materialised as a new user would, facts first, publishes with every declared key;
a publish whose tables lack a declared key says which, and why.

Real runs: `dg.materialize` of Arrow or Spark assets through `HyperIOManager`, and the
publish asset sending to the emulator over HTTP; both files are read back through hyperd.
"""

from pathlib import Path
from typing import Any

import dagster as dg
import pytest
from helpers import arrow
from tableauhyperapi import Connection, TableName

from hyper_assets import DataModelError, HyperIOManager
from hyper_assets._engine.tables import Catalog, ForeignKey, Keys
from hyper_assets.emulator import Emulator
from hyper_assets.tableau._dagster.assets import tableau_datasource_asset
from hyper_assets.tableau._dagster.resource import TableauServerResource, TokenSignIn

NAME, PROJECT = "Shop", "Default"
TOKEN_NAME, TOKEN_SECRET, SITE = "ci", "s3cret-tøken", "analytics"  # as in conftest.py
STORES, SALES, RETURNS = (TableName("Extract", t) for t in ("stores", "sales", "returns"))
TO_STORES = ForeignKey(("store_id",), STORES, ("store_id",))
STAR = {STORES: Keys(("store_id",)), SALES: Keys((), (TO_STORES,)), RETURNS: Keys((), (TO_STORES,))}


def stores_asset(frame: Any = arrow, primary_key: str = "store_id") -> dg.AssetsDefinition:
    @dg.asset(name="stores", metadata={"primary_key": [primary_key]})
    def stores() -> Any:
        return frame([(1, "north"), (2, "south")], ["store_id", "name"])

    return stores


def fact_asset(name: str, frame: Any = arrow, ids: tuple[int, ...] = (1, 2)) -> dg.AssetsDefinition:
    metadata = {"write_mode": "append", "foreign_keys": {"store_id": "stores.store_id"}}

    @dg.asset(name=name, metadata=metadata)
    def fact() -> Any:
        return frame([(i, 1.5 * i) for i in ids], ["store_id", "amount"])

    return fact


class Shop:
    """The file, the emulator it publishes to, and runs of assets with both resources."""

    def __init__(self, database: Path, emulator: Emulator, files: Any) -> None:
        self.database, self.emulator, self.files = database, emulator, files
        self.resources = {
            "io_manager": HyperIOManager(database=str(database)),
            "tableau": TableauServerResource(
                server_url=emulator.url,
                site=SITE,
                sign_in=TokenSignIn(name=TOKEN_NAME, secret=TOKEN_SECRET),
                job_poll_initial_seconds=0.02,
                job_poll_max_seconds=0.1,
            ),
        }

    def publisher(self, *deps: dg.AssetsDefinition, **kwargs: Any) -> dg.AssetsDefinition:
        kwargs = {"datasource": NAME} | kwargs
        return tableau_datasource_asset(project=PROJECT, deps=list(deps), **kwargs)

    def run(self, *assets: dg.AssetsDefinition) -> dg.ExecuteInProcessResult:
        return dg.materialize(list(assets), resources=self.resources)

    def published(
        self, result: dg.ExecuteInProcessResult, publisher: dg.AssetsDefinition
    ) -> dict[str, Any]:
        (event,) = result.asset_materializations_for_node(publisher.op.name)
        return {k: v.value for k, v in event.metadata.items()}

    def copy(self, datasource: str = NAME) -> Path:
        """The emulator's copy of `datasource`."""
        return self.emulator.site_dir(SITE) / f"{datasource}.hyper"

    def keys(self, path: Path) -> dict[TableName, Keys]:
        with Connection(self.files.hyper.endpoint, str(path)) as connection:
            catalog = Catalog(connection)
            return {table: catalog.keys(table) for table in catalog.tables()}


@pytest.fixture
def shop(tmp_path: Path, emulator: Emulator, hyper_files: Any) -> Shop:
    return Shop(tmp_path / "shop.hyper", emulator, hyper_files)


@pytest.mark.parametrize("frames", ["arrow", "spark"])
def test_a_star_from_one_run_is_published_with_every_key(
    request: pytest.FixtureRequest, shop: Shop, frames: str
) -> None:
    """Dagster writes the facts first (nothing orders them), then the dimension, then the
    publishes, which depend on them. Two facts sharing a dimension are two stars for
    Tableau (a table referenced by several is refused): a data source each."""
    spark = request.getfixturevalue("spark") if frames == "spark" else None
    frame = arrow if spark is None else spark.createDataFrame
    stores, sales, returns = (
        stores_asset(frame),
        fact_asset("sales", frame),
        fact_asset("returns", frame),
    )
    publishers = [
        shop.publisher(
            fact,
            stores,
            datasource=name,
            key=f"published_{name.lower()}",
            tables=[name.lower(), "stores"],
        )
        for fact, name in ((sales, "Sales"), (returns, "Returns"))
    ]
    result = shop.run(stores, sales, returns, *publishers)
    written = [e.asset_key.path[-1] for e in result.get_asset_materialization_events()]
    assert written == ["returns", "sales", "stores", "published_returns", "published_sales"]
    assert shop.keys(shop.database) == STAR
    local = shop.files.read(shop.database)
    for publisher, fact in zip(publishers, (SALES, RETURNS), strict=True):
        name = fact.name.unescaped.capitalize()
        assert shop.published(result, publisher)["publish"] == "full"
        assert shop.keys(shop.copy(name)) == {STORES: STAR[STORES], fact: STAR[fact]}
        held = ("Extract.stores", f"Extract.{fact.name.unescaped}")
        assert shop.files.read(shop.copy(name)) == {t: local[t] for t in held}
    assert local["Extract.sales"] == [(1, 1.5), (2, 3.0)]


def test_a_publish_names_the_declared_keys_missing_and_why(shop: Shop) -> None:
    facts = [fact_asset("sales"), fact_asset("returns")]
    shop.run(*facts)
    with pytest.raises(DataModelError) as refused:
        shop.run(shop.publisher(*facts))
    assert refused.value.missing == [
        "Extract.returns.store_id -> Extract.stores.store_id",
        "Extract.sales.store_id -> Extract.stores.store_id",
    ]
    assert str(refused.value) == (
        "Data source 'Shop' cannot be one tree, which Tableau requires: it holds 2 fact "
        "tables (referenced by no foreign key): Extract.returns, Extract.sales; and foreign "
        "keys declared in metadata are not in the file: Extract.returns.store_id -> "
        "Extract.stores.store_id (Extract.stores does not exist yet: materialise it); "
        "Extract.sales.store_id -> Extract.stores.store_id (Extract.stores does not exist "
        "yet: materialise it). Do what each key's reason says (the write of either table "
        "adds it), then publish again. Publish one data source per fact: "
        "tableau_datasource_asset(..., tables=[fact, its dimensions]). Nothing was sent."
    )
    assert not shop.copy().exists()


def test_a_key_to_a_column_that_is_not_the_primary_key_is_named_by_the_publish(
    shop: Shop,
) -> None:
    sales, stores = fact_asset("sales"), stores_asset(primary_key="name")
    shop.run(sales)
    shop.run(stores)  # stored, with a warning: the key stays out of the file
    with pytest.raises(DataModelError) as refused:
        shop.run(shop.publisher(sales, stores))
    assert refused.value.missing == ["Extract.sales.store_id -> Extract.stores.store_id"]
    assert (
        "Extract.sales.store_id -> Extract.stores.store_id (the primary key of Extract.stores "
        "is ['name']: declare metadata primary_key=['store_id'] on it, or point the key at "
        "its primary key)"
    ) in str(refused.value)
    assert not shop.copy().exists()


def test_a_key_added_after_a_publish_goes_in_the_next_whole_file_publish(shop: Shop) -> None:
    """Published alone first (the key's table missing: a warning), the fact gets its key
    from the dimension's write; the next publish sends the file whole, then changes."""
    sales, stores = fact_asset("sales"), stores_asset()
    publisher = shop.publisher(sales, stores)
    shop.run(sales)
    instance = dg.DagsterInstance.ephemeral()
    first = dg.materialize([publisher], resources=shop.resources, instance=instance)
    assert shop.published(first, publisher)["publish"] == "full"
    assert (
        "Foreign key Extract.sales.store_id -> Extract.stores.store_id is not in the file "
        "(Extract.stores does not exist yet: materialise it); data source 'Shop' holds "
        "Extract.sales without it."
    ) in [r.user_message for r in instance.all_logs(first.run_id)]
    assert shop.keys(shop.copy()) == {SALES: Keys()}

    shop.run(stores)
    second = shop.published(shop.run(publisher), publisher)
    assert (second["publish"], second["reason"]) == ("full", "table Extract.stores is new")
    assert shop.keys(shop.copy()) == {STORES: STAR[STORES], SALES: STAR[SALES]}
    assert shop.files.read(shop.copy()) == shop.files.read(shop.database)

    shop.run(fact_asset("sales", ids=(2,)))
    third = shop.published(shop.run(publisher), publisher)
    assert (third["publish"], third["rows_sent"]) == ("update", 1)
    assert shop.files.read(shop.copy()) == shop.files.read(shop.database)
