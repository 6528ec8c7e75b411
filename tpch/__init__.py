"""TPC-H as a star schema in one `.hyper` file: generated data, assets and their resources.

from tpch import ASSETS, TpchParquet, generate

generate(0.01, Path("data/tpch"))  # tpchgen-cli's Parquet, one file per table
dg.materialize(ASSETS, resources={"tpch": TpchParquet(directory="data/tpch"), ...})
"""

from tpch.assets import ASSETS, DIMENSIONS, FACTS, MONTHS, TpchParquet
from tpch.generate import TABLES, generate

__all__ = ["ASSETS", "DIMENSIONS", "FACTS", "MONTHS", "TABLES", "TpchParquet", "generate"]
