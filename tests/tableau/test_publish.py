"""The publish op end to end: HyperIOManager writes, the emulator over loopback receives.

Assets return Arrow tables (the IO manager's Arrow path shares the Hyper side with the
Spark path, and keeps these tests fast). After every publish, every table of the
emulator's copy must equal the local file's, row for row.

The file is one star, as Tableau takes it: `sales` references `products` and `events`.
`stock` references `products` too, so a file holding it is two stars: its tests publish
it as a data source of its own.
"""

import json
import logging
import os
import random
import re
import signal
import subprocess
import sys
import threading
import time
from datetime import date
from decimal import Decimal
from typing import Any

import dagster as dg
import pyarrow as pa
import pytest
import tableauserverclient as TSC
from sales_world import (
    NAME,
    PROJECT,
    SITE,
    TOKEN_NAME,
    TOKEN_SECRET,
    Column,
    Setup,
    datasource_dir,
    definitions,
    published_base,
    some_changes,
)
from tableauhyperapi import Connection, SqlType, TableName, escape_name

from hyper_assets import (
    HyperResource,
    VersionUpgrade,
    compact,
    upgrade_database,
)
from hyper_assets._engine.tables import Catalog
from hyper_assets._engine.types import sql_name
from hyper_assets._rows.outbox import Outbox
from hyper_assets.errors import (
    AmbiguousProjectError,
    ConfigurationError,
    CorruptFileError,
    DataModelError,
    HyperFileError,
    PublishError,
    PublishLockedError,
    TableauConnectionError,
)
from hyper_assets.tableau._dagster.assets import build_publish_op
from hyper_assets.tableau._dagster.resource import TableauServerResource, TokenSignIn
from hyper_assets.tableau._publish.publish import Publisher


def test_first_publish_sends_the_whole_file_then_only_changes(setup: Setup) -> None:
    for asset in ("products", "events"):
        setup.world.appended = [(1, "a")]
        setup.write(asset)
    setup.write("sales", "2024-03-01")
    first = setup.publish()
    assert first["publish"] == "full"
    assert first["payload_bytes"] == setup.database.stat().st_size
    # One row per table and action; the request's bytes once, not on every row.
    assert {tuple(r.data) for r in first["sent"].records} == {("table", "action", "rows")}
    setup.assert_equal()

    setup.world.seed = 1
    setup.write("sales", "2024-03-01")  # rewritten twice: sent once
    setup.write("sales", "2024-03-01")
    setup.write("sales", "2024-03-02")
    setup.world.appended = [(2, "b"), (3, "c")]
    setup.write("events")
    setup.world.products = [(1, "green tea"), (2, "cake"), (3, "scone")]
    setup.write("products")
    second = setup.publish()
    assert second["publish"] == "update"
    assert second["batches"] == 1
    actions = sorted((r["table"], r["action"], r["rows"]) for r in second["rows"])
    assert actions == [
        ("Extract.events", "insert", 2),
        ("Extract.products", "replace", 3),
        ("Extract.sales", "window", 5),
        ("Extract.sales", "window", 5),
    ]
    setup.assert_equal()
    assert not Outbox(setup.database).changes()

    third = setup.publish()
    assert third["publish"] == "none" and third["batches"] == 0

    remote = setup.emulator.site_dir(SITE) / f"{NAME}.hyper"
    with Connection(setup.hyper.endpoint, remote) as connection:
        connection.execute_command('DELETE FROM "Extract"."events" WHERE "id" = 3')
    with pytest.raises(AssertionError, match=r"Extract\.events differs"):
        setup.assert_equal()  # the comparison sees a missing row


def test_rolling_window_delete_and_a_backfill_range(setup: Setup) -> None:
    for day in ("2024-03-01", "2024-03-02", "2024-03-03"):
        setup.write("sales", day)
    setup.publish()
    resources = setup.resources()
    assets, _ = definitions(setup.world, setup.database, resources["tableau"])
    io_manager = resources["io_manager"]
    with pytest.raises(ConfigurationError, match="not consecutive"):  # 03-02 would go too
        io_manager.delete_partitions(assets["sales"], ["2024-03-01", "2024-03-03"])
    deleted = io_manager.delete_partitions(assets["sales"], ["2024-03-01"])
    io_manager.hyper.close()
    assert deleted == 5
    setup.write("sales", "2024-03-04")
    update = setup.publish()
    assert sorted((r["action"], r["rows"]) for r in update["rows"]) == [
        ("window", 0),
        ("window", 5),
    ]
    setup.assert_equal()
    remote = setup.files.read(setup.emulator.site_dir(SITE) / f"{NAME}.hyper")["Extract.sales"]
    assert {row[0] for row in remote} == {date(2024, 3, d) for d in (2, 3, 4)}


def test_a_payload_above_the_limit_is_split_into_batches(setup: Setup) -> None:
    setup.publish_options = {"max_payload_bytes": 200_000}
    setup.world.appended = [(-1, "first")]
    setup.write("events")
    assert setup.publish()["publish"] == "full"
    setup.world.appended = [(i, f"event number {i} " * 3) for i in range(60_000)]
    setup.write("events")
    update = setup.publish()
    assert update["batches"] >= 3
    assert sum(r["rows"] for r in update["rows"]) == 60_000
    setup.assert_equal()

    setup.write("sales", "2024-03-01")  # its key to products waits for that table
    assert setup.publish()["reason"] == "table Extract.sales is new"
    setup.assert_equal()


