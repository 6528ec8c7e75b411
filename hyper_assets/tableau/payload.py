"""Payload files: the rows each step sends, in `.hyper` files no larger than the server takes.

Each step's rows go first to a file of their own, read from the local file (attached
read-only) and the outbox's captured rows; a file above the limit is split into parts
of about equal row counts; consecutive parts are then packed into batches under the
limit, one payload file per batch.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path

from tableauhyperapi import Connection, Endpoint, TableName, escape_name

from hyper_assets.outbox import CAPTURED, Outbox
from hyper_assets.tableau.actions import Action
from hyper_assets.tableau.changes import PAYLOAD_SCHEMA, Step, keys_table, step_actions

_LOCAL, _PART, _SOURCE = "local", "part", "source"
_CHUNK = "hyper_assets_chunk"


@dataclass(frozen=True)
class Part:
    """Rows of one step (or a share of them) in table `PAYLOAD_SCHEMA.name` of `path`."""

    step: Step
    name: str
    path: Path | None  # None: nothing to send but the step's delete
    rows: int
    first: bool = True

    @property
    def size(self) -> int:
        return self.path.stat().st_size if self.path else 0

    @property
    def tables(self) -> list[str]:
        """The payload tables in the file: the rows, and an upsert's keys."""
        return [self.name, keys_table(self.name)] if self.step.kind == "upsert" else [self.name]

    def actions(self) -> list[Action]:
        return step_actions(self.step, self.name if self.path else None, self.first)


def _attach(connection: Connection, path: Path, alias: str, *, read_only: bool = False) -> None:
    mode = " WITH (access_mode = readonly)" if read_only else ""
    connection.execute_command(
        f"ATTACH DATABASE {escape_name(str(path))} AS {escape_name(alias)}{mode}"
    )


def _detach(connection: Connection, alias: str) -> None:
    connection.execute_command(f"DETACH DATABASE {escape_name(alias)}")


def _new_file(connection: Connection, path: Path, alias: str) -> None:
    path.unlink(missing_ok=True)
    connection.execute_command(f"CREATE DATABASE {escape_name(str(path))}")
    _attach(connection, path, alias)
    connection.execute_command(f"CREATE SCHEMA {escape_name(alias)}.{escape_name(PAYLOAD_SCHEMA)}")


def build_parts(
    endpoint: Endpoint,
    database: Path,
    outbox: Outbox,
    steps: Sequence[Step],
    directory: Path,
    max_bytes: int,
) -> list[Part]:
    """Every step's rows, in files of at most about `max_bytes`, in step order.

    The caller holds the database's lock, so the rows match the recorded changes.
    """
    parts: list[Part] = []
    with Connection(endpoint) as connection:
        _attach(connection, database, _LOCAL, read_only=True)
        for index, step in enumerate(steps):
            part = _step_part(connection, outbox, step, directory, index)
            parts += _split(connection, part, max_bytes)
    return parts


def _step_part(
    connection: Connection, outbox: Outbox, step: Step, directory: Path, index: int
) -> Part:
    name = f"{index:04d}_{step.table.name.unescaped}"
    path = directory / f"step-{index:04d}.hyper"
    target = TableName(_PART, PAYLOAD_SCHEMA, name)
    local = TableName(_LOCAL, step.table.schema_name.name.unescaped, step.table.name.unescaped)
    _new_file(connection, path, _PART)
    if step.kind == "insert":
        _copy_captured(connection, outbox, step, target)
    elif step.kind == "upsert":
        keys = "hyper_assets_keys"
        _union_captured(connection, outbox, step, keys)
        match = " AND ".join(f"t.{escape_name(k)} = k.{escape_name(k)}" for k in step.key)
        connection.execute_command(
            f"CREATE TABLE {target} AS (SELECT t.* FROM {local} AS t WHERE EXISTS "
            f"(SELECT 1 FROM {escape_name(keys)} AS k WHERE {match}))"
        )
        connection.execute_command(f"DROP TABLE {escape_name(keys)}")
    else:
        where = f" WHERE {step.window.sql}" if step.window else ""
        connection.execute_command(f"CREATE TABLE {target} AS (SELECT * FROM {local}{where})")
    rows = _finish_part(connection, step, target)
    _detach(connection, _PART)
    if rows == 0 and step.kind != "replace":
        path.unlink()
        return Part(step, name, None, 0)
    return Part(step, name, path, rows)


