"""What a publish saves beside the file, as frozen typed objects: its plan and its state.

`plan.json` holds the plan a publish is sending (`Plan`, its `Batch`es); `published.json`
the data source's publish state (`PublishState`): where it was published, the shape of its
tables then (`Fingerprint`) and how far through the outbox it is. Both are saved formats
(`PLAN`, `PUBLISH_STATE`; `hyper_assets._base.saved`): parsed once, here, field by field, and
carrying `format_version`. A file of a version this library does not know is refused with
`UnknownFormatVersionError`, one with a field it does not know with `CorruptFileError`; a
file without a version (written before versions were recorded) is version 1.
"""

from __future__ import annotations

import hashlib
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Literal

from hyper_assets._base.saved import FieldError, Fields, SavedFormat
from hyper_assets._rows.outbox import CHANGE_RECORD, Change
from hyper_assets.errors import ActionValidationError
from hyper_assets.tableau.actions import Action, parse_batch

#: The version of `plan.json` and `published.json` this library writes and reads.
FORMAT_VERSION = 1

#: What to do about a plan or publish state that cannot be read.
FULL_WAY_OUT = "Publish with full=True: a whole-file publish replaces it."


@dataclass(frozen=True)
class Target:
    """Where a publish sends: a site's content URL, a project path, a data source name."""

    site: str
    project: str
    datasource: str

    def to_json(self) -> dict[str, str]:
        return {"site": self.site, "project": self.project, "datasource": self.datasource}

    @classmethod
    def from_json(cls, f: Fields) -> Target:
        return cls(f.take("site", str), f.take("project", str), f.take("datasource", str))


@dataclass(frozen=True)
class ColumnShape:
    name: str
    type: str
    nullable: bool
    collation: str | None

    def to_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "type": self.type,
            "nullable": self.nullable,
            "collation": self.collation,
        }

    @classmethod
    def from_json(cls, f: Fields) -> ColumnShape:
        return cls(
            f.take("name", str),
            f.take("type", str),
            f.take("nullable", bool),
            f.optional("collation", str),
        )


@dataclass(frozen=True)
class ForeignKeyShape:
    """A foreign key to another table of the data source."""

    columns: tuple[str, ...]
    references: str
    ref_columns: tuple[str, ...]

    def to_json(self) -> dict[str, Any]:
        return {
            "columns": list(self.columns),
            "references": self.references,
            "ref_columns": list(self.ref_columns),
        }

    @classmethod
    def from_json(cls, f: Fields) -> ForeignKeyShape:
        return cls(f.strings("columns"), f.take("references", str), f.strings("ref_columns"))


@dataclass(frozen=True)
class TableShape:
    """What a table's shape on the server depends on: its columns in order, and its keys."""

    columns: tuple[ColumnShape, ...]
    primary_key: tuple[str, ...]
    foreign_keys: tuple[ForeignKeyShape, ...]

    def to_json(self) -> dict[str, Any]:
        return {
            "columns": [c.to_json() for c in self.columns],
            "primary_key": list(self.primary_key),
            "foreign_keys": [fk.to_json() for fk in self.foreign_keys],
        }

    @classmethod
    def from_json(cls, f: Fields) -> TableShape:
        return cls(
            f.each("columns", ColumnShape.from_json),
            f.strings("primary_key"),
            f.each("foreign_keys", ForeignKeyShape.from_json),
        )

    def change_since(self, published: TableShape) -> str:
        """How the shape changed since `published`, for the reason of a whole-file publish."""
        before, after = published.columns, self.columns
        same_keys = (published.primary_key, published.foreign_keys) == (
            self.primary_key,
            self.foreign_keys,
        )
        if same_keys and len(after) > len(before) and after[: len(before)] == before:
            names = ", ".join(c.name for c in after[len(before) :])
            return f"gained column(s) {names}, and action batches cannot change a table's shape"
        return "changed its columns, nullability or keys"


@dataclass(frozen=True)
class Fingerprint:
    """The shape of each table of a data source (by `schema.table` label); a change of it
    means a whole-file publish."""

    tables: Mapping[str, TableShape]

    def to_json(self) -> dict[str, Any]:
        return {label: shape.to_json() for label, shape in self.tables.items()}

    @classmethod
    def from_field(cls, f: Fields, key: str) -> Fingerprint:
        """The fingerprint in field `key` of `f` (none: no tables)."""
        return cls(f.named(key, TableShape.from_json, {}))

    def change_since(self, published: Fingerprint) -> str:
        """Why a table's shape forbids an update since `published`, or "" when none does."""
        for label, shape in self.tables.items():
            if label not in published.tables:
                return f"table {label} is new"
            if published.tables[label] != shape:
                return f"table {label} {shape.change_since(published.tables[label])}"
        dropped = [label for label in published.tables if label not in self.tables]
        return f"table {dropped[0]} was dropped" if dropped else ""


