"""The public surface: each name imported from its module when first used
(`__init__.py`, lazy_loader). Type checkers read the names' types here."""

from ._base.store_settings import (
    AzureSettings as AzureSettings,
    S3Settings as S3Settings,
)
from ._checks.checks import (
    build_hyper_checks as build_hyper_checks,
    foreign_key_check as foreign_key_check,
    not_null_check as not_null_check,
    primary_key_check as primary_key_check,
    publish_freshness_check as publish_freshness_check,
    row_count_check as row_count_check,
)
from ._component.component import (
    HyperExtractComponent as HyperExtractComponent,
)
from ._dagster.io_manager import (
    HyperIOManager as HyperIOManager,
)
from ._dagster.sensors import (
    landing_sensor as landing_sensor,
)
from ._engine.compaction import (
    AutoCompact as AutoCompact,
    CompactResult as CompactResult,
)
from ._engine.resource import (
    HyperResource as HyperResource,
)
from ._engine.upgrade import (
    VersionUpgrade as VersionUpgrade,
)
from ._home.home import (
    HomeSettings as HomeSettings,
    HyperDatabase as HyperDatabase,
)
from ._home.maintenance import (
    compact as compact,
    upgrade_database as upgrade_database,
)
from ._rows.staging import (
    S3Staging as S3Staging,
    StagingMode as StagingMode,
)
from .errors import (
    ActionValidationError as ActionValidationError,
    AmbiguousProjectError as AmbiguousProjectError,
    CompactionError as CompactionError,
    ComponentSpecError as ComponentSpecError,
    ConfigurationError as ConfigurationError,
    CopyCheckSetupError as CopyCheckSetupError,
    CorruptDatabaseError as CorruptDatabaseError,
    CorruptFileError as CorruptFileError,
    DatabaseLockedError as DatabaseLockedError,
    DatabaseVersionError as DatabaseVersionError,
    DataError as DataError,
    DataModelError as DataModelError,
    DataSourceExistsError as DataSourceExistsError,
    ExtractRecreatedError as ExtractRecreatedError,
    HomeCommitUnknownError as HomeCommitUnknownError,
    HomeConflictError as HomeConflictError,
    HomeError as HomeError,
    HomeStoreError as HomeStoreError,
    HyperAssetsError as HyperAssetsError,
    HyperFileError as HyperFileError,
    HyperStartError as HyperStartError,
    IngestError as IngestError,
    InvalidGeographyError as InvalidGeographyError,
    KeyTypeError as KeyTypeError,
    LeaseLostError as LeaseLostError,
    MetadataKeyError as MetadataKeyError,
    MetadataValueError as MetadataValueError,
    MissingDependencyError as MissingDependencyError,
    NullInNotNullColumnError as NullInNotNullColumnError,
    OutputError as OutputError,
    PayloadFileError as PayloadFileError,
    PayloadTooLargeError as PayloadTooLargeError,
    PrimaryKeyError as PrimaryKeyError,
    ProjectLookupError as ProjectLookupError,
    ProjectNotFoundError as ProjectNotFoundError,
    PublishError as PublishError,
    PublishLockedError as PublishLockedError,
    SchemaMismatchError as SchemaMismatchError,
    StagingNotSharedError as StagingNotSharedError,
    StagingStoreError as StagingStoreError,
    TableauConnectionError as TableauConnectionError,
    TableauError as TableauError,
    TableauJobCancelledError as TableauJobCancelledError,
    TableauJobError as TableauJobError,
    TableauJobTimeoutError as TableauJobTimeoutError,
    TableauRequestError as TableauRequestError,
    TableauSignInError as TableauSignInError,
    TableNotFoundError as TableNotFoundError,
    UnexpectedReplyError as UnexpectedReplyError,
    UnknownFormatVersionError as UnknownFormatVersionError,
    UnsupportedHomeError as UnsupportedHomeError,
    UnsupportedTypeError as UnsupportedTypeError,
    VizqlDataServiceError as VizqlDataServiceError,
)
from .tableau._dagster.assets import (
    PublishConfig as PublishConfig,
    build_publish_op as build_publish_op,
    publish_condition as publish_condition,
    tableau_datasource_asset as tableau_datasource_asset,
)
from .tableau._dagster.copy_check import (
    check_tableau_copy as check_tableau_copy,
    tableau_copy_check as tableau_copy_check,
)
from .tableau._dagster.quality_sensor import (
    quality_warning_sensor as quality_warning_sensor,
)
from .tableau._dagster.resource import (
    ConnectedAppSignIn as ConnectedAppSignIn,
    TableauServerResource as TableauServerResource,
    TokenSignIn as TokenSignIn,
)
from .tableau._dagster.translator import (
    tableau_translator as tableau_translator,
)
from .tableau._publish.copy_check import (
    CopyFigure as CopyFigure,
    CopyReport as CopyReport,
)
from .tableau._rest.quality import (
    QualityWarning as QualityWarning,
    set_quality_warning as set_quality_warning,
)

__version__: str
"""The installed distribution's version (`importlib.metadata`), or "0+unknown" when the
package was never installed."""
