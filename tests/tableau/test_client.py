"""`TableauClient` (from `TableauServerResource`) against the real emulator over loopback:
no HTTP mocks.

Every publish and update is checked by reading the emulator's stored `.hyper` back.
"""

from __future__ import annotations

import base64
import json
import logging
import os
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import dagster as dg
import httpx
import pytest
import tableauserverclient as TSC
from helpers import b64url, hs256
from tableauhyperapi import NOT_NULLABLE, Connection, SqlType, TableDefinition

from hyper_assets._engine.process import SharedHyper
from hyper_assets.emulator import ConnectedApp, Emulator
from hyper_assets.errors import (
    AmbiguousProjectError,
    ConfigurationError,
    DataModelError,
    DataSourceExistsError,
    PayloadTooLargeError,
    ProjectNotFoundError,
    TableauConnectionError,
    TableauJobCancelledError,
    TableauJobError,
    TableauRequestError,
    TableauSignInError,
)
from hyper_assets.tableau._dagster.resource import (
    ConnectedAppSignIn,
    TableauServerResource,
    TokenSignIn,
)
from hyper_assets.tableau._publish.model import server_refusal
from hyper_assets.tableau._rest.client import Job, Project, TableauClient
from hyper_assets.tableau._rest.connected_app import connected_app_jwt
from hyper_assets.tableau.actions import Const, Delete, Eq, Insert, Lt

Column = TableDefinition.Column
COLUMNS = [Column("id", SqlType.int()), Column("label", SqlType.text())]
REGION = [Column("id", SqlType.int(), NOT_NULLABLE), Column("label", SqlType.text())]
TOKEN_NAME, TOKEN_SECRET, SITE = "ci", "s3cret-tøken", "analytics"  # as in conftest.py
WRONG_SECRET = "wrong-secret-0xC0FFEE"
RAW_TOKEN = ("raw", "raw-secret")  # the emulator fixture's second token
JSON = {"Accept": "application/json"}
APP = ConnectedApp("app-client-id", "app-secret-id", "app-s3cret-value-0xBEEF")  # as conftest


def settings(emulator: Emulator, **overrides: Any) -> TableauServerResource:
    """A resource for the emulator with tiny delays, so retries cost milliseconds."""
    config: dict[str, Any] = {
        "server_url": emulator.url,
        "site": SITE,
        "sign_in": TokenSignIn(name=TOKEN_NAME, secret=TOKEN_SECRET),
        "retry_initial_delay_seconds": 0.01,
        "retry_max_delay_seconds": 0.05,
        "job_poll_initial_seconds": 0.02,
        "job_poll_max_seconds": 0.1,
        "job_timeout_seconds": 30.0,
        "timeout_seconds": 30.0,
    }
    return TableauServerResource(**{**config, **overrides})


@pytest.fixture
def client(emulator: Emulator) -> Iterator[TableauClient]:
    with settings(emulator).client() as signed:
        yield signed


def rows(ids: range) -> list[tuple[int, str]]:
    """Sale rows, sorted as `hyper_files.read` sorts them."""
    return sorted(((i, f"sale {i}") for i in ids), key=repr)


def sales(hyper_files: Any, path: Path, ids: range, extra: bool = True) -> Path:
    """A two-table extract: Extract.sales with `ids`, and Extract.regions, which `sales.id`
    references (one star, as Tableau takes it)."""
    tables = {("Extract", "sales"): (COLUMNS, rows(ids))}
    if not extra:
        return hyper_files.create(path, tables)
    tables[("Extract", "regions")] = (REGION, [(1, "north"), (2, "south")])
    return hyper_files.create(path, tables, references=[("sales", "id", "regions")])


def stored(hyper_files: Any, emulator: Emulator, name: str) -> dict[str, list[tuple]]:
    return hyper_files.read(emulator.site_dir(SITE) / f"{name}.hyper")


def publish(client: TableauClient, path: Path, name: str, **kwargs: Any) -> Any:
    return client.publish_file(path, name, client.project("Default").id, **kwargs)


# --- sign-in, versions, projects ---------------------------------------------------------------


def test_sign_in_is_lazy_and_the_version_comes_from_serverinfo(emulator: Emulator) -> None:
    with settings(
        emulator, sign_in=TokenSignIn(name=TOKEN_NAME, secret=WRONG_SECRET)
    ).client() as client:
        assert client.api_version == "3.28"  # serverinfo needs no sign-in
        with pytest.raises(TableauSignInError):
            client.project("Default")


def test_a_configured_version_skips_serverinfo(emulator: Emulator) -> None:
    emulator.faults.fail_requests("GET", r"/serverinfo", status=500, count=100)
    with settings(emulator, api_version="3.20", max_retries=0).client() as client:
        assert client.api_version == "3.20"
        assert client.project("Default").name == "Default"


