"""Apply an action batch to a target `.hyper`, reading a payload `.hyper`: all or nothing.

The actions are the emulator's own reading of the batch (`hyper_assets.emulator.batch`),
and the target's keys its own reading of the file (`hyper_assets.emulator.catalog`). The
target is attached read-write as `target`, the payload read-only as `payload`. Every
action is first checked against both catalogs; then the actions' DML runs in a single
transaction with every statement checked, because Hyper aborts a transaction after a
failed statement and a later COMMIT silently commits nothing. The batch needs no DDL
(Hyper would take DDL in that transaction only before its first DML statement).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from datetime import UTC, datetime
from pathlib import Path

from tableauhyperapi import (
    Connection,
    Endpoint,
    HyperException,
    Nullability,
    SqlType,
    TableDefinition,
    TableName,
    TypeTag,
    escape_name,
    escape_string_literal,
)

from hyper_assets._engine.sql import attach, transaction
from hyper_assets.emulator.batch import (
    FIELDS,
    Action,
    Comparison,
    Condition,
    Constant,
    Junction,
    Literal,
    comparisons,
)
from hyper_assets.emulator.catalog import read_keys
from hyper_assets.emulator.errors import ActionBatchError
from hyper_assets.errors import ActionValidationError, TableNotFoundError

TARGET_DB = "target"
PAYLOAD_DB = "payload"
T, S = "t", "s"  # SQL aliases of the target and the source table

Progress = Callable[[int, int], None]

_COMPARE = {"eq": "=", "neq": "<>", "gt": ">", "lt": "<", "gte": ">=", "lte": "<="}


class _Refused(Exception):
    """An action that cannot run; becomes an `ActionBatchError` naming the action."""


def apply_batch(
    endpoint: Endpoint,
    target_path: str | Path,
    payload_path: str | Path | None,
    actions: Sequence[Action],
    *,
    on_progress: Progress | None = None,
) -> list[int]:
    """Run `actions` on `target_path` in one transaction; return rows affected per action.

    Raises `ActionBatchError` (naming the action) and leaves the target unchanged when any
    action is invalid or fails. `on_progress(done, total)` is called after each action.
    """
    if not actions:
        raise ActionValidationError("must be a non-empty list of actions", field="actions")
    for path in (target_path, payload_path):
        if path is not None and not Path(path).is_file():
            raise TableNotFoundError(f"{path} does not exist; publish or upload it first.")
    primary_keys = _primary_keys(endpoint, target_path)
    with Connection(endpoint) as connection:
        attach(connection, target_path, TARGET_DB, read_only=False)
        target = _Catalog(connection, TARGET_DB, "target", primary_keys)
        payload = None
        if payload_path is not None:
            attach(connection, payload_path, PAYLOAD_DB, read_only=True)
            payload = _Catalog(connection, PAYLOAD_DB, "payload", {})
        plans = [_plan_or_raise(i, action, target, payload) for i, action in enumerate(actions)]
        counts = _run(connection, actions, plans, on_progress)
        connection.catalog.detach_all_databases()
    return counts


def _run(
    connection: Connection,
    actions: Sequence[Action],
    plans: list[list[str]],
    on_progress: Progress | None,
) -> list[int]:
    counts: list[int] = []
    with transaction(connection):
        for index, (action, statements) in enumerate(zip(actions, plans, strict=True)):
            rows = 0
            for sql in statements:
                try:
                    rows += connection.execute_command(sql) or 0
                except HyperException as err:
                    raise ActionBatchError(index, action.kind, _hyper_message(err)) from None
            counts.append(rows)
            if on_progress is not None:
                on_progress(index + 1, len(actions))
    return counts


def _hyper_message(err: HyperException) -> str:
    text = (err.main_message or str(err)).strip()
    return f"{text} (hint: {err.hint.strip()})" if err.hint else text


# --- catalogs ------------------------------------------------------------------------------


class _Catalog:
    """The tables of one attached database, read once before the transaction."""

    def __init__(
        self,
        connection: Connection,
        database: str,
        side: str,
        primary_keys: Mapping[tuple[str, str], tuple[str, ...]],
    ) -> None:
        self.side = side
        self.tables: dict[str, dict[str, TableDefinition]] = {}
        for schema in connection.catalog.get_schema_names(database):
            names = connection.catalog.get_table_names(schema)
            if names:
                self.tables[schema.name.unescaped] = {
                    name.name.unescaped: connection.catalog.get_table_definition(name)
                    for name in names
                }
        self.primary_keys = primary_keys

    def primary_key(self, table: TableDefinition) -> tuple[str, ...]:
        return self.primary_keys.get(_schema_and_name(table.table_name), ())

    def table(self, schema: str | None, table: str) -> TableDefinition:
        """Find `schema.table`; with no schema, the single schema that holds tables."""
        field = "target-schema" if self.side == "target" else "source-schema"
        if schema is None:
            if len(self.tables) != 1:
                found = ", ".join(sorted(self.tables)) or "none"
                raise _Refused(
                    f"the {self.side} has tables in {len(self.tables)} schemas ({found}); "
                    f"set {field} to pick one."
                )
            schema = next(iter(self.tables))
        tables = self.tables.get(schema, {})
        if table not in tables:
            known = ", ".join(
                str(TableName(s, t)) for s, names in sorted(self.tables.items()) for t in names
            )
            raise _Refused(
                f"table {TableName(schema, table)} does not exist in the {self.side}; "
                f"tables there: {known or 'none'}."
            )
        return tables[table]


def _primary_keys(endpoint: Endpoint, path: str | Path) -> dict[tuple[str, str], tuple[str, ...]]:
    """(schema, table) -> the columns of its ASSUMED PRIMARY KEY, for the tables of the
    file at `path` that have one, read before the batch attaches the file."""
    with Connection(endpoint, path) as connection:
        return read_keys(connection).primary_keys


def _schema_and_name(table: TableName) -> tuple[str, str]:
    return table.schema_name.name.unescaped, table.name.unescaped


def _columns(table: TableDefinition) -> dict[str, SqlType]:
    return {column.name.unescaped: column.type for column in table.columns}


def _show(table: TableDefinition) -> str:
    return str(TableName(table.table_name.schema_name.name, table.table_name.name))


# --- planning: checks and SQL per action -----------------------------------------------------


def _plan_or_raise(
    index: int, action: Action, target: _Catalog, payload: _Catalog | None
) -> list[str]:
    try:
        return _plan(action, target, payload)
    except _Refused as err:
        raise ActionBatchError(index, action.kind, str(err)) from None


def _plan(action: Action, target_catalog: _Catalog, payload: _Catalog | None) -> list[str]:
    if action.kind not in FIELDS:
        raise _Refused(f"'{action.kind}' is not an action this server applies.")
    target = target_catalog.table(action.target_schema, action.target_table)
    source = None
    if action.source_table is not None:
        source = _source(payload, action.source_schema, action.source_table)
    if action.kind == "delete":
        condition = _needs_condition(action)
        _check_condition(condition, target, source)
        return [_delete_sql(target, source, condition)]
    if source is None:
        raise _Refused(f"'{action.kind}' needs a source-table.")
    if action.kind == "insert":
        return [_insert_sql(target, source, _insert_columns(target, source, None))]
    if action.kind == "replace":
        _check_same_columns(target, source)
        everything = _insert_sql(target, source, list(_columns(source)))
        return [f"DELETE FROM {target.table_name}", everything]
    condition = _needs_condition(action)
    _check_condition(condition, target, source)
    key = target_catalog.primary_key(target)
    if action.kind == "update":
        return _update_sql(target, source, condition, key)
    insert_columns = _insert_columns(target, source, condition)
    matched = _sql(condition, target, source)
    where = f"NOT EXISTS (SELECT 1 FROM {target.table_name} AS {T} WHERE {matched})"
    return [
        *_update_sql(target, source, condition, key),
        _insert_sql(target, source, insert_columns, where),
    ]


def _needs_condition(action: Action) -> Condition:
    if action.condition is None:
        raise _Refused(f"'{action.kind}' needs a condition.")
    return action.condition


def _source(payload: _Catalog | None, schema: str | None, table: str) -> TableDefinition:
    """The action's source table in the payload, which it needs."""
    if payload is None:
        raise _Refused(f"source-table '{table}' needs a payload file; none was given.")
    return payload.table(schema, table)


