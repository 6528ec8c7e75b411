"""The real tableauserverclient against the emulator: every call a publish makes.

Includes the seed's three worked scenarios, checked by reading the stored `.hyper` back.
"""

from __future__ import annotations

import re
from datetime import date, datetime
from pathlib import Path
from typing import Any

import pytest
import tableauserverclient as TSC
from helpers import tsc_publish
from tableauhyperapi import NOT_NULLABLE, SqlType, TableDefinition

from hyper_assets.emulator import Emulator
from hyper_assets.tableau.actions import (
    And,
    Const,
    Delete,
    Eq,
    Insert,
    Lt,
    Replace,
    Update,
    batch_to_json,
)

Column = TableDefinition.Column
SITE = "analytics"  # as in conftest.py


def update(server: TSC.Server, item: Any, actions: list, payload: Path | None, rid: str) -> Any:
    body = batch_to_json(actions)["actions"]
    job = server.datasources.update_hyper_data(item, request_id=rid, actions=body, payload=payload)
    return server.jobs.wait_for_job(job, timeout=60)


def test_server_info_projects_and_publish_round_trip(
    server: TSC.Server, emulator: Emulator, hyper_files: Any, tmp_path: Path
) -> None:
    assert server.version == "3.28"  # TSC signed in at 2.4, then took the server's version
    info = server.server_info.get()
    assert info.rest_api_version == "3.28" and info.build_number
    projects, pagination = server.projects.get()
    assert [p.name for p in projects] == ["Default"] and pagination.total_available == 1

    cols = [Column("id", SqlType.int(), NOT_NULLABLE)]
    first = hyper_files.create(
        tmp_path / "v1.hyper",
        {("Extract", "a"): (cols, [(1,)]), ("Extract", "b"): (cols, [(2,)])},
        references=[("a", "id", "b")],
    )
    second = hyper_files.create(tmp_path / "v2.hyper", {("Extract", "a"): (cols, [(3,)])})
    created = tsc_publish(server, first, "Verkäufe 2024")
    assert created.name == "Verkäufe 2024" and created.project_id == projects[0].id
    stored = emulator.site_dir(SITE) / "Verkäufe 2024.hyper"
    assert hyper_files.read(stored) == {"Extract.a": [(1,)], "Extract.b": [(2,)]}

    with pytest.raises(TSC.ServerResponseError) as refused:
        tsc_publish(server, second, "Verkäufe 2024")
    assert refused.value.code == "403007"
    overwritten = tsc_publish(server, second, "Verkäufe 2024", "Overwrite")
    assert overwritten.id == created.id
    assert hyper_files.read(stored) == {"Extract.a": [(3,)]}

    tsc_publish(server, first, "other")
    options = TSC.RequestOptions()
    options.filter.add(TSC.Filter("name", TSC.RequestOptions.Operator.Equals, "Verkäufe 2024"))
    found, pagination = server.datasources.get(options)
    assert [d.id for d in found] == [created.id] and pagination.total_available == 1
    every = list(TSC.Pager(server.datasources, TSC.RequestOptions(pagesize=1)))
    assert sorted(d.name for d in every) == ["Verkäufe 2024", "other"]
    assert server.datasources.get_by_id(created.id).name == "Verkäufe 2024"


def test_update_through_a_connection_and_job_lookup(
    server: TSC.Server, emulator: Emulator, hyper_files: Any, tmp_path: Path
) -> None:
    cols = [Column("id", SqlType.int())]
    target = hyper_files.create(tmp_path / "t.hyper", {("Extract", "Extract"): (cols, [(1,)])})
    payload = hyper_files.create(tmp_path / "p.hyper", {("public", "new"): (cols, [(2,), (3,)])})
    item = tsc_publish(server, target, "ds")
    server.datasources.populate_connections(item)
    [connection] = item.connections
    job = update(
        server, connection, [Insert(source_table="new", target_table="Extract")], payload, "c1"
    )
    assert job.finish_code == 0 and job.completed_at is not None
    again = server.jobs.get_by_id(job.id)
    assert again.finish_code == 0 and again.progress == "100"
    assert hyper_files.read(emulator.site_dir(SITE) / "ds.hyper") == {
        "Extract.Extract": [(1,), (2,), (3,)]
    }


