"""Asset checks that run SQL inside Hyper on the stored tables; no Spark needed.

Each check opens the `.hyper` file of the `HyperDatabase` resource under `database_key`,
or else of the `HyperIOManager` under `io_manager_key` (`hyper_assets._dagster.located`), under the
file's lock, so it sees no write half done (on an object-store home, the current
generation), after checking that the file is the extract the asset was materialised into
(`hyper_assets._checks.stored_table`); and it reads what the asset's metadata declares:
`primary_key`, `foreign_keys`, `partition_expr`, `schema` / `table`.

Checks (name: fails when):

- `primary_key_unique`: a primary key value repeats, or a key column is NULL;
- `foreign_keys_resolve`: rows reference a key missing from its table (a warning with
  the count and a sample);
- `row_count_vs_previous`: a partition (or table) the latest run wrote has no rows, or
  fewer than `min_ratio` times the previous materialisation's rows per partition;
- `columns_not_null`: a listed column holds NULLs;
- `published_copy_fresh`: the outbox holds a change unpublished for `max_lag_minutes`.
"""

from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

import dagster as dg
from tableauhyperapi import escape_name

from hyper_assets._checks.check_steps import Check, single, step
from hyper_assets._checks.partitioned_checks import partitioned_checks
from hyper_assets._checks.row_count_check import row_count, row_count_check
from hyper_assets._checks.stored_table import (
    ERROR,
    SAMPLE_SIZE,
    WARN,
    declared,
    open_stored,
    require_columns,
    shown,
    sql_columns,
)
from hyper_assets._dagster.identity import latest, read_identity, require_same
from hyper_assets._dagster.located import ExtractSource
from hyper_assets._engine.tables import table_label
from hyper_assets._rows.outbox import Outbox
from hyper_assets.errors import ConfigurationError

__all__ = [
    "build_hyper_checks",
    "foreign_key_check",
    "not_null_check",
    "primary_key_check",
    "publish_freshness_check",
    "row_count_check",
]


def primary_key_check(
    asset: dg.AssetsDefinition,
    *,
    io_manager_key: str = "io_manager",
    database_key: str | None = None,
    blocking: bool = True,
) -> dg.AssetChecksDefinition:
    """`primary_key_unique`: the declared primary key is unique and never NULL.

    Blocking by default: Tableau relationships on a repeated key multiply rows, so what
    is downstream (the publish) waits until the key is fixed.
    """
    source = ExtractSource(io_manager_key, database_key)
    return single(_primary_key(asset, source, blocking), source)


def _primary_key(asset: dg.AssetsDefinition, source: ExtractSource, blocking: bool) -> Check:
    if not declared(asset).keys.primary_key:
        raise ConfigurationError(
            f"Asset {asset.key.to_user_string()} declares no metadata primary_key to check."
        )

    def _check(context: dg.AssetCheckExecutionContext) -> dg.AssetCheckResult:
        with open_stored(context, asset, source) as stored:
            key = stored.spec.keys.primary_key
            copy = stored.unkeyed(key, "primary_key")
            cols = sql_columns(key)
            not_null = " AND ".join(f"{escape_name(k)} IS NOT NULL" for k in key)
            ((rows, null_keys),) = stored.rows(
                f"SELECT COUNT(*), COUNT(*) FILTER (WHERE NOT ({not_null})) FROM {copy}"
            )
            repeated = (
                f"SELECT {cols}, COUNT(*) AS n FROM {copy} WHERE {not_null} "
                f"GROUP BY {cols} HAVING COUNT(*) > 1"
            )
            ((keys, extra),) = stored.rows(
                f"SELECT COUNT(*), CAST(COALESCE(SUM(n - 1), 0) AS BIGINT) FROM ({repeated}) r"
            )
            sample = stored.rows(f"{repeated} ORDER BY n DESC, {cols} LIMIT {SAMPLE_SIZE}")
        problems = [f"{keys} key value(s) repeat ({extra} extra row(s))"] if keys else []
        problems += [f"{null_keys} row(s) have a NULL key"] if null_keys else []
        return dg.AssetCheckResult(
            passed=not problems,
            description="; ".join(problems) or f"{list(key)} is unique over {rows} rows.",
            metadata={
                "rows": rows,
                "duplicate_keys": keys,
                "duplicate_rows": extra,
                "null_keys": null_keys,
                "sample": [f"{shown(r[:-1])} ({r[-1]} rows)" for r in sample],
            },
        )

    spec = dg.AssetCheckSpec(
        "primary_key_unique",
        asset=asset.key,
        blocking=blocking,
        description="The primary key is unique and never NULL (Tableau relationships rely on it).",
    )
    return Check(spec, _check)


def foreign_key_check(
    asset: dg.AssetsDefinition,
    *,
    io_manager_key: str = "io_manager",
    database_key: str | None = None,
) -> dg.AssetChecksDefinition:
    """`foreign_keys_resolve`: rows whose foreign key has no row in the referenced table.

    A warning: such rows are often real data kept on purpose; the result counts them per
    key and shows the most frequent missing values.
    """
    source = ExtractSource(io_manager_key, database_key)
    return single(_foreign_key(asset, source), source)


