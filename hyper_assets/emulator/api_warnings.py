"""The handlers of data quality warnings (stored by `hyper_assets.emulator.quality`)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from hyper_assets.emulator.quality import Fields
from hyper_assets.emulator.rest import Reply, Request

if TYPE_CHECKING:
    from hyper_assets.emulator.server import Api


def add_warning(api: Api, request: Request) -> Reply:
    site, groups = request.on_site, request.groups
    node = api.warnings.add(
        site,
        groups["content_type"],
        groups["content"],
        _fields(request),
        request.signed_in.user_id,
    )
    return Reply(200, [node])


def list_warnings(api: Api, request: Request) -> Reply:
    groups = request.groups
    return Reply(
        200, [api.warnings.list_all(request.on_site, groups["content_type"], groups["content"])]
    )


def update_only_warning(api: Api, request: Request) -> Reply:
    site, groups = request.on_site, request.groups
    fields = _fields(request)
    return Reply(
        200,
        [api.warnings.update_only(site, groups["content_type"], groups["content"], fields)],
    )


def delete_warnings(api: Api, request: Request) -> Reply:
    groups = request.groups
    api.warnings.delete_all(request.on_site, groups["content_type"], groups["content"])
    return Reply(204)


def get_warning(api: Api, request: Request) -> Reply:
    return Reply(200, [api.warnings.get(request.on_site, request.groups["dqw"])])


def update_warning(api: Api, request: Request) -> Reply:
    node = api.warnings.update(request.on_site, request.groups["dqw"], _fields(request))
    return Reply(200, [node])


def delete_warning(api: Api, request: Request) -> Reply:
    api.warnings.delete(request.on_site, request.groups["dqw"])
    return Reply(204)


def _fields(request: Request) -> Fields:
    return Fields.parse(request.body, request.content_type)
