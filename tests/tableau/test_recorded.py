"""`TableauClient` against replies recorded from real Tableau servers, over loopback HTTP.

The replies in `recorded/` come from tableauserverclient's test assets (see its README);
a small server answers each request with one of them, so the client is checked against
what real servers send rather than against our own emulator.
"""

from __future__ import annotations

import json
import re
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import dagster as dg
import pyarrow as pa
import pytest

from hyper_assets import HyperIOManager
from hyper_assets.errors import (
    TableauConnectionError,
    TableauError,
    TableauJobError,
    TableauRequestError,
    TableauSignInError,
    UnexpectedReplyError,
)
from hyper_assets.tableau._dagster.assets import tableau_datasource_asset
from hyper_assets.tableau._dagster.resource import (
    ConnectedAppSignIn,
    TableauServerResource,
    TokenSignIn,
)
from hyper_assets.tableau._rest.client import TableauClient
from hyper_assets.tableau._rest.connected_app import signature, unb64url
from hyper_assets.tableau.actions import Always, Delete

RECORDED = Path(__file__).parent / "recorded"
XML = "application/xml;charset=UTF-8"
SITE_ID = "6b7179ba-b82b-4f0f-91ed-812074ac5da6"  # the site of auth_sign_in.xml
FAILED_JOB = "777bf7c4-421d-4b2c-a518-11b90187c545"


@dataclass
class Answer:
    status: int
    body: bytes
    content_type: str = XML
    encoding: str = ""  # the Content-Encoding the reply claims, if any


@dataclass
class Replay:
    """Answers requests matching (method, path regex) with queued answers, in order; the
    last answer of a route repeats. Unmatched requests get 599."""

    routes: list[tuple[str, re.Pattern[str], list[Answer]]] = field(default_factory=list)
    seen: list[str] = field(default_factory=list)
    bodies: list[bytes] = field(default_factory=list)  # of the requests, in order
    url: str = ""

    def on(self, method: str, path: str, *answers: Answer) -> None:
        self.routes.append((method, re.compile(path), list(answers)))

    def answer(self, method: str, path: str, body: bytes = b"") -> Answer:
        self.seen.append(f"{method} {path}")
        self.bodies.append(body)
        for want, pattern, answers in self.routes:
            if want == method and pattern.search(path):
                return answers.pop(0) if len(answers) > 1 else answers[0]
        return Answer(599, b"no recorded reply for " + path.encode(), "text/plain")


def recorded(name: str, status: int = 200) -> Answer:
    kind = "text/html" if name.endswith(".html") else XML
    return Answer(status, (RECORDED / name).read_bytes(), kind)


@pytest.fixture
def replay() -> Iterator[Replay]:
    state = Replay()

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def _serve(self) -> None:
            body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
            answer = state.answer(self.command, self.path, body)
            self.send_response(answer.status)
            self.send_header("Content-Type", answer.content_type)
            self.send_header("Content-Length", str(len(answer.body)))
            if answer.encoding:
                self.send_header("Content-Encoding", answer.encoding)
            self.end_headers()
            self.wfile.write(answer.body)

        do_GET = do_POST = do_PUT = do_PATCH = _serve

        def log_message(self, format: str, *args: Any) -> None:
            pass

    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    state.url = f"http://127.0.0.1:{httpd.server_address[1]}"
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    state.on("POST", r"/auth/signin$", recorded("auth_sign_in.xml"))
    state.on("POST", r"/auth/signout$", Answer(204, b""))
    yield state
    httpd.shutdown()
    httpd.server_close()


def replay_server(replay: Replay) -> TableauServerResource:
    """The resource for the replaying server: site Samples, no retries, fast job polls."""
    return TableauServerResource(
        server_url=replay.url,
        site="Samples",
        sign_in=TokenSignIn(name="ci", secret="s3cret"),
        api_version="3.14",
        max_retries=0,
        job_poll_initial_seconds=0.01,
        job_poll_max_seconds=0.02,
        job_timeout_seconds=10.0,
    )


@pytest.fixture
def client(replay: Replay) -> Iterator[TableauClient]:
    with replay_server(replay).client() as signed:
        yield signed


