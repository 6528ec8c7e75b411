"""The emulator's HTTP contract, spoken directly with httpx: auth, uploads, jobs, faults."""

from __future__ import annotations

import json
import re
import subprocess
import time
import uuid
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import httpx
import pytest
import tableauserverclient as TSC
from rest_schema import assert_schema_kept, with_rest_schema
from tableauhyperapi import SqlType, TableDefinition

from hyper_assets.emulator import Emulator
from hyper_assets.tableau.actions import Always, Delete, Insert, batch_to_json

NS = {"t": "http://tableau.com/api"}
RAW_TOKEN = ("raw", "raw-secret")
SITE = "analytics"  # as in conftest.py
Column = TableDefinition.Column
INSERT_NEW = batch_to_json([Insert(source_table="new", target_table="Extract")])


def multipart(parts: dict[str, bytes]) -> tuple[bytes, str]:
    """A multipart/mixed body the way TSC builds one."""
    boundary = uuid.uuid4().hex
    body = b""
    for name, content in parts.items():
        body += (
            (
                f"--{boundary}\r\n"
                f'Content-Disposition: form-data; name="{name}"; filename="file"\r\n'
                "Content-Type: application/octet-stream\r\n\r\n"
            ).encode()
            + content
            + b"\r\n"
        )
    return body + f"--{boundary}--\r\n".encode(), f"multipart/mixed; boundary={boundary}"


