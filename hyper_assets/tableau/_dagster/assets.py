"""The publish as a Dagster op, and as an asset downstream of the tables it publishes.

Both reach the `.hyper` file (its home: a path or an object store) and the Hyper settings
through the `HyperDatabase` resource under `database_key`, or else the `HyperIOManager`
under `io_manager_key` (`hyper_assets._dagster.located`), and the server through the
`TableauServerResource` under `tableau_key`. The asset refuses to publish a file made anew
since its tables were materialised (`hyper_assets._dagster.identity`):

    published = tableau_datasource_asset(
        datasource="Flights", project="Default", deps=[airlines, flights]
    )
"""

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import dagster as dg
from pydantic import Field

from hyper_assets._dagster.identity import identity_metadata, latest, read_identity, require_same
from hyper_assets._dagster.located import ExtractSource, Located
from hyper_assets._dagster.spec import DEFAULT_SCHEMA, TableSpec
from hyper_assets._engine.tables import Catalog
from hyper_assets._rows.pending_keys import PendingKey
from hyper_assets.errors import ConfigurationError, DataModelError
from hyper_assets.tableau._dagster.resource import TableauServerResource
from hyper_assets.tableau._publish.model import data_model, preview
from hyper_assets.tableau._publish.publish import (
    DEFAULT_LOCK_TIMEOUT_SECONDS,
    DEFAULT_MAX_PAYLOAD_BYTES,
    Publisher,
    PublishResult,
)


class PublishConfig(dg.Config):
    """Run configuration of a publish."""

    full: bool = Field(
        default=False,
        description="Publish the whole file, overwriting the data source, and drop an "
        "unfinished plan. Use it when an update keeps failing.",
    )


def _publish(
    context: dg.OpExecutionContext,
    config: PublishConfig,
    datasource: str,
    project: str,
    located: Located,
    tableau_key: str,
    max_payload_bytes: int,
    lock_timeout_seconds: float,
    tables: Sequence[str] | None,
    deps: Sequence[dg.AssetKey] = (),
    declared: Sequence[PendingKey] = (),
) -> dict[str, Any]:
    """Publishes the file; refuses first when it is not the extract the latest
    materialisation of one of `deps` was written to, or when it lacks a foreign key of
    `declared` (what the asset's `data_model` was shown from)."""
    tableau = getattr(context.resources, tableau_key)
    if not isinstance(tableau, TableauServerResource):
        raise ConfigurationError(
            f"Publishing {datasource!r} needs a TableauServerResource under resource key "
            f"{tableau_key!r}; found a {type(tableau).__name__}."
        )
    home = located.database
    records = [r for key in deps for r in latest(context.instance, key)]
    with home.publishing() as (database, saved):
        identity = read_identity(database)
        require_same(identity, records, home.uri, f"Publishing {datasource!r}", None)
        with tableau.client() as client:
            publisher = Publisher(
                database,
                home.hyper,
                client,
                datasource,
                project,
                max_payload_bytes=max_payload_bytes,
                lock_timeout_seconds=lock_timeout_seconds,
                logger=context.log,
                saved=saved,
                tables=tables,
                declared=declared,
            )
            result = publisher.publish(full=config.full)
        where = Destination(tableau.server_url, tableau.site, project, datasource)
        size = database.stat().st_size
    recorded = identity_metadata(identity, home.uri) if identity else {}
    return publish_metadata(result, where, size) | recorded


@dataclass(frozen=True)
class Destination:
    """Where a publish went: the server, the site's content URL, the project, the name."""

    server_url: str
    site: str
    project: str
    datasource: str


#: The columns of the `sent` table: one row per table and action of a publish.
SENT_SCHEMA = dg.TableSchema(
    columns=[
        dg.TableColumn("table", "string", description="Table of the .hyper file."),
        dg.TableColumn(
            "action",
            "string",
            description="publish: the whole table, in a whole-file publish; replace: the "
            "table's rows replaced; window: a partition's rows replaced; insert: appended "
            "rows; upsert: rows replaced by key.",
        ),
        dg.TableColumn("rows", "int", description="Rows sent for this table and action."),
    ]
)


def _readable_bytes(n: int) -> str:
    """Bytes in the unit people read: 131072 -> "128.0 KiB"."""
    units = ("B", "KiB", "MiB", "GiB")
    value, index = float(n), 0
    while value >= 1024 and index < len(units) - 1:
        value, index = value / 1024, index + 1
    return f"{n} B" if index == 0 else f"{value:.1f} {units[index]}"


