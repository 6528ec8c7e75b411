"""The TPC-H tables as a star schema of Dagster assets, read from tpchgen-cli's Parquet.

`orders` and `lineitem` are the facts, partitioned by month of the order date (1992-01 to
1998-08; a single-run backfill loads any range in one run); `lineitem` gets the order
date from `orders` as column `l_orderdate`. The other six tables are dimensions, fully
refreshed. Primary and foreign keys become Hyper's ASSUMED keys, so Tableau relates the
tables itself; every asset depends on the tables its foreign keys reference.
"""

from pathlib import Path

import dagster as dg
from dagster_pyspark import PySparkResource
from pyspark.sql import DataFrame, functions as F

MONTHS = dg.MonthlyPartitionsDefinition(start_date="1992-01-01", end_date="1998-09-01")


class TpchParquet(dg.ConfigurableResource):
    """Where tpchgen-cli wrote `<table>.parquet` (`tpch.generate.generate`)."""

    directory: str

    def read(self, pyspark: PySparkResource, table: str) -> DataFrame:
        return pyspark.spark_session.read.parquet(str(Path(self.directory) / f"{table}.parquet"))


def _dimension(
    name: str, primary_key: list[str], foreign_keys: dict[str, str]
) -> dg.AssetsDefinition:
    @dg.asset(
        name=name,
        group_name="tpch_dimensions",
        kinds={"spark", "hyper"},
        deps=sorted({ref.split(".")[0] for ref in foreign_keys.values()}),
        metadata={"primary_key": primary_key, "foreign_keys": foreign_keys},
        description=f"TPC-H {name}: full refresh.",
    )
    def dimension(pyspark: PySparkResource, tpch: TpchParquet) -> DataFrame:
        return tpch.read(pyspark, name)

    return dimension


region = _dimension("region", ["r_regionkey"], {})
nation = _dimension("nation", ["n_nationkey"], {"n_regionkey": "region.r_regionkey"})
supplier = _dimension("supplier", ["s_suppkey"], {"s_nationkey": "nation.n_nationkey"})
customer = _dimension("customer", ["c_custkey"], {"c_nationkey": "nation.n_nationkey"})
part = _dimension("part", ["p_partkey"], {})
partsupp = _dimension(
    "partsupp",
    ["ps_partkey", "ps_suppkey"],
    {"ps_partkey": "part.p_partkey", "ps_suppkey": "supplier.s_suppkey"},
)
DIMENSIONS = [region, nation, supplier, customer, part, partsupp]


def _in_window(frame: DataFrame, column: str, context: dg.AssetExecutionContext) -> DataFrame:
    window = context.partition_time_window
    day = F.col(column)
    return frame.where((day >= F.lit(window.start.date())) & (day < F.lit(window.end.date())))


@dg.asset(
    partitions_def=MONTHS,
    backfill_policy=dg.BackfillPolicy.single_run(),
    group_name="tpch_facts",
    kinds={"spark", "hyper"},
    deps=[customer],
    metadata={
        "partition_expr": "o_orderdate",
        "primary_key": ["o_orderkey"],
        "foreign_keys": {"o_custkey": "customer.c_custkey"},
    },
)
def orders(
    context: dg.AssetExecutionContext, pyspark: PySparkResource, tpch: TpchParquet
) -> DataFrame:
    """TPC-H orders of the month(s) being materialised."""
    return _in_window(tpch.read(pyspark, "orders"), "o_orderdate", context)


@dg.asset(
    partitions_def=MONTHS,
    backfill_policy=dg.BackfillPolicy.single_run(),
    group_name="tpch_facts",
    kinds={"spark", "hyper"},
    deps=[orders, part, supplier],
    metadata={
        "partition_expr": "l_orderdate",
        "primary_key": ["l_orderkey", "l_linenumber"],
        "foreign_keys": {
            "l_orderkey": "orders.o_orderkey",
            "l_partkey": "part.p_partkey",
            "l_suppkey": "supplier.s_suppkey",
        },
    },
)
def lineitem(
    context: dg.AssetExecutionContext, pyspark: PySparkResource, tpch: TpchParquet
) -> DataFrame:
    """TPC-H line items of the orders of the month(s), with their order's date."""
    dates = tpch.read(pyspark, "orders").select(
        F.col("o_orderkey").alias("l_orderkey"), F.col("o_orderdate").alias("l_orderdate")
    )
    dates = _in_window(dates, "l_orderdate", context)
    return tpch.read(pyspark, "lineitem").join(dates, "l_orderkey")


FACTS = [orders, lineitem]
ASSETS = [*DIMENSIONS, *FACTS]
