"""The schema check of every XML body (`tests/rest_schema.py`, hooked in by
`tests/conftest.py`) is on and catches what breaks ts-api_3_28.xsd; its exceptions are the
ones real servers' recordings need."""

from __future__ import annotations

import subprocess
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import httpx
import pytest
from rest_schema import (
    NAMESPACE,
    PATCHES,
    RestBodies,
    assert_schema_kept,
    problems,
    schema,
    with_rest_schema,
)
from tableauhyperapi import SqlType, TableDefinition

from hyper_assets.emulator import Emulator, api_sites
from hyper_assets.errors import TableauRequestError
from hyper_assets.tableau._rest.client import TableauClient
from hyper_assets.tableau._rest.settings import ClientSettings, TokenCredentials
from hyper_assets.tableau._rest.transport import HttpSettings

RECORDED = Path(__file__).parent / "recorded"
TOKEN_NAME, TOKEN_SECRET, SITE = "ci", "s3cret-tøken", "analytics"  # as in conftest.py


def test_a_reply_that_breaks_the_schema_is_caught(
    emulator: Emulator, rest_xml: RestBodies, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A build number of another shape than the schema's, served over HTTP: the check of
    this test's bodies (what fails a test at its teardown) names the reply and the fault."""
    monkeypatch.setattr(api_sites, "BUILD", "2026.1")
    assert httpx.get(f"{emulator.url}/api/3.28/serverinfo").status_code == 200
    [violation] = rest_xml.violations()  # taken: this test's teardown finds none left
    assert violation.startswith("the emulator's reply to GET /api/3.28/serverinfo breaks")
    assert "attribute build='2026.1'" in violation and "productVersion" in violation


def test_a_json_reply_is_checked_as_the_same_tree_in_xml(
    emulator: Emulator, rest_xml: RestBodies, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(api_sites, "BUILD", "2026.1")
    json = {"Accept": "application/json"}
    assert httpx.get(f"{emulator.url}/api/3.28/serverinfo", headers=json).status_code == 200
    [violation] = rest_xml.violations()
    assert "attribute build='2026.1'" in violation


def test_a_request_of_our_client_that_breaks_the_schema_is_caught(
    emulator: Emulator, rest_xml: RestBodies, hyper_files: Any, tmp_path: Path
) -> None:
    """A publish into a project id that is no LUID: the request's `<project id>` breaks
    `resourceIdType`, and the server refuses it (no such project)."""
    cols = [TableDefinition.Column("id", SqlType.int())]
    extract = hyper_files.create(tmp_path / "t.hyper", {("Extract", "Extract"): (cols, [(1,)])})
    settings = ClientSettings(
        HttpSettings(emulator.url), TokenCredentials(TOKEN_NAME, TOKEN_SECRET), site=SITE
    )
    with TableauClient(settings) as client, pytest.raises(TableauRequestError) as refused:
        client.publish_file(extract, "ds", "no-luid")
    assert refused.value.status == 404
    [violation] = rest_xml.violations()
    assert violation.startswith("our client's request POST /api/3.28/sites/")
    assert "'no-luid'" in violation and "<tsRequest><datasource" in violation


def test_a_request_is_checked_in_tableaus_namespace() -> None:
    """Requests go without a namespace, as TSC sends them; they are still checked."""
    request = b'<tsRequest><datasource name="ds"><project id="x"/></datasource></tsRequest>'
    [problem] = problems(request)
    assert "attribute id='x'" in problem and "/tsRequest/datasource/project" in problem
    assert problems(request.replace(b'"x"', b'"ee8c6e70-43b6-11e6-af4f-f7b0d8e20760"')) == []


def test_a_body_that_is_not_xml_is_a_problem() -> None:
    assert problems(b"<tsResponse>")[0].startswith("it is not XML:")


# What a recording's older server lacks of REST API 3.28, which no patch should allow.
PREDATES = {
    "server_info_get.xml": [  # a 10.1 server's: before platform, prepConductorVersion, ...
        "Unexpected child with tag 'productVersion' at position 1. Tag 'tbl:platform' "
        "expected. (at /tsResponse/serverInfo)"
    ]
}


@pytest.mark.parametrize("patch", PATCHES, ids=lambda patch: patch.recording)
def test_each_exception_to_the_schema_is_what_its_recording_needs(patch: Any) -> None:
    """The recording a patch cites (a real server's reply) is valid with the patches,
    but for what its older API version lacks."""
    found = problems((RECORDED / patch.recording).read_bytes())
    assert found == PREDATES.get(patch.recording, []), patch.what


def test_the_recorded_rest_api_version_is_one_the_schema_takes() -> None:
    [version] = ET.parse(RECORDED / "server_info_get.xml").iter(f"{{{NAMESPACE}}}restApiVersion")
    assert version.text == "3.10" and schema().types["restApiVersion"].is_valid("3.10")


def test_a_process_of_its_own_saves_its_bodies_and_a_broken_one_is_caught(
    tmp_path: Path,
) -> None:
    """What the demo's processes do (tests/dagster_ui.py): a module run under
    with_rest_schema.py, whose emulator sends a reply that breaks the schema."""
    (tmp_path / "data").mkdir()
    (tmp_path / "serve_once.py").write_text(
        "import httpx\n"
        "from hyper_assets.emulator import Emulator, api_sites\n"
        'api_sites.BUILD = "2026.1"\n'
        'with Emulator("data") as emulator:\n'
        '    assert httpx.get(f"{emulator.url}/api/3.28/serverinfo").status_code == 200\n'
    )
    saved = tmp_path / "saved.json"
    command = with_rest_schema(saved, "serve_once")
    subprocess.run(command, cwd=tmp_path, check=True, timeout=300)
    with pytest.raises(AssertionError, match=r"attribute build='2026\.1'") as caught:
        assert_schema_kept(saved, "serve_once")
    assert "serve_once sent:\nthe emulator's reply to GET /api/3.28/serverinfo" in str(caught.value)