def publish_metadata(result: PublishResult, where: Destination, file_bytes: int) -> dict[str, Any]:
    """A publish's result as Dagster metadata: what was sent, where, and how big against the
    data source's copy (as its last full publish sent it; the file before that is known).

    `datasource_url` links the data source's page in Tableau's web client, as the server gives
    it (`webpageUrl`, which addresses the page by a number, not by `datasource_id`). When the
    server gives none, it is a text saying so instead of a link: no page address is made up.
    """
    # The bytes are the requests', not a table's: `payload_bytes`, once.
    sent = [
        dg.TableRecord({"table": row.table, "action": row.action, "rows": row.rows})
        for row in result.rows
    ]
    # Against the data source's copy (a tree of some tables) when known, else the file.
    whole, what = (
        (result.copy_bytes, "the data source's copy is")
        if result.copy_bytes
        else (file_bytes, "the file is")
    )
    share = f" ({result.payload_bytes / whole:.1%})" if whole else ""
    return {
        "publish": result.kind,
        "reason": result.reason,
        "sent": dg.MetadataValue.table(sent, SENT_SCHEMA),
        "rows_sent": sum(row.rows for row in result.rows),
        "sent_vs_file": f"{_readable_bytes(result.payload_bytes)} sent, {what} "
        f"{_readable_bytes(whole)}" + share,
        "payload_bytes": result.payload_bytes,
        "file_bytes": file_bytes,
        **({"copy_bytes": result.copy_bytes} if result.copy_bytes else {}),
        "data_model": dg.MetadataValue.md(result.model),
        "server": dg.MetadataValue.url(where.server_url),
        "site": where.site or "(default site)",
        "project": where.project,
        "datasource": where.datasource,
        "datasource_id": result.datasource_id,
        "datasource_url": (
            dg.MetadataValue.url(result.webpage_url)
            if result.webpage_url
            else dg.MetadataValue.text(
                f"none: Tableau gave no webpageUrl for it; find data source {where.datasource!r} "
                f"in project {where.project!r}"
            )
        ),
        "tableau_job_ids": ", ".join(result.job_ids)
        or ("none (a whole-file publish has no job)" if result.kind == "full" else "none"),
        "batches": result.batches,
        "changes_sent": result.changes,
        "seconds": result.seconds,
    }


def datasource_key(datasource: str) -> dg.AssetKey:
    """The key dagster-tableau gives a published data source named `datasource`.

    Its translator cleans the name with `re.sub(r"[^A-Za-z0-9_]+", "_", name).lower()`
    (dagster's `clean_name_lower`), so "Étoile" becomes `_toile` there and here, and the
    sheets and dashboards it loads depend on the publish asset.
    """
    return dg.AssetKey([re.sub(r"[^A-Za-z0-9_]+", "_", datasource).lower()])


#: What `deps` takes: an asset (its definition or its spec), its key or `AssetDep`, or the
#: name of an asset of a one-part key; `tables` takes the same, a string there being a table
#: name.
AssetRef = dg.AssetsDefinition | dg.AssetSpec | dg.AssetKey | dg.AssetDep | str

#: A table a data source holds: named (`"table"`, `"schema.table"`), or an asset's key and
#: definition metadata, whose table the IO manager's default schema decides (`Located.spec_for`).
_HeldTable = str | tuple[dg.AssetKey, Mapping[str, Any]]


def _assets(ref: object) -> dict[dg.AssetKey, Mapping[str, Any]] | None:
    """The assets `ref` stands for, each key with its definition metadata; None for a
    string or a value of another type."""
    if isinstance(ref, dg.AssetsDefinition):
        return {k: ref.metadata_by_key.get(k, {}) for k in ref.keys}
    if isinstance(ref, dg.AssetSpec):
        return {ref.key: ref.metadata}
    if isinstance(ref, dg.AssetDep):
        return {ref.asset_key: {}}
    if isinstance(ref, dg.AssetKey):
        return {ref: {}}
    return None


def _refuse(field: str, datasource: str, value: object, strings: str) -> ConfigurationError:
    """`value` in `field` is of no type it takes; `strings`: what a string there names."""
    return ConfigurationError(
        f"{field}= of data source {datasource!r} holds {value!r} ({type(value).__name__}); "
        f"pass assets (@asset definitions or AssetSpecs), AssetKeys, or {strings}."
    )


