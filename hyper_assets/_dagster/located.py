"""How the checks and the publish find the extract: the `HyperDatabase` resource under
`database_key`, or, without one, the `HyperIOManager` under `io_manager_key` (whose home
and Hyper settings they take, as they did before `HyperDatabase` was a resource).

    db = HyperDatabase(database="s3://extracts/shop.hyper")
    resources = {"io_manager": HyperIOManager(database=db), "shop": db}
    build_hyper_checks([flights], database_key="shop")

Taken from a `HyperDatabase`, the tables of assets whose key has one part are in schema
"Extract" (the IO manager's default); give such assets metadata `schema` when the IO
manager's `default_schema` is another.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from hyper_assets._dagster.io_manager import HyperIOManager
from hyper_assets._dagster.spec import DEFAULT_SCHEMA, TableSpec
from hyper_assets._home.home import HyperDatabase
from hyper_assets.errors import ConfigurationError


@dataclass(frozen=True)
class Located:
    """The extract's home, and the schema of assets whose key has one part."""

    database: HyperDatabase
    default_schema: str = DEFAULT_SCHEMA

    def spec_for(self, key_path: Sequence[str], metadata: Mapping[str, Any] | None) -> TableSpec:
        """What an asset's definition metadata says about its table (`TableSpec.parse`)."""
        return TableSpec.parse(key_path, metadata, self.default_schema)


@dataclass(frozen=True)
class ExtractSource:
    """Where a check or a publish finds the extract: `database_key` if given, else the
    IO manager under `io_manager_key`."""

    io_manager_key: str = "io_manager"
    database_key: str | None = None

    @property
    def resource_key(self) -> str:
        """The one resource the step requires."""
        return self.database_key or self.io_manager_key

    def locate(self, resources: Any, user: str) -> Located:
        """The extract, from the step's `resources`; `ConfigurationError` naming the key
        and the fix for a resource of another type. `user`: who asks ("The checks of X")."""
        found = getattr(resources, self.resource_key)
        if self.database_key is not None:
            if isinstance(found, HyperDatabase):
                return Located(found)
            raise ConfigurationError(
                f"{user} read the .hyper file of the HyperDatabase under resource key "
                f"{self.database_key!r}, found a {type(found).__name__}: put your "
                f"HyperDatabase under that key (resources={{{self.database_key!r}: "
                "HyperDatabase(database=...)}), or leave database_key out to use the "
                "HyperIOManager under io_manager_key."
            )
        if isinstance(found, HyperIOManager):
            return Located(found.home, found.default_schema)
        raise ConfigurationError(
            f"{user} read the .hyper file of the HyperIOManager under resource key "
            f"{self.io_manager_key!r}, found a {type(found).__name__}: pass the key of your "
            "HyperIOManager as io_manager_key=, or the key of a HyperDatabase resource as "
            "database_key=."
        )
