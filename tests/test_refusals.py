"""Mistakes caught early, with nothing left behind.

Each metadata mistake is a Spark asset's: the frame's schema is known before any Spark
job, so the IO manager refuses it before staging. Spark's status tracker proves no job ran,
and the `.hyper` file and its outbox are byte for byte as they were. So are they after a
refused first write, a refused change of a partitioned table's columns, and a key column
retyped so that the foreign keys between two tables would break.
"""

import hashlib
import logging
import shutil
from datetime import timedelta
from pathlib import Path

import pyarrow as pa
import pytest
from dagster import (
    AssetExecutionContext,
    BackfillPolicy,
    DagsterInstance,
    DailyPartitionsDefinition,
    asset,
    materialize,
)
from pyspark.sql import DataFrame, SparkSession
from tableauhyperapi import Date, SqlType, TableName

from hyper_assets import (
    ConfigurationError,
    HyperIOManager,
    KeyTypeError,
    MetadataKeyError,
    SchemaMismatchError,
)
from hyper_assets._engine.key_types import change, family
from hyper_assets._engine.tables import Catalog, ForeignKey, Keys
from hyper_assets._engine.types import Column
from hyper_assets._rows.ingest import Write, write_table
from hyper_assets._rows.outbox import Outbox
from hyper_assets._rows.pending_keys import PendingKeys
from hyper_assets._rows.staging import Staged

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


# --- Key columns retyped under the foreign keys between tables ---------------------------


@pytest.mark.parametrize(
    ("stored", "new", "family_kept", "how"),
    [
        (SqlType.big_int(), SqlType.int(), True, "narrows"),
        (SqlType.small_int(), SqlType.big_int(), True, "widens"),
        (SqlType.big_int(), SqlType.numeric(18, 0), True, "changes"),
        (SqlType.big_int(), SqlType.text(), False, "changes"),
        (SqlType.text(), SqlType.varchar(10), True, "changes"),
        (SqlType.date(), SqlType.timestamp(), True, "changes"),
        (SqlType.date(), SqlType.text(), False, "changes"),
        (SqlType.bool(), SqlType.int(), False, "changes"),
    ],
)
def test_a_key_type_keeps_its_family_or_breaks_the_keys(
    stored: SqlType, new: SqlType, family_kept: bool, how: str
) -> None:
    """The families Hyper compares keys within, as measured (key_types' docstring)."""
    assert (family(stored) == family(new), change(stored, new)) == (family_kept, how)


@pytest.fixture
def keyed(tmp_path: Path) -> Path:
    """`stores` (store_id BIGINT, the primary key) and `sales`, whose foreign key
    references it; Arrow frames, no Spark."""

    @asset(name="stores", metadata={"primary_key": ["store_id"]})
    def stores() -> pa.Table:
        return pa.table({"store_id": pa.array([0, 1, 2], pa.int64()), "name": ["a", "b", "c"]})

    @asset(metadata={"foreign_keys": {"store_id": "Extract.stores.store_id"}})
    def sales() -> pa.Table:
        return pa.table({"id": [1, 2], "store_id": pa.array([0, 2], pa.int64())})

    database = tmp_path / "shop.hyper"
    materialize([stores, sales], resources={"io_manager": HyperIOManager(database=str(database))})
    return database


def spark_asset(spark: SparkSession, name: str, sql: str, **metadata: object):
    @asset(name=name, metadata=metadata)
    def table() -> DataFrame:
        return spark.sql(sql)

    return table


def stored_types(database: Path) -> dict[str, list[tuple[str, str]]]:
    io_manager = HyperIOManager(database=str(database))
    with io_manager.hyper.connect(database) as connection:
        catalog = Catalog(connection)
        return {
            t.name.unescaped: [(c.name, c.sql) for c in catalog.columns(t)]
            for t in catalog.tables()
        }


def test_a_dimensions_key_retyped_to_text_is_refused_before_spark_runs(
    spark: SparkSession, keyed: Path
) -> None:
    """A CSV read without a schema: store_id BIGINT -> string."""
    before, types, jobs = digest(keyed), stored_types(keyed), spark_jobs(spark)
    stores = spark_asset(
        spark,
        "stores",
        "SELECT CAST(id AS STRING) AS store_id, 'x' AS name FROM range(3)",
        primary_key=["store_id"],
    )
    with pytest.raises(KeyTypeError) as refused:
        materialize([stores], resources={"io_manager": HyperIOManager(database=str(keyed))})
    assert str(refused.value) == (
        "Key column 'store_id' of Extract.stores is BIGINT in the stored table but TEXT in "
        "the new rows, and the foreign key(s) Extract.sales.store_id (BIGINT) reference it: "
        "Hyper keeps a foreign key only between types of one family (numbers; text; dates "
        "and times), so the write would break them. Nothing was written. Cast store_id to "
        "BIGINT in the asset (a CSV read without a schema gives strings: give the reader a "
        "schema); or, to change the key's type, drop the key from the metadata of "
        "Extract.sales and full-refresh it, then write this table, then declare the key "
        "again and full-refresh Extract.sales with store_id as TEXT."
    )
    assert refused.value.column == "store_id"
    assert spark_jobs(spark) == jobs  # refused from the schemas: Spark ran no job
    assert (digest(keyed), stored_types(keyed)) == (before, types)


