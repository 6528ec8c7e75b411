"""The emulator's replies against replies recorded from real Tableau servers, part by part.

Every kind of reply the emulator sends is requested from a running emulator over loopback
HTTP and reduced to its parts: each element path (`job/updateUploadedFileJob/datasource`)
and attribute (`job@mode`, `@xsi:schemaLocation` on `tsResponse`). Every part of the
kind's recordings (`recorded/`, copied unchanged from tableauserverclient's test assets)
must be in the reply, unless `Kind.unsent` says why the emulator rightly lacks it; every
part the emulator sends beyond them needs an entry in `Kind.extra` naming the recording
that shows it, or in `Kind.required` naming the type of ts-api_3_28.xsd that requires it
(both checked below). Values are compared where the protocol fixes them. A kind
whose element is recorded only inside a list (a data quality warning) says so in
`Kind.moved`: the recorded element's parts are then looked for where the reply holds it.
"""

from __future__ import annotations

import json
import time
import uuid
import xml.etree.ElementTree as ET
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import pytest
from rest_schema import schema
from tableauhyperapi import SqlType, TableDefinition

from hyper_assets.emulator import DEFAULT_API_VERSION, Emulator
from hyper_assets.tableau.actions import Always, Delete, Insert, batch_to_json

RECORDED = Path(__file__).parent / "recorded"
NS = {"t": "http://tableau.com/api"}
XSI = "{http://www.w3.org/2001/XMLSchema-instance}"
SITE, RAW_TOKEN = "analytics", ("raw", "raw-secret")  # as in conftest.py
Column = TableDefinition.Column


@dataclass(frozen=True)
class Shown:
    """Why the emulator may send a part its kind's recordings lack: `recording` has it (or
    its counterpart) at `path`."""

    recording: str
    path: str
    why: str


@dataclass(frozen=True)
class Moved:
    """The recordings hold the kind's element at path `recorded`; the reply, at `sent`."""

    recorded: str
    sent: str
    why: str

    def move(self, part: str) -> str:
        """`part` of a recording, at the path the reply has it."""
        rest = part.removeprefix(self.recorded)
        moves = rest != part and rest[:1] in ("", "/", "@")
        return self.sent + rest if moves else part


@dataclass(frozen=True)
class Kind:
    """One kind of reply: the recordings it must match and the exceptions, each justified."""

    recordings: tuple[str, ...]
    extra: Mapping[str, Shown] = field(default_factory=dict)  # sent, though not recorded
    required: Mapping[str, str] = field(default_factory=dict)  # unrecorded -> schema type
    unsent: Mapping[str, str] = field(default_factory=dict)  # recorded, rightly not sent
    values: Mapping[str, str] = field(default_factory=dict)  # part -> value the protocol fixes
    moved: Moved | None = None  # the element recorded only elsewhere (inside a list)


def load(name: str) -> ET.Element:
    return ET.parse(RECORDED / name).getroot()


def parts(root: ET.Element) -> set[str]:
    """Every element path and attribute under `root`, by local name."""
    found: set[str] = set()

    def walk(element: ET.Element, path: str) -> None:
        for name in element.attrib:
            found.add(f"{path}@{name.replace(XSI, 'xsi:').rpartition('}')[2]}")
        for child in element:
            child_path = f"{path}/{child.tag.rpartition('}')[2]}".lstrip("/")
            found.add(child_path)
            walk(child, child_path)

    walk(root, "")
    return found


def recorded_parts(kind: Kind) -> set[str]:
    """The parts of the kind's recordings, at the paths its reply has them."""
    found = set().union(*(parts(load(name)) for name in kind.recordings))
    return {kind.moved.move(part) for part in found} if kind.moved else found


def values_at(root: ET.Element, part: str) -> list[str]:
    """The values of `part` in every element at its path: the attribute's, else the text."""
    path, _, attribute = part.partition("@")
    steps = "/".join(f"t:{step}" for step in path.split("/"))
    elements = root.findall(steps, NS) if path else [root]
    name = attribute.replace("xsi:", XSI)
    return [(e.get(name) or "") if attribute else (e.text or "").strip() for e in elements]


def recorded_value(name: str, part: str) -> str:
    """The one value `part` has in recording `name`."""
    [value] = set(values_at(load(name), part))
    return value