# --- sign-in ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "sign_in",
    [
        pytest.param(TokenSignIn(name="ci", secret="s3cret"), id="token"),
        pytest.param(
            ConnectedAppSignIn(
                client_id="app-id", secret_id="kid", secret_value="v4lue", username="etl@x.org"
            ),
            id="connected-app",
        ),
    ],
)
def test_each_way_to_sign_in_sends_its_credentials_and_reads_a_real_servers_reply(
    replay: Replay, sign_in: TokenSignIn | ConnectedAppSignIn
) -> None:
    replay.on("GET", r"/jobs/", recorded("job_get_by_id_completed.xml"))
    resource = TableauServerResource(
        server_url=replay.url, site="Samples", sign_in=sign_in, api_version="3.14", max_retries=0
    )
    with resource.client() as client:
        assert client.get_job(FAILED_JOB).finish_code == 3
    # the session of the recorded reply: its site id in the path, its token in the header
    assert replay.seen[:2] == [
        "POST /api/3.14/auth/signin",
        f"GET /api/3.14/sites/{SITE_ID}/jobs/{FAILED_JOB}",
    ]
    credentials = json.loads(replay.bodies[0])["credentials"]
    assert credentials.pop("site") == {"contentUrl": "Samples"}
    if isinstance(sign_in, TokenSignIn):
        assert credentials == {
            "personalAccessTokenName": "ci",
            "personalAccessTokenSecret": "s3cret",
        }
        return
    header, claims, signed = credentials.pop("jwt").split(".")
    assert credentials == {} and signed == signature(f"{header}.{claims}", "v4lue")
    assert json.loads(unb64url(header))["kid"] == "kid"
    claimed = json.loads(unb64url(claims))
    assert (claimed["iss"], claimed["sub"], claimed["aud"]) == ("app-id", "etl@x.org", "tableau")


# --- jobs ---------------------------------------------------------------------------------------


def test_notes_inside_the_job_type_element_are_read_and_quoted(
    client: TableauClient, replay: Replay
) -> None:
    replay.on("GET", r"/jobs/", recorded("job_get_by_id_failed_workbook.xml"))
    job = client.get_job("bb1aab79-db54-4e96-9dd3-461d8f081d08")
    assert job.notes and job.notes.startswith("java.lang.RuntimeException: [Microsoft]")
    assert (job.finish_code, job.progress) == (1, 100) and job.completed_at
    with pytest.raises(TableauJobError) as failed:
        client.wait_for_job(job.id)
    assert "Login failed for user" in str(failed.value) and failed.value.notes == job.notes
    assert f"GET /api/3.14/sites/{SITE_ID}/jobs/{job.id}" in replay.seen


def test_a_failed_job_without_notes_names_the_job_and_where_to_look(
    client: TableauClient, replay: Replay
) -> None:
    replay.on("GET", r"/jobs/", recorded("job_get_by_id_failed.xml"))
    with pytest.raises(TableauJobError) as failed:
        client.wait_for_job(FAILED_JOB)
    message = str(failed.value)
    assert failed.value.notes is None and failed.value.finish_code == 1
    assert f"Tableau gave no notes: look job {FAILED_JOB} up" in message
    assert f"{replay.url}/#/site/Samples/jobs" in message and "backgrounder logs" in message


def test_a_job_is_polled_until_completed_at_and_finish_code_3_is_success(
    client: TableauClient, replay: Replay
) -> None:
    replay.on(
        "GET",
        r"/jobs/",
        recorded("job_get_by_id_inprogress.xml"),
        recorded("job_get_by_id_inprogress.xml"),
        recorded("job_get_by_id_completed.xml"),
    )
    running = client.get_job(FAILED_JOB)
    assert (running.finish_code, running.progress, running.completed_at) == (None, 0, None)
    done = client.wait_for_job(FAILED_JOB)
    assert done.finish_code == 3 and done.notes == "Job detail notes"
    assert len([s for s in replay.seen if "/jobs/" in s]) == 3


def test_an_update_reply_is_a_queued_job(client: TableauClient, replay: Replay) -> None:
    replay.on(
        "PATCH", r"/data$", Answer(202, (RECORDED / "datasource_data_update.xml").read_bytes())
    )
    wipe = [Delete(target_table="Extract", condition=Always())]
    job = client.update_data("9dbd2263-16b5-46e1-9c43-a76bb8ab65fb", wipe, request_id="r1")
    assert job.id == "5c0ba560-c959-424e-b08a-f32ef0bfb737"
    assert (job.finish_code, job.completed_at, job.notes) == (None, None, None)


def test_an_async_publish_reply_has_finish_code_1_but_has_not_ended(
    client: TableauClient, replay: Replay
) -> None:
    replay.on("GET", r"/jobs/", recorded("datasource_publish_async.xml"))
    job = client.get_job("9a373058-af5f-4f83-8662-98b3e0228a73")
    assert job.finish_code == 1 and job.completed_at is None  # only completedAt ends a job


# --- data sources and their pages ---------------------------------------------------------------

SAMPLE_DS = "e76a1461-3b1d-4588-bf1b-17551a879ad9"  # "SampleDS" of project "default"


def test_a_listed_data_source_has_its_page_as_the_server_gives_it(
    client: TableauClient, replay: Replay
) -> None:
    replay.on("GET", r"/datasources\?", recorded("datasource_get_all_fields.xml"))
    found = client.find_datasource("Superstore Datasource", "669ca36b-492e-4ccf-bca1-3614fe6a9d7a")
    assert found is not None and found.id == "a71cdd15-3a23-4ec1-b3ce-9956f5e00bb7"
    assert found.webpage_url == "https://10ax.online.tableau.com/#/site/example/datasources/3566752"


