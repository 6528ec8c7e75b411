"""Dagster partitions to the window of rows they own (`hyper_assets._rows.window`).

A single-run backfill arrives as one wide window. Bounds are taken in the partitions' time
zone, as instants for TIMESTAMPTZ columns. `partition_counts` counts the rows each window
holds.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from itertools import pairwise

from dagster import (
    MultiPartitionsDefinition,
    PartitionsDefinition,
    TimeWindowPartitionsDefinition,
)
from tableauhyperapi import Connection, TableName, TypeTag

from hyper_assets._engine.types import Column
from hyper_assets._rows.window import Dimension, KeySet, TimeRange, Window
from hyper_assets.errors import ConfigurationError

#: Materialisation metadata the IO manager writes and the checks read: the rows a
#: single-run backfill wrote over its range of partitions (each of them also gets its
#: own `dagster/partition_row_count`).
RANGE_ROW_COUNT = "range_row_count"


def _dimension(
    expr: str,
    definition: PartitionsDefinition,
    keys: Sequence[str],
    columns: Sequence[Column],
    asset: str,
) -> Dimension:
    column = {c.name: c for c in columns}.get(expr)
    if isinstance(definition, TimeWindowPartitionsDefinition):
        instant = column is not None and column.sql_type.tag == TypeTag.TIMESTAMP_TZ
        windows = sorted({definition.time_window_for_partition_key(k) for k in keys})
        if any(a.end != b.start for a, b in pairwise(windows)):
            raise ConfigurationError(
                f"Partitions {', '.join(sorted(set(keys)))} of {asset} are not consecutive, "
                "and one window between the first and the last would cover the ones between "
                "them too: pass each run of consecutive partitions separately."
            )
        start, end = windows[0].start, windows[-1].end
        return TimeRange(expr, column is not None, start, end, instant)
    return KeySet(expr, column is not None, tuple(sorted(set(keys))))


def partition_window(
    definition: PartitionsDefinition,
    keys: Sequence[str],
    partition_expr: str | Mapping[str, str] | None,
    columns: Sequence[Column],
    asset: str,
) -> Window:
    """The window of `keys` of `definition` in a table with `columns`.

    `partition_expr` naming a column is quoted; anything else is the user's SQL.
    """
    if not partition_expr:
        raise ConfigurationError(
            f"Asset {asset} is partitioned but has no metadata partition_expr: add "
            'metadata={"partition_expr": "<column holding the partition>"} so the IO '
            "manager knows which rows a partition owns."
        )
    if not isinstance(definition, MultiPartitionsDefinition):
        if not isinstance(partition_expr, str):
            raise ConfigurationError(
                f"Metadata partition_expr of {asset} must be a column name or SQL expression."
            )
        return Window((_dimension(partition_expr, definition, keys, columns, asset),))
    if not isinstance(partition_expr, Mapping):
        raise ConfigurationError(
            f"Asset {asset} has multi-partitions: partition_expr must map each dimension "
            f"({', '.join(d.name for d in definition.partitions_defs)}) to a column."
        )
    parts, per_dimension = [], []
    for dimension in definition.partitions_defs:
        if dimension.name not in partition_expr:
            raise ConfigurationError(
                f"Metadata partition_expr of {asset} has no entry for partition dimension "
                f"{dimension.name!r}: add it, e.g. {{{dimension.name!r}: '<column>'}}."
            )
        dim_keys = [
            definition.get_partition_key_from_str(k).keys_by_dimension[dimension.name] for k in keys
        ]
        per_dimension.append(dim_keys)
        expr = partition_expr[dimension.name]
        parts.append(_dimension(expr, dimension.partitions_def, dim_keys, columns, asset))
    if math.prod(len(set(k)) for k in per_dimension) != len(set(keys)):
        raise ConfigurationError(
            f"Partitions {', '.join(sorted(set(keys)))} of {asset} do not form a rectangle "
            "(every combination of their dimensions' keys): pass them in groups that do."
        )
    return Window(tuple(parts))


def partition_counts(
    connection: Connection,
    table: TableName,
    definition: PartitionsDefinition,
    keys: Sequence[str],
    partition_expr: str | Mapping[str, str] | None,
    columns: Sequence[Column],
    asset: str,
) -> dict[str, int]:
    """Stored rows of each partition of `keys` (one window: what one run writes), in scans
    of that window counting 200 partitions each."""
    scanned = partition_window(definition, keys, partition_expr, columns, asset)
    counts: dict[str, int] = {}
    for start in range(0, len(keys), 200):
        chunk = keys[start : start + 200]
        windows = (partition_window(definition, [k], partition_expr, columns, asset) for k in chunk)
        filters = ", ".join(f"COUNT(*) FILTER (WHERE {w.sql})" for w in windows)
        (row,) = connection.execute_list_query(f"SELECT {filters} FROM {table} WHERE {scanned.sql}")
        counts.update(zip(chunk, row, strict=True))
    return counts
