"""The library's checks on a partitioned table, as partitioned asset checks: one result per
partition the run wrote, each counting the rows of that partition's window.

Dagster (1.12.20 and later) runs a check with `partitions_def` once per partition (a
preview feature: `build_hyper_checks(partitioned=False)` selects the unpartitioned checks
instead). An asset's checks share one step (op `<asset>_hyper_checks`), as the
unpartitioned ones do.
A run that writes a range of partitions (a single-run backfill) runs the step once: each
check reports one evaluation per partition, and a failed blocking one fails the step, so
what is downstream waits, as with an unpartitioned blocking check.

- `primary_key_unique`: rows of the partition whose key repeats anywhere in the table,
  or is NULL;
- `foreign_keys_resolve`: rows of the partition referencing a missing key (a warning);
- `row_count_vs_previous`: the partition has rows, and at least `min_ratio` of the
  previous materialisation's rows per partition;
- `columns_not_null`: the partition's rows hold no NULL in the listed columns.
"""

import warnings
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

import dagster as dg
from tableauhyperapi import escape_name

from hyper_assets._checks.row_count_check import last_two_runs
from hyper_assets._checks.stored_table import (
    ERROR,
    WARN,
    Stored,
    declared,
    open_stored,
    require_columns,
    sql_columns,
)
from hyper_assets._dagster.compat import target_materialization
from hyper_assets._dagster.located import ExtractSource
from hyper_assets._dagster.partitions import partition_counts, partition_window
from hyper_assets._engine.tables import Catalog, table_label
from hyper_assets.errors import ConfigurationError

#: Failed partitions a check's log line names; the rest it counts.
LOGGED = 20

#: The column of a check's temporary copy holding the index of the row's partition.
PARTITION = escape_name("hyper_assets_partition")


@dataclass(frozen=True)
class _Result:
    """One partition's outcome."""

    passed: bool
    description: str
    metadata: dict[str, Any] = field(default_factory=dict)


Context = dg.AssetCheckExecutionContext
Evaluate = Callable[[Context, Stored, dg.PartitionsDefinition, Sequence[str]], dict[str, _Result]]


@dataclass(frozen=True)
class _PartitionedCheck:
    """One check: its spec, its severity, and what gives each partition's result."""

    spec: dg.AssetCheckSpec
    severity: dg.AssetCheckSeverity
    evaluate: Evaluate

    def evaluations(
        self, context: Context, asset: dg.AssetsDefinition, source: ExtractSource
    ) -> list[dg.AssetCheckEvaluation]:
        """One evaluation per partition of the run, each naming the partition's latest
        materialisation; the failed partitions are also logged, in one line."""
        keys = list(context.partition_keys)
        definition = self.spec.partitions_def
        if definition is None:  # partitioned_checks builds specs of partitioned assets only
            raise ConfigurationError(
                f"Check {self.spec.name} of {self.spec.asset_key.to_user_string()} is a "
                "partitioned check of an asset without partitions: use partitioned=False."
            )
        with open_stored(context, asset, source, keys) as stored:
            results = self.evaluate(context, stored, definition, keys)
        targets = _targets(context.instance, asset.key, keys)
        failed = [key for key in keys if not results[key].passed]
        if failed:
            (context.log.warning if self.severity == WARN else context.log.error)(
                failed_line(
                    self.spec.name,
                    self.spec.asset_key.to_user_string(),
                    [(key, results[key].description) for key in failed],
                )
            )
        return [
            dg.AssetCheckEvaluation(
                asset_key=self.spec.asset_key,
                check_name=self.spec.name,
                passed=results[key].passed,
                metadata=results[key].metadata,
                severity=self.severity,
                description=results[key].description,
                blocking=self.spec.blocking,
                partition=key,
                target_materialization_data=targets.get(key),
            )
            for key in keys
        ]


def failed_line(check: str, asset: str, failed: Sequence[tuple[str, str]]) -> str:
    """The log line of a check's failed partitions ((key, why) each): the first LOGGED
    named, the rest counted."""
    shown = [f"{key}: {why}" for key, why in failed[:LOGGED]]
    if len(failed) > LOGGED:
        shown.append(f"... and {len(failed) - LOGGED} more")
    return f"Check {check} of {asset} failed for {len(failed)} partition(s): " + "; ".join(shown)


