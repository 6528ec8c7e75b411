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
from urllib.parse import parse_qsl, quote, unquote, urlsplit

from tableauhyperapi import Endpoint

from hyper_assets._files import MEGABYTE
from hyper_assets.emulator.errors import RestApiError
from hyper_assets.emulator.faults import Faults
from hyper_assets.emulator.jobs import UPDATE, Job, JobRunner
from hyper_assets.emulator.model import check_model
from hyper_assets.emulator.quality import Fields, QualityWarnings
from hyper_assets.emulator.sessions import Session, Sessions
from hyper_assets.emulator.store import Datasource, Project, Site, Sites, UploadStore
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
from hyper_assets.errors import ActionValidationError
from hyper_assets.tableau.actions import parse_batch

log = logging.getLogger(__name__)

OWNER_ID = "dd2239f6-ddf1-4107-981a-4cf94e415794"  # the site administrator owning everything
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
    site: Site | None = None

    @property
    def on_site(self) -> Site:
        """The site in the path, which the session is signed in to."""
        assert self.site is not None
        return self.site


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
DQW = SITE + r"/dataQualityWarnings"
DQW_CONTENT = DQW + r"/(?P<content_type>[^/]+)/(?P<content>[^/]+)"


@dataclass(frozen=True)
class Route:
    method: str
    pattern: re.Pattern[str]
    handler: str
    auth: bool = True
    scope: str = ""  # what a Connected App JWT must grant (the emulator's reading of the scopes)


def _route(method: str, pattern: str, handler: str, scope: str = "", auth: bool = True) -> Route:
    return Route(method, re.compile(pattern, re.IGNORECASE), handler, auth, scope)


READ = "tableau:content:read"
ROUTES = [
    _route("GET", API + r"/serverinfo", "server_info", auth=False),
    _route("POST", API + r"/auth/signin", "sign_in", auth=False),
    _route("POST", API + r"/auth/signout", "sign_out"),
    _route("GET", SITE + r"/projects", "list_projects", READ),
    _route("POST", SITE + r"/projects", "create_project", "tableau:projects:create"),
    _route("GET", SITE + r"/datasources", "list_datasources", READ),
    _route("POST", SITE + r"/datasources", "publish", "tableau:datasources:create"),
    _route("GET", DS, "get_datasource", READ),
    _route("GET", DS + r"/connections", "list_connections", READ),
    _route("PATCH", DS + r"/data", "update_data", "tableau:datasources:update"),
    _route(
        "PATCH",
        DS + r"/connections/(?P<conn>[^/]+)/data",
        "update_data",
        "tableau:datasources:update",
    ),
    _route("POST", SITE + r"/fileUploads", "initiate_upload", "tableau:file_uploads:create"),
    _route(
        "PUT",
        SITE + r"/fileUploads/(?P<upload>[^/]+)",
        "append_upload",
        "tableau:file_uploads:create",
    ),
    _route("GET", SITE + r"/jobs/(?P<job>[^/]+)", "get_job", "tableau:jobs:read"),
    _route("PUT", SITE + r"/jobs/(?P<job>[^/]+)", "cancel_job", "tableau:jobs:update"),
    _route("POST", DQW_CONTENT, "add_warning"),
    _route("GET", DQW_CONTENT, "list_warnings", READ),
    _route("PUT", DQW_CONTENT, "update_only_warning"),
    _route("DELETE", DQW_CONTENT, "delete_warnings"),
    _route("GET", DQW + r"/(?P<dqw>[^/]+)", "get_warning", READ),
    _route("PUT", DQW + r"/(?P<dqw>[^/]+)", "update_warning"),
    _route("DELETE", DQW + r"/(?P<dqw>[^/]+)", "delete_warning"),
]


