"""Whether Tableau's copy of a data source is ours, asked of Tableau's VizQL Data Service.

`read_local` reads what the local `.hyper` file would publish now, in one short hold of
the file; `check_copy` then compares it with what Tableau holds, the file no longer held
while it waits on Tableau, with `T + 3` queries for a data source of `T` tables: the
fields (`read-metadata`), the model (`get-datasource-model`), one count per table (the
fact's with a SUM) and one query of the fact's last partitions. It reports, in a `CopyReport`:

- the model: Tableau's logical tables and relationships against the tree the file makes
  (`model.data_model`: a table per role copy, a relationship per foreign key), by caption;
- per table, `COUNT` of one column (a NOT NULL one where there is one, so the count of
  rows), Tableau's against the file's;
- for the fact, `SUM` of one numeric column (a non-key one first), and for each of the
  last `last_partitions` values of `partition_column` the same count and sum.

Fields are found in `read-metadata` by logical table and field name (the column's), and
queried by the caption Tableau gives them: a caption is never guessed. Where the service
is off on the site, the report is `skipped`, saying so: it is not a failure.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import date, datetime
from decimal import Decimal
from typing import Any

from tableauhyperapi import Connection, Date, TableName, Timestamp, TypeTag, escape_name

from hyper_assets._engine.tables import Catalog, Keys
from hyper_assets._engine.types import Column
from hyper_assets._rows.pending_keys import stored_keys
from hyper_assets.errors import ConfigurationError, VizqlDataServiceError
from hyper_assets.tableau._publish.model import DataModel, data_model, held_tables
from hyper_assets.tableau._rest import vds
from hyper_assets.tableau._rest.client import TableauClient

#: How many of the fact's newest partitions are compared, unless the caller says.
DEFAULT_LAST_PARTITIONS = 7
_NUMERIC = ("INTEGER", "REAL")
_DATES = ("DATE", "DATETIME")

Number = int | float


@dataclass(frozen=True)
class CopyFigure:
    """One aggregate of a table (a partition of it, if `partition`), here and in Tableau."""

    table: str
    measure: str  # "COUNT(column)" or "SUM(column)"
    local: Number | None
    tableau: Number | None
    partition: str | None = None

    @property
    def matches(self) -> bool:
        if self.local is None or self.tableau is None:
            return self.local == self.tableau
        return math.isclose(self.local, self.tableau, rel_tol=1e-9, abs_tol=1e-9)

    def __str__(self) -> str:
        where = f" partition {self.partition!r}" if self.partition is not None else ""
        return (
            f"table {self.table!r}{where}: {self.measure} is {_shown(self.tableau)} in "
            f"Tableau's copy, {_shown(self.local)} in the file"
        )


@dataclass(frozen=True)
class CopyReport:
    """What `check_copy` found: `passed` unless the model differs or a figure does not
    match; `skipped` (why) when the site has the VizQL Data Service off, or when the file
    holds `unpublished` changes the copy cannot have yet."""

    datasource: str
    model_differences: tuple[str, ...] = ()
    figures: tuple[CopyFigure, ...] = ()
    queries: int = 0
    skipped: str | None = None
    tables: tuple[str, ...] = field(default=())
    #: Changes of the file the last publish did not send: compared, the copy would differ.
    unpublished: int = 0

    @property
    def mismatches(self) -> tuple[CopyFigure, ...]:
        return tuple(f for f in self.figures if not f.matches)

    @property
    def passed(self) -> bool:
        return not self.model_differences and not self.mismatches

    @property
    def failures(self) -> list[str]:
        """Each difference, as a line naming the table (and partition) and both figures."""
        return [*self.model_differences, *(str(f) for f in self.mismatches)]

    def describe(self) -> str:
        if self.skipped:
            return f"Skipped: {self.skipped}"
        if self.passed:
            tables = ", ".join(repr(t) for t in sorted(self.tables))
            return (
                f"Tableau's copy of {self.datasource!r} is the file's: logical tables "
                f"{tables} and their relationships, {len(self.figures)} figure(s) equal "
                f"({self.queries} VizQL Data Service queries)."
            )
        failures = self.failures
        shown = "; ".join(failures[:20])
        more = f"; and {len(failures) - 20} more" if len(failures) > 20 else ""
        return (
            f"Tableau's copy of {self.datasource!r} is not the file's ({len(failures)} "
            f"difference(s)): {shown}{more}."
        )


def model_differences(expected: DataModel, found: vds.Model) -> list[str]:
    """What Tableau's model has that the tree lacks, and the reverse, by caption."""
    tables = {t.name.unescaped for t in expected.tables}
    seen = {t.caption for t in found.tables}
    pairs = {(r.table.name.unescaped, r.dimension.name.unescaped) for r in expected.relationships}
    related = {(found.caption(a), found.caption(b)) for a, b in found.relationships}
    missing, extra = "is missing from Tableau's model", "is in Tableau's model, not the file's tree"
    return [
        *(f"logical table {t!r} {missing}" for t in sorted(tables - seen)),
        *(f"logical table {t!r} {extra}" for t in sorted(seen - tables)),
        *(f"relationship {a!r} -> {b!r} {missing}" for a, b in sorted(pairs - related)),
        *(f"relationship {a!r} -> {b!r} {extra}" for a, b in sorted(related - pairs)),
    ]


