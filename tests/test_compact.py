"""Compaction with a real hyperd: same rows, keys and version, a smaller file, and failures
that leave the original as it was."""

import contextlib
import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from datetime import date, timedelta
from decimal import Decimal
from pathlib import Path
from typing import Any

import dagster as dg
import numpy as np
import pyarrow as pa
import pytest
from helpers import digest
from tableauhyperapi import Connection, CreateMode, HyperException, escape_name

from hyper_assets import DatabaseLockedError, HyperIOManager, HyperResource, compact
from hyper_assets._engine.compaction import (
    AutoCompact,
    Deletions,
    _file_id,
    _reload_tables,
    compact_if_wasteful,
    file_version,
)
from hyper_assets._engine.process import SharedHyper
from hyper_assets._engine.tables import Catalog
from hyper_assets.emulator import Emulator
from hyper_assets.errors import CompactionError
from hyper_assets.tableau._dagster.assets import tableau_datasource_asset
from hyper_assets.tableau._dagster.resource import TableauServerResource, TokenSignIn

MONTHS = dg.MonthlyPartitionsDefinition(start_date="2024-01-01", end_date="2025-01-01")
ROWS_PER_DAY = 1000
TOKEN = ("ci", "secret")


def sales_rows(start: date, end: date, seed: int) -> pa.Table:
    days = (end - start).days
    count = days * ROWS_PER_DAY
    rng = np.random.default_rng([start.toordinal(), seed])
    day = [start + timedelta(d) for d in range(days) for _ in range(ROWS_PER_DAY)]
    return pa.table(
        {
            "day": pa.array(day, pa.date32()),
            "product": pa.array(rng.integers(1, 4, count), pa.int64()),
            "amount": pa.array(rng.integers(100, 10_000, count) / 100),
            "customer": pa.array(rng.integers(10**6, 10**7, count)).cast(pa.string()),
        }
    )


def star_assets(seed: dict[str, int]) -> list[dg.AssetsDefinition]:
    @dg.asset(metadata={"primary_key": ["id"]})
    def products() -> pa.Table:
        return pa.table({"id": pa.array([1, 2, 3], pa.int64()), "name": ["tea", "cake", "jam"]})

    @dg.asset(
        partitions_def=MONTHS,
        backfill_policy=dg.BackfillPolicy.single_run(),
        deps=[products],
        metadata={"partition_expr": "day", "foreign_keys": {"product": "products.id"}},
    )
    def sales(context: dg.AssetExecutionContext) -> pa.Table:
        window = context.partition_time_window
        return sales_rows(window.start.date(), window.end.date(), seed["value"])

    return [products, sales]


class Star:
    """A star-schema file written through HyperIOManager, published to an emulator."""

    def __init__(
        self,
        directory: Path,
        emulator: Emulator,
        auto_compact: AutoCompact | None = None,
        database: Path | None = None,
    ) -> None:
        self.database = database or directory / "star.hyper"
        self.seed = {"value": 0}
        self.assets = star_assets(self.seed)
        self.publish_asset = tableau_datasource_asset(
            datasource="Star", project="Default", deps=self.assets
        )
        self.resources = {
            "io_manager": HyperIOManager(
                database=str(self.database),
                staging_dir=str(directory / "staging"),
                auto_compact=auto_compact,
            ),
            "tableau": TableauServerResource(
                server_url=emulator.url, sign_in=TokenSignIn(name=TOKEN[0], secret=TOKEN[1])
            ),
        }

    def write(self, asset: str, partition: str | None = None, **kwargs: Any) -> dict[str, Any]:
        """Materialises `asset`; the metadata of its (first) materialisation."""
        everything = [*self.assets, self.publish_asset]
        result = dg.materialize(
            everything,
            selection=[asset],
            resources=self.resources,
            partition_key=partition,
            **kwargs,
        )
        assert result.success
        event = result.get_asset_materialization_events()[0]
        return {k: v.value for k, v in event.materialization.metadata.items()}

    def publish(self) -> str:
        result = dg.materialize(
            [*self.assets, self.publish_asset],
            selection=[self.publish_asset.key],
            resources=self.resources,
        )
        (event,) = result.asset_materializations_for_node(self.publish_asset.op.name)
        return str(event.metadata["publish"].value)


