"""Spark Connect's thin client: pyspark-client (no JVM, no py4j) and no dagster-pyspark,
against a Connect server of the newest Spark (this environment's), as Connect users run.

`make test` installs the client in .venv-client and names its Python in
HYPER_ASSETS_THIN_CLIENT_PYTHON; the job (tests/thin_client_job.py) runs there, and the
rows it wrote are read back here."""

from __future__ import annotations

import json
import os
import subprocess
from decimal import Decimal
from pathlib import Path

import pytest
from cluster import connect_server
from helpers import query

CLIENT = os.environ.get("HYPER_ASSETS_THIN_CLIENT_PYTHON")
JOB = Path(__file__).parent / "thin_client_job.py"

pytestmark = [
    pytest.mark.spark,
    pytest.mark.slow,
    pytest.mark.skipif(
        not CLIENT, reason="HYPER_ASSETS_THIN_CLIENT_PYTHON unset (make test sets it)"
    ),
]


def test_pyspark_client_writes_a_dimension_and_a_partitioned_fact_exactly(hyper, tmp_path):
    database = tmp_path / "thin.hyper"
    with connect_server(tmp_path) as url:
        done = subprocess.run(
            [os.path.abspath(str(CLIENT)), str(JOB), url, str(database)],
            capture_output=True,
            text=True,
            timeout=300,
            cwd=Path(__file__).parent,
        )
    assert done.returncode == 0, done.stderr[-3000:]
    said = json.loads(done.stdout.strip().splitlines()[-1])
    assert "pyspark-client" in said["installed"] and "pyspark" not in said["installed"]
    assert not said["py4j"] and not said["dagster_pyspark"]
    assert said["runs"] == [True, True, True, True]

    assert query(hyper, database, 'SELECT * FROM "Extract"."stores" ORDER BY 1') == [
        [1, "store 1"],
        [2, "store 2"],
        [3, "store 3"],
    ]
    sales = query(
        hyper,
        database,
        'SELECT CAST(day AS TEXT), store_id, amount FROM "Extract"."sales" ORDER BY 1, 3',
    )
    expected = [
        [f"2024-01-0{d}", (i % 3) + 1, Decimal(i) * Decimal("1.25")]
        for d in (1, 2)
        for i in range(10)
    ]
    assert sales == expected
    assert query(hyper, database, 'SELECT * FROM "Extract"."store_names" ORDER BY 1') == [
        [1, "STORE 1"],
        [2, "STORE 2"],
        [3, "STORE 3"],
    ]