def test_a_server_too_old_for_updates_is_refused_up_front(
    tmp_path: Path, hyper: SharedHyper
) -> None:
    with (
        Emulator(
            tmp_path, tokens={TOKEN_NAME: TOKEN_SECRET}, hyper=hyper, api_version="3.11"
        ) as old,
        settings(old).client() as client,
        pytest.raises(ConfigurationError, match=r"needs 3\.12"),
    ):
        client.update_data("any", [], request_id="r")


def test_a_wrong_secret_is_a_clear_error_that_never_shows_the_secret(
    emulator: Emulator, records: list[logging.LogRecord]
) -> None:
    resource = settings(emulator, sign_in=TokenSignIn(name=TOKEN_NAME, secret=WRONG_SECRET))
    with resource.client() as client, pytest.raises(TableauSignInError) as refused:
        client.project("Default")
    err = refused.value
    assert (err.status, err.code) == (401, "401001")
    assert "Check the personal access token name and secret" in str(err)
    assert "'ci'" in str(err)  # names the token, not its secret
    shown = [str(err), repr(err), repr(resource), str(resource)]
    shown += [record.getMessage() for record in records]
    assert records and not [text for text in shown if WRONG_SECRET in text]


def test_a_401_signs_in_again_once_and_then_gives_up(
    client: TableauClient, emulator: Emulator
) -> None:
    emulator.faults.fail_requests("GET", r"/projects$", status=401, count=1)
    assert client.project("Default").name == "Default"
    emulator.faults.fail_requests("GET", r"/projects$", status=401, count=3)
    with pytest.raises(TableauSignInError, match="Check the personal access token"):
        client.project("Default")
    assert client.project("Default").name == "Default"  # the third 401, then a new session


def test_a_project_in_another_case_is_found_when_only_one_matches(
    client: TableauClient, emulator: Emulator
) -> None:
    tsc = TSC.Server(emulator.url, use_server_version=True)
    tsc.auth.sign_in(TSC.PersonalAccessTokenAuth(*RAW_TOKEN, site_id=SITE))
    finance = tsc.projects.create(TSC.ProjectItem("Finance"))
    sales = tsc.projects.create(TSC.ProjectItem("Sales"))
    tsc.projects.create(TSC.ProjectItem("Reports", parent_id=finance.id))
    loud = tsc.projects.create(TSC.ProjectItem("REPORTS", parent_id=sales.id))
    tsc.auth.sign_out()

    assert client.project("default").path == "Default"
    assert client.project("sales/reports") == Project(loud.id, "REPORTS", sales.id, "Sales/REPORTS")
    assert client.project("REPORTS").id == loud.id  # an exact match wins
    with pytest.raises(AmbiguousProjectError, match="regardless of case") as several:
        client.project("reports")
    assert several.value.candidates == ["Finance/Reports", "Sales/REPORTS"]
    assert "in its exact case" in str(several.value)

    with settings(emulator, project_match_case=True).client() as strict:
        with pytest.raises(ProjectNotFoundError, match="no project 'sales/reports'") as none:
            strict.project("sales/reports")
        assert none.value.candidates == ["Finance/Reports", "Sales/REPORTS"]


def test_project_paths_name_nested_projects_and_ambiguity_lists_candidates(
    client: TableauClient, emulator: Emulator, hyper_files: Any, tmp_path: Path
) -> None:
    tsc = TSC.Server(emulator.url, use_server_version=True)  # a client nobody here wrote
    tsc.auth.sign_in(TSC.PersonalAccessTokenAuth(*RAW_TOKEN, site_id=SITE))
    top = tsc.projects.create(TSC.ProjectItem("Sales"))
    marketing = tsc.projects.create(TSC.ProjectItem("Marketing"))
    emea = tsc.projects.create(TSC.ProjectItem("EMEA", parent_id=top.id))
    tsc.projects.create(TSC.ProjectItem("EMEA", parent_id=marketing.id))  # same name, other parent
    with pytest.raises(TSC.ServerResponseError) as twin:
        tsc.projects.create(TSC.ProjectItem("EMEA", parent_id=top.id))
    assert twin.value.code == "409006"
    tsc.auth.sign_out()

    assert client.project("Default").path == "Default"
    assert client.project("Sales/EMEA") == Project(emea.id, "EMEA", top.id, "Sales/EMEA")
    assert client.project("/Sales").id == top.id
    with pytest.raises(AmbiguousProjectError, match="2 projects matching 'EMEA'") as several:
        client.project("EMEA")
    assert several.value.candidates == ["Marketing/EMEA", "Sales/EMEA"]
    with pytest.raises(ProjectNotFoundError) as none:
        client.project("Asia/EMEA")
    assert none.value.candidates == ["Marketing/EMEA", "Sales/EMEA"]
    with pytest.raises(ProjectNotFoundError, match="no project 'Finance'") as none:
        client.project("Finance")
    assert none.value.candidates == [
        "Default",
        "Marketing",
        "Marketing/EMEA",
        "Sales",
        "Sales/EMEA",
    ]

    local = sales(hyper_files, tmp_path / "s.hyper", range(3))
    nested = client.publish_file(local, "ds", emea.id)
    found = client.find_datasource("ds", emea.id)
    assert found is not None and replace(found, webpage_url=None) == nested
    assert client.find_datasource("ds", client.project("Default").id) is None
    stored_at = emulator.site_dir(SITE) / "projects" / "Sales" / "EMEA" / "ds.hyper"
    assert hyper_files.read(stored_at) == hyper_files.read(local)


