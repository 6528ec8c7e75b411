"""The publish op end to end: HyperIOManager writes, the emulator over loopback receives.

Assets return Arrow tables (the IO manager's Arrow path shares the Hyper side with the
Spark path, and keeps these tests fast). After every publish, every table of the
emulator's copy must equal the local file's, row for row.
"""

import random
from dataclasses import dataclass, field
from datetime import date, timedelta
from pathlib import Path
from typing import Any

import dagster as dg
import pyarrow as pa
import pytest

from hyper_assets import HyperIOManager, HyperResource
from hyper_assets.emulator import Emulator
from hyper_assets.outbox import Outbox
from hyper_assets.process import SharedHyper
from hyper_assets.tableau.assets import tableau_datasource_asset
from hyper_assets.tableau.client import TableauServerResource

NAME, PROJECT = "Sales", "default"
TOKEN_NAME, TOKEN_SECRET = "ci", "s3cret-tøken"  # as the emulator fixture in conftest.py
DAYS = dg.DailyPartitionsDefinition(start_date="2024-01-01", end_date="2025-01-01")


@dataclass
class World:
    """What the assets return next: tests change it between runs."""

    products: list[tuple[int, str]] = field(default_factory=lambda: [(1, "tea"), (2, "cake")])
    seed: int = 0
    appended: list[tuple[int, str]] = field(default_factory=list)
    upserted: list[tuple[int, int]] = field(default_factory=list)


def sales_rows(day: date, seed: int, count: int = 5) -> pa.Table:
    rng = random.Random(f"{day}-{seed}")
    return pa.table(
        {
            "day": pa.array([day] * count, pa.date32()),
            "product": pa.array([rng.choice([1, 2, 3]) for _ in range(count)], pa.int64()),
            "amount": pa.array([round(rng.uniform(1, 100), 2) for _ in range(count)]),
        }
    )


def definitions(world: World, database: Path, tableau: TableauServerResource, **publish: Any):
    @dg.asset(metadata={"primary_key": ["id"]})
    def products() -> pa.Table:
        ids, names = zip(*world.products, strict=True)
        return pa.table({"id": pa.array(ids, pa.int64()), "name": pa.array(names)})

    @dg.asset(partitions_def=DAYS, metadata={"partition_expr": "day"})
    def sales(context: dg.AssetExecutionContext) -> pa.Table:
        start = context.partition_time_window.start.date()
        days = (context.partition_time_window.end.date() - start).days
        return pa.concat_tables([sales_rows(start + timedelta(d), world.seed) for d in range(days)])

    @dg.asset(metadata={"write_mode": "append"})
    def events() -> pa.Table:
        ids, labels = zip(*world.appended, strict=True) if world.appended else ((), ())
        return pa.table({"id": pa.array(ids, pa.int64()), "label": pa.array(labels, pa.string())})

    @dg.asset(metadata={"write_mode": "upsert", "primary_key": ["id"]})
    def stock() -> pa.Table:
        ids, counts = zip(*world.upserted, strict=True) if world.upserted else ((), ())
        return pa.table({"id": pa.array(ids, pa.int64()), "count": pa.array(counts, pa.int64())})

    published = tableau_datasource_asset(
        datasource=NAME, project=PROJECT, deps=[products, sales, events, stock], **publish
    )
    return {"products": products, "sales": sales, "events": events, "stock": stock}, published


@dataclass
class Setup:
    world: World
    database: Path
    emulator: Emulator
    files: Any  # conftest.HyperFiles
    hyper: SharedHyper
    publish_options: dict[str, Any] = field(default_factory=dict)

    def resources(self) -> dict[str, Any]:
        tableau = TableauServerResource(
            server_url=self.emulator.url,
            token_name=TOKEN_NAME,
            token_secret=TOKEN_SECRET,
            retry_initial_delay_seconds=0.01,
            retry_max_delay_seconds=0.05,
            job_poll_initial_seconds=0.02,
            job_poll_max_seconds=0.1,
            max_retries=3,
        )
        io_manager = HyperIOManager(
            database=str(self.database), staging_dir=str(self.database.parent / "staging")
        )
        return {"io_manager": io_manager, "tableau": tableau}

    def write(self, asset: str, partition: str | None = None) -> None:
        resources = self.resources()
        assets, _ = definitions(self.world, self.database, resources["tableau"])
        result = dg.materialize([assets[asset]], resources=resources, partition_key=partition)
        assert result.success

    def publish(self, *, full: bool = False) -> dict[str, Any]:
        resources = self.resources()
        assets, published = definitions(
            self.world, self.database, resources["tableau"], **self.publish_options
        )
        config = {"ops": {published.op.name: {"config": {"full": full}}}}
        result = dg.materialize(
            [published, *assets.values()],
            selection=[published.key],
            resources=resources,
            run_config=config,
            raise_on_error=True,
        )
        (materialization,) = result.asset_materializations_for_node(published.op.name)
        return {k: v.value for k, v in materialization.metadata.items()}

    def assert_equal(self) -> None:
        local = self.files.read(self.database)
        remote = self.files.read(self.emulator.data_dir / f"{NAME}.hyper")
        assert remote == local