def test_star_schema_refresh_replaces_dimensions_and_appends_facts(
    server: TSC.Server, emulator: Emulator, hyper_files: Any, tmp_path: Path
) -> None:
    dim = [Column("id", SqlType.int(), NOT_NULLABLE), Column("name", SqlType.text())]
    fact = [
        Column("view_id", SqlType.big_int()),
        Column("campaign_id", SqlType.int()),
        Column("customer_id", SqlType.int()),
        Column("ad_view_date", SqlType.date()),
    ]
    target = hyper_files.create(
        tmp_path / "star.hyper",
        {
            ("Extract", "marketing_campaigns"): (dim, [(1, "Spring"), (2, "Summer")]),
            ("Extract", "ad_customers"): (dim, [(10, "Acme")]),
            ("Extract", "ad_views"): (fact, [(100, 1, 10, date(2024, 5, 1))]),
        },
        references=[
            ("ad_views", "campaign_id", "marketing_campaigns"),
            ("ad_views", "customer_id", "ad_customers"),
        ],
    )
    payload = hyper_files.create(
        tmp_path / "star_payload.hyper",
        {
            ("Extract", "campaigns"): (dim, [(1, "Spring 2"), (3, "Autumn")]),
            ("Extract", "ad_customers"): (dim, [(10, "Acme"), (11, "Bähr GmbH")]),
            ("Extract", "new_ad_views"): (
                fact,
                [(101, 3, 11, date(2024, 9, 1)), (102, 1, 10, None)],
            ),
        },
    )
    item = tsc_publish(server, target, "ads")
    job = update(
        server,
        item,
        [
            Replace(source_table="campaigns", target_table="marketing_campaigns"),
            Replace(source_table="ad_customers", target_table="ad_customers"),
            Insert(source_table="new_ad_views", target_table="ad_views"),
        ],
        payload,
        "star-1",
    )
    assert job.finish_code == 0
    assert hyper_files.read(emulator.site_dir(SITE) / "ads.hyper") == {
        "Extract.marketing_campaigns": [(1, "Spring 2"), (3, "Autumn")],
        "Extract.ad_customers": [(10, "Acme"), (11, "Bähr GmbH")],
        "Extract.ad_views": [
            (100, 1, 10, date(2024, 5, 1)),
            (101, 3, 11, date(2024, 9, 1)),
            (102, 1, 10, None),
        ],
    }


def test_rolling_window_deletes_old_rows_and_inserts_the_increment(
    server: TSC.Server, emulator: Emulator, hyper_files: Any, tmp_path: Path
) -> None:
    cols = [Column("id", SqlType.int()), Column("creation_date", SqlType.timestamp())]
    old = [
        (1, datetime(2018, 11, 1)),
        (2, datetime(2018, 12, 6, 19, 21, 12)),
        (3, datetime(2018, 12, 6, 19, 21, 13)),
        (4, None),
    ]
    target = hyper_files.create(tmp_path / "w.hyper", {("Extract", "extract"): (cols, old)})
    payload = hyper_files.create(
        tmp_path / "w_payload.hyper",
        {("Extract", "extract_increment"): (cols, [(5, datetime(2019, 1, 2, 8))])},
    )
    item = tsc_publish(server, target, "window")
    cutoff = Const.datetime("2018-12-06T20:21:12.5+01:00")  # 19:21:12.5 UTC
    job = update(
        server,
        item,
        [
            Delete(target_table="extract", condition=Lt("creation_date", const=cutoff)),
            Insert(source_table="extract_increment", target_table="extract"),
        ],
        payload,
        "window-1",
    )
    assert job.finish_code == 0
    assert hyper_files.read(emulator.site_dir(SITE) / "window.hyper") == {
        "Extract.extract": [
            (3, datetime(2018, 12, 6, 19, 21, 13)),
            (4, None),
            (5, datetime(2019, 1, 2, 8)),
        ]
    }


