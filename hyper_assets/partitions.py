"""Dagster partitions to the SQL predicate that selects their rows.

Time windows become `expr >= start AND expr < end` (never BETWEEN: it would take the
next partition's first instant); a single-run backfill arrives as one wide window.
Bounds are wall-clock times in the partitions' time zone (TIMESTAMP and DATE columns
hold wall clocks), or instants for TIMESTAMPTZ columns.
Static and dynamic partitions become `expr IN (...)`. Multi-partitions take one
expression per dimension and AND them.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime

from dagster import (
    MultiPartitionsDefinition,
    PartitionsDefinition,
    TimeWindowPartitionsDefinition,
)
from tableauhyperapi import TypeTag, escape_name, escape_string_literal

from hyper_assets.errors import ConfigurationError
from hyper_assets.types import Column


def _timestamp(value: datetime, instant: bool) -> str:
    """A window bound: an instant for TIMESTAMPTZ columns, else the wall clock."""
    if instant:
        return "TIMESTAMPTZ " + escape_string_literal(value.isoformat(sep=" "))
    naive = value.replace(tzinfo=None)
    return "TIMESTAMP " + escape_string_literal(naive.isoformat(sep=" "))


def _dimension_filter(
    expr: str, definition: PartitionsDefinition, keys: Sequence[str], columns: Sequence[Column]
) -> str:
    by_name = {c.name: c for c in columns}
    column = by_name.get(expr)
    sql = escape_name(expr) if column else expr
    if isinstance(definition, TimeWindowPartitionsDefinition):
        instant = column is not None and column.sql_type.tag == TypeTag.TIMESTAMP_TZ
        windows = [definition.time_window_for_partition_key(k) for k in keys]
        start = _timestamp(min(w.start for w in windows), instant)
        end = _timestamp(max(w.end for w in windows), instant)
        return f"({sql} >= {start} AND {sql} < {end})"
    values = ", ".join(escape_string_literal(k) for k in sorted(set(keys)))
    return f"{sql} IN ({values})"


def partition_filter(
    definition: PartitionsDefinition,
    keys: Sequence[str],
    partition_expr: str | Mapping[str, str] | None,
    columns: Sequence[Column],
    asset: str,
) -> str:
    """The SQL predicate selecting `keys` of `definition` in a table with `columns`.

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
        return _dimension_filter(partition_expr, definition, keys, columns)
    if not isinstance(partition_expr, Mapping):
        raise ConfigurationError(
            f"Asset {asset} has multi-partitions: partition_expr must map each dimension "
            f"({', '.join(d.name for d in definition.partitions_defs)}) to a column."
        )
    parts = []
    for dimension in definition.partitions_defs:
        if dimension.name not in partition_expr:
            raise ConfigurationError(
                f"Metadata partition_expr of {asset} has no entry for partition dimension "
                f"{dimension.name!r}: add it, e.g. {{{dimension.name!r}: '<column>'}}."
            )
        dim_keys = [
            definition.get_partition_key_from_str(k).keys_by_dimension[dimension.name] for k in keys
        ]
        expr = partition_expr[dimension.name]
        parts.append(_dimension_filter(expr, dimension.partitions_def, dim_keys, columns))
    return " AND ".join(parts)
