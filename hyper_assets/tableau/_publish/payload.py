"""Payload files: the rows each step sends, in `.hyper` files no larger than the server takes.

Each step's rows go first to a file of their own, read from the local file (attached
read-only) and the outbox's captured rows; a file above the limit is split into parts
of about equal row counts; consecutive parts are then packed into batches under the
limit, one payload file per batch. Each part's actions read its own payload tables
(`step_actions`). Hyper's errors writing them are `PayloadFileError`s naming the file.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass, replace
from pathlib import Path

from tableauhyperapi import Connection, Endpoint, TableName, escape_name

from hyper_assets._base.files import file_size, set_mode
from hyper_assets._engine.hyper_errors import hyper_errors
from hyper_assets._engine.sql import attach, count_rows, detach
from hyper_assets._engine.tables import table_label
from hyper_assets._rows.outbox import CAPTURED, ROWS_WAY_OUT, Outbox
from hyper_assets.errors import PayloadFileError
from hyper_assets.tableau._publish.changes import Step
from hyper_assets.tableau._publish.plan import Batch, SentRows
from hyper_assets.tableau.actions import Action, And, Delete, Eq, Insert, Replace

#: The schema of every table in a payload file.
PAYLOAD_SCHEMA = "payload"

_LOCAL, _PART, _SOURCE = "local", "part", "source"
_CHUNK = "hyper_assets_chunk"


@dataclass(frozen=True)
class Part:
    """Rows of one step (or a share of them) in table `PAYLOAD_SCHEMA.name` of `path`."""

    step: Step
    name: str
    path: Path | None  # None: nothing to send but the step's delete
    rows: int
    targets: tuple[TableName, ...]  # the published tables holding the step's table
    first: bool = True

    @property
    def size(self) -> int:
        return file_size(self.path)

    @property
    def tables(self) -> list[str]:
        """The payload tables in the file: the rows, and an upsert's keys."""
        return [self.name, keys_table(self.name)] if self.step.kind == "upsert" else [self.name]

    def actions(self) -> list[Action]:
        return step_actions(self.step, self.name if self.path else None, self.first, self.targets)


def keys_table(source: str) -> str:
    """The payload table beside `source` that holds an upsert part's keys."""
    return f"{source}_keys"


def step_actions(
    step: Step, source: str | None, first: bool, targets: Sequence[TableName]
) -> list[Action]:
    """The actions for one payload table `source` of `step` (None: the step has no rows),
    for each published table in `targets` (the copies of the step's table: one payload
    table serves them all).

    A step split over several payloads sends its window's delete or its replace with the
    first part only; the other parts insert their rows. An upsert part deletes its own
    keys (payload table `keys_table(source)`) before inserting its rows.
    """
    return [a for target in targets for a in _actions(step, source, first, target)]


def _actions(step: Step, source: str | None, first: bool, table: TableName) -> list[Action]:
    """`step_actions` for one published table."""
    target = {
        "target_schema": table.schema_name.name.unescaped,
        "target_table": table.name.unescaped,
    }
    actions: list[Action] = []
    if step.condition is not None and first:  # a window's
        actions.append(Delete(**target, condition=step.condition))
    if source is None:
        return actions
    rows = {"source_schema": PAYLOAD_SCHEMA, "source_table": source, **target}
    if step.kind == "replace" and first:
        actions.append(Replace(**rows))
    elif step.kind == "upsert":
        match = And([Eq(k, source_col=k) for k in step.key])
        keys = {"source_schema": PAYLOAD_SCHEMA, "source_table": keys_table(source)}
        actions += [Delete(**target, **keys, condition=match), Insert(**rows)]
    else:
        actions.append(Insert(**rows))
    return actions


def _writing(path: Path, what: str) -> AbstractContextManager[None]:
    """The boundary of writing payload file `path` (of `what`): Hyper's errors in it are
    `PayloadFileError`s naming the file."""
    return hyper_errors(
        file=path,
        otherwise=PayloadFileError,
        advice=f"Writing this payload file ({what}) failed: nothing was sent, and the outbox "
        "keeps the changes. Free space there, or fix what Hyper says, and publish again.",
    )


def _new_file(connection: Connection, path: Path, alias: str) -> None:
    path.unlink(missing_ok=True)
    connection.execute_command(f"CREATE DATABASE {escape_name(str(path))}")
    attach(connection, path, alias)
    connection.execute_command(f"CREATE SCHEMA {escape_name(alias)}.{escape_name(PAYLOAD_SCHEMA)}")