def _foreign_key(asset: dg.AssetsDefinition, source: ExtractSource) -> Check:
    if not declared(asset).keys.foreign_keys:
        raise ConfigurationError(
            f"Asset {asset.key.to_user_string()} declares no metadata foreign_keys to check."
        )

    def _check(context: dg.AssetCheckExecutionContext) -> dg.AssetCheckResult:
        details: dict[str, Any] = {}
        total, missing_tables = 0, []
        with open_stored(context, asset, source) as stored:
            for fk in stored.spec.keys.foreign_keys:
                label = (
                    f"{', '.join(fk.columns)} -> {table_label(fk.ref_table)}."
                    f"{', '.join(fk.ref_columns)}"
                )
                if not stored.connection.catalog.has_table(fk.ref_table):
                    missing_tables.append(table_label(fk.ref_table))
                    details[label] = "the referenced table is not loaded yet"
                    continue
                match = " AND ".join(
                    f"d.{escape_name(r)} = f.{escape_name(c)}"
                    for c, r in zip(fk.columns, fk.ref_columns, strict=True)
                )
                present = " AND ".join(f"f.{escape_name(c)} IS NOT NULL" for c in fk.columns)
                orphans = stored.rows(
                    f"SELECT {sql_columns(fk.columns, 'f.')}, COUNT(*) AS n, "
                    "CAST(SUM(COUNT(*)) OVER () AS BIGINT), COUNT(*) OVER () "
                    f"FROM {stored.unkeyed(fk.columns, 'foreign_key')} f WHERE {present} "
                    "AND NOT EXISTS "
                    f"(SELECT 1 FROM {fk.ref_table} d WHERE {match}) "
                    f"GROUP BY {sql_columns(fk.columns, 'f.')} "
                    f"ORDER BY n DESC, {sql_columns(fk.columns, 'f.')} LIMIT {SAMPLE_SIZE}"
                )
                rows, values = (orphans[0][-2], orphans[0][-1]) if orphans else (0, 0)
                total += rows
                details[label] = {
                    "rows": rows,
                    "values": values,
                    "sample": [f"{shown(r[:-3])} ({r[-3]} rows)" for r in orphans],
                }
        problems = [f"{total} row(s) reference a missing key"] if total else []
        problems += [f"not loaded yet: {', '.join(missing_tables)}"] if missing_tables else []
        return dg.AssetCheckResult(
            passed=not problems,
            severity=WARN,
            description="; ".join(problems) or "Every foreign key resolves.",
            metadata={"orphan_rows": total, "orphans": dg.MetadataValue.json(details)},
        )

    spec = dg.AssetCheckSpec(
        "foreign_keys_resolve",
        asset=asset.key,
        description="Every foreign key value has its row in the referenced table "
        "(a warning with the count and a sample of missing values).",
    )
    return Check(spec, _check)


def not_null_check(
    asset: dg.AssetsDefinition,
    columns: Sequence[str],
    *,
    io_manager_key: str = "io_manager",
    database_key: str | None = None,
    severity: dg.AssetCheckSeverity = ERROR,
) -> dg.AssetChecksDefinition:
    """`columns_not_null`: `columns` hold no NULL (for columns Spark calls nullable)."""
    source = ExtractSource(io_manager_key, database_key)
    return single(_not_null(asset, columns, source, severity), source)


def _not_null(
    asset: dg.AssetsDefinition,
    columns: Sequence[str],
    source: ExtractSource,
    severity: dg.AssetCheckSeverity,
) -> Check:
    if not columns or isinstance(columns, str):
        raise ConfigurationError(
            f"not_null_check of {asset.key.to_user_string()} needs a list of column names, "
            f"got {columns!r}."
        )

    def _check(context: dg.AssetCheckExecutionContext) -> dg.AssetCheckResult:
        with open_stored(context, asset, source) as stored:
            require_columns(stored, columns)
            counts = ", ".join(f"COUNT(*) - COUNT({escape_name(c)})" for c in columns)
            ((rows, *nulls),) = stored.rows(f"SELECT COUNT(*), {counts} FROM {stored.table}")
        by_column = dict(zip(columns, nulls, strict=True))
        failing = {c: n for c, n in by_column.items() if n}
        return dg.AssetCheckResult(
            passed=not failing,
            severity=severity,
            description=", ".join(f"{c}: {n} NULL(s)" for c, n in failing.items())
            or f"No NULL in {len(columns)} column(s) over {rows} rows.",
            metadata={
                "rows": rows,
                "null_rows": sum(failing.values()),
                "nulls": dg.MetadataValue.json(by_column),
            },
        )

    spec = dg.AssetCheckSpec(
        "columns_not_null",
        asset=asset.key,
        description=f"Columns {', '.join(columns)} hold no NULL.",
    )
    return Check(spec, _check)


