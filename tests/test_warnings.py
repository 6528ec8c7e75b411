"""The library's own code paths print no warning a user cannot act on."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

PANDAS_3 = "PySpark does not yet fully support pandas"

# A fresh interpreter: pytest's own warning filters (pyproject.toml) play no part.
SCRIPT = textwrap.dedent(
    """
    import sys
    import dagster as dg
    from dagster_pyspark import PySparkResource
    import hyper_assets as ha

    @dg.asset
    def numbers(pyspark: PySparkResource):
        return pyspark.spark_session.range(3).selectExpr("id", "CAST(id AS STRING) AS name")

    resources = {
        "io_manager": ha.HyperIOManager(database=sys.argv[1]),
        "pyspark": PySparkResource(spark_config={"spark.master": "local[1]"}),
    }
    assert dg.materialize([numbers], resources=resources).success
    print("written", file=sys.stderr, flush=True)
    from pyspark.sql import SparkSession
    SparkSession.getActiveSession().range(3).toPandas()  # the caller's own use of pandas
    """
)


def test_pandas_3_warning_only_for_the_callers_own_pandas(tmp_path: Path):
    completed = subprocess.run(
        [sys.executable, "-W", "default", "-c", SCRIPT, str(tmp_path / "a.hyper")],
        capture_output=True,
        text=True,
        timeout=300,
        env=os.environ | {"SPARK_LOCAL_IP": "127.0.0.1"},
    )
    assert completed.returncode == 0, completed.stderr
    ours, callers = completed.stderr.split("\nwritten\n")
    assert PANDAS_3 not in ours  # session start, write: nothing
    if _pyspark_warns():  # PySpark 4.1 (the lowest allowed) has no such warning
        assert PANDAS_3 in callers  # toPandas still warns


def _pyspark_warns() -> bool:
    import pyspark.sql.pandas.utils as utils

    return PANDAS_3 in Path(utils.__file__).read_text()
