"""dagster-tableau's sheets and dashboards below the publish assets, whatever their keys.

dagster-tableau keys a published data source by its name (`"Flights"` -> `flights`) and
makes its sheets depend on that key. A publish asset keyed otherwise (`tableau/flights`,
because `flights` is the fact table) would leave the sheets below the fact table;
`tableau_translator` gives dagster-tableau's data source the publish asset's key:

    translator = tableau_translator([flights_datasource])
    specs = load_tableau_asset_specs(workspace, dagster_tableau_translator=translator)
    sheets_and_dashboards = [s for s in specs if s.key != flights_datasource.key]

dagster-tableau is optional (`hyper-assets[tableau]`): it is imported when a translator
is made (`hyper_assets.tableau._dagster.published_translator`), not with `hyper_assets`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

import dagster as dg

from hyper_assets._base.optional import missing
from hyper_assets.errors import ConfigurationError

if TYPE_CHECKING:
    from dagster_tableau import DagsterTableauTranslator


def tableau_translator(published: Sequence[dg.AssetsDefinition]) -> DagsterTableauTranslator:
    """dagster-tableau's translator, with each data source a publish asset publishes under
    that asset's key, so the sheets and dashboards on it depend on the publish asset.

    `published`: assets made by `tableau_datasource_asset`. A data source is found by its
    name: Tableau's Metadata API gives dagster-tableau no project, so two of them publishing
    one name (in two projects) are refused. Pass the result as
    `load_tableau_asset_specs(..., dagster_tableau_translator=...)` and leave out the specs
    of those data sources (their keys are the publish assets'). Needs dagster-tableau.
    """
    keys: dict[str, dg.AssetKey] = {}
    for asset in published:
        name, key = _published(asset)
        if keys.get(name, key) != key:
            raise ConfigurationError(
                f"Publish assets {keys[name].to_user_string()!r} and {key.to_user_string()!r} "
                f"both publish a data source named {name!r}; dagster-tableau's data sources "
                "carry no project to tell them apart: give tableau_translator one of them."
            )
        keys[name] = key
    try:
        from hyper_assets.tableau._dagster.published_translator import PublishedTranslator
    except ModuleNotFoundError as error:
        if error.name != "dagster_tableau":
            raise
        raise missing("dagster_tableau", "tableau_translator", error) from error
    return PublishedTranslator(keys)


def _published(asset: object) -> tuple[str, dg.AssetKey]:
    """The data source a publish asset publishes, and the asset's key."""
    if isinstance(asset, dg.AssetsDefinition):
        names = [m.get("datasource") for m in asset.metadata_by_key.values()]
        if len(names) == 1 and isinstance(names[0], str):
            return names[0], asset.key
        shown = f"asset {', '.join(k.to_user_string() for k in asset.keys)!r}"
    else:
        shown = f"{asset!r} ({type(asset).__name__})"
    raise ConfigurationError(
        f"tableau_translator takes the assets tableau_datasource_asset makes; {shown} is "
        "none of them."
    )