def _check_condition(
    condition: Condition, target: TableDefinition, source: TableDefinition | None
) -> None:
    target_columns = _columns(target)
    for predicate in comparisons(condition):
        if predicate.target_col is not None and predicate.target_col not in target_columns:
            raise _Refused(
                f"target-col '{predicate.target_col}' is not a column of {_show(target)}; "
                f"columns: {', '.join(target_columns)}."
            )
        if predicate.source_col is None:
            continue
        if source is None:
            raise _Refused(
                f"source-col '{predicate.source_col}' needs a source-table; "
                "compare a target-col with a const instead."
            )
        if predicate.source_col not in _columns(source):
            raise _Refused(
                f"source-col '{predicate.source_col}' is not a column of the source "
                f"{_show(source)}; columns: {', '.join(_columns(source))}."
            )


def _condition_source_columns(condition: Condition | None) -> set[str]:
    if condition is None:
        return set()
    return {p.source_col for p in comparisons(condition) if p.source_col is not None}


def _settable_columns(
    target: TableDefinition, source: TableDefinition, condition: Condition | None
) -> list[str]:
    """Source columns the target also has; any other source column must serve the condition."""
    target_columns = _columns(target)
    used = _condition_source_columns(condition)
    columns = [name for name in _columns(source) if name in target_columns]
    stray = [name for name in _columns(source) if name not in target_columns and name not in used]
    if stray:
        raise _Refused(
            f"source column(s) {', '.join(stray)} of {_show(source)} match no column of "
            f"{_show(target)} (names match exactly, case and spaces included)."
        )
    return columns


