"""The change outbox: what writes record, and how records left by a crash are settled.

Real hyperd and real files; a crash between a write and its record's commit is staged by
running the same steps as the IO manager and stopping before the commit.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pyarrow as pa
import pytest
from dagster import asset, materialize
from tableauhyperapi import TableName

from hyper_assets import HyperIOManager, PrimaryKeyError, SchemaMismatchError
from hyper_assets._engine.types import columns_from_arrow
from hyper_assets._rows.ingest import Write, write_table
from hyper_assets._rows.outbox import CAPTURED, Outbox
from hyper_assets._rows.pending_keys import PendingKeys
from hyper_assets._rows.staging import stage_arrow
from hyper_assets.errors import CorruptDatabaseError, CorruptFileError, UnknownFormatVersionError

EVENTS = TableName("Extract", "events")


def events_asset(rows: pa.Table, mode: str = "append"):
    @asset(name="events", metadata={"write_mode": mode, "primary_key": ["id"]})
    def events() -> pa.Table:
        return rows

    return events


def rows(*ids: int) -> pa.Table:
    return pa.table({"id": pa.array(ids, pa.int64()), "label": [f"row {i}" for i in ids]})


@pytest.fixture
def io_manager(tmp_path: Path):
    manager = HyperIOManager(database=str(tmp_path / "db.hyper"))
    yield manager
    manager.hyper.close()


def write(io_manager: HyperIOManager, table: pa.Table, mode: str = "append") -> None:
    materialize([events_asset(table, mode)], resources={"io_manager": io_manager})


def tracked(io_manager: HyperIOManager, first: pa.Table) -> Outbox:
    """The outbox of the file after a write of `first`, tracking as after a first publish."""
    write(io_manager, first)
    outbox = Outbox(io_manager.database)
    outbox.start_tracking()
    return outbox


def captured(io_manager: HyperIOManager, path: Path) -> list[tuple]:
    with io_manager.hyper.open(path, create=False) as connection:
        return sorted(tuple(r) for r in connection.execute_list_query(f"SELECT * FROM {CAPTURED}"))


def test_nothing_is_recorded_before_the_first_publish(io_manager: HyperIOManager) -> None:
    write(io_manager, rows(1, 2))
    outbox = Outbox(io_manager.database)
    assert not outbox.tracking
    assert not outbox.directory.exists()


def test_appends_capture_rows_and_upserts_capture_keys(io_manager: HyperIOManager) -> None:
    outbox = tracked(io_manager, rows(1, 2))
    write(io_manager, rows(3, 4))
    write(io_manager, rows(4, 5), mode="upsert")
    append, upsert = outbox.changes()
    assert (append.kind, append.rows, append.rows_before) == ("append", 2, 2)
    assert captured(io_manager, outbox.rows_path(append)) == [(3, "row 3"), (4, "row 4")]
    assert (upsert.kind, upsert.key, upsert.rows) == ("upsert", ("id",), 2)
    assert captured(io_manager, outbox.rows_path(upsert)) == [(4,), (5,)]


def files(directory: Path) -> dict[str, bytes]:
    """Every file under `directory`, by its path there, with its bytes."""
    return {
        p.relative_to(directory).as_posix(): p.read_bytes()
        for p in sorted(directory.rglob("*"))
        if p.is_file()
    }


def test_a_refused_write_leaves_the_outbox_as_it_was(io_manager: HyperIOManager) -> None:
    outbox = tracked(io_manager, rows(1))
    before = files(outbox.directory)
    with pytest.raises(SchemaMismatchError):  # refused before its transaction
        write(io_manager, pa.table({"id": pa.array([2], pa.int64())}))  # a column short
    assert files(outbox.directory) == before
    null_key = pa.table({"id": pa.array([3, None], pa.int64()), "label": ["c", "none"]})
    with pytest.raises(PrimaryKeyError):  # refused in its transaction, its keys captured
        write(io_manager, null_key, mode="upsert")
    assert files(outbox.directory) == before
    assert captured_ids(io_manager) == [1]
    write(io_manager, rows(3))
    (change,) = outbox.changes()  # the next write takes the first number
    assert (change.seq, captured(io_manager, outbox.rows_path(change))) == (1, [(3, "row 3")])
    assert sorted(files(outbox.directory)) == ["00000001.hyper", "00000001.json", "state.json"]


def test_rows_the_outbox_cannot_keep_are_an_error_naming_its_file(
    io_manager: HyperIOManager,
) -> None:
    """Hyper's error capturing an append's rows names the outbox's file (not the database)
    and table; the write is not made and the outbox is as it was."""
    outbox = tracked(io_manager, rows(1))
    before = files(outbox.directory)
    unreadable = outbox.directory / "00000001.hyper"  # where the next append's rows go
    unreadable.write_bytes(b"not a hyper file")
    with pytest.raises(CorruptDatabaseError) as refused:
        write(io_manager, rows(2))
    assert (refused.value.file, refused.value.table) == (str(unreadable), "public.captured")
    assert str(refused.value).startswith(f"{unreadable}, table public.captured: Hyper said: ")
    assert "could not be kept in the outbox; the write was not made" in str(refused.value)
    assert files(outbox.directory) == before
    assert captured_ids(io_manager) == [1]


def crash_after_write(io_manager: HyperIOManager, table: pa.Table, staging: Path) -> None:
    """The IO manager's steps for an append, stopping before the record's commit."""
    write_ = Write(EVENTS, columns_from_arrow(table.schema, "events", 2), "append")
    staged = stage_arrow(table, staging, "snappy", "events")
    with io_manager.hyper.connect(io_manager.database) as connection:
        outbox = Outbox(io_manager.database)
        outbox.record(connection, write_, staged)
        write_table(connection, write_, staged, PendingKeys(Path(io_manager.database)))


def settle(io_manager: HyperIOManager) -> Outbox:
    outbox = Outbox(io_manager.database)
    with io_manager.hyper.connect(io_manager.database) as connection:
        outbox.settle(connection)
    return outbox


def test_a_crash_after_an_append_is_settled_as_sent(io_manager: HyperIOManager, tmp_path) -> None:
    tracked(io_manager, rows(1))
    crash_after_write(io_manager, rows(2, 3), tmp_path)
    (change,) = settle(io_manager).changes()
    assert (change.kind, change.rows, change.uncertain) == ("append", 2, False)


def test_an_append_whose_outcome_cannot_be_told_is_uncertain(
    io_manager: HyperIOManager, tmp_path
) -> None:
    tracked(io_manager, rows(1))
    crash_after_write(io_manager, rows(2, 3), tmp_path)
    with io_manager.hyper.connect(io_manager.database) as connection:
        connection.execute_command(f"DELETE FROM {EVENTS} WHERE id = 1")  # someone else's edit
    (change,) = settle(io_manager).changes()
    assert change.uncertain  # the next publish sends the whole file


def test_unreadable_records_are_named_errors_that_change_nothing(
    io_manager: HyperIOManager, tmp_path
) -> None:
    outbox = tracked(io_manager, rows(1))
    write(io_manager, rows(2))
    (record,) = outbox.directory.glob("*[0-9].json")
    whole = record.read_bytes()
    record.write_text('{"seq": 1, "kind": "append"')  # cut short by a full disk
    with pytest.raises(CorruptFileError, match=rf"{record}.*publish with full=True"):
        outbox.changes()
    before = files(outbox.directory)
    with pytest.raises(CorruptFileError, match=rf"{record} cannot be read.*nothing was changed"):
        write(io_manager, rows(3))  # a write reads every record before settling any
    assert files(outbox.directory) == before
    assert captured_ids(io_manager) == [1, 2]
    record.write_bytes(whole)
    crash_after_write(io_manager, rows(3), tmp_path)
    (pending,) = outbox.directory.glob("*.pending.json")
    pending.write_text("[]")
    with pytest.raises(CorruptFileError, match=rf"{pending} cannot be read.*nothing was changed"):
        write(io_manager, rows(4))  # the next write settles records first
    assert pending.read_text() == "[]" and record.read_bytes() == whole
    assert captured_ids(io_manager) == [1, 2, 3]
    (outbox.directory / "state.json").write_text("")
    with pytest.raises(CorruptFileError, match=r"state.json.*Delete it and publish"):
        pending.unlink()
        write(io_manager, rows(4))
    assert captured_ids(io_manager) == [1, 2, 3]


def captured_ids(io_manager: HyperIOManager) -> list[int]:
    with io_manager.hyper.open(io_manager.database, create=False) as connection:
        return sorted(r[0] for r in connection.execute_list_query(f"SELECT id FROM {EVENTS}"))


def newer(record: Path) -> None:
    """Gives the JSON file `record` a format version this library does not know."""
    record.write_text(json.dumps(json.loads(record.read_text()) | {"format_version": 2}))


def test_the_state_has_a_format_version_and_one_without_is_version_1(
    io_manager: HyperIOManager,
) -> None:
    outbox = tracked(io_manager, rows(1))
    state = outbox.directory / "state.json"
    assert json.loads(state.read_text()) == {"format_version": 1, "next_seq": 1}
    state.write_text('{"next_seq": 5}')  # as versions before this one wrote it
    write(io_manager, rows(2))
    (change,) = outbox.changes()
    assert (change.seq, captured(io_manager, outbox.rows_path(change))) == (5, [(2, "row 2")])
    assert json.loads(state.read_text()) == {"format_version": 1, "next_seq": 6}
    newer(state)
    before = files(outbox.directory)
    refused = rf"{state} has format version 2.*upgrade this one"
    with pytest.raises(UnknownFormatVersionError, match=refused):
        write(io_manager, rows(3))
    with pytest.raises(UnknownFormatVersionError, match=refused):
        outbox.changes()
    assert files(outbox.directory) == before
    assert captured_ids(io_manager) == [1, 2]


def test_every_record_is_read_before_any_is_settled(io_manager: HyperIOManager, tmp_path) -> None:
    """Two records left pending by crashes, the second of a newer version: the next write
    refuses before settling the first, and nothing changes."""
    outbox = tracked(io_manager, rows(1))
    crash_after_write(io_manager, rows(2), tmp_path)
    crash_after_write(io_manager, rows(3), tmp_path)
    _, second = sorted(outbox.directory.glob("*.pending.json"))
    newer(second)
    before = files(outbox.directory)
    with pytest.raises(UnknownFormatVersionError, match=rf"{second} has format version 2"):
        write(io_manager, rows(4))
    assert files(outbox.directory) == before  # the first is still pending, its rows kept
    assert captured_ids(io_manager) == [1, 2, 3]


def test_the_file_and_the_captured_rows_have_the_one_mode(io_manager: HyperIOManager) -> None:
    """hyperd makes its files 0o660 less its own umask: the file a first write creates and
    an append's captured rows get the library's one mode, 0o664 under a group's umask."""
    umask = os.umask(0o002)
    try:
        outbox = tracked(io_manager, rows(1))
        write(io_manager, rows(2))
    finally:
        os.umask(umask)
    (change,) = outbox.changes()
    assert captured(io_manager, outbox.rows_path(change)) == [(2, "row 2")]
    folder = Path(io_manager.database).parent
    modes = {
        p.relative_to(folder).as_posix(): oct(p.stat().st_mode & 0o777)
        for p in folder.rglob("*")
        if p.is_file()
    }
    assert {"db.hyper", "db.hyper.outbox/00000001.hyper"} <= set(modes)
    assert set(modes.values()) == {"0o664"}, modes