def _dep_metadata(
    deps: Sequence[AssetRef], datasource: str
) -> dict[dg.AssetKey, Mapping[str, Any]]:
    """Each dependency's key and, for an asset's definition or spec, its definition
    metadata, checked (`TableSpec.parse`: a misspelt key is refused when the definitions
    load, not ignored until a publish refuses the tree)."""
    found: dict[dg.AssetKey, Mapping[str, Any]] = {}
    for dep in deps:
        assets = _assets(dep)
        if assets is None:
            if not isinstance(dep, str):
                raise _refuse("deps", datasource, dep, 'the names of assets ("flights")')
            assets = {dg.AssetKey(dep): {}}
        for key, metadata in assets.items():
            TableSpec.parse(key.path, metadata, DEFAULT_SCHEMA)
        found.update(assets)
    return found


def _held_tables(
    tables: Sequence[AssetRef] | None,
    deps: Mapping[dg.AssetKey, Mapping[str, Any]] | None,
    datasource: str,
) -> list[_HeldTable] | None:
    """`tables` as names and assets' (key, metadata); an asset must be among `deps`, whose
    metadata a bare key takes (None: an op, which has no deps). `ConfigurationError` for a
    value of another type."""
    if tables is None:
        return None
    if not isinstance(tables, list | tuple):
        raise ConfigurationError(
            f"tables= of data source {datasource!r} is {tables!r} ({type(tables).__name__}); "
            'give a list, e.g. tables=[sales, "products"].'
        )
    held: list[_HeldTable] = []
    for table in tables:
        assets = _assets(table)
        if assets is None:
            if not isinstance(table, str):
                raise _refuse("tables", datasource, table, 'table names ("table", "schema.table")')
            held.append(table)
            continue
        for key, metadata in assets.items():
            if deps is not None:
                if key not in deps:
                    raise ConfigurationError(
                        f"tables= of data source {datasource!r} holds asset "
                        f"{key.to_user_string()!r}, which is not in its deps; add it to deps=."
                    )
                metadata = metadata or deps[key]
            else:  # an op's tables, in no deps: checked here
                TableSpec.parse(key.path, metadata, DEFAULT_SCHEMA)
            held.append((key, metadata))
    return held


def _held(
    deps: dict[dg.AssetKey, Mapping[str, Any]], tables: Sequence[_HeldTable] | None
) -> dict[dg.AssetKey, Mapping[str, Any]]:
    """The dependencies whose table the data source holds: all of them without `tables`."""
    if tables is None:
        return deps
    keys = {t[0] for t in tables if not isinstance(t, str)}
    names = {t.rsplit(".", 1)[-1] for t in tables if isinstance(t, str)}
    return {k: m for k, m in deps.items() if k in keys or (m.get("table") or k.path[-1]) in names}


def _table_names(tables: Sequence[_HeldTable] | None, located: Located) -> list[str] | None:
    """The held tables' names in the file (`"schema.table"` for an asset)."""
    if tables is None:
        return None
    return [t if isinstance(t, str) else located.spec_for(t[0].path, t[1]).label for t in tables]


def _declared_model(
    sources: Mapping[dg.AssetKey, Mapping[str, Any]], datasource: str, *, chosen: bool
) -> dict[str, Any]:
    """`data_model`: what the publish will do, from the tables' declared keys (assets of
    one-part keys in schema Extract, the IO manager's default), as the run decides it
    (`preview`): the tree, or the refusal; `chosen`: by tables=. The run reads the file's
    keys, and refuses naming a key declared here that the file lacks."""
    specs = [
        TableSpec.parse(key.path, metadata, DEFAULT_SCHEMA) for key, metadata in sources.items()
    ]
    if not specs:
        return {}
    shown = preview({spec.table: spec.keys for spec in specs}, datasource, chosen=chosen)
    if not chosen:
        shown += (
            "\n\nWithout tables=, the data source holds every table of the file: its deps' "
            "tables are shown."
        )
    return {"data_model": dg.MetadataValue.md(shown)}


def _copy_check_metadata(
    sources: Mapping[dg.AssetKey, Mapping[str, Any]],
    held: Sequence[_HeldTable] | None,
    datasource: str,
) -> dict[str, Any]:
    """What `tableau_copy_check` reads of the publish asset: `tables`, the held tables'
    names (given tables=; an asset's by its table's name, whatever its schema), and the
    tree's `fact` and its `partition_column` (the fact's `partition_expr`, if it has
    one), when the deps' declared keys make a tree."""
    found: dict[str, Any] = {}
    if held is not None:
        found["tables"] = [
            t
            if isinstance(t, str)
            else TableSpec.parse(t[0].path, t[1], DEFAULT_SCHEMA).table.name.unescaped
            for t in held
        ]
    parsed = (
        TableSpec.parse(key.path, metadata, DEFAULT_SCHEMA) for key, metadata in sources.items()
    )
    specs = {spec.table: spec for spec in parsed}
    try:
        tree = data_model(
            {t: s.keys for t, s in specs.items()}, datasource, chosen=held is not None
        )
    except (ConfigurationError, DataModelError):  # no tables, or no tree: the run refuses
        return found
    found["fact"] = specs[tree.fact].label
    expr = specs[tree.fact].partition_expr
    if expr is not None:
        found["partition_column"] = expr if isinstance(expr, str) else dict(expr)
    return found


