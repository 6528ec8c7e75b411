"""A sensor that shows failed checks in Tableau, as a data quality warning on the data source.

    warnings = quality_warning_sensor(published, checks)
    Definitions(assets=[..., published], asset_checks=checks, sensors=[warnings], ...)

A failed blocking check on a table the data source publishes keeps the publish from
running, so the dashboards keep the last good data without saying so: the sensor watches
those checks' results, and every check on the publish asset itself (such as
`published_copy_fresh`), and sets one warning on the published data source naming what
failed; it removes it once they pass again. A failed blocking check of severity ERROR
makes the warning severe; the type is STALE when only the publish asset's checks fail
(it is late), else WARNING. A partitioned check counts each partition's latest result.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass

import dagster as dg

from hyper_assets._dagster.compat import check_history
from hyper_assets.errors import ConfigurationError
from hyper_assets.tableau._dagster.declared import published_datasource
from hyper_assets.tableau._dagster.resource import TableauServerResource
from hyper_assets.tableau._rest.quality import QualityWarning, WarningType, set_quality_warning

#: Check results read per check and tick, newest first (covers as many recent partitions).
HISTORY = 200
#: Longest message the sensor sets; Tableau shows it in a banner.
MAX_MESSAGE = 1000
DONE = {"SUCCEEDED", "FAILED"}


@dataclass(frozen=True)
class _Failure:
    check: dg.AssetCheckKey
    partition: str | None
    description: str
    blocking_error: bool  # a blocking check of severity ERROR on a published table
    on_published: bool  # a check of the publish asset itself, such as its freshness

    @property
    def label(self) -> str:
        where = f" [{self.partition}]" if self.partition else ""
        return f"{self.check.asset_key.to_user_string()} {self.check.name}{where}"


def quality_warning_sensor(
    published: dg.AssetsDefinition,
    checks: Sequence[dg.AssetChecksDefinition],
    *,
    tableau_key: str = "tableau",
    name: str | None = None,
    minimum_interval_seconds: int = 60,
    default_status: dg.DefaultSensorStatus = dg.DefaultSensorStatus.STOPPED,
) -> dg.SensorDefinition:
    """A sensor keeping a data quality warning on `published`'s data source while checks fail.

    `published` is a `tableau_datasource_asset`; of `checks` it watches the blocking ones
    on the tables it publishes and all on `published` itself. It calls Tableau only when
    what failed changed since its last tick.
    """
    datasource, project = published_datasource(published, "quality_warning_sensor")
    label = published.key.to_user_string()
    upstream = published.asset_deps[published.key]
    watched = {
        spec.key: spec.blocking and spec.asset_key != published.key
        for check in checks
        for spec in check.check_specs
        if spec.asset_key == published.key or (spec.asset_key in upstream and spec.blocking)
    }
    if not watched:
        raise ConfigurationError(
            f"quality_warning_sensor: none of the checks given is blocking on a table {label} "
            "publishes, or on it: make a table's check blocking (build_hyper_checks' are)."
        )

    @dg.sensor(
        name=name or f"{published.key.to_python_identifier()}_quality_warning",
        minimum_interval_seconds=minimum_interval_seconds,
        default_status=default_status,
        required_resource_keys={tableau_key},
        description=f"Sets a data quality warning on Tableau data source {datasource!r} while "
        f"checks of {label} or of the tables it publishes fail; removes it when they pass.",
    )
    def _sensor(context: dg.SensorEvaluationContext) -> dg.SensorResult:
        tableau = getattr(context.resources, tableau_key)
        if not isinstance(tableau, TableauServerResource):
            raise ConfigurationError(
                f"quality_warning_sensor of {label} needs a TableauServerResource under "
                f"resource key {tableau_key!r}, found {type(tableau).__name__}."
            )
        warning = _warning(_failures(context.instance, watched, published.key))
        state = json.dumps(None if warning is None else [warning.type, warning.message])
        if state == context.cursor:
            return dg.SensorResult(skip_reason="No check changed its result.")
        with tableau.client() as client:
            where = client.find_datasource(datasource, client.project(project).id)
            if where is None:
                return dg.SensorResult(
                    skip_reason=f"Data source {datasource!r} is not published yet."
                )
            outcome = set_quality_warning(client, where.id, warning)
        what = warning.message if warning else "every watched check passes"
        done = f"Data quality warning on {datasource!r} {outcome}: {what}"
        context.log.info(done)
        return dg.SensorResult(skip_reason=done, cursor=state)  # it starts no runs

    return _sensor


def _failures(
    instance: dg.DagsterInstance, watched: dict[dg.AssetCheckKey, bool], published: dg.AssetKey
) -> list[_Failure]:
    """The watched checks whose latest result (per partition) failed, by name."""
    failures = []
    for key, blocking in watched.items():
        seen: set[str | None] = set()
        for run in check_history(instance, key, HISTORY):
            partition, evaluation = run.partition, run.evaluation
            if run.status not in DONE or partition in seen or evaluation is None:
                continue
            seen.add(partition)
            if run.status == "FAILED":
                failures.append(
                    _Failure(
                        key,
                        partition,
                        evaluation.description or "failed",
                        blocking and evaluation.severity == dg.AssetCheckSeverity.ERROR,
                        key.asset_key == published,
                    )
                )
    return sorted(failures, key=lambda f: f.label)


def _warning(failures: list[_Failure]) -> QualityWarning | None:
    if not failures:
        return None
    severe = any(f.blocking_error for f in failures)
    kind: WarningType = "STALE" if all(f.on_published for f in failures) else "WARNING"
    lines = "; ".join(f"{f.label}: {f.description}" for f in failures)
    message = f"{len(failures)} check(s) failed: {lines}"
    if len(message) > MAX_MESSAGE:
        message = message[: MAX_MESSAGE - 3] + "..."
    return QualityWarning(kind, message, severe)
