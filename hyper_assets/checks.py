"""Asset checks that run SQL inside Hyper on the stored tables; no Spark needed.

Each check opens the `.hyper` file of the `HyperIOManager` under `io_manager_key` (under
the file's lock, so it sees no write half done; on an object-store home, the current
generation) and reads what the asset's metadata
declares: `primary_key`, `foreign_keys`, `partition_expr`, `schema` / `table`.

Checks (name: fails when):

- `primary_key_unique`: a primary key value repeats, or a key column is NULL;
- `foreign_keys_resolve`: rows reference a key missing from its table (a warning with
  the count and a sample);
- `row_count_vs_previous`: a partition (or table) the latest run wrote has no rows, or
  fewer than `min_ratio` times the previous materialisation's rows per partition;
- `columns_not_null`: a listed column holds NULLs;
- `published_copy_fresh`: the outbox holds a change unpublished for `max_lag_minutes`.
"""

from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import dagster as dg
from tableauhyperapi import Connection, TableName, escape_name

from hyper_assets.errors import ConfigurationError, TableNotFoundError
from hyper_assets.io_manager import HyperIOManager
from hyper_assets.outbox import Outbox
from hyper_assets.partitions import RANGE_ROW_COUNT, partition_counts
from hyper_assets.spec import TableSpec
from hyper_assets.tables import Catalog, table_label

#: How many offending values a failed check shows.
SAMPLE_SIZE = 5
#: Materialisation metadata holding the rows a run wrote: a backfilled range first (each of
#: its partitions also carries its own count), then one partition, then a whole table.
_ROW_COUNT_KEYS = (RANGE_ROW_COUNT, "dagster/partition_row_count", "dagster/row_count")

ERROR, WARN = dg.AssetCheckSeverity.ERROR, dg.AssetCheckSeverity.WARN

_CheckFunction = Callable[[dg.AssetCheckExecutionContext], dg.AssetCheckResult]


def _io_manager(context: dg.AssetCheckExecutionContext, key: str, asset: str) -> HyperIOManager:
    io_manager = getattr(context.resources, key)
    if not isinstance(io_manager, HyperIOManager):
        raise ConfigurationError(
            f"The checks of {asset} read the .hyper file of the HyperIOManager under "
            f"resource key {key!r}, found a {type(io_manager).__name__}: pass the key of "
            "your HyperIOManager as io_manager_key=."
        )
    return io_manager


def _declared(asset: dg.AssetsDefinition) -> TableSpec:
    """The asset's metadata, parsed (and so checked) when the checks are defined.

    Only its keys are read here; the table's name needs the IO manager's default schema.
    """
    return TableSpec.parse(asset.key.path, asset.metadata_by_key.get(asset.key), "Extract")


@dataclass(frozen=True)
class _Stored:
    """The asset's table, open in Hyper, and what its metadata declares."""

    connection: Connection
    spec: TableSpec

    @property
    def table(self) -> TableName:
        return self.spec.table

    @property
    def label(self) -> str:
        return self.spec.label

    def rows(self, sql: str) -> list[list[Any]]:
        return self.connection.execute_list_query(sql)

    def unkeyed(self, columns: Sequence[str], name: str) -> str:
        """A temporary copy of `columns`, free of the table's ASSUMED keys.

        Hyper's planner trusts assumed keys: `GROUP BY` a primary key finds no repeats
        and `COUNT(DISTINCT key)` counts every row, so checks query a copy instead.
        """
        copy = escape_name(f"hyper_assets_check_{name}")
        self.connection.execute_command(f"DROP TABLE IF EXISTS {copy}")
        self.connection.execute_command(
            f"CREATE TEMPORARY TABLE {copy} AS (SELECT {_columns(columns)} FROM {self.table})"
        )
        return copy


@contextmanager
def _stored(
    context: dg.AssetCheckExecutionContext, asset: dg.AssetsDefinition, io_manager_key: str
) -> Iterator[_Stored]:
    io_manager = _io_manager(context, io_manager_key, asset.key.to_user_string())
    spec = io_manager.spec_for(asset.key.path, asset.metadata_by_key.get(asset.key))
    table = spec.table
    with (
        io_manager.home.reading() as database,
        io_manager.hyper.connect(database, create=False) as connection,
    ):
        if not connection.catalog.has_table(table):
            raise TableNotFoundError(
                f"Table {table_label(table)} is not in {io_manager.database}: materialise "
                f"asset {asset.key.to_user_string()} before checking it."
            )
        yield _Stored(connection, spec)