def _declared_keys(
    located: Located, tables: Mapping[dg.AssetKey, Mapping[str, Any]]
) -> list[PendingKey]:
    """The foreign keys the held tables' assets declare, in the file's names."""
    specs = [located.spec_for(key.path, metadata) for key, metadata in tables.items()]
    return [PendingKey(spec.table, fk) for spec in specs for fk in spec.keys.foreign_keys]


def _lineage(columns: Mapping[dg.AssetKey, tuple[str, Sequence[str]]]) -> dg.TableColumnLineage:
    """Column `table.column` of the data source comes from `column` of the table's asset."""
    return dg.TableColumnLineage(
        {
            f"{table}.{column}": [dg.TableColumnDep(asset_key=key, column_name=column)]
            for key, (table, names) in columns.items()
            for column in names
        }
    )


def _declared_lineage(tables: Mapping[dg.AssetKey, Mapping[str, Any]]) -> dict[str, Any]:
    """Lineage from the tables whose `dagster/column_schema` is known at definition time."""
    known = {
        key: (
            metadata.get("table") or key.path[-1],
            [c.name for c in metadata["dagster/column_schema"].columns],
        )
        for key, metadata in tables.items()
        if isinstance(metadata.get("dagster/column_schema"), dg.TableSchema)
    }
    return {"dagster/column_lineage": _lineage(known)} if known else {}


def _stored_lineage(
    located: Located, tables: Mapping[dg.AssetKey, Mapping[str, Any]]
) -> dg.TableColumnLineage:
    """Lineage from the columns each table has in the file now."""
    columns: dict[dg.AssetKey, tuple[str, Sequence[str]]] = {}
    home = located.database
    with home.reading() as database, home.hyper.connect(database, create=False) as connection:
        catalog = Catalog(connection)
        for key, metadata in tables.items():
            table = located.spec_for(key.path, metadata).table
            if catalog.exists(table):
                names = [c.name for c in catalog.columns(table)]
                columns[key] = (table.name.unescaped, names)
    return _lineage(columns)


def publish_condition(cron: str | None = None, timezone: str = "UTC") -> dg.AutomationCondition:
    """When to publish under Dagster's automation: after its tables' runs, or on a cron.

    Without `cron`: once any table it depends on was updated (any partition), as soon as
    no table and no publish is still running, so a run of several tables publishes once.
    With `cron`: once per tick of `cron` in `timezone`, when nothing is running, whether
    or not a table changed (a publish with nothing to send sends nothing). Pass it as
    `tableau_datasource_asset(automation_condition=...)` and start Dagster's automation
    sensor (`default_automation_condition_sensor`).
    """
    idle = ~dg.AutomationCondition.any_deps_in_progress() & ~dg.AutomationCondition.in_progress()
    if cron is None:
        updated = dg.AutomationCondition.any_deps_updated().since_last_handled()
        return (updated & idle).with_label("after its tables' runs")
    # Dagster types cron_tick_passed for assets alone, since_last_handled for assets and checks.
    passed: dg.AutomationCondition = dg.AutomationCondition.cron_tick_passed(cron, timezone)
    tick = passed.since_last_handled()
    return (tick & idle).with_label(f"on cron {cron} ({timezone})")


