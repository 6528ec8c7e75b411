"""The handlers of the VizQL Data Service: `read-metadata`, `get-datasource-model` and
`query-datasource` under `/api/v1/vizql-data-service/`, answered from the stored file.

A request carries the `X-Tableau-Auth` token of a REST sign-in; a Connected App's must
grant `tableau:viz_data_service:read`. Its body is validated against Tableau's OpenAPI
schema (`vds_schema`) before anything is read. Every refusal is the schema's
`TableauError` (`errorCode`, `message`, `datetime`) as JSON, with these codes: 400800 a
body the schema refuses, 400803 an unknown field (both as Tableau's documented codes),
401 no session, 403 a scope missing, 403800 the service off on the site (`Site.vds_enabled`;
the code and words of Tableau's reply when a VDS feature is not enabled), 404937 no such
data source, 501000 what the emulator does not emulate (`vds_query`).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from tableauhyperapi import Connection

from hyper_assets.emulator.errors import RestApiError, VdsApiError
from hyper_assets.emulator.rest import Reply, Request
from hyper_assets.emulator.store import Datasource, Site
from hyper_assets.emulator.vds_query import plan
from hyper_assets.emulator.vds_schema import problems
from hyper_assets.emulator.vds_source import Source, read_source
from hyper_assets.emulator.wire import now, stamp

if TYPE_CHECKING:
    from hyper_assets.emulator.server import Api

SCOPE = "tableau:viz_data_service:read"
PREFIX = r"/api/v1/vizql-data-service"

Answer = Callable[["Api", Datasource, Source, dict[str, Any]], Any]


def read_metadata(api: Api, request: Request) -> Reply:
    return _answer(api, request, "read-metadata", _metadata)


def get_datasource_model(api: Api, request: Request) -> Reply:
    return _answer(api, request, "get-datasource-model", _model)


def query_datasource(api: Api, request: Request) -> Reply:
    return _answer(api, request, "query-datasource", _query)


def _metadata(api: Api, datasource: Datasource, source: Source, body: dict[str, Any]) -> Any:
    return {"data": [f.metadata() for f in source.fields]}


def _model(api: Api, datasource: Datasource, source: Source, body: dict[str, Any]) -> Any:
    return source.model()


def _query(api: Api, datasource: Datasource, source: Source, body: dict[str, Any]) -> Any:
    query = plan(source, body)
    with Connection(api.endpoint(), datasource.path) as connection:
        rows = connection.execute_list_query(query.sql)
    return query.output(rows)


def _answer(api: Api, request: Request, operation: str, answer: Answer) -> Reply:
    """Signs the request in, validates its body and answers it; each refusal is a
    `TableauError`."""
    try:
        site = _site(api, request)
        body = _body(request, operation)
        datasource = _datasource(site, body["datasource"]["datasourceLuid"])
        with datasource.lock:
            source = read_source(api.endpoint(), datasource.path, datasource.id)
            reply = answer(api, datasource, source, body)
    except VdsApiError as err:
        error = {"errorCode": err.code, "message": err.message, "datetime": stamp(now())}
        return Reply(err.status, json=json.dumps(error).encode())
    return Reply(200, json=json.dumps(reply, ensure_ascii=False).encode())


def _site(api: Api, request: Request) -> Site:
    try:
        session = api.sessions.check(request.headers.get("X-Tableau-Auth"))
    except RestApiError as err:
        raise VdsApiError(401, err.code, err.detail) from None
    if not session.allows(SCOPE):
        raise VdsApiError(
            403,
            "403000",
            f"The connected app's JWT grants no scope {SCOPE!r}, which the VizQL Data "
            "Service needs.",
        )
    site = api.sites.by_id(session.site_id)
    if site is None:  # a site the emulator stopped hosting: its sessions are of no site
        raise VdsApiError(401, "401002", "The session's site is not hosted; sign in again.")
    if not site.vds_enabled:
        raise VdsApiError(
            403, "403800", "The VizQL Data Service feature is not enabled for this site."
        )
    return site


def _body(request: Request, operation: str) -> dict[str, Any]:
    try:
        body = json.loads(request.body)
    except (ValueError, UnicodeDecodeError) as err:
        raise VdsApiError(400, "400800", f"The request body is not JSON: {err}.") from None
    found = problems(operation, body)
    if found:
        raise VdsApiError(
            400, "400800", f"The request does not fit the {operation} schema: {'; '.join(found)}."
        )
    return dict(body)


def _datasource(site: Site, luid: str) -> Datasource:
    found = [d for d in site.datasources() if d.id == luid]
    if not found:
        raise VdsApiError(
            404, "404937", f"Data source {luid!r} could not be found on the signed-in site."
        )
    return found[0]