def build_parts(
    endpoint: Endpoint,
    database: Path,
    outbox: Outbox,
    steps: Sequence[Step],
    directory: Path,
    max_bytes: int,
    published: Callable[[TableName], Sequence[TableName]],
) -> list[Part]:
    """Every step's rows, in files of at most about `max_bytes`, in step order; each part
    is sent to the `published` tables of its step's table (its copies).

    The caller holds the database's lock, so the rows match the recorded changes.
    """
    parts: list[Part] = []
    with hyper_errors(file=database), Connection(endpoint) as connection:
        attach(connection, database, _LOCAL, read_only=True)
        for index, step in enumerate(steps):
            with _writing(_step_path(directory, index), f"rows of {table_label(step.table)}"):
                targets = tuple(published(step.table))
                part = _step_part(connection, outbox, step, directory, index, targets)
                parts += _split(connection, part, max_bytes)
    return parts


def _step_path(directory: Path, index: int) -> Path:
    return directory / f"step-{index:04d}.hyper"


def _step_part(
    connection: Connection,
    outbox: Outbox,
    step: Step,
    directory: Path,
    index: int,
    targets: tuple[TableName, ...],
) -> Part:
    name = f"{index:04d}_{step.table.name.unescaped}"
    path = _step_path(directory, index)
    target = TableName(_PART, PAYLOAD_SCHEMA, name)
    local = TableName(_LOCAL, step.table.schema_name.name.unescaped, step.table.name.unescaped)
    _new_file(connection, path, _PART)
    if step.kind == "insert":
        _gather_captured(connection, outbox, step, target)
    elif step.kind == "upsert":
        keys = TableName("hyper_assets_keys")
        names = ", ".join(escape_name(k) for k in step.key)
        _gather_captured(connection, outbox, step, keys, names, temporary=True)
        match = " AND ".join(f"t.{escape_name(k)} = k.{escape_name(k)}" for k in step.key)
        connection.execute_command(
            f"CREATE TABLE {target} AS (SELECT t.* FROM {local} AS t WHERE EXISTS "
            f"(SELECT 1 FROM {keys} AS k WHERE {match}))"
        )
        connection.execute_command(f"DROP TABLE {keys}")
    else:
        where = f" WHERE {step.window.sql}" if step.window else ""
        connection.execute_command(f"CREATE TABLE {target} AS (SELECT * FROM {local}{where})")
    rows = _finish_part(connection, step, target)
    detach(connection, _PART)
    if rows == 0 and step.kind != "replace":
        path.unlink()
        return Part(step, name, None, 0, targets)
    return Part(step, name, path, rows, targets)


def _finish_part(connection: Connection, step: Step, rows: TableName) -> int:
    """Adds an upsert's keys table beside its rows; returns the row count."""
    if step.kind == "upsert":
        keys = TableName(_PART, PAYLOAD_SCHEMA, keys_table(rows.name.unescaped))
        names = ", ".join(escape_name(k) for k in step.key)
        connection.execute_command(f"CREATE TABLE {keys} AS (SELECT DISTINCT {names} FROM {rows})")
    return count_rows(connection, rows)


def _gather_captured(
    connection: Connection,
    outbox: Outbox,
    step: Step,
    target: TableName,
    columns: str = "",
    *,
    temporary: bool = False,
) -> None:
    """The captured rows (an append's) or keys (an upsert's) of every change of `step`, one
    captured file at a time, in new table `target`: `columns` of them, or the first file's.
    """
    source = TableName(_SOURCE, CAPTURED.schema_name, CAPTURED.name)
    for number, change in enumerate(step.changes):
        captured = outbox.rows_path(change)
        kept = (
            f"This file keeps what change {change.seq} wrote to {table_label(change.table)} "
            "until it is sent: nothing was sent."
        )
        with hyper_errors(file=captured, advice=kept, way_out=ROWS_WAY_OUT):
            attach(connection, captured, _SOURCE, read_only=True)
        if number == 0:
            kind = "TEMPORARY TABLE" if temporary else "TABLE"
            connection.execute_command(
                f"CREATE {kind} {target} AS (SELECT {columns or '*'} FROM {source})"
            )
            columns = columns or _column_list(connection, target)
        else:
            connection.execute_command(
                f"INSERT INTO {target} ({columns}) SELECT {columns} FROM {source}"
            )
        detach(connection, _SOURCE)


