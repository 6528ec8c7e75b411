"""Every error hyper-assets raises, in one tree.

Each message names the table, column or field at fault and says how to fix it.

HyperAssetsError
├── ConfigurationError              asset metadata or resource config that cannot work
│   ├── ComponentSpecError          a defs.yaml field of the component
│   ├── CopyCheckSetupError         a copy check whose publish asset does not say what to compare
│   ├── MetadataKeyError            a metadata key misspelling one the library reads
│   ├── MetadataValueError          a metadata value not of its key's shape
│   ├── MissingDependencyError      an optional package (pyspark...) needed and not importable
│   ├── OutputError                 an output that cannot be a table: None, no columns, no frame
│   ├── StagingNotSharedError       Spark staged where this process cannot read
│   └── UnsupportedHomeError        a database URI whose store this library cannot serve
├── UnsupportedTypeError            a column type a .hyper table cannot store
│   └── DatabaseVersionError        a column needing a file version above max_database_version
├── SchemaMismatchError             rows that do not fit the stored table
│   └── KeyTypeError                a key column's type its foreign keys cannot be compared with
├── DataError                       rows whose values break the table's rules
│   ├── NullInNotNullColumnError
│   ├── PrimaryKeyError             an upsert's rows with NULL or repeated keys
│   └── InvalidGeographyError       a geography value that is not well-known text
├── HyperFileError                  Hyper failed on a .hyper file (named, with its table)
│   ├── TableNotFoundError          the table (or the file) is not there
│   ├── DatabaseLockedError         the file held by another program too long
│   ├── CorruptDatabaseError        a file Hyper cannot open: not a .hyper, truncated
│   ├── IngestError                 staged rows not loaded (or not all arrived)
│   └── CompactionError             compacting or upgrading the file failed; it is unchanged
├── ExtractRecreatedError           the file is not the extract Dagster recorded (lost, made anew)
├── HyperStartError                 hyperd could not start
├── StagingStoreError               the staging object store failed or cannot be reached
├── CorruptFileError                a saved file (outbox, plan, state, manifest...) not readable
│   └── UnknownFormatVersionError   one of a newer hyper-assets (its format_version)
├── HomeError                       the extract's object-store home; nothing was committed
│   ├── HomeConflictError           another writer committed a generation during this write
│   ├── LeaseLostError              the write's lease expired: it may not commit
│   └── HomeStoreError              the store failed or cannot be reached
│       └── HomeCommitUnknownError  ... at the commit: the write may be committed; check it
├── ActionValidationError           an action batch that does not parse
├── TableauError                    talking to Tableau Server / Cloud
│   ├── TableauConnectionError      no answer after every retry
│   ├── TableauRequestError         an error reply: status, Tableau's code, summary, detail
│   │   ├── UnexpectedReplyError    a reply the client cannot read (HTML, empty, undecodable)
│   │   ├── TableauSignInError      401
│   │   ├── DataSourceExistsError   403007
│   │   ├── PayloadTooLargeError    413
│   │   └── VizqlDataServiceError   a VizQL Data Service refusal (`disabled`: off on the site)
│   ├── ProjectLookupError          a project path naming none, or several
│   │   ├── ProjectNotFoundError
│   │   └── AmbiguousProjectError
│   ├── TableauJobError             a job failed; `notes` holds Tableau's words
│   │   └── TableauJobCancelledError
│   └── TableauJobTimeoutError      a job still running when the wait ended
└── PublishError                    a publish could not finish; nothing unsent is lost
    ├── PublishLockedError          another publish of the file held it too long
    ├── DataModelError              tables that are not one star, which Tableau refuses
    └── PayloadFileError            Hyper failed writing a payload file (a HyperFileError too)

Hyper's own `HyperException` is mapped into `HyperFileError` and its subclasses (among
them `PayloadFileError`) in one place, `hyper_assets._engine.hyper_errors`. The emulator's errors
are server-side code and live in `hyper_assets.emulator.errors`: `RestApiError` (a reply
with this status; no client error derives from it), and `EmulatorConfigError` and
`ActionBatchError`, which are `HyperAssetsError`s too.
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


class KeyTypeError(SchemaMismatchError):
    """A key column typed so that a foreign key between it and another table's cannot hold
    (Hyper compares keys only within a family of types: numbers; text; dates and times):
    a dimension's key retyped under the keys referencing it, or a foreign key column of a
    type its referenced key is not. `column` is the column at fault; nothing was written."""

    def __init__(self, message: str, *, column: str):
        super().__init__(message)
        self.column = column


class DataError(HyperAssetsError):
    """Rows whose values break the table's rules; fix the data, not the definition."""


