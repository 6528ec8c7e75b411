"""HyperIOManager end to end: real Spark, real hyperd, the stored file read back."""

from __future__ import annotations

import datetime as dt
import hashlib
from decimal import Decimal
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pytest
from dagster import (
    AssetIn,
    BackfillPolicy,
    DailyPartitionsDefinition,
    MultiPartitionKey,
    MultiPartitionsDefinition,
    StaticPartitionsDefinition,
    asset,
    materialize,
)
from helpers import io, query, staged_row_counts, table_rows
from pyspark.sql import DataFrame, functions as F
from tableauhyperapi import Connection, TableName

from hyper_assets import (
    ConfigurationError,
    DataError,
    IngestError,
    NullInNotNullColumnError,
    PrimaryKeyError,
    SchemaMismatchError,
    TableNotFoundError,
    UnsupportedTypeError,
)
from hyper_assets._engine.tables import Catalog
from hyper_assets._rows import ingest
from hyper_assets._rows.outbox import Outbox
from hyper_assets.errors import DatabaseVersionError

STORES = TableName("Extract", "stores")

DAYS = DailyPartitionsDefinition(start_date="2024-01-01", end_date="2024-01-10")


@pytest.fixture
def database(tmp_path: Path) -> Path:
    return tmp_path / "star.hyper"


def run(assets, database: Path, **kwargs):
    io_kwargs = kwargs.pop("io_kwargs", {})
    result = materialize(assets, resources={"io_manager": io(database, **io_kwargs)}, **kwargs)
    assert result.success
    return result


def metadata(result, key: str) -> dict:
    (event,) = [
        e for e in result.get_asset_materialization_events() if e.asset_key.to_user_string() == key
    ]
    return {k: v.value for k, v in event.materialization.metadata.items()}


def facts_asset(spark, sql_per_day: str, **asset_kwargs):
    @asset(
        name="events",
        key_prefix=["Extract"],
        partitions_def=DAYS,
        metadata={"partition_expr": "day"},
        **asset_kwargs,
    )
    def events(context) -> DataFrame:
        window = context.partition_time_window
        start, end = window.start.date(), window.end.date()
        return spark.sql(sql_per_day).where(f"day >= DATE'{start}' AND day < DATE'{end}'")

    return events


FACT_SQL = (
    "SELECT id, date_add(DATE'2024-01-01', CAST(id % 9 AS INT)) AS day, "
    "CAST(id * 1.5 AS DOUBLE) AS amount FROM range(90)"
)


def test_partition_rematerialised_twice_has_no_duplicates(spark, hyper, database):
    events = facts_asset(spark, FACT_SQL)
    for _ in range(2):
        result = run([events], database, partition_key="2024-01-02")
    run([events], database, partition_key="2024-01-03")
    rows = query(
        hyper, database, 'SELECT day, COUNT(*) FROM "Extract".events GROUP BY day ORDER BY day'
    )
    assert [[str(d), n] for d, n in rows] == [["2024-01-02", 10], ["2024-01-03", 10]]
    meta = metadata(result, "Extract/events")
    assert meta["dagster/partition_row_count"] == 10
    assert meta["dagster/table_name"] == "star.Extract.events"
    assert meta["dagster/storage_kind"] == "hyper"
    assert meta["rows_loaded"] == 10
    assert meta["file_size_bytes"] == database.stat().st_size
    names = [c.name for c in meta["dagster/column_schema"].columns]
    assert names == ["id", "day", "amount"]


def test_single_run_backfill_of_a_range_replaces_exactly_that_range(spark, hyper, database):
    events = facts_asset(spark, FACT_SQL, backfill_policy=BackfillPolicy.single_run())
    run([events], database, partition_key="2024-01-01")
    run([events], database, partition_key="2024-01-09")
    result = materialize(
        [events],
        resources={"io_manager": io(database)},
        tags={
            "dagster/asset_partition_range_start": "2024-01-02",
            "dagster/asset_partition_range_end": "2024-01-05",
        },
    )
    assert result.success
    rows = query(
        hyper,
        database,
        'SELECT CAST(day AS TEXT), COUNT(*) FROM "Extract".events GROUP BY 1 ORDER BY 1',
    )
    assert rows == [[f"2024-01-0{d}", 10] for d in (1, 2, 3, 4, 5, 9)]
    events_meta = [
        {k: v.value for k, v in e.materialization.metadata.items()}
        for e in result.get_asset_materialization_events()
    ]
    assert [e["range_row_count"] for e in events_meta] == [40] * 4


