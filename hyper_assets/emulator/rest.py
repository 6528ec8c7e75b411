"""One REST call as the handlers see it, and the query parameters several of them read.

`Request` carries what the router found (path groups, the session, the site of the path);
a handler returns a `Reply` of `Node`s, which `RequestHandler` renders as XML or JSON,
or of an open file or a JSON body (the VizQL Data Service's), which it sends as it is.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from email.message import Message
from typing import BinaryIO

from hyper_assets.emulator.errors import RestApiError
from hyper_assets.emulator.sessions import Session
from hyper_assets.emulator.store import Site
from hyper_assets.emulator.wire import Node, bad_request


@dataclass
class Request:
    method: str
    path: str
    query: dict[str, str]
    headers: Message
    body: bytes
    groups: dict[str, str] = field(default_factory=dict)
    session: Session | None = None
    site: Site | None = None

    @property
    def on_site(self) -> Site:
        """The site in the path, which the session is signed in to (`Api.handle` found it)."""
        if self.site is None:
            raise _bug(f"{self.method} {self.path} names no site")
        return self.site

    @property
    def signed_in(self) -> Session:
        """The session of the request's token (`Api.handle` checked it)."""
        if self.session is None:
            raise _bug(f"{self.method} {self.path} is answered without a session")
        return self.session

    @property
    def content_type(self) -> str:
        return self.headers.get("Content-Type") or ""


@dataclass
class Reply:
    status: int
    nodes: list[Node] = field(default_factory=list)
    headers: dict[str, str] = field(default_factory=dict)
    drop: bool = False
    file: BinaryIO | None = None  # a file's bytes as the body instead of nodes (a download)
    json: bytes | None = None  # a JSON body instead of nodes (the VizQL Data Service's)


def _bug(detail: str) -> RestApiError:
    """A handler reached where the routes never lead: the emulator's fault, answered 500."""
    return RestApiError(500, "500000", "Internal Server Error", f"Emulator bug: {detail}.")


def flag(query: Mapping[str, str], name: str) -> bool:
    return query.get(name, "").lower() == "true"


def filters(request: Request, allowed: set[str]) -> dict[str, str]:
    """The `filter=field:eq:value,...` expressions of a list request (eq only)."""
    found = {}
    for expression in filter(None, request.query.get("filter", "").split(",")):
        field_, op, value = expression.split(":", 2) if expression.count(":") >= 2 else ("", "", "")
        if field_ not in allowed or op != "eq":
            raise bad_request(
                f"filter {expression!r} is not emulated; use field:eq:value with "
                f"field one of {sorted(allowed)}"
            )
        found[field_] = value
    return found


def page(request: Request, items: list[Node], container: str) -> list[Node]:
    """One page of `items` with the `<pagination>` TSC's Pager needs."""
    try:
        number = max(1, int(request.query.get("pageNumber", "1")))
        size = max(1, min(1000, int(request.query.get("pageSize", "100"))))
    except ValueError:
        raise bad_request("pageNumber and pageSize must be integers") from None
    page = items[(number - 1) * size : number * size]
    pagination = Node(
        "pagination",
        {"pageNumber": str(number), "pageSize": str(size), "totalAvailable": str(len(items))},
    )
    return [pagination, Node(container, children=page, many=True)]
