"""Tableau's VizQL Data Service as the copy check reads it: requests and typed replies.

The service answers POSTs under `/api/v1/vizql-data-service/` (not under a REST API
version or a site: the session's token names the site), with JSON in and out, and
refuses with the schema's `TableauError` (`errorCode`, `message`), read here into a
`VizqlDataServiceError`. Its OpenAPI schema is Tableau's (tableau/VizQL-Data-Service,
`VizQLDataServiceOpenAPISchema.json`). A Connected App's JWT needs `SCOPE`, which the
copy check's sign-in adds to the publish's scopes.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

import httpx

from hyper_assets.errors import UnexpectedReplyError, VizqlDataServiceError

PATH = "/api/v1/vizql-data-service"
SCOPE = "tableau:viz_data_service:read"


@dataclass(frozen=True)
class LogicalTable:
    id: str
    caption: str


@dataclass(frozen=True)
class Model:
    """The data source's logical tables and relationships (ids of `tables`)."""

    tables: tuple[LogicalTable, ...]
    relationships: tuple[tuple[str, str], ...]  # (from id, to id)

    def caption(self, table_id: str) -> str:
        return next((t.caption for t in self.tables if t.id == table_id), table_id)


@dataclass(frozen=True)
class FieldInfo:
    """A field as `read-metadata` lists it."""

    name: str  # the column's
    caption: str  # what a query names it by
    data_type: str
    table_id: str


def reply(response: httpx.Response, operation: str) -> Any:
    """The JSON of a 200 reply to `operation`; else the `VizqlDataServiceError` it says."""
    call = f"VizQL Data Service {operation}"
    try:
        body = json.loads(response.content) if response.content else None
    except ValueError:
        body = None
    if response.status_code == 200 and body is not None:
        return body
    if not isinstance(body, dict):
        if response.status_code == 200:
            raise UnexpectedReplyError(
                200, str(response.url), response.content, call=call, problem="no JSON body"
            )
        body = {}
    status = response.status_code
    code = str(body.get("errorCode") or status)
    message = str(body.get("message") or response.reason_phrase)
    error = VizqlDataServiceError(status, code, "VizQL Data Service", message, call=call)
    if error.disabled:
        error.hint = (  # the status and path: a proxy's 404 looks the same
            "The VizQL Data Service is off on this site (or not on this server: HTTP "
            f"{status} at {response.url.path}): a site administrator turns it on in the "
            "site's settings."
        )
    raise error


def model(body: dict[str, Any]) -> Model:
    tables = tuple(
        LogicalTable(str(t["logicalTableId"]), str(t["caption"]))
        for t in body.get("logicalTables") or []
    )
    relationships = tuple(
        (str(r["fromLogicalTable"]["logicalTableId"]), str(r["toLogicalTable"]["logicalTableId"]))
        for r in body.get("logicalTableRelationships") or []
    )
    return Model(tables, relationships)


def fields(body: dict[str, Any]) -> tuple[FieldInfo, ...]:
    return tuple(
        FieldInfo(
            str(f.get("fieldName", "")),
            str(f.get("fieldCaption", "")),
            str(f.get("dataType", "UNKNOWN")),
            str(f.get("logicalTableId", "")),
        )
        for f in body.get("data") or []
    )


def datasource(luid: str) -> dict[str, Any]:
    return {"datasource": {"datasourceLuid": luid}}
