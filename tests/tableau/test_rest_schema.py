"""The schema check of XML bodies (`tests/rest_schema.py`) catches what breaks
ts-api_3_28.xsd; its exceptions are the ones real servers' recordings need."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import pytest
from rest_schema import NAMESPACE, PATCHES, problems, schema

RECORDED = Path(__file__).parent / "recorded"


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
