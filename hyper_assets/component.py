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
        server: {server_url: https://tableau.example.com, token_name: ci,
                 token_secret_env: TABLEAU_TOKEN_SECRET}

Each table becomes a Spark asset stored by a `HyperIOManager`; `adopt` instead (or as
well) takes assets the project already defines in Python. The library's checks and the
publish asset cover both; `publish` may also list several data sources, each with the
`tables` it holds (one star each). A resource the YAML configures (`database`,
`spark.config`, `publish.server`) is defined by the component under its key; one left out
must come from elsewhere in the project under that key. See docs/component.md.
"""

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Any, Literal

import dagster as dg
from dagster.components.resolved.core_models import (
    DailyPartitionsDefinitionModel,
    HourlyPartitionsDefinitionModel,
    StaticPartitionsDefinitionModel,
    TimeWindowPartitionsDefinitionModel,
    WeeklyPartitionsDefinitionModel,
    resolve_partitions_def,
)
from dagster_pyspark import PySparkResource
from pyspark.sql import DataFrame, SparkSession

from hyper_assets.checks import build_hyper_checks, publish_freshness_check
from hyper_assets.errors import ComponentSpecError
from hyper_assets.home import relative_to
from hyper_assets.io_manager import HyperIOManager
from hyper_assets.tableau.assets import datasource_key, tableau_datasource_asset
from hyper_assets.tableau.client import TableauServerResource
from hyper_assets.tableau.publish_lock import DEFAULT_LOCK_TIMEOUT_SECONDS

_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
#: Tables a SQL statement reads, when `inputs` does not list them: `FROM t` / `JOIN t`.
_SQL_TABLE = re.compile(r"\b(?:FROM|JOIN)\s+`?([A-Za-z_][A-Za-z0-9_]*)`?", re.IGNORECASE)
_PARTITION_KEY = "{partition_key}"
_TEXT_TYPE = re.compile(r"STRING|(?:VAR)?CHAR\(\d+\)")
_STORAGE_KIND = {"dagster/storage_kind": "hyper"}

ResolvedPartitionsDefinition = Annotated[
    dg.PartitionsDefinition | None,
    dg.Resolver(
        resolve_partitions_def,
        model_field_type=HourlyPartitionsDefinitionModel
        | DailyPartitionsDefinitionModel
        | WeeklyPartitionsDefinitionModel
        | TimeWindowPartitionsDefinitionModel
        | StaticPartitionsDefinitionModel,
        description="Partitions of the table: hourly, daily, weekly, time_window or static; "
        "needs `partition_expr`.",
    ),
]
ResolvedAutomationCondition = Annotated[
    dg.AutomationCondition | None,
    dg.Resolver.default(
        model_field_type=str | None,
        description="When Dagster materialises it, e.g. "
        "\"{{ dg.AutomationCondition.on_cron('0 * * * *') }}\".",
    ),
]


@dataclass(frozen=True)
class FileSource(dg.Resolvable):
    """Files Spark reads into a table."""

    format: Literal["parquet", "csv", "json"]
    path: Annotated[
        str,
        dg.Resolver.default(
            description="A file, directory or glob, relative to the project root, or a URI "
            "Spark reads (s3://...). A partitioned table puts {partition_key} in it: a run "
            "reads each partition's files."
        ),
    ]
    options: Annotated[
        Mapping[str, str],
        dg.Resolver.default(description='Spark reader options, e.g. {header: "true"}.'),
    ] = field(default_factory=dict)


@dataclass(frozen=True)
class ColumnSpec(dg.Resolvable):
    """A column the table has: its values are cast to `type` before they are stored."""

    name: str
    type: Annotated[str, dg.Resolver.default(description="A Spark SQL type: INT, DATE, ...")]
    description: str | None = None


@dataclass(frozen=True)
class TableYaml(dg.Resolvable):
    """One table of the extract, built by Spark from files or from SQL over other tables."""

    name: Annotated[str, dg.Resolver.default(description="Table and asset name.")]
    source: FileSource | None = None
    sql: Annotated[
        str | None,
        dg.Resolver.default(
            description="Spark SQL over other tables of this component, by name. A "
            "partitioned table may use :partition_key, :partition_start, :partition_end."
        ),
    ] = None
    inputs: Annotated[
        Sequence[str] | None,
        dg.Resolver.default(description="Tables `sql` reads; default: its FROM/JOIN names."),
    ] = None
    columns: Annotated[
        Sequence[ColumnSpec],
        dg.Resolver.default(description="The columns, in order; known before any run."),
    ] = ()
    schema_name: Annotated[
        str | None, dg.Resolver.default(description='Hyper schema; default "Extract".')
    ] = None
    primary_key: Sequence[str] = ()
    foreign_keys: Annotated[
        Mapping[str, str],
        dg.Resolver.default(description='Column to "schema.table.column" (or "table.column").'),
    ] = field(default_factory=dict)
    write_mode: Annotated[
        Literal["replace", "append", "upsert"],
        dg.Resolver.default(
            description="replace: full refresh (or a partition replace); append; upsert "
            "(by primary_key)."
        ),
    ] = "replace"
    partitions_def: ResolvedPartitionsDefinition = None
    partition_expr: Annotated[
        str | None, dg.Resolver.default(description="The column partitions select rows by.")
    ] = None
    not_null: Annotated[
        Sequence[str], dg.Resolver.default(description="Columns a check keeps free of NULL.")
    ] = ()
    schema_evolution: Annotated[
        str | None,
        dg.Resolver.default(
            description="add_columns: an append, upsert or partition write whose rows have a "
            "column the table lacks adds it (NULL in the stored rows); default: refused."
        ),
    ] = None
    geography_columns: Annotated[
        Sequence[str],
        dg.Resolver.default(
            description='String columns of well-known text ("POINT(-73.78 40.64)") stored '
            "as GEOGRAPHY, which Tableau maps."
        ),
    ] = ()
    description: str | None = None
    owners: Sequence[str] = ()
    tags: Mapping[str, str] = field(default_factory=dict)
    automation_condition: ResolvedAutomationCondition = None


@dataclass(frozen=True)
class SparkSpec(dg.Resolvable):
    """The Spark session the tables are built with."""

    resource_key: str = "pyspark"
    config: Annotated[
        Mapping[str, str] | None,
        dg.Resolver.default(
            description="Spark settings; given, the component defines the PySparkResource."
        ),
    ] = None


@dataclass(frozen=True)
class AdoptSpec(dg.Resolvable):
    """Assets the project already defines in Python, stored by a `HyperIOManager`."""

    defs_path: Annotated[
        str,
        dg.Resolver.default(
            description="Where the project defines them, relative to the defs folder "
            "(a Python file or folder)."
        ),
    ]
    keys: Sequence[str] = ()
    groups: Sequence[str] = ()
    not_null: Annotated[
        Mapping[str, Sequence[str]],
        dg.Resolver.default(description="Asset key to columns a check keeps free of NULL."),
    ] = field(default_factory=dict)


@dataclass(frozen=True)
class ChecksSpec(dg.Resolvable):
    """The library's checks (hyper_assets.checks), run inside Hyper."""

    enabled: bool = True
    min_row_ratio: Annotated[
        float | None,
        dg.Resolver.default(
            description="A partition below this share of the previous run's rows fails "
            "(null: no row-count check)."
        ),
    ] = 0.5
    row_count_severity: Literal["ERROR", "WARN"] = "ERROR"
    partitioned: Annotated[
        bool,
        dg.Resolver.default(
            description="Check a partitioned table per partition (Dagster's partitioned "
            "asset checks, a preview in 1.13); false: one result for the whole table."
        ),
    ] = True
    publish_max_lag_minutes: Annotated[
        float | None,
        dg.Resolver.default(description="Fail when a change waits longer to be published."),
    ] = None