class NullInNotNullColumnError(DataError):
    """A NULL arrived for a column declared NOT NULL."""


class PrimaryKeyError(DataError):
    """Rows to upsert whose primary key is NULL, or occurs more than once."""


class InvalidGeographyError(DataError):
    """A value of a geography column that Hyper cannot read as well-known text."""


class HyperFileError(HyperAssetsError):
    """Hyper failed on a `.hyper` file; `file` and `table` say where, when known.

    The message names the file even when the code that raised it knew only the table:
    the boundary that opened the file fills `file` in (`hyper_assets._engine.hyper_errors`).
    """

    def __init__(self, message: str, *, file: str | None = None, table: str | None = None):
        super().__init__(message)
        self.file = file
        self.table = table

    def __str__(self) -> str:
        text = super().__str__()
        return text if self.file is None or self.file in text else f"{self.file}: {text}"


class TableNotFoundError(HyperFileError):
    """A table (or the whole `.hyper` file) to read or load does not exist."""


class DatabaseLockedError(HyperFileError):
    """The `.hyper` file is held by another program for longer than the wait timeout."""


class CorruptDatabaseError(HyperFileError):
    """A file Hyper cannot open as a database: not a `.hyper` file, truncated, damaged."""


class ExtractRecreatedError(HyperAssetsError):
    """The `.hyper` file is not the extract Dagster's materialisations were written to: it
    was lost (a volume not mounted, a new container's empty disk) and made anew, or is
    missing. Nothing was read, written or sent."""


class ConfigurationError(HyperAssetsError):
    """Asset metadata or resource configuration that cannot work as given."""


class MissingDependencyError(ConfigurationError, ImportError):
    """An optional package that a frame, an input's annotation or a setting needs and that
    cannot be imported: names the package, the real cause and what to install."""


class ComponentSpecError(ConfigurationError):
    """A `HyperExtractComponent` attribute that cannot build the extract; names the field."""

    def __init__(self, field: str, problem: str):
        super().__init__(f"{field}: {problem}. Fix it in defs.yaml.")
        self.field = field


class CopyCheckSetupError(ConfigurationError):
    """`tableau_copy_check` cannot read from its publish asset what to compare (the fact's
    partition column); the message names the asset and the argument to pass."""


class MetadataKeyError(ConfigurationError):
    """A metadata key that is not one the library reads but close to one (`foreign_key`
    for `foreign_keys`): ignored, it would drop a key, a check or a write mode without a
    word. `key` is the one given, `meant` the one it is close to."""

    def __init__(self, message: str, *, key: str, meant: str):
        super().__init__(message)
        self.key = key
        self.meant = meant


class MetadataValueError(ConfigurationError):
    """A metadata value not of the shape its key takes; the message names the key, the
    asset and the shape (docs/metadata.md lists them)."""

    def __init__(self, message: str, *, key: str):
        super().__init__(message)
        self.key = key


class OutputError(ConfigurationError):
    """What an asset or op returned cannot be stored as a table: `None` from an output
    that is not typed `None`, a frame of no columns, or an object that is not a frame."""


class IngestError(HyperFileError):
    """The staged rows could not be loaded, or not all arrived; the table is unchanged."""


class StagingNotSharedError(ConfigurationError):
    """Spark staged rows where this process cannot read them (a remote cluster's disk)."""


class UnsupportedHomeError(ConfigurationError):
    """A `database` URI naming a store the library cannot keep the file in (never taken
    as a local path)."""


class CompactionError(HyperFileError):
    """Hyper failed compacting or upgrading a `.hyper` file (a full disk, say); it is unchanged."""


class HomeError(HyperAssetsError):
    """The extract's object-store home refused or failed a step; the home's current
    generation is as it was (but after `HomeCommitUnknownError`)."""


class HomeConflictError(HomeError):
    """Another writer committed the generation this write was to commit."""