@dataclass(frozen=True)
class _Check:
    """One check: its spec, and the function that evaluates it."""

    spec: dg.AssetCheckSpec
    evaluate: _CheckFunction

    def result(self, context: dg.AssetCheckExecutionContext) -> dg.AssetCheckResult:
        """The check's result, named for its spec; a failure is also logged at the default
        log level: an error, or a warning for a check of WARN severity."""
        result = self.evaluate(context)
        if not result.passed:
            warn = result.severity == WARN
            (context.log.warning if warn else context.log.error)(
                f"Check {self.spec.name} of {self.spec.asset_key.to_user_string()} failed: "
                f"{result.description}"
            )
        return dg.AssetCheckResult(
            asset_key=self.spec.asset_key,
            check_name=self.spec.name,
            passed=result.passed,
            severity=result.severity,
            description=result.description,
            metadata=result.metadata,
        )


def _definition(
    name: str, checks: Sequence[_Check], io_manager_key: str
) -> dg.AssetChecksDefinition:
    """`checks` as one step (op `name`): one process, one hyperd, for all of them.

    A run may select some of them; each failure is its own result, and an error (a
    missing table, say) fails the step after the checks before it have reported.
    """

    @dg.multi_asset_check(
        specs=[c.spec for c in checks],
        name=name,
        can_subset=True,
        required_resource_keys={io_manager_key},
    )
    def _run(context: dg.AssetCheckExecutionContext) -> Iterator[dg.AssetCheckResult]:
        for check in checks:
            if check.spec.key in context.selected_asset_check_keys:
                yield check.result(context)

    return _run


def _single(check: _Check, io_manager_key: str) -> dg.AssetChecksDefinition:
    name = f"{check.spec.asset_key.to_python_identifier()}_{check.spec.name}"
    return _definition(name, [check], io_manager_key)


def _columns(names: Sequence[str], alias: str = "") -> str:
    return ", ".join(f"{alias}{escape_name(n)}" for n in names)


def _shown(values: Sequence[Any]) -> str:
    return str(values[0]) if len(values) == 1 else "(" + ", ".join(map(str, values)) + ")"


def primary_key_check(
    asset: dg.AssetsDefinition, *, io_manager_key: str = "io_manager", blocking: bool = True
) -> dg.AssetChecksDefinition:
    """`primary_key_unique`: the declared primary key is unique and never NULL.

    Blocking by default: Tableau relationships on a repeated key multiply rows, so what
    is downstream (the publish) waits until the key is fixed.
    """
    return _single(_primary_key(asset, io_manager_key, blocking), io_manager_key)


def _primary_key(asset: dg.AssetsDefinition, io_manager_key: str, blocking: bool) -> _Check:
    if not _declared(asset).keys.primary_key:
        raise ConfigurationError(
            f"Asset {asset.key.to_user_string()} declares no metadata primary_key to check."
        )

    def _check(context: dg.AssetCheckExecutionContext) -> dg.AssetCheckResult:
        with _stored(context, asset, io_manager_key) as stored:
            key = stored.spec.keys.primary_key
            copy = stored.unkeyed(key, "primary_key")
            cols = _columns(key)
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
                "sample": [f"{_shown(r[:-1])} ({r[-1]} rows)" for r in sample],
            },
        )

    spec = dg.AssetCheckSpec(
        "primary_key_unique",
        asset=asset.key,
        blocking=blocking,
        description="The primary key is unique and never NULL (Tableau relationships rely on it).",
    )
    return _Check(spec, _check)


def foreign_key_check(
    asset: dg.AssetsDefinition, *, io_manager_key: str = "io_manager"
) -> dg.AssetChecksDefinition:
    """`foreign_keys_resolve`: rows whose foreign key has no row in the referenced table.

    A warning: such rows are often real data kept on purpose; the result counts them per
    key and shows the most frequent missing values.
    """
    return _single(_foreign_key(asset, io_manager_key), io_manager_key)