def test_rows_outside_the_partition_abort_the_write(spark, hyper, database):
    @asset(partitions_def=DAYS, metadata={"partition_expr": "day"})
    def leaky() -> DataFrame:
        return spark.sql(FACT_SQL)

    run([facts_asset(spark, FACT_SQL)], database, partition_key="2024-01-02")
    with pytest.raises(SchemaMismatchError, match="fall outside the partition"):
        materialize([leaky], resources={"io_manager": io(database)}, partition_key="2024-01-02")
    assert query(hyper, database, 'SELECT COUNT(*) FROM "Extract".events') == [[10]]


def test_missing_partition_expr_is_a_clear_error(spark, database):
    @asset(partitions_def=DAYS)
    def nameless() -> DataFrame:
        return spark.sql("SELECT 1 AS x")

    with pytest.raises(ConfigurationError, match="partition_expr"):
        materialize([nameless], resources={"io_manager": io(database)}, partition_key="2024-01-02")


def test_static_partitions_use_in(spark, hyper, database):
    regions = StaticPartitionsDefinition(["north", "süd", "o'west"])

    @asset(partitions_def=regions, metadata={"partition_expr": "region"})
    def sales(context) -> DataFrame:
        key = context.partition_key.replace("'", "\\'")
        return spark.sql(f"SELECT '{key}' AS region, id FROM range(3)")

    for key in ["north", "süd", "o'west", "süd"]:
        run([sales], database, partition_key=key)
    rows = query(
        hyper, database, 'SELECT region, COUNT(*) FROM "Extract".sales GROUP BY 1 ORDER BY 1'
    )
    assert rows == [["north", 3], ["o'west", 3], ["süd", 3]]


def test_multi_partitions_replace_exactly_their_cell(spark, hyper, database):
    """A (day, region) partition owns the rows of that day AND that region, no more."""
    cells = MultiPartitionsDefinition(
        {"day": DAYS, "region": StaticPartitionsDefinition(["n", "s"])}
    )
    runs = {"n": 0, "s": 0}

    @asset(partitions_def=cells, metadata={"partition_expr": {"day": "day", "region": "region"}})
    def sales(context) -> DataFrame:
        key = context.partition_key.keys_by_dimension
        runs[key["region"]] += 1
        return spark.sql(
            f"SELECT id, DATE'{key['day']}' AS day, '{key['region']}' AS region, "
            f"{runs[key['region']]} AS version FROM range({3 + runs[key['region']]})"
        )

    for day, region in [("2024-01-02", "n"), ("2024-01-02", "s"), ("2024-01-03", "n")] * 2:
        result = run(
            [sales], database, partition_key=MultiPartitionKey({"day": day, "region": region})
        )
    assert query(
        hyper,
        database,
        "SELECT CAST(day AS TEXT), region, version, COUNT(*), COUNT(DISTINCT id) "
        'FROM "Extract".sales GROUP BY 1, 2, 3 ORDER BY 1, 2',
    ) == [["2024-01-02", "n", 3, 6, 6], ["2024-01-02", "s", 2, 5, 5], ["2024-01-03", "n", 4, 7, 7]]
    assert metadata(result, "sales")["dagster/partition_row_count"] == 7

    @asset(
        name="sales",
        partitions_def=cells,
        metadata={"partition_expr": {"day": "day", "region": "region"}},
    )
    def leaky() -> DataFrame:  # the right day, every region
        return spark.sql("SELECT 1L AS id, DATE'2024-01-02' AS day, 's' AS region, 9 AS version")

    with pytest.raises(SchemaMismatchError, match="fall outside the partition"):
        materialize(
            [leaky],
            resources={"io_manager": io(database)},
            partition_key=MultiPartitionKey({"day": "2024-01-02", "region": "n"}),
        )
    assert query(hyper, database, 'SELECT COUNT(*) FROM "Extract".sales') == [[18]]


