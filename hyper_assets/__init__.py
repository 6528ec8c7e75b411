"""hyper-assets: Tableau .hyper extracts as Dagster assets, written from Spark."""

from hyper_assets.checks import build_hyper_checks, not_null_check, publish_freshness_check
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
from hyper_assets.tableau.assets import (
    PublishConfig,
    build_publish_op,
    publish_condition,
    tableau_datasource_asset,
)
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
    "build_hyper_checks",
    "build_publish_op",
    "compact",
    "landing_sensor",
    "not_null_check",
    "publish_condition",
    "publish_freshness_check",
    "tableau_datasource_asset",
]
