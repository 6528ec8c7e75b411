"""The emulator's VizQL Data Service, driven over loopback HTTP by Tableau's own Python SDK
(`vizql-data-service-py`), which signs in with tableauserverclient: the model derived
from the stored file's keys (role copies as logical tables of their own), the fields and
captions of `read-metadata`, the query subset, and the `TableauError` refusals."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import date
from pathlib import Path
from typing import Any

import httpx
import pytest
import tableauserverclient as TSC
from sales_world import SITE, TOKEN_NAME, TOKEN_SECRET
from tableauhyperapi import NOT_NULLABLE, SqlType, TableDefinition
from vizql_data_service_py import (
    Datasource,
    DimensionFilterField,
    FilterType,
    GetDatasourceModelRequest,
    QuantitativeDateFilter,
    QuantitativeFilterType,
    Query,
    QueryRequest,
    ReadMetadataRequest,
    SetFilter,
    TableauError,
    VizQLDataServiceClient,
    get_datasource_model,
    query_datasource,
    read_metadata,
)

from hyper_assets.emulator import Emulator

Column = TableDefinition.Column
DAYS = [date(2024, 1, 1), date(2024, 1, 2), date(2024, 1, 3)]
FLIGHTS = [
    (DAYS[i % 3], origin, dest, i * 10)
    for i, (origin, dest) in enumerate([("JFK", "LAX"), ("EWR", "LAX"), ("JFK", "ORD")] * 4)
]
AIRPORTS = [("JFK", "Kennedy"), ("EWR", "Newark"), ("LAX", "Los Angeles"), ("ORD", "O'Hare")]


@pytest.fixture
def published(emulator: Emulator, server: TSC.Server, hyper_files: Any, tmp_path: Path) -> str:
    """A data source of flights and the two role copies of airports the publish makes."""
    airports = (
        [Column("id", SqlType.text(), NOT_NULLABLE), Column("name", SqlType.text())],
        AIRPORTS,
    )
    flights = [
        Column("day", SqlType.date()),
        Column("origin", SqlType.text()),
        Column("dest", SqlType.text()),
        Column("dep_delay", SqlType.big_int()),
    ]
    path = hyper_files.create(
        tmp_path / "flights.hyper",
        {
            ("Extract", "flights"): (flights, FLIGHTS),
            ("Extract", "airports (origin)"): airports,
            ("Extract", "airports (dest)"): airports,
        },
        [("flights", "origin", "airports (origin)"), ("flights", "dest", "airports (dest)")],
    )
    [project] = [p for p in TSC.Pager(server.projects) if p.name == "Default"]
    item = TSC.DatasourceItem(project.id, name="Flights")
    return str(server.datasources.publish(item, path, TSC.Server.PublishMode.Overwrite).id)


@pytest.fixture
def vds(emulator: Emulator, server: TSC.Server) -> Iterator[VizQLDataServiceClient]:
    auth = TSC.PersonalAccessTokenAuth(TOKEN_NAME, TOKEN_SECRET, site_id=SITE)
    client = VizQLDataServiceClient(emulator.url, server, auth)
    yield client
    client.get_httpx_client().close()


def _model(vds: VizQLDataServiceClient, luid: str) -> Any:
    body = GetDatasourceModelRequest(datasource=Datasource(datasourceLuid=luid))
    return get_datasource_model.sync(client=vds, body=body)


def _fields(vds: VizQLDataServiceClient, luid: str) -> Any:
    body = ReadMetadataRequest(datasource=Datasource(datasourceLuid=luid))
    return read_metadata.sync(client=vds, body=body).data


def _query(
    vds: VizQLDataServiceClient,
    luid: str,
    fields: list[dict[str, Any]],
    *filters: Any,
    **options: Any,
) -> Any:
    """A query of `fields` (as JSON) and `filters` (the SDK's filter models)."""
    query = Query.model_validate({"fields": fields})
    query.filters = list(filters) or None
    body = QueryRequest.model_validate(
        {"datasource": {"datasourceLuid": luid}, "query": query, "options": options or None}
    )
    return query_datasource.sync_detailed(client=vds, body=body)


def test_the_model_has_a_logical_table_per_role_copy_and_a_relationship_per_key(
    vds: VizQLDataServiceClient, published: str
) -> None:
    model = _model(vds, published)
    captions = {t.logicalTableId: t.caption for t in model.logicalTables}
    assert sorted(captions.values()) == ["airports (dest)", "airports (origin)", "flights"]
    pairs = {
        (captions[r.fromLogicalTable.logicalTableId], captions[r.toLogicalTable.logicalTableId])
        for r in model.logicalTableRelationships
    }
    assert pairs == {("flights", "airports (origin)"), ("flights", "airports (dest)")}
    assert all(i.startswith(f"{c}_") and len(i) == len(c) + 33 for i, c in captions.items())


def test_metadata_names_each_field_by_table_with_captions_unlike_the_column_names(
    vds: VizQLDataServiceClient, published: str
) -> None:
    tables = {t.logicalTableId: t.caption for t in _model(vds, published).logicalTables}
    fields = {(tables[f.logicalTableId], f.fieldName): f for f in _fields(vds, published)}
    assert fields["flights", "dep_delay"].fieldCaption == "Dep Delay"
    assert fields["flights", "dep_delay"].dataType.value == "INTEGER"
    assert fields["flights", "day"].dataType.value == "DATE"
    names = {fields["airports (origin)", "name"].fieldCaption}
    names.add(fields["airports (dest)", "name"].fieldCaption)
    assert "Name" in names and len(names) == 2  # the second copy's caption names its table
    assert len(fields) == 8


def test_counts_and_sums_per_day_with_set_and_date_filters(
    vds: VizQLDataServiceClient, published: str
) -> None:
    captions = {f.fieldName: f.fieldCaption for f in _fields(vds, published)}
    fields = [
        {"fieldCaption": captions["day"], "sortPriority": 1},
        {"fieldCaption": captions["dep_delay"], "function": "COUNT"},
        {"fieldCaption": captions["dep_delay"], "function": "SUM", "fieldAlias": "delay"},
    ]
    dates = QuantitativeDateFilter(
        field=DimensionFilterField(fieldCaption=captions["day"]),
        filterType=FilterType.QUANTITATIVE_DATE,
        quantitativeFilterType=QuantitativeFilterType.RANGE,
        minDate=DAYS[1],
        maxDate=DAYS[2],
    )
    reply = _query(vds, published, fields, dates)
    expected = {
        d.isoformat(): (
            sum(1 for f in FLIGHTS if f[0] == d),
            sum(f[3] for f in FLIGHTS if f[0] == d),
        )
        for d in DAYS[1:]
    }
    assert reply.status_code == 200, reply.content
    assert reply.parsed.data == [
        {"Day": day, "COUNT(Dep Delay)": count, "delay": total}
        for day, (count, total) in expected.items()
    ]
    origin = DimensionFilterField(fieldCaption=captions["origin"])
    jfk = SetFilter(field=origin, filterType=FilterType.SET, values=["JFK"])
    reply = _query(vds, published, fields[1:], jfk, returnFormat="ARRAYS")
    from_jfk = [f for f in FLIGHTS if f[1] == "JFK"]
    assert reply.status_code == 200, reply.content
    assert reply.parsed.data == [[len(from_jfk), sum(f[3] for f in from_jfk)]]


def _error(reply: Any) -> TableauError:
    return TableauError.model_validate_json(reply.content)


def test_what_the_emulator_does_not_emulate_is_refused_as_a_tableau_error(
    vds: VizQLDataServiceClient, published: str
) -> None:
    reply = _query(vds, published, [{"fieldCaption": "Twice", "calculation": "[Dep Delay] * 2"}])
    assert reply.status_code == 501
    error = _error(reply)
    assert error.errorCode == "501000" and "'calculation' is not emulated" in error.message
    fields = [{"fieldCaption": "Dep Delay", "function": "MEDIAN"}]
    assert "function 'MEDIAN'" in _error(_query(vds, published, fields)).message
    reply = _query(vds, published, [{"fieldCaption": "dep_delay", "function": "SUM"}])
    assert (reply.status_code, _error(reply).message) == (400, "Unknown Field: dep_delay.")


def test_a_body_the_schema_refuses_is_a_400_naming_where(
    emulator: Emulator, server: TSC.Server, published: str
) -> None:
    url = f"{emulator.url}/api/v1/vizql-data-service/query-datasource"
    body = {
        "datasource": {"datasourceLuid": published},
        "query": {
            "fields": [],
            "filters": [{"field": {"fieldCaption": "Day"}, "filterType": "SET"}],
        },
    }
    reply = httpx.post(url, json=body, headers={"X-Tableau-Auth": server.auth_token})
    error = reply.json()
    assert reply.status_code == 400 and error["errorCode"] == "400800"
    assert "query.filters.0: 'values' is a required property (a SetFilter)" in error["message"]
    reply = httpx.post(url, json=body)
    assert reply.status_code == 401 and set(reply.json()) == {"errorCode", "message", "datetime"}


def test_with_the_service_off_on_the_site_every_request_is_403800(
    emulator: Emulator, vds: VizQLDataServiceClient, published: str
) -> None:
    emulator.set_vds_enabled(False, site=SITE)
    body = ReadMetadataRequest(datasource=Datasource(datasourceLuid=published))
    reply = read_metadata.sync_detailed(client=vds, body=body)
    assert reply.status_code == 403 and _error(reply).errorCode == "403800"
    emulator.set_vds_enabled(True, site=SITE)
    assert read_metadata.sync_detailed(client=vds, body=body).status_code == 200