def attached(hyper: SharedHyper, files: dict[str, Path]) -> Connection:
    connection = Connection(hyper.endpoint)
    for alias, path in files.items():
        connection.execute_command(f"ATTACH DATABASE {escape_name(str(path))} AS {alias}")
    return connection


def shape(hyper: SharedHyper, path: Path) -> dict[str, Any]:
    """Each table's columns (with their recorded Spark types) and keys."""
    with Connection(hyper.endpoint, str(path)) as connection:
        catalog = Catalog(connection)
        return {
            str(table): (catalog.columns(table), catalog.keys(table))
            for schema in connection.catalog.get_schema_names()
            for table in connection.catalog.get_table_names(schema)
        }


def assert_same_tables(hyper: SharedHyper, a: Path, b: Path) -> None:
    """Both files hold the same tables, columns, keys and rows (as multisets)."""
    tables = shape(hyper, a)
    assert shape(hyper, b) == tables
    with attached(hyper, {"a": a, "b": b}) as connection:
        for name in tables:
            left, right = f"a.{name}", f"b.{name}"
            counts = [
                connection.execute_scalar_query(f"SELECT COUNT(*) FROM {t}") for t in (left, right)
            ]
            differ = connection.execute_scalar_query(
                f"SELECT COUNT(*) FROM ((SELECT * FROM {left} EXCEPT ALL SELECT * FROM {right}) "
                f"UNION ALL (SELECT * FROM {right} EXCEPT ALL SELECT * FROM {left})) AS d"
            )
            assert (counts[0], differ) == (counts[1], 0), name


def version_of(hyper: SharedHyper, path: Path) -> int:
    with Connection(hyper.endpoint, str(path)) as connection:
        return file_version(connection, path)


@pytest.fixture
def emulator(tmp_path: Path, hyper: SharedHyper):
    (tmp_path / "server").mkdir()
    with Emulator(tmp_path / "server", tokens=dict([TOKEN]), hyper=hyper) as running:
        yield running


YEAR = {
    "dagster/asset_partition_range_start": "2024-01-01",
    "dagster/asset_partition_range_end": "2024-12-01",
}


@pytest.mark.slow
def test_compaction_after_12_monthly_rewrites(hyper, tmp_path, emulator):
    star = Star(tmp_path, emulator)
    star.write("products")
    star.write("sales", tags=YEAR)
    assert star.publish() == "full"
    grown_from = star.database.stat().st_size
    star.seed["value"] = 1
    for month in MONTHS.get_partition_keys():
        star.write("sales", month)
    snapshot = tmp_path / "before.hyper"
    shutil.copyfile(star.database, snapshot)
    outbox = star.database.parent / "star.hyper.outbox"
    pending = {p: p.read_bytes() for p in outbox.rglob("*") if p.is_file()}
    assert pending  # the 12 rewrites wait there for the next publish

    result = compact(HyperResource(), star.database)

    assert result.before_bytes == snapshot.stat().st_size > grown_from
    assert result.after_bytes == star.database.stat().st_size
    assert result.after_bytes < 0.75 * result.before_bytes, result
    assert result.saved_bytes == result.before_bytes - result.after_bytes
    assert_same_tables(hyper, snapshot, star.database)
    assert version_of(hyper, star.database) == version_of(hyper, snapshot) == 2
    assert {p: p.read_bytes() for p in outbox.rglob("*") if p.is_file()} == pending
    assert sorted(p.name for p in tmp_path.iterdir() if "compacting" in p.name) == []

    # The outbox still describes the file: the next publish sends the 12 months, and the
    # server's copy then equals the compacted file.
    assert star.publish() == "update"
    assert_same_tables(hyper, star.database, emulator.data_dir / "Star.hyper")


