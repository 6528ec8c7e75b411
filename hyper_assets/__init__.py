"""hyper-assets: Tableau .hyper extracts as Dagster assets, written from Spark."""

from hyper_assets.errors import (
    ConfigurationError,
    DatabaseLockedError,
    HyperAssetsError,
    IngestError,
    NullInNotNullColumnError,
    SchemaMismatchError,
    TableNotFoundError,
    UnsupportedTypeError,
)
from hyper_assets.io_manager import HyperIOManager
from hyper_assets.resource import HyperResource

__all__ = [
    "ConfigurationError",
    "DatabaseLockedError",
    "HyperAssetsError",
    "HyperIOManager",
    "HyperResource",
    "IngestError",
    "NullInNotNullColumnError",
    "SchemaMismatchError",
    "TableNotFoundError",
    "UnsupportedTypeError",
]