def _split(connection: Connection, part: Part, max_bytes: int) -> list[Part]:
    """`part` cut into parts of equal row counts, each file at most about `max_bytes`."""
    if part.path is None or part.size <= max_bytes or part.rows <= 1:
        return [part]
    count = min(part.rows, math.ceil(part.size / (0.8 * max_bytes)))
    attach(connection, part.path, _SOURCE, read_only=True)
    shares = _shares(connection, part.path, part.tables, count)
    detach(connection, _SOURCE)
    part.path.unlink()
    pieces = [
        replace(part, path=path, rows=rows, first=part.first and number == 0)
        for number, (path, rows) in enumerate(shares)
    ]
    return [smaller for piece in pieces for smaller in _split(connection, piece, max_bytes)]


def pack(parts: Sequence[Part], max_bytes: int) -> list[list[Part]]:
    """Consecutive parts grouped into batches whose files add up to at most `max_bytes`."""
    batches: list[list[Part]] = []
    size = 0
    for part in parts:
        if batches and size + part.size <= max_bytes:
            batches[-1].append(part)
            size += part.size
        else:
            batches.append([part])
            size = part.size
    return batches


def write_batch(endpoint: Endpoint, parts: Sequence[Part], path: Path) -> Path | None:
    """One payload file holding every part's table; None when no part has rows."""
    files = [(p.path, p.tables) for p in parts if p.path is not None]
    if not files:
        return None
    if len(files) == 1:
        files[0][0].replace(path)
        set_mode(path)
        return path
    with _writing(path, "a batch's tables"), Connection(endpoint) as connection:
        _new_file(connection, path, "batch")
        for part_path, tables in files:
            attach(connection, part_path, _PART, read_only=True)
            for name in tables:
                source = TableName(_PART, PAYLOAD_SCHEMA, name)
                target = TableName("batch", PAYLOAD_SCHEMA, name)
                connection.execute_command(f"CREATE TABLE {target} AS (SELECT * FROM {source})")
            detach(connection, _PART)
            part_path.unlink()
        detach(connection, "batch")
    set_mode(path)
    return path


def batch_of(endpoint: Endpoint, parts: Sequence[Part], path: Path) -> Batch | None:
    """The update batch sending `parts`, its payload written to `path` (`write_batch`);
    None when no part has an action."""
    payload = write_batch(endpoint, parts, path)
    sending = [p for p in parts if p.actions()]
    if not sending:
        return None
    return Batch(
        tuple(a for part in sending for a in part.actions()),
        payload.name if payload else None,
        tuple(SentRows(table_label(p.step.table), p.step.kind, p.rows) for p in sending),
        tuple(dict.fromkeys(c.id for p in parts for c in p.step.changes)),
        file_size(payload),
        units=tuple(len(p.actions()) for p in sending),
    )


@dataclass(frozen=True)
class Piece:
    """A share of a batch: its payload file, its actions, its rows, the part it came from."""

    path: Path | None
    actions: list[Action]
    rows: int
    unit: int = 0


def split_batch(
    endpoint: Endpoint,
    payload: Path | None,
    actions: Sequence[Action],
    units: Sequence[int],
    max_bytes: int,
) -> list[Piece]:
    """A batch as pieces of at most about `max_bytes` each, which applied in order do what it did.

    `units` counts the actions of each part the batch was packed from (a part's actions
    read its own payload tables): a batch is first cut between parts, then a part's rows
    are cut into shares. The first share carries the part's actions; every later one
    inserts its rows, deleting first the keys of its rows where the part deletes by key.
    Pieces are written beside `payload`; a piece that cannot be cut (one row) stays whole.
    """
    groups, start = [], 0
    for count in units or [len(actions)]:
        groups.append(list(actions[start : start + count]))
        start += count
    if payload is None:
        return [Piece(None, group, 0, unit) for unit, group in enumerate(groups)]
    pieces: list[Piece] = []
    with _writing(payload, "cut into smaller batches"), Connection(endpoint) as connection:
        attach(connection, payload, _SOURCE, read_only=True)
        for number, group in enumerate(groups):
            path = payload.with_name(f"{payload.stem}-{number:03d}.hyper")
            whole = replace(_copy_piece(connection, path, group), unit=number)
            count = math.ceil(file_size(whole.path) / (0.8 * max_bytes))
            rows_table = _rows_table(group)
            if whole.path is None or rows_table is None or count <= 1 or whole.rows <= 1:
                pieces.append(whole)
                continue
            whole.path.unlink()
            tables = [rows_table, *(t for t in _sources(group) if t != rows_table)]
            shares = _shares(connection, path, tables, min(count, whole.rows))
            pieces += [
                Piece(shared, group if n == 0 else _later_share(group), rows, number)
                for n, (shared, rows) in enumerate(shares)
            ]
        detach(connection, _SOURCE)
    return pieces