def test_change_data_capture_with_a_two_column_key(
    server: TSC.Server, emulator: Emulator, hyper_files: Any, tmp_path: Path
) -> None:
    key = [
        Column("region", SqlType.text(), NOT_NULLABLE),
        Column("user_id", SqlType.int(), NOT_NULLABLE),
    ]
    cols = [*key, Column("name", SqlType.text()), Column("score", SqlType.double())]
    target = hyper_files.create(
        tmp_path / "cdc.hyper",
        {
            ("Extract", "extract"): (
                cols,
                [
                    ("eu", 1, "Åsa", 1.0),
                    ("us", 1, "Ann", 2.0),
                    ("eu", 2, "Bo", 3.0),
                    ("us", 2, "Bill", 4.0),
                ],
            )
        },
    )
    payload = hyper_files.create(
        tmp_path / "cdc_payload.hyper",
        {
            ("Extract", "new_tuples"): (cols, [("eu", 3, "Cé", 5.0)]),
            ("Extract", "modified_tuples"): (cols, [("us", 1, "Ann B.", 2.5)]),
            ("Extract", "deleted_tuples"): (key, [("eu", 2)]),
        },
    )
    item = tsc_publish(server, target, "cdc")
    same_key = And([Eq("region", source_col="region"), Eq("user_id", source_col="user_id")])
    job = update(
        server,
        item,
        [
            Insert(source_table="new_tuples", target_table="extract"),
            Update(source_table="modified_tuples", target_table="extract", condition=same_key),
            Delete(source_table="deleted_tuples", target_table="extract", condition=same_key),
        ],
        payload,
        "cdc-1",
    )
    assert job.finish_code == 0
    assert hyper_files.read(emulator.site_dir(SITE) / "cdc.hyper") == {
        "Extract.extract": sorted(
            [
                ("eu", 1, "Åsa", 1.0),
                ("us", 1, "Ann B.", 2.5),
                ("us", 2, "Bill", 4.0),
                ("eu", 3, "Cé", 5.0),
            ],
            key=repr,
        )
    }


def test_a_batch_whose_last_action_fails_leaves_the_data_source_unchanged(
    server: TSC.Server, emulator: Emulator, hyper_files: Any, tmp_path: Path
) -> None:
    loose = [Column("id", SqlType.int()), Column("name", SqlType.text())]
    cols = [Column("id", SqlType.int(), NOT_NULLABLE), Column("name", SqlType.text())]
    target = hyper_files.create(
        tmp_path / "t.hyper",
        {
            ("Extract", "a"): (loose, [(1, "x")]),
            ("Extract", "b"): (cols, [(2, "y")]),
        },
        references=[("a", "id", "b")],
    )
    payload = hyper_files.create(
        tmp_path / "p.hyper", {("public", "rows"): (loose, [(3, "z"), (None, "no id")])}
    )
    item = tsc_publish(server, target, "atomic")
    stored = emulator.site_dir(SITE) / "atomic.hyper"
    before = hyper_files.read(stored)
    body = batch_to_json(
        [
            Insert(source_table="rows", target_table="a", target_schema="Extract"),
            Delete(target_table="b", condition=Eq("id", const=Const.integer(2))),
            Insert(
                source_table="rows", target_table="b"
            ),  # NULL into NOT NULL id: fails while running
        ]
    )["actions"]
    job = server.datasources.update_hyper_data(
        item, request_id="atomic-1", actions=body, payload=payload
    )
    with pytest.raises(TSC.JobFailedException) as failed:
        server.jobs.wait_for_job(job, timeout=60)
    [note] = failed.value.notes
    assert note.startswith("action 2 (insert):") and "rolled back" in note
    assert hyper_files.read(stored) == before


def test_publish_update_and_jobs_in_a_nested_project_on_a_site(
    server: TSC.Server, emulator: Emulator, hyper_files: Any, tmp_path: Path
) -> None:
    assert server.site_id == emulator.site_id(SITE) != emulator.site_id("")
    finance = server.projects.create(TSC.ProjectItem("Finance", description="money"))
    reports = server.projects.create(TSC.ProjectItem("Reports", parent_id=finance.id))
    projects = {p.id: p for p in TSC.Pager(server.projects)}
    assert projects[reports.id].parent_id == finance.id and projects[finance.id].parent_id is None
    assert projects[reports.id].content_permissions == "ManagedByOwner"
    assert projects[reports.id].owner_id
    default = next(p for p in projects.values() if p.name == "Default")
    assert default.description == "The default project that was automatically created by Tableau."

    cols = [Column("id", SqlType.int())]
    target = hyper_files.create(tmp_path / "t.hyper", {("Extract", "Extract"): (cols, [(1,)])})
    payload = hyper_files.create(tmp_path / "p.hyper", {("public", "new"): (cols, [(2,)])})
    item = server.datasources.publish(
        TSC.DatasourceItem(reports.id, name="ledger"), target, "CreateNew"
    )
    assert item.project_id == reports.id and item.project_name == "Reports"
    assert item.owner_id and item.tags == set() and item.encrypt_extracts is False
    assert item.webpage_url is None  # as in the reply to a publish recorded from a real server
    [listed] = server.datasources.get()[0]
    assert re.fullmatch(
        rf"{re.escape(emulator.url)}/#/site/{SITE}/datasources/\d+", listed.webpage_url
    )
    server.datasources.populate_connections(item)
    [connection] = item.connections
    assert connection.embed_password is False and connection.datasource_id == item.id
    job = update(server, item, [Insert(source_table="new", target_table="Extract")], payload, "n1")
    assert job.finish_code == 0 and job.datasource_id == item.id
    assert server.jobs.get_by_id(job.id).progress == "100"
    stored = emulator.site_dir(SITE) / "projects" / "Finance" / "Reports" / "ledger.hyper"
    assert stored == emulator.datasource_file("ledger", "Finance/Reports", SITE)
    assert hyper_files.read(stored) == {"Extract.Extract": [(1,), (2,)]}