def tableau_datasource_asset(
    *,
    datasource: str,
    project: str,
    deps: Sequence[AssetRef],
    key: str | Sequence[str] | dg.AssetKey | None = None,
    group_name: str | None = None,
    io_manager_key: str = "io_manager",
    database_key: str | None = None,
    tableau_key: str = "tableau",
    max_payload_bytes: int = DEFAULT_MAX_PAYLOAD_BYTES,
    automation_condition: dg.AutomationCondition | None = None,
    tables: Sequence[AssetRef] | None = None,
    lock_timeout_seconds: float = DEFAULT_LOCK_TIMEOUT_SECONDS,
) -> dg.AssetsDefinition:
    """An asset that publishes the `.hyper` file as data source `datasource` of `project`.

    Put the tables it publishes in `deps`, so the graph shows where the data source comes
    from. The first run publishes the whole file; later runs send what changed. Its
    `dagster/column_lineage` maps each column `table.column` to the table asset's column:
    at definition time for the deps that declare a `dagster/column_schema`, and after each
    publish for every table in the file. To publish under Dagster's automation, pass
    `automation_condition=publish_condition()`.

    `tables` are the tables of the file the data source holds, every table without it:
    assets of `deps` (their definitions, specs or keys: the table each is stored as) or
    table names (`"table"` or `"schema.table"`). Tableau takes them only as one tree: one
    fact table, reaching every other once through foreign keys; the publish makes the tree
    from the file's keys, a copy of a table per way the fact reaches it
    (`hyper_assets.tableau._publish.model`). Publish each fact of a file as a data source
    of its own.

    `max_payload_bytes` caps each update request's payload file (a server refusing one
    as too large gets it cut smaller). One publish of a data source runs at a time: a
    second waits up to `lock_timeout_seconds` for the first, then raises
    `PublishLockedError` naming it.

    The file is the `HyperDatabase` resource's under `database_key` if given, else the
    `HyperIOManager`'s under `io_manager_key`. A file whose identity is not the one the
    latest materialisation of a table in `deps` recorded (lost and made anew) is an
    `ExtractRecreatedError`, before anything is sent.
    """
    source = ExtractSource(io_manager_key, database_key)
    dependencies = _dep_metadata(deps, datasource)
    held = _held_tables(tables, dependencies, datasource)
    sources = _held(dependencies, held)
    declared = all(isinstance(d, dg.AssetsDefinition | dg.AssetSpec) for d in deps)

    @dg.asset(
        key=dg.AssetKey.from_coercible(key) if key else datasource_key(datasource),
        deps=deps,
        kinds={"tableau"},
        group_name=group_name,
        required_resource_keys={source.resource_key, tableau_key},
        metadata={"datasource": datasource, "project": project}
        | _declared_lineage(sources)
        | (_declared_model(sources, datasource, chosen=held is not None) if declared else {})
        | (_copy_check_metadata(sources, held, datasource) if declared else {}),
        automation_condition=automation_condition,
        description=f"Tableau data source {datasource!r} in project {project!r}.",
    )
    def publish_datasource(
        context: dg.AssetExecutionContext, config: PublishConfig
    ) -> dg.MaterializeResult:
        located = source.locate(context.resources, f"Publishing {datasource!r}")
        metadata = _publish(
            context.op_execution_context,
            config,
            datasource,
            project,
            located,
            tableau_key,
            max_payload_bytes,
            lock_timeout_seconds,
            _table_names(held, located),
            list(sources),
            _declared_keys(located, sources),
        )
        lineage = _stored_lineage(located, sources)
        return dg.MaterializeResult(metadata=metadata | {"dagster/column_lineage": lineage})

    return publish_datasource


def build_publish_op(
    *,
    datasource: str,
    project: str,
    name: str = "publish_to_tableau",
    io_manager_key: str = "io_manager",
    database_key: str | None = None,
    tableau_key: str = "tableau",
    max_payload_bytes: int = DEFAULT_MAX_PAYLOAD_BYTES,
    tables: Sequence[AssetRef] | None = None,
    lock_timeout_seconds: float = DEFAULT_LOCK_TIMEOUT_SECONDS,
) -> dg.OpDefinition:
    """An op that publishes the `.hyper` file (its `tables`, `max_payload_bytes` and
    `lock_timeout_seconds` as `tableau_datasource_asset` says, an asset in `tables` being
    in no deps); wire its `start` input after the writes. The file is found as by
    `tableau_datasource_asset`; an op has no asset deps whose identity it could compare."""
    source = ExtractSource(io_manager_key, database_key)
    held = _held_tables(tables, None, datasource)

    @dg.op(
        name=name,
        ins={"start": dg.In(dg.Nothing)},
        out=dg.Out(dg.Nothing),
        required_resource_keys={source.resource_key, tableau_key},
        tags={"dagster/kind/tableau": ""},
    )
    def publish_op(context: dg.OpExecutionContext, config: PublishConfig) -> dg.Output[None]:
        located = source.locate(context.resources, f"Publishing {datasource!r}")
        metadata = _publish(
            context,
            config,
            datasource,
            project,
            located,
            tableau_key,
            max_payload_bytes,
            lock_timeout_seconds,
            _table_names(held, located),
        )
        return dg.Output(None, metadata=metadata)

    return publish_op
