"""Every error hyper-assets raises, in one place.

Each message names the table, column or field at fault and says how to fix it.
"""

from __future__ import annotations


class HyperAssetsError(Exception):
    """Base class of every error raised by hyper-assets."""


# --- Hyper files and the ingest engine -------------------------------------------------


class UnsupportedTypeError(HyperAssetsError):
    """A Spark or Arrow column type that cannot be stored in a `.hyper` table."""


class SchemaMismatchError(HyperAssetsError):
    """Rows to append or to replace a partition with differ from the stored table."""


class NullInNotNullColumnError(HyperAssetsError):
    """A NULL arrived for a column declared NOT NULL."""


class DatabaseLockedError(HyperAssetsError):
    """The `.hyper` file is held by another program for longer than the wait timeout."""


class TableNotFoundError(HyperAssetsError):
    """A table (or the whole `.hyper` file) to load does not exist."""


class ConfigurationError(HyperAssetsError):
    """Asset metadata or resource configuration that cannot work as given."""


class IngestError(HyperAssetsError):
    """Hyper refused to load the staged data; the stored table is unchanged."""