@dataclass(frozen=True)
class SentRows:
    """Rows a publish sends of one table by one action (`publish`: the whole table)."""

    table: str
    action: str
    rows: int

    def to_json(self) -> dict[str, Any]:
        return {"table": self.table, "action": self.action, "rows": self.rows}

    @classmethod
    def from_json(cls, f: Fields) -> SentRows:
        return cls(f.take("table", str), f.take("action", str), f.take("rows", int))


@dataclass(frozen=True)
class Batch:
    """One update request: actions, the payload file they read, what it carries."""

    actions: tuple[Action, ...]
    payload: str | None
    rows: tuple[SentRows, ...]
    changes: tuple[str, ...]  # ids of the outbox changes it carries
    payload_bytes: int = 0
    attempt: int = 0
    job_id: str | None = None
    done: bool = False
    units: tuple[int, ...] = ()  # actions per part, in order
    requested: bool = False  # sent in this attempt: maybe applied, so never cut

    def to_json(self) -> dict[str, Any]:
        """The batch as plan.json holds it: actions in the wire format Tableau reads."""
        return {
            "actions": [a.to_json() for a in self.actions],
            "payload": self.payload,
            "rows": [r.to_json() for r in self.rows],
            "changes": list(self.changes),
            "payload_bytes": self.payload_bytes,
            "attempt": self.attempt,
            "job_id": self.job_id,
            "done": self.done,
            "units": list(self.units),
            "requested": self.requested,
        }

    @classmethod
    def from_json(cls, f: Fields) -> Batch:
        actions = f.take("actions", list)
        try:
            parsed = tuple(parse_batch(actions))
        except ActionValidationError as error:
            raise FieldError(f"field '{f.name('actions')}': {error}") from error
        units = f.take("units", list, [])
        if not all(isinstance(u, int) and not isinstance(u, bool) for u in units):
            raise FieldError(f"field '{f.name('units')}' is {units!r}, not whole numbers")
        return cls(
            actions=parsed,
            payload=f.optional("payload", str),
            rows=f.each("rows", SentRows.from_json),
            changes=f.strings("changes"),
            payload_bytes=f.take("payload_bytes", int, 0),
            attempt=f.take("attempt", int, 0),
            job_id=f.optional("job_id", str),
            done=f.take("done", bool, False),
            units=tuple(units),
            requested=f.take("requested", bool, False),
        )


@dataclass(frozen=True)
class Plan:
    """What one publish sends; saved as `plan.json` so that a re-run resumes it."""

    kind: Literal["full", "update"]
    reason: str
    changes: tuple[Change, ...]
    fingerprint: Fingerprint
    target: Target | None  # None in plans saved before targets were recorded
    tables: tuple[str, ...]  # the tables of the data source
    position: int  # the outbox's changes through this one are in the plan
    rows: tuple[SentRows, ...] = ()  # a full plan's
    batches: tuple[Batch, ...] = ()  # an update plan's
    payload_bytes: int = 0
    started_tracking: bool = False  # its making started the outbox's tracking
    id: str = field(default_factory=lambda: uuid.uuid4().hex)
    database_version: int | None = None  # the file's format version; None in older plans

    def request_id(self, index: int) -> str:
        """Stable for one batch attempt: derived from the plan, its changes and the attempt."""
        batch = self.batches[index]
        text = "|".join([self.id, *batch.changes, str(index), str(batch.attempt)])
        return "hyper-assets-" + hashlib.sha256(text.encode()).hexdigest()[:40]

    def with_batches(self, index: int, batches: list[Batch]) -> Plan:
        """The plan with batch `index` replaced by `batches`."""
        new = (*self.batches[:index], *batches, *self.batches[index + 1 :])
        return replace(self, batches=new, payload_bytes=sum(b.payload_bytes for b in new))

    def sent_rows(self) -> tuple[SentRows, ...]:
        return self.rows or tuple(r for b in self.batches for r in b.rows)

    def to_json(self) -> dict[str, Any]:
        """The plan as `plan.json` holds it (`PLAN`), each change a versioned record."""
        return {
            "kind": self.kind,
            "reason": self.reason,
            "changes": [CHANGE_RECORD.to_json(c) for c in self.changes],
            "fingerprint": self.fingerprint.to_json(),
            "target": self.target.to_json() if self.target else None,
            "tables": list(self.tables),
            "position": self.position,
            "rows": [r.to_json() for r in self.rows],
            "batches": [b.to_json() for b in self.batches],
            "payload_bytes": self.payload_bytes,
            "started_tracking": self.started_tracking,
            "id": self.id,
            "database_version": self.database_version,
        }

    @classmethod
    def from_json(cls, f: Fields) -> Plan:
        kind = f.take("kind", str)
        if kind not in ("full", "update"):
            raise FieldError(f"field 'kind' is {kind!r}, not 'full' or 'update'")
        return cls(
            kind="full" if kind == "full" else "update",
            reason=f.take("reason", str),
            changes=f.each("changes", CHANGE_RECORD.take),
            fingerprint=Fingerprint.from_field(f, "fingerprint"),
            # None, missing or {} (as plans saved before targets were recorded say): none
            target=f.nested("target", Target.from_json) if f.optional("target", dict) else None,
            tables=f.strings("tables", ()),
            position=f.take("position", int, 0),
            rows=f.each("rows", SentRows.from_json, ()),
            batches=f.each("batches", Batch.from_json, ()),
            payload_bytes=f.take("payload_bytes", int, 0),
            started_tracking=f.take("started_tracking", bool, False),
            id=f.take("id", str) if f.has("id") else uuid.uuid4().hex,
            database_version=f.optional("database_version", int),
        )


