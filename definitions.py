"""The nycflights13 demo code location: `dagster dev -f definitions.py` (or -w workspace.yaml).

SPARK_MASTER picks the Spark master (default local[*]).
"""

import os

from demo.definitions import build_definitions

defs = build_definitions(spark_master=os.environ.get("SPARK_MASTER", "local[*]"))
