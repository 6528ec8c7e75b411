"""The translator `tableau_translator` makes: importing this module imports dagster-tableau."""

from __future__ import annotations

from collections.abc import Mapping

import dagster as dg
from dagster_tableau import DagsterTableauTranslator, TableauTranslatorData


class PublishedTranslator(DagsterTableauTranslator):
    """dagster-tableau's translator, but a published data source named in `keys` takes the
    key given there; the sheets and dashboards on it depend on that key, as they take
    their data sources' keys from `get_asset_spec`."""

    def __init__(self, keys: Mapping[str, dg.AssetKey]) -> None:
        self.keys = dict(keys)

    def get_data_source_spec(self, data: TableauTranslatorData) -> dg.AssetSpec:
        spec = super().get_data_source_spec(data)
        key = self.keys.get(data.properties["name"]) if data.properties["isPublished"] else None
        return spec.replace_attributes(key=key) if key else spec
