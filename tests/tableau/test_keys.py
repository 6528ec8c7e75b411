"""The publish asset's key is the key dagster-tableau gives the same published data source,
or, under another key, the key `tableau_translator` makes dagster-tableau give it.

dagster-tableau's own translator builds the specs of a data source, a sheet on it and a
dashboard from the properties its workspace reads from Tableau's Metadata API; the
sheet and dashboard must then hang below the publish asset in one asset graph.
"""

import subprocess
import sys
from pathlib import Path

import dagster as dg
import pytest
from dagster_tableau import DagsterTableauTranslator, TableauContentType, TableauTranslatorData
from dagster_tableau.translator import TableauContentData, TableauWorkspaceData

from demo.definitions import DATASOURCES, build_definitions, flights_datasource as flights_published
from hyper_assets import (
    ConfigurationError,
    HyperIOManager,
    TableauServerResource,
    TokenSignIn,
    tableau_datasource_asset,
    tableau_translator,
)

DATASOURCE_LUID, SHEET_LUID = "0f4b3a4e-ds", "6c1e2d9a-sheet"
ROOT = Path(__file__).parents[2]


def tableau_specs(
    datasource: str, translator: DagsterTableauTranslator | None = None
) -> dict[TableauContentType, dg.AssetSpec]:
    """dagster-tableau's specs for a published data source, a sheet using it, a dashboard,
    by its own translator unless `translator` is given."""
    workbook = TableauContentData(
        content_type=TableauContentType.WORKBOOK,
        properties={
            "luid": "wb-1",
            "name": "Delays",
            "projectName": "Analytics",
            "projectLuid": "proj-1",
        },
    )
    source = TableauContentData(
        content_type=TableauContentType.DATA_SOURCE,
        properties={
            "luid": DATASOURCE_LUID,
            "name": datasource,
            "hasExtracts": True,
            "isPublished": True,
        },
    )
    sheet = TableauContentData(
        content_type=TableauContentType.SHEET,
        properties={
            "luid": SHEET_LUID,
            "id": "sheet-id",
            "name": "Late arrivals",
            "workbook": {"luid": "wb-1"},
            "parentEmbeddedDatasources": [
                {"parentPublishedDatasources": [{"luid": DATASOURCE_LUID}]}
            ],
        },
    )
    dashboard = TableauContentData(
        content_type=TableauContentType.DASHBOARD,
        properties={
            "luid": "dash-1",
            "name": "Overview",
            "workbook": {"luid": "wb-1"},
            "sheets": [{"luid": SHEET_LUID}],
        },
    )
    content = [workbook, source, sheet, dashboard]
    workspace = TableauWorkspaceData.from_content_data("site", content)
    translator = translator or DagsterTableauTranslator()
    return {
        c.content_type: translator.get_asset_spec(
            TableauTranslatorData(content_data=c, workspace_data=workspace)
        )
        for c in (source, sheet, dashboard)
    }


@pytest.mark.parametrize(
    "datasource", ["nycflights13", "Flights Extract", "Étoile", "Sales (EU) \u2013 2026", "東京"]
)
def test_the_publish_asset_takes_the_key_dagster_tableau_gives_the_data_source(datasource):
    published = tableau_datasource_asset(datasource=datasource, project="Analytics", deps=[])
    specs = tableau_specs(datasource)
    assert published.key == specs[TableauContentType.DATA_SOURCE].key

    # dagster-tableau's data source spec is left out: the publish asset stands for it.
    defs = dg.Definitions(
        assets=[published, specs[TableauContentType.SHEET], specs[TableauContentType.DASHBOARD]],
        resources={
            "io_manager": HyperIOManager(database="unused.hyper"),
            "tableau": TableauServerResource(
                server_url="https://tableau.example.com", sign_in=TokenSignIn(name="t", secret="s")
            ),
        },
    )
    graph = defs.resolve_asset_graph()
    sheet, dashboard = specs[TableauContentType.SHEET].key, specs[TableauContentType.DASHBOARD].key
    assert graph.get(sheet).parent_keys == {published.key}
    assert sheet in graph.get(dashboard).parent_keys
    assert graph.get(published.key).child_keys == {sheet}


