"""The demo's checks: the library's checks run inside Hyper, plus Dagster's own.

From `hyper_assets.build_hyper_checks`: each dimension's primary key is unique and not
NULL (blocking); fact rows whose key is missing from its dimension are counted (a
warning: they are real data, kept on purpose); every table or day a run writes has
rows, at least half as many per day as the run before (a warning: 2013-12-31 really has
no weather); flights always have a carrier and an origin. The facts' checks are
partitioned: each day a run writes gets its own result. From
`publish_freshness_check`: no change waits more than an hour to reach Tableau. From
`tableau_copy_check`: Tableau's copy of each data source, read through its VizQL Data
Service, has the model, rows and last days of the file.
From Dagster: column-schema changes and time-partition freshness.
"""

from collections.abc import Sequence

from dagster import (
    AssetChecksDefinition,
    AssetCheckSeverity,
    AssetsDefinition,
    build_column_schema_change_checks,
    build_time_partition_freshness_checks,
    multi_asset_check,
)

from demo.assets import airlines, airports, flights, planes, weather
from hyper_assets import build_hyper_checks, publish_freshness_check, tableau_copy_check

DIMENSIONS = (airlines, airports, planes)
FACTS = (flights, weather)


def build_checks(published: Sequence[AssetsDefinition] = ()) -> Sequence[AssetChecksDefinition]:
    """Every check of the demo, freshness checks last (they need their own sensor).

    With the publish assets `published`, also the checks that their copies are fresh, and
    that Tableau's copy of each is the file's (`tableau_copy_check`: the tables each
    holds and its fact's last 7 days by the fact's `partition_expr`, read from the publish
    asset).
    """
    return [
        *HYPER_CHECKS,
        *(publish_freshness_check(p, max_lag_minutes=60) for p in published),
        *(tableau_copy_check(p) for p in published),
        *SCHEMA_CHECKS,
        *FRESHNESS_CHECKS,
    ]


def checks_of(fact: AssetsDefinition) -> list[AssetChecksDefinition]:
    """The library's checks of `fact`: partitioned, so a fact run runs them on its days."""
    return [c for c in HYPER_CHECKS if {s.asset_key for s in c.check_specs} == {fact.key}]


def _named(name: str, checks: Sequence[AssetChecksDefinition]) -> list[AssetChecksDefinition]:
    """Dagster's check factories, with a step a person can read in a run's timeline.

    They name their step after a hash of the checked keys (`asset_check_1044ca7d`); the
    same function and specs under `name` (dagster is pinned below 1.14).
    """
    return [
        multi_asset_check(specs=list(c.check_specs), can_subset=True, name=name)(
            c.node_def.compute_fn.decorated_fn  # type: ignore[union-attr]
        )
        for c in checks
    ]


HYPER_CHECKS = build_hyper_checks(
    [*DIMENSIONS, *FACTS],
    not_null={"flights": ["carrier", "origin"]},
    row_count_severity=AssetCheckSeverity.WARN,
)
"""The library's checks, run inside Hyper; the facts' are partitioned (one per day)."""
SCHEMA_CHECKS = _named(
    "column_schema_change", build_column_schema_change_checks(assets=[*DIMENSIONS, *FACTS])
)
"""Dagster's column-schema checks: unpartitioned, so they run with the publish, not with
a partitioned run (which would plan them once per day and leave all but one skipped)."""
FRESHNESS_CHECKS = _named(
    "partition_freshness",
    build_time_partition_freshness_checks(
        assets=list(FACTS), deadline_cron="0 9 * * *", timezone="America/New_York"
    ),
)
"""The last complete day of each fact is loaded by 9:00 New York time."""