def test_the_file_format_version_is_kept(hyper, tmp_path):
    database = tmp_path / "wide.hyper"

    @dg.asset
    def wide() -> pa.Table:
        amount = Decimal("12345678901234567890123.45")
        return pa.table({"amount": pa.array([amount], pa.decimal128(30, 2))})

    io = HyperIOManager(
        database=str(database),
        hyper=HyperResource(default_database_version=3),
    )
    assert dg.materialize([wide], resources={"io_manager": io}).success
    compact(HyperResource(), database)  # default version 2
    assert version_of(hyper, database) == 3
    with Connection(hyper.endpoint, str(database)) as connection:
        value = connection.execute_scalar_query('SELECT CAST(amount AS TEXT) FROM "Extract".wide')
    assert value == "12345678901234567890123.45"


def filled(hyper: SharedHyper, path: Path, rows: int) -> Path:
    """A file with a table of `rows` rows, a third of them deleted (so it has holes)."""
    with Connection(hyper.endpoint, str(path), CreateMode.CREATE_AND_REPLACE) as connection:
        connection.execute_command("CREATE TABLE t (id BIGINT, label TEXT)")
        connection.execute_command(
            f"INSERT INTO t SELECT g, 'row ' || g FROM generate_series(1, {rows}) g"
        )
        connection.execute_command("DELETE FROM t WHERE id % 3 = 0")
    return path


def test_a_file_open_in_another_program_is_left_as_it_was(hyper, tmp_path):
    database = filled(hyper, tmp_path / "held.hyper", 10_000)
    before = digest(database)
    # The test's hyperd plays Tableau Desktop: another process that has the file open.
    with Connection(hyper.endpoint, str(database)), pytest.raises(DatabaseLockedError):
        compact(HyperResource(lock_timeout_seconds=0.5), database)
    assert digest(database) == before
    assert [p.name for p in tmp_path.iterdir() if "compacting" in p.name] == []


def test_a_failed_copy_leaves_the_original(hyper, tmp_path):
    database = filled(hyper, tmp_path / "open.hyper", 10_000)
    before = digest(database)
    resource = HyperResource()
    # A connection of the same hyperd that ignores the lock keeps the file open read-write:
    # opening it and reading its version work, Hyper's CREATE DATABASE ... FROM fails.
    with (
        Connection(resource.shared.endpoint, str(database)),
        pytest.raises(CompactionError, match=r"could not be created.*the file is unchanged") as err,
    ):
        compact(resource, database)
    assert str(database) in str(err.value) and isinstance(err.value.__cause__, HyperException)
    resource.close()
    assert digest(database) == before
    assert [p.name for p in tmp_path.iterdir() if "compacting" in p.name] == []


def test_rows_are_reloaded_from_the_original_attached_read_only(hyper, tmp_path):
    """Read-write, the attach would fail while another process reads the file."""
    database = filled(hyper, tmp_path / "original.hyper", 10_000)
    before = digest(database)
    copy = tmp_path / "copy.hyper"
    shutil.copyfile(database, copy)
    resource = HyperResource()  # a hyperd other than the reader's
    with Connection(hyper.endpoint) as reader:
        reader.execute_command(
            f"ATTACH DATABASE {escape_name(str(database))} AS r WITH (access_mode = readonly)"
        )
        _reload_tables(resource, copy, database)
    resource.close()
    assert digest(database) == before
    assert_same_tables(hyper, database, copy)


COMPACT_SCRIPT = """
import sys
from hyper_assets import HyperResource
from hyper_assets import compact
print(compact(HyperResource(log_dir=sys.argv[2]), sys.argv[1]), flush=True)
"""


