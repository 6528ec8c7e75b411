"""Steps that the separated-home tests run, each in a process (and mount namespace) of its own.

`python home_job.py write DAY LABEL`: materialises partition DAY of `sales` (rows tagged
LABEL, NULL for none); `python home_job.py append LABEL`: appends rows tagged LABEL to `events`;
`python home_job.py summary`: materialises `per_day`, which loads every day of `sales`;
`python home_job.py check`: runs `sales`' not-null check on `label`;
`python home_job.py publish`: publishes the file as data source "Shop" to the
server at `HOME_TEST_TABLEAU` (token "ci", secret "secret"). The home is `HOME_TEST_URI`
(an s3:// URI; the store from the AWS environment), the lease lasts `HOME_TEST_LEASE`
seconds. With `HOME_TEST_PAUSE=<key prefix>`, the step prints `PAUSED <key>` before its
first put of an object under that prefix and waits for a line on stdin (the test kills or
stops it meanwhile); with `HOME_TEST_PAUSE_AFTER_UPDATE=1` too, only before the first such
put after the publish started a job on the server (it sent an update, but has not saved
that it did). The last line printed is `RESULT {"success": ..., "error": ...}` (a
publish adds its kind and the rows it sent, a check whether it passed and its metadata).
"""

from __future__ import annotations

import json
import os
import sys
from datetime import date

import obstore
import pyarrow as pa
from dagster import AssetSelection, DailyPartitionsDefinition, asset, materialize

from hyper_assets import (
    HyperIOManager,
    TableauServerResource,
    TokenSignIn,
    not_null_check,
    tableau_datasource_asset,
)
from hyper_assets._home.home import HomeSettings
from hyper_assets.errors import HyperAssetsError
from hyper_assets.tableau._rest.client import TableauClient

DAYS = DailyPartitionsDefinition(start_date="2024-01-01", end_date="2024-01-10")
ROWS = 1000


@asset(partitions_def=DAYS, metadata={"partition_expr": "day"})
def sales(context) -> pa.Table:
    day = date.fromisoformat(context.partition_key)
    label = os.environ["HOME_TEST_LABEL"]
    labels = pa.array([None if label == "NULL" else label] * ROWS, pa.string())
    return pa.table({"day": [day] * ROWS, "id": pa.array(range(ROWS), pa.int64()), "label": labels})


@asset
def per_day(sales: pa.Table) -> pa.Table:
    return sales.group_by("day").aggregate([("id", "count")]).sort_by("day")


@asset(metadata={"write_mode": "append"})
def events() -> pa.Table:
    label = os.environ["HOME_TEST_LABEL"]
    return pa.table({"id": pa.array(range(ROWS), pa.int64()), "label": [label] * ROWS})


published = tableau_datasource_asset(datasource="Shop", project="Default", deps=[sales])
label_check = not_null_check(sales, ["label"])


def _pause_before(prefix: str, after_update: bool) -> None:
    """Pauses before the first upload under `prefix` (a generation has several files), or
    with `after_update` the first one after the server was sent an update."""
    put, update_data = obstore.put, TableauClient.update_data
    updated: list[object] = []
    paused: list[str] = []

    def updating(*args, **kwargs):
        job = update_data(*args, **kwargs)
        updated.append(job)
        return job

    def pausing(store, key, *args, **kwargs):
        if key.startswith(prefix) and not paused and (updated or not after_update):
            paused.append(key)
            print(f"PAUSED {key}", flush=True)
            sys.stdin.readline()
        return put(store, key, *args, **kwargs)

    obstore.put = pausing
    TableauClient.update_data = updating


def main(action: str, *args: str) -> None:
    if os.environ.get("HOME_TEST_PAUSE"):
        _pause_before(
            os.environ["HOME_TEST_PAUSE"], bool(os.environ.get("HOME_TEST_PAUSE_AFTER_UPDATE"))
        )
    io_manager = HyperIOManager(
        database=os.environ["HOME_TEST_URI"],
        home_settings=HomeSettings(lease_seconds=float(os.environ["HOME_TEST_LEASE"])),
    )
    resources: dict[str, object] = {"io_manager": io_manager}
    if action == "write":
        day, label = args
        os.environ["HOME_TEST_LABEL"] = label
        selection, partition = [sales], day
    elif action == "append":
        os.environ["HOME_TEST_LABEL"] = args[0]
        selection, partition = [events], None
    elif action == "check":
        selection, partition = AssetSelection.checks(label_check), None
    elif action == "publish":
        resources["tableau"] = TableauServerResource(
            server_url=os.environ["HOME_TEST_TABLEAU"],
            sign_in=TokenSignIn(name="ci", secret="secret"),
        )
        selection, partition = [published], None
    else:
        selection, partition = [per_day], None
    try:
        result = materialize(
            [sales, per_day, events, label_check, *([published] if action == "publish" else [])],
            selection=selection,
            partition_key=partition,
            resources=resources,
            raise_on_error=True,
        )
        outcome = {"success": result.success, "error": None}
        if action == "publish":
            (event,) = result.asset_materializations_for_node(published.op.name)
            outcome["publish"] = event.metadata["publish"].value
            outcome["rows_sent"] = event.metadata["rows_sent"].value
        if action == "check":
            (evaluation,) = result.get_asset_check_evaluations()
            outcome["passed"] = evaluation.passed
            outcome["metadata"] = {k: v.value for k, v in evaluation.metadata.items()}
    except Exception as error:
        while not isinstance(error, HyperAssetsError) and error.__cause__ is not None:
            error = error.__cause__  # Dagster's wrapping, down to the library's error
        outcome = {"success": False, "error": f"{type(error).__name__}: {error}"}
    print("RESULT " + json.dumps(outcome), flush=True)


if __name__ == "__main__":
    main(*sys.argv[1:])
