"""Tableau's REST schema, and the check of every XML body the emulator and our client send.

`schema()` is `tableau/xsd/ts-api_3_28.xsd` (as Tableau published it) with `PATCHES`
applied: where the schema contradicts replies recorded from real servers
(`tableau/recorded/`), the recording wins, and each patch names the recording. Each patch
first checks that the schema still says what the patch corrects, so a schema that no
longer needs it fails loudly.

`RestBodies` records, while installed, each reply the emulator's `Api.handle` returns
(rendered as XML: what an XML client receives; a JSON reply is the same tree) and each
XML request body our client's transport builds; `violations()` validates them.
`tests/conftest.py` installs it for the whole session and fails a test at teardown when
a body sent during it breaks the schema. The demo's processes, which run emulators of
their own, run under `with_rest_schema.py`, which installs it there and saves what it
recorded (`save`) for the test to check (`RestBodies.read`).
"""

from __future__ import annotations

import functools
import json
import re
import sys
import threading
import xml.etree.ElementTree as ET
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from email.message import Message
from pathlib import Path
from typing import Any

import httpx
import pytest
import xmlschema

from hyper_assets.emulator import server, wire
from hyper_assets.emulator.rest import Reply
from hyper_assets.tableau._rest import transport

XSD = Path(__file__).parent / "tableau" / "xsd" / "ts-api_3_28.xsd"
NAMESPACE = "http://tableau.com/api"
XS = "{http://www.w3.org/2001/XMLSchema}"


def _complex_type(schema: ET.Element, name: str) -> ET.Element:
    [found] = schema.findall(f"{XS}complexType[@name='{name}']")
    return found


def _children(schema: ET.Element, type_name: str) -> ET.Element:
    """The `xs:sequence` of complex type `type_name`."""
    [sequence] = _complex_type(schema, type_name).findall(f"{XS}sequence")
    return sequence


def _order(type_name: str, *names: str) -> Callable[[ET.Element], None]:
    """Put the child elements of `type_name` in the order `names`; the schema lists them
    alphabetically, real servers in another order."""

    def patch(schema: ET.Element) -> None:
        sequence = _children(schema, type_name)
        by_name = {element.get("name"): element for element in sequence}
        assert list(by_name) != list(names) and set(by_name) == set(names), type_name
        sequence[:] = [by_name[name] for name in names]

    return patch


def _optional(type_name: str, name: str) -> Callable[[ET.Element], None]:
    def patch(schema: ET.Element) -> None:
        [element] = _children(schema, type_name).findall(f"{XS}element[@name='{name}']")
        assert element.get("minOccurs") is None, (type_name, name)
        element.set("minOccurs", "0")

    return patch


def _qualified(schema: ET.Element) -> None:
    assert schema.get("elementFormDefault") is None
    schema.set("elementFormDefault", "qualified")


def _api_version_pattern(schema: ET.Element) -> None:
    [pattern] = schema.findall(f"{XS}simpleType[@name='restApiVersion']/*/{XS}pattern")
    assert pattern.get("value") == "[0-9]{5}.[0-9]{2}.[0-9]{4}.[0-9]{4}"  # a build number's
    pattern.set("value", r"[0-9]+\.[0-9]+")


def _update_job_type(schema: ET.Element) -> None:
    [restriction] = _complex_type(schema, "jobType").findall(
        f"{XS}attribute[@name='type']/{XS}simpleType/{XS}restriction"
    )
    values = [e.get("value") for e in restriction]
    assert "UpdateUploadedFile" not in values, values
    ET.SubElement(restriction, f"{XS}enumeration", {"value": "UpdateUploadedFile"})


@dataclass(frozen=True)
class Patch:
    """Where ts-api_3_28.xsd contradicts what a real server sent (`recording`)."""

    what: str
    recording: str  # in tests/tableau/recorded/
    apply: Callable[[ET.Element], None]


PATCHES = (
    Patch(
        "child elements are in Tableau's namespace (3.27 says elementFormDefault="
        '"qualified"; 3.28 dropped it, so every child would have to be unqualified)',
        "auth_sign_in.xml",
        _qualified,
    ),
    Patch(
        "an error's summary comes before its detail",
        "auth_sign_in_error.xml",
        _order("errorType", "callstack", "summary", "detail"),
    ),
    Patch(
        "a data source's project comes before its owner",
        "datasource_get_all_fields.xml",
        _order(
            "dataSourceType",
            *("connectionCredentials", "location", "project", "owner", "site", "tags"),
        ),
    ),
    Patch(
        "a data quality warning's site comes before its owner",
        "dqw_by_content_type.xml",
        _order("dataQualityWarningType", "site", "owner"),
    ),
    Patch(
        "an update job names its data source, then the connection",
        "datasource_data_update.xml",
        _order("updateUploadedFileJobType", "datasource", "connectionLuid", "notes"),
    ),
    Patch(
        "a queued, running or failed update job may have no notes",
        "job_get_by_id_failed.xml",
        _optional("updateUploadedFileJobType", "notes"),
    ),
    Patch(
        "a data update's job type is UpdateUploadedFile",
        "datasource_data_update.xml",
        _update_job_type,
    ),
    Patch(
        "restApiVersion is a version (3.10), not a build number",
        "server_info_get.xml",
        _api_version_pattern,
    ),
)