def test_multi_partitions_need_an_expression_per_dimension(spark, database):
    cells = MultiPartitionsDefinition({"day": DAYS, "region": StaticPartitionsDefinition(["n"])})

    @asset(partitions_def=cells, metadata={"partition_expr": {"day": "day"}})
    def sales() -> DataFrame:
        return spark.sql("SELECT DATE'2024-01-02' AS day, 'n' AS region")

    with pytest.raises(ConfigurationError, match="no entry for partition dimension 'region'"):
        materialize(
            [sales],
            resources={"io_manager": io(database)},
            partition_key=MultiPartitionKey({"day": "2024-01-02", "region": "n"}),
        )


def test_full_refresh_replaces_and_may_change_schema_keeping_keys(spark, hyper, database):
    version = {"sql": "SELECT id, concat('n', id) AS name FROM range(3)"}

    @asset(metadata={"primary_key": ["id"]})
    def dim() -> DataFrame:
        return spark.sql(version["sql"])

    run([dim], database)
    run([dim], database)
    assert table_rows(hyper, database, '"Extract".dim') == [(0, "n0"), (1, "n1"), (2, "n2")]
    version["sql"] = "SELECT id, concat('m', id) AS name, id * 2 AS twice FROM range(2)"
    result = run([dim], database)
    assert table_rows(hyper, database, '"Extract".dim') == [(0, "m0", 0), (1, "m1", 2)]
    assert metadata(result, "dim")["dagster/row_count"] == 2
    keys = query(
        hyper,
        database,
        "SELECT con.contype, CAST(con.conkey AS TEXT) FROM pg_catalog.pg_constraint con "
        "JOIN pg_catalog.pg_class cl ON cl.oid = con.conrelid WHERE cl.relname = 'dim'",
    )
    assert keys == [["p", "[1]"]]


def test_failed_full_refresh_leaves_the_old_table(spark, hyper, database):
    sql = {"v": "SELECT id FROM range(3)"}

    @asset
    def dim() -> DataFrame:
        return spark.sql(sql["v"])

    run([dim], database)
    sql["v"] = (
        "SELECT CASE WHEN id = 5 THEN raise_error('upstream broke') ELSE id END AS id FROM range(9)"
    )
    with pytest.raises(Exception, match="upstream broke"):
        materialize([dim], resources={"io_manager": io(database)})
    assert table_rows(hyper, database, '"Extract".dim') == [(0,), (1,), (2,)]


def test_null_in_a_not_null_column_is_a_clear_error(spark, hyper, database):
    sql = {"v": "SELECT id FROM range(2)"}

    @asset(metadata={"write_mode": "append"})
    def strict() -> DataFrame:
        return spark.sql(sql["v"])

    run([strict], database)
    sql["v"] = "SELECT CAST(NULL AS BIGINT) AS id UNION ALL SELECT 7"
    with pytest.raises(NullInNotNullColumnError, match=r"\['id'\] of Extract.strict"):
        materialize([strict], resources={"io_manager": io(database)})
    assert table_rows(hyper, database, '"Extract".strict') == [(0,), (1,)]


def test_star_schema_keys_are_in_the_catalog(spark, hyper, database):
    names = {"schema": "Sales Data"}
    dim_name = 'Air "lines".ü'

    @asset(metadata={**names, "table": dim_name, "primary_key": ["carrier id"]})
    def airlines() -> DataFrame:
        return spark.sql(
            "SELECT * FROM VALUES ('AA', 'Ämerican'), ('B6', 'JetBlue') AS t(`carrier id`, name)"
        )

    @asset(
        deps=[airlines],
        metadata={**names, "foreign_keys": {"carrier": ["Sales Data", dim_name, "carrier id"]}},
    )
    def flights() -> DataFrame:
        return spark.sql("SELECT * FROM VALUES (1, 'AA'), (2, 'ZZ') AS t(id, carrier)")

    run([airlines, flights], database)
    run([airlines, flights], database)
    rows = query(
        hyper,
        database,
        "SELECT cl.relname, con.contype, ref.relname FROM pg_catalog.pg_constraint con "
        "JOIN pg_catalog.pg_class cl ON cl.oid = con.conrelid "
        "LEFT JOIN pg_catalog.pg_class ref ON ref.oid = con.confrelid ORDER BY 1",
    )
    assert sorted(tuple(r) for r in rows) == [(dim_name, "p", None), ("flights", "f", dim_name)]
    assert table_rows(hyper, database, '"Sales Data".flights') == [(1, "AA"), (2, "ZZ")]
    assert table_rows(hyper, database, '"Sales Data"."Air ""lines"".ü"') == [
        ("AA", "Ämerican"),
        ("B6", "JetBlue"),
    ]