class LeaseLostError(HomeError):
    """The write's lease expired or was taken over; the commit was refused."""


class HomeStoreError(HomeError):
    """The object store failed or cannot be reached (its error quoted)."""


class HomeCommitUnknownError(HomeStoreError):
    """The store failed at the commit and could not tell whether it took place: the write
    may be committed. The message names the manifest and the token that tell; an append
    run again without checking them may add its rows twice."""


class HyperStartError(HyperAssetsError):
    """hyperd could not start (its `parameters`, `log_dir`, or the machine); Hyper quoted."""


class StagingStoreError(HyperAssetsError):
    """The object store or HDFS given as `staging_dir` failed or cannot be reached from
    this process (its error quoted); nothing was written."""


class CorruptFileError(HyperAssetsError):
    """A file the library saved (beside a `.hyper`: outbox record, publish plan or state,
    pending keys, identity; in an object-store home: a manifest, the lease) cannot be read:
    not JSON, a field missing or of the wrong type, or a field its format does not know.
    The message names the file and the field (`hyper_assets._base.saved`)."""


class UnknownFormatVersionError(CorruptFileError):
    """A saved file of a `format_version` (spelled `format` in the home's manifests and
    older leases, `v` in the landing sensor's cursor) that this library does not read:
    written by a newer hyper-assets. Nothing was changed."""


# --- Action batches ------------------------------------------------------------------


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
    """A reply the client cannot read (HTML, empty, wrong shape, a body that does not
    decode); `url`, first bytes kept (None when the body could not be read)."""

    def __init__(
        self, status: int, url: str, body: bytes | None, *, call: str, problem: str
    ) -> None:
        start = None if body is None else body[:200].decode("utf-8", "replace")
        said = "" if start is None else f" with {start!r}"
        detail = f"{problem}; {url} answered {status}{said}"
        hint = "Check server_url and the site: a proxy or a login page may have answered."
        super().__init__(status, str(status), "Unexpected reply", detail, call=call, hint=hint)
        self.url = url
        self.body_start = start


class TableauSignInError(TableauRequestError):
    """Tableau refused the sign-in (a personal access token, or a Connected App's JWT), or a
    session signed in so (401)."""


class DataSourceExistsError(TableauRequestError):
    """A publish without overwrite found a data source of that name in the project (403007)."""


class PayloadTooLargeError(TableauRequestError):
    """An update payload above the server's size limit (413)."""


class VizqlDataServiceError(TableauRequestError):
    """Tableau's VizQL Data Service refused a call: its `errorCode` and `message`.

    `disabled` when the service is off on the site (403 with errorCode 403800) or absent
    from the server (404 without an errorCode): a site administrator turns it on."""

    @property
    def disabled(self) -> bool:
        return (self.status, self.code) == (403, "403800") or (
            self.status == 404 and self.code == "404"
        )


class ProjectLookupError(TableauError):
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


class TableauJobTimeoutError(TableauError):
    """A Tableau job did not complete within the time allowed; it may still be running.

    `notes` holds what Tableau said of it so far; `finish_code` is None (it has none yet).
    """

    def __init__(self, message: str, *, job_id: str, notes: str | None, finish_code: None = None):
        super().__init__(message)
        self.job_id = job_id
        self.notes = notes
        self.finish_code = finish_code


class PublishError(HyperAssetsError):
    """A publish could not finish; the outbox keeps every change it did not send."""


class PublishLockedError(PublishError):
    """Another publish of the same file held it for longer than the wait allowed."""


class DataModelError(PublishError):
    """The tables a data source holds are not one star (Tableau: "exactly one fact table").

    `facts` lists the tables no foreign key references, `unreachable` the tables no key
    path reaches from the fact, `missing` the keys declared in metadata that the file
    lacks (`schema.table.column -> schema.table.column`); nothing was sent and nothing
    changed.
    """

    def __init__(
        self,
        message: str,
        *,
        facts: list[str],
        unreachable: list[str],
        missing: list[str] | None = None,
    ):
        super().__init__(message)
        self.facts = facts
        self.unreachable = unreachable
        self.missing = missing or []


class PayloadFileError(PublishError, HyperFileError):
    """Hyper failed writing a payload file of a publish (`file`): nothing was sent, and the
    outbox keeps every change."""