@dataclass(frozen=True)
class TableauServerSpec(dg.Resolvable):
    """The Tableau server; the token secret is read from an environment variable."""

    server_url: str
    token_name: str
    token_secret_env: Annotated[
        str, dg.Resolver.default(description="Name of the variable holding the token secret.")
    ]
    site: str = ""
    verify_tls: bool = True
    project_match_case: Annotated[
        bool,
        dg.Resolver.default(
            description="Find the project by its exact letter case only; by default a name "
            "in another case finds it when exactly one project matches regardless of case."
        ),
    ] = False


@dataclass(frozen=True)
class PublishSpec(dg.Resolvable):
    """A published data source: an asset downstream of the tables it holds."""

    datasource: str
    project: str = "Default"
    tables: Annotated[
        Sequence[str] | None,
        dg.Resolver.default(
            description='The tables it holds ("table" or "schema.table"), one star: one '
            "fact table reaching the others by foreign keys; default: every table."
        ),
    ] = None
    key: Annotated[
        str | None,
        dg.Resolver.default(description="Asset key; default: dagster-tableau's for the name."),
    ] = None
    resource_key: str = "tableau"
    lock_timeout_seconds: Annotated[
        float,
        dg.Resolver.default(
            description="How long a publish waits for another one of this data source to "
            "finish before it fails with PublishLockedError; default: two hours."
        ),
    ] = DEFAULT_LOCK_TIMEOUT_SECONDS
    server: Annotated[
        TableauServerSpec | None,
        dg.Resolver.default(description="Given, the component defines the resource."),
    ] = None
    automation_condition: ResolvedAutomationCondition = None
    description: str | None = None
    owners: Sequence[str] = ()
    tags: Mapping[str, str] = field(default_factory=dict)


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
    tables: Sequence[TableYaml] = ()
    adopt: AdoptSpec | None = None
    spark: SparkSpec = field(default_factory=SparkSpec)
    checks: ChecksSpec = field(default_factory=ChecksSpec)
    publish: Annotated[
        PublishSpec | Sequence[PublishSpec] | None,
        dg.Resolver.default(
            description="The data source published from the file, or a list of them (one "
            "star each, chosen by `tables`)."
        ),
    ] = None
    group_name: str | None = None
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
        names = _check_names(self.tables)
        root = context.project_root
        tables = [self._table_asset(i, t, names, root) for i, t in enumerate(self.tables)]
        adopted = _adopted(self.adopt, self.hyper_io_manager_key, context) if self.adopt else []
        checks = self._checks(tables, adopted)
        published = [
            self._publish(spec, where, [*tables, *adopted]) for where, spec in self._publishes
        ]
        _check_distinct(published, self._publishes)
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

    def _table_asset(
        self, index: int, table: TableYaml, names: set[str], root: Path
    ) -> dg.AssetsDefinition:
        where = f"attributes.tables[{index}]"
        inputs = _inputs(table, names, where)
        metadata = _table_metadata(table, where)
        source = table.source
        if source and (table.partitions_def is None) == (_PARTITION_KEY in source.path):
            raise ComponentSpecError(
                f"{where}.source.path",
                f"a partitioned table's path holds {_PARTITION_KEY} (a run reads only its "
                f"partitions' files), an unpartitioned one's does not; table {table.name!r} is "
                f"{'not ' if table.partitions_def is None else ''}partitioned",
            )
        spark_key = self.spark.resource_key
        columns = tuple(table.columns)

        @dg.asset(
            key=table.name,
            ins={name: dg.AssetIn(key=name) for name in inputs},
            description=table.description or _describe(table),
            group_name=self.group_name,
            owners=[*self.owners, *table.owners] or None,
            tags={**self.tags, **table.tags, **_STORAGE_KIND},
            kinds={"spark", "hyper"},
            metadata=metadata,
            partitions_def=table.partitions_def,
            backfill_policy=_backfill_policy(table.partitions_def),
            io_manager_key=self.hyper_io_manager_key,
            required_resource_keys={spark_key},
            automation_condition=table.automation_condition,
        )
        def _build(context: dg.AssetExecutionContext, **upstream: DataFrame) -> DataFrame:
            pyspark = getattr(context.resources, spark_key)
            frame = (
                _read(pyspark.spark_session, source, context, root)
                if source
                else _query(pyspark.spark_session, table.sql or "", upstream, context)
            )
            return _cast(frame, columns, where, table.name)

        return _build

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

    @property
    def _publishes(self) -> list[tuple[str, PublishSpec]]:
        """Each data source with where the YAML declares it."""
        if self.publish is None:
            return []
        if isinstance(self.publish, PublishSpec):
            return [("attributes.publish", self.publish)]
        return [(f"attributes.publish[{i}]", spec) for i, spec in enumerate(self.publish)]

    def _publish(
        self, spec: PublishSpec, where: str, assets: Sequence[dg.AssetsDefinition]
    ) -> dg.AssetsDefinition:
        key = (
            dg.AssetKey.from_user_string(spec.key) if spec.key else datasource_key(spec.datasource)
        )
        if any(key in a.keys for a in assets):
            raise ComponentSpecError(
                f"{where}.key",
                f"data source {spec.datasource!r} would get {key.to_user_string()!r}, the key of "
                f"table asset {key.to_user_string()}; give the publish asset another key",
            )
        published = tableau_datasource_asset(
            datasource=spec.datasource,
            project=spec.project,
            deps=_held(assets, spec.tables, f"{where}.tables"),
            key=key,
            group_name=self.group_name,
            io_manager_key=self.hyper_io_manager_key,
            tableau_key=spec.resource_key,
            automation_condition=spec.automation_condition,
            tables=list(spec.tables) if spec.tables is not None else None,
            lock_timeout_seconds=spec.lock_timeout_seconds,
        )
        owners = [*self.owners, *spec.owners]
        return dg.map_asset_specs(
            lambda s: s.replace_attributes(
                description=spec.description or s.description,
                owners=owners or s.owners,
                tags={**s.tags, **self.tags, **spec.tags},
            ),
            [published],
        )[0]

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
                token_name=server.token_name,
                token_secret=dg.EnvVar(server.token_secret_env),
                verify_tls=server.verify_tls,
                project_match_case=server.project_match_case,
            )
        return resources


