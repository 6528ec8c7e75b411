"""Payload files, written by a real hyperd from changes the IO manager recorded: every
captured file of a step is gathered, and a payload file Hyper cannot write is a
`PayloadFileError` naming it, with the local file and the outbox unchanged."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import dagster as dg
import pyarrow as pa
import pytest
from tableauhyperapi import Connection

from hyper_assets import HyperFileError, HyperIOManager, PayloadFileError, PublishError
from hyper_assets._engine.process import SharedHyper
from hyper_assets._engine.tables import Catalog
from hyper_assets._rows.outbox import Outbox
from hyper_assets.tableau._publish.changes import Step, net_steps
from hyper_assets.tableau._publish.payload import build_parts, write_batch


def events(ids: list[int], *, label_first: bool = False) -> dg.AssetsDefinition:
    """Appended rows; `label_first` returns the columns in the other order."""
    columns = {"id": pa.array(ids, pa.int64()), "label": [f"event {i}" for i in ids]}
    if label_first:
        columns = {"label": columns["label"], "id": columns["id"]}

    @dg.asset(name="events", metadata={"write_mode": "append"})
    def appended() -> pa.Table:
        return pa.table(columns)

    return appended


def stock(rows: list[tuple[int, int]]) -> dg.AssetsDefinition:
    ids, counts = zip(*rows, strict=True)

    @dg.asset(name="stock", metadata={"write_mode": "upsert", "primary_key": ["id"]})
    def upserted() -> pa.Table:
        return pa.table({"id": pa.array(ids, pa.int64()), "count": pa.array(counts, pa.int64())})

    return upserted


@dataclass
class Shop:
    """A file whose outbox holds two appends and two upserts, interleaved."""

    database: Path
    hyper: SharedHyper

    @property
    def outbox(self) -> Outbox:
        return Outbox(self.database)

    def steps(self) -> list[Step]:
        changes = self.outbox.changes()
        with Connection(self.hyper.endpoint, str(self.database)) as connection:
            catalog = Catalog(connection)
            types = {
                c.table: {col.name: col.sql_type for col in catalog.columns(c.table)}
                for c in changes
            }
        return net_steps(changes, types)

    def files(self) -> dict[str, bytes]:
        """The local file and every file of its outbox, by name."""
        paths = [self.database, *(p for p in self.outbox.directory.rglob("*") if p.is_file())]
        return {p.relative_to(self.database.parent).as_posix(): p.read_bytes() for p in paths}


@pytest.fixture
def shop(tmp_path: Path, hyper: SharedHyper) -> Shop:
    database = tmp_path / "shop.hyper"
    io_manager = HyperIOManager(database=str(database))

    def write(asset: dg.AssetsDefinition) -> None:
        assert dg.materialize([asset], resources={"io_manager": io_manager}).success

    write(events([1]))
    write(stock([(1, 10), (2, 20)]))
    Outbox(database).start_tracking()  # as a first publish does: from here on, recorded
    write(events([2, 3]))
    write(stock([(2, 21), (3, 30)]))
    write(events([4], label_first=True))
    write(stock([(3, 31), (4, 40)]))
    io_manager.hyper.close()
    return Shop(database, hyper)


def test_every_captured_file_of_a_step_is_gathered(shop: Shop, hyper_files: Any, tmp_path: Path):
    """Each step has two captured files: the second append's columns come in another order,
    the second upsert's keys overlap the first's."""
    directory = tmp_path / "payload"
    directory.mkdir()
    steps = shop.steps()
    assert [(s.kind, len(s.changes)) for s in steps] == [("insert", 2), ("upsert", 2)]
    appended, upserted = build_parts(
        shop.hyper.endpoint, shop.database, shop.outbox, steps, directory, 2**20, lambda t: [t]
    )
    assert appended.path and upserted.path
    assert hyper_files.read(appended.path) == {
        "payload.0000_events": [(2, "event 2"), (3, "event 3"), (4, "event 4")]
    }
    assert (appended.rows, upserted.rows) == (3, 3)
    assert hyper_files.read(upserted.path) == {  # the table's current rows for those keys
        "payload.0001_stock": [(2, 21), (3, 31), (4, 40)],
        "payload.0001_stock_keys": [(2,), (3,), (4,)],
    }


def test_a_payload_file_hyper_cannot_write_is_named_and_changes_nothing(shop: Shop, tmp_path: Path):
    """A payload directory removed under the publish (as a full disk, for any user): the
    step's file, then a batch's, cannot be created."""
    before = shop.files()
    gone = tmp_path / "gone"
    endpoint, steps = shop.hyper.endpoint, shop.steps()
    with pytest.raises(PayloadFileError) as caught:
        build_parts(endpoint, shop.database, shop.outbox, steps, gone, 2**20, lambda t: [t])
    step_file = str(gone / "step-0000.hyper")
    assert caught.value.file == step_file
    assert str(caught.value).startswith(f"{step_file}: Hyper said: ")
    assert "(rows of Extract.events) failed: nothing was sent" in str(caught.value)
    assert isinstance(caught.value, PublishError) and isinstance(caught.value, HyperFileError)
    assert shop.files() == before

    directory = tmp_path / "payload"
    directory.mkdir()
    parts = build_parts(
        endpoint, shop.database, shop.outbox, steps, directory, 2**20, lambda t: [t]
    )
    with pytest.raises(PayloadFileError) as caught:
        write_batch(endpoint, parts, gone / "batch-000.hyper")
    assert caught.value.file == str(gone / "batch-000.hyper")
    assert "(a batch's tables) failed" in str(caught.value)
    assert shop.files() == before