def _insert_columns(
    target: TableDefinition, source: TableDefinition, condition: Condition | None
) -> list[str]:
    """The settable columns, checking that every NOT NULL target column is among them."""
    columns = _settable_columns(target, source, condition)
    missing = [
        column.name.unescaped
        for column in target.columns
        if column.name.unescaped not in columns and column.nullability == Nullability.NOT_NULLABLE
    ]
    if missing:
        raise _Refused(
            f"NOT NULL column(s) {', '.join(missing)} of {_show(target)} are missing from "
            f"the source {_show(source)}."
        )
    return columns


def _check_same_columns(target: TableDefinition, source: TableDefinition) -> None:
    mine, theirs = _columns(target), _columns(source)
    differences = [
        f"{name}: target {mine.get(name, 'absent')}, source {theirs.get(name, 'absent')}"
        for name in sorted(set(mine) | set(theirs))
        if mine.get(name) != theirs.get(name)
    ]
    if differences:
        raise _Refused(
            f"replace needs the same column names and types in {_show(target)} and the "
            f"source {_show(source)}; differences: {'; '.join(differences)}."
        )


def _insert_sql(
    target: TableDefinition, source: TableDefinition, columns: Sequence[str], where: str = ""
) -> str:
    names = ", ".join(escape_name(c) for c in columns)
    values = ", ".join(f"{S}.{escape_name(c)}" for c in columns)
    suffix = f" WHERE {where}" if where else ""
    return (
        f"INSERT INTO {target.table_name} ({names}) "
        f"SELECT {values} FROM {source.table_name} AS {S}{suffix}"
    )


def _update_sql(
    target: TableDefinition,
    source: TableDefinition,
    condition: Condition,
    primary_key: Sequence[str],
) -> list[str]:
    """The UPDATE that SETs the source's columns but those the condition makes equal.

    Never SETs those (there is nothing to change): SET of a column of a composite
    ASSUMED PRIMARY KEY kills hyperd 0.0.26963 (SIGSEGV), so an update that would change
    one is refused. An update with only such columns to set is no statement at all.
    """
    settable = _settable_columns(target, source, condition)
    if not settable:
        raise _Refused(f"the source {_show(source)} has no column of {_show(target)} to set.")
    pinned = _pinned_columns(condition)
    columns = [c for c in settable if c not in pinned]
    keys = [c for c in columns if c in primary_key] if len(primary_key) > 1 else []
    if keys:
        raise _Refused(
            f"it would set {', '.join(keys)} of the primary key ({', '.join(primary_key)}) of "
            f"{_show(target)}, which this server cannot do; delete the rows and insert them "
            "with their new key instead."
        )
    if not columns:
        return []
    assignments = ", ".join(f"{escape_name(c)} = {S}.{escape_name(c)}" for c in columns)
    return [
        f"UPDATE {target.table_name} AS {T} SET {assignments} "
        f"FROM {source.table_name} AS {S} WHERE {_sql(condition, target, source)}"
    ]


