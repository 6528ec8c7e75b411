"""Every error hyper-assets raises, in one tree.

Each message names the table, column or field at fault and says how to fix it.

HyperAssetsError
├── ConfigurationError              asset metadata or resource config that cannot work
│   ├── ComponentSpecError          a defs.yaml field of the component
│   ├── StagingNotSharedError       Spark staged where this process cannot read
│   ├── StagingStoreError           the staging object store is unreachable from here
│   ├── UnsupportedHomeError        a database URI whose store this library cannot serve
│   └── ProjectLookupError          a Tableau project path naming none, or several
│       ├── ProjectNotFoundError
│       └── AmbiguousProjectError
├── UnsupportedTypeError            a column type a .hyper table cannot store
│   └── DatabaseVersionError        a column needing a file version above max_database_version
├── SchemaMismatchError             rows that do not fit the stored table
├── DataError                       rows whose values break the table's rules
│   ├── NullInNotNullColumnError
│   ├── PrimaryKeyError             an upsert's rows with NULL or repeated keys
│   └── InvalidGeographyError       a geography value that is not well-known text
├── TableNotFoundError
├── ExtractRecreatedError           the file is not the extract Dagster recorded (lost, made anew)
├── DatabaseLockedError             the file held by another program too long
├── IngestError                     staged rows not loaded (or not all arrived)
├── CompactionError
├── CorruptFileError                an outbox, plan or state file that does not parse
├── HomeError                       the extract's object-store home; nothing was committed
│   ├── HomeConflictError           another writer committed a generation during this write
│   ├── LeaseLostError              the write's lease expired: it may not commit
│   └── HomeStoreError              the store failed or cannot be reached
├── ActionValidationError           an action batch that does not parse
├── ActionBatchError                an action that cannot apply; the batch rolled back
├── EmulatorConfigError
├── TableauError                    talking to Tableau Server / Cloud
│   ├── TableauConnectionError      no answer after every retry
│   ├── TableauRequestError         an error reply: status, Tableau's code, summary, detail
│   │   ├── UnexpectedReplyError    a reply the client cannot read (HTML, empty, ...)
│   │   ├── TableauSignInError      401
│   │   ├── DataSourceExistsError   403007
│   │   └── PayloadTooLargeError    413
│   └── TableauJobError             a job failed; `notes` holds Tableau's words
│       ├── TableauJobCancelledError
│       └── TableauJobTimeoutError
└── PublishError                    a publish could not finish; nothing unsent is lost
    ├── PublishLockedError          another publish of the file held it too long
    └── DataModelError              tables that are not one star, which Tableau refuses

The emulator's own "reply with this status" error is server-side code and lives in
`hyper_assets.emulator.errors`; no client error derives from it.
"""

from __future__ import annotations


class HyperAssetsError(Exception):
    """Base class of every error raised by hyper-assets."""


# --- Hyper files and the ingest engine -------------------------------------------------


class UnsupportedTypeError(HyperAssetsError):
    """A Spark or Arrow column type that cannot be stored in a `.hyper` table."""


class DatabaseVersionError(UnsupportedTypeError):
    """A column whose type needs a newer file format version than `max_database_version`."""

    def __init__(self, message: str, *, column: str, needed: int, cap: int):
        super().__init__(message)
        self.column = column
        self.needed = needed
        self.cap = cap


class SchemaMismatchError(HyperAssetsError):
    """Rows to append or to replace a partition with differ from the stored table."""


class DataError(HyperAssetsError):
    """Rows whose values break the table's rules; fix the data, not the definition."""


class NullInNotNullColumnError(DataError):
    """A NULL arrived for a column declared NOT NULL."""


class PrimaryKeyError(DataError):
    """Rows to upsert whose primary key is NULL, or occurs more than once."""


class InvalidGeographyError(DataError):
    """A value of a geography column that Hyper cannot read as well-known text."""


class DatabaseLockedError(HyperAssetsError):
    """The `.hyper` file is held by another program for longer than the wait timeout."""


class ExtractRecreatedError(HyperAssetsError):
    """The `.hyper` file is not the extract Dagster's materialisations were written to: it
    was lost (a volume not mounted, a new container's empty disk) and made anew, or is
    missing. Nothing was read, written or sent."""


class TableNotFoundError(HyperAssetsError):
    """A table (or the whole `.hyper` file) to load does not exist."""


class ConfigurationError(HyperAssetsError):
    """Asset metadata or resource configuration that cannot work as given."""


class ComponentSpecError(ConfigurationError):
    """A `HyperExtractComponent` attribute that cannot build the extract; names the field."""

    def __init__(self, field: str, problem: str):
        super().__init__(f"{field}: {problem}. Fix it in defs.yaml.")
        self.field = field