def test_a_name_outside_ascii_folds_into_a_valid_key():
    """Was DagsterInvalidDefinitionError: `\\W` keeps letters such as `é`."""
    assert tableau_datasource_asset(datasource="Étoile", project="p", deps=[]).key == dg.AssetKey(
        "_toile"
    )


def test_an_explicit_key_still_wins():
    published = tableau_datasource_asset(
        datasource="Flights", project="p", deps=[], key=["tableau", "flights"]
    )
    assert published.key == dg.AssetKey(["tableau", "flights"])


def test_a_data_source_named_like_a_table_hangs_below_its_publish_asset_not_the_table():
    """The demo's "Flights" is published as `tableau/flights`; `flights` is its fact table."""
    fact = dg.AssetKey("flights")
    assert tableau_specs("Flights")[TableauContentType.SHEET].deps[0].asset_key == fact

    specs = tableau_specs("Flights", tableau_translator(DATASOURCES))
    source, sheet, dashboard = (
        specs[t]
        for t in (
            TableauContentType.DATA_SOURCE,
            TableauContentType.SHEET,
            TableauContentType.DASHBOARD,
        )
    )
    assert source.key == flights_published.key == dg.AssetKey(["tableau", "flights"])
    # The rest of dagster-tableau's spec is its own: kinds, its id of the data source.
    assert source.kinds == {"tableau", "extract", "published datasource"}
    assert source.metadata["dagster-tableau/id"] == DATASOURCE_LUID

    demo = build_definitions(
        tableau=TableauServerResource(
            server_url="https://tableau.example.com", sign_in=TokenSignIn(name="t", secret="s")
        )
    )
    defs = dg.Definitions.merge(demo, dg.Definitions(assets=[sheet, dashboard]))
    graph = defs.resolve_asset_graph()  # one asset per key: no duplicate
    assert graph.get(sheet.key).parent_keys == {flights_published.key}
    assert graph.get(dashboard.key).parent_keys == {sheet.key}
    assert sheet.key in graph.get(flights_published.key).child_keys
    assert graph.get(fact).child_keys == {flights_published.key}
    other = tableau_specs("Delays", tableau_translator(DATASOURCES))  # published elsewhere
    assert other[TableauContentType.DATA_SOURCE].key == dg.AssetKey("delays")


def test_the_translator_takes_publish_assets_of_distinct_names_only():
    @dg.asset
    def flights() -> None: ...

    with pytest.raises(ConfigurationError) as refused:
        tableau_translator([flights_published, flights])
    assert str(refused.value) == (
        "tableau_translator takes the assets tableau_datasource_asset makes; asset 'flights' "
        "is none of them."
    )
    elsewhere = tableau_datasource_asset(
        datasource="Flights", project="Archive", deps=[], key=["archive", "flights"]
    )
    with pytest.raises(ConfigurationError) as refused:
        tableau_translator([flights_published, elsewhere])
    assert str(refused.value) == (
        "Publish assets 'tableau/flights' and 'archive/flights' both publish a data source "
        "named 'Flights'; dagster-tableau's data sources carry no project to tell them "
        "apart: give tableau_translator one of them."
    )


def test_dagster_tableau_is_imported_only_by_the_translator():
    """hyper_assets imports without it; the translator names the [tableau] extra."""
    script = (
        "import sys; sys.modules['dagster_tableau'] = None\n"
        "import hyper_assets\n"
        "published = hyper_assets.tableau_datasource_asset(datasource='F', project='p', deps=[])\n"
        "try:\n"
        "    hyper_assets.tableau_translator([published])\n"
        "except hyper_assets.ConfigurationError as error:\n"
        "    print(error)\n"
    )
    ran = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, check=True, cwd=ROOT
    )
    assert ran.stdout == (
        "tableau_translator needs 'dagster_tableau', which cannot be imported here (import "
        "of dagster_tableau halted; None in sys.modules). Install it: pip install "
        "'hyper-assets[tableau]' (dagster-tableau).\n"
    )
