"""The publish asset's key is the key dagster-tableau gives the same published data source.

dagster-tableau's own translator builds the specs of a data source, a sheet on it and a
dashboard from the properties its workspace reads from Tableau's Metadata API; the
sheet and dashboard must then hang below the publish asset in one asset graph.
"""

import dagster as dg
import pytest
from dagster_tableau import DagsterTableauTranslator, TableauContentType, TableauTranslatorData
from dagster_tableau.translator import TableauContentData, TableauWorkspaceData

from hyper_assets import (
    HyperIOManager,
    TableauServerResource,
    TokenSignIn,
    tableau_datasource_asset,
)

DATASOURCE_LUID, SHEET_LUID = "0f4b3a4e-ds", "6c1e2d9a-sheet"


def tableau_specs(datasource: str) -> dict[TableauContentType, dg.AssetSpec]:
    """dagster-tableau's specs for a published data source, a sheet using it, a dashboard."""
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
    translator = DagsterTableauTranslator()
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