def _check_names(tables: Sequence[TableYaml]) -> set[str]:
    seen: set[str] = set()
    for i, table in enumerate(tables):
        where = f"attributes.tables[{i}]"
        if not _NAME.fullmatch(table.name):
            raise ComponentSpecError(
                f"{where}.name",
                f"{table.name!r} is not a name Dagster keys and Spark views take: use letters, "
                "digits and _ (set `schema_name` for the Hyper schema)",
            )
        if table.name in seen:
            raise ComponentSpecError(f"{where}.name", f"table {table.name!r} is declared twice")
        if (table.source is None) == (table.sql is None):
            raise ComponentSpecError(where, f"table {table.name!r} needs one of source, sql")
        seen.add(table.name)
    return seen


def _check_distinct(
    published: Sequence[dg.AssetsDefinition], specs: Sequence[tuple[str, PublishSpec]]
) -> None:
    """Two data sources of one name, or of one asset key, would overwrite each other."""
    seen: dict[tuple[str, str] | dg.AssetKey, str] = {}
    for asset, (where, spec) in zip(published, specs, strict=True):
        for mark, field_name in (
            ((spec.project, spec.datasource), "datasource"),
            (asset.key, "key"),
        ):
            if mark in seen:
                raise ComponentSpecError(
                    f"{where}.{field_name}",
                    f"data source {spec.datasource!r} of project {spec.project!r} has the "
                    f"{field_name} of {seen[mark]}: each data source needs its own",
                )
            seen[mark] = where