def _definition(
    asset: dg.AssetsDefinition, checks: Sequence[_PartitionedCheck], source: ExtractSource
) -> dg.AssetChecksDefinition:
    """`checks` as one step (op `<asset>_hyper_checks`), as the unpartitioned checks are:
    one process, one hyperd, for all of them.

    A run may select some of them; an error (a missing table, say) fails the step after
    the checks before it have reported. Each check's evaluations are followed by its
    output, as an `AssetCheckResult` would be: Dagster counts a check as done by its output
    (without it, it logs that the step "did not yield or return expected outputs"), and an
    `AssetCheckResult` cannot carry the partition of each evaluation.
    """

    @dg.multi_asset_check(
        specs=[c.spec for c in checks],
        name=f"{asset.key.to_python_identifier()}_hyper_checks",
        can_subset=True,
        required_resource_keys={source.resource_key},
    )
    def _run(
        context: dg.AssetCheckExecutionContext,
    ) -> Iterator[dg.AssetCheckEvaluation | dg.Output[None]]:
        for check in checks:
            if check.spec.key in context.selected_asset_check_keys:
                yield from check.evaluations(context, asset, source)
                yield dg.Output(None, _run.get_output_name_for_asset_check_key(check.spec.key))

    return _run


def _spec(
    asset: dg.AssetsDefinition, name: str, description: str, *, blocking: bool = False
) -> dg.AssetCheckSpec:
    with warnings.catch_warnings():  # the library tests the preview at 1.12.20 and the newest
        warnings.simplefilter("ignore", dg.PreviewWarning)
        return dg.AssetCheckSpec(
            name,
            asset=asset.key,
            partitions_def=asset.partitions_def,
            blocking=blocking,
            description=description,
        )


def _targets(
    instance: dg.DagsterInstance, asset_key: dg.AssetKey, keys: Sequence[str]
) -> dict[str, Any]:
    """Each partition's latest materialisation, which its result is about: the UI counts a
    partition's result as current only when it names that materialisation."""
    targets: dict[str, Any] = {}
    missing = set(keys)
    while missing:
        records = instance.fetch_materializations(
            dg.AssetRecordsFilter(asset_key=asset_key, asset_partitions=sorted(missing)),
            limit=len(missing),
        ).records
        for record in records:
            if record.partition_key in missing:
                missing.discard(record.partition_key)
                targets[record.partition_key] = target_materialization(record)
        if not records:
            break  # the rest were never materialised
    return targets


def _with_partition(
    stored: Stored,
    definition: dg.PartitionsDefinition,
    keys: Sequence[str],
    columns: Sequence[str],
    name: str,
) -> str:
    """A temporary copy of `columns` with each row's index in `keys` (NULL: another partition).

    A copy, so Hyper's planner does not trust the table's ASSUMED keys (see `Stored`).
    """
    table_columns = Catalog(stored.connection).columns(stored.table)
    expr = stored.spec.partition_expr
    cases = " ".join(
        f"WHEN {partition_window(definition, [key], expr, table_columns, stored.label).sql} "
        f"THEN {index}"
        for index, key in enumerate(keys)
    )
    copy = escape_name(f"hyper_assets_check_{name}")
    stored.connection.execute_command(f"DROP TABLE IF EXISTS {copy}")
    stored.connection.execute_command(
        f"CREATE TEMPORARY TABLE {copy} AS (SELECT {sql_columns(columns)}, "
        f"CASE {cases} END AS {PARTITION} FROM {stored.table})"
    )
    return copy


def _by_partition(stored: Stored, sql: str, keys: Sequence[str]) -> dict[str, list[Any]]:
    """Rows of `sql`, which selects the partition index first, by partition key."""
    return {keys[row[0]]: list(row[1:]) for row in stored.rows(sql)}


