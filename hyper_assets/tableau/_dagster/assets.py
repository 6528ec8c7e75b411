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
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import dagster as dg
from pydantic import Field

from hyper_assets._dagster.identity import identity_metadata, latest, read_identity, require_same
from hyper_assets._dagster.located import ExtractSource, Located
from hyper_assets._rows.pending_keys import PendingKey
from hyper_assets.errors import ConfigurationError
from hyper_assets.tableau._dagster.declared import (
    AssetRef,
    copy_check_metadata,
    declared_keys,
    declared_lineage,
    declared_model,
    dep_metadata,
    held_deps,
    held_tables,
    stored_lineage,
    table_names,
)
from hyper_assets.tableau._dagster.resource import TableauServerResource
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
    dependencies = dep_metadata(deps, datasource)
    held = held_tables(tables, dependencies, datasource)
    sources = held_deps(dependencies, held)
    declared = all(isinstance(d, dg.AssetsDefinition | dg.AssetSpec) for d in deps)

    @dg.asset(
        key=dg.AssetKey.from_coercible(key) if key else datasource_key(datasource),
        deps=deps,
        kinds={"tableau"},
        group_name=group_name,
        required_resource_keys={source.resource_key, tableau_key},
        metadata={"datasource": datasource, "project": project}
        | declared_lineage(sources)
        | (declared_model(sources, datasource, chosen=held is not None) if declared else {})
        | (copy_check_metadata(sources, held, datasource) if declared else {}),
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
            table_names(held, located),
            list(sources),
            declared_keys(located, sources),
        )
        lineage = stored_lineage(located, sources)
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
    held = held_tables(tables, None, datasource)

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
            table_names(held, located),
        )
        return dg.Output(None, metadata=metadata)

    return publish_op