def test_sites_keep_their_own_data_and_a_session_serves_only_its_site(
    client: TableauClient, emulator: Emulator, hyper_files: Any, tmp_path: Path
) -> None:
    on_site = publish(client, sales(hyper_files, tmp_path / "a.hyper", range(3)), "ds")
    raw = TokenSignIn(name=RAW_TOKEN[0], secret=RAW_TOKEN[1])
    default = settings(emulator, site="", sign_in=raw)
    with default.client() as other:
        assert other.find_datasource("ds", other.project("Default").id) is None
        on_default = publish(other, sales(hyper_files, tmp_path / "b.hyper", range(5, 7)), "ds")
        assert on_default.id != on_site.id
        with pytest.raises(TableauRequestError) as refused:  # the other site's data source
            other.update_data(on_site.id, WINDOW, request_id="elsewhere")
        assert (refused.value.status, refused.value.code) == (404, "404011")
        other._site_id = emulator.site_id(SITE)  # a path with the other site's id
        with pytest.raises(TableauRequestError) as forbidden:
            other.find_datasource("ds", on_site.project_id)
        assert (forbidden.value.status, forbidden.value.code) == (403, "403000")
    assert emulator.site_id("") != emulator.site_id(SITE)
    assert stored(hyper_files, emulator, "ds")["Extract.sales"] == rows(range(3))
    default_copy = hyper_files.read(emulator.site_dir("") / "ds.hyper")
    assert default_copy["Extract.sales"] == rows(range(5, 7))
    with (
        settings(emulator, site="nowhere").client() as lost,
        pytest.raises(TableauSignInError, match="no site with content URL 'nowhere'"),
    ):
        lost.project("Default")


# --- Connected Apps ------------------------------------------------------------------------------


def connected_app(emulator: Emulator, app: dict[str, Any] | None = None, **overrides: Any) -> Any:
    """A resource signing in through the emulator's Connected App `APP`, `app` changed."""
    fields = {
        "client_id": APP.client_id,
        "secret_id": APP.secret_id,
        "secret_value": APP.secret_value,
        "username": "etl@example.com",
        **(app or {}),
    }
    return settings(emulator, sign_in=ConnectedAppSignIn(**fields), **overrides)


def test_a_connected_app_publishes_and_signs_in_again_with_a_fresh_jwt_on_401(
    emulator: Emulator, hyper_files: Any, tmp_path: Path, records: list[logging.LogRecord]
) -> None:
    local = sales(hyper_files, tmp_path / "s.hyper", range(2000))
    payload = hyper_files.create(
        tmp_path / "payload.hyper", {("Extract", "new_sales"): (COLUMNS, rows(range(10, 13)))}
    )
    resource = connected_app(emulator, upload_chunk_bytes=local.stat().st_size // 3 + 1)
    with resource.client() as client:
        # the session ends after every chunk, and before the first poll of the job
        source = publish(client, local, "app", on_progress=lambda *_: emulator.expire_tokens())
        emulator.faults.expire_sessions_before("GET", r"/jobs/")
        job = client.update_data(source.id, WINDOW[1:], request_id="app-1", payload=payload)
        assert client.wait_for_job(job.id).finish_code == 0
    signed_in = [r.getMessage() for r in records if r.getMessage().startswith("Signed in")]
    assert (
        len(signed_in) >= 5 and "connected app 'app-client-id' as 'etl@example.com'" in signed_in[0]
    )
    expected = sorted(rows(range(2000)) + rows(range(10, 13)), key=repr)
    assert stored(hyper_files, emulator, "app")["Extract.sales"] == expected
    shown = [r.getMessage() for r in records] + [repr(resource), str(resource)]
    assert not [text for text in shown if APP.secret_value in text or "eyJ" in text]


def test_a_sign_in_whose_reply_was_lost_is_sent_again_with_a_fresh_jwt(
    emulator: Emulator, records: list[logging.LogRecord]
) -> None:
    """The emulator takes a JWT once (its `jti`), as a server guarding against replays
    may: the retry after a lost reply must carry a JWT of its own."""
    emulator.faults.drop_after_accept("POST", r"/auth/signin$")
    with connected_app(emulator).client() as client:
        assert client.project("Default").name == "Default"
    assert [r.getMessage() for r in records if r.getMessage().startswith("Signed in")]


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        ({"secret_value": "not-the-secret"}, "signature does not verify"),
        ({"secret_id": "other-secret"}, "unknown connected app or secret"),
        ({"client_id": "other-app"}, "unknown connected app or secret"),
    ],
)
def test_a_wrong_connected_app_secret_is_refused(
    emulator: Emulator, overrides: dict[str, str], message: str
) -> None:
    with (
        connected_app(emulator, overrides).client() as client,
        pytest.raises(TableauSignInError, match=message) as refused,
    ):
        client.project("Default")
    assert refused.value.code == "401001" and "Connected App" in str(refused.value)