def _finish_part(connection: Connection, step: Step, rows: TableName) -> int:
    """Adds an upsert's keys table beside its rows; returns the row count."""
    if step.kind == "upsert":
        keys = TableName(_PART, PAYLOAD_SCHEMA, keys_table(rows.name.unescaped))
        names = ", ".join(escape_name(k) for k in step.key)
        connection.execute_command(f"CREATE TABLE {keys} AS (SELECT DISTINCT {names} FROM {rows})")
    return int(connection.execute_scalar_query(f"SELECT COUNT(*) FROM {rows}"))


def _copy_captured(connection: Connection, outbox: Outbox, step: Step, target: TableName) -> None:
    """The appended rows of every change of `step`, one captured file at a time."""
    for number, change in enumerate(step.changes):
        _attach(connection, outbox.rows_path(change), _SOURCE, read_only=True)
        source = TableName(_SOURCE, CAPTURED.schema_name, CAPTURED.name)
        if number == 0:
            connection.execute_command(f"CREATE TABLE {target} AS (SELECT * FROM {source})")
        else:
            definition = connection.catalog.get_table_definition(target)
            names = ", ".join(escape_name(c.name.unescaped) for c in definition.columns)
            connection.execute_command(
                f"INSERT INTO {target} ({names}) SELECT {names} FROM {source}"
            )
        _detach(connection, _SOURCE)


def _union_captured(connection: Connection, outbox: Outbox, step: Step, keys: str) -> None:
    """The upserted keys of every change of `step` in temporary table `keys`."""
    names = ", ".join(escape_name(k) for k in step.key)
    for number, change in enumerate(step.changes):
        _attach(connection, outbox.rows_path(change), _SOURCE, read_only=True)
        source = TableName(_SOURCE, CAPTURED.schema_name, CAPTURED.name)
        select = f"SELECT {names} FROM {source}"
        if number == 0:
            connection.execute_command(f"CREATE TEMPORARY TABLE {escape_name(keys)} AS ({select})")
        else:
            connection.execute_command(f"INSERT INTO {escape_name(keys)} {select}")
        _detach(connection, _SOURCE)


def _split(connection: Connection, part: Part, max_bytes: int) -> list[Part]:
    """`part` cut into parts of equal row counts, each file at most about `max_bytes`."""
    if part.path is None or part.size <= max_bytes or part.rows <= 1:
        return [part]
    count = min(part.rows, math.ceil(part.size / (0.8 * max_bytes)))
    _attach(connection, part.path, _PART, read_only=True)
    source = TableName(_PART, PAYLOAD_SCHEMA, part.name)
    definition = connection.catalog.get_table_definition(source)
    names = ", ".join(escape_name(c.name.unescaped) for c in definition.columns)
    connection.execute_command(
        f"CREATE TEMPORARY TABLE {escape_name(_CHUNK)} AS (SELECT {names}, "
        f"ROW_NUMBER() OVER () % {count} AS hyper_assets_chunk FROM {source})"
    )
    _detach(connection, _PART)
    pieces: list[Part] = []
    for number in range(count):
        path = part.path.with_name(f"{part.path.stem}-{number:03d}.hyper")
        _new_file(connection, path, _PART)
        target = TableName(_PART, PAYLOAD_SCHEMA, part.name)
        connection.execute_command(
            f"CREATE TABLE {target} AS (SELECT {names} FROM {escape_name(_CHUNK)} "
            f"WHERE hyper_assets_chunk = {number})"
        )
        rows = _finish_part(connection, part.step, target)
        _detach(connection, _PART)
        pieces.append(replace(part, path=path, rows=rows, first=part.first and number == 0))
    connection.execute_command(f"DROP TABLE {escape_name(_CHUNK)}")
    part.path.unlink()
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
    files = [p for p in parts if p.path is not None]
    if not files:
        return None
    if len(files) == 1:
        assert files[0].path is not None
        return files[0].path.replace(path)
    with Connection(endpoint) as connection:
        _new_file(connection, path, "batch")
        for part in files:
            assert part.path is not None
            _attach(connection, part.path, _PART, read_only=True)
            for name in part.tables:
                source = TableName(_PART, PAYLOAD_SCHEMA, name)
                target = TableName("batch", PAYLOAD_SCHEMA, name)
                connection.execute_command(f"CREATE TABLE {target} AS (SELECT * FROM {source})")
            _detach(connection, _PART)
            part.path.unlink()
        _detach(connection, "batch")
    return path
