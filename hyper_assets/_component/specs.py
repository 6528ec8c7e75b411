"""The YAML of `HyperExtractComponent`: its attributes as frozen, resolvable models.

Each field's description is what `dg` shows and docs/component.md explains.
"""

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Annotated, Literal

import dagster as dg
from dagster.components.resolved.core_models import (
    DailyPartitionsDefinitionModel,
    HourlyPartitionsDefinitionModel,
    StaticPartitionsDefinitionModel,
    TimeWindowPartitionsDefinitionModel,
    WeeklyPartitionsDefinitionModel,
    resolve_partitions_def,
)

from hyper_assets.tableau._dagster.resource import ConnectedAppSignIn, TokenSignIn
from hyper_assets.tableau._publish.publish_lock import DEFAULT_LOCK_TIMEOUT_SECONDS
from hyper_assets.tableau._rest import defaults

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

    format: Annotated[
        Literal["parquet", "csv", "json"],
        dg.Resolver.default(description="The files' format: parquet, csv or json."),
    ]
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

    name: Annotated[str, dg.Resolver.default(description="The column's name.")]
    type: Annotated[str, dg.Resolver.default(description="A Spark SQL type: INT, DATE, ...")]
    description: Annotated[
        str | None,
        dg.Resolver.default(description="What the column holds, shown in its asset's schema."),
    ] = None


@dataclass(frozen=True)
class TableYaml(dg.Resolvable):
    """One table of the extract, built by Spark from files or from SQL over other tables."""

    name: Annotated[str, dg.Resolver.default(description="Table and asset name.")]
    source: Annotated[
        FileSource | None,
        dg.Resolver.default(
            description="Files Spark reads into the table: {format, path, options}; or `sql`."
        ),
    ] = None
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
    primary_key: Annotated[
        Sequence[str],
        dg.Resolver.default(
            description="Columns that identify a row: a check keeps them unique and not "
            "NULL, and an upsert replaces rows by them."
        ),
    ] = ()
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
    description: Annotated[
        str | None, dg.Resolver.default(description="The asset's description.")
    ] = None
    owners: Annotated[
        Sequence[str],
        dg.Resolver.default(description="Owners of the asset, besides the component's."),
    ] = ()
    tags: Annotated[
        Mapping[str, str],
        dg.Resolver.default(description="Tags of the asset, besides the component's."),
    ] = field(default_factory=dict)
    automation_condition: ResolvedAutomationCondition = None


@dataclass(frozen=True)
class SparkSpec(dg.Resolvable):
    """The Spark session the tables are built with."""

    resource_key: Annotated[
        str,
        dg.Resolver.default(description="Resource key of the PySparkResource; default pyspark."),
    ] = "pyspark"
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
    keys: Annotated[
        Sequence[str],
        dg.Resolver.default(description="Keys of the assets to adopt; and/or `groups`."),
    ] = ()
    groups: Annotated[
        Sequence[str],
        dg.Resolver.default(description="Groups whose assets are adopted; and/or `keys`."),
    ] = ()
    not_null: Annotated[
        Mapping[str, Sequence[str]],
        dg.Resolver.default(description="Asset key to columns a check keeps free of NULL."),
    ] = field(default_factory=dict)


@dataclass(frozen=True)
class ChecksSpec(dg.Resolvable):
    """The library's checks (hyper_assets._checks.checks), run inside Hyper."""

    enabled: Annotated[
        bool, dg.Resolver.default(description="false: the component defines no checks.")
    ] = True
    min_row_ratio: Annotated[
        float | None,
        dg.Resolver.default(
            description="A partition below this share of the previous run's rows fails "
            "(null: no row-count check)."
        ),
    ] = 0.5
    row_count_severity: Annotated[
        Literal["ERROR", "WARN"],
        dg.Resolver.default(description="The severity of a failed row-count check."),
    ] = "ERROR"
    partitioned: Annotated[
        bool,
        dg.Resolver.default(
            description="Check a partitioned table per partition (Dagster's partitioned "
            "asset checks, a preview feature); false: one result for the whole table."
        ),
    ] = True
    publish_max_lag_minutes: Annotated[
        float | None,
        dg.Resolver.default(description="Fail when a change waits longer to be published."),
    ] = None


@dataclass(frozen=True)
class TokenSignInSpec(dg.Resolvable):
    """A personal access token; its secret is read from an environment variable."""

    name: Annotated[str, dg.Resolver.default(description="The personal access token's name.")]
    secret_env: Annotated[
        str, dg.Resolver.default(description="Name of the variable holding the token secret.")
    ]

    def config(self) -> TokenSignIn:
        return TokenSignIn(name=self.name, secret=dg.EnvVar(self.secret_env))


@dataclass(frozen=True)
class ConnectedAppSignInSpec(dg.Resolvable):
    """A Connected App (direct trust); its secret value is read from an environment variable."""

    client_id: Annotated[str, dg.Resolver.default(description="The Connected App's client id.")]
    secret_id: Annotated[
        str, dg.Resolver.default(description="The id of one of the app's secrets.")
    ]
    secret_value_env: Annotated[
        str, dg.Resolver.default(description="Name of the variable holding the secret value.")
    ]
    username: Annotated[str, dg.Resolver.default(description="The user the app acts as.")]

    def config(self) -> ConnectedAppSignIn:
        return ConnectedAppSignIn(
            client_id=self.client_id,
            secret_id=self.secret_id,
            secret_value=dg.EnvVar(self.secret_value_env),
            username=self.username,
        )


@dataclass(frozen=True)
class TableauServerSpec(dg.Resolvable):
    """The Tableau server and how to sign in; secrets are read from environment variables."""

    server_url: Annotated[
        str, dg.Resolver.default(description="Base URL, e.g. https://tableau.example.com.")
    ]
    sign_in: Annotated[
        TokenSignInSpec | ConnectedAppSignInSpec,
        dg.Resolver.default(
            description="{name, secret_env} (a personal access token) or {client_id, "
            "secret_id, secret_value_env, username} (a Connected App)."
        ),
    ]
    site: Annotated[
        str, dg.Resolver.default(description='Site content URL; "" is the default site.')
    ] = defaults.SITE
    verify_tls: Annotated[
        bool, dg.Resolver.default(description="Verify the server's certificate.")
    ] = defaults.VERIFY_TLS
    project_match_case: Annotated[
        bool,
        dg.Resolver.default(
            description="Find the project by its exact letter case only; by default a name "
            "in another case finds it when exactly one project matches regardless of case."
        ),
    ] = defaults.PROJECT_MATCH_CASE


@dataclass(frozen=True)
class PublishSpec(dg.Resolvable):
    """A published data source: an asset downstream of the tables it holds."""

    datasource: Annotated[str, dg.Resolver.default(description="The published data source's name.")]
    project: Annotated[
        str,
        dg.Resolver.default(
            description='The project it is published to: a name, or a path ("Sales/EMEA").'
        ),
    ] = "Default"
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
    resource_key: Annotated[
        str,
        dg.Resolver.default(
            description="Resource key of the TableauServerResource; default tableau."
        ),
    ] = "tableau"
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
    description: Annotated[
        str | None, dg.Resolver.default(description="The publish asset's description.")
    ] = None
    owners: Annotated[
        Sequence[str],
        dg.Resolver.default(description="Owners of the publish asset, besides the component's."),
    ] = ()
    tags: Annotated[
        Mapping[str, str],
        dg.Resolver.default(description="Tags of the publish asset, besides the component's."),
    ] = field(default_factory=dict)