class Api:
    """The REST endpoints over the emulator's stores; `handle` answers one request."""

    def __init__(
        self,
        sites: Sites,
        uploads: UploadStore,
        jobs: JobRunner,
        sessions: Sessions,
        faults: Faults,
        endpoint: Callable[[], Endpoint],
        *,
        max_payload_bytes: int,
        api_version: str,
    ) -> None:
        self.sites = sites
        self.uploads = uploads
        self.jobs = jobs
        self.sessions = sessions
        self.faults = faults
        self.endpoint = endpoint
        self.max_payload_bytes = max_payload_bytes
        self.api_version = api_version
        self.warnings = QualityWarnings()

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
                if route.scope and not request.session.allows(route.scope):
                    raise RestApiError(
                        403,
                        "403000",
                        "Forbidden",
                        f"The connected app's JWT grants no scope {route.scope!r} (nor "
                        f"{route.scope.rpartition(':')[0]}:*), which {method} {path} needs.",
                    )
                site_id = request.groups.get("site")
                if site_id is not None:
                    request.site = self._session_site(request.session, site_id)
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

    def _session_site(self, session: Session, site_id: str) -> Site:
        """The site of the path; a session may use only the site it signed in to (403)."""
        site = self.sites.by_id(site_id)
        if site is None or site.id != session.site_id:
            raise RestApiError(
                403,
                "403000",
                "Forbidden",
                f"This session is signed in to site {session.site_id}, not {site_id!r}: a "
                "token is bound to its site. Sign in to that site's content URL to use it.",
            )
        return site

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
        raise not_found("404003", f"Unknown resource {request.path!r} specified in URI.")

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
            attrs: Mapping[str, str] = credentials
            content_url = credentials.get("site", {}).get("contentUrl", "")
        else:
            element = parse_xml(request.body).find(".//credentials")
            attrs = element.attrib if element is not None else {}
            site = element.find("site") if element is not None else None
            content_url = site.get("contentUrl", "") if site is not None else ""
        site = self.sites.by_content_url(content_url or "")
        if site is None:
            raise RestApiError(
                401,
                "401001",
                "Signin Error",
                f"Error signing in to Tableau Server: there is no site with content URL "
                f"{content_url!r}.",
            )
        if attrs.get("jwt"):
            session = self.sessions.sign_in_jwt(attrs["jwt"], site.id)
        else:
            name, secret = (attrs.get(f"personalAccessToken{k}") for k in ("Name", "Secret"))
            session = self.sessions.sign_in(name, secret, site.id)
        credentials_node = Node(
            "credentials",
            {"token": session.token},
            [
                Node("site", {"id": site.id, "contentUrl": site.content_url}),
                Node("user", {"id": session.user_id}),
            ],
        )
        return Reply(200, [credentials_node])

    def sign_out(self, request: Request) -> Reply:
        assert request.session is not None
        self.sessions.sign_out(request.session.token)
        return Reply(204)

    def list_projects(self, request: Request) -> Reply:
        wanted = _filters(request, {"name", "parentProjectId", "topLevelProject"})
        found = [
            _project_node(p)
            for p in request.on_site.projects()
            if wanted.get("name", p.name) == p.name
            and wanted.get("parentProjectId", _parent_id(p)) == _parent_id(p)
            and wanted.get("topLevelProject", _top_level(p)) == _top_level(p)
        ]
        return Reply(200, _page(request, found, "projects"))

    def create_project(self, request: Request) -> Reply:
        if "json" in (request.headers.get("Content-Type") or ""):
            attrs = parse_json(request.body).get("project", {})
        else:
            element = parse_xml(request.body).find(".//project")
            attrs = dict(element.attrib) if element is not None else {}
        name = attrs.get("name")
        if not isinstance(name, str) or not name:
            raise bad_request('create a project with <project name=".." parentProjectId=".."/>')
        project = request.on_site.create_project(
            name, attrs.get("parentProjectId") or None, str(attrs.get("description") or "")
        )
        return Reply(201, [_project_node(project)])

    # --- data sources -------------------------------------------------------------------------

    def list_datasources(self, request: Request) -> Reply:
        name = _filters(request, {"name"}).get("name")
        site = request.on_site
        found = [_datasource_node(request, d) for d in site.datasources(name)]
        return Reply(200, _page(request, found, "datasources"))

    def get_datasource(self, request: Request) -> Reply:
        node = _datasource_node(request, request.on_site.datasource(request.groups["ds"]))
        # As recorded from a real server (datasource_get_by_id.xml): one data source's reply
        # also carries its Ask Data setting, which the emulator leaves at the site's default.
        node.children.append(Node("askData", {"enablement": "SiteDefault"}))
        return Reply(200, [node])

    def list_connections(self, request: Request) -> Reply:
        datasource = request.on_site.datasource(request.groups["ds"])
        connection = Node(
            "connection",
            {
                "id": datasource.connection_id,
                "type": "hyper",
                "embedPassword": "false",
                "serverAddress": "",
                "serverPort": "",
                "userName": "",
            },
            [Node("datasource", {"id": datasource.id, "name": datasource.name})],
        )
        return Reply(200, [Node("connections", children=[connection], many=True)])

    def publish(self, request: Request) -> Reply:
        query = request.query
        if query.get("datasourceType", "hyper").lower() != "hyper":
            raise bad_request("the emulator publishes .hyper files only (datasourceType=hyper)")
        if _flag(query, "append"):
            raise bad_request(
                "append publishing is not emulated; publish with createnew or overwrite"
            )
        parts = parse_multipart(request.body, request.headers.get("Content-Type") or "")
        site = request.on_site
        name, project = _publish_target(site, parts.get("request_payload", b""))
        staged = self.sites.staging_path()
        if "uploadSessionId" in query:
            self.uploads.consume(query["uploadSessionId"], f"the publish of {name!r}").replace(
                staged
            )
        elif "tableau_datasource" in parts:
            staged.write_bytes(parts["tableau_datasource"])
        else:
            raise bad_request("send the file as a tableau_datasource part or give uploadSessionId")
        overwrite = _flag(query, "overwrite")
        try:  # refused before queuing
            site.check_publish(name, project, overwrite)
            check_model(self.endpoint(), staged, name)
        except RestApiError:
            staged.unlink(missing_ok=True)
            raise
        if _flag(query, "asJob"):
            job = self.jobs.submit_publish(
                site.id, lambda: site.publish(name, project, staged, overwrite), staged
            )
            return Reply(202, [_accepted_job_node(job)])
        try:
            datasource = site.publish(name, project, staged, overwrite)
        finally:
            staged.unlink(missing_ok=True)  # moved in by a publish, left over by a refusal
        return Reply(201, [_datasource_node(request, datasource, page=False)])

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
        site = request.on_site
        datasource = site.datasource(request.groups["ds"])
        connection_id = request.groups.get("conn", datasource.connection_id)
        if connection_id != datasource.connection_id:
            raise not_found(
                "404000",
                f"Connection {connection_id!r} is not a connection of {datasource.name!r}.",
            )
        request_id = request.headers.get("RequestID")
        if not request_id:
            raise bad_request("the RequestID header is required; send a unique id per batch")
        original = self.jobs.duplicate(site.id, request_id)
        if original is not None:
            return Reply(202, [_accepted_job_node(original)])
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
        job = self.jobs.submit_update(
            site.id, request_id, datasource, connection_id, actions, payload
        )
        return Reply(202, [_accepted_job_node(job)])

    def get_job(self, request: Request) -> Reply:
        return Reply(200, [_job_node(self.jobs.get(request.on_site.id, request.groups["job"]))])

    def cancel_job(self, request: Request) -> Reply:
        self.jobs.cancel(request.on_site.id, request.groups["job"])
        return Reply(204)

    # --- data quality warnings (hyper_assets.emulator.quality) ---------------------------------

    def add_warning(self, request: Request) -> Reply:
        assert request.session is not None
        site, groups = request.on_site, request.groups
        node = self.warnings.add(
            site,
            groups["content_type"],
            groups["content"],
            _fields(request),
            request.session.user_id,
        )
        return Reply(200, [node])

    def list_warnings(self, request: Request) -> Reply:
        groups = request.groups
        return Reply(
            200, [self.warnings.list(request.on_site, groups["content_type"], groups["content"])]
        )

    def update_only_warning(self, request: Request) -> Reply:
        site, groups = request.on_site, request.groups
        fields = _fields(request)
        return Reply(
            200,
            [self.warnings.update_only(site, groups["content_type"], groups["content"], fields)],
        )

    def delete_warnings(self, request: Request) -> Reply:
        groups = request.groups
        self.warnings.delete_all(request.on_site, groups["content_type"], groups["content"])
        return Reply(204)

    def get_warning(self, request: Request) -> Reply:
        return Reply(200, [self.warnings.get(request.on_site, request.groups["dqw"])])

    def update_warning(self, request: Request) -> Reply:
        node = self.warnings.update(request.on_site, request.groups["dqw"], _fields(request))
        return Reply(200, [node])

    def delete_warning(self, request: Request) -> Reply:
        self.warnings.delete(request.on_site, request.groups["dqw"])
        return Reply(204)