def _pinned_columns(condition: Condition) -> set[str]:
    """Target columns the condition requires to equal the source column of the same name."""
    if isinstance(condition, Junction) and condition.op == "and":
        return set().union(*(_pinned_columns(arg) for arg in condition.args))
    if (
        isinstance(condition, Comparison)
        and condition.op in ("eq", "is")
        and condition.target_col is not None
        and condition.target_col == condition.source_col
    ):
        return {condition.target_col}
    return set()


def _delete_sql(
    target: TableDefinition, source: TableDefinition | None, condition: Condition
) -> str:
    where = _sql(condition, target, source)
    if source is None:
        return f"DELETE FROM {target.table_name} AS {T} WHERE {where}"
    unused = [c for c in _columns(source) if c not in _condition_source_columns(condition)]
    if unused:
        raise _Refused(
            f"source column(s) {', '.join(unused)} of {_show(source)} are not used by the "
            "condition; a delete's source may only hold the columns its condition compares."
        )
    return (
        f"DELETE FROM {target.table_name} AS {T} "
        f"WHERE EXISTS (SELECT 1 FROM {source.table_name} AS {S} WHERE {where})"
    )


# --- conditions as SQL -------------------------------------------------------------------------


def _sql(condition: Condition, target: TableDefinition, source: TableDefinition | None) -> str:
    if isinstance(condition, Constant):
        return "TRUE" if condition.value else "FALSE"
    if isinstance(condition, Comparison):
        return _predicate_sql(condition, target, source)
    joiner = " AND " if condition.op == "and" else " OR "
    return "(" + joiner.join(_sql(arg, target, source) for arg in condition.args) + ")"


def _predicate_sql(
    predicate: Comparison, target: TableDefinition, source: TableDefinition | None
) -> str:
    operands: list[tuple[str, SqlType]] = []
    if predicate.target_col is not None:
        operands.append(
            (f"{T}.{escape_name(predicate.target_col)}", _columns(target)[predicate.target_col])
        )
    if predicate.source_col is not None and source is not None:
        operands.append(
            (f"{S}.{escape_name(predicate.source_col)}", _columns(source)[predicate.source_col])
        )
    left, left_type = operands[0]
    const = predicate.const
    if const is not None and const.value is None:
        # Only `is` matches NULL; any other comparison with NULL is NULL, true for no row.
        return f"{left} IS NULL" if predicate.op == "is" else "CAST(NULL AS BOOLEAN)"
    right = operands[1][0] if const is None else _literal(const, left_type)
    if predicate.op == "is":
        return f"{left} IS NOT DISTINCT FROM {right}"
    if predicate.op == "has":
        return f"strpos({left}, {right}) > 0"
    return f"{left} {_COMPARE[predicate.op]} {right}"


def _literal(const: Literal, column_type: SqlType) -> str:
    """`const` as a SQL literal; a date-time matches the column it is compared with."""
    value = const.value
    if isinstance(value, bool):
        return "TRUE" if value else "FALSE"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        return f"CAST({value!r} AS DOUBLE PRECISION)"
    if isinstance(value, datetime):
        utc = value.astimezone(UTC)
        if column_type.tag == TypeTag.TIMESTAMP_TZ:
            return f"TIMESTAMPTZ {escape_string_literal(utc.isoformat(sep=' '))}"
        wall = utc.replace(tzinfo=None).isoformat(sep=" ")
        return f"TIMESTAMP {escape_string_literal(wall)}"
    return escape_string_literal(str(value))
