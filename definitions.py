"""The nycflights13 demo code location: `dagster dev -w workspace.yaml`.

Environment: SPARK_MASTER (default local[*]), DEMO_LANDING_DIR (data/landing),
DEMO_DATABASE (data/flights.hyper), DEMO_LAG_CRON (when the published copy's lag is
checked, */15 * * * *), DEMO_SENSOR_INTERVAL (the landing sensors' and after_facts'
minimum seconds between ticks, 30; tests lower it); the publish goes to
TABLEAU_SERVER_URL (the local emulator, http://127.0.0.1:8765), site TABLEAU_SITE (its
content URL; the emulator's "flights"), project TABLEAU_PROJECT ("Default"; a path such
as "Sales/EMEA" names a nested project) as token TABLEAU_TOKEN_NAME ("demo") with secret
TABLEAU_TOKEN_SECRET.
"""

import os

from dagster import EnvVar

from demo.definitions import EMULATOR_SITE, EMULATOR_TOKEN, EMULATOR_URL, build_definitions
from hyper_assets import TableauServerResource, TokenSignIn

defs = build_definitions(
    landing=os.environ.get("DEMO_LANDING_DIR", "data/landing"),
    database=os.environ.get("DEMO_DATABASE", "data/flights.hyper"),
    spark_master=os.environ.get("SPARK_MASTER", "local[*]"),
    lag_cron=os.environ.get("DEMO_LAG_CRON", "*/15 * * * *"),
    sensor_interval=int(os.environ.get("DEMO_SENSOR_INTERVAL", "30")),
    tableau=TableauServerResource(
        server_url=os.environ.get("TABLEAU_SERVER_URL", EMULATOR_URL),
        site=os.environ.get("TABLEAU_SITE", EMULATOR_SITE),
        sign_in=TokenSignIn(
            name=os.environ.get("TABLEAU_TOKEN_NAME", EMULATOR_TOKEN),
            secret=EnvVar("TABLEAU_TOKEN_SECRET"),
        ),
    ),
)