def _fields(request: Request) -> Fields:
    return Fields.parse(request.body, request.headers.get("Content-Type") or "")


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


def _publish_target(site: Site, request_payload: bytes) -> tuple[str, Project]:
    """The data source name and project of a publish's `request_payload`."""
    element = parse_xml(request_payload).find(".//datasource") if request_payload else None
    name = element.get("name") if element is not None else None
    if element is None or not name:
        raise bad_request(
            'request_payload needs <datasource name=".."><project id=".."/></datasource>'
        )
    project = element.find("project")
    project_id = project.get("id") if project is not None else None
    return name, site.project(project_id) if project_id else site.default


def _filters(request: Request, allowed: set[str]) -> dict[str, str]:
    """The `filter=field:eq:value,...` expressions of a list request (eq only)."""
    found = {}
    for expression in filter(None, request.query.get("filter", "").split(",")):
        field_, op, value = expression.split(":", 2) if expression.count(":") >= 2 else ("", "", "")
        if field_ not in allowed or op != "eq":
            raise bad_request(
                f"filter {expression!r} is not emulated; use field:eq:value with "
                f"field one of {sorted(allowed)}"
            )
        found[field_] = value
    return found


def _parent_id(project: Project) -> str:
    return project.parent.id if project.parent else ""


def _top_level(project: Project) -> str:
    return "true" if project.parent is None else "false"


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