def test_the_emulator_checks_the_jwts_expiry_audience_and_scopes(emulator: Emulator) -> None:
    def sign_in(jwt: str) -> httpx.Response:
        body = {"credentials": {"jwt": jwt, "site": {"contentUrl": SITE}}}
        return httpx.post(f"{emulator.url}/api/3.28/auth/signin", json=body, headers=JSON)

    app = (APP.client_id, APP.secret_id, APP.secret_value, "etl@example.com")
    expired = sign_in(connected_app_jwt(*app, lifetime_seconds=-5))
    assert expired.status_code == 401 and "has expired" in expired.json()["error"]["detail"]
    header, claims, _ = connected_app_jwt(*app).split(".")
    wrong = json.loads(base64.urlsafe_b64decode(claims + "=="))
    wrong["aud"] = "someone-else"
    forged = f"{header}.{b64url(json.dumps(wrong).encode())}"
    forged += "." + hs256(forged, APP.secret_value.encode())
    assert "wrong audience" in sign_in(forged).json()["error"]["detail"]

    reader = connected_app(emulator, {"scopes": ["tableau:content:read"]})
    with reader.client() as client:
        assert client.project("Default").name == "Default"
        with pytest.raises(TableauRequestError, match="tableau:file_uploads:create") as denied:
            client.upload_file(Path(__file__))
    assert (denied.value.status, denied.value.code) == (403, "403000")
    with connected_app(
        emulator, {"scopes": ["tableau:content:read", "tableau:file_uploads:*"]}
    ).client() as c:
        assert c.upload_file(Path(__file__))


def app_sign_in(secret_value: str = APP.secret_value) -> ConnectedAppSignIn:
    return ConnectedAppSignIn(
        client_id=APP.client_id,
        secret_id=APP.secret_id,
        secret_value=secret_value,
        username="etl@example.com",
    )


@pytest.mark.parametrize(
    ("sign_in", "secret"),
    [
        pytest.param(
            lambda env: TokenSignIn(name=TOKEN_NAME, secret=env), TOKEN_SECRET, id="token"
        ),
        pytest.param(app_sign_in, APP.secret_value, id="connected-app"),
    ],
)
def test_a_secret_can_come_from_an_env_var_in_a_dagster_run(
    emulator: Emulator,
    monkeypatch: pytest.MonkeyPatch,
    records: list[logging.LogRecord],
    sign_in: Callable[[str], TokenSignIn | ConnectedAppSignIn],
    secret: str,
) -> None:
    monkeypatch.setenv("TEST_TABLEAU_SECRET", secret)
    resource = settings(emulator, sign_in=sign_in(dg.EnvVar("TEST_TABLEAU_SECRET")))

    @dg.asset
    def project_id(tableau: TableauServerResource) -> str:
        with tableau.client() as client:
            return client.project("Default").id

    result = dg.materialize([project_id], resources={"tableau": resource})
    assert result.output_for_node("project_id")
    assert secret not in repr(resource)
    with resource.client() as outside:  # outside a run the EnvVar is read by the client
        assert outside.project("Default").name == "Default"
    assert not [r for r in records if secret in r.getMessage()]


def test_run_config_picks_the_way_to_sign_in_by_its_key(
    emulator: Emulator, monkeypatch: pytest.MonkeyPatch, records: list[logging.LogRecord]
) -> None:
    """In run config (or YAML) the sign-in is `{token: {...}}` or `{connected_app: {...}}`;
    both, or the old flat fields, are refused by Dagster naming `sign_in`."""
    monkeypatch.setenv("TEST_TABLEAU_SECRET", APP.secret_value)

    @dg.asset
    def project_id(tableau: TableauServerResource) -> str:
        with tableau.client() as client:
            return client.project("Default").id

    tableau = TableauServerResource.configure_at_launch()
    job = dg.Definitions(assets=[project_id], resources={"tableau": tableau})
    run = job.resolve_implicit_global_asset_job_def().execute_in_process

    def config(**fields: Any) -> dict[str, Any]:
        server = {"server_url": emulator.url, "site": SITE, **fields}
        return {"resources": {"tableau": {"config": server}}}

    app = {
        "client_id": APP.client_id,
        "secret_id": APP.secret_id,
        "secret_value": {"env": "TEST_TABLEAU_SECRET"},
        "username": "etl@example.com",
    }
    token = {"name": TOKEN_NAME, "secret": TOKEN_SECRET}
    assert run(run_config=config(sign_in={"connected_app": app})).success
    assert run(run_config=config(sign_in={"token": token})).success
    signed_in = [r.getMessage() for r in records if r.getMessage().startswith("Signed in")]
    assert "with connected app 'app-client-id' as 'etl@example.com'" in signed_in[0]
    assert f"with token {TOKEN_NAME!r}" in signed_in[-1]
    for wrong in (
        config(sign_in={"token": token, "connected_app": app}),
        config(token_name=TOKEN_NAME, token_secret=TOKEN_SECRET),
    ):
        with pytest.raises(dg.DagsterInvalidConfigError, match="sign_in") as refused:
            run(run_config=wrong)
        assert TOKEN_SECRET not in str(refused.value)


