"""The subset of the VizQL Data Service's query language the emulator answers, as SQL.

A query (a `QueryRequest`'s `query`, already valid by the schema) reads one logical
table: its dimension fields (no `function`) group, its measure fields aggregate with
COUNT, SUM, MIN or MAX, and its filters are SET (`values`, `exclude`) and
QUANTITATIVE_DATE (RANGE, MIN, MAX, ONLY_NULL, ONLY_NON_NULL, `includeNulls`) on
dimension fields. `sortPriority` and `sortDirection` order the rows; `fieldAlias` names a
column of OBJECTS output. Anything else the schema allows (calculations, bins, table
calculations, other functions and filters, parameters, fields of several logical tables,
`maxDecimalPlaces`, an option other than `returnFormat`, `debug` and
`bypassMetadataCache` set to anything but false) is refused with 501, naming what is not
emulated, rather than answered wrongly.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from tableauhyperapi import Date, Timestamp, escape_name, escape_string_literal

from hyper_assets.emulator.errors import VdsApiError
from hyper_assets.emulator.vds_source import Field, Source

AGGREGATES = ("COUNT", "SUM", "MIN", "MAX")
_FIELD_KEYS = {"fieldCaption", "function", "fieldAlias", "sortDirection", "sortPriority"}
_OPTIONS = {"returnFormat", "debug", "bypassMetadataCache"}
_DATES = ("DATE", "DATETIME")


@dataclass(frozen=True)
class Column:
    field: Field
    function: str | None  # None: a dimension
    label: str  # its key in OBJECTS output

    @property
    def sql(self) -> str:
        name = escape_name(self.field.name)
        return f"{self.function}({name})" if self.function else name


@dataclass(frozen=True)
class Plan:
    """The SQL of one query, and how its rows are returned."""

    sql: str
    labels: tuple[str, ...]
    arrays: bool  # returnFormat ARRAYS

    def output(self, rows: Sequence[Sequence[Any]]) -> dict[str, list[Any]]:
        """The reply (a `QueryOutput`) of the rows the SQL returned."""
        values = [[_json(v) for v in row] for row in rows]
        if self.arrays:
            return {"data": values}
        return {"data": [dict(zip(self.labels, row, strict=True)) for row in values]}


def not_emulated(what: str) -> VdsApiError:
    return VdsApiError(
        501,
        "501000",
        f"{what} is not emulated: the emulator answers dimension and measure fields "
        f"({', '.join(AGGREGATES)}) of one logical table, SET and QUANTITATIVE_DATE "
        "filters, and returnFormat.",
    )


def unknown_field(caption: str) -> VdsApiError:
    return VdsApiError(400, "400803", f"Unknown Field: {caption}.")


def plan(source: Source, request: dict[str, Any]) -> Plan:
    """The SQL answering `request` (a valid `QueryRequest`) over `source`'s stored file."""
    options = request.get("options") or {}
    # A false option asks for nothing (every boolean option defaults to false).
    _only({k: v for k, v in options.items() if v is not False}, _OPTIONS, "option")
    query = request["query"]
    if query.get("parameters"):
        raise not_emulated("parameters")
    columns = [_column(source, spec) for spec in query["fields"]]
    where = [_filter(source, spec) for spec in query.get("filters") or []]
    tables = {c.field.table for c in columns} | {f.table for f, _ in where}
    if len(tables) > 1:
        captions = ", ".join(sorted(repr(t.caption) for t in tables))
        raise not_emulated(f"a query of several logical tables ({captions})")
    [table] = tables
    sql = f"SELECT {', '.join(c.sql for c in columns)} FROM {table.table}"
    if where:
        sql += " WHERE " + " AND ".join(condition for _, condition in where)
    dimensions = [c.sql for c in columns if c.function is None]
    if dimensions and len(dimensions) < len(columns):
        sql += f" GROUP BY {', '.join(dimensions)}"
    elif dimensions:
        sql = sql.replace("SELECT ", "SELECT DISTINCT ", 1)
    order = sorted(
        (spec["sortPriority"], index, spec.get("sortDirection", "ASC"))
        for index, spec in enumerate(query["fields"])
        if "sortPriority" in spec
    )
    if order:
        sql += " ORDER BY " + ", ".join(f"{i + 1} {d}" for _, i, d in order)
    labels = tuple(c.label for c in columns)
    return Plan(sql, labels, options.get("returnFormat") == "ARRAYS")