def _project_node(project: Project) -> Node:
    """A project as real servers list it: attributes, then its `<owner>`."""
    attrs = {
        "id": project.id,
        "name": project.name,
        "description": project.description,
        "contentPermissions": "ManagedByOwner",
        **({"parentProjectId": project.parent.id} if project.parent else {}),
        "topLevelProject": _top_level(project),
        "writeable": "true",
        "createdAt": stamp(project.created_at),
        "updatedAt": stamp(project.created_at),
    }
    return Node("project", attrs, [Node("owner", {"id": OWNER_ID})])


def _datasource_node(request: Request, datasource: Datasource, *, page: bool = True) -> Node:
    """A data source as real servers list it: attributes, `<project>`, `<owner>`, `<tags>`.

    `webpageUrl` addresses its page by number, as recorded from a real server
    (`https://10ax.online.tableau.com/#/site/example/datasources/3566752`); without `page`
    it is left out, as from the reply to a publish recorded from a real server.
    """
    size_mb = (
        max(1, -(-datasource.path.stat().st_size // MEGABYTE)) if datasource.path.exists() else 0
    )
    attrs = {
        "id": datasource.id,
        "name": datasource.name,
        "size": str(size_mb),
        "contentUrl": datasource.name,
        "description": "",
        "type": "hyper",
        "createdAt": stamp(datasource.created_at),
        "updatedAt": stamp(datasource.updated_at),
        "encryptExtracts": "false",
        "hasExtracts": "true",
        "isCertified": "false",
        "useRemoteQueryAgent": "false",
    }
    if page:
        site = request.on_site
        url = f"http://{request.headers.get('Host', 'localhost')}/#/"
        url += f"site/{quote(site.content_url, safe='')}/" if site.content_url else ""
        attrs["webpageUrl"] = f"{url}datasources/{datasource.number}"
    project = datasource.project
    children = [
        Node("project", {"id": project.id, "name": project.name}),
        Node("owner", {"id": OWNER_ID}),
        Node("tags", many=True),
    ]
    return Node("datasource", attrs, children)


def _upload_node(session_id: str, size: int) -> Node:
    return Node("fileUpload", {"uploadSessionId": session_id, "fileSize": str(size // MEGABYTE)})


def _job_node(job: Job) -> Node:
    """A job as `GET jobs/{id}` shows it; `updatedAt` is its last change, as recorded."""
    attrs = {
        "id": job.id,
        "mode": "Asynchronous",
        "type": job.type,
        "progress": str(job.progress),
        "createdAt": stamp(job.created_at),
        "updatedAt": stamp(job.completed_at or job.started_at or job.created_at),
    }
    if job.started_at is not None:
        attrs["startedAt"] = stamp(job.started_at)
    if job.completed_at is not None:
        attrs["completedAt"] = stamp(job.completed_at)
        attrs["finishCode"] = str(job.finish_code)
    return Node("job", attrs, [_job_detail_node(job, job.notes)])


def _accepted_job_node(job: Job) -> Node:
    """A job as the 202 that queues it shows it, as recorded from real servers and whatever
    the worker has done since: an update's names its data source and connection
    (datasource_data_update.xml); a publish's has no children and carries finishCode="1"
    while queued (datasource_publish_async.xml): only completedAt says that a job has ended."""
    attrs = {"id": job.id, "mode": "Asynchronous", "type": job.type}
    created = stamp(job.created_at)
    if job.type == UPDATE:
        return Node("job", {**attrs, "createdAt": created}, [_job_detail_node(job, None)])
    return Node("job", {**attrs, "progress": "0", "createdAt": created, "finishCode": "1"})


def _job_detail_node(job: Job, notes: str | None) -> Node:
    """The job-type element: as recorded from real servers, the notes sit inside it
    (`publishDatasourceJob` is the emulator's name: no recording shows a publish job's)."""
    children = []
    if job.datasource is not None:
        children.append(Node("datasource", {"id": job.datasource.id, "name": job.datasource.name}))
    if job.type == UPDATE:
        children.append(Node("connectionLuid", text=job.connection_id))
    if notes:
        children.append(Node("notes", text=notes))
    element = "updateUploadedFileJob" if job.type == UPDATE else "publishDatasourceJob"
    return Node(element, children=children)


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
        payload = render(reply.nodes, as_json, self.api.api_version) if reply.nodes else b""
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
