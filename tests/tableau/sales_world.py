"""The sales star the publish tests write and publish: its assets (Arrow tables, daily
partitions), the emulator and resources they run against, and the steps several test
modules share."""

from dataclasses import dataclass, field
from datetime import date, timedelta
from pathlib import Path
from typing import Any

import dagster as dg
import numpy as np
import pyarrow as pa
from helpers import same_rows
from tableauhyperapi import Connection, TableDefinition, TableName, escape_name

from hyper_assets import (
    HyperIOManager,
)
from hyper_assets._engine.process import SharedHyper
from hyper_assets._rows.outbox import Outbox
from hyper_assets.emulator import Emulator
from hyper_assets.tableau._dagster.assets import tableau_datasource_asset
from hyper_assets.tableau._dagster.resource import TableauServerResource, TokenSignIn

Column = TableDefinition.Column
NAME, PROJECT = "Sales", "Default"
TOKEN_NAME, TOKEN_SECRET, SITE = "ci", "s3cret-tøken", "analytics"  # as in conftest.py
DAYS = dg.DailyPartitionsDefinition(start_date="2024-01-01", end_date="2025-01-01")


@dataclass
class World:
    """What the assets return next: tests change it between runs."""

    products: list[tuple[int, str | None]] = field(
        default_factory=lambda: [(1, "tea"), (2, "cake")]
    )
    names_required: bool = False  # products.name NOT NULL
    seed: int = 0
    appended: list[tuple[int, str]] = field(default_factory=list)
    upserted: list[tuple[int, int]] = field(default_factory=list)
    rows_per_day: int = 5
    event_notes: bool = False  # events gains a column `note` (schema_evolution)
    airports: list[tuple[str, str | None]] = field(default_factory=list)  # (faa, WKT)


def sales_rows(day: date, seed: int, count: int) -> pa.Table:
    rng = np.random.default_rng([day.toordinal(), seed])
    return pa.table(
        {
            "day": pa.array([day] * count, pa.date32()),
            "product": pa.array(rng.integers(1, 4, count), pa.int64()),
            "event": pa.array(rng.integers(0, 4, count), pa.int64()),
            "amount": pa.array(rng.integers(100, 10_000, count) / 100),
            "customer": pa.array(rng.integers(10**6, 10**7, count)).cast(pa.string()),
        }
    )


SALES_KEYS = {"product": "products.id", "event": "events.id"}


def definitions(world: World, database: Path, tableau: TableauServerResource, **publish: Any):
    @dg.asset(metadata={"primary_key": ["id"]})
    def products() -> pa.Table:
        ids, names = zip(*world.products, strict=True)
        schema = pa.schema(
            [("id", pa.int64()), pa.field("name", pa.string(), not world.names_required)]
        )
        return pa.table([pa.array(ids, pa.int64()), pa.array(names, pa.string())], schema)

    @dg.asset(
        partitions_def=DAYS,
        metadata={"partition_expr": "day", "foreign_keys": SALES_KEYS},
        backfill_policy=dg.BackfillPolicy.single_run(),
    )
    def sales(context: dg.AssetExecutionContext) -> pa.Table:
        start = context.partition_time_window.start.date()
        days = (context.partition_time_window.end.date() - start).days
        count = world.rows_per_day
        return pa.concat_tables(
            [sales_rows(start + timedelta(d), world.seed, count) for d in range(days)]
        )

    @dg.asset(
        metadata={"write_mode": "append", "schema_evolution": "add_columns", "primary_key": ["id"]}
    )
    def events() -> pa.Table:
        ids, labels = zip(*world.appended, strict=True) if world.appended else ((), ())
        rows = {"id": pa.array(ids, pa.int64()), "label": pa.array(labels, pa.string())}
        if world.event_notes:
            rows["note"] = pa.array([f"{label}!" for label in labels], pa.string())
        return pa.table(rows)

    @dg.asset(
        metadata={
            "write_mode": "upsert",
            "primary_key": ["id", "site"],
            "foreign_keys": {"id": "products.id"},
        }
    )
    def stock() -> pa.Table:
        """Keyed on two columns, one TEXT: the shape whose key an UPDATE must not SET."""
        ids, counts = zip(*world.upserted, strict=True) if world.upserted else ((), ())
        return pa.table(
            {
                "id": pa.array(ids, pa.int64()),
                "site": pa.array(["north"] * len(ids), pa.string()),
                "count": pa.array(counts, pa.int64()),
            }
        )

    @dg.asset(
        metadata={"write_mode": "upsert", "primary_key": ["faa"], "geography_columns": "location"}
    )
    def airports() -> pa.Table:
        faa, wkt = zip(*world.airports, strict=True) if world.airports else ((), ())
        return pa.table({"faa": pa.array(faa, pa.string()), "location": pa.array(wkt, pa.string())})

    publish = {"project": PROJECT, "datasource": NAME, **publish}
    assets = {
        "products": products,
        "sales": sales,
        "events": events,
        "stock": stock,
        "airports": airports,
    }
    published = tableau_datasource_asset(  # its default key, `sales`, is the table's
        deps=list(assets.values()), key=f"published_{publish['datasource'].lower()}", **publish
    )
    return assets, published


