"""Mistakes caught early, with nothing left behind.

Each metadata mistake is a Spark asset's: the frame's schema is known before any Spark
job, so the IO manager refuses it before staging. Spark's status tracker proves no job ran,
and the `.hyper` file and its outbox are byte for byte as they were. So are they after a
refused first write and a refused change of a partitioned table's columns.
"""

import hashlib
import shutil
from datetime import timedelta
from pathlib import Path

import pyarrow as pa
import pytest
from dagster import (
    AssetExecutionContext,
    BackfillPolicy,
    DailyPartitionsDefinition,
    asset,
    materialize,
)
from pyspark.sql import DataFrame, SparkSession
from tableauhyperapi import Date, TableName

from hyper_assets import (
    ConfigurationError,
    HyperIOManager,
    MetadataKeyError,
    SchemaMismatchError,
)
from hyper_assets._engine.tables import Catalog, ForeignKey, Keys
from hyper_assets._rows.outbox import Outbox

DAYS = DailyPartitionsDefinition(start_date="2024-01-01", end_date="2024-01-10")
SALES = "SELECT id, DATE'2024-01-02' AS day, id % 3 AS store_id FROM range(5)"


def spark_jobs(spark: SparkSession) -> list[int]:
    return sorted(spark.sparkContext.statusTracker().getJobIdsForGroup())


def digest(database: Path) -> dict[str, str]:
    """The bytes of the file and of every file of its outbox, hashed."""
    files = [database, *sorted(Outbox(database).directory.rglob("*"))]
    return {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in files if p.is_file()}


def sales_asset(spark: SparkSession, name: str = "sales", **metadata: object):
    @asset(name=name, partitions_def=DAYS, metadata={"partition_expr": "day", **metadata})
    def sales() -> DataFrame:
        return spark.sql(SALES)

    return sales


@pytest.fixture(scope="module")
def written(tmp_path_factory: pytest.TempPathFactory, spark: SparkSession) -> Path:
    """A file with a `stores` dimension and the first day of `sales`, its changes tracked."""

    @asset(metadata={"primary_key": ["store_id"]})
    def stores() -> DataFrame:
        return spark.sql("SELECT id AS store_id, 'store' AS name FROM range(3)")

    path = tmp_path_factory.mktemp("written") / "shop.hyper"
    io_manager = HyperIOManager(database=str(path))
    materialize([stores], resources={"io_manager": io_manager})
    materialize(
        [sales_asset(spark)], resources={"io_manager": io_manager}, partition_key="2024-01-02"
    )
    Outbox(path).start_tracking()
    return path


@pytest.fixture
def database(tmp_path: Path, written: Path) -> Path:
    """A copy of `written` (the file and its outbox) for one test."""
    for source in written.parent.iterdir():
        if source.suffix != ".lock":
            copy = shutil.copytree if source.is_dir() else shutil.copyfile
            copy(source, tmp_path / source.name)
    return tmp_path / written.name


MISTAKES = {
    "partition_expr": ({"partition_expr": "dayy"}, r"partition_expr names column 'dayy'"),
    "primary_key": ({"primary_key": ["idd"]}, r"primary_key names column 'idd'"),
    "foreign key column": (
        {"foreign_keys": {"store": "Extract.stores.store_id"}},
        r"foreign_keys names column 'store'",
    ),
    "upsert without a key": ({"write_mode": "upsert"}, r"needs metadata primary_key"),
}


@pytest.mark.parametrize("table", ["sales", "new_sales"])
@pytest.mark.parametrize("mistake", MISTAKES)
def test_a_metadata_mistake_fails_before_spark_runs(
    spark: SparkSession, database: Path, mistake: str, table: str
) -> None:
    metadata, message = MISTAKES[mistake]
    before, jobs = digest(database), spark_jobs(spark)
    with pytest.raises(ConfigurationError, match=message) as refused:
        materialize(
            [sales_asset(spark, table, **metadata)],
            resources={"io_manager": HyperIOManager(database=str(database))},
            partition_key="2024-01-03",
        )
    assert f"Asset {table!r}:" in str(refused.value)
    if mistake != "upsert without a key":
        assert "its columns: id, day, store_id" in str(refused.value)
    assert spark_jobs(spark) == jobs  # nothing staged: Spark ran no job
    assert digest(database) == before


def test_a_misspelt_key_fails_before_spark_runs(spark: SparkSession, database: Path) -> None:
    """`foreign_key` for `foreign_keys` would drop the key, its check and its column role."""
    before, jobs = digest(database), spark_jobs(spark)
    typo = {"foreign_key": {"store_id": "Extract.stores.store_id"}}
    with pytest.raises(MetadataKeyError, match=r"did you mean 'foreign_keys'") as refused:
        materialize(
            [sales_asset(spark, **typo)],
            resources={"io_manager": HyperIOManager(database=str(database))},
            partition_key="2024-01-03",
        )
    assert str(refused.value).startswith("Metadata key 'foreign_key' of asset 'sales' is not")
    assert spark_jobs(spark) == jobs  # nothing staged: Spark ran no job
    assert digest(database) == before


