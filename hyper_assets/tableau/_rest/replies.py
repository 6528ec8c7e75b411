"""Tableau's replies read into frozen values, or into the error that says what to do.

Replies are asked for as JSON (`Accept: application/json`); an XML `tsResponse` (which
some endpoints send anyway) is read into the same shape, and anything else (an HTML page,
an empty body, a reply without the element asked for) is an `UnexpectedReplyError` with
the status, the URL and the first bytes of the body. An error reply becomes the
`TableauRequestError` of its status and Tableau's code, with a hint (`HINTS`).
"""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Any, TypeVar

import httpx

from hyper_assets.errors import (
    DataSourceExistsError,
    PayloadTooLargeError,
    TableauRequestError,
    TableauSignInError,
    UnexpectedReplyError,
)

T = TypeVar("T")


@dataclass(frozen=True)
class Project:
    id: str
    name: str
    parent_id: str | None
    path: str  # names from the top-level project down, joined by "/"


@dataclass(frozen=True)
class DataSource:
    id: str
    name: str
    project_id: str
    #: Its page in Tableau's web client as the reply gave it (`webpageUrl`), else None. Real
    #: servers put it in list replies, not in the reply to a publish.
    webpage_url: str | None


@dataclass(frozen=True)
class Job:
    id: str
    finish_code: int | None  # None until the job completes
    progress: int
    notes: str | None
    completed_at: datetime | None


HINTS = {
    400: "Tableau could not use the request; the detail names what to fix.",
    401: "Check the personal access token name and secret and the site content URL; a token "
    "expires after 15 days unused, or when it is regenerated or revoked. A Connected App: "
    "check its client id, secret id and value, that it is enabled, and the username.",
    403: "The token's user lacks a permission this needs (publishing, or the project).",
    404: "Check the name or id: it does not exist on this site (any more).",
    409: "It conflicts with the server's state: an upload can be used once, upload again.",
    413: "Lower the batch size: send the change as several smaller payloads, each below the "
    "server's limit (100 MB by default).",
    429: "Tableau kept rate-limiting after every retry: send fewer requests at once, or raise "
    "max_retries and retry_max_total_seconds.",
}


def parse(response: httpx.Response, call: str, read: Callable[[Any], T]) -> T:
    """`read` of a successful reply; otherwise Tableau's error, saying what to do.

    A reply that is not a Tableau reply, or lacks what `read` takes from it, is an
    `UnexpectedReplyError` quoting the status, the URL and the first bytes.
    """
    reply = _decode(response.content)
    url = str(response.request.url)
    if response.is_success:
        if reply is None and response.content.strip():
            problem = "the reply is neither Tableau's XML nor JSON"
        else:
            try:
                return read(reply or {})
            except (KeyError, TypeError, ValueError, AttributeError) as err:
                problem = f"the reply lacks {err}" if reply else "the reply is empty"
        raise UnexpectedReplyError(
            response.status_code, url, response.content, call=call, problem=problem
        )
    error = (reply or {}).get("error")
    error = error if isinstance(error, dict) else {}
    status = response.status_code
    code = str(error.get("code") or status)
    error_class, hint = _advice(status, code)
    summary = error.get("summary") or response.reason_phrase
    detail = error.get("detail") or f"{url} answered {response.content[:200]!r}"
    raise error_class(status, code, str(summary), str(detail), call=call, hint=hint)


def list_items(container: Any, tag: str) -> list[dict[str, Any]]:
    """The items of a list element (`{"projects": {"project": [...]}}`); one item may come
    as an object instead of a one-item list, and an empty list as nothing at all."""
    items = container.get(tag, []) if isinstance(container, dict) else []
    return [items] if isinstance(items, dict) else list(items)


def page(reply: dict[str, Any], segment: str) -> tuple[list[dict[str, Any]], int, int]:
    """A page of a list endpoint: its items, the page size and the total available."""
    pagination = reply["pagination"]
    items = list_items(reply.get(segment), segment.removesuffix("s"))
    return items, int(pagination["pageSize"]), int(pagination["totalAvailable"])


def datasource(item: dict[str, Any]) -> DataSource:
    webpage = item.get("webpageUrl")
    return DataSource(item["id"], item["name"], item["project"]["id"], webpage or None)


def job(reply: dict[str, Any]) -> Job:
    item = reply["job"]
    finish, completed = item.get("finishCode"), item.get("completedAt")
    return Job(
        item["id"],
        int(finish) if finish is not None else None,
        int(item.get("progress") or 0),
        _notes(item),
        datetime.fromisoformat(completed) if completed else None,
    )


def nothing(reply: Any) -> None:
    return None


def _advice(status: int, code: str) -> tuple[type[TableauRequestError], str]:
    if code == "403007":
        return DataSourceExistsError, "Publish with overwrite=True to replace it."
    if status >= 500:
        return TableauRequestError, "Tableau kept failing after every retry: try again later."
    special: dict[int, type[TableauRequestError]] = {
        401: TableauSignInError,
        413: PayloadTooLargeError,
    }
    return special.get(status, TableauRequestError), HINTS.get(status, "")


def _decode(body: bytes) -> dict[str, Any] | None:
    """A `tsResponse` as JSON or XML, in Tableau's JSON shape; None for anything else."""
    body = body.strip()
    try:
        if body.startswith(b"{"):
            value = json.loads(body)
            return value if isinstance(value, dict) else None
        root = ET.fromstring(body) if body.startswith(b"<") else None
    except (ValueError, ET.ParseError):
        return None
    if root is None or _local(root.tag) != "tsResponse":
        return None
    tree = _from_xml(root)
    return tree if isinstance(tree, dict) else {}


def _local(tag: str) -> str:
    return tag.rpartition("}")[2]


def _from_xml(element: ET.Element) -> Any:
    """An element as Tableau's JSON shapes it: attributes and children by name (repeated
    children as a list), an element holding only text as that text."""
    value: dict[str, Any] = {_local(k): v for k, v in element.attrib.items()}
    for child in element:
        key, item = _local(child.tag), _from_xml(child)
        if key not in value:
            value[key] = item
        elif isinstance(value[key], list):
            value[key].append(item)
        else:
            value[key] = [value[key], item]
    text = (element.text or "").strip()
    return text if text and not value else value


def _notes(value: Any, key: str = "") -> str | None:
    """Every `notes` text in a job, wherever the server put it (real servers: inside the
    job-type element, e.g. `updateUploadedFileJob`), one per line; None without any."""
    if isinstance(value, dict):
        found = [_notes(child, name) for name, child in value.items()]
    elif isinstance(value, list):
        found = [_notes(child, key) for child in value]
    else:
        found = [value.strip()] if key == "notes" and isinstance(value, str) else []
    return "\n".join(note for note in found if note) or None