Figures = dict[str | None, tuple[Number | None, ...]]


@dataclass(frozen=True)
class _LocalTable:
    """One logical table's figures in the file: the columns they aggregate, the figures of
    the table, and, for the fact, of its last partitions (`partitions`, newest first)."""

    caption: str
    fact: bool
    counted: str
    summed: str | None
    figures: Figures
    partitions: tuple[Any, ...] = ()
    partition_figures: Figures = field(default_factory=dict)

    @property
    def names(self) -> tuple[str, ...]:
        return (f"COUNT({self.counted})", *((f"SUM({self.summed})",) if self.summed else ()))


@dataclass(frozen=True)
class LocalCopy:
    """What the file would publish as data source `datasource`, read by `read_local` in
    one hold of the file: its tree, and each logical table's figures."""

    datasource: str
    tree: DataModel
    tables: tuple[_LocalTable, ...]
    partition_column: str | None


def read_local(
    connection: Connection,
    datasource: str,
    *,
    tables: Sequence[str] | None = None,
    partition_column: str | None = None,
    last_partitions: int = DEFAULT_LAST_PARTITIONS,
    sum_column: str | None = None,
) -> LocalCopy:
    """The figures `check_copy` compares, read from the file `connection` opened, as a
    publish of `tables` (all without) makes data source `datasource`: per logical table the
    COUNT of one column, for the fact the SUM of `sum_column` (else one is chosen) and the
    same per each of the last `last_partitions` values of `partition_column`. It calls
    nothing remote: the caller closes the connection before asking Tableau."""
    if last_partitions < 1:
        raise ConfigurationError(
            f"last_partitions of the copy check of {datasource!r} is {last_partitions}; "
            "give 1 or more."
        )
    catalog = Catalog(connection)
    keys = stored_keys(catalog)
    held = held_tables(catalog, tables, datasource)
    tree = data_model({t: keys[t] for t in held}, datasource, chosen=tables is not None)
    fact_columns = catalog.columns(tree.fact)
    if partition_column is not None and partition_column not in {c.name for c in fact_columns}:
        raise ConfigurationError(
            f"The copy check of {datasource!r}: the fact {tree.fact} has no column "
            f"{partition_column!r} (partition_column); give one of "
            f"{[c.name for c in fact_columns]}."
        )
    found: list[_LocalTable] = []
    for table in tree.tables:
        source = tree.source(table)
        columns = catalog.columns(source)
        counted = _counted(columns, keys[source].primary_key)
        if table != tree.fact:
            figures = _local(connection, source, counted, None)
            found.append(_LocalTable(table.name.unescaped, False, counted, None, figures))
            continue
        summed = _summed(columns, keys[source], sum_column, datasource)
        figures = _local(connection, source, counted, summed)
        partitions: list[Any] = []
        by_partition: Figures = {}
        if partition_column is not None:
            partitions = _last_partitions(connection, source, partition_column, last_partitions)
        if partition_column is not None and partitions:  # the fact's, if it has rows
            by_partition = _local(
                connection, source, counted, summed, partition_column, len(partitions)
            )
        found.append(
            _LocalTable(
                table.name.unescaped,
                True,
                counted,
                summed,
                figures,
                tuple(partitions),
                by_partition,
            )
        )
    return LocalCopy(datasource, tree, tuple(found), partition_column)