def newer(at: str, recording: str, path: str, *names: str) -> dict[str, Shown]:
    """Attributes `names` of the element `at`, which a newer API version's recording shows
    at `path` (the 2.3 recordings predate them)."""
    return {f"{at}@{n}": Shown(recording, f"{path}@{n}", "a newer API's") for n in names}


def schema_requires(type_name: str, element: str) -> bool:
    """Whether ts-api_3_28.xsd's complex type `type_name` requires child `element`."""
    children = schema().types[type_name].content.iter_elements()
    return any(child.local_name == element and child.min_occurs > 0 for child in children)


def counterpart(
    at: str, recording: str, path: str, names: tuple[str, ...], why: str
) -> dict[str, Shown]:
    """The element `at` and its attributes `names`, shown at `path` of `recording`."""
    shown = {at: Shown(recording, path, why)}
    return shown | {f"{at}@{n}": Shown(recording, f"{path}@{n}", why) for n in names}


ALL_FIELDS_PROJECT = "project_get_all_fields.xml"  # API 3.25
ALL_FIELDS_DS = "datasource_get_all_fields.xml"  # API 3.25
PROJECT_ATTRIBUTES = ("topLevelProject", "writeable", "createdAt", "updatedAt")
DS_ATTRIBUTES = ("size", "encryptExtracts", "hasExtracts", "isCertified", "useRemoteQueryAgent")
NO_TAGS = "the emulator's data sources have no tags: `<tags />`, as datasource_get.xml's first"
UPDATE_JOB = "job_get_by_id_failed.xml"  # a real server's finished UpdateUploadedFile job
DONE_JOB = "job_get_by_id.xml"  # Query Job's reply for a job that succeeded (finishCode 0)
REFRESH_NOTES = "a refresh job's type element (an update's: updateUploadedFileJob)"
GROUP_NOTES = "a group import's counts (CountOfUsersAddedToGroup), not a data source's"
REFRESH_JOB = {  # parts of the recorded refresh jobs that no job of ours has
    "job/extractRefreshJob": REFRESH_NOTES,
    "job/extractRefreshJob/notes": REFRESH_NOTES,
    "job/statusNotes": GROUP_NOTES,
    "job/statusNotes/statusNote": GROUP_NOTES,
    "job/statusNotes/statusNote@type": GROUP_NOTES,
    "job/statusNotes/statusNote@value": GROUP_NOTES,
    "job/statusNotes/statusNote@text": GROUP_NOTES,
}
UPDATED_AT = {"job@updatedAt": Shown(DONE_JOB, "job@updatedAt", "Query Job's reply has it")}
ASYNCHRONOUS = {  # an update job's, as recorded
    "job@mode": recorded_value("datasource_data_update.xml", "job@mode"),
    "job@type": recorded_value("datasource_data_update.xml", "job@type"),
}
PAGE = {"pagination@pageNumber": "1", "pagination@pageSize": "100"}  # the defaults, as recorded
SIGNIN_ERROR = "auth_sign_in_error.xml"
SUMMARY = ("error@code", "error/summary")
DQW = "dqw_by_content_type.xml"  # Query Data Quality Warnings by Content: a list of one
DQW_LIST = "dataQualityWarningList/dataQualityWarning"
ONE_DQW = Moved(  # no recording shows Add's, Query by Id's or Update's reply
    DQW_LIST,
    "dataQualityWarning",
    "one warning's reply holds it directly (TSC reads either with .//dataQualityWarning)",
)
NO_LIST = {"dataQualityWarningList": "one warning's reply holds the warning itself"}
STALE = {"type": "STALE", "message": "Late by 3 hours", "isActive": "true", "isSevere": "false"}
SEVERE = {"message": "Row counts dropped", "isSevere": "true"}  # PUT by id: the rest is kept
INACTIVE = {"type": "WARNING", "isActive": "false"}  # TSC's update_dqw: the content's one


def warning(at: str, fields: Mapping[str, str]) -> dict[str, str]:
    """The values of warning `at` that the request set, and its content's type: upper case,
    as recorded ("DATABASE")."""
    return {
        f"{at}@{name}": value for name, value in {**fields, "contentType": "DATASOURCE"}.items()
    }