def _column(source: Source, spec: dict[str, Any]) -> Column:
    _only(spec, _FIELD_KEYS, "field property")
    field = source.field(spec["fieldCaption"])
    if field is None:
        raise unknown_field(spec["fieldCaption"])
    function = spec.get("function")
    if function is not None and function not in AGGREGATES:
        raise not_emulated(f"function {function!r}")
    if function == "SUM" and not field.numeric:
        raise VdsApiError(
            400, "400800", f"SUM of {field.caption!r} ({field.data_type}) is not a number."
        )
    label = spec.get("fieldAlias") or (
        f"{function}({field.caption})" if function else field.caption
    )
    return Column(field, function, label)


def _only(given: dict[str, Any], emulated: set[str], what: str) -> None:
    """Refuses the first key of `given` that is not `emulated`."""
    extra = sorted(set(given) - emulated)
    if extra:
        raise not_emulated(f"{what} {extra[0]!r}")


def _filter(source: Source, spec: dict[str, Any]) -> tuple[Field, str]:
    kind = spec["filterType"]
    if kind not in ("SET", "QUANTITATIVE_DATE"):
        raise not_emulated(f"filterType {kind!r}")
    if set(spec["field"]) != {"fieldCaption"}:
        raise not_emulated("a filter on a measure or a calculation")
    field = source.field(spec["field"]["fieldCaption"])
    if field is None:
        raise unknown_field(spec["field"]["fieldCaption"])
    name = escape_name(field.name)
    if kind == "SET":
        values = spec["values"]
        listed = [_literal(field, v) for v in values if v is not None]
        parts = [f"{name} IN ({', '.join(listed)})"] if listed else []
        parts += [f"{name} IS NULL"] if None in values else []
        condition = " OR ".join(parts) or "FALSE"
        return field, f"NOT ({condition})" if spec.get("exclude") else f"({condition})"
    if field.data_type not in _DATES:
        raise VdsApiError(
            400,
            "400800",
            f"a QUANTITATIVE_DATE filter needs a date field; {field.caption!r} is "
            f"{field.data_type}.",
        )
    day = f"CAST({name} AS DATE)"
    how = spec["quantitativeFilterType"]
    if how == "ONLY_NULL":
        return field, f"{name} IS NULL"
    if how == "ONLY_NON_NULL":
        return field, f"{name} IS NOT NULL"
    bounds = []
    for bound, op in (("minDate", ">="), ("maxDate", "<=")):
        needed = how == "RANGE" or (how, bound) in (("MIN", "minDate"), ("MAX", "maxDate"))
        if needed and bound not in spec:
            raise VdsApiError(400, "400800", f"a {how} date filter needs {bound}.")
        if needed:
            bounds.append(f"{day} {op} DATE {escape_string_literal(spec[bound])}")
    condition = " AND ".join(bounds)
    if spec.get("includeNulls"):
        condition = f"({condition} OR {name} IS NULL)"
    return field, condition


def _literal(field: Field, value: Any) -> str:
    """`value` of a SET filter as SQL of the field's type; a value of another type is a 400."""
    ok = {
        "INTEGER": isinstance(value, int) and not isinstance(value, bool),
        "REAL": isinstance(value, int | float) and not isinstance(value, bool),
        "BOOLEAN": isinstance(value, bool),
        "STRING": isinstance(value, str),
        "DATE": isinstance(value, str),
        "DATETIME": isinstance(value, str),
    }.get(field.data_type, False)
    if not ok:
        raise VdsApiError(
            400,
            "400800",
            f"SET filter value {value!r} does not fit field {field.caption!r} ({field.data_type}).",
        )
    if isinstance(value, bool):
        return "TRUE" if value else "FALSE"
    if isinstance(value, int | float):
        return repr(value)
    kind = {"DATE": "DATE ", "DATETIME": "TIMESTAMP "}.get(field.data_type, "")
    return f"{kind}{escape_string_literal(value)}"


def _json(value: Any) -> Any:
    """A value Hyper returned, as JSON: dates ISO 8601, decimals as numbers."""
    if isinstance(value, Date | Timestamp):
        value = value.to_datetime() if isinstance(value, Timestamp) else value.to_date()
    if isinstance(value, dt.datetime):
        return value.isoformat(timespec="seconds")
    if isinstance(value, dt.date):
        return value.isoformat()
    if isinstance(value, Decimal):
        return int(value) if value == value.to_integral_value() else float(value)
    return value
