"""The copy check: Tableau's copy of a published data source against the local file,
through Tableau's VizQL Data Service (`hyper_assets.tableau._publish.copy_check` compares).

    copy = tableau_copy_check(published)  # its tables and the fact's partition column
    Definitions(assets=[..., published], asset_checks=[copy], sensors=[
        quality_warning_sensor(published, [copy, *checks])])

`tableau_copy_check` is an asset check on the publish asset: Dagster runs it after each
publish the run materialises (`blocking=True` holds back what is downstream of the
publish until it passes), and on a schedule in a job of its own
(`define_asset_job(selection=AssetSelection.checks(copy))`). Its failure shows in Tableau
as a data quality warning through `quality_warning_sensor`, which watches every check of
the publish asset. `check_tableau_copy` is the same comparison for use outside Dagster.
"""

from collections.abc import Mapping, Sequence
from typing import Any, Literal

import dagster as dg

from hyper_assets._dagster.identity import latest, read_identity, require_same
from hyper_assets._dagster.located import ExtractSource
from hyper_assets._engine.tables import table_label
from hyper_assets._home.home import HyperDatabase
from hyper_assets._rows.outbox import Outbox
from hyper_assets.errors import ConfigurationError, CopyCheckSetupError, VizqlDataServiceError
from hyper_assets.tableau._dagster.declared import published_datasource
from hyper_assets.tableau._dagster.resource import TableauServerResource
from hyper_assets.tableau._publish import positions
from hyper_assets.tableau._publish.copy_check import (
    DEFAULT_LAST_PARTITIONS,
    CopyReport,
    check_copy,
    read_local,
)
from hyper_assets.tableau._publish.plan import Target
from hyper_assets.tableau._rest import vds

CHECK_NAME = "tableau_copy_matches"


def check_tableau_copy(
    database: HyperDatabase,
    tableau: TableauServerResource,
    datasource: str,
    project: str,
    *,
    tables: Sequence[str] | None = None,
    partition_column: str | None = None,
    last_partitions: int = DEFAULT_LAST_PARTITIONS,
    sum_column: str | None = None,
) -> CopyReport:
    """Whether Tableau's copy of data source `datasource` of `project` is the file's.

    Asks the VizQL Data Service, signed in as `tableau` publishes (a Connected App's JWT
    also asking for `tableau:viz_data_service:read`, for this session alone), for the data source's
    model, fields and figures (`CopyReport` says what differs), and compares them with the
    file of `database` as a publish of `tables` (all without) makes it: its tree of tables,
    each table's rows, the fact's SUM of `sum_column` (a numeric non-key column unless
    given), and the count and sum of each of the fact's last `last_partitions` values of
    `partition_column`. Where the site has the service off, the report is `skipped`.

    The file's figures are read first, its connection (and lock) released before the first
    call to Tableau: writers never wait on Tableau's latency. Where the file holds changes
    of the data source's tables that its last publish did not send, the copy cannot equal
    it yet: the report is `skipped`, saying how many, and Tableau is not asked."""
    # The client signs in at its first call: none is made while the file is held.
    with tableau.client(also_scopes=[vds.SCOPE]) as client:
        target = Target(client.site_url, project, datasource)
        with (
            database.reading() as path,
            database.hyper.connect(path, create=False) as connection,
        ):
            outbox = Outbox(path)
            unsent = positions.unsent(outbox, positions.home(outbox, target))
            local = read_local(
                connection,
                datasource,
                tables=tables,
                partition_column=partition_column,
                last_partitions=last_partitions,
                sum_column=sum_column,
            )
        if unsent:
            changed = ", ".join(sorted({table_label(c.table) for c in unsent}))
            why = (
                f"{len(unsent)} change(s) of {changed} written since the last publish are not "
                "in Tableau's copy yet; the check compares the copy once they are published."
            )
            return CopyReport(datasource, skipped=why, unpublished=len(unsent))
        return check_copy(local, client, project)