def _primary_key(
    context: Context, stored: Stored, definition: dg.PartitionsDefinition, keys: Sequence[str]
) -> dict[str, _Result]:
    key = stored.spec.keys.primary_key
    copy = _with_partition(stored, definition, keys, key, "primary_key")
    cols = sql_columns(key)
    not_null = " AND ".join(f"{escape_name(k)} IS NOT NULL" for k in key)
    repeated = f"SELECT {cols} FROM {copy} WHERE {not_null} GROUP BY {cols} HAVING COUNT(*) > 1"
    counts = _by_partition(
        stored,
        f"SELECT {PARTITION}, COUNT(*), COUNT(*) FILTER (WHERE NOT ({not_null})) "
        f"FROM {copy} WHERE {PARTITION} IS NOT NULL GROUP BY {PARTITION}",
        keys,
    )
    shared = _by_partition(
        stored,
        f"SELECT c.{PARTITION}, COUNT(*) FROM {copy} c JOIN ({repeated}) r USING ({cols}) "
        f"WHERE c.{PARTITION} IS NOT NULL GROUP BY c.{PARTITION}",
        keys,
    )
    results = {}
    for partition in keys:
        rows, null_keys = counts.get(partition, [0, 0])
        (repeats,) = shared.get(partition, [0])
        problems = [f"{repeats} row(s) share their key with another row"] if repeats else []
        problems += [f"{null_keys} row(s) have a NULL key"] if null_keys else []
        results[partition] = _Result(
            not problems,
            "; ".join(problems) or f"{list(key)} is unique over the partition's {rows} rows.",
            {"rows": rows, "rows_with_repeated_key": repeats, "null_keys": null_keys},
        )
    return results


def _foreign_keys(
    context: Context, stored: Stored, definition: dg.PartitionsDefinition, keys: Sequence[str]
) -> dict[str, _Result]:
    orphans: dict[str, dict[str, dict[str, int]]] = {k: {} for k in keys}
    missing_tables = []
    for fk in stored.spec.keys.foreign_keys:
        label = (
            f"{', '.join(fk.columns)} -> {table_label(fk.ref_table)}.{', '.join(fk.ref_columns)}"
        )
        if not stored.connection.catalog.has_table(fk.ref_table):
            missing_tables.append(table_label(fk.ref_table))
            continue
        copy = _with_partition(stored, definition, keys, fk.columns, "foreign_key")
        match = " AND ".join(
            f"d.{escape_name(r)} = f.{escape_name(c)}"
            for c, r in zip(fk.columns, fk.ref_columns, strict=True)
        )
        present = " AND ".join(f"f.{escape_name(c)} IS NOT NULL" for c in fk.columns)
        found = _by_partition(
            stored,
            f"SELECT f.{PARTITION}, COUNT(*) FROM {copy} f WHERE f.{PARTITION} IS NOT NULL "
            f"AND {present} AND NOT EXISTS (SELECT 1 FROM {fk.ref_table} d WHERE {match}) "
            f"GROUP BY f.{PARTITION}",
            keys,
        )
        for partition in keys:
            orphans[partition][label] = {"rows": found.get(partition, [0])[0]}
    results = {}
    for partition, per_key in orphans.items():
        total = sum(detail["rows"] for detail in per_key.values())
        problems = [f"{total} row(s) reference a missing key"] if total else []
        problems += [f"not loaded yet: {', '.join(missing_tables)}"] if missing_tables else []
        results[partition] = _Result(
            not problems,
            "; ".join(problems) or "Every foreign key resolves.",
            {"orphan_rows": total, "orphans": dg.MetadataValue.json(per_key)},
        )
    return results