def _foreign_key(asset: dg.AssetsDefinition, io_manager_key: str) -> _Check:
    if not _declared(asset).keys.foreign_keys:
        raise ConfigurationError(
            f"Asset {asset.key.to_user_string()} declares no metadata foreign_keys to check."
        )

    def _check(context: dg.AssetCheckExecutionContext) -> dg.AssetCheckResult:
        details: dict[str, Any] = {}
        total, missing_tables = 0, []
        with _stored(context, asset, io_manager_key) as stored:
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
                    f"SELECT {_columns(fk.columns, 'f.')}, COUNT(*) AS n, "
                    "CAST(SUM(COUNT(*)) OVER () AS BIGINT), COUNT(*) OVER () "
                    f"FROM {stored.unkeyed(fk.columns, 'foreign_key')} f WHERE {present} "
                    "AND NOT EXISTS "
                    f"(SELECT 1 FROM {fk.ref_table} d WHERE {match}) "
                    f"GROUP BY {_columns(fk.columns, 'f.')} "
                    f"ORDER BY n DESC, {_columns(fk.columns, 'f.')} LIMIT {SAMPLE_SIZE}"
                )
                rows, values = (orphans[0][-2], orphans[0][-1]) if orphans else (0, 0)
                total += rows
                details[label] = {
                    "rows": rows,
                    "values": values,
                    "sample": [f"{_shown(r[:-3])} ({r[-3]} rows)" for r in orphans],
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
    return _Check(spec, _check)


def require_columns(stored: _Stored, columns: Sequence[str]) -> None:
    """`ConfigurationError` unless the stored table has each of `columns` (not_null_check)."""
    stored_names = [c.name for c in Catalog(stored.connection).columns(stored.table)]
    unknown = [c for c in columns if c not in stored_names]
    if unknown:
        raise ConfigurationError(
            f"not_null_check names {unknown}, which {stored.label} does not have; its "
            f"columns are {stored_names}. Fix the column names."
        )


def not_null_check(
    asset: dg.AssetsDefinition,
    columns: Sequence[str],
    *,
    io_manager_key: str = "io_manager",
    severity: dg.AssetCheckSeverity = ERROR,
) -> dg.AssetChecksDefinition:
    """`columns_not_null`: `columns` hold no NULL (for columns Spark calls nullable)."""
    return _single(_not_null(asset, columns, io_manager_key, severity), io_manager_key)


def _not_null(
    asset: dg.AssetsDefinition,
    columns: Sequence[str],
    io_manager_key: str,
    severity: dg.AssetCheckSeverity,
) -> _Check:
    if not columns or isinstance(columns, str):
        raise ConfigurationError(
            f"not_null_check of {asset.key.to_user_string()} needs a list of column names, "
            f"got {columns!r}."
        )

    def _check(context: dg.AssetCheckExecutionContext) -> dg.AssetCheckResult:
        with _stored(context, asset, io_manager_key) as stored:
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
    return _Check(spec, _check)


@dataclass(frozen=True)
class _Run:
    """The materialisations one run made of an asset: their partitions and rows written."""

    run_id: str
    partitions: tuple[str | None, ...]
    rows: int | None

    @property
    def rows_per_partition(self) -> float | None:
        return None if self.rows is None else self.rows / len(self.partitions)


def _last_two_runs(instance: dg.DagsterInstance, key: dg.AssetKey) -> list[_Run]:
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
    metadata = records[0].asset_materialization.metadata  # type: ignore[union-attr]
    rows = next((metadata[k].value for k in _ROW_COUNT_KEYS if k in metadata), None)
    partitions = tuple(sorted({r.partition_key for r in records}, key=str))
    return _Run(records[0].run_id, partitions, rows if isinstance(rows, int) else None)


def row_count_check(
    asset: dg.AssetsDefinition,
    *,
    min_ratio: float = 0.5,
    severity: dg.AssetCheckSeverity = ERROR,
    io_manager_key: str = "io_manager",
) -> dg.AssetChecksDefinition:
    """`row_count_vs_previous`: each partition the latest run wrote has rows, and enough.

    Counts the stored rows of each partition the latest materialisation wrote (the whole
    table when unpartitioned) and compares them with the previous materialisation's rows
    per partition, from its row-count metadata. A partition with no rows fails unless the
    previous one had none either; one below `min_ratio` of the previous fails too.
    """
    return _single(_row_count(asset, min_ratio, severity, io_manager_key), io_manager_key)


def _row_count(
    asset: dg.AssetsDefinition,
    min_ratio: float,
    severity: dg.AssetCheckSeverity,
    io_manager_key: str,
) -> _Check:
    if not 0 <= min_ratio <= 1:
        raise ConfigurationError(
            f"row_count_check of {asset.key.to_user_string()}: min_ratio is {min_ratio}; "
            "give a fraction between 0 and 1 (0.5: half the previous rows fail)."
        )

    def _check(context: dg.AssetCheckExecutionContext) -> dg.AssetCheckResult:
        runs = _last_two_runs(context.instance, asset.key)
        if not runs:
            return dg.AssetCheckResult(
                passed=False, severity=severity, description="Never materialised: no rows."
            )
        latest = runs[0]
        previous = runs[1].rows_per_partition if len(runs) > 1 else None
        with _stored(context, asset, io_manager_key) as stored:
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
            or f"{len(counts)} partition(s) with {min(counts.values(), default=0)}..."
            f"{max(counts.values(), default=0)} rows each.",
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
    return _Check(spec, _check)


def publish_freshness_check(
    published: dg.AssetsDefinition,
    *,
    max_lag_minutes: float,
    io_manager_key: str = "io_manager",
    severity: dg.AssetCheckSeverity = ERROR,
) -> dg.AssetChecksDefinition:
    """`published_copy_fresh` on the publish asset: no change waits longer than the lag.

    Reads the file's change outbox: a write not yet sent to Tableau older than
    `max_lag_minutes` fails the check, and so does a file never published. Run it on a
    schedule in a job of its own (`define_asset_job(selection=AssetSelection.checks(check))`):
    right after a publish it passes by construction, and in a run that also writes tables
    nothing orders it after the writes.
    """

    def _check(context: dg.AssetCheckExecutionContext) -> dg.AssetCheckResult:
        io_manager = _io_manager(context, io_manager_key, published.key.to_user_string())
        with io_manager.home.reading() as database, io_manager.hyper.lock(database):
            outbox = Outbox(database)
            tracking = outbox.tracking
            changes = outbox.changes()
            oldest = outbox.oldest_change_at()
        if not tracking:
            return dg.AssetCheckResult(
                passed=False,
                severity=severity,
                description=f"{io_manager.database} has never been published: materialise "
                f"{published.key.to_user_string()}.",
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
    return _single(_Check(spec, _check), io_manager_key)


def build_hyper_checks(
    assets: Sequence[dg.AssetsDefinition],
    *,
    not_null: Mapping[str, Sequence[str]] | None = None,
    min_row_ratio: float | None = 0.5,
    row_count_severity: dg.AssetCheckSeverity = ERROR,
    io_manager_key: str = "io_manager",
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
    (`hyper_assets.partitioned_checks`, on Dagster's preview); `partitioned=False` gives
    it the unpartitioned checks instead.
    """
    from hyper_assets.partitioned_checks import partitioned_checks  # builds on this module

    not_null = dict(not_null or {})
    definitions: list[dg.AssetChecksDefinition] = []
    for asset in assets:
        keys = _declared(asset).keys
        name = asset.key.to_user_string()
        checks: list[_Check] = []
        if partitioned and asset.partitions_def is not None:
            definitions += partitioned_checks(
                asset,
                not_null=not_null.pop(name, None),
                min_row_ratio=min_row_ratio,
                row_count_severity=row_count_severity,
                io_manager_key=io_manager_key,
            )
            continue
        if keys.primary_key:
            checks.append(_primary_key(asset, io_manager_key, blocking=True))
        if keys.foreign_keys:
            checks.append(_foreign_key(asset, io_manager_key))
        if min_row_ratio is not None:
            checks.append(_row_count(asset, min_row_ratio, row_count_severity, io_manager_key))
        if name in not_null:
            checks.append(_not_null(asset, not_null.pop(name), io_manager_key, ERROR))
        if checks:
            op = f"{asset.key.to_python_identifier()}_hyper_checks"
            definitions.append(_definition(op, checks, io_manager_key))
    if not_null:
        raise ConfigurationError(
            f"not_null names asset(s) {sorted(not_null)} that are not among the assets "
            f"checked ({sorted(a.key.to_user_string() for a in assets)})."
        )
    return definitions
