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


# --- Action batches and the Tableau REST emulator --------------------------------------


class ActionValidationError(HyperAssetsError):
    """An action batch that does not parse: the message names the action index and field."""

    def __init__(self, problem: str, *, index: int | None = None, field: str | None = None):
        where = []
        if index is not None:
            where.append(f"action {index}")
        if field:
            where.append(f"field '{field}'")
        prefix = ", ".join(where)
        super().__init__(f"{prefix}: {problem}" if prefix else problem)
        self.index = index
        self.field = field
        self.problem = problem


class ActionBatchError(HyperAssetsError):
    """An action that cannot apply to the target; the whole batch was rolled back."""

    def __init__(self, index: int, action: str, problem: str):
        super().__init__(
            f"action {index} ({action}): {problem.rstrip('.')}. The batch was rolled back; "
            "the target is unchanged."
        )
        self.index = index
        self.action = action
        self.problem = problem


class EmulatorConfigError(HyperAssetsError):
    """The REST emulator cannot start as configured (bad data dir, token or port)."""


class RestApiError(HyperAssetsError):
    """A Tableau REST error: HTTP status, Tableau's error code, summary and detail."""

    def __init__(self, status: int, code: str, summary: str, detail: str):
        super().__init__(f"{status} {code} {summary}: {detail}")
        self.status = status
        self.code = code
        self.summary = summary
        self.detail = detail
