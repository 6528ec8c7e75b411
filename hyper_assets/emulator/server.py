"""HTTP routing and the REST handlers the emulator serves.

`ROUTES` maps (method, path regex) to a handler method of `Api`; paths match any API
version and any letter case. `RequestHandler` adapts `http.server` to `Api.handle`.
"""

from __future__ import annotations

import logging
import re
import socket
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from email.message import Message
from http.server import BaseHTTPRequestHandler
from typing import Any
from urllib.parse import parse_qsl, unquote, urlsplit

from hyper_assets.emulator.faults import Faults
from hyper_assets.emulator.jobs import Job, JobRunner
from hyper_assets.emulator.sessions import Session, Sessions
from hyper_assets.emulator.store import (
    PROJECT_ID,
    PROJECT_NAME,
    Datasource,
    DatasourceStore,
    UploadStore,
)
from hyper_assets.emulator.wire import (
    Node,
    bad_request,
    error_nodes,
    not_found,
    parse_json,
    parse_multipart,
    parse_xml,
    render,
    stamp,
)
from hyper_assets.errors import ActionValidationError, RestApiError
from hyper_assets.tableau.actions import parse_batch

log = logging.getLogger(__name__)

SITE_ID = "a7f7e0c2-0b6d-4c55-9e2b-6f1b7b7d0a01"
MEGABYTE = 1024 * 1024
PRODUCT_VERSION = "2024.2.0"
BUILD = "20242.24.0711.1636"


@dataclass
class Request:
    method: str
    path: str
    query: dict[str, str]
    headers: Message
    body: bytes
    groups: dict[str, str] = field(default_factory=dict)
    session: Session | None = None


@dataclass
class Reply:
    status: int
    nodes: list[Node] = field(default_factory=list)
    headers: dict[str, str] = field(default_factory=dict)
    drop: bool = False


Handler = Callable[["Api", Request], Reply]
API = r"/api/(?P<version>\d+(?:\.\d+)*)"
SITE = API + r"/sites/(?P<site>[^/]+)"
DS = SITE + r"/datasources/(?P<ds>[^/]+)"


@dataclass(frozen=True)
class Route:
    method: str
    pattern: re.Pattern[str]
    handler: str
    auth: bool = True


def _route(method: str, pattern: str, handler: str, *, auth: bool = True) -> Route:
    return Route(method, re.compile(pattern, re.IGNORECASE), handler, auth)


ROUTES = [
    _route("GET", API + r"/serverinfo", "server_info", auth=False),
    _route("POST", API + r"/auth/signin", "sign_in", auth=False),
    _route("POST", API + r"/auth/signout", "sign_out"),
    _route("GET", SITE + r"/projects", "list_projects"),
    _route("GET", SITE + r"/datasources", "list_datasources"),
    _route("POST", SITE + r"/datasources", "publish"),
    _route("GET", DS, "get_datasource"),
    _route("GET", DS + r"/connections", "list_connections"),
    _route("PATCH", DS + r"/data", "update_data"),
    _route("PATCH", DS + r"/connections/(?P<conn>[^/]+)/data", "update_data"),
    _route("POST", SITE + r"/fileUploads", "initiate_upload"),
    _route("PUT", SITE + r"/fileUploads/(?P<upload>[^/]+)", "append_upload"),
    _route("GET", SITE + r"/jobs/(?P<job>[^/]+)", "get_job"),
    _route("PUT", SITE + r"/jobs/(?P<job>[^/]+)", "cancel_job"),
]