def test_the_reply_to_a_publish_gives_no_page(
    client: TableauClient, replay: Replay, tmp_path: Path
) -> None:
    replay.on("POST", r"/fileUploads$", recorded("fileupload_initialize.xml", 201))
    replay.on("PUT", r"/fileUploads/", recorded("fileupload_append.xml"))
    replay.on("POST", r"/datasources\?", recorded("datasource_publish.xml", 201))
    local = tmp_path / "sample.hyper"
    local.write_bytes(b"the replay does not read it")
    source = client.publish_file(local, "SampleDS", "ee8c6e70-43b6-11e6-af4f-f7b0d8e20760")
    assert (source.id, source.name, source.webpage_url) == (SAMPLE_DS, "SampleDS", None)


@pytest.mark.parametrize("listing", ["as recorded", "without webpageUrl"])
def test_the_publish_asset_links_the_page_the_server_gives_and_never_makes_one_up(
    replay: Replay, tmp_path: Path, listing: str
) -> None:
    """A first publish: the list finds no data source, the file is uploaded and published
    (the reply has no page), then the list gives its page, or, stripped of it, none."""
    listed = (RECORDED / "datasource_get.xml").read_bytes()
    if listing != "as recorded":
        listed = re.sub(rb'\swebpageUrl="[^"]*"', b"", listed)
    replay.on("GET", r"/projects", recorded("project_get.xml"))
    replay.on("GET", r"/datasources\?", recorded("datasource_get_empty.xml"), Answer(200, listed))
    replay.on("POST", r"/fileUploads$", recorded("fileupload_initialize.xml", 201))
    replay.on("PUT", r"/fileUploads/", recorded("fileupload_append.xml"))
    replay.on("POST", r"/datasources\?", recorded("datasource_publish.xml", 201))

    @dg.asset
    def carriers() -> pa.Table:
        return pa.table({"carrier": ["AA", "UA"]})

    published = tableau_datasource_asset(datasource="SampleDS", project="default", deps=[carriers])
    database = tmp_path / "sample.hyper"
    resources = {
        "io_manager": HyperIOManager(database=str(database), staging_dir=str(tmp_path / "staging")),
        "tableau": replay_server(replay),
    }
    assert dg.materialize([carriers], resources=resources).success
    result = dg.materialize([carriers, published], selection=[published.key], resources=resources)
    (materialization,) = result.asset_materializations_for_node(published.op.name)
    metadata = materialization.metadata
    assert (metadata["publish"].value, metadata["datasource_id"].value) == ("full", SAMPLE_DS)
    link = metadata["datasource_url"]
    if listing == "as recorded":
        assert link == dg.MetadataValue.url("https://web.com")  # the recorded value, as it is
    else:
        assert isinstance(link, dg.TextMetadataValue), link
        assert link.value == (
            "none: Tableau gave no webpageUrl for it; find data source 'SampleDS' in project "
            "'default'"
        )
    lookups = [s for s in replay.seen if s.startswith("GET") and "/datasources?" in s]
    assert len(lookups) == 2  # before the publish, and after it for the page


# --- unexpected replies -------------------------------------------------------------------------


def test_an_html_page_with_200_is_a_named_error_with_url_and_first_bytes(
    client: TableauClient, replay: Replay
) -> None:
    replay.on("GET", r"/projects", recorded("server_info_wrong_site.html"))
    with pytest.raises(UnexpectedReplyError) as unexpected:
        client.project("Default")
    err = unexpected.value
    assert err.status == 200 and "/projects?" in err.url
    assert err.body_start.startswith('<html lang="en">')
    assert "neither Tableau's XML nor JSON" in str(err) and "Check server_url" in str(err)


def test_an_empty_body_is_a_named_error(client: TableauClient, replay: Replay) -> None:
    replay.on("GET", r"/jobs/", Answer(200, b""))
    with pytest.raises(UnexpectedReplyError, match="the reply is empty") as unexpected:
        client.get_job("j1")
    assert unexpected.value.url.endswith("/jobs/j1")


def test_a_json_reply_without_the_element_asked_for_is_a_named_error(
    client: TableauClient, replay: Replay
) -> None:
    replay.on("GET", r"/jobs/", Answer(200, b'{"nothing": {}}', "application/json"))
    with pytest.raises(UnexpectedReplyError, match="lacks 'job'"):
        client.get_job("j1")


