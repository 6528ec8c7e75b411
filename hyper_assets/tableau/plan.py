"""What a publish saves beside the file, as frozen typed objects: its plan and its state.

`plan.json` holds the plan a publish is sending (`Plan`, its `Batch`es); `published.json`
the data source's publish state (`PublishState`): where it was published, the shape of its
tables then (`Fingerprint`) and how far through the outbox it is. Both are parsed once,
here, and carry `format_version`: a file of a version this library does not know is
refused with `UnknownFormatVersionError`; a file without one (written before versions
were recorded) is version 1.
"""

from __future__ import annotations

import hashlib
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Literal

from hyper_assets._files import read_json, write_json
from hyper_assets.outbox import Change
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
    def from_json(cls, body: Mapping[str, Any]) -> Target:
        return cls(str(body["site"]), str(body["project"]), str(body["datasource"]))


@dataclass(frozen=True)
class ColumnShape:
    name: str
    type: str
    nullable: bool
    collation: str | None


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


@dataclass(frozen=True)
class TableShape:
    """What a table's shape on the server depends on: its columns in order, and its keys."""

    columns: tuple[ColumnShape, ...]
    primary_key: tuple[str, ...]
    foreign_keys: tuple[ForeignKeyShape, ...]

    def to_json(self) -> dict[str, Any]:
        return {
            "columns": [vars(c) for c in self.columns],
            "primary_key": list(self.primary_key),
            "foreign_keys": [fk.to_json() for fk in self.foreign_keys],
        }

    @classmethod
    def from_json(cls, body: Mapping[str, Any]) -> TableShape:
        return cls(
            tuple(ColumnShape(**c) for c in body["columns"]),
            tuple(body["primary_key"]),
            tuple(
                ForeignKeyShape(tuple(fk["columns"]), fk["references"], tuple(fk["ref_columns"]))
                for fk in body["foreign_keys"]
            ),
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
    def from_json(cls, body: Mapping[str, Any]) -> Fingerprint:
        return cls({label: TableShape.from_json(shape) for label, shape in body.items()})

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

    @classmethod
    def from_json(cls, body: Mapping[str, Any]) -> SentRows:
        return cls(str(body["table"]), str(body["action"]), int(body["rows"]))


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
            **vars(self),
            "actions": [a.to_json() for a in self.actions],
            "rows": [vars(r) for r in self.rows],
            "changes": list(self.changes),
            "units": list(self.units),
        }

    @classmethod
    def from_json(cls, body: Mapping[str, Any]) -> Batch:
        return cls(
            **{
                **body,
                "actions": tuple(parse_batch(body["actions"])),
                "rows": tuple(SentRows.from_json(r) for r in body["rows"]),
                "changes": tuple(body["changes"]),
                "units": tuple(body.get("units", ())),
            }
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
        return {
            "format_version": FORMAT_VERSION,
            **vars(self),
            "changes": [c.to_json() for c in self.changes],
            "fingerprint": self.fingerprint.to_json(),
            "target": self.target.to_json() if self.target else None,
            "tables": list(self.tables),
            "rows": [vars(r) for r in self.rows],
            "batches": [b.to_json() for b in self.batches],
        }

    @classmethod
    def from_json(cls, body: Mapping[str, Any]) -> Plan:
        target = body.get("target")
        return cls(
            **{
                **{k: v for k, v in body.items() if k != "format_version"},
                "changes": tuple(Change.from_json(c) for c in body["changes"]),
                "fingerprint": Fingerprint.from_json(body["fingerprint"]),
                "target": Target.from_json(target) if target else None,
                "tables": tuple(body.get("tables", ())),
                "position": int(body.get("position", 0)),
                "rows": tuple(SentRows.from_json(r) for r in body.get("rows", ())),
                "batches": tuple(Batch.from_json(b) for b in body.get("batches", ())),
            }
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
        return {
            "format_version": FORMAT_VERSION,
            "target": self.target.to_json(),
            "datasource_id": self.datasource_id,
            "fingerprint": self.fingerprint.to_json(),
            "database_version": self.database_version,
            "position": self.position,
            "tables": None if self.tables is None else list(self.tables),
            "copy_bytes": self.copy_bytes,
        }

    @classmethod
    def from_json(cls, body: Mapping[str, Any]) -> PublishState:
        if not isinstance(body["datasource_id"], str):
            raise TypeError("datasource_id must be a string")
        tables = body.get("tables")
        return cls(
            Target.from_json(body["target"]),
            body["datasource_id"],
            Fingerprint.from_json(body.get("fingerprint", {})),
            body.get("database_version"),
            int(body.get("position", 0)),
            None if tables is None else tuple(tables),
            _optional_int(body.get("copy_bytes")),
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


def _optional_int(value: object) -> int | None:
    if value is None:
        return None
    if not isinstance(value, int):
        raise TypeError(f"expected a whole number or null, got {value!r}")
    return value


def read_plan(path: Path) -> Plan | None:
    """The plan saved at `path`, None when there is none."""
    if not path.exists():
        return None
    return read_json(path, Plan.from_json, FULL_WAY_OUT, versioned=FORMAT_VERSION)


def read_state(path: Path) -> PublishState | None:
    """The publish state saved at `path`, None when there is none."""
    if not path.exists():
        return None
    return read_json(path, PublishState.from_json, FULL_WAY_OUT, versioned=FORMAT_VERSION)


def save(path: Path, saved: Plan | PublishState) -> None:
    write_json(path, saved.to_json())
