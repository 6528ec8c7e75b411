"""geography_columns: WKT strings stored as Hyper GEOGRAPHY (Tableau maps them), read back
as Hyper reads them; a value that is not WKT is an error naming the column, value and row."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pytest
from dagster import StaticPartitionsDefinition, asset, materialize
from helpers import io, query
from tableauhyperapi import Connection, TableName, TypeTag

from hyper_assets import ConfigurationError, InvalidGeographyError

AIRPORTS = {
    "faa": ["JFK", "LGA", "XXX"],
    "location": ["POINT(-73.7789 40.6397)", "POINT (-73.872 40.7769)", None],
}
SITES = StaticPartitionsDefinition(["ny", "nj"])
GEO = {"geography_columns": ["location"], "partition_expr": "site"}


def airports(rows: dict[str, list], metadata: dict | None = None):
    @asset(name="airports", partitions_def=SITES, metadata=metadata or GEO)
    def airports_asset(context) -> pa.Table:
        count = len(rows["faa"])
        return pa.table({"site": [context.partition_key] * count, **rows})

    return airports_asset


def write(database: Path, asset, site: str = "ny") -> None:
    materialize([asset], resources={"io_manager": io(database)}, partition_key=site)


def locations(hyper, database: Path) -> list[list]:
    sql = 'SELECT site, faa, CAST(location AS TEXT) FROM "Extract".airports ORDER BY site, faa'
    return query(hyper, database, sql)


def test_wkt_is_stored_as_geography_and_read_back(hyper, tmp_path):
    database = tmp_path / "maps.hyper"
    write(database, airports(AIRPORTS), "ny")
    write(database, airports({"faa": ["EWR"], "location": ["POINT(-74.1687 40.6925)"]}), "nj")
    with Connection(hyper.endpoint, str(database)) as connection:
        definition = connection.catalog.get_table_definition(TableName("Extract", "airports"))
        assert definition.get_column_by_name("location").type.tag == TypeTag.TABGEOGRAPHY
    assert locations(hyper, database) == [
        ["nj", "EWR", "POINT(-74.1687000 40.6925000)"],
        ["ny", "JFK", "POINT(-73.7789000 40.6397000)"],
        ["ny", "LGA", "POINT(-73.8720000 40.7769000)"],
        ["ny", "XXX", None],
    ]
    seen = {}

    @asset(partitions_def=SITES)
    def reader(airports: pa.Table) -> None:  # loaded as text: WKT as Hyper writes it
        seen["rows"] = [(r["faa"], r["location"]) for r in airports.to_pylist()]

    source = airports(AIRPORTS)
    result = materialize(
        [source, reader],
        resources={"io_manager": io(database)},
        partition_key="nj",
        selection=[reader],
    )
    assert result.success
    assert seen["rows"] == [("EWR", "POINT(-74.1687000 40.6925000)")]


def test_a_value_that_is_not_wkt_names_column_value_and_row(hyper, tmp_path):
    database = tmp_path / "maps.hyper"
    write(database, airports(AIRPORTS), "ny")
    good = [f"POINT({-70 - i / 100} 40)" for i in range(200)]
    rows = {"faa": [f"A{i:03}" for i in range(201)], "location": [*good, "POINT(-74.1 95)"]}
    with pytest.raises(
        InvalidGeographyError,
        match=r"'location' of Extract\.airports holds 'POINT\(-74\.1 95\)'.*Latitude.*faa='A200'",
    ):
        write(database, airports(rows), "nj")
    assert [r[:2] for r in locations(hyper, database)] == [
        ["ny", "JFK"],
        ["ny", "LGA"],
        ["ny", "XXX"],
    ]


def test_geography_columns_must_name_string_columns(tmp_path):
    with pytest.raises(
        ConfigurationError, match=r"geography_columns of Extract\.airports.*'faa_id'"
    ):
        write(tmp_path / "maps.hyper", airports(AIRPORTS, GEO | {"geography_columns": ["faa_id"]}))


def test_wkt_strings_from_spark_become_geography(spark, hyper, tmp_path):
    @asset(name="airports", partitions_def=SITES, metadata=GEO)
    def from_spark(context):
        return spark.sql(
            f"SELECT '{context.partition_key}' AS site, 'JFK' AS faa, "
            "'POINT(-73.7789 40.6397)' AS location"
        )

    database = tmp_path / "maps.hyper"
    write(database, from_spark, "ny")
    assert locations(hyper, database) == [["ny", "JFK", "POINT(-73.7789000 40.6397000)"]]