def check_copy(local: LocalCopy, client: TableauClient, project: str) -> CopyReport:
    """Compares Tableau's copy of data source `local.datasource` of `project` with the
    file's figures `local` (`read_local`'s), through the VizQL Data Service."""
    datasource, tree = local.datasource, local.tree
    where = client.find_datasource(datasource, client.project(project).id)
    if where is None:
        missing = f"data source {datasource!r} is not in project {project!r}: publish it first"
        return CopyReport(datasource, (missing,))
    ask = _Asker(client, where.id)
    try:
        found = vds.model(ask("get-datasource-model", {}))
        fields = vds.fields(ask("read-metadata", {}))
    except VizqlDataServiceError as err:
        if err.disabled:
            why = f"{err.detail.rstrip('.')}. {err.hint}"
            return CopyReport(datasource, skipped=why, queries=ask.count)
        raise
    differences = model_differences(tree, found)
    figures: list[CopyFigure] = []
    ids = {t.caption: t.id for t in found.tables}
    for table in local.tables:
        if table.caption not in ids:
            continue  # a difference of the model already
        named = {f.name: f for f in fields if f.table_id == ids[table.caption]}
        used = (
            (table.counted, table.summed, local.partition_column)
            if table.fact
            else (table.counted,)
        )
        absent = [c for c in used if c is not None and c not in named]
        differences += [
            f"logical table {table.caption!r} has no field named {c!r} in Tableau's copy"
            for c in absent
        ]
        if absent:
            continue
        figures += _figures(table, table.figures, ask.figures(table, named))
        if local.partition_column is not None and table.partitions:
            dimension = named[local.partition_column]
            remote = ask.figures(table, named, dimension, table.partitions)
            figures += _figures(table, table.partition_figures, remote)
    return CopyReport(
        datasource,
        tuple(differences),
        tuple(figures),
        ask.count,
        tables=tuple(t.name.unescaped for t in tree.tables),
    )


class _Asker:
    """The VizQL Data Service calls of one check, counted."""

    def __init__(self, client: TableauClient, luid: str) -> None:
        self.client, self.luid, self.count = client, luid, 0

    def __call__(self, operation: str, body: dict[str, Any]) -> Any:
        self.count += 1
        return self.client.vds(operation, vds.datasource(self.luid) | body)

    def figures(
        self,
        table: _LocalTable,
        named: dict[str, vds.FieldInfo],
        dimension: vds.FieldInfo | None = None,
        values: Sequence[Any] = (),
    ) -> Figures:
        """COUNT (and SUM) of `table` in Tableau's copy (its fields `named` by column),
        per value of `dimension` among `values`."""
        fields: list[dict[str, Any]] = []
        filters: list[dict[str, Any]] = []
        if dimension is not None:
            fields.append({"fieldCaption": dimension.caption, "sortPriority": 1})
            filters.append(_filter(dimension, values))
        fields.append({"fieldCaption": named[table.counted].caption, "function": "COUNT"})
        if table.summed:
            fields.append({"fieldCaption": named[table.summed].caption, "function": "SUM"})
        query: dict[str, Any] = {"fields": fields} | ({"filters": filters} if filters else {})
        reply = self("query-datasource", {"query": query, "options": {"returnFormat": "ARRAYS"}})
        found: Figures = {}
        for row in reply.get("data") or []:
            if dimension is None:
                found[None] = tuple(row)
            else:
                found[_key(row[0])] = tuple(row[1:])
        return found


def _filter(dimension: vds.FieldInfo, values: Sequence[Any]) -> dict[str, Any]:
    """The filter of a query to `values` of `dimension`: a date range for a date field
    (the values outside the compared ones are not compared), else a SET."""
    field = {"fieldCaption": dimension.caption}
    if dimension.data_type in _DATES:
        days = sorted(_key(v)[:10] for v in values)
        return {
            "field": field,
            "filterType": "QUANTITATIVE_DATE",
            "quantitativeFilterType": "RANGE",
            "minDate": days[0],
            "maxDate": days[-1],
        }
    return {"field": field, "filterType": "SET", "values": [_plain(v) for v in values]}