class Raw:
    """An httpx client signed in to the emulator, with the few calls these tests need."""

    def __init__(self, emulator: Emulator, site: str = SITE) -> None:
        # an older client's version: the emulator, as a server, answers any up to its 3.28
        self.http = httpx.Client(base_url=f"{emulator.url}/api/3.24", timeout=30)
        signin = (
            f'<tsRequest><credentials personalAccessTokenName="{RAW_TOKEN[0]}" '
            f'personalAccessTokenSecret="{RAW_TOKEN[1]}"><site contentUrl="{site}"/>'
            "</credentials></tsRequest>"
        )
        reply = ET.fromstring(self.http.post("/auth/signin", content=signin).content)
        credentials = reply.find("t:credentials", NS)
        self.http.headers["X-Tableau-Auth"] = credentials.get("token")
        self.site = f"/sites/{credentials.find('t:site', NS).get('id')}"

    def upload(self, data: bytes, chunks: int = 1) -> str:
        session = self.xml(self.http.post(f"{self.site}/fileUploads"), 201)
        session_id = session.find("t:fileUpload", NS).get("uploadSessionId")
        step = -(-len(data) // chunks)
        for start in range(0, len(data), step):
            body, kind = multipart(
                {"request_payload": b"", "tableau_file": data[start : start + step]}
            )
            reply = self.http.put(
                f"{self.site}/fileUploads/{session_id}",
                content=body,
                headers={"Content-Type": kind},
            )
            int(self.xml(reply, 200).find("t:fileUpload", NS).get("fileSize"))
        return session_id

    def patch(
        self, ds_id: str, rid: str, session: str | None, batch: dict = INSERT_NEW
    ) -> httpx.Response:
        query = f"?uploadSessionId={session}" if session else ""
        return self.http.patch(
            f"{self.site}/datasources/{ds_id}/data{query}",
            content=json.dumps(batch),
            headers={"Content-Type": "application/json", "RequestID": rid},
        )

    def job(self, job_id: str) -> ET.Element:
        return self.xml(self.http.get(f"{self.site}/jobs/{job_id}"), 200).find("t:job", NS)

    def wait(self, job_id: str) -> ET.Element:
        for _ in range(200):
            job = self.job(job_id)
            if job.get("completedAt"):
                return job
            time.sleep(0.05)
        raise AssertionError(f"job {job_id} did not finish")

    @staticmethod
    def xml(reply: httpx.Response, status: int) -> ET.Element:
        assert reply.status_code == status, reply.text
        return ET.fromstring(reply.content)


def error_code(reply: httpx.Response) -> str:
    return ET.fromstring(reply.content).find("t:error", NS).get("code")


@pytest.fixture
def raw(emulator: Emulator) -> Raw:
    return Raw(emulator)


@pytest.fixture
def published(server: TSC.Server, hyper_files: Any, tmp_path: Path) -> tuple[str, Path]:
    """A data source `ds` with Extract.Extract = [1]; returns its id and the payload path."""
    cols = [Column("id", SqlType.int())]
    target = hyper_files.create(tmp_path / "t.hyper", {("Extract", "Extract"): (cols, [(1,)])})
    payload = hyper_files.create(tmp_path / "p.hyper", {("public", "new"): (cols, [(2,)])})
    projects, _ = server.projects.get()
    item = server.datasources.publish(
        TSC.DatasourceItem(projects[0].id, name="ds"), target, "CreateNew"
    )
    return item.id, payload


def rows(hyper_files: Any, emulator: Emulator) -> list[tuple]:
    return hyper_files.read(emulator.site_dir(SITE) / "ds.hyper")["Extract.Extract"]


@pytest.mark.parametrize(
    "path", ["/api/2.4/serverInfo", "/API/3.24/SERVERINFO/", "/api/3.5/serverinfo"]
)
def test_server_info_answers_any_version_and_case(emulator: Emulator, path: str) -> None:
    reply = httpx.get(emulator.url + path)
    assert reply.status_code == 200
    info = ET.fromstring(reply.content)
    assert info.find("t:serverInfo/t:restApiVersion", NS).text == "3.28"  # its own version
    assert info.find("t:serverInfo/t:productVersion", NS).get("build")
    as_json = httpx.get(emulator.url + path, headers={"Accept": "application/json"}).json()
    assert as_json["serverInfo"]["restApiVersion"] == "3.28"


def test_wrong_token_and_expired_sessions_get_401(emulator: Emulator, raw: Raw) -> None:
    wrong = TSC.Server(emulator.url, use_server_version=True)
    with pytest.raises(TSC.FailedSignInError):
        wrong.auth.sign_in(TSC.PersonalAccessTokenAuth("ci", "not the secret"))
    assert raw.http.get(f"{raw.site}/projects").status_code == 200
    emulator.expire_tokens()
    expired = raw.http.get(f"{raw.site}/projects", headers={"Accept": "application/json"})
    assert expired.status_code == 401 and expired.json()["error"]["code"] == "401002"


def test_an_upload_session_is_consumed_by_one_request(
    raw: Raw, published: tuple[str, Path], hyper_files: Any, emulator: Emulator
) -> None:
    ds_id, payload = published
    session = raw.upload(payload.read_bytes(), chunks=3)
    first = raw.xml(raw.patch(ds_id, "first", session), 202).find("t:job", NS)
    assert raw.wait(first.get("id")).get("finishCode") == "0"
    reused = raw.patch(ds_id, "second", session)
    assert reused.status_code == 409 and "already consumed" in reused.text
    body, kind = multipart({"request_payload": b"", "tableau_file": b"more"})
    encoded = raw.http.put(
        f"{raw.site}/fileUploads/{session.replace(':', '%3A')}",
        content=body,
        headers={"Content-Type": kind},
    )
    assert encoded.status_code == 409
    assert rows(hyper_files, emulator) == [(1,), (2,)]


def test_a_repeated_request_id_returns_the_original_job_without_reapplying(
    raw: Raw, published: tuple[str, Path], hyper_files: Any, emulator: Emulator
) -> None:
    ds_id, payload = published
    first = raw.xml(raw.patch(ds_id, "once", raw.upload(payload.read_bytes())), 202)
    job_id = first.find("t:job", NS).get("id")
    raw.wait(job_id)
    again = raw.xml(raw.patch(ds_id, "once", raw.upload(payload.read_bytes())), 202)
    assert again.find("t:job", NS).get("id") == job_id
    assert rows(hyper_files, emulator) == [(1,), (2,)]


def test_a_payload_above_the_limit_gets_413(
    raw: Raw, published: tuple[str, Path], hyper_files: Any, emulator: Emulator
) -> None:
    ds_id, _ = published
    too_big = raw.patch(ds_id, "big", raw.upload(b"\0" * (2**20 + 1)))
    assert too_big.status_code == 413 and error_code(too_big) == "413000"
    assert rows(hyper_files, emulator) == [(1,)]


def test_chunked_upload_then_publish_from_the_session(
    raw: Raw, hyper_files: Any, emulator: Emulator, tmp_path: Path
) -> None:
    cols = [Column("id", SqlType.int())]
    source = hyper_files.create(tmp_path / "s.hyper", {("Extract", "t"): (cols, [(7,)])})
    session = raw.upload(source.read_bytes(), chunks=4)
    body, kind = multipart(
        {"request_payload": b'<tsRequest><datasource name="Caf\xc3\xa9 \xe2\x98\x95"/></tsRequest>'}
    )
    reply = raw.http.post(
        f"{raw.site}/datasources?datasourceType=hyper&overwrite=true&uploadSessionId={session}",
        content=body,
        headers={"Content-Type": kind},
    )
    assert raw.xml(reply, 201).find("t:datasource", NS).get("name") == "Café ☕"
    assert (emulator.site_dir(SITE) / "Café ☕.hyper").read_bytes() == source.read_bytes()


@pytest.mark.parametrize("name", ["../evil", "a/b", ".hidden", ""])
def test_unsafe_data_source_names_are_refused(raw: Raw, emulator: Emulator, name: str) -> None:
    body, kind = multipart(
        {
            "request_payload": f'<tsRequest><datasource name="{name}"/></tsRequest>'.encode(),
            "tableau_datasource": b"not even hyper",
        }
    )
    reply = raw.http.post(
        f"{raw.site}/datasources?datasourceType=hyper", content=body, headers={"Content-Type": kind}
    )
    assert reply.status_code == 400, reply.text
    assert list(emulator.data_dir.rglob("*.hyper")) == []


@pytest.mark.parametrize(("status", "retry_after"), [(429, 2), (503, None), (500, None)])
def test_injected_request_failures(
    raw: Raw, emulator: Emulator, status: int, retry_after: int | None
) -> None:
    emulator.faults.fail_requests("GET", r"/projects$", status=status, retry_after=retry_after)
    failed = raw.http.get(f"{raw.site}/projects")
    assert failed.status_code == status
    assert failed.headers.get("Retry-After") == (str(retry_after) if retry_after else None)
    assert raw.http.get(f"{raw.site}/projects").status_code == 200


def test_a_dropped_reply_after_accept_still_applies_once(
    raw: Raw, published: tuple[str, Path], hyper_files: Any, emulator: Emulator
) -> None:
    ds_id, payload = published
    emulator.faults.drop_after_accept("PATCH", r"/data$")
    with pytest.raises(httpx.RemoteProtocolError):
        raw.patch(ds_id, "lost-reply", raw.upload(payload.read_bytes()))
    retried = raw.xml(raw.patch(ds_id, "lost-reply", raw.upload(payload.read_bytes())), 202)
    assert raw.wait(retried.find("t:job", NS).get("id")).get("finishCode") == "0"
    assert rows(hyper_files, emulator) == [(1,), (2,)]


def test_an_injected_job_failure_reports_notes_and_changes_nothing(
    raw: Raw, published: tuple[str, Path], hyper_files: Any, emulator: Emulator
) -> None:
    ds_id, payload = published
    emulator.faults.fail_next_job("backgrounder out of disk")
    job = raw.xml(raw.patch(ds_id, "doomed", raw.upload(payload.read_bytes())), 202).find(
        "t:job", NS
    )
    done = raw.wait(job.get("id"))
    assert (done.get("finishCode"), done.get("progress")) == ("1", "100")
    # as recorded from real servers: the notes sit inside the job-type element
    assert done.find("t:notes", NS) is None
    detail = done.find("t:updateUploadedFileJob", NS)
    assert [child.tag.rpartition("}")[2] for child in detail] == [
        "datasource",
        "connectionLuid",
        "notes",
    ]
    assert detail.find("t:notes", NS).text == "backgrounder out of disk"
    assert detail.find("t:datasource", NS).get("id") == ds_id
    assert rows(hyper_files, emulator) == [(1,)]


def test_a_job_has_completed_at_only_once_it_ends(
    raw: Raw, published: tuple[str, Path], emulator: Emulator
) -> None:
    ds_id, payload = published
    emulator.faults.pause_jobs()
    emulator.faults.fail_next_job("")  # a failure without notes, as recorded on real servers
    queued = raw.xml(raw.patch(ds_id, "quiet", raw.upload(payload.read_bytes())), 202)
    job = queued.find("t:job", NS)
    assert job.get("completedAt") is None and job.get("finishCode") is None
    assert raw.job(job.get("id")).get("completedAt") is None
    emulator.faults.resume_jobs()
    done = raw.wait(job.get("id"))
    assert (done.get("finishCode"), done.get("progress")) == ("1", "100")
    assert done.find(".//t:notes", NS) is None


def test_a_queued_job_can_be_cancelled(
    raw: Raw, published: tuple[str, Path], hyper_files: Any, emulator: Emulator
) -> None:
    ds_id, _ = published
    emulator.faults.pause_jobs()
    wipe = batch_to_json([Delete(target_table="Extract", condition=Always())])
    job = raw.xml(raw.patch(ds_id, "cancel-me", None, wipe), 202).find("t:job", NS)
    assert job.get("type") == "UpdateUploadedFile" and job.get("completedAt") is None
    assert raw.http.put(f"{raw.site}/jobs/{job.get('id')}").status_code == 204
    emulator.faults.resume_jobs()
    cancelled = raw.wait(job.get("id"))
    assert cancelled.get("finishCode") == "2"
    assert time.strptime(cancelled.get("completedAt"), "%Y-%m-%dT%H:%M:%SZ")
    assert raw.http.put(f"{raw.site}/jobs/{job.get('id')}").status_code == 409
    assert rows(hyper_files, emulator) == [(1,)]


def test_malformed_batches_are_refused_with_the_action_index(
    raw: Raw, published: tuple[str, Path]
) -> None:
    ds_id, _ = published
    bad = {
        "actions": [{"action": "delete", "target-table": "Extract", "condition": {"op": "like"}}]
    }
    reply = raw.patch(ds_id, "bad", None, bad)
    assert reply.status_code == 400
    assert "action 0, field 'condition.op'" in reply.text


def test_the_command_line_prints_a_generated_token(tmp_path: Path) -> None:
    saved = tmp_path / "rest-bodies.json"  # its replies, checked against the schema at exit
    command = with_rest_schema(saved, "hyper_assets.emulator")
    (tmp_path / "data").mkdir()
    process = subprocess.Popen(
        [*command, "--port", "0", "--data-dir", str(tmp_path / "data")],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        url = process.stdout.readline().split(" on ")[1].split(",")[0]
        token = process.stdout.readline()
        assert "name=emulator secret=" in token
        name, secret = (part.split("=", 1)[1] for part in token.split()[-2:])
        server = TSC.Server(url, use_server_version=True)
        server.auth.sign_in(TSC.PersonalAccessTokenAuth(name, secret))
        assert [p.name for p in server.projects.get()[0]] == ["Default"]
    finally:
        process.terminate()
        assert process.wait(timeout=30) == 0
    assert_schema_kept(saved, "python -m hyper_assets.emulator")


def test_sites_projects_and_files_survive_a_restart(
    tmp_path: Path, hyper: Any, hyper_files: Any
) -> None:
    cols = [Column("id", SqlType.int())]
    local = hyper_files.create(tmp_path / "s.hyper", {("Extract", "t"): (cols, [(7,)])})
    tokens = {"ci": "pw"}
    (tmp_path / "data").mkdir()
    listed = []
    for _ in range(2):
        with Emulator(tmp_path / "data", tokens=tokens, hyper=hyper, sites=("", SITE)) as running:
            project_id = running.add_project("Ops/Daily", SITE)  # a second call finds it
            server = TSC.Server(running.url, use_server_version=True)
            server.auth.sign_in(TSC.PersonalAccessTokenAuth("ci", "pw", site_id=SITE))
            if not listed:
                server.datasources.publish(
                    TSC.DatasourceItem(project_id, name="kept"), local, "CreateNew"
                )
            found, _ = server.datasources.get()
            projects = sorted((p.name, p.parent_id or "") for p in TSC.Pager(server.projects))
            pages = [d.webpage_url.partition("/#/")[2] for d in found]  # the port changes
            listed.append(
                ([(d.id, d.name, d.project_id) for d in found], project_id, projects, pages)
            )
            server.auth.sign_out()
    assert listed[0] == listed[1] and listed[0][0][0][2] == listed[0][1]
    assert [name for name, _ in listed[0][2]] == ["Daily", "Default", "Ops"]


def test_unknown_endpoints_answer_404003_and_the_default_site_keeps_working(
    emulator: Emulator,
) -> None:
    default = Raw(emulator, site="")
    assert default.site == f"/sites/{emulator.site_id('')}"
    unknown = default.http.get(f"{default.site}/workbooks")
    assert unknown.status_code == 404 and error_code(unknown) == "404003"
    other_site = default.http.get(f"/sites/{emulator.site_id(SITE)}/projects")
    assert other_site.status_code == 403 and error_code(other_site) == "403000"
    projects = default.xml(default.http.get(f"{default.site}/projects"), 200)
    [project] = projects.findall(".//t:project", NS)
    assert project.get("name") == "Default" and project.find("t:owner", NS).get("id")


RECORDED = Path(__file__).parent / "recorded"


def test_a_data_source_page_is_addressed_by_number_where_real_servers_give_it(
    raw: Raw, emulator: Emulator, published: tuple[str, Path]
) -> None:
    """webpageUrl as a real server gives it: on list and single replies, by the data source's
    number rather than its id; the reply to a publish has none, as recorded."""
    example = ET.parse(RECORDED / "datasource_get_all_fields.xml").find(".//t:datasource", NS)
    assert re.fullmatch(r"https://[^/]+/#/site/example/datasources/\d+", example.get("webpageUrl"))
    ds_id, payload = published
    body, kind = multipart(
        {
            "request_payload": b'<tsRequest><datasource name="other"/></tsRequest>',
            "tableau_datasource": payload.read_bytes(),
        }
    )
    reply = raw.http.post(
        f"{raw.site}/datasources",
        params={"datasourceType": "hyper"},
        content=body,
        headers={"Content-Type": kind},
    )
    publish = raw.xml(reply, 201).find("t:datasource", NS)
    assert publish.get("webpageUrl") is None

    listed = raw.xml(raw.http.get(f"{raw.site}/datasources"), 200).findall(".//t:datasource", NS)
    pages = {d.get("id"): d.get("webpageUrl") for d in listed}
    numbers = set()
    for found_id, page in pages.items():
        number = re.fullmatch(
            rf"{re.escape(emulator.url)}/#/site/{SITE}/datasources/(\d{{7}})", page
        )
        assert number, page
        numbers.add(number[1])
        one = raw.xml(raw.http.get(f"{raw.site}/datasources/{found_id}"), 200)
        assert one.find("t:datasource", NS).get("webpageUrl") == page
    assert set(pages) == {ds_id, publish.get("id")} and len(numbers) == 2


def test_projects_filter_by_name_parent_and_top_level(raw: Raw, emulator: Emulator) -> None:
    top = emulator.add_project("Sales", SITE)
    emea = emulator.add_project("Sales/EMEA", SITE)
    other = emulator.add_project("Marketing/EMEA", SITE)

    def ids(query: str) -> list[str]:
        reply = raw.xml(raw.http.get(f"{raw.site}/projects", params={"filter": query}), 200)
        return sorted(p.get("id") for p in reply.findall(".//t:project", NS))

    assert ids("name:eq:EMEA") == sorted([emea, other])
    assert ids(f"name:eq:EMEA,parentProjectId:eq:{top}") == [emea]
    assert len(ids("topLevelProject:eq:true")) == 3  # Default, Sales, Marketing
    refused = raw.http.get(f"{raw.site}/projects", params={"filter": "owner:eq:x"})
    assert refused.status_code == 400 and "is not emulated" in refused.text