def _held(
    assets: Sequence[dg.AssetsDefinition], tables: Sequence[str] | None, where: str
) -> list[dg.AssetsDefinition]:
    """The assets whose table a data source holds (`"table"` or `"schema.table"`), in order;
    every asset without `tables`."""
    if tables is None:
        return list(assets)
    names = {_table_names(a): a for a in assets}
    unknown = [
        t for t in tables if not any(t in (table, f"{schema}.{table}") for schema, table in names)
    ]
    if not tables or unknown:
        known = sorted(f"{schema}.{table}" for schema, table in names)
        raise ComponentSpecError(
            where,
            f"names {unknown}, not tables of this component; it stores {known}"
            if unknown
            else f"names no table; list some of {known}, or leave `tables` out for every one",
        )
    return [a for (schema, table), a in names.items() if {table, f"{schema}.{table}"} & set(tables)]


def _table_names(asset: dg.AssetsDefinition) -> tuple[str, str]:
    """(schema, table) an asset of one key is stored as (the IO manager's defaults)."""
    metadata = asset.specs_by_key[asset.key].metadata
    path = asset.key.path
    schema = metadata.get("schema") or (path[-2] if len(path) > 1 else "Extract")
    return schema, metadata.get("table") or path[-1]


def _inputs(table: TableYaml, names: set[str], where: str) -> tuple[str, ...]:
    """The tables `table`'s SQL reads: `inputs`, else its FROM/JOIN names among `names`."""
    if table.sql is None:
        if table.inputs:
            raise ComponentSpecError(f"{where}.inputs", "only a table built from `sql` has inputs")
        return ()
    if table.inputs is None:
        found = dict.fromkeys(_SQL_TABLE.findall(table.sql))
        return tuple(n for n in found if n in names and n != table.name)
    unknown = [n for n in table.inputs if n not in names or n == table.name]
    if unknown:
        raise ComponentSpecError(
            f"{where}.inputs",
            f"{unknown} are not other tables of this component; it declares {sorted(names)}",
        )
    return tuple(table.inputs)