def _figures(table: _LocalTable, local: Figures, remote: Figures) -> list[CopyFigure]:
    """A figure per measure and key of `local`: Tableau's copy lacking a key has none."""
    return [
        CopyFigure(table.caption, name, here[i], remote.get(key, (None,) * len(here))[i], key)
        for key, here in local.items()
        for i, name in enumerate(table.names)
    ]


def _local(
    connection: Connection,
    table: TableName,
    counted: str,
    summed: str | None,
    partition_column: str | None = None,
    partitions: int = 0,
) -> Figures:
    """COUNT of `counted` (and SUM of `summed`) of the file's `table`, per each of its last
    `partitions` values of `partition_column` when it is given."""
    aggregates = [f"COUNT({escape_name(counted)})"]
    if summed:
        aggregates.append(f"SUM({escape_name(summed)})")
    if partition_column is None:
        [row] = connection.execute_list_query(f"SELECT {', '.join(aggregates)} FROM {table}")
        return {None: tuple(_number(v) for v in row)}
    part = escape_name(partition_column)
    newest = (
        f"SELECT DISTINCT {part} FROM {table} WHERE {part} IS NOT NULL ORDER BY {part} DESC "
        f"LIMIT {partitions}"
    )
    rows = connection.execute_list_query(
        f"SELECT {part}, {', '.join(aggregates)} FROM {table} WHERE {part} IN ({newest}) "
        f"GROUP BY {part}"
    )
    return {_key(row[0]): tuple(_number(v) for v in row[1:]) for row in rows}


def _last_partitions(
    connection: Connection, table: TableName, column: str, count: int
) -> list[Any]:
    name = escape_name(column)
    rows = connection.execute_list_query(
        f"SELECT DISTINCT {name} FROM {table} WHERE {name} IS NOT NULL ORDER BY {name} DESC "
        f"LIMIT {count}"
    )
    return [row[0] for row in rows]


_NUMERIC_TAGS = {
    TypeTag.SMALL_INT,
    TypeTag.INT,
    TypeTag.BIG_INT,
    TypeTag.FLOAT,
    TypeTag.DOUBLE,
    TypeTag.NUMERIC,
}


def _counted(columns: Sequence[Column], primary_key: Sequence[str]) -> str:
    """The column whose COUNT is the table's rows: a NOT NULL one, else the key's first."""
    required = [c.name for c in columns if not c.nullable]
    return (required or list(primary_key) or [columns[0].name])[0]


def _summed(
    columns: Sequence[Column], keys: Keys, chosen: str | None, datasource: str
) -> str | None:
    """The fact's column to sum: `chosen`, else the first numeric one that is no key."""
    numeric = [c.name for c in columns if c.sql_type.tag in _NUMERIC_TAGS]
    if chosen is not None:
        if chosen not in numeric:
            raise ConfigurationError(
                f"The copy check of {datasource!r}: sum_column {chosen!r} is not a numeric "
                f"column of the fact; give one of {numeric}."
            )
        return chosen
    key_columns = set(keys.primary_key) | {c for fk in keys.foreign_keys for c in fk.columns}
    plain = [name for name in numeric if name not in key_columns]
    return next(iter(plain or numeric), None)


def _number(value: Any) -> Number | None:
    if isinstance(value, Decimal):
        return int(value) if value == value.to_integral_value() else float(value)
    return value if isinstance(value, int | float) or value is None else float(value)


def _key(value: Any) -> str:
    """A partition value as both sides show it: dates in ISO 8601, numbers as JSON has
    them (a NUMERIC 202401 as 202401, 1.50 as 1.5), others as text."""
    if isinstance(value, Decimal):
        value = _number(value)
    if isinstance(value, Timestamp):
        value = value.to_datetime()
    if isinstance(value, Date):
        value = value.to_date()
    if isinstance(value, datetime):
        return value.isoformat(timespec="seconds")
    if isinstance(value, date):
        return value.isoformat()
    return str(value)


def _plain(value: Any) -> Any:
    """A partition value as JSON: numbers and text as they are, others as text."""
    if isinstance(value, Decimal):
        return _number(value)
    return value if isinstance(value, int | float | str | bool) else _key(value)


def _shown(value: Number | None) -> str:
    return "absent" if value is None else f"{value:g}" if isinstance(value, float) else str(value)
