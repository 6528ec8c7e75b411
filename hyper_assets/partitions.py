"""Dagster partitions to the SQL predicate that selects their rows.

Time windows become `expr >= start AND expr < end` (never BETWEEN: it would take the
next partition's first instant); a single-run backfill arrives as one wide window.
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
from tableauhyperapi import escape_name, escape_string_literal

from hyper_assets.errors import ConfigurationError


def column_or_sql(expr: str, column_names: Sequence[str]) -> str:
    """A column name is quoted; anything else is taken as the user's SQL expression."""
    return escape_name(expr) if expr in column_names else expr


def _timestamp(value: datetime) -> str:
    naive = value.replace(tzinfo=None)
    return "TIMESTAMP " + escape_string_literal(naive.isoformat(sep=" "))


def _dimension_filter(expr: str, definition: PartitionsDefinition, keys: Sequence[str]) -> str:
    if isinstance(definition, TimeWindowPartitionsDefinition):
        windows = [definition.time_window_for_partition_key(k) for k in keys]
        start = min(w.start for w in windows)
        end = max(w.end for w in windows)
        return f"({expr} >= {_timestamp(start)} AND {expr} < {_timestamp(end)})"
    values = ", ".join(escape_string_literal(k) for k in sorted(set(keys)))
    return f"{expr} IN ({values})"


def partition_filter(
    definition: PartitionsDefinition,
    keys: Sequence[str],
    partition_expr: str | Mapping[str, str] | None,
    column_names: Sequence[str],
    asset: str,
) -> str:
    """The SQL predicate selecting `keys` of `definition` in a table with `column_names`."""
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
        return _dimension_filter(column_or_sql(partition_expr, column_names), definition, keys)
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
        expr = column_or_sql(partition_expr[dimension.name], column_names)
        parts.append(_dimension_filter(expr, dimension.partitions_def, dim_keys))
    return " AND ".join(parts)