def _table_metadata(table: TableYaml, where: str) -> dict[str, Any]:
    """What the IO manager and the checks read, and the column schema when declared."""
    if table.partitions_def is not None and not table.partition_expr:
        raise ComponentSpecError(
            f"{where}.partition_expr",
            f"table {table.name!r} is partitioned: name the column its partitions select by",
        )
    if table.write_mode == "upsert" and not table.primary_key:
        raise ComponentSpecError(
            f"{where}.primary_key", f"table {table.name!r} upserts, which needs a primary key"
        )
    metadata: dict[str, Any] = {}
    if table.schema_name:
        metadata["schema"] = table.schema_name
    if table.primary_key:
        metadata["primary_key"] = list(table.primary_key)
    if table.foreign_keys:
        metadata["foreign_keys"] = dict(table.foreign_keys)
    if table.partition_expr:
        metadata["partition_expr"] = table.partition_expr
    if table.write_mode != "replace":
        metadata["write_mode"] = table.write_mode
    metadata |= _evolution_metadata(table, where)
    metadata |= _geography_metadata(table, where)
    if table.columns:
        declared = [c.name for c in table.columns]
        for label, listed in (("primary_key", table.primary_key), ("not_null", table.not_null)):
            unknown = [c for c in listed if c not in declared]
            if unknown:
                raise ComponentSpecError(
                    f"{where}.{label}", f"names {unknown}, not among its columns {declared}"
                )
        metadata["dagster/column_schema"] = dg.TableSchema(
            columns=[
                dg.TableColumn(
                    c.name,
                    c.type.upper(),
                    description=c.description,
                    constraints=dg.TableColumnConstraints(
                        unique=tuple(table.primary_key) == (c.name,)
                    ),
                )
                for c in table.columns
            ]
        )
    return metadata


def _evolution_metadata(table: TableYaml, where: str) -> dict[str, str]:
    """`schema_evolution` as the IO manager reads it, for the writes that keep rows."""
    if table.schema_evolution is None:
        return {}
    if table.schema_evolution != "add_columns":
        raise ComponentSpecError(
            f"{where}.schema_evolution",
            f"table {table.name!r} gives {table.schema_evolution!r}; use add_columns (new "
            "columns are added, NULL in the stored rows) or leave it out (they are refused)",
        )
    if table.write_mode == "replace" and table.partitions_def is None:
        raise ComponentSpecError(
            f"{where}.schema_evolution",
            f"table {table.name!r} is replaced whole on each run, which takes new columns "
            "anyway; add_columns is for append, upsert or partitioned tables: leave it out",
        )
    return {"schema_evolution": "add_columns"}


def _geography_metadata(table: TableYaml, where: str) -> dict[str, list[str]]:
    """`geography_columns` as the IO manager reads it: declared string columns, if declared."""
    names = list(table.geography_columns)
    if not names:
        return {}
    if not all(n.strip() for n in names) or len(set(names)) < len(names):
        raise ComponentSpecError(
            f"{where}.geography_columns",
            f"table {table.name!r} gives {names}; list each column once, by name",
        )
    declared = {c.name: c.type.strip().upper() for c in table.columns}
    if declared:
        wrong = [n for n in names if not _TEXT_TYPE.fullmatch(declared.get(n, ""))]
        if wrong:
            raise ComponentSpecError(
                f"{where}.geography_columns",
                f"table {table.name!r} names {wrong}, which are not STRING columns among "
                f"{sorted(declared)}: geography arrives as well-known text, e.g. "
                '"POINT(-73.78 40.64)", in a column declared STRING',
            )
    return {"geography_columns": names}


def _describe(table: TableYaml) -> str:
    if table.source:
        return f"Spark reads {table.source.format} {table.source.path}."
    return f"Spark SQL:\n\n```sql\n{table.sql}\n```"


def _backfill_policy(partitions: dg.PartitionsDefinition | None) -> dg.BackfillPolicy | None:
    """Time windows backfill in one run (one wide window); static keys one per run."""
    if isinstance(partitions, dg.TimeWindowPartitionsDefinition):
        return dg.BackfillPolicy.single_run()
    return None


