"""The nycflights13 demo: a star schema of flights in one .hyper file, loaded day by day.

Dagster warns, at every load of the code location, about APIs the demo chose on purpose:
`backfill_policy` and the column-schema checks are beta, and the partition freshness
checks are superseded by `FreshnessPolicy`, which measures wall-clock age while the demo
replays 2013. PySpark warns that it does not fully support pandas 3 (the demo's Spark
code uses no pandas). These are not the demo's to fix, so they are filtered here, once;
any other warning still shows.
"""

import warnings

from dagster import BetaWarning, SupersessionWarning

warnings.filterwarnings("ignore", category=BetaWarning)
warnings.filterwarnings("ignore", category=SupersessionWarning, module=r"demo\.")
warnings.filterwarnings("ignore", "PySpark does not yet fully support pandas", FutureWarning)