@pytest.fixture
def setup(tmp_path: Path, emulator: Emulator, hyper_files: Any, hyper: SharedHyper):
    yield Setup(World(), tmp_path / "sales.hyper", emulator, hyper_files, hyper)
    HyperResource().close()


def test_first_publish_sends_the_whole_file_then_only_changes(setup: Setup) -> None:
    for asset in ("products", "events", "stock"):
        setup.world.appended = [(1, "a")]
        setup.world.upserted = [(1, 10)]
        setup.write(asset)
    setup.write("sales", "2024-03-01")
    first = setup.publish()
    assert first["publish"] == "full"
    assert first["payload_bytes"] == setup.database.stat().st_size
    setup.assert_equal()

    setup.world.seed = 1
    setup.write("sales", "2024-03-01")  # rewritten twice: sent once
    setup.write("sales", "2024-03-01")
    setup.write("sales", "2024-03-02")
    setup.world.appended = [(2, "b"), (3, "c")]
    setup.write("events")
    setup.world.upserted = [(1, 11), (2, 20)]
    setup.write("stock")
    setup.world.products = [(1, "green tea"), (2, "cake"), (3, "scone")]
    setup.write("products")
    second = setup.publish()
    assert second["publish"] == "update"
    assert second["batches"] == 1
    actions = sorted((r["table"], r["action"], r["rows"]) for r in second["rows"])
    assert actions == [
        ("Extract.events", "insert", 2),
        ("Extract.products", "replace", 3),
        ("Extract.sales", "window", 5),
        ("Extract.sales", "window", 5),
        ("Extract.stock", "upsert", 2),
    ]
    setup.assert_equal()
    assert not Outbox(setup.database).changes()

    third = setup.publish()
    assert third["publish"] == "none" and third["batches"] == 0


def test_rolling_window_delete_and_a_backfill_range(setup: Setup) -> None:
    for day in ("2024-03-01", "2024-03-02", "2024-03-03"):
        setup.write("sales", day)
    setup.publish()
    resources = setup.resources()
    assets, _ = definitions(setup.world, setup.database, resources["tableau"])
    deleted = resources["io_manager"].delete_partitions(assets["sales"], ["2024-03-01"])
    assert deleted == 5
    setup.write("sales", "2024-03-04")
    update = setup.publish()
    assert sorted((r["action"], r["rows"]) for r in update["rows"]) == [
        ("window", 0),
        ("window", 5),
    ]
    setup.assert_equal()
    remote = setup.files.read(setup.emulator.data_dir / f"{NAME}.hyper")["Extract.sales"]
    assert {row[0] for row in remote} == {date(2024, 3, d) for d in (2, 3, 4)}


def test_a_payload_above_the_limit_is_split_into_batches(setup: Setup) -> None:
    setup.publish_options = {"max_payload_bytes": 200_000}
    setup.world.appended = [(-1, "first")]
    setup.write("events")
    assert setup.publish()["publish"] == "full"
    setup.world.appended = [(i, f"event number {i} " * 3) for i in range(60_000)]
    setup.write("events")
    update = setup.publish()
    assert update["batches"] >= 3
    assert sum(r["rows"] for r in update["rows"]) == 60_000
    setup.assert_equal()

    setup.world.upserted = [(1, 5)]
    setup.write("stock")
    assert setup.publish()["reason"] == "table Extract.stock is new"
    setup.assert_equal()