@functools.cache
def schema() -> xmlschema.XMLSchema:
    """ts-api_3_28.xsd with `PATCHES` applied (built once: it takes seconds)."""
    source = xmlschema.XMLResource(str(XSD))  # keeps the prefixes the schema's QNames use
    for patch in PATCHES:
        patch.apply(source.root)
    return xmlschema.XMLSchema(source)


def problems(body: bytes) -> list[str]:
    """How the XML `body` breaks the schema; empty when it is valid."""
    try:
        root = ET.fromstring(body)
    except ET.ParseError as err:
        return [f"it is not XML: {err}"]
    if root.tag == "tsRequest":
        # Requests go without a namespace: Tableau's REST reference shows them so, TSC
        # sends them so (tableauserverclient/server/request_factory.py), servers take them.
        for element in root.iter():
            element.tag = f"{{{NAMESPACE}}}{element.tag}"
    tableau = f"{{{NAMESPACE}}}"
    return [
        f"{error.reason} (at {error.path})".replace(tableau, "")
        for error in schema().iter_errors(root)
    ]


@dataclass(frozen=True)
class Sent:
    what: str  # "the emulator's reply to GET /api/3.28/serverinfo"
    body: bytes


class RestBodies:
    """The XML bodies sent since the last `violations()`, from every thread."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._sent: list[Sent] = []

    def add(self, what: str, body: bytes) -> None:
        with self._lock:
            self._sent.append(Sent(what, body))

    def take(self) -> list[Sent]:
        with self._lock:
            taken, self._sent = self._sent, []
        return taken

    def save(self, path: Path) -> None:
        """Writes the bodies recorded so far to `path`, for `read` in another process."""
        sent = [[s.what, s.body.decode()] for s in self.take()]
        path.write_text(json.dumps(sent))

    @classmethod
    def read(cls, path: Path) -> RestBodies:
        """The bodies another process recorded and saved to `path`."""
        bodies = cls()
        for what, body in json.loads(path.read_text()):
            bodies.add(what, body.encode())
        return bodies

    def violations(self) -> list[str]:
        """Each body sent since the last call that breaks the schema, with its problems."""
        found = []
        for sent in self.take():
            broken = problems(sent.body)
            if broken:
                excerpt = sent.body[:400].decode(errors="replace")
                found.append(f"{sent.what} breaks ts-api_3_28.xsd: {broken}\n  {excerpt}")
        return found

    def install(self, patch: pytest.MonkeyPatch) -> None:
        """Record the emulator's replies (`Api.handle`) and our client's requests
        (`Transport._request`, where every request of `TableauClient` is built)."""
        handle = server.Api.handle
        build = transport.Transport._request

        def recorded_handle(
            api: server.Api, method: str, target: str, headers: Message, body: bytes
        ) -> Reply:
            reply = handle(api, method, target, headers, body)
            if reply.nodes and not reply.drop:
                xml = wire.render(reply.nodes, False, api.api_version)
                self.add(f"the emulator's reply to {method} {target}", xml)
            return reply

        def recorded_request(
            client: transport.Transport, method: str, url: str, **kwargs: Any
        ) -> httpx.Request:
            request = build(client, method, url, **kwargs)
            for xml in _xml_bodies(request):
                self.add(f"our client's request {method} {url}", xml)
            return request

        patch.setattr(server.Api, "handle", recorded_handle)
        patch.setattr(transport.Transport, "_request", recorded_request)


def with_rest_schema(saved: Path, module: str) -> list[str]:
    """The command line of `python -m module` that records its XML bodies into `saved`."""
    return [
        sys.executable,
        str(Path(__file__).with_name("with_rest_schema.py")),
        str(saved),
        module,
    ]


def assert_schema_kept(saved: Path, process: str) -> None:
    """Every XML body `process` sent (its emulator's replies, our client's requests), as
    `with_rest_schema.py` saved them, keeps Tableau's REST schema."""
    assert saved.exists(), f"{process} saved no XML bodies: it did not exit normally"
    violations = RestBodies.read(saved).violations()
    assert not violations, f"{process} sent:\n" + "\n".join(violations)


def _xml_bodies(request: httpx.Request) -> Iterator[bytes]:
    """The XML a request carries: its body, or its multipart body's non-empty XML parts
    (an upload chunk's `request_payload` is empty, as TSC sends it)."""
    content_type = request.headers.get("Content-Type", "")
    if "xml" in content_type:
        yield request.read()
    elif content_type.startswith("multipart/"):
        boundary = re.search(r"boundary=([^;]+)", content_type).group(1).encode()
        body = b"".join(request.stream)  # a list of pieces: iterating it again is safe
        for part in body.split(b"--" + boundary)[1:-1]:
            head, _, content = part.partition(b"\r\n\r\n")
            content = content.removesuffix(b"\r\n")
            if b"xml" in head.lower() and content:
                yield content