class Api:
    """The REST endpoints over the emulator's stores; `handle` answers one request."""

    def __init__(
        self,
        store: DatasourceStore,
        uploads: UploadStore,
        jobs: JobRunner,
        sessions: Sessions,
        faults: Faults,
        *,
        max_payload_bytes: int,
        api_version: str,
    ) -> None:
        self.store = store
        self.uploads = uploads
        self.jobs = jobs
        self.sessions = sessions
        self.faults = faults
        self.max_payload_bytes = max_payload_bytes
        self.api_version = api_version

    def handle(self, method: str, target: str, headers: Message, body: bytes) -> Reply:
        url = urlsplit(target)
        path = url.path.rstrip("/") or "/"
        fault = self.faults.take_failure(method, path)
        if fault is not None:
            err = RestApiError(fault.status, f"{fault.status}000", "Injected fault", "Retry later.")
            retry = {"Retry-After": str(fault.retry_after)} if fault.retry_after else {}
            return Reply(fault.status, error_nodes(err), retry)
        if self.faults.take_expiry(method, path):
            self.sessions.expire_all()
        try:
            request = Request(method, path, dict(parse_qsl(url.query)), headers, body)
            route = self._resolve(request)
            if route.auth:
                request.session = self.sessions.check(headers.get("X-Tableau-Auth"))
                site = request.groups.get("site")
                if site is not None and site != SITE_ID:
                    raise not_found("404000", f"Site {site!r} does not exist; use {SITE_ID}.")
            handler: Handler = getattr(Api, route.handler)
            reply = handler(self, request)
        except RestApiError as err:
            return Reply(err.status, error_nodes(err))
        except Exception as err:  # a bug in the emulator must still answer, not hang up
            log.exception("%s %s failed", method, path)
            failure = RestApiError(500, "500000", "Internal Server Error", f"Emulator bug: {err!r}")
            return Reply(500, error_nodes(failure))
        reply.drop = self.faults.take_drop(method, path)
        return reply

    def _resolve(self, request: Request) -> Route:
        allowed = []
        for route in ROUTES:
            found = route.pattern.fullmatch(request.path)
            if found:
                if route.method == request.method:
                    request.groups = {k: unquote(v) for k, v in found.groupdict().items()}
                    return route
                allowed.append(route.method)
        if allowed:
            raise RestApiError(
                405, "405000", "Method Not Allowed", f"{request.method} {request.path}"
            )
        raise not_found("404000", f"No endpoint {request.method} {request.path} in the emulator.")

    # --- server, auth, projects -------------------------------------------------------------

    def server_info(self, request: Request) -> Reply:
        info = Node(
            "serverInfo",
            children=[
                Node("productVersion", {"build": BUILD}, text=PRODUCT_VERSION),
                Node("restApiVersion", text=self.api_version),
            ],
        )
        return Reply(200, [info])

    def sign_in(self, request: Request) -> Reply:
        if "json" in (request.headers.get("Content-Type") or ""):
            credentials = parse_json(request.body).get("credentials", {})
            name = credentials.get("personalAccessTokenName")
            secret = credentials.get("personalAccessTokenSecret")
            content_url = credentials.get("site", {}).get("contentUrl", "")
        else:
            element = parse_xml(request.body).find(".//credentials")
            attrs: Mapping[str, str] = element.attrib if element is not None else {}
            site = element.find("site") if element is not None else None
            name = attrs.get("personalAccessTokenName")
            secret = attrs.get("personalAccessTokenSecret")
            content_url = site.get("contentUrl", "") if site is not None else ""
        if content_url:
            raise RestApiError(
                401,
                "401001",
                "Signin Error",
                f"Site {content_url!r} does not exist; the emulator serves only the "
                'default site (contentUrl "").',
            )
        session = self.sessions.sign_in(name, secret)
        credentials_node = Node(
            "credentials",
            {"token": session.token},
            [
                Node("site", {"id": SITE_ID, "contentUrl": ""}),
                Node("user", {"id": session.user_id}),
            ],
        )
        return Reply(200, [credentials_node])

    def sign_out(self, request: Request) -> Reply:
        assert request.session is not None
        self.sessions.sign_out(request.session.token)
        return Reply(204)

    def list_projects(self, request: Request) -> Reply:
        project = Node("project", {"id": PROJECT_ID, "name": PROJECT_NAME, "description": ""})
        return Reply(200, _page(request, [project], "projects"))

    # --- data sources -------------------------------------------------------------------------

    def list_datasources(self, request: Request) -> Reply:
        name = None
        if "filter" in request.query:
            field_, _, value = request.query["filter"].partition(":eq:")
            if field_ != "name" or not _:
                raise bad_request("the emulator filters data sources by name:eq:<name> only")
            name = value
        found = [_datasource_node(d) for d in self.store.list(name)]
        return Reply(200, _page(request, found, "datasources"))

    def get_datasource(self, request: Request) -> Reply:
        return Reply(200, [_datasource_node(self.store.get(request.groups["ds"]))])

    def list_connections(self, request: Request) -> Reply:
        datasource = self.store.get(request.groups["ds"])
        connection = Node(
            "connection",
            {"id": datasource.connection_id, "type": "hyper", "serverAddress": "", "userName": ""},
            [Node("datasource", {"id": datasource.id, "name": datasource.name})],
        )
        return Reply(200, [Node("connections", children=[connection], many=True)])

    def publish(self, request: Request) -> Reply:
        query = request.query
        if query.get("datasourceType", "hyper").lower() != "hyper":
            raise bad_request("the emulator publishes .hyper files only (datasourceType=hyper)")
        if _flag(query, "append") or _flag(query, "asJob"):
            raise bad_request(
                "append and asJob publishing are not emulated; publish with createnew or overwrite"
            )
        parts = parse_multipart(request.body, request.headers.get("Content-Type") or "")
        name = _publish_name(parts.get("request_payload", b""))
        staged = self.store.staging_path()
        if "uploadSessionId" in query:
            self.uploads.consume(query["uploadSessionId"], f"the publish of {name!r}").replace(
                staged
            )
        elif "tableau_datasource" in parts:
            staged.write_bytes(parts["tableau_datasource"])
        else:
            raise bad_request("send the file as a tableau_datasource part or give uploadSessionId")
        datasource = self.store.publish(name, staged, overwrite=_flag(query, "overwrite"))
        return Reply(201, [_datasource_node(datasource)])

    # --- uploads ------------------------------------------------------------------------------

    def initiate_upload(self, request: Request) -> Reply:
        return Reply(201, [_upload_node(self.uploads.initiate(), 0)])

    def append_upload(self, request: Request) -> Reply:
        session_id = request.groups["upload"]
        parts = parse_multipart(request.body, request.headers.get("Content-Type") or "")
        if "tableau_file" not in parts:
            raise bad_request("an append needs a tableau_file part holding the chunk")
        size = self.uploads.append(session_id, parts["tableau_file"])
        return Reply(200, [_upload_node(session_id, size)])

    # --- update data and jobs ----------------------------------------------------------------

    def update_data(self, request: Request) -> Reply:
        datasource = self.store.get(request.groups["ds"])
        connection_id = request.groups.get("conn", datasource.connection_id)
        if connection_id != datasource.connection_id:
            raise not_found(
                "404000",
                f"Connection {connection_id!r} is not a connection of {datasource.name!r}.",
            )
        request_id = request.headers.get("RequestID")
        if not request_id:
            raise bad_request("the RequestID header is required; send a unique id per batch")
        original = self.jobs.duplicate(request_id)
        if original is not None:
            return Reply(202, [_job_node(original)])
        if len(request.body) > self.max_payload_bytes:
            raise _too_large(len(request.body), self.max_payload_bytes)
        try:
            actions = parse_batch(parse_json(request.body))
        except ActionValidationError as err:
            raise bad_request(f"invalid action batch: {err}") from None
        payload = None
        session_id = request.query.get("uploadSessionId")
        if session_id:
            size = self.uploads.size(session_id)
            if size > self.max_payload_bytes:
                raise _too_large(size, self.max_payload_bytes)
            payload = self.uploads.consume(session_id, f"the update with RequestID {request_id!r}")
        job = self.jobs.submit(request_id, datasource, connection_id, actions, payload)
        return Reply(202, [_job_node(job)])

    def get_job(self, request: Request) -> Reply:
        return Reply(200, [_job_node(self.jobs.get(request.groups["job"]))])

    def cancel_job(self, request: Request) -> Reply:
        self.jobs.cancel(request.groups["job"])
        return Reply(204)