SERVER_SETTINGS = (
    "oAuthEnabled",
    "offlineInteractionSupportedPhase",
    "sheetImageMaxAgeCeiling",
    "sheetImageMaxAgeFloor",
)
NEW_SERVER_INFO = {  # required by REST API 3.28; the recorded server (10.1) predates them
    **{f"serverInfo/{name}": "serverInfo" for name in ("platform", "prepConductorVersion")},
    "serverInfo/serverSettings": "serverInfo",
    **{f"serverInfo/serverSettings/{name}": "serverSettings" for name in SERVER_SETTINGS},
}
RETIRED_ASK_DATA = "Ask Data was retired: REST API 3.28's dataSourceType has no askData"

KINDS = {
    "server info": Kind(("server_info_get.xml",), required=NEW_SERVER_INFO),
    "sign-in": Kind(("auth_sign_in.xml",)),
    "project create": Kind(
        ("project_create.xml",),
        extra=newer("project", ALL_FIELDS_PROJECT, "projects/project", *PROJECT_ATTRIBUTES)
        | counterpart(
            "project/owner",
            "project_get.xml",
            "projects/project/owner",
            ("id",),
            "a project's owner, as listed",
        ),
    ),
    "project list": Kind(
        ("project_get.xml",),
        extra=newer(
            "projects/project", ALL_FIELDS_PROJECT, "projects/project", *PROJECT_ATTRIBUTES
        ),
        values=PAGE | {"pagination@totalAvailable": "3"},  # Default, Top and Top's Child
    ),
    "publish": Kind(  # no webpageUrl, as datasource_publish.xml has none
        ("datasource_publish.xml",),
        extra=newer("datasource", ALL_FIELDS_DS, "datasources/datasource", *DS_ATTRIBUTES)
        | {
            "datasource@description": Shown(
                "datasource_get.xml", "datasources/datasource@description", "as listed"
            )
        },
        values={"datasource@type": "hyper"},  # a published .hyper file's type
    ),
    "upload initialize": Kind(("fileupload_initialize.xml",), values={"fileUpload@fileSize": "0"}),
    "upload append": Kind(("fileupload_append.xml",)),
    "publish async": Kind(  # as recorded: queued at progress 0 with finishCode 1, no completedAt
        ("datasource_publish_async.xml",),
        values={
            part: recorded_value("datasource_publish_async.xml", part)
            for part in ("job@mode", "job@type", "job@progress", "job@finishCode")
        },
    ),
    "publish job": Kind(  # without a type element: REST API 3.28 defines none for a publish
        (DONE_JOB,),
        extra={"job@startedAt": Shown(UPDATE_JOB, "job@startedAt", "a job that ran says when")},
        unsent=REFRESH_JOB,
        values={
            "job@mode": ASYNCHRONOUS["job@mode"],
            "job@type": recorded_value("datasource_publish_async.xml", "job@type"),
            "job@progress": "100",
            "job@finishCode": recorded_value(DONE_JOB, "job@finishCode"),  # 0: success
        },
    ),
    "data source list": Kind(
        ("datasource_get.xml",),
        extra=newer(
            "datasources/datasource", ALL_FIELDS_DS, "datasources/datasource", "isCertified"
        ),
        unsent={"datasources/datasource/tags/tag": NO_TAGS}
        | {"datasources/datasource/tags/tag@label": NO_TAGS},
        values=PAGE | {"pagination@totalAvailable": "2", "datasources/datasource@type": "hyper"},
    ),
    "data source": Kind(
        ("datasource_get_by_id.xml",),
        extra=newer(
            "datasource", ALL_FIELDS_DS, "datasources/datasource", *DS_ATTRIBUTES, "webpageUrl"
        ),
        unsent={"datasource/tags/tag": NO_TAGS, "datasource/tags/tag@label": NO_TAGS}
        | {"datasource/askData": RETIRED_ASK_DATA, "datasource/askData@enablement": "as above"},
        values={"datasource@type": "hyper"},
    ),
    "connections": Kind(  # no serverPort: a .hyper file has no server, as recorded
        ("datasource_populate_connections.xml",),
        extra=counterpart(
            "connections/connection/datasource",
            "workbook_populate_connections.xml",
            "connections/connection/datasource",
            ("id", "name"),
            "a connection names the published data source it belongs to",
        ),
        values={"connections/connection@type": "hyper"},
    ),
    "update data": Kind(("datasource_data_update.xml",), values=ASYNCHRONOUS),
    "update data again": Kind(("datasource_data_update.xml",), values=ASYNCHRONOUS),
    "job in progress": Kind(
        ("job_get_by_id_inprogress.xml",),
        extra=UPDATED_AT,
        values=ASYNCHRONOUS | {"job@progress": "0"},
    ),
    "job completed": Kind(
        (UPDATE_JOB, DONE_JOB),
        unsent=REFRESH_JOB,
        values=ASYNCHRONOUS
        | {"job@progress": "100", "job@finishCode": recorded_value(DONE_JOB, "job@finishCode")},
    ),
    "job failed": Kind(
        (UPDATE_JOB, "job_get_by_id_failed_workbook.xml"),
        extra=UPDATED_AT
        | counterpart(
            "job/updateUploadedFileJob/notes",
            "job_get_by_id_failed_workbook.xml",
            "job/extractRefreshJob/notes",
            (),
            "a failure's notes sit inside the job-type element",
        ),
        unsent={
            "job/extractRefreshJob": REFRESH_NOTES,
            "job/extractRefreshJob/notes": REFRESH_NOTES,
            "job/extractRefreshJob/workbook": "a workbook's refresh; an update names a datasource",
            "job/extractRefreshJob/workbook@id": "as above",
            "job/extractRefreshJob/workbook@name": "as above",
        },
        values=ASYNCHRONOUS
        | {"job@progress": "100", "job@finishCode": recorded_value(UPDATE_JOB, "job@finishCode")},
    ),
    "warning add": Kind((DQW,), unsent=NO_LIST, moved=ONE_DQW, values=warning(ONE_DQW.sent, STALE)),
    "warning list": Kind((DQW,), values=warning(DQW_LIST, STALE)),
    "warning by id": Kind(
        (DQW,), unsent=NO_LIST, moved=ONE_DQW, values=warning(ONE_DQW.sent, STALE)
    ),
    "warning update": Kind(
        (DQW,), unsent=NO_LIST, moved=ONE_DQW, values=warning(ONE_DQW.sent, STALE | SEVERE)
    ),
    "warning update by content": Kind(
        (DQW,),
        unsent=NO_LIST,
        moved=ONE_DQW,
        values=warning(ONE_DQW.sent, STALE | SEVERE | INACTIVE),
    ),
    "sign-in refused": Kind(
        (SIGNIN_ERROR,), values={part: recorded_value(SIGNIN_ERROR, part) for part in SUMMARY}
    ),
    "unknown resource": Kind(
        ("server_info_404.xml",),
        values={part: recorded_value("server_info_404.xml", part) for part in SUMMARY},
    ),
    # codes and summaries as in Tableau's REST reference, "Handling Errors in the REST API"
    "session expired": Kind(
        (SIGNIN_ERROR,), values={"error@code": "401002", "error/summary": "Unauthorized Access"}
    ),
    "bad request": Kind(
        (SIGNIN_ERROR,), values={"error@code": "400000", "error/summary": "Bad Request"}
    ),
}