def test_a_close_name_is_suggested(spark: SparkSession, database: Path) -> None:
    before = digest(database)
    with pytest.raises(ConfigurationError, match=r"Did you mean 'day'\? Fix partition_expr"):
        materialize(
            [sales_asset(spark, partition_expr="dy")],
            resources={"io_manager": HyperIOManager(database=str(database))},
            partition_key="2024-01-03",
        )
    assert digest(database) == before


def test_a_database_below_a_file_fails_when_the_io_manager_starts(
    spark: SparkSession, tmp_path: Path
) -> None:
    (tmp_path / "data").write_text("a file, not a directory")
    database = tmp_path / "data" / "shop.hyper"
    ran = []

    @asset
    def stores() -> DataFrame:
        ran.append(True)
        return spark.sql("SELECT 1 AS store_id")

    jobs = spark_jobs(spark)
    with pytest.raises(Exception) as refused:  # Dagster wraps what a resource's setup raises
        materialize([stores], resources={"io_manager": HyperIOManager(database=str(database))})
    cause = refused.value.__cause__
    assert isinstance(cause, ConfigurationError), refused.value
    assert f"{tmp_path / 'data'} is a file, not a directory" in str(cause)
    assert not ran and spark_jobs(spark) == jobs
    assert (tmp_path / "data").read_text() == "a file, not a directory"


def test_a_failed_first_write_creates_no_table(spark: SparkSession, database: Path) -> None:
    before = digest(database)
    with pytest.raises(SchemaMismatchError, match=r"5 of 5 rows .* fall outside the partition"):
        materialize(
            [sales_asset(spark, "new_sales")],  # the rows are of 2024-01-02
            resources={"io_manager": HyperIOManager(database=str(database), default_schema="New")},
            partition_key="2024-01-03",
        )
    assert digest(database) == before  # neither the table nor its new schema, not a byte


def test_a_foreign_key_to_a_missing_table_suggests_a_close_name(database: Path) -> None:
    io_manager = HyperIOManager(database=str(database))
    typo = ForeignKey(("store_id",), TableName("Extract", "store"), ("store_id",))
    far = ForeignKey(("store_id",), TableName("Extract", "warehouses"), ("store_id",))
    with io_manager.hyper.connect(database) as connection:
        catalog = Catalog(connection)
        sales = TableName("Extract", "sales")
        keys, postponed = catalog.check_foreign_keys(sales, Keys(foreign_keys=(typo, far)))
        typo_note, far_note = (catalog.postponed_note(sales, fk) for fk in postponed)
    io_manager.hyper.close()
    assert (keys.foreign_keys, postponed) == ((), (typo, far))
    assert typo_note.endswith("Did you mean Extract.stores? Then fix metadata foreign_keys")
    assert "Did you mean" not in far_note


def test_a_partitioned_table_changes_its_columns_only_in_a_run_of_all_its_partitions(
    tmp_path: Path,
) -> None:
    """The drift error says which run changes the columns, and that run does."""
    columns = {"day": pa.date32(), "n": pa.int64()}

    @asset(
        partitions_def=DAYS,
        metadata={"partition_expr": "day"},
        backfill_policy=BackfillPolicy.single_run(),
    )
    def visits(context: AssetExecutionContext) -> pa.Table:
        start, end = context.partition_time_window
        days = [start.date() + timedelta(d) for d in range((end - start).days)]
        rows = {"day": days, "n": [7] * len(days), "note": ["new"] * len(days)}
        return pa.table({name: rows[name] for name in columns}, pa.schema(columns))

    database = tmp_path / "shop.hyper"
    io_manager = HyperIOManager(database=str(database))
    for day in ("2024-01-02", "2024-01-03"):
        materialize([visits], resources={"io_manager": io_manager}, partition_key=day)
    columns["note"] = pa.string()
    before = digest(database)
    with pytest.raises(SchemaMismatchError, match="'note' is not in the stored table") as refused:
        materialize([visits], resources={"io_manager": io_manager}, partition_key="2024-01-03")
    assert (
        "write all the partitions the table holds in one run (give the asset "
        "backfill_policy=BackfillPolicy.single_run() and launch a backfill of the whole range, "
        "e.g. dagster asset materialize --select <asset> --partition-range <first>...<last>)"
    ) in str(refused.value)
    assert digest(database) == before
    whole_range = {
        "dagster/asset_partition_range_start": "2024-01-02",
        "dagster/asset_partition_range_end": "2024-01-03",
    }
    materialize([visits], resources={"io_manager": io_manager}, tags=whole_range)
    with io_manager.hyper.connect(database) as connection:
        rows = connection.execute_list_query('SELECT * FROM "Extract"."visits" ORDER BY day')
    io_manager.hyper.close()
    assert rows == [[Date(2024, 1, 2), 7, "new"], [Date(2024, 1, 3), 7, "new"]]