@dataclass
class Setup:
    world: World
    database: Path
    emulator: Emulator
    files: Any  # conftest.HyperFiles
    hyper: SharedHyper
    publish_options: dict[str, Any] = field(default_factory=dict)
    tableau_options: dict[str, Any] = field(default_factory=dict)

    def resources(self) -> dict[str, Any]:
        tableau = TableauServerResource(
            server_url=self.emulator.url,
            site=SITE,
            sign_in=TokenSignIn(name=TOKEN_NAME, secret=TOKEN_SECRET),
            retry_initial_delay_seconds=0.01,
            retry_max_delay_seconds=0.05,
            job_poll_initial_seconds=0.02,
            job_poll_max_seconds=0.1,
            max_retries=3,
            **self.tableau_options,
        )
        io_manager = HyperIOManager(
            database=str(self.database), staging_dir=str(self.database.parent / "staging")
        )
        return {"io_manager": io_manager, "tableau": tableau}

    def write(self, asset: str, partition: str | None = None, *, through: str = "") -> None:
        """Materialise `asset` (one partition, or the range `partition` .. `through`)."""
        resources = self.resources()
        assets, _ = definitions(self.world, self.database, resources["tableau"])
        tags = {}
        if through:
            tags = {
                "dagster/asset_partition_range_start": partition or "",
                "dagster/asset_partition_range_end": through,
            }
            partition = None
        result = dg.materialize(
            [assets[asset]], resources=resources, partition_key=partition, tags=tags
        )
        assert result.success

    def publish(self, *, full: bool = False, **options: Any) -> dict[str, Any]:
        """Runs the publish asset with `publish_options`, overridden by `options`."""
        resources = self.resources()
        assets, published = definitions(
            self.world, self.database, resources["tableau"], **(self.publish_options | options)
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
        metadata = {k: v.value for k, v in materialization.metadata.items()}
        sent = metadata["sent"].records  # what these tests compare: table, action, rows
        metadata["rows"] = [{k: r.data[k] for k in ("table", "action", "rows")} for r in sent]
        return metadata

    def remote(self, datasource: str = NAME) -> Path:
        """The emulator's copy of the data source, in the folder of its project."""
        project = self.publish_options.get("project", PROJECT)
        folder = self.emulator.site_dir(SITE)
        if project != "Default":
            folder = folder.joinpath("projects", *project.split("/"))
        return folder / f"{datasource}.hyper"

    def assert_equal(self, datasource: str = NAME, held: set[str] | None = None) -> None:
        """Every table of the emulator's copy holds the local table's rows (as multisets).

        The copy holds the local file's tables named in `held`, every table without it.
        """
        remote = self.remote(datasource)
        with Connection(self.hyper.endpoint) as connection:
            tables = {}
            for alias, path in (("local", self.database), ("remote", remote)):
                connection.execute_command(f"ATTACH DATABASE {escape_name(str(path))} AS {alias}")
                tables[alias] = {
                    (t.schema_name.name.unescaped, t.name.unescaped)
                    for schema in connection.catalog.get_schema_names(alias)
                    for t in connection.catalog.get_table_names(schema)
                }
            if held is not None:
                tables["local"] = {t for t in tables["local"] if t[1] in held}
            assert tables["remote"] == tables["local"]
            for schema, table in sorted(tables["local"]):
                local, theirs = (TableName(a, schema, table) for a in ("local", "remote"))
                assert same_rows(connection, local, theirs), f"{schema}.{table} differs"


def published_base(setup: Setup) -> None:
    """Every table of the star written and published whole, so later publishes are updates."""
    setup.world.appended = [(0, "zero")]
    for asset in ("products", "events"):
        setup.write(asset)
    setup.write("sales", "2024-03-01")
    assert setup.publish()["publish"] == "full"


def some_changes(setup: Setup, step: int) -> None:
    """An append (which would show twice if applied twice), a replace and a partition."""
    setup.world.appended = [(step * 10 + i, f"event {step}.{i}") for i in range(3)]
    setup.write("events")
    setup.world.products = [(1, f"tea {step}"), (2, "cake")]
    setup.write("products")
    setup.world.seed = step
    setup.write("sales", "2024-03-01")


def datasource_dir(setup: Setup) -> Path:
    """Where the data source keeps its publish state and plan (the file's only one here)."""
    (found,) = (Outbox(setup.database).directory / "datasources").glob("*")
    return found