def _rows_table(actions: Sequence[Action]) -> str | None:
    """The payload table holding a part's rows (the one its inserts or replace read)."""
    names = {a.source_table for a in actions if isinstance(a, Insert | Replace)}
    return names.pop() if len(names) == 1 else None


def _sources(actions: Sequence[Action]) -> list[str]:
    return list(dict.fromkeys(s for a in actions if (s := getattr(a, "source_table", None))))


def _copy_piece(connection: Connection, path: Path, actions: Sequence[Action]) -> Piece:
    """The payload tables `actions` read, copied into a file of their own."""
    sources = _sources(actions)
    if not sources:
        return Piece(None, list(actions), 0)
    _new_file(connection, path, _PART)
    for name in sources:
        connection.execute_command(
            f"CREATE TABLE {TableName(_PART, PAYLOAD_SCHEMA, name)} AS "
            f"(SELECT * FROM {TableName(_SOURCE, PAYLOAD_SCHEMA, name)})"
        )
    rows_table = _rows_table(actions) or sources[0]
    rows = count_rows(connection, TableName(_PART, PAYLOAD_SCHEMA, rows_table))
    detach(connection, _PART)
    return Piece(path, list(actions), rows)


def _shares(
    connection: Connection, path: Path, tables: Sequence[str], count: int
) -> list[tuple[Path, int]]:
    """The rows of payload table `tables[0]` (attached as `_SOURCE`) cut into `count` files.

    Shares have equal row counts. Every other table is a delete's keys: each file gets
    the keys of its own rows. Returns each file and its row count.
    """
    source = TableName(_SOURCE, PAYLOAD_SCHEMA, tables[0])
    names = _column_list(connection, source)
    connection.execute_command(
        f"CREATE TEMPORARY TABLE {escape_name(_CHUNK)} AS (SELECT {names}, "
        f"ROW_NUMBER() OVER () % {count} AS hyper_assets_chunk FROM {source})"
    )
    shares = []
    for share in range(count):
        shared = path.with_name(f"{path.stem}-{share:03d}.hyper")
        rows = TableName(_PART, PAYLOAD_SCHEMA, tables[0])
        _new_file(connection, shared, _PART)
        connection.execute_command(
            f"CREATE TABLE {rows} AS (SELECT {names} FROM {escape_name(_CHUNK)} "
            f"WHERE hyper_assets_chunk = {share})"
        )
        for name in tables[1:]:
            keys = _column_list(connection, TableName(_SOURCE, PAYLOAD_SCHEMA, name))
            connection.execute_command(
                f"CREATE TABLE {TableName(_PART, PAYLOAD_SCHEMA, name)} AS "
                f"(SELECT DISTINCT {keys} FROM {rows})"
            )
        shares.append((shared, count_rows(connection, rows)))
        detach(connection, _PART)
    connection.execute_command(f"DROP TABLE {escape_name(_CHUNK)}")
    return shares


def _column_list(connection: Connection, table: TableName) -> str:
    definition = connection.catalog.get_table_definition(table)
    return ", ".join(escape_name(c.name.unescaped) for c in definition.columns)


def _later_share(actions: Sequence[Action]) -> list[Action]:
    """A part's actions for a share after the first: no replace, no delete of a window."""
    later: list[Action] = []
    for action in actions:
        if isinstance(action, Replace):
            later.append(Insert(**{f: getattr(action, f) for f in _ROW_FIELDS}))
        elif not (isinstance(action, Delete) and action.source_table is None):
            later.append(action)
    return later


_ROW_FIELDS = ("target_table", "target_schema", "source_schema", "source_table")
