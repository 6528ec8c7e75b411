"""`row_count_vs_previous`: each partition the latest run wrote has rows, and enough of
them against the previous materialisation's rows per partition."""

from dataclasses import dataclass

import dagster as dg

from hyper_assets._checks.check_steps import Check, single
from hyper_assets._checks.stored_table import ERROR, open_stored
from hyper_assets._dagster.located import ExtractSource
from hyper_assets._dagster.partitions import RANGE_ROW_COUNT, partition_counts
from hyper_assets._engine.tables import Catalog
from hyper_assets.errors import ConfigurationError

#: Materialisation metadata holding the rows a run wrote: a backfilled range first (each of
#: its partitions also carries its own count), then one partition, then a whole table.
_ROW_COUNT_KEYS = (RANGE_ROW_COUNT, "dagster/partition_row_count", "dagster/row_count")


@dataclass(frozen=True)
class _Run:
    """The materialisations one run made of an asset: their partitions and rows written."""

    run_id: str
    partitions: tuple[str | None, ...]
    rows: int | None

    @property
    def rows_per_partition(self) -> float | None:
        return None if self.rows is None else self.rows / len(self.partitions)


def last_two_runs(instance: dg.DagsterInstance, key: dg.AssetKey) -> list[_Run]:
    """The latest run that materialised `key`, and the one before it, newest first."""
    runs: dict[str, list[dg.EventLogRecord]] = {}
    cursor = None
    while True:
        page = instance.fetch_materializations(key, limit=1000, cursor=cursor)
        for record in page.records:
            if record.run_id not in runs and len(runs) == 2:
                return [_run(records) for records in runs.values()]
            runs.setdefault(record.run_id, []).append(record)
        if not page.has_more:
            return [_run(records) for records in runs.values()]
        cursor = page.cursor


def _run(records: list[dg.EventLogRecord]) -> _Run:
    materialization = records[0].asset_materialization
    metadata = materialization.metadata if materialization else {}
    rows = next((metadata[k].value for k in _ROW_COUNT_KEYS if k in metadata), None)
    partitions = tuple(sorted({r.partition_key for r in records}, key=str))
    return _Run(records[0].run_id, partitions, rows if isinstance(rows, int) else None)


def row_count_check(
    asset: dg.AssetsDefinition,
    *,
    min_ratio: float = 0.5,
    severity: dg.AssetCheckSeverity = ERROR,
    io_manager_key: str = "io_manager",
    database_key: str | None = None,
) -> dg.AssetChecksDefinition:
    """`row_count_vs_previous`: each partition the latest run wrote has rows, and enough.

    Counts the stored rows of each partition the latest materialisation wrote (the whole
    table when unpartitioned) and compares them with the previous materialisation's rows
    per partition, from its row-count metadata. A partition with no rows fails unless the
    previous one had none either; one below `min_ratio` of the previous fails too.
    """
    source = ExtractSource(io_manager_key, database_key)
    return single(row_count(asset, min_ratio, severity, source), source)


def row_count(
    asset: dg.AssetsDefinition,
    min_ratio: float,
    severity: dg.AssetCheckSeverity,
    source: ExtractSource,
) -> Check:
    if not 0 <= min_ratio <= 1:
        raise ConfigurationError(
            f"row_count_check of {asset.key.to_user_string()}: min_ratio is {min_ratio}; "
            "give a fraction between 0 and 1 (0.5: half the previous rows fail)."
        )

    def _check(context: dg.AssetCheckExecutionContext) -> dg.AssetCheckResult:
        runs = last_two_runs(context.instance, asset.key)
        if not runs:
            return dg.AssetCheckResult(
                passed=False, severity=severity, description="Never materialised: no rows."
            )
        latest = runs[0]
        previous = runs[1].rows_per_partition if len(runs) > 1 else None
        with open_stored(context, asset, source) as stored:
            if asset.partitions_def is None:
                counts = {stored.label: stored.rows(f"SELECT COUNT(*) FROM {stored.table}")[0][0]}
            else:
                keys = [k for k in latest.partitions if k is not None]
                counts = partition_counts(
                    stored.connection,
                    stored.table,
                    asset.partitions_def,
                    keys,
                    stored.spec.partition_expr,
                    Catalog(stored.connection).columns(stored.table),
                    stored.label,
                )
        expect_rows = previous is None or previous > 0
        empty = [k for k, n in counts.items() if n == 0 and expect_rows]
        low = [
            f"{k} ({n} rows)"
            for k, n in counts.items()
            if n and previous and n < min_ratio * previous
        ]
        problems = [f"no rows: {', '.join(empty[:20])}"] if empty else []
        if low:
            problems.append(
                f"below {min_ratio:.0%} of the previous {previous:.0f} rows per partition: "
                + ", ".join(low[:20])
            )
        return dg.AssetCheckResult(
            passed=not problems,
            severity=severity,
            description="; ".join(problems)
            or passed_description(counts, asset.partitions_def is not None, previous),
            metadata={
                "partitions": len(counts),
                "empty_partitions": len(empty),
                "low_partitions": len(low),
                "fewest_rows": min(counts.values(), default=0),
                "most_rows": max(counts.values(), default=0),
                "previous_rows_per_partition": dg.MetadataValue.float(previous)
                if previous is not None
                else dg.MetadataValue.null(),
                "rows": dg.MetadataValue.json(counts if len(counts) <= 50 else {}),
            },
        )

    spec = dg.AssetCheckSpec(
        "row_count_vs_previous",
        asset=asset.key,
        description="Each partition the latest run wrote has rows, and at least "
        f"{min_ratio:.0%} of the previous materialisation's rows per partition.",
    )
    return Check(spec, _check)


def passed_description(counts: dict[str, int], partitioned: bool, previous: float | None) -> str:
    """What a passed check says: the rows of an unpartitioned table, or the range of the
    partitions' rows, beside the previous run's."""
    shown = "no previous run" if previous is None else f"the previous run's {previous:.0f}"
    if not partitioned:
        (rows,) = counts.values()
        return f"{rows} rows ({shown})."
    fewest, most = min(counts.values(), default=0), max(counts.values(), default=0)
    return f"{len(counts)} partition(s) with {fewest}...{most} rows each ({shown} per partition)."
