"""`HyperExtractComponent`: one `.hyper` extract declared in a `defs.yaml`.

    type: hyper_assets.HyperExtractComponent
    attributes:
      database: data/shop.hyper
      spark: {config: {spark.master: "local[*]"}}
      tables:
        - name: customers
          source: {format: csv, path: data/customers.csv, options: {header: "true"}}
          primary_key: [customer_id]
        - name: orders
          sql: SELECT o.* FROM raw_orders o JOIN customers c USING (customer_id)
      publish:
        datasource: Shop
        server: {server_url: https://tableau.example.com,
                 sign_in: {name: ci, secret_env: TABLEAU_TOKEN_SECRET}}

Each table becomes a Spark asset stored by a `HyperIOManager`; `adopt` instead (or as
well) takes assets the project already defines in Python. The library's checks and the
publish asset cover both; `publish` may also list several data sources, each with the
`tables` it holds (one star each). A resource the YAML configures (`database`,
`spark.config`, `publish.server`) is defined by the component under its key; one left out
must come from elsewhere in the project under that key. See docs/component.md.

The YAML's models are in `hyper_assets._component.specs` (re-exported here); the tables'
assets are built in `.tables`, the publish assets in `.publish`, `adopt` in `.adopt`.
"""

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Annotated, Any

import dagster as dg

from hyper_assets._base.optional import missing

try:  # its tables are Spark assets, run by dagster-pyspark's resource
    from dagster_pyspark import PySparkResource
except ImportError as error:
    raise missing("dagster_pyspark", "HyperExtractComponent", error) from error

from hyper_assets._checks.checks import build_hyper_checks, publish_freshness_check
from hyper_assets._component.adopt import adopted_assets
from hyper_assets._component.publish import check_distinct, publish_asset
from hyper_assets._component.specs import (
    AdoptSpec,
    ChecksSpec,
    ColumnSpec,
    ConnectedAppSignInSpec,
    FileSource,
    PublishSpec,
    SparkSpec,
    TableauServerSpec,
    TableYaml,
    TokenSignInSpec,
)
from hyper_assets._component.tables import check_names, table_asset
from hyper_assets._dagster.io_manager import HyperIOManager
from hyper_assets._home.home import relative_to
from hyper_assets.errors import ComponentSpecError
from hyper_assets.tableau._dagster.resource import TableauServerResource

__all__ = [
    "AdoptSpec",
    "ChecksSpec",
    "ColumnSpec",
    "ConnectedAppSignInSpec",
    "FileSource",
    "HyperExtractComponent",
    "HyperExtractScaffolder",
    "PublishSpec",
    "SparkSpec",
    "TableYaml",
    "TableauServerSpec",
    "TokenSignInSpec",
]


class HyperExtractScaffolder(dg.Scaffolder):
    """Writes a defs.yaml declaring a two-table extract to edit."""

    def scaffold(self, request: dg.ScaffoldRequest) -> None:
        dg.scaffold_component(
            request,
            {
                "database": "data/extract.hyper",
                "spark": {"config": {"spark.master": "local[*]"}},
                "tables": [
                    {
                        "name": "customers",
                        "source": {
                            "format": "csv",
                            "path": "data/customers.csv",
                            "options": {"header": "true"},
                        },
                        "primary_key": ["customer_id"],
                    },
                    {
                        "name": "orders",
                        "source": {"format": "parquet", "path": "data/orders"},
                        "foreign_keys": {"customer_id": "customers.customer_id"},
                    },
                ],
            },
        )