def test_foreign_key_to_a_missing_table_is_added_by_its_write(spark, hyper, database):
    @asset(metadata={"foreign_keys": {"d": "Extract.dims.id"}})
    def facts() -> DataFrame:
        return spark.sql("SELECT 1 AS d")

    @asset(metadata={"primary_key": ["id"]})
    def dims() -> DataFrame:
        return spark.sql("SELECT 1 AS id")

    run([facts], database)
    assert query(hyper, database, "SELECT COUNT(*) FROM pg_catalog.pg_constraint") == [[0]]
    run([dims], database)
    assert query(hyper, database, "SELECT contype FROM pg_catalog.pg_constraint ORDER BY 1") == [
        ["f"],
        ["p"],
    ]


def test_schema_change_on_append_names_the_columns(spark, hyper, database):
    sql = {"v": "SELECT id, 'a' AS tag FROM range(2)"}

    @asset(metadata={"write_mode": "append"})
    def log() -> DataFrame:
        return spark.sql(sql["v"])

    run([log], database)
    run([log], database)
    sql["v"] = "SELECT id, 1.5 AS tag, 'x' AS extra FROM range(2)"
    with pytest.raises(SchemaMismatchError, match=r"'extra' is not in the stored table.*'tag' is"):
        materialize([log], resources={"io_manager": io(database)})
    assert query(hyper, database, 'SELECT COUNT(*) FROM "Extract".log') == [[4]]


def test_upsert_updates_matching_rows_and_inserts_the_rest(spark, hyper, database):
    rows = "(1, 'a', 'old'), (1, 'b', 'old'), (2, 'a', 'old')"
    sql = {"v": f"SELECT * FROM VALUES {rows} AS t(k1, k2, v)"}

    @asset(metadata={"write_mode": "upsert", "primary_key": ["k1", "k2"]})
    def accounts() -> DataFrame:
        return spark.sql(sql["v"])

    run([accounts], database)
    sql["v"] = "SELECT * FROM VALUES (1, 'b', 'new'), (3, 'a', 'new') AS t(k1, k2, v)"
    run([accounts], database)
    assert table_rows(hyper, database, '"Extract".accounts', "1, 2") == [
        (1, "a", "old"),
        (1, "b", "new"),
        (2, "a", "old"),
        (3, "a", "new"),
    ]


def test_upsert_without_primary_key_is_a_clear_error(spark, database):
    @asset(metadata={"write_mode": "upsert"})
    def nokey() -> DataFrame:
        return spark.sql("SELECT 1 AS x")

    with pytest.raises(ConfigurationError, match="primary_key"):
        materialize([nokey], resources={"io_manager": io(database)})


def test_empty_frames_create_and_empty_the_table(spark, hyper, database):
    sql = {"v": "SELECT id FROM range(3)"}

    @asset
    def maybe_empty() -> DataFrame:
        return spark.sql(sql["v"])

    run([maybe_empty], database)
    sql["v"] = "SELECT id FROM range(3) WHERE id < 0"
    result = run([maybe_empty], database)
    assert query(hyper, database, 'SELECT COUNT(*) FROM "Extract".maybe_empty') == [[0]]
    assert metadata(result, "maybe_empty")["dagster/row_count"] == 0
    other = database.parent / "fresh.hyper"
    run([maybe_empty], other)
    assert query(hyper, other, 'SELECT COUNT(*) FROM "Extract".maybe_empty') == [[0]]


