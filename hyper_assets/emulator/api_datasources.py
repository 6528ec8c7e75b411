"""The handlers of data sources: list, get, connections, download, publish, file uploads."""

from __future__ import annotations

from typing import TYPE_CHECKING
from urllib.parse import quote

from hyper_assets.emulator.errors import RestApiError
from hyper_assets.emulator.model import check_model
from hyper_assets.emulator.replies import accepted_job_node, datasource_node, upload_node
from hyper_assets.emulator.rest import Reply, Request, filters, flag, page
from hyper_assets.emulator.store import Project, Site
from hyper_assets.emulator.wire import Node, bad_request, parse_multipart, parse_xml

if TYPE_CHECKING:
    from hyper_assets.emulator.server import Api


def list_datasources(api: Api, request: Request) -> Reply:
    name = filters(request, {"name"}).get("name")
    site = request.on_site
    found = [datasource_node(request, d) for d in site.datasources(name)]
    return Reply(200, page(request, found, "datasources"))


def get_datasource(api: Api, request: Request) -> Reply:
    # Without the `<askData>` the 2.3 recording (datasource_get_by_id.xml) has: Ask Data
    # was retired, and REST API 3.28's dataSourceType has no such element.
    datasource = request.on_site.datasource(request.groups["ds"])
    return Reply(200, [datasource_node(request, datasource)])


def list_connections(api: Api, request: Request) -> Reply:
    datasource = request.on_site.datasource(request.groups["ds"])
    connection = Node(
        "connection",
        {
            "id": datasource.connection_id,
            "type": "hyper",
            "embedPassword": "false",
            "serverAddress": "",  # a .hyper file has no server, hence no serverPort
            "userName": "",
        },
        [Node("datasource", {"id": datasource.id, "name": datasource.name})],
    )
    return Reply(200, [Node("connections", children=[connection], many=True)])


def download(api: Api, request: Request) -> Reply:
    """The stored `.hyper` file as it is, named in Content-Disposition as Tableau names it."""
    if not flag({"includeExtract": "true", **request.query}, "includeExtract"):
        raise bad_request("the emulator stores .hyper files only; download with includeExtract")
    datasource = request.on_site.datasource(request.groups["ds"])
    with datasource.lock:  # a file open before a later swap keeps the bytes it had
        file = datasource.path.open("rb")
    disposition = f'name="tableau_datasource"; {_filename(datasource.path.name)}'
    return Reply(200, headers={"Content-Disposition": disposition}, file=file)


def _filename(name: str) -> str:
    """Content-Disposition's file name: quoted, or RFC 5987-encoded when not ASCII."""
    if name.isascii():
        return 'filename="{}"'.format(name.replace("\\", "\\\\").replace('"', '\\"'))
    return f"filename*=UTF-8''{quote(name, safe='')}"


def publish(api: Api, request: Request) -> Reply:
    query = request.query
    if query.get("datasourceType", "hyper").lower() != "hyper":
        raise bad_request("the emulator publishes .hyper files only (datasourceType=hyper)")
    if flag(query, "append"):
        raise bad_request("append publishing is not emulated; publish with createnew or overwrite")
    parts = parse_multipart(request.body, request.content_type)
    site = request.on_site
    name, project = _publish_target(site, parts.get("request_payload", b""))
    staged = api.sites.staging_path()
    if "uploadSessionId" in query:
        api.uploads.consume(query["uploadSessionId"], f"the publish of {name!r}").replace(staged)
    elif "tableau_datasource" in parts:
        staged.write_bytes(parts["tableau_datasource"])
    else:
        raise bad_request("send the file as a tableau_datasource part or give uploadSessionId")
    overwrite = flag(query, "overwrite")
    try:  # refused before queuing
        site.check_publish(name, project, overwrite)
        check_model(api.endpoint(), staged, name)
    except RestApiError:
        staged.unlink(missing_ok=True)
        raise
    if flag(query, "asJob"):
        job = api.jobs.submit_publish(
            site.id, lambda: site.publish(name, project, staged, overwrite), staged
        )
        return Reply(202, [accepted_job_node(job)])
    try:
        datasource = site.publish(name, project, staged, overwrite)
    finally:
        staged.unlink(missing_ok=True)  # moved in by a publish, left over by a refusal
    return Reply(201, [datasource_node(request, datasource, page=False)])


def initiate_upload(api: Api, request: Request) -> Reply:
    return Reply(201, [upload_node(api.uploads.initiate(), 0)])


def append_upload(api: Api, request: Request) -> Reply:
    session_id = request.groups["upload"]
    parts = parse_multipart(request.body, request.content_type)
    if "tableau_file" not in parts:
        raise bad_request("an append needs a tableau_file part holding the chunk")
    size = api.uploads.append(session_id, parts["tableau_file"])
    return Reply(200, [upload_node(session_id, size)])


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