@dg.scaffold_with(HyperExtractScaffolder)
@dataclass(frozen=True)
class HyperExtractComponent(dg.Component, dg.Resolvable):
    """A Tableau .hyper extract: Spark tables, the library's checks and the publish."""

    database: Annotated[
        str | None,
        dg.Resolver.default(
            description="The .hyper file, relative to the project root; given, the component "
            "defines its HyperIOManager."
        ),
    ] = None
    io_manager_key: Annotated[
        str | None,
        dg.Resolver.default(
            description="Resource key of the HyperIOManager; default hyper_<file name> with "
            "`database`, else io_manager."
        ),
    ] = None
    tables: Annotated[
        Sequence[TableYaml],
        dg.Resolver.default(description="The tables Spark builds, each an asset."),
    ] = ()
    adopt: Annotated[
        AdoptSpec | None,
        dg.Resolver.default(
            description="Assets the project defines in Python, stored by the HyperIOManager, "
            "that get the checks and the publish."
        ),
    ] = None
    spark: Annotated[
        SparkSpec, dg.Resolver.default(description="The Spark session the tables are built with.")
    ] = field(default_factory=SparkSpec)
    checks: Annotated[
        ChecksSpec, dg.Resolver.default(description="The library's checks, run inside Hyper.")
    ] = field(default_factory=ChecksSpec)
    publish: Annotated[
        PublishSpec | Sequence[PublishSpec] | None,
        dg.Resolver.default(
            description="The data source published from the file, or a list of them (one "
            "star each, chosen by `tables`)."
        ),
    ] = None
    group_name: Annotated[
        str | None, dg.Resolver.default(description="Asset group of every asset built.")
    ] = None
    owners: Annotated[
        Sequence[str], dg.Resolver.default(description="Owners of every asset built.")
    ] = ()
    tags: Annotated[
        Mapping[str, str], dg.Resolver.default(description="Tags of every asset built.")
    ] = field(default_factory=dict)

    @classmethod
    def get_spec(cls) -> dg.ComponentTypeSpec:
        return dg.ComponentTypeSpec(
            description="A Tableau .hyper extract built by Spark, checked and published.",
            tags=["spark", "hyper", "tableau"],
        )

    @property
    def hyper_io_manager_key(self) -> str:
        """The key of the HyperIOManager that stores the tables and that checks read."""
        if self.io_manager_key:
            return self.io_manager_key
        if self.database:
            return "hyper_" + re.sub(r"\W", "_", Path(self.database).stem).lower()
        return "io_manager"

    def build_defs(self, context: dg.ComponentLoadContext) -> dg.Definitions:
        if not self.tables and not self.adopt:
            raise ComponentSpecError(
                "attributes", "declares no table: list `tables`, or `adopt` existing assets"
            )
        self._refuse_ignored_checks()
        names = check_names(self.tables)
        root = context.project_root
        tables = [table_asset(self, i, t, names, root) for i, t in enumerate(self.tables)]
        adopted = (
            adopted_assets(self.adopt, self.hyper_io_manager_key, context) if self.adopt else []
        )
        checks = self._checks(tables, adopted)
        published = [
            publish_asset(self, spec, where, [*tables, *adopted]) for where, spec in self._publishes
        ]
        check_distinct(published, self._publishes)
        lag = self.checks.publish_max_lag_minutes
        if published and self.checks.enabled and lag is not None:
            if len(published) > 1:
                raise ComponentSpecError(
                    "attributes.checks.publish_max_lag_minutes",
                    "the freshness check reads the file's outbox as a whole, not one data "
                    f"source's share of it; {len(published)} data sources are published: "
                    "publish one, or leave the lag out",
                )
            checks.append(
                publish_freshness_check(
                    published[0], max_lag_minutes=lag, io_manager_key=self.hyper_io_manager_key
                )
            )
        return dg.Definitions(  # adopted assets stay defined where they are
            assets=[*tables, *published], asset_checks=checks, resources=self._resources(context)
        )

    def _checks(
        self, tables: Sequence[dg.AssetsDefinition], adopted: Sequence[dg.AssetsDefinition]
    ) -> list[dg.AssetChecksDefinition]:
        if not self.checks.enabled:
            return []
        not_null = {t.name: list(t.not_null) for t in self.tables if t.not_null}
        not_null |= {k: list(v) for k, v in (self.adopt.not_null if self.adopt else {}).items()}
        return build_hyper_checks(
            [*tables, *adopted],
            not_null=not_null,
            min_row_ratio=self.checks.min_row_ratio,
            row_count_severity=dg.AssetCheckSeverity(self.checks.row_count_severity),
            io_manager_key=self.hyper_io_manager_key,
            partitioned=self.checks.partitioned,
        )

    def _refuse_ignored_checks(self) -> None:
        """Check settings no check would read: a publish lag without a publish, and any
        with the checks disabled."""
        checks = self.checks
        if checks.publish_max_lag_minutes is not None and not self._publishes:
            raise ComponentSpecError(
                "attributes.checks.publish_max_lag_minutes",
                "the component publishes no data source, so it would be ignored: add "
                "`publish`, or leave the lag out",
            )
        if checks.enabled:
            return
        default = ChecksSpec()
        ignored = [
            f"checks.{f.name}"
            for f in fields(checks)
            if f.name != "enabled" and getattr(checks, f.name) != getattr(default, f.name)
        ]
        ignored += [f"tables[{i}].not_null" for i, t in enumerate(self.tables) if t.not_null]
        ignored += ["adopt.not_null"] if self.adopt and self.adopt.not_null else []
        if ignored:
            raise ComponentSpecError(
                "attributes.checks.enabled",
                f"is false, so the component defines no checks, and {', '.join(ignored)} "
                "would be ignored: remove them, or enable the checks",
            )

    @property
    def _publishes(self) -> list[tuple[str, PublishSpec]]:
        """Each data source with where the YAML declares it."""
        if self.publish is None:
            return []
        if isinstance(self.publish, PublishSpec):
            return [("attributes.publish", self.publish)]
        return [(f"attributes.publish[{i}]", spec) for i, spec in enumerate(self.publish)]

    def _resources(self, context: dg.ComponentLoadContext) -> dict[str, Any]:
        resources: dict[str, Any] = {}
        if self.database:
            database = relative_to(self.database, context.project_root)
            resources[self.hyper_io_manager_key] = HyperIOManager(database=database)
        if self.spark.config is not None:
            resources[self.spark.resource_key] = PySparkResource(
                spark_config=dict(self.spark.config)
            )
        servers: dict[str, TableauServerSpec] = {}
        for where, spec in self._publishes:
            server = spec.server
            if server is None:
                continue
            if servers.setdefault(spec.resource_key, server) != server:
                raise ComponentSpecError(
                    f"{where}.server",
                    f"another data source defines resource {spec.resource_key!r} with another "
                    "server: give one of them its own resource_key, or the same server",
                )
            resources[spec.resource_key] = TableauServerResource(
                server_url=server.server_url,
                site=server.site,
                sign_in=server.sign_in.config(),
                verify_tls=server.verify_tls,
                project_match_case=server.project_match_case,
            )
        return resources
