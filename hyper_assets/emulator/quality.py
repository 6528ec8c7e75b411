"""Data quality warnings on published data sources, as Tableau's REST API documents them.

    POST   .../sites/{site}/dataQualityWarnings/datasource/{luid}   add one
    GET    .../sites/{site}/dataQualityWarnings/datasource/{luid}   list the content's
    DELETE .../sites/{site}/dataQualityWarnings/datasource/{luid}   delete all of them
    GET    .../sites/{site}/dataQualityWarnings/{dqw-id}            query one
    PUT    .../sites/{site}/dataQualityWarnings/{dqw-id}            update one
    DELETE .../sites/{site}/dataQualityWarnings/{dqw-id}            delete one

A request is `<tsRequest><dataQualityWarning type=".." isActive=".." isSevere=".."
message=".."/></tsRequest>` (or the same as JSON); replies carry the element TSC reads
(`dqw_by_content_type.xml`, recorded from a real server). TSC's `update_dqw` PUTs to the
content's path instead of the warning's: that updates the content's only warning.
As on Tableau Server 2024.2 (the emulator has no other release's rule), a content holds
at most one warning: a second add is refused with 409. The emulator keeps warnings in memory.
"""

from __future__ import annotations

import threading
import uuid
from dataclasses import dataclass, replace
from datetime import datetime
from typing import Any

from hyper_assets.emulator.errors import RestApiError
from hyper_assets.emulator.store import Site
from hyper_assets.emulator.wire import (
    Node,
    bad_request,
    not_found,
    now,
    parse_json,
    parse_xml,
    stamp,
)

TYPES = ("WARNING", "DEPRECATED", "STALE", "SENSITIVE_DATA", "MAINTENANCE")
CONTENT_TYPES = ("datasource",)  # Tableau also warns on databases, tables, flows, ...
USER_NAME = "Emulator Admin"


@dataclass(frozen=True)
class StoredWarning:
    id: str
    site_id: str
    content_id: str
    content_type: str
    type: str
    message: str
    active: bool
    severe: bool
    owner_id: str
    created_at: datetime
    updated_at: datetime

    def node(self) -> Node:
        attrs = {
            "id": self.id,
            "userDisplayName": USER_NAME,
            "contentId": self.content_id,
            "contentType": self.content_type.upper(),
            "message": self.message,
            "type": self.type,
            "isActive": str(self.active).lower(),
            "createdAt": stamp(self.created_at),
            "updatedAt": stamp(self.updated_at),
            "isSevere": str(self.severe).lower(),
        }
        children = [Node("site", {"id": self.site_id}), Node("owner", {"id": self.owner_id})]
        return Node("dataQualityWarning", attrs, children)


@dataclass(frozen=True)
class Fields:
    """What a request body sets; None leaves a field as it is (on update)."""

    type: str | None
    message: str | None
    active: bool | None
    severe: bool | None

    @classmethod
    def parse(cls, body: bytes, content_type: str) -> Fields:
        if "json" in content_type:
            attrs: dict[str, Any] = parse_json(body).get("dataQualityWarning") or {}
        else:
            element = parse_xml(body).find(".//dataQualityWarning")
            if element is None:
                raise bad_request(
                    'send <tsRequest><dataQualityWarning type="WARNING" isActive="true" '
                    'isSevere="false" message=".."/></tsRequest>'
                )
            attrs = dict(element.attrib)
        kind = attrs.get("type")
        if kind is not None and kind not in TYPES:
            raise bad_request(
                f"type {kind!r} is not a data quality warning type; use one of {TYPES}"
            )
        return cls(kind, attrs.get("message"), _bool(attrs, "isActive"), _bool(attrs, "isSevere"))


def _bool(attrs: dict[str, Any], name: str) -> bool | None:
    value = attrs.get(name)
    if value is None or isinstance(value, bool):
        return value
    if str(value).lower() not in ("true", "false"):
        raise bad_request(f"{name} is {value!r}; give true or false")
    return str(value).lower() == "true"


class QualityWarnings:
    """Every site's data quality warnings, by id."""

    def __init__(self) -> None:
        self._guard = threading.Lock()
        self._warnings: dict[str, StoredWarning] = {}

    def add(
        self, site: Site, content_type: str, content_id: str, fields: Fields, owner: str
    ) -> Node:
        _content(site, content_type, content_id)
        if fields.type is None:
            raise bad_request('a data quality warning needs a type, e.g. type="WARNING"')
        created = now()
        added = StoredWarning(
            str(uuid.uuid4()),
            site.id,
            content_id,
            content_type.lower(),
            fields.type,
            fields.message or "",
            True if fields.active is None else fields.active,
            bool(fields.severe),
            owner,
            created,
            created,
        )
        with self._guard:
            if self._of(site, content_id):
                raise RestApiError(
                    409,
                    "409000",
                    "Conflict",
                    f"The {content_type} {content_id} already has a data quality warning; "
                    "update it, or delete it first.",
                )
            self._warnings[added.id] = added
        return added.node()

    def list_all(self, site: Site, content_type: str, content_id: str) -> Node:
        _content(site, content_type, content_id)
        with self._guard:
            found = self._of(site, content_id)
        return Node("dataQualityWarningList", children=[w.node() for w in found], many=True)

    def get(self, site: Site, dqw_id: str) -> Node:
        with self._guard:
            return self._one(site, dqw_id).node()

    def update(self, site: Site, dqw_id: str, fields: Fields) -> Node:
        with self._guard:
            old = self._one(site, dqw_id)
            new = replace(
                old,
                type=fields.type or old.type,
                message=old.message if fields.message is None else fields.message,
                active=old.active if fields.active is None else fields.active,
                severe=old.severe if fields.severe is None else fields.severe,
                updated_at=now(),
            )
            self._warnings[dqw_id] = new
        return new.node()

    def update_only(self, site: Site, content_type: str, content_id: str, fields: Fields) -> Node:
        """TSC's `update_dqw`: the content's one warning, updated."""
        _content(site, content_type, content_id)
        with self._guard:
            found = self._of(site, content_id)
        if len(found) != 1:
            raise bad_request(
                f"the {content_type} has {len(found)} data quality warnings; update one by "
                "its id: PUT .../dataQualityWarnings/{dqw-id}"
            )
        return self.update(site, found[0].id, fields)

    def delete(self, site: Site, dqw_id: str) -> None:
        with self._guard:
            del self._warnings[self._one(site, dqw_id).id]

    def delete_all(self, site: Site, content_type: str, content_id: str) -> None:
        _content(site, content_type, content_id)
        with self._guard:
            for found in self._of(site, content_id):
                del self._warnings[found.id]

    def _of(self, site: Site, content_id: str) -> list[StoredWarning]:
        found = [
            w
            for w in self._warnings.values()
            if w.site_id == site.id and w.content_id == content_id
        ]
        return sorted(found, key=lambda w: w.created_at)

    def _one(self, site: Site, dqw_id: str) -> StoredWarning:
        found = self._warnings.get(dqw_id)
        if found is None or found.site_id != site.id:
            raise not_found("404000", f"Data quality warning {dqw_id!r} could not be found.")
        return found


def _content(site: Site, content_type: str, content_id: str) -> None:
    """The content must exist: the emulator has data sources only."""
    if content_type.lower() not in CONTENT_TYPES:
        raise bad_request(f"content type {content_type!r} is not emulated; warn on a datasource")
    site.datasource(content_id)  # 404 when there is none