def test_load_dataframe_partitions_and_selected_columns(spark, hyper, database):
    events = facts_asset(spark, FACT_SQL)
    for day in ("2024-01-02", "2024-01-03", "2024-01-04"):
        run([events], database, partition_key=day)
    seen = {}

    @asset(
        partitions_def=DAYS,
        ins={"events": AssetIn(key=["Extract", "events"], metadata={"columns": ["amount", "id"]})},
        metadata={"partition_expr": "day"},
    )
    def totals(events: DataFrame) -> DataFrame:
        seen["columns"] = events.columns
        seen["rows"] = events.count()
        return events.selectExpr("DATE'2024-01-03' AS day", "SUM(amount) AS total")

    run([events, totals], database, partition_key="2024-01-03", selection=[totals])
    assert seen == {"columns": ["amount", "id"], "rows": 10}
    expected = sum(i * 1.5 for i in range(90) if i % 9 == 2)
    assert query(hyper, database, 'SELECT total FROM "Extract".totals') == [[expected]]


def test_arrow_tables_in_and_out(spark, hyper, database):
    @asset
    def small() -> pa.Table:
        return pa.table({"name": ["ä", None, "c"], "n": pa.array([1, 2, None], pa.int64())})

    @asset
    def doubled(small: pa.Table) -> pa.Table:
        return small.append_column("twice", pc.multiply(small["n"], 2))

    run([small, doubled], database)
    rows = query(
        hyper, database, 'SELECT name, n, twice FROM "Extract".doubled ORDER BY n NULLS LAST'
    )
    assert rows == [["ä", 1, 2], [None, 2, 4], ["c", None, None]]


def test_complex_types_are_refused_with_the_column_named(spark, hyper, database):
    @asset
    def nested() -> DataFrame:
        return spark.sql("SELECT 1 AS id, array(1, 2) AS tags")

    with pytest.raises(UnsupportedTypeError, match=r"'tags'.*array<int>.*Explode"):
        materialize([nested], resources={"io_manager": io(database)})
    assert not database.exists()


PRICES = (
    "SELECT * FROM VALUES (1, CAST('9999999999.99' AS DECIMAL(12, 2))), "
    "(1, CAST('0.01' AS DECIMAL(12, 2))), (2, CAST('12.34' AS DECIMAL(12, 2))) AS t(k, price)"
)


def file_version(hyper, database: Path) -> int:
    return int(
        query(hyper, database, "SELECT database_version FROM pg_catalog.hyper_database")[0][0]
    )


def test_a_spark_sum_of_decimals_loads_with_default_settings(spark, hyper, database):
    @asset
    def totals() -> DataFrame:
        frame = spark.sql(PRICES).groupBy("k").agg(F.sum("price").alias("total"))
        assert frame.schema["total"].dataType.simpleString() == "decimal(22,2)"
        return frame

    result = run([totals], database)
    assert table_rows(hyper, database, '"Extract".totals') == [
        (1, Decimal("10000000000.00")),
        (2, Decimal("12.34")),
    ]
    assert file_version(hyper, database) == 3  # created at the version its columns need
    assert "database_version_upgraded" not in metadata(result, "totals")