def test_a_foreign_key_column_of_another_family_is_refused_before_spark_runs(
    spark: SparkSession, keyed: Path
) -> None:
    before, jobs = digest(keyed), spark_jobs(spark)
    sales = spark_asset(
        spark,
        "sales",
        "SELECT id, CAST(id % 3 AS STRING) AS store_id FROM range(4)",
        foreign_keys={"store_id": "Extract.stores.store_id"},
    )
    with pytest.raises(KeyTypeError) as refused:
        materialize([sales], resources={"io_manager": HyperIOManager(database=str(keyed))})
    assert str(refused.value).startswith(
        "Foreign key column 'store_id' of Extract.sales is TEXT in the new rows, but the "
        "key it references, Extract.stores.store_id (BIGINT), is not of its family"
    )
    assert "Cast store_id to BIGINT in the asset" in str(refused.value)
    assert spark_jobs(spark) == jobs
    assert digest(keyed) == before


def test_a_key_narrowed_within_its_family_is_written_and_said_in_the_log_and_metadata(
    spark: SparkSession, keyed: Path
) -> None:
    """`inferSchema`: store_id BIGINT -> int. The keys hold; the write says so."""
    stores = spark_asset(
        spark,
        "stores",
        "SELECT CAST(id AS INT) AS store_id, 'x' AS name FROM range(3)",
        primary_key=["store_id"],
    )
    with DagsterInstance.ephemeral() as instance:
        result = materialize(
            [stores],
            resources={"io_manager": HyperIOManager(database=str(keyed))},
            instance=instance,
        )
        warnings = [
            r.user_message
            for r in instance.all_logs(result.run_id)
            if r.level == logging.WARNING and "Key column" in r.user_message
        ]
    (materialization,) = result.get_asset_materialization_events()
    assert materialization.materialization.metadata["retyped_keys"].value == [
        "Extract.stores.store_id: BIGINT -> INTEGER (narrows); referenced by "
        "Extract.sales.store_id (BIGINT)"
    ]
    assert warnings == [
        "Key column 'store_id' of Extract.stores narrows from BIGINT to INTEGER, "
        "while the foreign key(s) referencing it keep their types (Extract.sales.store_id "
        "(BIGINT)): the keys hold, and the next publish sends the whole file (a column's type "
        "changed). To keep BIGINT, cast store_id to it in the asset (a CSV read with "
        "inferSchema guesses types); to match, full-refresh Extract.sales with store_id as "
        "INTEGER."
    ]
    types = stored_types(keyed)
    assert ("store_id", "INTEGER") in types["stores"] and ("store_id", "BIGINT") in types["sales"]


def test_the_write_refuses_a_retyped_key_again_under_the_lock(keyed: Path) -> None:
    """What an object-store home's write relies on (its file is local only under the
    lease), and a write whose stored tables changed since the check before staging."""
    before = digest(keyed)
    write = Write(
        TableName("Extract", "stores"),
        [Column("store_id", SqlType.text()), Column("name", SqlType.text())],
        keys=Keys(("store_id",)),
    )
    io_manager = HyperIOManager(database=str(keyed))
    refused = pytest.raises(KeyTypeError, match=r"'store_id' of Extract\.stores is BIGINT in")
    with refused, io_manager.hyper.connect(keyed) as connection:
        write_table(connection, write, Staged((), 0), PendingKeys(keyed))
    io_manager.hyper.close()
    assert digest(keyed) == before


def test_the_key_check_before_staging_waits_for_no_writer(keyed: Path) -> None:
    """While another writer holds the file, the check is left to the write (under the
    lock), so that this step's Spark work does not wait for that writer's turn."""
    io_manager = HyperIOManager(database=str(keyed))
    with io_manager.hyper.lock(keyed), io_manager.hyper.connect_if_free(keyed) as connection:
        assert connection is None
    with io_manager.hyper.connect_if_free(keyed) as connection:
        assert connection is not None and Catalog(connection).exists(TableName("Extract", "sales"))
    io_manager.hyper.close()
