"""The component's published data sources: one asset each, downstream of the tables it holds."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

import dagster as dg

from hyper_assets._component.specs import PublishSpec
from hyper_assets._dagster.spec import DEFAULT_SCHEMA
from hyper_assets.errors import ComponentSpecError
from hyper_assets.tableau._dagster.assets import datasource_key, tableau_datasource_asset

if TYPE_CHECKING:
    from hyper_assets._component.component import HyperExtractComponent


def publish_asset(
    component: HyperExtractComponent,
    spec: PublishSpec,
    where: str,
    assets: Sequence[dg.AssetsDefinition],
) -> dg.AssetsDefinition:
    """The asset publishing data source `spec` (declared at `where`) from the assets' file."""
    key = dg.AssetKey.from_user_string(spec.key) if spec.key else datasource_key(spec.datasource)
    if any(key in a.keys for a in assets):
        raise ComponentSpecError(
            f"{where}.key",
            f"data source {spec.datasource!r} would get {key.to_user_string()!r}, the key of "
            f"table asset {key.to_user_string()}; give the publish asset another key",
        )
    published = tableau_datasource_asset(
        datasource=spec.datasource,
        project=spec.project,
        deps=_held(assets, spec.tables, f"{where}.tables"),
        key=key,
        group_name=component.group_name,
        io_manager_key=component.hyper_io_manager_key,
        tableau_key=spec.resource_key,
        automation_condition=spec.automation_condition,
        tables=list(spec.tables) if spec.tables is not None else None,
        lock_timeout_seconds=spec.lock_timeout_seconds,
    )
    owners = [*component.owners, *spec.owners]
    return dg.map_asset_specs(
        lambda s: s.replace_attributes(
            description=spec.description or s.description,
            owners=owners or s.owners,
            tags={**s.tags, **component.tags, **spec.tags},
        ),
        [published],
    )[0]


def check_distinct(
    published: Sequence[dg.AssetsDefinition], specs: Sequence[tuple[str, PublishSpec]]
) -> None:
    """Two data sources of one name, or of one asset key, would overwrite each other."""
    seen: dict[tuple[str, str] | dg.AssetKey, str] = {}
    for asset, (where, spec) in zip(published, specs, strict=True):
        for mark, field_name in (
            ((spec.project, spec.datasource), "datasource"),
            (asset.key, "key"),
        ):
            if mark in seen:
                raise ComponentSpecError(
                    f"{where}.{field_name}",
                    f"data source {spec.datasource!r} of project {spec.project!r} has the "
                    f"{field_name} of {seen[mark]}: each data source needs its own",
                )
            seen[mark] = where


def _held(
    assets: Sequence[dg.AssetsDefinition], tables: Sequence[str] | None, where: str
) -> list[dg.AssetsDefinition]:
    """The assets whose table a data source holds (`"table"` or `"schema.table"`), in order;
    every asset without `tables`."""
    if tables is None:
        return list(assets)
    names = {_table_names(a): a for a in assets}
    unknown = [
        t for t in tables if not any(t in (table, f"{schema}.{table}") for schema, table in names)
    ]
    if not tables or unknown:
        known = sorted(f"{schema}.{table}" for schema, table in names)
        raise ComponentSpecError(
            where,
            f"names {unknown}, not tables of this component; it stores {known}"
            if unknown
            else f"names no table; list some of {known}, or leave `tables` out for every one",
        )
    return [a for (schema, table), a in names.items() if {table, f"{schema}.{table}"} & set(tables)]


def _table_names(asset: dg.AssetsDefinition) -> tuple[str, str]:
    """(schema, table) an asset of one key is stored as (the IO manager's defaults)."""
    metadata = asset.specs_by_key[asset.key].metadata
    path = asset.key.path
    schema = metadata.get("schema") or (path[-2] if len(path) > 1 else DEFAULT_SCHEMA)
    return schema, metadata.get("table") or path[-1]