def test_a_version_2_file_upgrades_itself_keeping_every_table_row_and_key(spark, hyper, database):
    @asset(metadata={"primary_key": ["k"]})
    def stores() -> DataFrame:
        return spark.sql("SELECT * FROM VALUES (1, 'north'), (2, 'south') AS t(k, name)")

    @asset(
        partitions_def=DAYS, metadata={"partition_expr": "day", "foreign_keys": {"k": "stores.k"}}
    )
    def prices() -> DataFrame:
        return spark.sql(PRICES).selectExpr("DATE'2024-01-02' AS day", "*")

    @asset(metadata={"foreign_keys": {"k": "stores.k"}})
    def totals() -> DataFrame:
        return spark.sql(PRICES).groupBy("k").agg(F.sum("price").alias("total"))

    run([stores], database)
    run([prices], database, partition_key="2024-01-02")
    assert file_version(hyper, database) == 2
    before = {t: table_rows(hyper, database, t) for t in ('"Extract".stores', '"Extract".prices')}
    Outbox(database).start_tracking()  # as after a first publish

    result = run([totals], database)
    assert metadata(result, "totals")["database_version_upgraded"] == "2 -> 3"
    assert file_version(hyper, database) == 3
    assert {t: table_rows(hyper, database, t) for t in before} == before
    assert table_rows(hyper, database, '"Extract".totals') == [
        (1, Decimal("10000000000.00")),
        (2, Decimal("12.34")),
    ]
    with Connection(hyper.endpoint, str(database)) as connection:
        catalog = Catalog(connection)
        keys = {str(t): catalog.keys(t) for t in catalog.tables()}
    assert keys['"Extract"."stores"'].primary_key == ("k",)
    for table in ('"Extract"."prices"', '"Extract"."totals"'):
        (fk,) = keys[table].foreign_keys
        assert (fk.columns, str(fk.ref_table), fk.ref_columns) == (("k",), str(STORES), ("k",))
    (change,) = Outbox(database).changes()
    assert (change.kind, change.table) == ("replace", TableName("Extract", "totals"))
    assert not list(database.parent.glob("*.before-upgrade"))


def test_a_write_refused_after_the_upgrade_leaves_the_file_as_it_was(spark, hyper, database):
    @asset(metadata={"primary_key": ["k"]})
    def stores() -> DataFrame:
        return spark.sql(f"SELECT DISTINCT k, CAST(1 AS DECIMAL(12, 2)) AS price FROM ({PRICES})")

    @asset(metadata={"foreign_keys": {"k": "stores.k"}})
    def sales() -> DataFrame:
        return spark.sql("SELECT 1 AS k")

    run([stores], database)
    run([sales], database)
    digest = hashlib.sha256(database.read_bytes()).hexdigest()
    sql_of_stores = f"SELECT k, SUM(price) AS price FROM ({PRICES}) GROUP BY k"

    @asset(name="stores", metadata={"primary_key": ["price"]})
    def wider_stores() -> DataFrame:
        return spark.sql(sql_of_stores)

    # New column types, and a primary key the reference from sales does not name: refused
    # after the file was upgraded.
    with pytest.raises(SchemaMismatchError, match=r"references \['k'\]"):
        materialize([wider_stores], resources={"io_manager": io(database)})
    assert hashlib.sha256(database.read_bytes()).hexdigest() == digest
    assert file_version(hyper, database) == 2


def test_a_version_cap_refuses_a_wide_decimal_before_spark_runs(spark, hyper, database):
    @asset
    def small() -> DataFrame:
        return spark.sql("SELECT CAST(1 AS DECIMAL(10, 2)) AS amount")

    @asset
    def totals() -> DataFrame:  # Spark fails if it computes a row
        return spark.sql(
            "SELECT SUM(CAST(IF(id >= 0, raise_error('Spark ran'), 1) AS DECIMAL(12, 2))) "
            "AS total FROM range(3)"
        )

    run([small], database)
    digest = hashlib.sha256(database.read_bytes()).hexdigest()
    capped = io(database, max_database_version=2)
    with pytest.raises(DatabaseVersionError) as info:
        materialize([totals], resources={"io_manager": capped})
    message = str(info.value)
    for part in ("'total'", "Extract.totals", "decimal(22,2)", "max_database_version=2"):
        assert part in message
    assert (info.value.column, info.value.needed, info.value.cap) == ("total", 3, 2)
    assert hashlib.sha256(database.read_bytes()).hexdigest() == digest


def test_loading_a_missing_table_or_file_is_a_clear_error(spark, database):
    @asset(key=["Extract", "ghost"])
    def ghost() -> DataFrame:
        return spark.sql("SELECT 1 AS x")

    @asset(ins={"ghost": AssetIn(key=["Extract", "ghost"])})
    def reader(ghost: DataFrame) -> DataFrame:
        return ghost

    with pytest.raises(TableNotFoundError, match="does not exist"):
        materialize([ghost, reader], resources={"io_manager": io(database)}, selection=[reader])

    @asset
    def other() -> DataFrame:
        return spark.sql("SELECT 1 AS x")

    run([other], database)
    with pytest.raises(TableNotFoundError, match=r"Extract.ghost is not in"):
        materialize([ghost, reader], resources={"io_manager": io(database)}, selection=[reader])


