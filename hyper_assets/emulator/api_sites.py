"""The handlers of server info, sign-in and sign-out, and projects."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

from hyper_assets.emulator.errors import RestApiError
from hyper_assets.emulator.replies import parent_id, project_node, top_level
from hyper_assets.emulator.rest import Reply, Request, filters, page
from hyper_assets.emulator.wire import Node, bad_request, parse_json, parse_xml

if TYPE_CHECKING:
    from hyper_assets.emulator.server import Api

PRODUCT_VERSION = "2026.1.0"  # the release of REST API 3.28, which Tableau Cloud serves
BUILD = "20261.26.0000.0000"  # the emulator's own, of the pattern ts-api_3_28.xsd gives


def server_info(api: Api, request: Request) -> Reply:
    """What ts-api_3_28.xsd requires, in its order. `platform`, `prepConductorVersion` and
    `serverSettings` are in no recorded reply (those predate them): their values are the
    emulator's, saying it offers no OAuth, offline interaction or sheet images."""
    settings = {
        "oAuthEnabled": "false",
        "offlineInteractionSupportedPhase": "0",
        "sheetImageMaxAgeCeiling": "0",
        "sheetImageMaxAgeFloor": "0",
    }
    info = Node(
        "serverInfo",
        children=[
            Node("platform", text="linux"),
            Node("prepConductorVersion", text=BUILD),
            Node("productVersion", {"build": BUILD}, text=PRODUCT_VERSION),
            Node("restApiVersion", text=api.api_version),
            Node("serverSettings", children=[Node(k, text=v) for k, v in settings.items()]),
        ],
    )
    return Reply(200, [info])


def sign_in(api: Api, request: Request) -> Reply:
    if "json" in request.content_type:
        credentials = parse_json(request.body).get("credentials", {})
        attrs: Mapping[str, str] = credentials
        content_url = credentials.get("site", {}).get("contentUrl", "")
    else:
        element = parse_xml(request.body).find(".//credentials")
        attrs = element.attrib if element is not None else {}
        named = element.find("site") if element is not None else None
        content_url = named.get("contentUrl", "") if named is not None else ""
    site = api.sites.by_content_url(content_url or "")
    if site is None:
        raise RestApiError(
            401,
            "401001",
            "Signin Error",
            f"Error signing in to Tableau Server: there is no site with content URL "
            f"{content_url!r}.",
        )
    if attrs.get("jwt"):
        session = api.sessions.sign_in_jwt(attrs["jwt"], site.id)
    else:
        name, secret = (attrs.get(f"personalAccessToken{k}") for k in ("Name", "Secret"))
        session = api.sessions.sign_in(name, secret, site.id)
    credentials_node = Node(
        "credentials",
        {"token": session.token},
        [
            Node("site", {"id": site.id, "contentUrl": site.content_url}),
            Node("user", {"id": session.user_id}),
        ],
    )
    return Reply(200, [credentials_node])


def sign_out(api: Api, request: Request) -> Reply:
    api.sessions.sign_out(request.signed_in.token)
    return Reply(204)


def list_projects(api: Api, request: Request) -> Reply:
    wanted = filters(request, {"name", "parentProjectId", "topLevelProject"})
    found = [
        project_node(p)
        for p in request.on_site.projects()
        if wanted.get("name", p.name) == p.name
        and wanted.get("parentProjectId", parent_id(p)) == parent_id(p)
        and wanted.get("topLevelProject", top_level(p)) == top_level(p)
    ]
    return Reply(200, page(request, found, "projects"))


def create_project(api: Api, request: Request) -> Reply:
    if "json" in request.content_type:
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
    return Reply(201, [project_node(project)])
