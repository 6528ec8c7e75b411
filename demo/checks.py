"""Asset checks on what the `.hyper` file holds, read with SQL through the IO manager.

Keys: each dimension's primary key is unique and not NULL (ERROR); fact rows whose key is
missing from its dimension are counted (WARN: they are real data, kept on purpose).
Counts: dimensions are not empty, every stored day has a plausible number of rows.
Plus Dagster's column-schema change checks and time-partition freshness checks.
"""

from collections.abc import Sequence

from dagster import (
    AssetCheckResult,
    AssetChecksDefinition,
    AssetCheckSeverity,
    AssetsDefinition,
    MetadataValue,
    ResourceParam,
    asset_check,
    build_column_schema_change_checks,
    build_metadata_bounds_checks,
    build_time_partition_freshness_checks,
)
from tableauhyperapi import TableName, escape_name

from demo.assets import airlines, airports, flights, planes, weather
from hyper_assets import HyperIOManager
from hyper_assets.tables import parse_foreign_keys, table_label

DIMENSIONS = (airlines, airports, planes)
FACTS = (flights, weather)
DAILY_ROW_BOUNDS = {"flights": (500, 1100), "weather": (1, 75)}  # 3 airports x 24-25 h


def _table(io_manager: HyperIOManager, assets_def: AssetsDefinition) -> TableName:
    return io_manager.table_for(assets_def.key.path, assets_def.metadata_by_key[assets_def.key])


def primary_key_check(dimension: AssetsDefinition) -> AssetChecksDefinition:
    """Fails when the dimension's primary key repeats or is NULL: relationships would break."""
    (column,) = dimension.metadata_by_key[dimension.key]["primary_key"]

    @asset_check(asset=dimension, name="primary_key_unique", blocking=True)
    def _check(io_manager: ResourceParam[HyperIOManager]) -> AssetCheckResult:
        key = escape_name(column)
        with io_manager.hyper.connect(io_manager.database, create=False) as connection:
            rows, distinct, nulls = connection.execute_list_query(
                f"SELECT COUNT(*), COUNT(DISTINCT {key}), COUNT(*) - COUNT({key}) "
                f"FROM {_table(io_manager, dimension)}"
            )[0]
        return AssetCheckResult(
            passed=rows == distinct and nulls == 0,
            metadata={"rows": rows, "duplicate_rows": rows - nulls - distinct, "null_keys": nulls},
        )

    return _check


def orphan_check(fact: AssetsDefinition) -> AssetChecksDefinition:
    """Counts fact rows whose foreign key has no dimension row, as a warning."""

    @asset_check(asset=fact, name="foreign_keys_resolve")
    def _check(io_manager: ResourceParam[HyperIOManager]) -> AssetCheckResult:
        table = _table(io_manager, fact)
        keys = parse_foreign_keys(
            fact.metadata_by_key[fact.key]["foreign_keys"],
            table.schema_name.name.unescaped,
            table_label(table),
        )
        details: dict[str, object] = {}
        total = 0
        with io_manager.hyper.connect(io_manager.database, create=False) as connection:
            for fk in keys:
                (column,), (ref_column,) = fk.columns, fk.ref_columns
                label = f"{column} -> {table_label(fk.ref_table)}.{ref_column}"
                if not connection.catalog.has_table(fk.ref_table):
                    details[label] = "dimension not loaded yet"
                    continue
                col, ref = escape_name(column), escape_name(ref_column)
                orphans = connection.execute_list_query(
                    f"SELECT f.{col}, COUNT(*) FROM {table} f WHERE f.{col} IS NOT NULL AND "
                    f"NOT EXISTS (SELECT 1 FROM {fk.ref_table} d WHERE d.{ref} = f.{col}) "
                    "GROUP BY 1 ORDER BY 2 DESC, 1"
                )
                rows = sum(n for _, n in orphans)
                total += rows
                details[label] = {
                    "rows": rows,
                    "values": len(orphans),
                    "top": [f"{v} ({n})" for v, n in orphans[:5]],
                }
        return AssetCheckResult(
            passed=total == 0 and all(isinstance(d, dict) for d in details.values()),
            severity=AssetCheckSeverity.WARN,
            metadata={"orphan_rows": total, "orphans": MetadataValue.json(details)},
        )

    return _check


def daily_rows_check(fact: AssetsDefinition, low: int, high: int) -> AssetChecksDefinition:
    """Warns when a stored day has fewer than `low` or more than `high` rows (a partial file)."""
    date_column = fact.metadata_by_key[fact.key]["partition_expr"]

    @asset_check(asset=fact, name="daily_row_count_in_bounds")
    def _check(io_manager: ResourceParam[HyperIOManager]) -> AssetCheckResult:
        day = escape_name(date_column)
        with io_manager.hyper.connect(io_manager.database, create=False) as connection:
            counts = connection.execute_list_query(
                f"SELECT CAST({day} AS TEXT), COUNT(*) FROM {_table(io_manager, fact)} "
                "GROUP BY 1 ORDER BY 1"
            )
        outside = [f"{d} ({n})" for d, n in counts if not low <= n <= high]
        return AssetCheckResult(
            passed=not outside,
            severity=AssetCheckSeverity.WARN,
            metadata={
                "days": len(counts),
                "fewest_rows": min((n for _, n in counts), default=0),
                "most_rows": max((n for _, n in counts), default=0),
                "bounds": f"{low}..{high}",
                "days_outside": outside[:20],
            },
        )

    return _check


def build_checks() -> Sequence[AssetChecksDefinition]:
    """Every check of the demo, freshness checks last (they need their own sensor)."""
    return [
        *(primary_key_check(d) for d in DIMENSIONS),
        *(orphan_check(f) for f in FACTS),
        *(daily_rows_check(f, *DAILY_ROW_BOUNDS[f.key.path[-1]]) for f in FACTS),
        *build_metadata_bounds_checks(
            assets=list(DIMENSIONS), metadata_key="dagster/row_count", min_value=1
        ),
        *build_column_schema_change_checks(assets=[*DIMENSIONS, *FACTS]),
        *FRESHNESS_CHECKS,
    ]


FRESHNESS_CHECKS = build_time_partition_freshness_checks(
    assets=list(FACTS), deadline_cron="0 9 * * *", timezone="America/New_York"
)
"""The last complete day of each fact is loaded by 9:00 New York time."""