def test_a_key_naming_no_column_fails_before_any_row_is_written(spark, hyper, database):
    meta = {"write_mode": "append"}

    @asset(metadata=meta)
    def ledger() -> DataFrame:
        return spark.sql("SELECT id FROM range(3)")

    run([ledger], database)
    meta["primary_key"] = ["idd"]
    with pytest.raises(ConfigurationError, match=r"primary_key names column 'idd', which the"):
        materialize([ledger], resources={"io_manager": io(database)})
    assert query(hyper, database, 'SELECT COUNT(*) FROM "Extract".ledger') == [[3]]


def test_a_changed_spark_type_is_a_schema_change(spark, hyper, database):
    sql = {"v": "SELECT CAST(id AS TINYINT) AS n FROM range(3)"}
    seen = {}

    @asset(metadata={"write_mode": "append"})
    def counts() -> DataFrame:
        return spark.sql(sql["v"])

    @asset
    def replaced() -> DataFrame:
        return spark.sql(sql["v"])

    @asset
    def reader(replaced: DataFrame) -> None:
        seen["type"] = replaced.schema["n"].dataType.simpleString()
        seen["max"] = replaced.agg({"n": "max"}).collect()[0][0]

    run([counts, replaced], database)
    sql["v"] = "SELECT CAST(id * 1000 AS SMALLINT) AS n FROM range(3)"
    with pytest.raises(
        SchemaMismatchError, match=r"'n' is SMALLINT in the new rows but SMALLINT \(Spark tinyint\)"
    ):
        materialize([counts], resources={"io_manager": io(database)})
    assert query(hyper, database, 'SELECT COUNT(*) FROM "Extract".counts') == [[3]]
    run([replaced, reader], database)
    assert seen == {"type": "smallint", "max": 2000}


def test_partition_expr_and_loads_with_awkward_names(spark, hyper, database):
    @asset(
        partitions_def=DAYS,
        metadata={"partition_expr": "Event Day", "table": 'Ëvents "raw"'},
    )
    def awkward(context) -> DataFrame:
        day = context.partition_key
        return spark.sql(f"SELECT id AS `the.id`, DATE'{day}' AS `Event Day` FROM range(4)")

    seen = {}

    @asset(
        partitions_def=DAYS,
        ins={"awkward": AssetIn(metadata={"columns": ["the.id"]})},
        metadata={"partition_expr": "Event Day"},
    )
    def picked(context, awkward: DataFrame) -> DataFrame:
        seen["rows"] = sorted(r[0] for r in awkward.collect())
        return awkward.selectExpr(f"DATE'{context.partition_key}' AS `Event Day`")

    for day in ("2024-01-02", "2024-01-03"):
        run([awkward], database, partition_key=day)
    run([awkward, picked], database, partition_key="2024-01-03", selection=[picked])
    assert seen == {"rows": [0, 1, 2, 3]}
    assert query(
        hyper, database, 'SELECT COUNT(*) FROM "Extract"."Ëvents ""raw""" GROUP BY "Event Day"'
    ) == [[4], [4]]


def test_timestamptz_partitions_use_instants(hyper, database):
    new_york = DailyPartitionsDefinition(start_date="2024-01-01", timezone="America/New_York")

    @asset(partitions_def=new_york, metadata={"partition_expr": "at"})
    def pings(context) -> pa.Table:
        window = context.partition_time_window
        return pa.table(
            {
                "at": pa.array(
                    [window.start, window.end - dt.timedelta(seconds=1)],
                    pa.timestamp("us", tz="UTC"),
                )
            }
        )

    for day in ("2024-01-02", "2024-01-03", "2024-01-02"):
        run([pings], database, partition_key=day)
    assert query(
        hyper, database, 'SELECT CAST(MIN("at") AS TEXT), COUNT(*) FROM "Extract".pings'
    ) == [["2024-01-02 05:00:00+00", 4]]


