"""Internal: geography columns, staged as well-known text, stored as Hyper's GEOGRAPHY.

Asset metadata `geography_columns=[...]` names string columns whose values are WKT
(`POINT(-73.78 40.64)`: longitude first). The rows travel as text; Hyper parses each
value as it loads them, and one value it cannot parse fails the whole write. Hyper's
message names neither the column nor the value, so `invalid_value` finds them.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from tableauhyperapi import Connection, HyperException, SqlType, TypeTag, escape_string_literal

from hyper_assets._engine.types import Column
from hyper_assets.errors import ConfigurationError


def is_geography(column: Column) -> bool:
    return column.sql_type.tag == TypeTag.TABGEOGRAPHY


def as_geography(columns: list[Column], names: Sequence[str], label: str) -> list[Column]:
    """`columns` with the string columns `names` typed GEOGRAPHY; any other name is an
    error naming it (before a row is staged)."""
    text = {c.name for c in columns if c.sql_type.tag in (TypeTag.TEXT, TypeTag.VARCHAR)}
    wrong = [n for n in names if n not in text]
    if wrong:
        raise ConfigurationError(
            f"Metadata geography_columns of {label} names {wrong}, which are not string "
            f"columns of its rows ({[c.name for c in columns]}). Geography values arrive as "
            'well-known text: a string column such as "POINT(-73.78 40.64)".'
        )
    return [replace(c, sql_type=SqlType.geography()) if c.name in names else c for c in columns]


def as_text(columns: list[Column]) -> list[Column]:
    """`columns` with geography columns as the text they are staged as."""
    return [replace(c, sql_type=SqlType.text()) if is_geography(c) else c for c in columns]


def invalid_value(connection: Connection, values: str) -> tuple[str, str] | None:
    """The first value (in sort order) of the one-column text query `values` that Hyper
    cannot read as geography, and Hyper's words about it; None when every value reads.

    Bisects the sorted distinct values: about 2 log2(n) queries, on the error path only.
    """
    distinct = f"(SELECT DISTINCT v FROM ({values}) AS s(v) WHERE v IS NOT NULL) AS d"

    def parses(upto: str | None) -> bool:
        where = "" if upto is None else f" WHERE v <= {escape_string_literal(upto)}"
        try:
            connection.execute_scalar_query(
                f"SELECT COUNT(CAST(v AS GEOGRAPHY)) FROM {distinct}{where}"
            )
        except HyperException:
            return False
        return True

    def nth(index: int) -> str:
        return connection.execute_scalar_query(
            f"SELECT v FROM {distinct} ORDER BY v LIMIT 1 OFFSET {index}"
        )

    if parses(None):
        return None
    low = 0  # the first bad value's index lies in [low, high]
    high = connection.execute_scalar_query(f"SELECT COUNT(*) FROM {distinct}") - 1
    while low < high:
        middle = (low + high) // 2
        if parses(nth(middle)):
            low = middle + 1
        else:
            high = middle
    bad = nth(low)
    try:
        connection.execute_scalar_query(f"SELECT CAST({escape_string_literal(bad)} AS GEOGRAPHY)")
    except HyperException as error:
        return bad, str(error).splitlines()[0]
    return bad, "not read as geography"