def multipart(parts: dict[str, bytes]) -> dict[str, Any]:
    """httpx arguments for a multipart/mixed body the way TSC builds one."""
    boundary = uuid.uuid4().hex
    body = b""
    for name, content in parts.items():
        head = f'--{boundary}\r\nContent-Disposition: form-data; name="{name}"; filename="f"\r\n'
        body += head.encode() + b"Content-Type: application/octet-stream\r\n\r\n" + content
        body += b"\r\n"
    body += f"--{boundary}--\r\n".encode()
    return {"content": body, "headers": {"Content-Type": f"multipart/mixed; boundary={boundary}"}}


class Replies:
    """Requests each kind of reply from a running emulator and keeps it by kind."""

    def __init__(self, emulator: Emulator) -> None:
        self.http = httpx.Client(base_url=f"{emulator.url}/api/{DEFAULT_API_VERSION}", timeout=30)
        self.kept: dict[str, ET.Element] = {}
        self.site = ""

    def keep(self, kind: str, reply: httpx.Response, status: int) -> ET.Element:
        assert reply.status_code == status, (kind, reply.status_code, reply.text)
        self.kept[kind] = ET.fromstring(reply.content)
        return self.kept[kind]

    def sign_in(self, kind: str, secret: str, status: int) -> ET.Element:
        request = (
            f'<tsRequest><credentials personalAccessTokenName="{RAW_TOKEN[0]}" '
            f'personalAccessTokenSecret="{secret}"><site contentUrl="{SITE}"/>'
            "</credentials></tsRequest>"
        )
        return self.keep(kind, self.http.post("/auth/signin", content=request), status)

    def upload(self, data: bytes) -> str:
        started = self.keep("upload initialize", self.http.post(f"{self.site}/fileUploads"), 201)
        session = started.find("t:fileUpload", NS).get("uploadSessionId")
        chunk = multipart({"request_payload": b"", "tableau_file": data})
        self.keep(
            "upload append", self.http.put(f"{self.site}/fileUploads/{session}", **chunk), 200
        )
        return session

    def publish(self, kind: str, name: str, status: int, **params: str) -> ET.Element:
        body = f'<tsRequest><datasource name="{name}"/></tsRequest>'.encode()
        return self.keep(
            kind,
            self.http.post(
                f"{self.site}/datasources",
                params={"datasourceType": "hyper", **params},
                **multipart({"request_payload": body}),
            ),
            status,
        )

    def update(
        self,
        ds_id: str,
        request_id: str,
        batch: dict[str, Any],
        kind: str = "update data",
        **params: str,
    ) -> str:
        reply = self.http.patch(
            f"{self.site}/datasources/{ds_id}/data",
            params=params,
            content=json.dumps(batch),
            headers={"Content-Type": "application/json", "RequestID": request_id},
        )
        return self.keep(kind, reply, 202).find("t:job", NS).get("id")

    def warnings(self, ds_id: str) -> None:
        """Add a warning to data source `ds_id`, list it, query it by id and update it by
        id and by content, as tableauserverclient does."""
        on_content = f"{self.site}/dataQualityWarnings/datasource/{ds_id}"

        def body(fields: Mapping[str, str]) -> bytes:
            attrs = " ".join(f'{name}="{value}"' for name, value in fields.items())
            return f"<tsRequest><dataQualityWarning {attrs}/></tsRequest>".encode()

        added = self.keep("warning add", self.http.post(on_content, content=body(STALE)), 200)
        by_id = (
            f"{self.site}/dataQualityWarnings/{added.find('t:dataQualityWarning', NS).get('id')}"
        )
        self.keep("warning list", self.http.get(on_content), 200)
        self.keep("warning by id", self.http.get(by_id), 200)
        self.keep("warning update", self.http.put(by_id, content=body(SEVERE)), 200)
        update = self.http.put(on_content, content=body(INACTIVE))
        self.keep("warning update by content", update, 200)

    def job(self, kind: str, job_id: str, until: str) -> ET.Element:
        """The job's reply, once it carries attribute `until`."""
        for _ in range(400):
            reply = self.keep(kind, self.http.get(f"{self.site}/jobs/{job_id}"), 200)
            if reply.find("t:job", NS).get(until):
                return reply
            time.sleep(0.05)
        raise AssertionError(f"job {job_id} never showed {until}")