def test_rewriting_rows_packs_blocks_that_scattered_deletes_left_partly_empty(hyper, tmp_path):
    database = filled(hyper, tmp_path / "scattered.hyper", 1_000_000)  # every 3rd row gone
    snapshot = tmp_path / "snapshot.hyper"
    shutil.copyfile(database, snapshot)
    resource = HyperResource()
    blocks = compact(resource, database, rewrite_rows=False)
    assert_same_tables(hyper, snapshot, database)
    rows = compact(resource, database)
    assert_same_tables(hyper, snapshot, database)
    assert rows.after_bytes < 0.8 * blocks.after_bytes, (blocks, rows)


@pytest.fixture(scope="module")
def big_file(hyper: SharedHyper, tmp_path_factory: pytest.TempPathFactory) -> Path:
    return filled(hyper, tmp_path_factory.mktemp("big") / "big.hyper", 3_000_000)


def kill_9_with_its_hyperd(child: subprocess.Popen[bytes]) -> None:
    """SIGKILL for `child` and for its hyperd, which runs in a process group of its own
    (left alive, it would hold the file until it noticed its parent gone)."""
    import psutil

    hyperds = [p.pid for p in psutil.Process(child.pid).children(recursive=True)]
    assert hyperds, "the compaction's hyperd was not found"
    os.killpg(child.pid, signal.SIGKILL)
    child.wait()
    for pid in hyperds:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
    # A process killed in the middle of disk writes dies when they end: on a loaded disk,
    # tens of seconds.
    deadline = time.monotonic() + 180
    while any(map(_running, hyperds)) and time.monotonic() < deadline:
        time.sleep(0.01)
    assert not any(map(_running, hyperds)), f"hyperd {hyperds} still runs 180 s after SIGKILL"


def wait_unlocked(hyper: SharedHyper, path: Path, timeout: float = 60.0) -> None:
    """Waits until Hyper no longer calls `path` locked by another process: on a loaded
    machine, a hyperd killed with -9 releases it a moment after it is gone (as the
    library's own opens wait, `HyperResource`)."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            with Connection(hyper.endpoint, str(path)):
                return
        except HyperException as error:
            if "locked by another process" not in str(error) or time.monotonic() > deadline:
                raise
            time.sleep(0.1)


def _running(pid: int) -> bool:
    """Not gone and not a zombie (a dead process init has yet to reap holds no files)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


@pytest.mark.slow
@pytest.mark.parametrize("stage", ["compacting1", "compacting2"])
def test_kill_9_during_compaction_leaves_a_whole_file(hyper, tmp_path, big_file, stage):
    """Killed while copying the blocks, or once that copy exists (reloading, second copy)."""
    database = tmp_path / "big.hyper"
    shutil.copyfile(big_file, database)
    mark = database.with_name(f"big.hyper.{stage}")
    child = subprocess.Popen(
        [sys.executable, "-c", COMPACT_SCRIPT, str(database), str(tmp_path / "logs")],
        stdout=subprocess.PIPE,
        start_new_session=True,
    )
    deadline = time.monotonic() + 120
    while not mark.exists() and child.poll() is None and time.monotonic() < deadline:
        time.sleep(0.005)
    was_compacting = mark.exists()
    kill_9_with_its_hyperd(child)
    assert was_compacting, "the compaction ended before it was seen"
    wait_unlocked(hyper, database)
    # Either the original or its compact copy, whole: the same rows either way.
    assert_same_tables(hyper, big_file, database)
    # The next compaction removes what the killed one left behind.
    result = compact(HyperResource(), database)
    assert [p.name for p in tmp_path.iterdir() if "compacting" in p.name] == []
    assert result.after_bytes < big_file.stat().st_size
    assert_same_tables(hyper, big_file, database)