def plan_batches(setup: Setup) -> list[dict[str, Any]]:
    """The batches of the saved plan, as saved; [] without a plan."""
    path = datasource_dir(setup) / "plan" / "plan.json"
    return json.loads(path.read_text())["batches"] if path.exists() else []


def half_sent(setup: Setup) -> None:
    """A saved plan whose batch 1 the server applied and whose batch 2 it refused (503)."""
    setup.publish_options = {"max_payload_bytes": 200_000}
    published_base(setup)
    setup.world.appended = [(i, f"event number {i} " * 3) for i in range(1, 20_001)]
    setup.write("events")
    faults = setup.emulator.faults
    faults.pause_jobs()
    failures: list[BaseException] = []

    def publish() -> None:
        try:
            setup.publish()
        except Exception as err:  # checked below
            failures.append(err)

    thread = threading.Thread(target=publish)
    thread.start()
    wait_for(lambda: plan_batches(setup) and plan_batches(setup)[0]["job_id"], "batch 1 sent")
    faults.fail_requests("PATCH", r"/data$", status=503, count=10**6)
    faults.resume_jobs()
    thread.join()
    faults.clear()
    assert failures, "the publish should have stopped at batch 2"
    assert [b["done"] for b in plan_batches(setup)][:2] == [True, False]


def test_a_refused_publish_keeps_an_unfinished_plan(setup: Setup) -> None:
    """Refusing to overwrite a data source not ours changes nothing: batch 1 is not resent."""
    half_sent(setup)
    saved = plan_batches(setup)
    other = setup.database.with_name("other.hyper")
    setup.files.create(other, {("Extract", "t"): ([Column("x", SqlType.int())], [(1,)])})
    with TableauServerResource(
        server_url=setup.emulator.url, sign_in=TokenSignIn(name=TOKEN_NAME, secret=TOKEN_SECRET)
    ).client() as client:
        client.publish_file(other, "Other", client.project(PROJECT).id, overwrite=True)
        publisher = Publisher(setup.database, HyperResource(), client, "Other", PROJECT)
        with pytest.raises(PublishError, match="exists but was not published"):
            publisher.publish()
    assert plan_batches(setup) == saved
    assert setup.publish()["publish"] == "update"
    setup.assert_equal()  # the 60,000 appended rows arrived once


def test_a_column_made_nullable_is_published_whole(setup: Setup) -> None:
    """NOT NULL -> nullable is a new table shape: a replace into the old one would fail."""
    setup.world.names_required = True
    setup.write("products")
    assert setup.publish()["publish"] == "full"
    setup.world.names_required = False
    setup.world.products = [(1, "tea"), (2, None)]
    setup.write("products")
    again = setup.publish()
    assert (again["publish"], again["reason"]) == (
        "full",
        "table Extract.products changed its columns, nullability or keys",
    )
    setup.assert_equal()
    assert setup.publish()["publish"] == "none"


def test_a_column_added_to_an_append_table_is_published_whole(setup: Setup) -> None:
    """Action batches cannot add a column: the publish after one sends the file, and says why."""
    setup.world.appended = [(1, "a")]
    setup.write("events")
    assert setup.publish()["publish"] == "full"
    setup.world.appended, setup.world.event_notes = [(2, "b")], True
    setup.write("events")
    again = setup.publish()
    assert (again["publish"], again["reason"]) == (
        "full",
        "table Extract.events gained column(s) note, and action batches cannot change a "
        "table's shape",
    )
    setup.assert_equal()
    remote = setup.files.read(setup.remote())["Extract.events"]
    assert sorted(remote) == [(1, "a", None), (2, "b", "b!")]
    assert setup.publish()["publish"] == "none"


def test_geography_is_published_and_upserted_by_action_batches(setup: Setup) -> None:
    setup.world.airports = [("JFK", "POINT(-73.7789 40.6397)"), ("LGA", None)]
    setup.write("airports")
    assert setup.publish()["publish"] == "full"
    setup.world.airports = [("LGA", "POINT(-73.872 40.7769)"), ("EWR", "POINT(-74.1687 40.6925)")]
    setup.write("airports")
    update = setup.publish()
    assert (update["publish"], update["rows"]) == (
        "update",
        [{"table": "Extract.airports", "action": "upsert", "rows": 2}],
    )
    sql = 'SELECT faa, CAST(location AS TEXT) FROM "Extract".airports ORDER BY faa'
    for path in (setup.database, setup.remote()):
        with Connection(setup.hyper.endpoint, str(path)) as connection:
            assert connection.execute_list_query(sql) == [
                ["EWR", "POINT(-74.1687000 40.6925000)"],
                ["JFK", "POINT(-73.7789000 40.6397000)"],
                ["LGA", "POINT(-73.8720000 40.7769000)"],
            ], path
            column = connection.catalog.get_table_definition(
                TableName("Extract", "airports")
            ).get_column_by_name("location")
            assert sql_name(column.type) == "GEOGRAPHY"


def test_a_batch_the_server_refuses_as_too_large_is_cut_and_sent(setup: Setup) -> None:
    """The server takes 1 MiB (the emulator fixture), the publisher plans for 50 MiB."""
    setup.publish_options = {"max_payload_bytes": 50 * 2**20}
    published_base(setup)
    some_changes(setup, 1)
    setup.world.appended = [(i, f"event number {i} " * 4) for i in range(100, 40_100)]
    setup.write("events")
    setup.world.rows_per_day = 40_000
    setup.write("sales", "2024-03-02")
    update = setup.publish()
    assert update["publish"] == "update" and update["batches"] >= 4
    counts = sorted((r["table"], r["action"]) for r in update["rows"] if r["rows"])
    assert ("Extract.sales", "window") in counts and ("Extract.products", "replace") in counts
    setup.assert_equal()  # the window deleted once, every share of it inserted once
    assert not Outbox(setup.database).changes()