def test_a_publish_as_job_is_polled_by_tsc(
    server: TSC.Server, emulator: Emulator, hyper_files: Any, tmp_path: Path
) -> None:
    cols = [Column("id", SqlType.int())]
    first = hyper_files.create(tmp_path / "a.hyper", {("Extract", "t"): (cols, [(1,)])})
    second = hyper_files.create(tmp_path / "b.hyper", {("Extract", "t"): (cols, [(2,)])})
    created = tsc_publish(server, first, "async")
    projects, _ = server.projects.get()
    default = next(p for p in projects if p.name == "Default")
    item = TSC.DatasourceItem(default.id, name="async")
    emulator.faults.pause_jobs()
    job = server.datasources.publish(item, second, "Overwrite", as_job=True)
    assert job.type == "PublishDatasource" and job.completed_at is None
    assert job.finish_code == 1  # as a real server's reply: queued, yet finishCode 1
    emulator.faults.resume_jobs()
    done = server.jobs.wait_for_job(job, timeout=60)
    # REST API 3.28 defines no type element for a publish job, so it names no data source:
    # the overwritten one is found by its name, with the id it had.
    assert done.finish_code == 0 and done.datasource_id is None
    [found] = server.datasources.filter(name="async")
    assert found.id == created.id
    stored = emulator.datasource_file("async", "Default", SITE)
    assert hyper_files.read(stored) == {"Extract.t": [(2,)]}


def test_a_file_that_is_not_one_star_is_refused_as_a_server_does(
    server: TSC.Server, emulator: Emulator, hyper_files: Any, tmp_path: Path
) -> None:
    """Two facts sharing a dimension: 400000, "exactly one fact table"; nothing stored."""
    dim = [Column("id", SqlType.int(), NOT_NULLABLE), Column("name", SqlType.text())]
    fact = [Column("dim_id", SqlType.int()), Column("n", SqlType.int())]
    tables = {
        ("Extract", "dim"): (dim, [(1, "one")]),
        ("Extract", "f"): (fact, [(1, 1)]),
        ("Extract", "g"): (fact, [(1, 2)]),
    }
    both = [("f", "dim_id", "dim"), ("g", "dim_id", "dim")]
    galaxy = hyper_files.create(tmp_path / "galaxy.hyper", tables, references=both)
    with pytest.raises(TSC.ServerResponseError) as refused:
        tsc_publish(server, galaxy, "galaxy")
    assert refused.value.code == "400000"
    assert "it must contain exactly one fact table" in refused.value.detail
    assert not list(emulator.site_dir(SITE).glob("*.hyper"))
    assert not [p for p in (emulator.data_dir / ".emulator").rglob("*") if p.is_file()]

    del tables[("Extract", "g")]
    star = hyper_files.create(tmp_path / "star.hyper", tables, references=[("f", "dim_id", "dim")])
    tsc_publish(server, star, "star")
    lone = hyper_files.create(tmp_path / "lone.hyper", {("Any", "name"): (fact, [(2, 3)])})
    tsc_publish(server, lone, "lone")
    assert hyper_files.read(emulator.site_dir(SITE) / "lone.hyper") == {"Any.name": [(2, 3)]}
    assert hyper_files.read(emulator.site_dir(SITE) / "star.hyper") == {
        "Extract.dim": [(1, "one")],
        "Extract.f": [(1, 1)],
    }
