"""TPC-H at scale factor 0.01 through HyperIOManager: every table read back from the file."""

from __future__ import annotations

from decimal import Decimal
from pathlib import Path

import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest
from dagster import AssetSelection, materialize
from dagster_pyspark import PySparkResource
from helpers import query
from tableauhyperapi import Connection, TableName

from hyper_assets import HyperIOManager
from hyper_assets._engine.tables import Catalog, ForeignKey
from tpch import ASSETS, DIMENSIONS, FACTS, MONTHS, TABLES, TpchParquet, generate

SCALE_FACTOR = 0.01


@pytest.mark.slow
def test_tpch_star_schema_holds_every_row(spark, hyper, tmp_path: Path) -> None:
    source = tmp_path / "parquet"
    counts = generate(SCALE_FACTOR, source)
    database = tmp_path / "tpch.hyper"
    resources = {
        "io_manager": HyperIOManager(
            database=str(database),
            staging_dir=str(tmp_path / "staging"),
        ),
        "pyspark": PySparkResource(spark_config={}),  # the test session's local Spark
        "tpch": TpchParquet(directory=str(source)),
    }
    dimensions = AssetSelection.assets(*DIMENSIONS)
    assert materialize(ASSETS, selection=dimensions, resources=resources).success
    months = MONTHS.get_partition_keys()
    assert (len(months), months[0], months[-1]) == (80, "1992-01-01", "1998-08-01")
    backfill = {
        "dagster/asset_partition_range_start": months[0],
        "dagster/asset_partition_range_end": months[-1],
    }
    result = materialize(
        ASSETS, selection=AssetSelection.assets(*FACTS), resources=resources, tags=backfill
    )
    assert result.success
    assert {e.asset_key.path[-1] for e in result.get_asset_materialization_events()} == {
        "orders",
        "lineitem",
    }

    stored = {
        t: query(hyper, database, f'SELECT COUNT(*) FROM "Extract"."{t}"')[0][0] for t in TABLES
    }
    assert stored == counts
    assert counts["lineitem"] > 60_000

    # Content: the sum of a decimal column, each line item's order date, all 80 months.
    price = pc.sum(pq.read_table(source / "lineitem.parquet", columns=["l_extendedprice"])[0])
    assert query(hyper, database, 'SELECT SUM(l_extendedprice) FROM "Extract".lineitem') == [
        [Decimal(str(price.as_py()))]
    ]
    assert query(
        hyper,
        database,
        "SELECT COUNT(*), COUNT(DISTINCT date_trunc('month', l_orderdate)) "
        'FROM "Extract".lineitem JOIN "Extract".orders '
        "ON o_orderkey = l_orderkey AND o_orderdate = l_orderdate",
    ) == [[counts["lineitem"], 80]]

    with Connection(hyper.endpoint, str(database)) as connection:
        keys = Catalog(connection).keys(TableName("Extract", "lineitem"))
    assert keys.primary_key == ("l_orderkey", "l_linenumber")
    assert set(keys.foreign_keys) == {
        ForeignKey((column,), TableName("Extract", table), (ref,))
        for column, table, ref in [
            ("l_orderkey", "orders", "o_orderkey"),
            ("l_partkey", "part", "p_partkey"),
            ("l_suppkey", "supplier", "s_suppkey"),
        ]
    }