def publish_freshness_check(
    published: dg.AssetsDefinition,
    *,
    max_lag_minutes: float,
    io_manager_key: str = "io_manager",
    database_key: str | None = None,
    severity: dg.AssetCheckSeverity = ERROR,
) -> dg.AssetChecksDefinition:
    """`published_copy_fresh` on the publish asset: no change waits longer than the lag.

    Reads the file's change outbox: a write not yet sent to Tableau older than
    `max_lag_minutes` fails the check, and so does a file never published. Run it on a
    schedule in a job of its own (`define_asset_job(selection=AssetSelection.checks(check))`):
    right after a publish it passes by construction, and in a run that also writes tables
    nothing orders it after the writes. A file made anew since the last publish (its
    identity is not the one that publish recorded) is an `ExtractRecreatedError`.
    """
    source = ExtractSource(io_manager_key, database_key)
    label = published.key.to_user_string()

    def _check(context: dg.AssetCheckExecutionContext) -> dg.AssetCheckResult:
        home = source.locate(context.resources, f"The check of {label}").database
        records = latest(context.instance, published.key)
        with home.reading() as database, home.hyper.lock(database):
            found = read_identity(database)
            require_same(found, records, home.uri, f"Checking {label}", None)
            outbox = Outbox(database)
            tracking = outbox.tracking
            changes = outbox.changes()
        oldest = changes[0].recorded_at if changes else None
        if not tracking:
            return dg.AssetCheckResult(
                passed=False,
                severity=severity,
                description=f"{home.database} has never been published: materialise {label}.",
            )
        lag = (datetime.now(UTC) - oldest).total_seconds() / 60 if oldest else 0.0
        tables = sorted({table_label(c.table) for c in changes})
        return dg.AssetCheckResult(
            passed=lag <= max_lag_minutes,
            severity=severity,
            description=(
                f"{len(changes)} change(s) to {', '.join(tables)} unpublished, the oldest for "
                f"{lag:.0f} minutes (at most {max_lag_minutes:g} allowed)."
                if changes
                else "Every change is published."
            ),
            metadata={
                "unpublished_changes": len(changes),
                "oldest_change_minutes": round(lag, 1),
                "tables": tables,
            },
        )

    spec = dg.AssetCheckSpec(
        "published_copy_fresh",
        asset=published.key,
        description=f"No change to the .hyper file waits more than {max_lag_minutes:g} "
        "minutes to be published.",
    )
    return single(Check(spec, _check), source)


def build_hyper_checks(
    assets: Sequence[dg.AssetsDefinition],
    *,
    not_null: Mapping[str, Sequence[str]] | None = None,
    min_row_ratio: float | None = 0.5,
    row_count_severity: dg.AssetCheckSeverity = ERROR,
    io_manager_key: str = "io_manager",
    database_key: str | None = None,
    partitioned: bool = True,
) -> list[dg.AssetChecksDefinition]:
    """The checks each asset's metadata calls for, run inside Hyper, one step per asset.

    Per asset: `primary_key_unique` when it declares `primary_key` (blocking),
    `foreign_keys_resolve` when it declares `foreign_keys`, `row_count_vs_previous` (unless
    `min_row_ratio` is None), and `columns_not_null` for the columns `not_null` lists under
    its key (e.g. `{"flights": ["carrier"]}`). They run in one step (op
    `<asset>_hyper_checks`): a step is a process under the default executor, and its
    start-up, not the SQL, is most of a check's time. The publish asset's check is
    `publish_freshness_check`.
    A partitioned asset gets them as partitioned checks, one result per partition
    (`hyper_assets._checks.partitioned_checks`, on Dagster's preview); `partitioned=False` gives
    it the unpartitioned checks instead. The file is the `HyperDatabase` resource's under
    `database_key` if given, else the `HyperIOManager`'s under `io_manager_key`.
    """
    source = ExtractSource(io_manager_key, database_key)
    not_null = dict(not_null or {})
    definitions: list[dg.AssetChecksDefinition] = []
    for asset in assets:
        keys = declared(asset).keys
        name = asset.key.to_user_string()
        checks: list[Check] = []
        if partitioned and asset.partitions_def is not None:
            definitions += partitioned_checks(
                asset,
                not_null=not_null.pop(name, None),
                min_row_ratio=min_row_ratio,
                row_count_severity=row_count_severity,
                source=source,
            )
            continue
        if keys.primary_key:
            checks.append(_primary_key(asset, source, blocking=True))
        if keys.foreign_keys:
            checks.append(_foreign_key(asset, source))
        if min_row_ratio is not None:
            checks.append(row_count(asset, min_row_ratio, row_count_severity, source))
        if name in not_null:
            checks.append(_not_null(asset, not_null.pop(name), source, ERROR))
        if checks:
            op = f"{asset.key.to_python_identifier()}_hyper_checks"
            definitions.append(step(op, checks, source))
    if not_null:
        raise ConfigurationError(
            f"not_null names asset(s) {sorted(not_null)} that are not among the assets "
            f"checked ({sorted(a.key.to_user_string() for a in assets)})."
        )
    return definitions
