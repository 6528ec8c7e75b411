"""Tableau's OpenAPI schema of the VizQL Data Service, and the check of each request by it.

`openapi/VizQLDataServiceOpenAPISchema.json` is Tableau's file, unchanged (its README
names the source). Its component schemas are JSON Schema with OpenAPI 3.0's keywords
beside them, and `jsonschema` validates a request body against the operation's request
schema. Of OpenAPI's own keywords, `nullable` only ever widens a schema here (JSON
Schema ignores it: what it allows is allowed), and `discriminator` narrows one: a
`Filter` is also validated against the schema its `filterType` maps to (`SET` to
`SetFilter`, which requires `values`), as an OpenAPI validator does.
"""

from __future__ import annotations

import functools
import json
from pathlib import Path
from typing import Any

from jsonschema import Draft7Validator, FormatChecker

SCHEMA_FILE = Path(__file__).parent / "openapi" / "VizQLDataServiceOpenAPISchema.json"
COMPONENTS = "#/components/schemas/"

#: The request schema of each operation the emulator answers, by its path.
REQUESTS = {
    "read-metadata": "ReadMetadataRequest",
    "get-datasource-model": "GetDatasourceModelRequest",
    "query-datasource": "QueryRequest",
}


@functools.cache
def schema() -> dict[str, Any]:
    """The schema as Tableau published it."""
    loaded: dict[str, Any] = json.loads(SCHEMA_FILE.read_text(encoding="utf-8"))
    return loaded


@functools.cache
def _validator(component: str) -> Draft7Validator:
    root = {"$ref": COMPONENTS + component, "components": schema()["components"]}
    return Draft7Validator(root, format_checker=FormatChecker())


def problems(operation: str, body: object) -> list[str]:
    """What in `body` breaks the request schema of `operation` (a key of `REQUESTS`),
    each as `where: what`; empty when the body is valid."""
    found = [
        _problem(e.absolute_path, e.message)
        for e in _validator(REQUESTS[operation]).iter_errors(body)
    ]
    query = body.get("query") if isinstance(body, dict) else None
    filters = query.get("filters") if isinstance(query, dict) else None
    mapping = schema()["components"]["schemas"]["Filter"]["discriminator"]["mapping"]
    for index, item in enumerate(filters if isinstance(filters, list) else []):
        kind = item.get("filterType") if isinstance(item, dict) else None
        if isinstance(kind, str) and kind in mapping:
            component = mapping[kind].removeprefix(COMPONENTS)
            for error in _validator(component).iter_errors(item):
                path = ["query", "filters", index, *error.absolute_path]
                found.append(_problem(path, f"{error.message} (a {component})"))
    return sorted(set(found))


def _problem(path: Any, message: str) -> str:
    where = ".".join(str(part) for part in path) or "the body"
    return f"{where}: {message}"