def test_a_body_that_is_not_the_gzip_it_claims_is_a_named_error(
    client: TableauClient, replay: Replay, tmp_path: Path
) -> None:
    """A proxy's mangled reply: httpx's `DecodingError` leaves the client as an
    `UnexpectedReplyError` naming the URL and the encoding, for a read and for a download
    streamed to disk (its success and its error reply alike)."""
    lie = b"<tsResponse>plain, not gzip</tsResponse>"
    replay.on("GET", r"/projects", Answer(200, lie, encoding="gzip"))
    with pytest.raises(UnexpectedReplyError) as unexpected:
        client.project("Default")
    err = unexpected.value
    assert err.status == 200 and "/projects?" in err.url and err.body_start is None
    assert "is not the 'gzip' its Content-Encoding says" in str(err)
    assert str(err).startswith("Tableau GET /api/3.14/sites/") and "Check server_url" in str(err)
    replay.on("GET", r"/ds1/content", Answer(200, lie, "application/octet-stream", encoding="gzip"))
    replay.on("GET", r"/ds2/content", Answer(404, lie, encoding="gzip"))
    for source in ("ds1", "ds2"):
        with pytest.raises(UnexpectedReplyError, match="Content-Encoding") as unexpected:
            client.download_datasource(source, tmp_path, max_bytes=2**20)
        assert unexpected.value.url.endswith(f"/{source}/content?includeExtract=true")
        assert f"download of data source {source}" in str(unexpected.value)


def test_a_request_url_httpx_refuses_is_an_error_and_nothing_is_sent(
    client: TableauClient, replay: Replay
) -> None:
    with pytest.raises(TableauError, match="URL component 'query' too long") as refused:
        client.find_datasource("x" * 70_000, "p1")
    assert str(refused.value).startswith(
        f"Tableau server {replay.url.removeprefix('http://')}: GET"
    )
    assert "nothing was sent" in str(refused.value)
    assert not [seen for seen in replay.seen if "/datasources" in seen]


def test_an_xml_error_to_a_json_request_keeps_tableaus_code(replay: Replay) -> None:
    replay.routes.clear()
    replay.on("POST", r"/auth/signin$", recorded("auth_sign_in_error.xml", 401))
    resource = TableauServerResource(
        server_url=replay.url, sign_in=TokenSignIn(name="ci", secret="x"), api_version="3.14"
    )
    with resource.client() as client, pytest.raises(TableauSignInError) as refused:
        client.project("Default")
    assert (refused.value.code, refused.value.summary) == ("401001", "Signin Error")
    assert refused.value.detail == "Error signing in to Tableau Server"


def test_an_unknown_resource_keeps_code_404003(client: TableauClient, replay: Replay) -> None:
    replay.on("GET", r"/jobs/", recorded("server_info_404.xml", 404))
    with pytest.raises(TableauRequestError) as missing:
        client.get_job("j1")
    assert (missing.value.status, missing.value.code) == (404, "404003")


def test_recorded_project_lists_are_read_in_xml_and_as_single_json_objects(
    client: TableauClient, replay: Replay
) -> None:
    replay.on("GET", r"/projects", recorded("project_get_all_fields.xml"))
    assert client.project("Samples").id == "ee8c6e70-43b6-11e6-af4f-f7b0d8e20760"
    one = {
        "pagination": {"pageNumber": "1", "pageSize": "100", "totalAvailable": "1"},
        "projects": {"project": {"id": "p1", "name": "Solo"}},  # an object, not a list
    }
    replay.routes.insert(
        0,
        (
            "GET",
            re.compile(r"/projects"),
            [Answer(200, json.dumps(one).encode(), "application/json")],
        ),
    )
    assert client.project("Solo").id == "p1"


def test_a_token_that_cannot_be_a_header_is_an_error_sent_once_and_never_repeated(
    replay: Replay, records: list
) -> None:
    """A sign-in reply whose token holds a line break: every request would carry it in
    X-Tableau-Auth, which HTTP forbids (httpx's `LocalProtocolError`). Nothing reaches the
    server, nothing is retried, and the error says that nothing was applied."""
    token = b'token="eIX6mvFsqyansa4KqEI1UwOpS8ggRs2l"'
    broken = recorded("auth_sign_in.xml").body.replace(token, b'token="eIX6&#10;mvFsq"')
    replay.routes.clear()
    replay.on("POST", r"/auth/signin$", Answer(200, broken))
    resource = TableauServerResource(
        server_url=replay.url,
        site="Samples",
        sign_in=TokenSignIn(name="ci", secret="s"),
        api_version="3.14",
        max_retries=3,
    )
    with resource.client() as client, pytest.raises(TableauConnectionError) as refused:
        client.get_job(FAILED_JOB)
    assert "cannot be sent as HTTP (Illegal header value" in str(refused.value)
    assert "nothing was sent" in str(refused.value) and not refused.value.maybe_applied
    assert [seen for seen in replay.seen if "/jobs/" in seen] == []
    assert not [r for r in records if "retry" in r.getMessage()]
