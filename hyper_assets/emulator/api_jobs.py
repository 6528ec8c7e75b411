"""The handlers of update data (an action batch queued as a job) and of jobs."""

from __future__ import annotations

from typing import TYPE_CHECKING

from hyper_assets._base.files import MEGABYTE
from hyper_assets.emulator.batch import parse_batch
from hyper_assets.emulator.errors import RestApiError
from hyper_assets.emulator.replies import accepted_job_node, job_node
from hyper_assets.emulator.rest import Reply, Request
from hyper_assets.emulator.wire import bad_request, not_found, parse_json

if TYPE_CHECKING:
    from hyper_assets.emulator.server import Api


def update_data(api: Api, request: Request) -> Reply:
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
    media_type = request.content_type.partition(";")[0].strip().lower()
    if media_type != "application/json":
        raise bad_request(
            "the action batch must be sent with Content-Type application/json, not "
            f"{request.content_type or 'none'!r}"
        )
    original = api.jobs.duplicate(site.id, request_id)
    if original is not None:
        return Reply(202, [accepted_job_node(original)])
    if len(request.body) > api.max_payload_bytes:
        raise _too_large(len(request.body), api.max_payload_bytes)
    actions = parse_batch(parse_json(request.body))
    payload = None
    session_id = request.query.get("uploadSessionId")
    if session_id:
        size = api.uploads.size(session_id)
        if size > api.max_payload_bytes:
            raise _too_large(size, api.max_payload_bytes)
        payload = api.uploads.consume(session_id, f"the update with RequestID {request_id!r}")
    job = api.jobs.submit_update(site.id, request_id, datasource, connection_id, actions, payload)
    return Reply(202, [accepted_job_node(job)])


def get_job(api: Api, request: Request) -> Reply:
    return Reply(200, [job_node(api.jobs.get(request.on_site.id, request.groups["job"]))])


def cancel_job(api: Api, request: Request) -> Reply:
    api.jobs.cancel(request.on_site.id, request.groups["job"])
    return Reply(204)


def _too_large(size: int, limit: int) -> RestApiError:
    return RestApiError(
        413,
        "413000",
        "Payload Too Large",
        f"The payload is {size} bytes; this server accepts at most {limit} bytes "
        f"({limit / MEGABYTE:.1f} MB). Split the change into smaller batches.",
    )
