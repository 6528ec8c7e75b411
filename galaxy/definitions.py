"""The galaxy's code location: `dagster dev -m galaxy.definitions`.

It is not in the repository's workspace.yaml, which serves the demo alone (`make ui`).

Environment: TPCH_PARQUET (where `tpch.generate` wrote the Parquet, data/tpch),
GALAXY_DATABASE (the `.hyper` file, data/tpch.hyper), SPARK_MASTER (local[*]); the publish
goes to TABLEAU_SERVER_URL (http://127.0.0.1:8765, where `python -m hyper_assets.emulator
--port 8765 --data-dir DIR --token galaxy=SECRET` serves a local emulator), site
TABLEAU_SITE (its content URL; "" is the default site), project TABLEAU_PROJECT
("Default") as token TABLEAU_TOKEN_NAME ("galaxy") with secret TABLEAU_TOKEN_SECRET.
"""

import os

import dagster as dg
from dagster_pyspark import PySparkResource

from galaxy.datasources import DATASOURCES
from hyper_assets import HyperIOManager, TableauServerResource, TokenSignIn
from tpch import ASSETS, DIMENSIONS, FACTS, TpchParquet


def build_definitions(
    *,
    io_manager: HyperIOManager,
    pyspark: PySparkResource,
    tpch: TpchParquet,
    tableau: TableauServerResource,
) -> dg.Definitions:
    """The galaxy's tables and data sources, with a job for each way they are written.

    `refresh_job` rewrites the unpartitioned tables whole (`partsupp`, the supply fact,
    among them); `monthly_job` writes months of `orders` and `lineitem` (a range in one
    run); `publish_job` sends each data source what changed.
    """
    return dg.Definitions(
        assets=[*ASSETS, *DATASOURCES],
        jobs=[
            dg.define_asset_job("refresh_job", dg.AssetSelection.assets(*DIMENSIONS)),
            dg.define_asset_job("monthly_job", dg.AssetSelection.assets(*FACTS)),
            dg.define_asset_job("publish_job", dg.AssetSelection.assets(*DATASOURCES)),
        ],
        # One process per run: Spark starts once, and local Spark parallelises in the step.
        executor=dg.in_process_executor,
        resources={"io_manager": io_manager, "pyspark": pyspark, "tpch": tpch, "tableau": tableau},
    )


defs = build_definitions(
    io_manager=HyperIOManager(database=os.environ.get("GALAXY_DATABASE", "data/tpch.hyper")),
    pyspark=PySparkResource(
        spark_config={"spark.master": os.environ.get("SPARK_MASTER", "local[*]")}
    ),
    tpch=TpchParquet(directory=os.environ.get("TPCH_PARQUET", "data/tpch")),
    tableau=TableauServerResource(
        server_url=os.environ.get("TABLEAU_SERVER_URL", "http://127.0.0.1:8765"),
        site=os.environ.get("TABLEAU_SITE", ""),
        sign_in=TokenSignIn(
            name=os.environ.get("TABLEAU_TOKEN_NAME", "galaxy"),
            secret=dg.EnvVar("TABLEAU_TOKEN_SECRET"),
        ),
    ),
)