def tableau_copy_check(
    published: dg.AssetsDefinition,
    *,
    tables: Sequence[str] | None = None,
    partition_column: str | Literal[False] | None = None,
    last_partitions: int = DEFAULT_LAST_PARTITIONS,
    sum_column: str | None = None,
    blocking: bool = False,
    severity: dg.AssetCheckSeverity = dg.AssetCheckSeverity.ERROR,
    io_manager_key: str = "io_manager",
    database_key: str | None = None,
    tableau_key: str = "tableau",
) -> dg.AssetChecksDefinition:
    """`tableau_copy_matches` on `published` (a `tableau_datasource_asset`): Tableau's copy
    of its data source is the file's, as `check_tableau_copy` compares them.

    The tables and the fact's partition column are the publish asset's (its `tables=` and
    the fact's `partition_expr`, which it records in its metadata); `tables` and
    `partition_column` override them (`partition_column=False`: the fact is not
    partitioned, compare whole tables only). A publish asset whose deps are keys or names,
    not definitions or specs, knows no fact: pass `partition_column`, else it is a
    `CopyCheckSetupError`, as is a fact partitioned on several columns.

    It costs `T + 3` VizQL Data Service queries for a data source of `T` tables; where the
    site has the service off it passes, saying it was skipped.
    A file made anew since the publish is an `ExtractRecreatedError`."""
    datasource, project = published_datasource(published, "tableau_copy_check")
    metadata = published.metadata_by_key[published.key]
    label = published.key.to_user_string()
    tables = tables if tables is not None else metadata.get("tables")
    column = _partition_column(metadata, label) if partition_column is None else partition_column
    source = ExtractSource(io_manager_key, database_key)

    @dg.asset_check(
        asset=published,
        name=CHECK_NAME,
        blocking=blocking,
        required_resource_keys={source.resource_key, tableau_key},
        description=f"Tableau's copy of data source {datasource!r} (its model, rows and the "
        "fact's last partitions, read through the VizQL Data Service) is the file's.",
    )
    def _check(context: dg.AssetCheckExecutionContext) -> dg.AssetCheckResult:
        tableau = getattr(context.resources, tableau_key)
        if not isinstance(tableau, TableauServerResource):
            raise ConfigurationError(
                f"The copy check of {label} needs a TableauServerResource under resource key "
                f"{tableau_key!r}; found a {type(tableau).__name__}."
            )
        home = source.locate(context.resources, f"The copy check of {label}").database
        with home.reading() as path:
            require_same(
                read_identity(path),
                latest(context.instance, published.key),
                home.uri,
                f"Checking Tableau's copy of {label}",
                None,
            )
        try:
            report = check_tableau_copy(
                home,
                tableau,
                datasource,
                project,
                tables=tables,
                partition_column=column or None,
                last_partitions=last_partitions,
                sum_column=sum_column,
            )
        except VizqlDataServiceError as err:
            return dg.AssetCheckResult(passed=False, severity=severity, description=str(err))
        if report.skipped:  # a file ahead of its publish is no fault; the service off is
            (context.log.info if report.unpublished else context.log.warning)(report.describe())
        elif not report.passed:
            context.log.error(report.describe())
        return dg.AssetCheckResult(
            passed=report.passed,
            severity=severity,
            description=report.describe(),
            metadata={
                "skipped": report.skipped is not None,
                "unpublished_changes": report.unpublished,
                "queries": report.queries,
                "logical_tables": list(report.tables),
                "figures": len(report.figures),
                "differences": report.failures[:50],
            },
        )

    return _check


def _partition_column(metadata: Mapping[str, Any], label: str) -> str | None:
    """The fact's partition column as the publish asset `label` recorded it (None: the fact
    is not partitioned); `CopyCheckSetupError` where it recorded no fact, or several."""
    if "fact" not in metadata:
        raise CopyCheckSetupError(
            f"tableau_copy_check: publish asset {label!r} records no fact table (its deps "
            "are asset keys or names, or its declared keys make no tree), so the fact's "
            "partition column is unknown. Pass partition_column= (the fact's partition "
            "column, or False where it has none), or give tableau_datasource_asset the "
            "tables' asset definitions or specs as deps."
        )
    found = metadata.get("partition_column")
    if isinstance(found, Mapping):
        raise CopyCheckSetupError(
            f"tableau_copy_check: the fact {metadata['fact']!r} of publish asset {label!r} "
            f"is partitioned on several columns ({dict(found)}); pass partition_column= one "
            "of them."
        )
    return found if isinstance(found, str) else None