def _flag(query: Mapping[str, str], name: str) -> bool:
    return query.get(name, "").lower() == "true"


def _too_large(size: int, limit: int) -> RestApiError:
    return RestApiError(
        413,
        "413000",
        "Payload Too Large",
        f"The payload is {size} bytes; this server accepts at most {limit} bytes "
        f"({limit / MEGABYTE:.1f} MB). Split the change into smaller batches.",
    )


def _publish_name(request_payload: bytes) -> str:
    element = parse_xml(request_payload).find(".//datasource") if request_payload else None
    name = element.get("name") if element is not None else None
    if not name:
        raise bad_request(
            'request_payload needs <datasource name=".."><project id=".."/></datasource>'
        )
    project = element.find("project")
    project_id = project.get("id") if project is not None else PROJECT_ID
    if project_id != PROJECT_ID:
        raise not_found(
            "404005",
            f"Project {project_id!r} does not exist; "
            f"the emulator has {PROJECT_NAME!r} ({PROJECT_ID}).",
        )
    return name


def _page(request: Request, items: list[Node], container: str) -> list[Node]:
    """One page of `items` with the `<pagination>` TSC's Pager needs."""
    try:
        number = max(1, int(request.query.get("pageNumber", "1")))
        size = max(1, min(1000, int(request.query.get("pageSize", "100"))))
    except ValueError:
        raise bad_request("pageNumber and pageSize must be integers") from None
    page = items[(number - 1) * size : number * size]
    pagination = Node(
        "pagination",
        {"pageNumber": str(number), "pageSize": str(size), "totalAvailable": str(len(items))},
    )
    return [pagination, Node(container, children=page, many=True)]