class IngestError(HyperAssetsError):
    """The staged rows could not be loaded, or not all arrived; the table is unchanged."""


class StagingNotSharedError(ConfigurationError):
    """Spark staged rows where this process cannot read them (a remote cluster's disk)."""


class UnsupportedHomeError(ConfigurationError):
    """A `database` URI naming a store the library cannot keep the file in (never taken
    as a local path)."""


class StagingStoreError(ConfigurationError):
    """This process cannot reach the object store or HDFS given as `staging_dir`."""


class CompactionError(HyperAssetsError):
    """Hyper failed compacting or upgrading a `.hyper` file (a full disk, say); it is unchanged."""


class HomeError(HyperAssetsError):
    """The extract's object-store home refused or failed a step; the home's current
    generation is as it was."""


class HomeConflictError(HomeError):
    """Another writer committed the generation this write was to commit."""


class LeaseLostError(HomeError):
    """The write's lease expired or was taken over; the commit was refused."""


class HomeStoreError(HomeError):
    """The object store failed or cannot be reached (its error quoted)."""


class CorruptFileError(HyperAssetsError):
    """A file kept beside a `.hyper` (outbox record, publish plan or state) cannot be read."""


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


# --- The Tableau REST client -----------------------------------------------------------


class TableauError(HyperAssetsError):
    """Talking to Tableau Server or Cloud failed (base of the client's errors)."""


class TableauRequestError(TableauError):
    """A Tableau REST call failed: Tableau's code, summary and detail, and what to do."""

    def __init__(
        self, status: int, code: str, summary: str, detail: str, *, call: str, hint: str = ""
    ):
        super().__init__(f"{status} {code} {summary}: {detail}")
        self.status = status
        self.code = code
        self.summary = summary
        self.detail = detail
        self.call = call
        self.hint = hint

    def __str__(self) -> str:
        text = f"Tableau {self.call}: {super().__str__()}"
        return f"{text} {self.hint}" if self.hint else text


class UnexpectedReplyError(TableauRequestError):
    """A reply the client cannot read (HTML, empty, wrong shape); `url`, first bytes kept."""

    def __init__(self, status: int, url: str, body: bytes, *, call: str, problem: str):
        start = body[:200].decode("utf-8", "replace")
        detail = f"{problem}; {url} answered {status} with {start!r}"
        hint = "Check server_url and the site: a proxy or a login page may have answered."
        super().__init__(status, str(status), "Unexpected reply", detail, call=call, hint=hint)
        self.url = url
        self.body_start = start


class TableauSignInError(TableauRequestError):
    """Tableau refused the personal access token, or a session signed in with it (401)."""


class DataSourceExistsError(TableauRequestError):
    """A publish without overwrite found a data source of that name in the project (403007)."""


class PayloadTooLargeError(TableauRequestError):
    """An update payload above the server's size limit (413)."""


class ProjectLookupError(ConfigurationError):
    """A project path that names no project, or several; `candidates` holds full paths."""

    def __init__(self, message: str, *, candidates: list[str]):
        super().__init__(message)
        self.candidates = candidates


class ProjectNotFoundError(ProjectLookupError):
    """No project has this path; `candidates` lists the projects of the site."""


class AmbiguousProjectError(ProjectLookupError):
    """Several projects match this path (a name repeated under other parents)."""


class TableauConnectionError(TableauError):
    """No answer from Tableau after every retry allowed (network, TLS, timeouts).

    `maybe_applied` is True when the request was sent and may have taken effect.
    """

    def __init__(self, message: str, *, maybe_applied: bool):
        super().__init__(message)
        self.maybe_applied = maybe_applied


class TableauJobError(TableauError):
    """A Tableau job failed; `notes` holds what Tableau said about it."""

    def __init__(self, message: str, *, job_id: str, finish_code: int | None, notes: str | None):
        super().__init__(message)
        self.job_id = job_id
        self.finish_code = finish_code
        self.notes = notes


class TableauJobCancelledError(TableauJobError):
    """A Tableau job was cancelled (finishCode 2)."""


class TableauJobTimeoutError(TableauJobError):
    """A Tableau job did not complete within the time allowed; it may still be running."""


class PublishError(HyperAssetsError):
    """A publish could not finish; the outbox keeps every change it did not send."""


class PublishLockedError(PublishError):
    """Another publish of the same file held it for longer than the wait allowed."""


class DataModelError(PublishError):
    """The tables a data source holds are not one star (Tableau: "exactly one fact table").

    `facts` lists the tables no foreign key references, `unreachable` the tables no key
    path reaches from the fact; nothing was sent and nothing changed.
    """

    def __init__(self, message: str, *, facts: list[str], unreachable: list[str]):
        super().__init__(message)
        self.facts = facts
        self.unreachable = unreachable