def test_a_file_whose_year_is_rewritten_is_compacted_when_it_pays(hyper, tmp_path, emulator):
    """The demo's re-run: the same year replaced again and again. Without compaction the
    file doubles; with it, each rewrite (as many rows deleted as held) compacts it."""
    grown = Star(tmp_path / "off", emulator)
    packed = Star(tmp_path / "on", emulator, AutoCompact(min_bytes=0))
    compacted: dict[Star, list[object]] = {grown: [], packed: []}
    for star in (grown, packed):
        star.write("products")
        for seed in range(4):
            star.seed["value"] = seed
            compacted[star].append(star.write("sales", tags=YEAR).get("compacted"))
            if seed == 0:
                first = star.database.stat().st_size
        assert star.database.stat().st_size > (1.9 * first if star is grown else 0)
    assert packed.database.stat().st_size <= 1.1 * first
    assert compacted[grown] == [None] * 4
    assert compacted[packed][0] is None and all(compacted[packed][1:]), compacted[packed]
    assert_same_tables(hyper, grown.database, packed.database)


def test_appends_never_compact(hyper, tmp_path):
    """They delete nothing. (Small ones leave partly filled blocks: Hyper starts new ones
    per insert; compact() wins that back when asked.)"""
    database = tmp_path / "log.hyper"
    batch = {"value": 0}

    @dg.asset(metadata={"write_mode": "append"})
    def events() -> pa.Table:
        return sales_rows(date(2024, 1, 1) + timedelta(batch["value"]), date(2024, 2, 1), 0)

    io = HyperIOManager(
        database=str(database),
        auto_compact=AutoCompact(deleted_fraction=0.01, min_bytes=0),
    )
    for n in range(4):
        batch["value"] = n
        result = dg.materialize([events], resources={"io_manager": io})
        (event,) = result.get_asset_materialization_events()
        assert "compacted" not in event.materialization.metadata
    assert not Deletions.path(database).exists()
    with Connection(hyper.endpoint, str(database)) as connection:
        rows = connection.execute_scalar_query('SELECT COUNT(*) FROM "Extract".events')
    assert rows == sum(31 - n for n in range(4)) * ROWS_PER_DAY


def test_deletions_add_up_until_they_pay_and_small_savings_are_not_made(tmp_path, emulator):
    """Monthly rewrites count up; a compaction resets the count. A table whose every row
    is replaced but whose space is under min_bytes is not worth a rewrite."""
    star = Star(tmp_path, emulator, AutoCompact(deleted_fraction=0.2, min_bytes=0))
    star.write("products")
    star.write("sales", tags=YEAR)  # 366 days, 366,000 rows: 20% is 73,200
    compacted, counted = [], []
    for month in MONTHS.get_partition_keys()[:6]:  # 31, 29, 31, 30, 31, 30 days
        star.seed["value"] += 1
        compacted.append(bool(star.write("sales", month).get("compacted")))
        counted.append(Deletions.read(star.database.absolute()).rows)
    assert compacted == [False, False, True, False, False, True]
    assert counted == [31_000, 60_000, 0, 30_000, 61_000, 0]

    tiny = Star(tmp_path / "tiny", emulator, AutoCompact(deleted_fraction=0.2))
    tiny.write("products")
    assert "compacted" not in tiny.write("products")  # 3 of 3 rows replaced: a few bytes
    assert Deletions.read(tiny.database.absolute()).rows == 3


def test_deleting_most_partitions_compacts_the_file(hyper, tmp_path, emulator):
    star = Star(tmp_path, emulator, AutoCompact(min_bytes=0))
    star.write("products")
    star.write("sales", tags=YEAR)
    snapshot = tmp_path / "before.hyper"
    shutil.copyfile(star.database, snapshot)
    before = star.database.stat().st_size
    io_manager = star.resources["io_manager"]
    deleted = io_manager.delete_partitions(star.assets[1], MONTHS.get_partition_keys()[:9])
    assert deleted == (date(2024, 10, 1) - date(2024, 1, 1)).days * ROWS_PER_DAY
    assert star.database.stat().st_size < 0.5 * before
    kept = "SELECT * FROM was.\"Extract\".sales WHERE day >= DATE '2024-10-01'"
    with attached(hyper, {"now": star.database, "was": snapshot}) as connection:
        differ = connection.execute_scalar_query(
            f'SELECT COUNT(*) FROM ((SELECT * FROM now."Extract".sales EXCEPT ALL {kept}) '
            f'UNION ALL ({kept} EXCEPT ALL SELECT * FROM now."Extract".sales)) AS d'
        )
    assert differ == 0