def _datasource_node(datasource: Datasource) -> Node:
    size_mb = (
        max(1, -(-datasource.path.stat().st_size // MEGABYTE)) if datasource.path.exists() else 0
    )
    attrs = {
        "id": datasource.id,
        "name": datasource.name,
        "type": "hyper",
        "contentUrl": datasource.name,
        "createdAt": stamp(datasource.created_at),
        "updatedAt": stamp(datasource.updated_at),
        "size": str(size_mb),
        "hasExtracts": "true",
        "isCertified": "false",
    }
    children = [Node("project", {"id": PROJECT_ID, "name": PROJECT_NAME})]
    return Node("datasource", attrs, children)


def _upload_node(session_id: str, size: int) -> Node:
    return Node("fileUpload", {"uploadSessionId": session_id, "fileSize": str(size // MEGABYTE)})


def _job_node(job: Job) -> Node:
    attrs = {
        "id": job.id,
        "mode": "Asynchronous",
        "type": "UpdateUploadedFile",
        "progress": str(job.progress),
        "createdAt": stamp(job.created_at),
    }
    if job.started_at is not None:
        attrs["startedAt"] = stamp(job.started_at)
    if job.completed_at is not None:
        attrs["completedAt"] = stamp(job.completed_at)
        attrs["finishCode"] = str(job.finish_code)
    # As recorded from real servers: the notes sit inside the job-type element.
    detail = Node(
        "updateUploadedFileJob",
        children=[
            Node("datasource", {"id": job.datasource.id, "name": job.datasource.name}),
            Node("connectionLuid", text=job.connection_id),
            *([Node("notes", text=job.notes)] if job.notes else []),
        ],
    )
    return Node("job", attrs, [detail])


class RequestHandler(BaseHTTPRequestHandler):
    """Reads one HTTP request, lets `Api` answer it, writes the reply (or drops it)."""

    protocol_version = "HTTP/1.1"
    api: Api  # set on a subclass per emulator

    def _serve(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length) if length else b""
        reply = self.api.handle(self.command, self.path, self.headers, body)
        if reply.drop:
            self.close_connection = True
            self.connection.shutdown(socket.SHUT_RDWR)
            return
        as_json = "application/json" in (self.headers.get("Accept") or "").lower()
        payload = render(reply.nodes, as_json) if reply.nodes else b""
        self.send_response(reply.status)
        if payload:
            self.send_header(
                "Content-Type", "application/json" if as_json else "application/xml;charset=UTF-8"
            )
        for name, value in reply.headers.items():
            self.send_header(name, value)
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)

    do_GET = do_POST = do_PUT = do_PATCH = do_DELETE = _serve

    def log_message(self, format: str, *args: Any) -> None:
        log.debug("%s %s", self.address_string(), format % args)