@dataclass(frozen=True)
class PublishState:
    """Where a data source was published from the file, the shape of its tables then, and
    how far through the outbox its server copy is."""

    target: Target
    datasource_id: str
    fingerprint: Fingerprint
    database_version: int | None  # None: published before versions were recorded
    position: int = 0
    tables: tuple[str, ...] | None = None  # None: adopted from before data sources had theirs
    copy_bytes: int | None = None  # the file the last full publish sent; None: not recorded

    def after(self, plan: Plan) -> PublishState:
        """The state once `plan` was sent: its tables, and its position."""
        return replace(self, position=plan.position, tables=plan.tables)

    def to_json(self) -> dict[str, Any]:
        """The state as `published.json` holds it (`PUBLISH_STATE`)."""
        return {
            "target": self.target.to_json(),
            "datasource_id": self.datasource_id,
            "fingerprint": self.fingerprint.to_json(),
            "database_version": self.database_version,
            "position": self.position,
            "tables": None if self.tables is None else list(self.tables),
            "copy_bytes": self.copy_bytes,
        }

    @classmethod
    def from_json(cls, f: Fields) -> PublishState:
        return cls(
            f.nested("target", Target.from_json),
            f.take("datasource_id", str),
            Fingerprint.from_field(f, "fingerprint"),
            f.optional("database_version", int),
            f.take("position", int, 0),
            None if f.absent("tables") else f.strings("tables"),
            f.optional("copy_bytes", int),
        )


@dataclass(frozen=True)
class PublishResult:
    """What a publish sent, for logs and Dagster metadata."""

    datasource_id: str
    webpage_url: str | None  # the data source's page as the server gave it; None: it gave none
    kind: str
    reason: str
    job_ids: tuple[str, ...]
    batches: int
    payload_bytes: int
    rows: tuple[SentRows, ...]
    changes: int
    seconds: float
    model: str = ""  # the tree the data source's copy holds, as Markdown (`model.describe`)
    copy_bytes: int | None = None  # the file its last full publish sent; None: unknown

    @classmethod
    def of(
        cls,
        sent: Sequence[tuple[Plan, tuple[str, ...]]],
        datasource_id: str,
        webpage_url: str | None,
        seconds: float,
        model: str = "",
        copy_bytes: int | None = None,
    ) -> PublishResult:
        """What the plans `sent` (each with its jobs' ids) sent to `datasource_id`, whose
        copy holds the tree `model` and was `copy_bytes` when last sent whole."""
        plans = [plan for plan, _ in sent]
        full = any(p.kind == "full" for p in plans)
        return cls(
            datasource_id=datasource_id,
            webpage_url=webpage_url,
            kind="full" if full else "update" if plans else "none",
            reason="; ".join(p.reason for p in plans) or "nothing changed since the last publish",
            job_ids=tuple(job for _, jobs in sent for job in jobs),
            batches=sum(len(p.batches) for p in plans),
            payload_bytes=sum(p.payload_bytes for p in plans),
            rows=tuple(r for p in plans for r in p.sent_rows()),
            changes=sum(len(p.changes) for p in plans),
            seconds=round(seconds, 3),
            model=model,
            copy_bytes=copy_bytes,
        )


#: `plan.json`.
PLAN = SavedFormat(FORMAT_VERSION, Plan.from_json, Plan.to_json, FULL_WAY_OUT)
#: `published.json`.
PUBLISH_STATE = SavedFormat(
    FORMAT_VERSION, PublishState.from_json, PublishState.to_json, FULL_WAY_OUT
)


def read_plan(path: Path) -> Plan | None:
    """The plan saved at `path`, None when there is none."""
    return PLAN.read(path) if path.exists() else None


def read_state(path: Path, way_out: str | None = None) -> PublishState | None:
    """The publish state saved at `path`, None when there is none; `way_out` says what to
    do when it cannot be read (else: publish with full=True)."""
    return PUBLISH_STATE.read(path, way_out) if path.exists() else None


def save(path: Path, saved: Plan | PublishState) -> None:
    if isinstance(saved, Plan):
        PLAN.write(path, saved)
    else:
        PUBLISH_STATE.write(path, saved)