@pytest.fixture
def replies(emulator: Emulator, hyper_files: Any, tmp_path: Path) -> dict[str, ET.Element]:
    """One reply of every kind the emulator sends, from one session on site `SITE`."""
    cols = [Column("id", SqlType.int())]
    extract = hyper_files.create(tmp_path / "t.hyper", {("Extract", "Extract"): (cols, [(1,)])})
    payload = hyper_files.create(tmp_path / "p.hyper", {("public", "new"): (cols, [(2,)])})
    ask = Replies(emulator)
    ask.keep("server info", ask.http.get("/serverinfo"), 200)
    ask.sign_in("sign-in refused", "wrong", 401)
    signed = ask.sign_in("sign-in", RAW_TOKEN[1], 200).find("t:credentials", NS)
    ask.http.headers["X-Tableau-Auth"] = signed.get("token")
    ask.site = f"/sites/{signed.find('t:site', NS).get('id')}"
    ask.keep("unknown resource", ask.http.get(f"{ask.site}/nothing"), 404)

    top = emulator.add_project("Top", SITE)
    child = f'<tsRequest><project name="Child" parentProjectId="{top}"/></tsRequest>'
    ask.keep("project create", ask.http.post(f"{ask.site}/projects", content=child), 201)
    ask.keep("project list", ask.http.get(f"{ask.site}/projects"), 200)

    published = ask.publish("publish", "ds", 201, uploadSessionId=ask.upload(extract.read_bytes()))
    ds_id = published.find("t:datasource", NS).get("id")
    session = ask.upload(extract.read_bytes())
    queued = ask.publish("publish async", "big", 202, asJob="true", uploadSessionId=session)
    ask.job("publish job", queued.find("t:job", NS).get("id"), until="completedAt")
    ask.keep("data source list", ask.http.get(f"{ask.site}/datasources"), 200)
    ask.keep("data source", ask.http.get(f"{ask.site}/datasources/{ds_id}"), 200)
    ask.keep("connections", ask.http.get(f"{ask.site}/datasources/{ds_id}/connections"), 200)
    ask.warnings(ds_id)

    emulator.faults.pause_jobs(once_started=True)
    insert = batch_to_json([Insert(source_table="new", target_table="Extract")])
    job_id = ask.update(ds_id, "insert", insert, uploadSessionId=ask.upload(payload.read_bytes()))
    ask.job("job in progress", job_id, until="startedAt")
    emulator.faults.resume_jobs()
    ask.job("job completed", job_id, until="completedAt")
    emulator.faults.fail_next_job("backgrounder out of disk")
    wipe = batch_to_json([Delete(target_table="Extract", condition=Always())])
    ask.job("job failed", ask.update(ds_id, "wipe", wipe), until="completedAt")
    ask.update(ds_id, "insert", insert, "update data again")  # the RequestID's job, as queued
    ask.keep("bad request", ask.http.patch(f"{ask.site}/datasources/{ds_id}/data"), 400)
    emulator.expire_tokens()
    ask.keep("session expired", ask.http.get(f"{ask.site}/projects"), 401)
    return ask.kept