def _not_null(columns: Sequence[str]) -> Evaluate:
    def evaluate(
        context: Context, stored: Stored, definition: dg.PartitionsDefinition, keys: Sequence[str]
    ) -> dict[str, _Result]:
        require_columns(stored, columns)
        copy = _with_partition(stored, definition, keys, columns, "not_null")
        counts = ", ".join(f"COUNT(*) - COUNT({escape_name(c)})" for c in columns)
        found = _by_partition(
            stored,
            f"SELECT {PARTITION}, COUNT(*), {counts} FROM {copy} "
            f"WHERE {PARTITION} IS NOT NULL GROUP BY {PARTITION}",
            keys,
        )
        results = {}
        for partition in keys:
            rows, *nulls = found.get(partition, [0] + [0] * len(columns))
            by_column = dict(zip(columns, nulls, strict=True))
            failing = {c: n for c, n in by_column.items() if n}
            results[partition] = _Result(
                not failing,
                ", ".join(f"{c}: {n} NULL(s)" for c, n in failing.items())
                or f"No NULL in {len(columns)} column(s) over the partition's {rows} rows.",
                {"rows": rows, "nulls": dg.MetadataValue.json(by_column)},
            )
        return results

    return evaluate


def _row_count(asset: dg.AssetsDefinition, min_ratio: float) -> Evaluate:
    def evaluate(
        context: Context, stored: Stored, definition: dg.PartitionsDefinition, keys: Sequence[str]
    ) -> dict[str, _Result]:
        runs = last_two_runs(context.instance, asset.key)
        previous = runs[1].rows_per_partition if len(runs) > 1 else None
        columns = Catalog(stored.connection).columns(stored.table)
        counts = partition_counts(
            stored.connection,
            stored.table,
            definition,
            keys,
            stored.spec.partition_expr,
            columns,
            stored.label,
        )
        expect_rows = previous is None or previous > 0
        shown = (
            "no previous run"
            if previous is None
            else f"the previous run's {previous:.0f} per partition"
        )
        results = {}
        for partition, rows in counts.items():
            if rows == 0 and expect_rows:
                problem = "no rows"
            elif rows and previous and rows < min_ratio * previous:
                problem = f"{rows} rows, below {min_ratio:.0%} of {shown}"
            else:
                problem = ""
            results[partition] = _Result(
                not problem,
                problem or f"{rows} rows ({shown}).",
                {
                    "rows": rows,
                    "previous_rows_per_partition": dg.MetadataValue.float(previous)
                    if previous is not None
                    else dg.MetadataValue.null(),
                },
            )
        return results

    return evaluate


def partitioned_checks(
    asset: dg.AssetsDefinition,
    *,
    not_null: Sequence[str] | None,
    min_row_ratio: float | None,
    row_count_severity: dg.AssetCheckSeverity,
    source: ExtractSource,
) -> list[dg.AssetChecksDefinition]:
    """The partitioned checks `build_hyper_checks` makes for a partitioned `asset`: one
    definition, one step, for all of them (none when the metadata calls for none)."""
    keys = declared(asset).keys
    checks = []
    if keys.primary_key:
        spec = _spec(
            asset,
            "primary_key_unique",
            "Each partition's rows have a key that is unique in the table and not NULL.",
            blocking=True,
        )
        checks.append(_PartitionedCheck(spec, ERROR, _primary_key))
    if keys.foreign_keys:
        spec = _spec(
            asset,
            "foreign_keys_resolve",
            "Each partition's foreign key values have their row in the referenced table "
            "(a warning with the count per key).",
        )
        checks.append(_PartitionedCheck(spec, WARN, _foreign_keys))
    if min_row_ratio is not None:
        if not 0 <= min_row_ratio <= 1:
            raise ConfigurationError(
                f"row_count_check of {asset.key.to_user_string()}: min_ratio is "
                f"{min_row_ratio}; give a fraction between 0 and 1 (0.5: half the previous "
                "rows fail)."
            )
        spec = _spec(
            asset,
            "row_count_vs_previous",
            "Each partition the run wrote has rows, and at least "
            f"{min_row_ratio:.0%} of the previous materialisation's rows per partition.",
        )
        checks.append(_PartitionedCheck(spec, row_count_severity, _row_count(asset, min_row_ratio)))
    if not_null:
        spec = _spec(
            asset,
            "columns_not_null",
            f"Columns {', '.join(not_null)} hold no NULL in the partition.",
        )
        checks.append(_PartitionedCheck(spec, ERROR, _not_null(not_null)))
    return [_definition(asset, checks, source)] if checks else []
