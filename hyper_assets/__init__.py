"""hyper-assets: Tableau .hyper extracts as Dagster assets, written from Spark."""

from hyper_assets.compaction import CompactResult, compact
from hyper_assets.errors import (
    ConfigurationError,
    DatabaseLockedError,
    HyperAssetsError,
    IngestError,
    NullInNotNullColumnError,
    PublishError,
    SchemaMismatchError,
    StagingNotSharedError,
    TableNotFoundError,
    UnsupportedTypeError,
)
from hyper_assets.io_manager import HyperIOManager
from hyper_assets.resource import HyperResource
from hyper_assets.sensors import landing_sensor
from hyper_assets.staging import S3Staging
from hyper_assets.tableau.assets import PublishConfig, build_publish_op, tableau_datasource_asset
from hyper_assets.tableau.client import TableauServerResource
from hyper_assets.transfer import StagingMode

__all__ = [
    "CompactResult",
    "ConfigurationError",
    "DatabaseLockedError",
    "HyperAssetsError",
    "HyperIOManager",
    "HyperResource",
    "IngestError",
    "NullInNotNullColumnError",
    "PublishConfig",
    "PublishError",
    "S3Staging",
    "SchemaMismatchError",
    "StagingMode",
    "StagingNotSharedError",
    "TableNotFoundError",
    "TableauServerResource",
    "UnsupportedTypeError",
    "build_publish_op",
    "compact",
    "landing_sensor",
    "tableau_datasource_asset",
]