def differences(kind: Kind, reply: ET.Element) -> list[str]:
    """How `reply` departs from the kind's recordings and allow-lists; empty if it does not."""
    have = parts(reply)
    recorded = recorded_parts(kind)
    found = [f"root {reply.tag}"] if reply.tag != "{http://tableau.com/api}tsResponse" else []
    found += [f"lacks recorded {p}" for p in sorted(recorded - have - kind.unsent.keys())]
    allowed = kind.extra.keys() | kind.required.keys()
    found += [f"sends unrecorded {p}" for p in sorted(have - recorded - allowed)]
    found += [f"extra {p} is not sent: drop it" for p in sorted(allowed - have)]
    found += [f"unsent {p} is sent: drop it" for p in sorted(kind.unsent.keys() & have)]
    for part, value in kind.values.items():
        sent = values_at(reply, part)
        if not sent or set(sent) != {value}:
            found.append(f"{part} is {sent}, not {value!r}")
    return found


def test_every_reply_has_every_part_of_its_recordings_and_no_unjustified_other(
    replies: dict[str, ET.Element],
) -> None:
    assert set(replies) == set(KINDS)
    found = {kind: differences(KINDS[kind], reply) for kind, reply in replies.items()}
    report = [f"{kind}: {departs}" for kind, departs in found.items() if departs]
    assert not report, "\n".join(report)


@pytest.mark.parametrize("name", sorted(KINDS))
def test_the_allow_lists_say_what_the_recordings_show(name: str) -> None:
    """`extra` entries cite what their recording has and their kind's lack; `required`
    entries name what the schema requires; `unsent` entries name parts their kind's
    recordings have."""
    kind = KINDS[name]
    recorded = recorded_parts(kind)
    for part, shown in kind.extra.items():
        assert part not in recorded, f"{part} is recorded: no allow-list entry needed"
        assert shown.path in parts(load(shown.recording)), (part, shown)
    for part, type_name in kind.required.items():
        assert part not in recorded, f"{part} is recorded: no allow-list entry needed"
        assert schema_requires(type_name, part.rpartition("/")[2]), (part, type_name)
    assert kind.unsent.keys() <= recorded
    if kind.moved:  # an element every recording of the kind has
        assert all(kind.moved.recorded in parts(load(r)) for r in kind.recordings), kind.moved


def test_warning_replies_name_their_data_source_and_site(
    replies: dict[str, ET.Element],
) -> None:
    """The ids no allow-list can fix: the warned data source's (`contentId`) and the
    signed-in site's, in every warning reply."""
    ds_id = replies["publish"].find("t:datasource", NS).get("id")
    site_id = replies["sign-in"].find("t:credentials/t:site", NS).get("id")
    for name, kind in KINDS.items():
        if DQW in kind.recordings:
            at = kind.moved.sent if kind.moved else DQW_LIST
            assert values_at(replies[name], f"{at}@contentId") == [ds_id], name
            assert values_at(replies[name], f"{at}/site@id") == [site_id], name