def test_the_old_flat_sign_in_fields_are_a_clear_error_naming_sign_in(emulator: Emulator) -> None:
    with pytest.raises(ConfigurationError, match=r"token_name -> sign_in=TokenSignIn\(name") as old:
        TableauServerResource(
            server_url=emulator.url, token_name=TOKEN_NAME, token_secret=WRONG_SECRET
        )
    assert "token_secret -> sign_in=TokenSignIn(secret=...)" in str(old.value)
    assert WRONG_SECRET not in str(old.value)
    with pytest.raises(ConfigurationError, match=r"username -> sign_in=ConnectedAppSignIn\("):
        TableauServerResource(
            server_url=emulator.url, connected_app_client_id=APP.client_id, username="etl"
        )


@pytest.mark.parametrize(
    ("sign_in", "found"),
    [
        ({}, "is missing"),
        ({"sign_in": None}, "is missing"),
        ({"sign_in": TOKEN_SECRET}, "is a str"),
        (
            {"sign_in": {"name": TOKEN_NAME, "secret": TOKEN_SECRET}},
            "is a dict with keys ['name', 'secret']",
        ),
        ({"sign_in": TokenSignIn}, "is the class TokenSignIn, not an instance"),
    ],
)
def test_a_missing_or_wrong_sign_in_says_what_to_pass(sign_in: dict, found: str) -> None:
    """Was pydantic's "Input should be a valid dictionary or object to extract fields from"
    (or Dagster's "Object None is not a dict"); the secret is never shown."""
    with pytest.raises(ConfigurationError) as refused:
        TableauServerResource(server_url="https://tableau.example.com", site=SITE, **sign_in)
    assert str(refused.value) == (
        f"TableauServerResource's sign_in {found}; pass sign_in=TokenSignIn(name=..., "
        "secret=dagster.EnvVar(...)) or sign_in=ConnectedAppSignIn(client_id=..., "
        "secret_id=..., secret_value=dagster.EnvVar(...), username=...), both from hyper_assets."
    )
    assert TOKEN_SECRET not in str(refused.value)


def test_sign_in_in_run_config_form_still_configures_the_resource() -> None:
    """Dagster's own form of the union, one key naming the way to sign in, passes the check."""
    tableau = TableauServerResource(
        server_url="https://tableau.example.com",
        sign_in={"token": {"name": TOKEN_NAME, "secret": TOKEN_SECRET}},
    )
    assert tableau.sign_in == TokenSignIn(name=TOKEN_NAME, secret=TOKEN_SECRET)


# --- publishing ---------------------------------------------------------------------------------


def test_publish_creates_then_overwrites_and_refuses_without_overwrite(
    client: TableauClient, emulator: Emulator, hyper_files: Any, tmp_path: Path
) -> None:
    name = "Verkäufe & Co, 2024"  # escaping: XML, the name filter, the file name
    first = sales(hyper_files, tmp_path / "v1.hyper", range(3))
    created = publish(client, first, name)
    assert created.name == name and created.project_id == client.project("Default").id
    assert stored(hyper_files, emulator, name) == hyper_files.read(first)
    # The list gives the data source's page, the reply to the publish does not: as recorded.
    found = client.find_datasource(name, created.project_id)
    assert created.webpage_url is None and found is not None and found.webpage_url
    assert replace(found, webpage_url=None) == created
    assert client.find_datasource("absent", created.project_id) is None

    second = sales(hyper_files, tmp_path / "v2.hyper", range(10, 12), extra=False)
    with pytest.raises(DataSourceExistsError) as refused:
        publish(client, second, name)
    assert refused.value.code == "403007" and "overwrite=True" in str(refused.value)
    assert stored(hyper_files, emulator, name) == hyper_files.read(first)

    overwritten = publish(client, second, name, overwrite=True)
    assert overwritten.id == created.id
    assert stored(hyper_files, emulator, name) == {
        "Extract.sales": [(10, "sale 10"), (11, "sale 11")]
    }


