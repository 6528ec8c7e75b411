"""HTTP routing of the REST endpoints the emulator serves.

`ROUTES` maps (method, path regex) to a handler of `api_sites`, `api_datasources`,
`api_jobs`, `api_warnings` or `api_vds` (the VizQL Data Service); REST paths match any
API version, and paths any letter case. `Api` holds the stores the handlers work on,
signs requests in and answers each one, errors included. `RequestHandler` adapts
`http.server` to `Api.handle`.
"""

from __future__ import annotations

import logging
import os
import re
import shutil
import socket
from collections.abc import Callable
from dataclasses import dataclass
from email.message import Message
from http.server import BaseHTTPRequestHandler
from typing import Any, BinaryIO
from urllib.parse import parse_qsl, unquote, urlsplit

from tableauhyperapi import Endpoint

from hyper_assets.emulator import api_datasources, api_jobs, api_sites, api_vds, api_warnings
from hyper_assets.emulator.errors import RestApiError
from hyper_assets.emulator.faults import Faults
from hyper_assets.emulator.jobs import JobRunner
from hyper_assets.emulator.quality import QualityWarnings
from hyper_assets.emulator.rest import Reply, Request
from hyper_assets.emulator.sessions import Session, Sessions
from hyper_assets.emulator.store import Site, Sites, UploadStore
from hyper_assets.emulator.wire import error_nodes, not_found, render

log = logging.getLogger(__name__)

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
    handler: Handler
    auth: bool = True
    scope: str = ""  # what a Connected App JWT must grant (the emulator's reading of the scopes)


def _route(
    method: str, pattern: str, handler: Handler, scope: str = "", auth: bool = True
) -> Route:
    return Route(method, re.compile(pattern, re.IGNORECASE), handler, auth, scope)


READ = "tableau:content:read"
ROUTES = [
    _route("GET", API + r"/serverinfo", api_sites.server_info, auth=False),
    _route("POST", API + r"/auth/signin", api_sites.sign_in, auth=False),
    _route("POST", API + r"/auth/signout", api_sites.sign_out),
    _route("GET", SITE + r"/projects", api_sites.list_projects, READ),
    _route("POST", SITE + r"/projects", api_sites.create_project, "tableau:projects:create"),
    _route("GET", SITE + r"/datasources", api_datasources.list_datasources, READ),
    _route("POST", SITE + r"/datasources", api_datasources.publish, "tableau:datasources:create"),
    _route("GET", DS, api_datasources.get_datasource, READ),
    _route("GET", DS + r"/connections", api_datasources.list_connections, READ),
    _route("GET", DS + r"/content", api_datasources.download, READ),
    _route("PATCH", DS + r"/data", api_jobs.update_data, "tableau:datasources:update"),
    _route(
        "PATCH",
        DS + r"/connections/(?P<conn>[^/]+)/data",
        api_jobs.update_data,
        "tableau:datasources:update",
    ),
    _route(
        "POST",
        SITE + r"/fileUploads",
        api_datasources.initiate_upload,
        "tableau:file_uploads:create",
    ),
    _route(
        "PUT",
        SITE + r"/fileUploads/(?P<upload>[^/]+)",
        api_datasources.append_upload,
        "tableau:file_uploads:create",
    ),
    _route("GET", SITE + r"/jobs/(?P<job>[^/]+)", api_jobs.get_job, "tableau:jobs:read"),
    _route("PUT", SITE + r"/jobs/(?P<job>[^/]+)", api_jobs.cancel_job, "tableau:jobs:update"),
    _route("POST", DQW_CONTENT, api_warnings.add_warning),
    _route("GET", DQW_CONTENT, api_warnings.list_warnings, READ),
    _route("PUT", DQW_CONTENT, api_warnings.update_only_warning),
    _route("DELETE", DQW_CONTENT, api_warnings.delete_warnings),
    _route("GET", DQW + r"/(?P<dqw>[^/]+)", api_warnings.get_warning, READ),
    _route("PUT", DQW + r"/(?P<dqw>[^/]+)", api_warnings.update_warning),
    _route("DELETE", DQW + r"/(?P<dqw>[^/]+)", api_warnings.delete_warning),
    # The VizQL Data Service signs its requests in itself: its refusals are JSON.
    _route("POST", api_vds.PREFIX + "/read-metadata", api_vds.read_metadata, auth=False),
    _route(
        "POST", api_vds.PREFIX + "/get-datasource-model", api_vds.get_datasource_model, auth=False
    ),
    _route("POST", api_vds.PREFIX + "/query-datasource", api_vds.query_datasource, auth=False),
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
        self.faults.hold_if_paused(method, path)
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
            reply = route.handler(self, request)
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


class RequestHandler(BaseHTTPRequestHandler):
    """Reads one HTTP request, lets `Api` answer it, writes the reply (or drops it)."""

    protocol_version = "HTTP/1.1"
    api: Api  # set on a subclass per emulator

    def _serve(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length) if length else b""
        reply = self.api.handle(self.command, self.path, self.headers, body)
        if reply.drop:
            if reply.file is not None:
                reply.file.close()
            self.close_connection = True
            self.connection.shutdown(socket.SHUT_RDWR)
            return
        if reply.file is not None:
            self._send_file(reply, reply.file)
            return
        if reply.json is not None:
            self._send_json(reply, reply.json)
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

    def _send_json(self, reply: Reply, body: bytes) -> None:
        self.send_response(reply.status)
        self.send_header("Content-Type", "application/json")
        for name, value in reply.headers.items():
            self.send_header(name, value)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def _send_file(self, reply: Reply, file: BinaryIO) -> None:
        """A download's reply: the open file's bytes, copied in chunks."""
        with file as source:
            self.send_response(reply.status)
            self.send_header("Content-Type", "application/octet-stream")
            for name, value in reply.headers.items():
                self.send_header(name, value)
            self.send_header("Content-Length", str(os.fstat(source.fileno()).st_size))
            self.end_headers()
            shutil.copyfileobj(source, self.wfile)

    do_GET = do_POST = do_PUT = do_PATCH = do_DELETE = _serve

    def log_message(self, format: str, *args: Any) -> None:
        log.debug("%s %s", self.address_string(), format % args)