def test_a_count_kept_for_another_file_is_not_its_count(hyper, tmp_path):
    """A file deleted and made again (or restored) starts from 0: its inode differs."""
    database = filled(hyper, tmp_path / "again.hyper", 10_000)
    Deletions((0, 0), 10**9).write(database)
    assert Deletions.read(database) == Deletions(_file_id(database), 0)
    resource = HyperResource()
    policy = AutoCompact(min_bytes=0)
    with resource.lock(database):
        assert compact_if_wasteful(resource, database, 100, policy) is None
    assert Deletions.read(database).rows == 100


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    """A 14 MB file system: room for the file, not for its compact copies as well."""
    if os.geteuid() != 0:
        pytest.skip("mounting a small tmpfs needs root; CI runs as root")
    mount = tmp_path / "small"
    mount.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=14m", "tmpfs", str(mount)], check=True)
    try:
        yield mount
    finally:
        subprocess.run(["umount", str(mount)], check=True)


def test_a_compaction_without_disk_space_leaves_the_write_done(
    hyper, tmp_path, emulator, small_disk
):
    star = Star(tmp_path, emulator, AutoCompact(min_bytes=0), small_disk / "star.hyper")
    star.write("products")
    star.write("sales", tags=YEAR)
    star.seed["value"] = 1
    instance = dg.DagsterInstance.ephemeral()
    metadata = star.write("sales", tags=YEAR, instance=instance)  # compaction would pay
    assert "compacted" not in metadata
    (warning,) = [
        entry.user_message
        for entry in instance.all_logs(instance.get_runs()[0].run_id)
        if "Compacting" in entry.user_message
    ]
    assert "free" in warning and "(The write itself is complete.)" in warning
    assert sorted(p.name for p in small_disk.iterdir()) == [
        "star.hyper",
        "star.hyper.deletions.json",
        "star.hyper.identity.json",
        "star.hyper.lock",
    ]
    expected = sales_rows(date(2024, 1, 1), date(2025, 1, 1), 1)
    with Connection(hyper.endpoint, str(star.database)) as connection:
        count, amount = connection.execute_list_query(
            'SELECT COUNT(*), SUM(amount) FROM "Extract".sales'
        )[0]
    assert count == expected.num_rows
    assert amount == pytest.approx(sum(expected["amount"].to_pylist()))


def test_a_compaction_that_cannot_record_itself_says_the_rows_are_kept(hyper, tmp_path):
    """An OSError after the copy (here: the count's file cannot be replaced) is ours."""
    database = filled(hyper, tmp_path / "noted.hyper", 10_000)
    snapshot = tmp_path / "snapshot.hyper"
    shutil.copyfile(database, snapshot)
    Deletions.path(database).mkdir()  # a directory where the count's file goes
    with pytest.raises(CompactionError, match="holds the rows it held"):
        compact(HyperResource(), database)
    assert_same_tables(hyper, snapshot, database)


def test_an_unreadable_count_is_counted_again_from_0(hyper, tmp_path, records):
    database = filled(hyper, tmp_path / "noted.hyper", 10_000)
    Deletions.path(database).write_text("{not json")
    assert Deletions.read(database) == Deletions(_file_id(database), 0)
    (warning,) = [r for r in records if r.levelname == "WARNING"]
    assert "noted.hyper.deletions.json" in warning.getMessage()