def _read(
    spark: SparkSession, source: FileSource, context: dg.AssetExecutionContext, root: Path
) -> DataFrame:
    """The source's files (of the run's partitions); a URI (s3://...) is read as given."""
    path = source.path if "://" in source.path else str(root / source.path)
    paths = (
        [path.replace(_PARTITION_KEY, key) for key in context.partition_keys]
        if _PARTITION_KEY in path
        else [path]
    )
    return spark.read.format(source.format).options(**source.options).load(paths)


def _query(
    spark: SparkSession,
    sql: str,
    upstream: Mapping[str, DataFrame],
    context: dg.AssetExecutionContext,
) -> DataFrame:
    for name, frame in upstream.items():
        frame.createOrReplaceTempView(name)
    used = {p: v for p, v in _sql_parameters(context).items() if re.search(rf":{p}\b", sql)}
    return spark.sql(sql, args=used or None)


def _sql_parameters(context: dg.AssetExecutionContext) -> dict[str, str]:
    """The run's partition key (one-partition runs) and time window (wall-clock
    'YYYY-MM-DD HH:MM:SS' in the partitions' time zone), for `:name` markers in SQL."""
    partitions = context.assets_def.partitions_def
    if partitions is None:
        return {}
    keys = context.partition_keys
    args = {"partition_key": keys[0]} if len(keys) == 1 else {}
    if isinstance(partitions, dg.TimeWindowPartitionsDefinition):
        start, end = context.partition_time_window
        args["partition_start"] = start.strftime("%Y-%m-%d %H:%M:%S")
        args["partition_end"] = end.strftime("%Y-%m-%d %H:%M:%S")
    return args


def _cast(frame: DataFrame, columns: Sequence[ColumnSpec], where: str, name: str) -> DataFrame:
    """The declared columns, in order, cast to their types; none declared: `frame` as is."""
    if not columns:
        return frame
    missing = [c.name for c in columns if c.name not in frame.columns]
    if missing:
        raise ComponentSpecError(
            f"{where}.columns",
            f"table {name!r} declares {missing}, which its rows lack; they have {frame.columns}",
        )
    return frame.select(*(frame[c.name].cast(c.type).alias(c.name) for c in columns))


def _adopted(
    adopt: AdoptSpec, io_manager_key: str, context: dg.ComponentLoadContext
) -> list[dg.AssetsDefinition]:
    """The assets `adopt` selects by key or group from the definitions at its defs path.

    They stay defined there: the component adds checks and the publish, not the assets.
    """
    where = "attributes.adopt"
    if not adopt.keys and not adopt.groups:
        raise ComponentSpecError(where, "select assets by `keys`, `groups` or both")
    found = context.build_defs(Path(adopt.defs_path)).assets or []
    candidates = [a for a in found if isinstance(a, dg.AssetsDefinition) and a.is_materializable]
    keys = {dg.AssetKey.from_user_string(k) for k in adopt.keys}
    chosen = [
        a
        for a in candidates
        if a.keys & keys or set(a.group_names_by_key.values()) & set(adopt.groups)
    ]
    known = {k for a in candidates for k in a.keys}
    missing = sorted(k.to_user_string() for k in keys - known)
    if missing:
        raise ComponentSpecError(
            f"{where}.keys",
            f"{missing} are not assets of {adopt.defs_path}; it defines "
            f"{sorted(k.to_user_string() for k in known)}",
        )
    groups = {g for a in candidates for g in a.group_names_by_key.values()}
    if set(adopt.groups) - groups:
        raise ComponentSpecError(
            f"{where}.groups",
            f"{sorted(set(adopt.groups) - groups)} are not groups there; it has {sorted(groups)}",
        )
    multi = [a.node_def.name for a in chosen if len(a.keys) != 1]
    if multi:
        raise ComponentSpecError(
            where, f"{multi} define several assets each; adopt assets of one table each"
        )
    elsewhere = {
        a.key.to_user_string(): a.get_io_manager_key_for_asset_key(a.key)
        for a in chosen
        if a.get_io_manager_key_for_asset_key(a.key) != io_manager_key
    }
    if elsewhere:
        raise ComponentSpecError(
            "attributes.io_manager_key",
            f"the checks and the publish read the file of the HyperIOManager under "
            f"{io_manager_key!r}, but adopted assets are stored under other keys: {elsewhere}; "
            "set io_manager_key to theirs",
        )
    return chosen