def test_a_lowered_limit_cuts_the_batches_not_yet_sent(setup: Setup) -> None:
    half_sent(setup)
    saved = plan_batches(setup)
    setup.publish_options = {"max_payload_bytes": 130_000}
    resumed = setup.publish()
    assert resumed["batches"] > len(saved)
    setup.assert_equal()


def test_an_unreadable_state_or_plan_is_named_and_a_full_publish_replaces_it(
    setup: Setup,
) -> None:
    published_base(setup)
    home = datasource_dir(setup)
    unreadable = ((home / "published.json", "{"), (home / "plan" / "plan.json", "[]"))
    for step, (path, text) in enumerate(unreadable, start=1):
        some_changes(setup, step)
        path.parent.mkdir(exist_ok=True)
        path.write_text(text)
        with pytest.raises(CorruptFileError, match=rf"{path} cannot be read.*full=True"):
            setup.publish()
        assert path.read_text() == text and len(Outbox(setup.database).changes()) == 3
        assert setup.publish(full=True)["publish"] == "full"
        setup.assert_equal()
        assert setup.publish()["publish"] == "none"


def test_captured_rows_hyper_cannot_read_are_named_and_a_full_publish_replaces_them(
    setup: Setup,
) -> None:
    """A change's rows in the outbox, damaged or gone: the update names the change and the
    way out, and sends nothing; a full publish then makes the copy equal to the file."""
    published_base(setup)
    outbox = Outbox(setup.database)
    for step, damage in enumerate(("truncate", "delete"), start=1):
        some_changes(setup, step)
        (append,) = [c for c in outbox.changes() if c.kind.value == "append"]
        path = outbox.rows_path(append)
        if damage == "truncate":
            path.write_bytes(path.read_bytes()[:1000])
        else:
            path.unlink()
        copy = setup.remote().read_bytes()
        said = rf"{path}: .*what change {append.seq} wrote to Extract.events.*full=True"
        with pytest.raises(HyperFileError, match=said):
            setup.publish()
        assert setup.remote().read_bytes() == copy and len(outbox.changes()) == 3
        assert setup.publish(full=True)["publish"] == "full"
        setup.assert_equal()
        assert not outbox.changes()


def test_the_outbox_state_deleted_as_advised_then_each_change_is_sent_once(
    setup: Setup,
) -> None:
    """An unreadable `state.json`, deleted as its error says, then a full publish: the
    records of changes made before it stay in the outbox, and the changes made after it
    neither take their numbers nor go out with them, so the copy keeps equal to the file."""
    published_base(setup)
    some_changes(setup, 1)
    assert setup.publish()["publish"] == "update"  # changes 1 to 3, sent and cleared
    some_changes(setup, 2)  # changes 4 to 6, an append of three rows first: kept unsent
    outbox = Outbox(setup.database)
    state = outbox.directory / "state.json"
    state.write_text("{")
    with pytest.raises(CorruptFileError, match=rf"{state} cannot be read.*Delete it and publish"):
        setup.publish()
    state.unlink()
    assert setup.publish(full=True)["publish"] == "full"
    setup.assert_equal()

    setup.world.appended = [(30, "event 3")]
    setup.write("events")
    sent = setup.publish()["rows"]
    setup.assert_equal()
    assert sent == [{"table": "Extract.events", "action": "insert", "rows": 1}]
    some_changes(setup, 4)
    assert setup.publish()["publish"] == "update"
    setup.assert_equal()
    assert not outbox.changes()


def test_a_table_dropped_from_the_file_is_published_whole(setup: Setup) -> None:
    setup.write("products")
    setup.write("sales", "2024-03-01")
    assert setup.publish()["publish"] == "full"
    with Connection(setup.hyper.endpoint, setup.database) as connection:
        connection.execute_command('DROP TABLE "Extract"."sales"')  # a dimension cannot go
    dropped = setup.publish()
    assert (dropped["publish"], dropped["reason"]) == ("full", "table Extract.sales was dropped")
    setup.assert_equal()


def test_503_during_upload_and_expired_sessions_are_retried(setup: Setup) -> None:
    published_base(setup)
    some_changes(setup, 1)
    setup.emulator.faults.fail_requests("PUT", r"/fileUploads/.+", status=503, count=2)
    setup.emulator.faults.expire_sessions_before("PATCH", r"/data$")
    setup.emulator.faults.expire_sessions_before("GET", r"/jobs/")
    assert setup.publish()["publish"] == "update"
    setup.assert_equal()


def test_a_dropped_reply_after_the_patch_was_accepted_then_a_rerun(setup: Setup) -> None:
    published_base(setup)
    some_changes(setup, 1)
    setup.emulator.faults.drop_after_accept("PATCH", r"/data$", count=10)
    with pytest.raises(TableauConnectionError, match=r"may have|maybe"):
        setup.publish()
    setup.emulator.faults.clear()
    assert Outbox(setup.database).changes()
    again = setup.publish()
    assert again["publish"] == "update"
    setup.assert_equal()  # the append arrived once: the server ran the RequestID once


