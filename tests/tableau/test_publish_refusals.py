"""A refused write leaves nothing for the publish: the outbox is byte for byte as it was,
and the next publish to the emulator sends nothing.

Assets return Arrow tables (the Hyper side is the Spark path's); each refusal is made by
the IO manager for real, and the publish reads back what it sent.
"""

from datetime import date
from pathlib import Path
from typing import Any

import dagster as dg
import pyarrow as pa
import pytest
from tableauhyperapi import TableName

from hyper_assets import (
    ConfigurationError,
    HyperIOManager,
    PrimaryKeyError,
    SchemaMismatchError,
)
from hyper_assets._engine.types import columns_from_arrow
from hyper_assets._rows.ingest import Write
from hyper_assets._rows.modes import WriteMode
from hyper_assets._rows.outbox import Outbox
from hyper_assets._rows.staging import Staged
from hyper_assets.emulator import Emulator
from hyper_assets.tableau._dagster.assets import tableau_datasource_asset
from hyper_assets.tableau._dagster.resource import TableauServerResource, TokenSignIn

NAME, PROJECT = "Shop", "Default"
TOKEN_NAME, TOKEN_SECRET, SITE = "ci", "s3cret-tøken", "analytics"  # as in conftest.py
DAYS = dg.DailyPartitionsDefinition(start_date="2024-03-01", end_date="2024-04-01")
NOTHING = {"publish": "none", "rows_sent": 0, "changes_sent": 0, "tableau_job_ids": "none"}


def sales_rows(day: date, extra: bool = False) -> pa.Table:
    rows = {"day": pa.array([day, day], pa.date32()), "id": [1, 2], "amount": [1.5, 2.5]}
    return pa.table(rows | ({"note": ["a", "b"]} if extra else {}))


class Shop:
    """A file with a daily fact and the upserted table it references, published once."""

    def __init__(self, database: Path, emulator: Emulator) -> None:
        self.database, self.emulator = database, emulator
        self.io_manager = HyperIOManager(database=str(database))
        self.tableau = TableauServerResource(
            server_url=emulator.url,
            site=SITE,
            sign_in=TokenSignIn(name=TOKEN_NAME, secret=TOKEN_SECRET),
            job_poll_initial_seconds=0.02,
            job_poll_max_seconds=0.1,
        )

    def write(self, asset: dg.AssetsDefinition, partition: str | None = None) -> None:
        dg.materialize([asset], resources={"io_manager": self.io_manager}, partition_key=partition)

    def publish(self) -> dict[str, Any]:
        published = tableau_datasource_asset(datasource=NAME, project=PROJECT, deps=[])
        result = dg.materialize(
            [published], resources={"io_manager": self.io_manager, "tableau": self.tableau}
        )
        (materialization,) = result.asset_materializations_for_node(published.op.name)
        return {k: v.value for k, v in materialization.metadata.items()}

    def outbox_files(self) -> dict[str, bytes]:
        directory = Outbox(self.database).directory
        files = (p for p in directory.rglob("*") if p.is_file())
        return {p.relative_to(directory).as_posix(): p.read_bytes() for p in files}

    def remote(self) -> bytes:
        return (self.emulator.site_dir(SITE) / f"{NAME}.hyper").read_bytes()


def upsert_asset(ids: list[int | None]) -> dg.AssetsDefinition:
    @dg.asset(name="stock", metadata={"write_mode": "upsert", "primary_key": ["id"]})
    def stock() -> pa.Table:
        return pa.table({"id": pa.array(ids, pa.int64()), "count": [7] * len(ids)})

    return stock


def sales_asset(
    name: str = "sales", partition_expr: str = "day", extra: bool = False, shift: int = 0
) -> dg.AssetsDefinition:
    # Its key to `stock` makes the file one star, as Tableau takes a published file.
    keys = {"partition_expr": partition_expr, "foreign_keys": {"id": "stock.id"}}

    @dg.asset(name=name, partitions_def=DAYS, metadata=keys)
    def sales(context: dg.AssetExecutionContext) -> pa.Table:
        day = context.partition_time_window.start.date()
        return sales_rows(date.fromordinal(day.toordinal() + shift), extra)

    return sales


def summary(metadata: dict[str, Any]) -> dict[str, Any]:
    """What a publish's metadata says it sent, in the terms of `NOTHING`."""
    return {key: metadata[key] for key in NOTHING}


@pytest.fixture
def shop(tmp_path: Path, emulator: Emulator) -> Shop:
    shop = Shop(tmp_path / "shop.hyper", emulator)
    shop.write(upsert_asset([1, 2]))
    shop.write(sales_asset(), "2024-03-01")
    assert shop.publish()["publish"] == "full"
    return shop


REFUSED = {
    "a NULL-key upsert": (lambda: upsert_asset([3, None]), None, PrimaryKeyError),
    "a partition_expr that is no column": (
        lambda: sales_asset(partition_expr="dayy"),
        "2024-03-02",
        ConfigurationError,
    ),
    "a drift write": (lambda: sales_asset(extra=True), "2024-03-02", SchemaMismatchError),
    "rows outside the partition": (lambda: sales_asset(shift=1), "2024-03-02", SchemaMismatchError),
    "a failed first write of a new table": (
        lambda: sales_asset(name="returns", shift=1),
        "2024-03-02",
        SchemaMismatchError,
    ),
}


@pytest.mark.parametrize("refusal", REFUSED)
def test_a_refused_write_leaves_nothing_for_the_publish(shop: Shop, refusal: str) -> None:
    make, partition, error = REFUSED[refusal]
    outbox, remote, file = shop.outbox_files(), shop.remote(), shop.database.read_bytes()
    with pytest.raises(error):
        shop.write(make(), partition)
    assert shop.outbox_files() == outbox
    assert shop.database.read_bytes() == file
    with shop.io_manager.hyper.connect(shop.database) as connection:
        assert not connection.catalog.has_table(TableName("Extract", "returns"))
    assert summary(shop.publish()) == NOTHING
    assert shop.remote() == remote
    shop.write(sales_asset(), "2024-03-02")  # the next write is recorded and sent, alone
    sent = shop.publish()
    assert (sent["publish"], sent["rows_sent"], sent["changes_sent"]) == ("update", 2, 1)


def test_a_crashed_write_of_a_table_never_created_publishes_nothing(shop: Shop) -> None:
    """A crash between the record and the CREATE TABLE leaves a record of a table that is not
    in the file: it is no publish (it was an 'update' of 0 rows in 0 batches)."""
    ghost = pa.table({"id": pa.array([1], pa.int64())})
    write = Write(TableName("Extract", "ghost"), columns_from_arrow(ghost.schema, "ghost", 2))
    assert write.mode == WriteMode.REPLACE
    outbox = Outbox(shop.database)
    with shop.io_manager.hyper.connect(shop.database) as connection:
        outbox.record(connection, write, Staged((), 0))  # then the process died
    remote = shop.remote()
    assert summary(shop.publish()) == NOTHING
    assert shop.remote() == remote
    assert not [f for f in shop.outbox_files() if "/plan/" in f or f.startswith("plan/")]