def test_a_file_is_uploaded_in_several_chunks(
    emulator: Emulator, hyper_files: Any, tmp_path: Path
) -> None:
    local = sales(hyper_files, tmp_path / "big.hyper", range(5000))
    size = local.stat().st_size
    progress: list[tuple[int, int]] = []
    with settings(emulator, upload_chunk_bytes=size // 5 + 1).client() as client:
        publish(
            client, local, "chunked", on_progress=lambda done, total: progress.append((done, total))
        )
    assert len(progress) == 5 and progress[-1] == (size, size)
    assert (emulator.site_dir(SITE) / "chunked.hyper").read_bytes() == local.read_bytes()
    assert stored(hyper_files, emulator, "chunked") == hyper_files.read(local)


def test_a_file_above_the_threshold_is_published_as_a_job_polled_to_its_end(
    emulator: Emulator, hyper_files: Any, tmp_path: Path, records: list[logging.LogRecord]
) -> None:
    first = sales(hyper_files, tmp_path / "v1.hyper", range(3))
    second = sales(hyper_files, tmp_path / "v2.hyper", range(7, 9), extra=False)
    with settings(emulator, publish_as_job_bytes=first.stat().st_size - 1).client() as client:
        created = publish(client, first, "big")
        assert stored(hyper_files, emulator, "big") == hyper_files.read(first)
        messages = [r.getMessage() for r in records]
        assert any("runs as Tableau job" in m for m in messages)
        assert any(m.startswith("Publish job ") and m.endswith(": 100%") for m in messages)
        with pytest.raises(DataSourceExistsError):  # refused before a job is queued
            publish(client, second, "big")
        emulator.faults.fail_next_job("backgrounder out of disk")
        # A publish job has no element for notes in REST API 3.28: the server gives none.
        with pytest.raises(
            TableauJobError, match=r"gave no notes.*Jobs page.*publish again"
        ) as failed:
            publish(client, second, "big", overwrite=True)
        assert failed.value.finish_code == 1
        assert stored(hyper_files, emulator, "big") == hyper_files.read(first)
        assert publish(client, second, "big", overwrite=True).id == created.id
    assert stored(hyper_files, emulator, "big") == hyper_files.read(second)
    leftovers = [p for p in (emulator.data_dir / ".emulator").rglob("*") if p.is_file()]
    assert leftovers == []


def test_a_503_during_upload_is_retried(
    emulator: Emulator, hyper_files: Any, tmp_path: Path
) -> None:
    local = sales(hyper_files, tmp_path / "s.hyper", range(2000))
    emulator.faults.fail_requests("PUT", r"/fileUploads/", status=503, count=2)
    with settings(emulator, upload_chunk_bytes=local.stat().st_size // 3 + 1).client() as client:
        publish(client, local, "retried")
    assert stored(hyper_files, emulator, "retried") == hyper_files.read(local)


def test_a_chunk_without_answer_restarts_the_upload_and_nothing_is_appended_twice(
    emulator: Emulator, hyper_files: Any, tmp_path: Path, records: list[logging.LogRecord]
) -> None:
    local = sales(hyper_files, tmp_path / "s.hyper", range(2000))
    emulator.faults.drop_after_accept("PUT", r"/fileUploads/")  # appended, then hung up
    with settings(emulator, upload_chunk_bytes=local.stat().st_size // 3 + 1).client() as client:
        publish(client, local, "restarted")
    assert [r for r in records if "starting over" in r.getMessage()]
    assert (emulator.site_dir(SITE) / "restarted.hyper").read_bytes() == local.read_bytes()


def test_a_publish_without_answer_is_not_repeated(
    client: TableauClient, emulator: Emulator, hyper_files: Any, tmp_path: Path
) -> None:
    local = sales(hyper_files, tmp_path / "s.hyper", range(3))
    emulator.faults.drop_after_accept("POST", r"/datasources$")
    with pytest.raises(TableauConnectionError) as lost:
        publish(client, local, "lost")
    assert lost.value.maybe_applied and "overwrite=True" in str(lost.value)
    assert publish(client, local, "lost", overwrite=True).name == "lost"
    assert stored(hyper_files, emulator, "lost") == hyper_files.read(local)


def test_token_expiry_mid_upload_signs_in_again_and_continues(
    emulator: Emulator, hyper_files: Any, tmp_path: Path, records: list[logging.LogRecord]
) -> None:
    local = sales(hyper_files, tmp_path / "s.hyper", range(2000))
    with settings(emulator, upload_chunk_bytes=local.stat().st_size // 3 + 1).client() as client:
        publish(client, local, "expiring", on_progress=lambda done, total: emulator.expire_tokens())
        emulator.expire_tokens()
        assert client.find_datasource("expiring", client.project("Default").id)
    # after chunks 1 and 2 (the next chunk), chunk 3 (the publish), then the project lookup
    assert len([r for r in records if "signing in again" in r.getMessage()]) == 4
    assert stored(hyper_files, emulator, "expiring") == hyper_files.read(local)


# --- data updates and jobs ---------------------------------------------------------------------


@pytest.fixture
def published(client: TableauClient, hyper_files: Any, tmp_path: Path) -> tuple[str, Path]:
    """Data source `ds` with sales 0..9; returns its id and a payload holding sales 10..12."""
    source = publish(client, sales(hyper_files, tmp_path / "ds.hyper", range(10)), "ds")
    payload = hyper_files.create(
        tmp_path / "payload.hyper",
        {("Extract", "new_sales"): (COLUMNS, rows(range(10, 13)))},
    )
    return source.id, payload


WINDOW = [
    Delete(target_table="sales", condition=Lt(target_col="id", const=Const.integer(5))),
    Insert(source_table="new_sales", target_table="sales"),
]
EXPECTED = rows(range(5, 13))


def test_an_update_with_a_payload_polls_to_success(
    client: TableauClient, emulator: Emulator, hyper_files: Any, published: tuple[str, Path]
) -> None:
    ds_id, payload = published
    emulator.faults.pause_jobs()
    job = client.update_data(ds_id, WINDOW, request_id="window-1", payload=payload)
    assert job.completed_at is None and job.finish_code is None
    seen: list[Job] = []
    emulator.faults.resume_jobs()
    done = client.wait_for_job(job.id, on_progress=seen.append)
    assert (done.finish_code, done.progress) == (0, 100) and done.completed_at
    assert seen[-1] == done
    assert stored(hyper_files, emulator, "ds")["Extract.sales"] == EXPECTED
    assert stored(hyper_files, emulator, "ds")["Extract.regions"] == [(1, "north"), (2, "south")]


def test_a_dropped_reply_after_the_patch_is_retried_with_the_same_request_id(
    client: TableauClient, emulator: Emulator, hyper_files: Any, published: tuple[str, Path]
) -> None:
    ds_id, payload = published
    emulator.faults.drop_after_accept("PATCH", r"/data$")
    job = client.update_data(ds_id, WINDOW, request_id="window-once", payload=payload)
    client.wait_for_job(job.id)
    again = client.update_data(ds_id, WINDOW, request_id="window-once", payload=payload)
    assert again.id == job.id  # a rerun with the same RequestID gets the original job
    assert stored(hyper_files, emulator, "ds")["Extract.sales"] == EXPECTED


def test_a_failing_job_raises_with_its_notes(
    client: TableauClient, emulator: Emulator, hyper_files: Any, published: tuple[str, Path]
) -> None:
    ds_id, payload = published
    emulator.faults.fail_next_job("backgrounder out of disk")
    job = client.update_data(ds_id, WINDOW, request_id="doomed", payload=payload)
    with pytest.raises(TableauJobError) as failed:
        client.wait_for_job(job.id)
    assert (failed.value.finish_code, failed.value.notes) == (1, "backgrounder out of disk")
    assert "backgrounder out of disk" in str(failed.value) and "new RequestID" in str(failed.value)

    wrong_table = [Insert(source_table="nope", target_table="sales")]
    job = client.update_data(ds_id, wrong_table, request_id="no-table", payload=payload)
    with pytest.raises(TableauJobError, match=r"action 0 \(insert\).*nope"):
        client.wait_for_job(job.id)
    assert stored(hyper_files, emulator, "ds")["Extract.sales"] == rows(range(10))


def test_a_cancelled_job_raises(
    client: TableauClient, emulator: Emulator, published: tuple[str, Path]
) -> None:
    ds_id, _ = published
    emulator.faults.pause_jobs()
    everything = [
        Delete(target_table="sales", condition=Eq(target_col="id", const=Const.integer(1)))
    ]
    job = client.update_data(ds_id, everything, request_id="cancel-me")
    client.cancel_job(job.id)
    emulator.faults.resume_jobs()
    with pytest.raises(TableauJobCancelledError, match="was cancelled"):
        client.wait_for_job(job.id)


def test_a_payload_above_the_limit_says_to_lower_the_batch_size(
    client: TableauClient, published: tuple[str, Path], tmp_path: Path
) -> None:
    ds_id, _ = published
    too_big = tmp_path / "too_big.hyper"
    too_big.write_bytes(os.urandom(2**20 + 1))
    with pytest.raises(PayloadTooLargeError, match="Lower the batch size") as refused:
        client.update_data(ds_id, WINDOW, request_id="big", payload=too_big)
    assert (refused.value.status, refused.value.code) == (413, "413000")


# --- retries ------------------------------------------------------------------------------------


def test_429_waits_as_long_as_retry_after_says(client: TableauClient, emulator: Emulator) -> None:
    emulator.faults.fail_requests("GET", r"/projects$", status=429, retry_after=1)
    started = time.monotonic()
    assert client.project("Default").name == "Default"
    assert time.monotonic() - started >= 1.0


def test_retries_are_bounded_in_count_and_time(
    emulator: Emulator, records: list[logging.LogRecord]
) -> None:
    emulator.faults.fail_requests("GET", r"/projects$", status=503, count=10)
    with (
        settings(emulator, max_retries=2).client() as client,
        pytest.raises(TableauRequestError, match="kept failing") as failed,
    ):
        client.project("Default")
    assert failed.value.status == 503
    retries = [r.getMessage() for r in records if "answered 503; retry" in r.getMessage()]
    assert len(retries) == 2  # two retries, then the third 503 is raised
    with (
        settings(emulator, retry_max_total_seconds=0.0).client() as client,
        pytest.raises(TableauRequestError),
    ):
        client.project("Default")


@pytest.mark.parametrize("host", ["127.0.0.1", "localhost"])
def test_an_unreachable_server_is_a_connection_error_naming_it(
    emulator: Emulator, host: str
) -> None:
    with socket.socket() as unused:
        unused.bind(("127.0.0.1", 0))
        port = unused.getsockname()[1]
    with (
        settings(emulator, server_url=f"http://{host}:{port}", max_retries=1).client() as c,
        pytest.raises(TableauConnectionError, match="Check server_url") as lost,
    ):
        c.project("Default")
    assert str(lost.value).startswith(f"Tableau server {host}:{port}: GET ")
    assert not lost.value.maybe_applied


@pytest.mark.parametrize(
    ("server_url", "problem"),
    [
        ("tableau.example.com", "'tableau.example.com': it does not start with http://"),
        ("ftp://tableau.example.com", "'ftp://tableau.example.com': it does not start with"),
        ("https://", "'https://': it names no host"),
        ("https://etl:pa55word@/", "'https:/': it names no host"),
        ("https://tableau.example.com:99999", "its port 99999 is not one of 1 to 65535"),
        ("https://[::1", "server_url: httpx cannot read it: Invalid port: ':1'"),
    ],
)
def test_a_server_url_httpx_cannot_send_to_is_refused_when_the_client_is_made(
    server_url: str, problem: str
) -> None:
    """Before any request (which would fail only after every retry, or be taken as sent
    and maybe applied): the URL quoted without its user and password."""
    resource = TableauServerResource(
        server_url=server_url, sign_in=TokenSignIn(name="n", secret="s")
    )
    with pytest.raises(ConfigurationError, match="Give the server's base URL") as refused:
        resource.client()
    assert problem in str(refused.value) and "pa55word" not in str(refused.value)


PUBLISH_AND_REPORT_PEAK = """
import resource, sys
from hyper_assets import TableauServerResource, TokenSignIn

url, path, chunk = sys.argv[1:]
tableau = TableauServerResource(
    server_url=url, site="analytics", sign_in=TokenSignIn(name="ci", secret="s3cret-tøken"),
    upload_chunk_bytes=int(chunk), timeout_seconds=600, job_poll_initial_seconds=0.05,
)
with tableau.client() as client:
    client.publish_file(path, "huge", client.project("Default").id, overwrite=True)
print(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024)
"""


@pytest.mark.slow
def test_a_publish_of_several_gigabytes_keeps_the_clients_memory_flat(
    emulator: Emulator, tmp_path: Path
) -> None:
    """Peak RSS of a client process publishing 256 MB and 3 GB (both as jobs) is about the
    same: the file is read and sent a chunk at a time."""
    chunk = 50 * 2**20  # the default

    def peak(size: int) -> int:
        path = tmp_path / f"{size}.hyper"
        with path.open("wb") as file:  # sparse: costs no disk until uploaded
            file.truncate(size)
        child = subprocess.run(
            [sys.executable, "-c", PUBLISH_AND_REPORT_PEAK, emulator.url, str(path), str(chunk)],
            capture_output=True,
            text=True,
            timeout=900,
            check=True,
        )
        assert emulator.datasource_file("huge", "Default", SITE).stat().st_size == size
        path.unlink()
        return int(child.stdout.split()[-1])

    small, big = peak(256 * 2**20), peak(3 * 2**30)
    # Idle, the two peaks are within 25 MB (352-377 MB measured); on a loaded machine the
    # allocator's timing has added 150-200 MB to one run, so a second run is the check then
    # (the lower peak counts). Reading the file whole, or keeping each of the 3 GB's 61
    # chunks, would add gigabytes to both; keeping 3 MB per chunk would still fail.
    if big - small >= 4 * chunk:
        big = min(big, peak(3 * 2**30))
    assert big - small < 4 * chunk, f"peak RSS {small / 2**20:.0f} MB vs {big / 2**20:.0f} MB"


def test_the_servers_reply_to_two_facts_maps_to_data_model_error(
    client: TableauClient, hyper_files: Any, tmp_path: Path
) -> None:
    """Two unrelated tables are two facts: the server's 400000 is the local check's error."""
    path = sales(hyper_files, tmp_path / "two.hyper", range(3), extra=False)
    with Connection(hyper_files.hyper.endpoint, path) as connection:
        connection.execute_command('CREATE TABLE "Extract"."other" (x INT)')
    with pytest.raises(TableauRequestError) as refused:
        client.publish_file(path, "two", client.project("Default").id)
    assert refused.value.status == 400
    mapped = server_refusal(refused.value, "two")
    assert isinstance(mapped, DataModelError)
    assert "exactly one fact table" in str(mapped) and "tables=[...]" in str(mapped)
    other = TableauRequestError(400, "400000", "Bad Request", "bad name", call="publish")
    assert server_refusal(other, "two") is None
