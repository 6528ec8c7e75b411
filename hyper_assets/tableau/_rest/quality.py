"""Data quality warnings on a published data source: the REST calls (API 3.13+).

    with tableau.client() as client:
        set_quality_warning(client, source.id, QualityWarning("WARNING", "Keys repeat", True))
        set_quality_warning(client, source.id, None)  # removes ours again

The library marks the warnings it sets (their message starts with `MARK`) and only ever
updates or deletes those, so a warning someone set by hand stays. Requests are the XML
TSC sends (`<dataQualityWarning type=".." isActive=".." isSevere=".." message=".."/>`).
"""

from __future__ import annotations

import xml.etree.ElementTree as ET
from dataclasses import dataclass
from typing import Any, Literal

from hyper_assets.errors import TableauRequestError
from hyper_assets.tableau._rest.client import TableauClient
from hyper_assets.tableau._rest.replies import list_items

#: Starts the message of every warning the library sets.
MARK = "[hyper-assets] "
#: Tableau's warning types.
WarningType = Literal["WARNING", "DEPRECATED", "STALE", "SENSITIVE_DATA", "MAINTENANCE"]
Outcome = Literal["added", "updated", "unchanged", "removed", "absent"]
XML = {"Content-Type": "application/xml"}


@dataclass(frozen=True)
class QualityWarning:
    """A warning to show on a data source: Tableau's type, the message, severe or not."""

    type: WarningType
    message: str
    severe: bool = False


@dataclass(frozen=True)
class StoredWarning:
    """A warning as the server lists it."""

    id: str
    type: str
    message: str
    active: bool
    severe: bool

    @property
    def ours(self) -> bool:
        return self.message.startswith(MARK)


def quality_warnings(client: TableauClient, datasource_id: str) -> list[StoredWarning]:
    """Every data quality warning on the data source, whoever set it."""
    return client._call(
        "GET",
        f"list of the data quality warnings of data source {datasource_id}",
        _path(datasource_id),
        read=lambda reply: [
            _stored(item)
            for item in list_items(reply.get("dataQualityWarningList"), "dataQualityWarning")
        ],
    )


def set_quality_warning(
    client: TableauClient, datasource_id: str, warning: QualityWarning | None
) -> Outcome:
    """Make the library's warning on the data source `warning`, or remove it (None).

    Adds it, updates the one the library set before, or leaves it when it already says
    this; warnings set by others are left alone.
    """
    ours = [w for w in quality_warnings(client, datasource_id) if w.ours]
    if warning is None:
        for stored in ours:
            _delete(client, stored.id)
        return "removed" if ours else "absent"
    message = MARK + warning.message
    for extra in ours[1:]:
        _delete(client, extra.id)
    if ours:
        current = ours[0]
        if (current.type, current.message, current.active, current.severe) == (
            warning.type,
            message,
            True,
            warning.severe,
        ):
            return "unchanged"
        client._call(
            "PUT",
            f"update of data quality warning {current.id}",
            ["dataQualityWarnings", current.id],
            read=lambda reply: reply["dataQualityWarning"],
            content=_request(warning, message),
            headers=XML,
        )
        return "updated"
    client._call(
        "POST",
        f"adding a data quality warning to data source {datasource_id}",
        _path(datasource_id),
        read=lambda reply: reply["dataQualityWarning"],
        repeatable=False,
        content=_request(warning, message),
        headers=XML,
    )
    return "added"


def _path(datasource_id: str) -> list[str]:
    return ["dataQualityWarnings", "datasource", datasource_id]


def _delete(client: TableauClient, warning_id: str) -> None:
    try:
        client._call(
            "DELETE",
            f"deletion of data quality warning {warning_id}",
            ["dataQualityWarnings", warning_id],
            read=lambda reply: None,
        )
    except TableauRequestError as err:
        if err.status != 404:  # gone already: what a repeated DELETE finds
            raise


def _request(warning: QualityWarning, message: str) -> bytes:
    root = ET.Element("tsRequest")
    attrs = {
        "type": warning.type,
        "isActive": "true",
        "isSevere": str(warning.severe).lower(),
        "message": message,
    }
    ET.SubElement(root, "dataQualityWarning", attrs)
    return ET.tostring(root, encoding="utf-8")


def _stored(item: dict[str, Any]) -> StoredWarning:
    return StoredWarning(
        item["id"],
        item.get("type", ""),
        item.get("message", ""),
        str(item.get("isActive", "true")).lower() == "true",
        str(item.get("isSevere", "false")).lower() == "true",
    )