def test_upsert_refuses_repeated_and_null_keys(spark, hyper, database):
    sql = {"v": "SELECT * FROM VALUES (1, 'a') AS t(k, v)"}

    @asset(metadata={"write_mode": "upsert", "primary_key": ["k"]})
    def users() -> DataFrame:
        return spark.sql(sql["v"])

    run([users], database)
    sql["v"] = "SELECT * FROM VALUES (1, 'b'), (1, 'c'), (CAST(NULL AS INT), 'd') AS t(k, v)"
    with pytest.raises(PrimaryKeyError, match=r"1 key.*more than once and 1 row") as refused:
        materialize([users], resources={"io_manager": io(database)})
    assert isinstance(refused.value, DataError) and not isinstance(
        refused.value, SchemaMismatchError
    )  # the rows are wrong, not the table's definition
    assert table_rows(hyper, database, '"Extract".users') == [(1, "a")]


@pytest.mark.parametrize("change_columns", [False, True])
def test_a_hyper_failure_mid_refresh_keeps_old_rows_columns_and_keys(
    spark, hyper, database, monkeypatch, change_columns
):
    sql = {"v": "SELECT id, 'old' AS tag FROM range(3)"}

    @asset(metadata={"primary_key": ["id"]})
    def dim() -> DataFrame:
        return spark.sql(sql["v"])

    run([dim], database)
    sql["v"] = (
        "SELECT id, 'new' AS tag" + (", 1 AS extra" if change_columns else "") + " FROM range(5)"
    )
    original = ingest._insert

    def insert_then_fail(connection, write, target, staged):
        original(connection, write, target, staged)
        connection.execute_command("SELECT 1/0")

    monkeypatch.setattr(ingest, "_insert", insert_then_fail)
    with pytest.raises(IngestError, match="division by zero"):
        materialize([dim], resources={"io_manager": io(database)})
    assert table_rows(hyper, database, '"Extract".dim') == [(0, "old"), (1, "old"), (2, "old")]
    assert query(
        hyper,
        database,
        "SELECT cl.relname FROM pg_catalog.pg_class cl JOIN pg_catalog.pg_namespace ns "
        "ON ns.oid = cl.relnamespace WHERE ns.nspname = 'Extract' AND cl.relkind = 'r'",
    ) == [["dim"]]
    assert query(hyper, database, "SELECT contype FROM pg_catalog.pg_constraint") == [["p"]]


def test_staging_is_empty_after_success_and_failure(spark, database):
    sql = {"v": "SELECT id FROM range(10)"}

    @asset
    def staged() -> DataFrame:
        return spark.sql(sql["v"])

    @asset
    def reader(staged: DataFrame) -> None:
        assert staged.count() == 10

    run([staged, reader], database)
    staging = database.parent / "staging"
    assert list(staging.iterdir()) == []
    sql["v"] = "SELECT CASE WHEN id = 3 THEN raise_error('boom') ELSE id END AS id FROM range(10)"
    with pytest.raises(Exception, match="boom"):
        materialize([staged], resources={"io_manager": io(database)})
    assert list(staging.iterdir()) == []


@pytest.mark.parametrize(("frame", "counts"), [("spark", 1), ("arrow", 0)])
def test_a_write_counts_its_staged_rows_once(spark, hyper, database, frame, counts):
    """Staged rows are counted once, when staged: Spark's parts from their footers (to
    check them against Spark's own count), an Arrow table by its length. The insert's
    check and the outbox's record of an append take that count, not the files again."""

    def rows(start: int, end: int) -> DataFrame | pa.Table:
        if frame == "spark":
            return spark.sql(f"SELECT id FROM range({start}, {end})")
        return pa.table({"id": pa.array(range(start, end), pa.int64())})

    batch = {"rows": rows(0, 3)}

    @asset(metadata={"write_mode": "append"})
    def log():
        return batch["rows"]

    run([log], database)
    Outbox(database).start_tracking()
    batch["rows"] = rows(3, 8)
    with staged_row_counts() as calls:
        run([log], database)
    assert len(calls) == counts, calls
    (change,) = Outbox(database).changes()
    assert (change.kind, change.rows, change.rows_before) == ("append", 5, 3)
    assert table_rows(hyper, database, '"Extract".log') == [(i,) for i in range(8)]
