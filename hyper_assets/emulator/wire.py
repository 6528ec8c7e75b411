"""Tableau's wire formats: `tsResponse` XML or JSON bodies, timestamps, multipart bodies.

Handlers build replies as `Node` trees; `render` turns them into Tableau's XML (namespace
`http://tableau.com/api`) or, for `Accept: application/json`, Tableau's JSON shape.
"""

from __future__ import annotations

import json
import re
import xml.etree.ElementTree as ET
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from hyper_assets.emulator.errors import RestApiError

NAMESPACE = "http://tableau.com/api"
XSI = "http://www.w3.org/2001/XMLSchema-instance"
SCHEMA = "https://help.tableau.com/samples/en-us/rest_api/ts-api_{}.xsd"  # {}: "3_28"
TIMESTAMP_FORMAT = "%Y-%m-%dT%H:%M:%SZ"


@dataclass
class Node:
    """One element: attributes, child elements, optional text.

    `many` marks a list container (`<datasources>`), rendered in JSON as
    `{"datasource": [...]}` even with one or no child.
    """

    tag: str
    attrs: dict[str, str] = field(default_factory=dict)
    children: list[Node] = field(default_factory=list)
    text: str | None = None
    many: bool = False


def now() -> datetime:
    """The current time in UTC, which the emulator's stores and jobs stamp."""
    return datetime.now(UTC)


def stamp(moment: datetime) -> str:
    """A UTC time exactly as TSC parses it: `2024-01-01T10:00:00Z`."""
    return moment.astimezone(UTC).strftime(TIMESTAMP_FORMAT)


def render(nodes: list[Node], as_json: bool, api_version: str) -> bytes:
    """A `tsResponse` holding `nodes`, as XML or JSON; the XML names the REST schema of
    `api_version`, as real servers' replies do."""
    if as_json:
        body: dict[str, Any] = {}
        for node in nodes:
            body[node.tag] = _json_value(node)
        return json.dumps(body, ensure_ascii=False).encode()
    ET.register_namespace("", NAMESPACE)
    ET.register_namespace("xsi", XSI)
    schema = SCHEMA.format(api_version.replace(".", "_"))
    root = ET.Element(
        f"{{{NAMESPACE}}}tsResponse", {f"{{{XSI}}}schemaLocation": f"{NAMESPACE} {schema}"}
    )
    for node in nodes:
        root.append(_element(node))
    return ET.tostring(root, encoding="utf-8", xml_declaration=True)


def error_nodes(err: RestApiError) -> list[Node]:
    """Tableau's error element: `<error code=".."><summary/><detail/></error>`."""
    return [
        Node(
            "error",
            {"code": err.code},
            [Node("summary", text=err.summary), Node("detail", text=err.detail)],
        )
    ]


def _element(node: Node) -> ET.Element:
    element = ET.Element(f"{{{NAMESPACE}}}{node.tag}", node.attrs)
    element.text = node.text
    for child in node.children:
        element.append(_element(child))
    return element


def _json_value(node: Node) -> Any:
    if node.many:
        tag = node.children[0].tag if node.children else node.tag.removesuffix("s")
        return {tag: [_json_value(child) for child in node.children]}
    if node.text is not None and not node.attrs and not node.children:
        return node.text
    value: dict[str, Any] = dict(node.attrs)
    if node.text is not None:
        value["value"] = node.text
    for child in node.children:
        value[child.tag] = _json_value(child)
    return value


# --- request bodies ----------------------------------------------------------------------------

_BOUNDARY = re.compile(r'boundary="?([^";]+)"?', re.IGNORECASE)
_PART_NAME = re.compile(rb'\bname="([^"]*)"', re.IGNORECASE)


def parse_multipart(body: bytes, content_type: str) -> dict[str, bytes]:
    """The parts of a `multipart/mixed` (or form-data) body by their disposition name."""
    found = _BOUNDARY.search(content_type or "")
    if not content_type.lower().startswith("multipart/") or not found:
        raise bad_request(f"expected a multipart/mixed body with a boundary, got {content_type!r}")
    delimiter = b"--" + found.group(1).encode()
    parts: dict[str, bytes] = {}
    for chunk in body.split(delimiter)[1:]:
        if chunk.startswith(b"--"):
            break
        head, sep, content = chunk.removeprefix(b"\r\n").partition(b"\r\n\r\n")
        name = _PART_NAME.search(head)
        if not sep or not name:
            raise bad_request("a multipart part has no headers or no name in Content-Disposition")
        parts[name.group(1).decode()] = content.removesuffix(b"\r\n")
    return parts


def parse_xml(body: bytes) -> ET.Element:
    """A `tsRequest` body with namespaces stripped, so lookups are by local name."""
    try:
        root = ET.fromstring(body)
    except ET.ParseError as err:
        raise bad_request(f"the XML request body does not parse: {err}") from None
    for element in root.iter():
        element.tag = element.tag.rpartition("}")[2]
    return root


def parse_json(body: bytes) -> Any:
    try:
        return json.loads(body)
    except (ValueError, UnicodeDecodeError) as err:
        raise bad_request(f"the JSON request body does not parse: {err}") from None


def bad_request(detail: str) -> RestApiError:
    return RestApiError(400, "400000", "Bad Request", detail)


def not_found(code: str, what: str) -> RestApiError:
    return RestApiError(404, code, "Resource Not Found", what)