def test_a_batch_maybe_applied_is_sent_again_whole_after_the_limit_was_lowered(
    setup: Setup,
) -> None:
    published_base(setup)
    some_changes(setup, 1)
    setup.emulator.faults.drop_after_accept("PATCH", r"/data$", count=10)
    with pytest.raises(TableauConnectionError):
        setup.publish()
    setup.emulator.faults.clear()
    (sent,) = plan_batches(setup)
    setup.publish_options = {"max_payload_bytes": sent["payload_bytes"] // 4}
    assert setup.publish()["batches"] == 1  # cut, it would go out under new RequestIDs
    setup.assert_equal()  # the append arrived once


def test_a_job_that_outlived_the_wait_is_waited_for_after_its_request_id_expired(
    setup: Setup,
) -> None:
    published_base(setup)
    some_changes(setup, 1)
    setup.emulator.faults.pause_jobs()
    setup.tableau_options = {"job_timeout_seconds": 0.3}
    with pytest.raises(PublishError, match="still running"):
        setup.publish()
    setup.emulator.faults.resume_jobs()
    setup.tableau_options = {}
    # A day later: the server no longer knows the RequestID, so sending the batch again
    # would apply the append twice. The run waits for the job it started instead.
    setup.emulator.forget_request_ids()
    assert setup.publish()["publish"] == "update"
    assert not Outbox(setup.database).changes()
    setup.assert_equal()


def test_two_publishes_at_once_send_each_change_once(setup: Setup) -> None:
    published_base(setup)
    some_changes(setup, 1)
    results: list[Any] = []

    def publish() -> None:
        try:
            results.append(setup.publish()["publish"])
        except Exception as err:  # reported by the assertion below
            results.append(err)

    threads = [threading.Thread(target=publish) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sorted(map(str, results)) == ["none", "update"], results
    setup.assert_equal()


def test_a_failed_job_keeps_the_changes_for_the_next_run(setup: Setup) -> None:
    published_base(setup)
    before = setup.files.read(setup.emulator.site_dir(SITE) / f"{NAME}.hyper")
    some_changes(setup, 1)
    setup.emulator.faults.fail_next_job("backgrounder out of disk")
    with pytest.raises(PublishError, match="backgrounder out of disk"):
        setup.publish()
    assert setup.files.read(setup.emulator.site_dir(SITE) / f"{NAME}.hyper") == before
    assert len(Outbox(setup.database).changes()) == 3
    setup.emulator.faults.fail_next_job("")  # failed without notes, as real servers do
    with pytest.raises(PublishError) as quiet:
        setup.publish()
    jobs_page = re.escape(f"{setup.emulator.url}/#/") + r"(site/[^/]+/)?jobs"
    assert re.search(
        r"Batch 1 of 1 failed on the server.*Tableau gave no notes: look job "
        rf"[0-9a-f-]{{36}} up on the site's Jobs page \({jobs_page}\)",
        str(quiet.value),
    ), str(quiet.value)
    some_changes(setup, 2)  # more changes while the failed plan waits
    setup.publish()
    setup.assert_equal()
    assert not Outbox(setup.database).changes()


CHILD = """
import sys
from hyper_assets import HyperResource
from hyper_assets.tableau._dagster.resource import TableauServerResource, TokenSignIn
from hyper_assets.tableau._publish.publish import Publisher
from hyper_assets._engine.types import sql_name
from hyper_assets.tableau._publish.publish import Publisher
from hyper_assets._engine.types import sql_name

url, database, secret = sys.argv[1:]
tableau = TableauServerResource(
    server_url=url, site="analytics", sign_in=TokenSignIn(name="ci", secret=secret),
    max_retries=10_000,
    retry_initial_delay_seconds=0.05, retry_max_delay_seconds=0.1,
    retry_max_total_seconds=600, job_poll_initial_seconds=0.02, job_poll_max_seconds=0.1,
)
with tableau.client() as client:
    publisher = Publisher(
        database, HyperResource(), client, "Sales", "Default", max_payload_bytes=200_000
    )
    publisher.publish()
"""


def wait_for(condition: Any, what: str, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.02)


def test_kill_9_between_two_batches_then_a_rerun(setup: Setup) -> None:
    """The publishing process dies after batch 1 succeeded and before batch 2 was sent."""
    setup.publish_options = {"max_payload_bytes": 200_000}
    published_base(setup)
    setup.world.appended = [(i, f"event number {i} " * 3) for i in range(1, 20_001)]
    setup.write("events")
    plan_file = datasource_dir(setup) / "plan" / "plan.json"

    def batch(index: int) -> dict[str, Any]:
        return json.loads(plan_file.read_text())["batches"][index] if plan_file.exists() else {}

    faults = setup.emulator.faults
    faults.pause_jobs()
    child = subprocess.Popen(
        [sys.executable, "-c", CHILD, setup.emulator.url, str(setup.database), TOKEN_SECRET],
        start_new_session=True,
        stderr=subprocess.DEVNULL,
    )
    try:
        wait_for(lambda: batch(0).get("job_id"), "batch 1 to be sent")
        faults.fail_requests("PATCH", r"/data$", status=503, count=10**6)
        faults.resume_jobs()
        wait_for(lambda: batch(0).get("done"), "batch 1 to succeed")
        time.sleep(0.5)  # batch 2 is being refused with 503 and retried
        assert child.poll() is None
    finally:
        os.killpg(child.pid, signal.SIGKILL)
        child.wait()
    faults.clear()
    remote = setup.files.read(setup.emulator.site_dir(SITE) / f"{NAME}.hyper")["Extract.events"]
    assert 1 < len(remote) < 20_001  # batch 1 applied, not batch 2

    resumed = setup.publish()
    assert resumed["publish"] == "update"
    setup.assert_equal()


def test_a_publish_waits_for_another_only_so_long_and_names_it(setup: Setup) -> None:
    published_base(setup)
    some_changes(setup, 1)
    faults = setup.emulator.faults
    faults.pause_jobs()  # the other publish hangs waiting for its job
    child = subprocess.Popen(
        [sys.executable, "-c", CHILD, setup.emulator.url, str(setup.database), TOKEN_SECRET],
        start_new_session=True,
        stderr=subprocess.DEVNULL,
    )
    try:
        wait_for(lambda: plan_batches(setup) and plan_batches(setup)[0]["job_id"], "the job")
        # The setting users give the asset (likewise the op and the component).
        with pytest.raises(PublishLockedError, match=rf"after 0.5 s.*process {child.pid} on"):
            setup.publish(lock_timeout_seconds=0.5)
    finally:
        os.killpg(child.pid, signal.SIGKILL)
        child.wait()
        faults.resume_jobs()
    assert setup.publish()["publish"] == "update"
    setup.assert_equal()


def test_a_one_day_change_sends_under_a_hundredth_of_a_year(setup: Setup) -> None:
    setup.world.rows_per_day = 5_000
    setup.write("sales", "2024-01-01", through="2024-12-31")
    full = setup.publish()
    assert full["rows"] == [{"table": "Extract.sales", "action": "publish", "rows": 366 * 5_000}]
    setup.world.seed = 1
    setup.write("sales", "2024-06-30")
    update = setup.publish()
    assert update["rows"] == [{"table": "Extract.sales", "action": "window", "rows": 5_000}]
    ratio = update["payload_bytes"] / full["payload_bytes"]  # the whole file, as published
    print(f"one-day payload: {update['payload_bytes']:,} B = 1/{1 / ratio:.0f} of the file")
    assert ratio < 1 / 100
    setup.assert_equal()


FAULTS = ("none", "upload 503", "expired session", "dropped reply", "job failure")


@pytest.mark.slow
def test_twenty_random_materialisations_with_publishes_and_faults(setup: Setup) -> None:
    rng = random.Random(20261122)
    published_base(setup)
    faults = setup.emulator.faults
    days = [f"2024-03-0{d}" for d in range(1, 8)]
    for step in range(1, 21):
        kind = rng.choice(["dimension", "partition", "partition", "append", "range"])
        if kind == "dimension":
            setup.world.products = [(i, f"product {i}.{step}") for i in range(rng.randint(1, 6))]
            setup.write("products")
        elif kind == "partition":
            setup.world.seed = step
            setup.write("sales", rng.choice(days))
        elif kind == "range":
            setup.world.seed = step
            first = rng.randrange(len(days) - 2)
            setup.write("sales", days[first], through=days[first + 2])
        else:
            setup.world.appended = [(step * 100 + i, f"event {step}") for i in range(2)]
            setup.write("events")
        if rng.random() > 0.5 and step != 20:
            continue
        fault = rng.choice(FAULTS)
        if fault == "upload 503":
            faults.fail_requests("PUT", r"/fileUploads/.+", status=503)
        elif fault == "expired session":
            faults.expire_sessions_before("PATCH", r"/data$")
        elif fault == "dropped reply":
            faults.drop_after_accept("PATCH", r"/data$", count=10)
        elif fault == "job failure":
            faults.fail_next_job()
        try:
            setup.publish()
        except (PublishError, TableauConnectionError):
            assert fault in ("dropped reply", "job failure"), f"step {step}: {fault}"
            assert Outbox(setup.database).changes()
            faults.clear()
            continue
        assert fault not in ("dropped reply", "job failure"), f"step {step}: {fault} passed"
        setup.assert_equal()
    faults.clear()
    setup.publish()
    setup.assert_equal()


def test_the_publish_links_the_page_the_server_gives(setup: Setup) -> None:
    """`datasource_url` is the data source's webpageUrl as the server lists it (by number, not
    by its id), after a whole-file publish, an update and a publish with nothing to send."""
    tsc = TSC.Server(setup.emulator.url, use_server_version=True)
    tsc.auth.sign_in(TSC.PersonalAccessTokenAuth("raw", "raw-secret", site_id=SITE))
    setup.write("products")
    kinds = []
    for products in (None, [(1, "green tea")], None):
        if products:
            setup.world.products = products
            setup.write("products")
        metadata = setup.publish()
        [listed] = [d for d in TSC.Pager(tsc.datasources) if d.name == NAME]
        assert (metadata["datasource_id"], metadata["datasource_url"]) == (
            listed.id,
            listed.webpage_url,
        )
        kinds.append(metadata["publish"])
    tsc.auth.sign_out()
    assert kinds == ["full", "update", "none"]
    assert re.fullmatch(
        rf"{re.escape(setup.emulator.url)}/#/site/{SITE}/datasources/\d+", listed.webpage_url
    )


def test_a_page_lookup_failing_after_the_data_arrived_is_only_a_warning(setup: Setup) -> None:
    """The first publish's page is looked up after the upload; if that fails (every retry),
    the data is on the server, so the publish succeeds without a link."""
    setup.write("products")
    lists = r"/datasources(\?|$)"
    setup.emulator.faults.fail_requests("GET", lists, status=500, count=4, skip=1)
    metadata = setup.publish()
    assert metadata["publish"] == "full"
    assert str(metadata["datasource_url"]).startswith("none: ")
    setup.assert_equal()
    setup.emulator.faults.clear()
    assert str(setup.publish()["datasource_url"]).startswith(setup.emulator.url)


def test_the_publish_op_in_a_job(setup: Setup) -> None:
    published_base(setup)
    some_changes(setup, 1)
    publish_op = build_publish_op(datasource=NAME, project=PROJECT)

    @dg.job
    def publish_job() -> None:
        publish_op()

    result = publish_job.execute_in_process(resources=setup.resources())
    (output,) = [e for e in result.all_events if e.event_type_value == "STEP_OUTPUT"]
    metadata = output.event_specific_data.metadata  # type: ignore[union-attr]
    assert metadata["publish"].value == "update"
    assert metadata["batches"].value == 1
    setup.assert_equal()


def test_a_project_path_publishes_into_that_nested_project(setup: Setup) -> None:
    tsc = TSC.Server(setup.emulator.url, use_server_version=True)
    tsc.auth.sign_in(TSC.PersonalAccessTokenAuth("raw", "raw-secret", site_id=SITE))
    top = tsc.projects.create(TSC.ProjectItem("Retail"))
    tsc.projects.create(TSC.ProjectItem("EMEA", parent_id=top.id))
    tsc.projects.create(TSC.ProjectItem("EMEA"))  # the same name at the top level
    tsc.auth.sign_out()
    setup.publish_options = {"project": "Retail/EMEA"}
    setup.write("products")
    assert setup.publish()["publish"] == "full"
    setup.assert_equal()
    assert setup.remote().parent.name == "EMEA" and not list(
        setup.emulator.site_dir(SITE).glob("*.hyper")
    )
    setup.world.products = [(1, "green tea")]
    setup.write("products")
    assert setup.publish()["publish"] == "update"
    setup.assert_equal()

    setup.publish_options = {"project": "EMEA"}
    with pytest.raises(AmbiguousProjectError) as several:
        setup.publish()
    assert several.value.candidates == ["EMEA", "Retail/EMEA"]


def test_a_file_upgraded_to_a_newer_format_version_is_published_whole(setup: Setup) -> None:
    """Tableau keeps the version of the file it was sent: an upgrade replaces its copy.

    `totals`, which no key joins to the star, is in the file, not in the data source."""
    setup.publish_options = {"tables": sorted(STAR)}
    published_base(setup)

    @dg.asset
    def totals() -> pa.Table:  # decimal(22,2): a sum of decimal(12,2), as Spark types it
        total = pa.array([Decimal("12345678901234567890.12")], pa.decimal128(22, 2))
        return pa.table({"k": pa.array([1], pa.int64()), "total": total})

    result = dg.materialize([totals], resources=setup.resources())
    (event,) = result.get_asset_materialization_events()
    assert event.materialization.metadata["database_version_upgraded"].value == "2 -> 3"
    upgraded = setup.publish()
    assert (upgraded["publish"], upgraded["reason"]) == (
        "full",
        "the file's format version changed (2 -> 3)",
    )
    setup.assert_equal(NAME, STAR)
    assert remote_version(setup) == 3
    assert setup.publish()["publish"] == "none"

    assert upgrade_database(setup.database, 4) == VersionUpgrade(3, 4)
    again = setup.publish()
    assert (again["publish"], again["reason"]) == (
        "full",
        "the file's format version changed (3 -> 4)",
    )
    assert remote_version(setup) == 4
    setup.assert_equal(NAME, STAR)


def test_a_version_0_file_is_published_whole_once_then_updated(setup: Setup) -> None:
    """The published version is compared as a number: 0 is not "unknown" (the default 2)."""
    with Connection(setup.hyper.endpoint) as connection:
        connection.execute_command(
            f"CREATE DATABASE {escape_name(str(setup.database))} WITH VERSION 0"
        )
    setup.write("products")
    assert setup.publish()["publish"] == "full"
    setup.world.products = [(1, "tea"), (2, "cake")]
    setup.write("products")
    assert setup.publish()["publish"] == "update"
    setup.assert_equal()
    assert remote_version(setup) == 0


def remote_version(setup: Setup) -> int:
    with Connection(setup.hyper.endpoint, setup.remote()) as connection:
        return int(
            connection.execute_scalar_query(
                "SELECT database_version FROM pg_catalog.hyper_database"
            )
        )


def test_every_file_beside_the_database_has_one_mode(setup: Setup) -> None:
    """hyperd makes its files 0o660 less its umask, open() 0o666 less it: with a group's
    umask (0o002), each file the library makes (the file, a compacted file, locks, outbox,
    publish state, the compaction count) has the one mode, 0o664."""
    hyper, umask = HyperResource(), os.umask(0o002)
    try:
        setup.write("products")
        setup.publish()
        setup.world.seed = 1
        setup.write("products")  # an outbox record
        compact(hyper, setup.database)
    finally:
        hyper.close()
        os.umask(umask)
    server = setup.emulator.data_dir
    modes = {
        p.relative_to(setup.database.parent).as_posix(): oct(p.stat().st_mode & 0o777)
        for p in setup.database.parent.rglob("*")
        if p.is_file() and server not in p.parents
    }
    assert {"sales.hyper", "sales.hyper.lock"} <= set(modes)
    assert len(modes) >= 6, modes  # and the outbox's, the publish's and compaction's files
    assert set(modes.values()) == {"0o664"}, modes


STAR = {"sales", "products", "events"}


def test_a_file_of_two_stars_is_refused_before_any_upload(setup: Setup) -> None:
    """`sales` and `stock` both reference `products`: two facts, which Tableau refuses."""
    setup.world.appended, setup.world.upserted = [(0, "zero")], [(1, 10)]
    for asset in ("products", "events", "stock"):
        setup.write(asset)
    setup.write("sales", "2024-03-01")
    with pytest.raises(DataModelError) as refused:
        setup.publish()
    assert sorted(refused.value.facts) == ["Extract.sales", "Extract.stock"]  # found here
    assert "it holds 2 fact tables" in str(refused.value)
    assert "tables=[" in str(refused.value)
    assert not setup.remote().exists()
    assert not Outbox(setup.database).directory.exists()  # no tracking started, no state

    assert setup.publish(tables=sorted(STAR))["publish"] == "full"
    setup.assert_equal(NAME, STAR)


def test_tables_of_assets_keys_and_names_publish_those_tables(setup: Setup) -> None:
    """An asset, its key or its table's name: each stands for the table it is stored as,
    for the publish asset and the publish op alike."""
    setup.world.appended, setup.world.upserted = [(0, "zero")], [(1, 10)]
    for asset in ("products", "events", "stock"):
        setup.write(asset)
    setup.write("sales", "2024-03-01")
    resources = setup.resources()
    assets, _ = definitions(setup.world, setup.database, resources["tableau"])
    star = [assets["sales"], dg.AssetKey("products"), "Extract.events"]
    assert setup.publish(tables=star)["publish"] == "full"
    setup.assert_equal(NAME, STAR)

    publish_op = build_publish_op(
        datasource="Stock", project=PROJECT, tables=[assets["stock"], dg.AssetKey("products")]
    )

    @dg.job
    def publish_job() -> None:
        publish_op()

    assert publish_job.execute_in_process(resources=resources).success
    setup.assert_equal("Stock", {"stock", "products"})


def test_one_file_as_two_data_sources_sharing_a_dimension(setup: Setup) -> None:
    """ "Sales" holds its star, "Stock" holds `stock` (keyed on two columns, one TEXT: the
    shape whose key an UPDATE must not SET) and `products`. Each has its own place in the
    outbox: a change to `products` goes to both, a change to a fact to its own only."""
    sales = {"datasource": NAME, "tables": ["sales", "Extract.products", "events"]}
    stock = {"datasource": "Stock", "tables": ["stock", "products"]}
    setup.world.appended, setup.world.upserted = [(0, "zero")], [(1, 10)]
    for asset in ("products", "events", "stock"):
        setup.write(asset)
    setup.write("sales", "2024-03-01")
    assert setup.publish(**sales)["publish"] == "full"
    assert setup.publish(**stock)["publish"] == "full"
    setup.assert_equal(NAME, STAR)
    setup.assert_equal("Stock", {"stock", "products"})  # those tables, and no other
    with Connection(setup.hyper.endpoint, setup.remote("Stock")) as connection:
        keys = Catalog(connection).keys(TableName("Extract", "stock"))
    assert keys.primary_key == ("id", "site")
    assert [(fk.columns, fk.ref_table.name.unescaped) for fk in keys.foreign_keys] == [
        (("id",), "products")
    ]

    setup.world.products = [(1, "green tea"), (2, "cake"), (3, "scone")]
    setup.write("products")
    setup.world.upserted = [(1, 11), (2, 20)]
    setup.write("stock")
    sent = setup.publish(**stock)["rows"]
    assert sorted((r["table"], r["action"], r["rows"]) for r in sent) == [
        ("Extract.products", "replace", 3),
        ("Extract.stock", "upsert", 2),
    ]
    assert [c.table.name.unescaped for c in Outbox(setup.database).changes()] == ["products"]
    assert setup.publish(**sales)["rows"] == [
        {"table": "Extract.products", "action": "replace", "rows": 3}
    ]
    assert not Outbox(setup.database).changes()
    setup.assert_equal(NAME, STAR)
    setup.assert_equal("Stock", {"stock", "products"})

    setup.world.seed = 1
    setup.write("sales", "2024-03-02")
    assert setup.publish(**stock)["publish"] == "none"
    assert setup.publish(**sales)["rows"] == [
        {"table": "Extract.sales", "action": "window", "rows": 5}
    ]
    setup.assert_equal(NAME, STAR)


WRITER = """
import os, sys
sys.path[:0] = [sys.argv[1], os.path.dirname(sys.argv[1])]  # sales_world, helpers
import dagster as dg
from sales_world import World, definitions
from hyper_assets import HyperIOManager, HyperResource
from hyper_assets.tableau._dagster.resource import TableauServerResource, TokenSignIn

database = sys.argv[2]
world = World(appended=[(int(sys.argv[3]), "written during the publish")])
unused = TableauServerResource(
    server_url="http://127.0.0.1:9", sign_in=TokenSignIn(name="-", secret="-")
)
assets, _ = definitions(world, database, unused)
io_manager = HyperIOManager(  # a writer that waits for no lock: one held fails it at once
    database=database, hyper=HyperResource(lock_timeout_seconds=0), staging_dir=sys.argv[4]
)
assert dg.materialize([assets["events"]], resources={"io_manager": io_manager}).success
"""


class _Events(logging.Handler):
    """Records the publish's log messages, running `write` at two of them: after the file
    was copied without its lock (id 1), and as the tree file is begun (id 2)."""

    def __init__(self, write: Any) -> None:
        super().__init__()
        self.write, self.seen = write, []

    def emit(self, record: logging.LogRecord) -> None:
        message = record.getMessage()
        self.seen.append(message)
        for start, row in (("Copied ", 1), ("Writing the tree file", 2)):
            if message.startswith(start):
                self.write(row)
                self.seen.append(f"the writer wrote {row}")


def test_writers_write_while_a_first_publish_copies_the_file_and_writes_its_tree_file(
    setup: Setup,
) -> None:
    """A data source of some of the file's tables is sent as a tree file written from a copy
    of the file, after the file's lock is let go. A writer in another process (its own
    hyperd, waiting for no lock: one held fails it) appends to `events` twice: after the
    copy made before the lock (its row is in the copy sent, made the file's equal under
    the lock), and while the tree file is written (its row is not in the copy sent nor in
    the publish's record; the next publish sends it)."""
    setup.world.appended, setup.world.upserted = [(0, "zero")], [(1, 10)]
    for asset in ("products", "events", "stock"):
        setup.write(asset)
    setup.write("sales", "2024-03-01")
    here = os.path.dirname(__file__)

    def write(row: int) -> None:
        staging = str(setup.database.parent / "staging")
        child = subprocess.run(
            [sys.executable, "-c", WRITER, here, str(setup.database), str(row), staging],
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert child.returncode == 0, child.stderr[-3000:]

    events = _Events(write)
    logger = logging.getLogger("test_publish.tree_file")
    logger.setLevel(logging.DEBUG)
    logger.addHandler(events)
    try:
        with setup.resources()["tableau"].client() as client:
            publisher = Publisher(
                setup.database,
                HyperResource(),
                client,
                NAME,
                PROJECT,
                logger=logger,
                tables=sorted(STAR),
            )
            first = publisher.publish()
            steps = [m for m in events.seen if m.startswith(("Copied", "the writer", "Wr"))]
            assert steps == [
                f"Copied {setup.database.name} before taking its lock",
                "the writer wrote 1",
                f"Writing the tree file of {NAME!r} from a copy of the file",
                "the writer wrote 2",
                f"Wrote the tree file of {NAME!r}",
            ]
            assert first.kind == "full"
            sent = {(r.table, r.action, r.rows) for r in first.rows}
            assert ("Extract.events", "publish", 2) in sent
            remote = setup.files.read(setup.remote())
            during = "written during the publish"
            # As copied under the lock: row 1, written before it, and not row 2, written after.
            assert remote["Extract.events"] == [(0, "zero"), (1, during)]
            local = setup.files.read(setup.database)
            assert local["Extract.events"] == [(0, "zero"), (1, during), (2, during)]
            assert {k: v for k, v in remote.items() if k != "Extract.events"} == {
                k: local[k] for k in remote if k != "Extract.events"
            }

            second = publisher.publish()
        assert (second.kind, [(r.table, r.action, r.rows) for r in second.rows]) == (
            "update",
            [("Extract.events", "insert", 1)],
        )
        setup.assert_equal(NAME, STAR)
        assert not Outbox(setup.database).changes()
    finally:
        logger.removeHandler(events)


def test_a_change_made_while_a_tree_file_is_written_is_kept_for_it_by_the_others(
    setup: Setup,
) -> None:
    """While "Sales" writes its first tree file, `products` changes and "Stock", which holds
    it too, publishes the change and clears what every data source has sent: the plan
    "Sales" took keeps its place in the outbox, so the change stays for its next publish."""
    stock = {"datasource": "Stock", "tables": ["stock", "products"]}
    setup.world.appended, setup.world.upserted = [(0, "zero")], [(1, 10)]
    for asset in ("products", "events", "stock"):
        setup.write(asset)
    setup.write("sales", "2024-03-01")
    assert setup.publish(**stock)["publish"] == "full"

    def meanwhile(row: int) -> None:
        if row == 2:  # as the tree file is begun
            setup.world.products = [(1, "green tea"), (2, "cake")]
            setup.write("products")
            assert setup.publish(**stock)["rows"] == [
                {"table": "Extract.products", "action": "replace", "rows": 2}
            ]

    events = _Events(meanwhile)
    logger = logging.getLogger("test_publish.kept")
    logger.setLevel(logging.DEBUG)
    logger.addHandler(events)
    try:
        with setup.resources()["tableau"].client() as client:
            publisher = Publisher(
                setup.database,
                HyperResource(),
                client,
                NAME,
                PROJECT,
                logger=logger,
                tables=sorted(STAR),
            )
            assert publisher.publish().kind == "full"
            assert "the writer wrote 2" in events.seen
            remote = setup.files.read(setup.remote())
            assert remote["Extract.products"] == [(1, "tea"), (2, "cake")]  # as copied
            assert [c.table.name.unescaped for c in Outbox(setup.database).changes()] == [
                "products"
            ]
            second = publisher.publish()
        assert [(r.table, r.action, r.rows) for r in second.rows] == [
            ("Extract.products", "replace", 2)
        ]
        setup.assert_equal(NAME, STAR)
        setup.assert_equal("Stock", {"stock", "products"})
        assert not Outbox(setup.database).changes()
    finally:
        logger.removeHandler(events)


def test_the_publish_state_of_an_earlier_version_is_adopted(setup: Setup) -> None:
    """Earlier versions kept one publish state per file, `<outbox>/published.json`."""
    published_base(setup)
    home = datasource_dir(setup)
    (home / "published.json").replace(Outbox(setup.database).directory / "published.json")
    home.rmdir()
    some_changes(setup, 1)
    assert setup.publish()["publish"] == "update"
    setup.assert_equal()
    assert not Outbox(setup.database).changes()
