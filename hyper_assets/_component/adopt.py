"""`adopt`: assets the project already defines in Python, taken into the component."""

from pathlib import Path

import dagster as dg

from hyper_assets._component.specs import AdoptSpec
from hyper_assets._dagster.spec import DEFAULT_SCHEMA, TableSpec
from hyper_assets.errors import ComponentSpecError


def adopted_assets(
    adopt: AdoptSpec, io_manager_key: str, context: dg.ComponentLoadContext
) -> list[dg.AssetsDefinition]:
    """The assets `adopt` selects by key or group from the definitions at its defs path.

    They stay defined there: the component adds checks and the publish, not the assets.
    """
    where = "attributes.adopt"
    if not adopt.keys and not adopt.groups:
        raise ComponentSpecError(where, "select assets by `keys`, `groups` or both")
    found = context.build_defs(Path(adopt.defs_path)).assets or []
    candidates = [a for a in found if isinstance(a, dg.AssetsDefinition) and a.is_materializable]
    keys = {dg.AssetKey.from_user_string(k) for k in adopt.keys}
    chosen = [
        a
        for a in candidates
        if a.keys & keys or set(a.group_names_by_key.values()) & set(adopt.groups)
    ]
    known = {k for a in candidates for k in a.keys}
    missing = sorted(k.to_user_string() for k in keys - known)
    if missing:
        raise ComponentSpecError(
            f"{where}.keys",
            f"{missing} are not assets of {adopt.defs_path}; it defines "
            f"{sorted(k.to_user_string() for k in known)}",
        )
    groups = {g for a in candidates for g in a.group_names_by_key.values()}
    if set(adopt.groups) - groups:
        raise ComponentSpecError(
            f"{where}.groups",
            f"{sorted(set(adopt.groups) - groups)} are not groups there; it has {sorted(groups)}",
        )
    multi = [a.node_def.name for a in chosen if len(a.keys) != 1]
    if multi:
        raise ComponentSpecError(
            where, f"{multi} define several assets each; adopt assets of one table each"
        )
    elsewhere = {
        a.key.to_user_string(): a.get_io_manager_key_for_asset_key(a.key)
        for a in chosen
        if a.get_io_manager_key_for_asset_key(a.key) != io_manager_key
    }
    if elsewhere:
        raise ComponentSpecError(
            "attributes.io_manager_key",
            f"the checks and the publish read the file of the HyperIOManager under "
            f"{io_manager_key!r}, but adopted assets are stored under other keys: {elsewhere}; "
            "set io_manager_key to theirs",
        )
    for asset in chosen:  # a misspelt key is refused as the project loads
        TableSpec.parse(asset.key.path, asset.metadata_by_key.get(asset.key), DEFAULT_SCHEMA)
    return chosen
