"""Every saved format against its golden files (tests/golden/<format>/v<N>[-<spelling>].json).

Each golden file is read into the value below, and the one of the version written today
(`v<N>.json`) is what the format writes for that value; the others are files in users'
hands (an older spelling of the version key, or none) that are still read. A copy with a
field the format does not know is refused naming it; one of version N + 1 is an unknown
version, not a corrupt file. The golden files of formats whose spelling this library
keeps were written by the version before these models, so they pin the files users have.
"""

import json
import re
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from tableauhyperapi import TableName

from hyper_assets._base.saved import VERSION_KEY, SavedFormat
from hyper_assets._dagster.identity import RECORD as IDENTITY_RECORD
from hyper_assets._dagster.sensors import CURSOR
from hyper_assets._engine.compaction import DELETIONS, Deletions
from hyper_assets._engine.tables import ForeignKey
from hyper_assets._home.chunks import Part, chunk_key
from hyper_assets._home.generations import (
    DIGESTS,
    MANIFEST,
    MARKER_FORMAT,
    Digests,
    Manifest,
    Marker,
    StoredFile,
)
from hyper_assets._home.lease import RECORD as LEASE_RECORD, LeaseRecord
from hyper_assets._rows.modes import WriteMode
from hyper_assets._rows.outbox import (
    CHANGE_RECORD,
    STATE as OUTBOX_STATE_FORMAT,
    Change,
    OutboxState,
)
from hyper_assets._rows.pending_keys import RECORD as PENDING_RECORD, PendingKey
from hyper_assets._rows.window import KeySet, TimeRange, Window
from hyper_assets.errors import CorruptFileError, UnknownFormatVersionError
from hyper_assets.tableau._publish.plan import (
    PLAN as PLAN_FORMAT,
    PUBLISH_STATE,
    Batch,
    ColumnShape,
    Fingerprint,
    ForeignKeyShape,
    Plan,
    PublishState,
    SentRows,
    TableShape,
    Target,
)
from hyper_assets.tableau._publish.publish_lock import HOLDER, Holder
from hyper_assets.tableau.actions import Insert, Upsert
from hyper_assets.tableau.conditions import Eq

AT = datetime(2026, 3, 1, 12, 30, tzinfo=UTC)
APPEND = Change(
    7,
    WriteMode.APPEND,
    TableName("Extract", "sales"),
    id="c0ffee00000000000000000000000007",
    window=Window(
        (
            TimeRange("day", True, datetime(2026, 3, 1), datetime(2026, 3, 2), False),
            KeySet("region", True, ("east", "west")),
        )
    ),
    rows=3,
    rows_before=10,
    recorded_at=AT,
)
UPSERT = Change(
    8,
    WriteMode.UPSERT,
    TableName("Extract", "products"),
    id="c0ffee00000000000000000000000008",
    key=("id",),
    rows=2,
    uncertain=True,
    recorded_at=AT,
)
FINGERPRINT = Fingerprint(
    {
        "Extract.sales": TableShape(
            (
                ColumnShape("day", "DATE", False, None),
                ColumnShape("product", "BIG_INT", True, None),
                ColumnShape("region", "TEXT", True, "en_US"),
            ),
            (),
            (ForeignKeyShape(("product",), "Extract.products", ("id",)),),
        ),
        "Extract.products": TableShape((ColumnShape("id", "BIG_INT", False, None),), ("id",), ()),
    }
)
TARGET = Target("site", "Sales/Daily", "shop")
PLAN = Plan(
    "update",
    "2 change(s) since the last publish",
    (APPEND, UPSERT),
    FINGERPRINT,
    TARGET,
    ("Extract.products", "Extract.sales"),
    8,
    batches=(
        Batch(
            (
                Insert(
                    target_table="sales",
                    target_schema="Extract",
                    source_table="sales_7",
                    source_schema="Extract",
                ),
                Upsert(
                    target_table="products",
                    target_schema="Extract",
                    source_table="products_8",
                    source_schema="Extract",
                    condition=Eq("id", source_col="id"),
                ),
            ),
            "payload-0.hyper",
            (SentRows("Extract.sales", "insert", 3), SentRows("Extract.products", "upsert", 2)),
            (APPEND.id, UPSERT.id),
            payload_bytes=65536,
            attempt=1,
            job_id="job-1",
            units=(1, 1),
            requested=True,
        ),
    ),
    payload_bytes=65536,
    started_tracking=False,
    id="feed0000000000000000000000000001",
    database_version=2,
)
FULL_PLAN_OF_OLD = Plan(
    "full",
    "first publish",
    (),
    FINGERPRINT,
    None,
    (),
    0,
    id="feed0000000000000000000000000002",
)
STATE = PublishState(
    TARGET, "ds-1", FINGERPRINT, 2, 8, ("Extract.products", "Extract.sales"), 123456
)
STATE_OF_OLD = PublishState(TARGET, "ds-1", Fingerprint({}), None, 0, None, None)
OUTBOX_STATE = OutboxState(9)
PENDING = (
    PendingKey(
        TableName("Extract", "sales"),
        ForeignKey(("product",), TableName("Extract", "products"), ("id",)),
    ),
)
IDENTITY = "0123456789abcdef0123456789abcdef"


SHA_A, SHA_B = "a" * 64, "b" * 64
MANIFEST_VALUE = Manifest(
    5,
    "tok5tok5tok5",
    "extract0000000000000000000000001",
    "lease00000000000000000000000001",
    (
        StoredFile(
            "shop.hyper",
            3000,
            (
                Part(chunk_key(SHA_A, "tok4tok4tok4"), 0, 2000, SHA_A, "tok4tok4tok4"),
                Part(chunk_key(SHA_B, ""), 2000, 1000, SHA_B, ""),
            ),
        ),
        StoredFile("shop.hyper.outbox/state.json", 0, ()),
    ),
    "2026-03-01T12:30:00+00:00",
)
MANIFEST_OF_FORMAT_2 = Manifest(
    2,
    "tok2tok2tok2",
    "extract0000000000000000000000001",
    "lease00000000000000000000000001",
    (
        StoredFile(
            "shop.hyper",
            3000,
            (
                Part(f"chunks/{SHA_A}", 0, 2000, SHA_A, ""),
                Part(f"chunks/{SHA_B}", 2000, 1000, SHA_B, ""),
            ),
        ),
    ),
    "2025-01-01T00:00:00+00:00",
)
MANIFEST_OF_FORMAT_1 = Manifest(
    1,
    "tok1tok1tok1",
    "extract0000000000000000000000001",
    "lease00000000000000000000000001",
    (
        StoredFile(
            "shop.hyper",
            3000,
            (Part("generations/1-tok1tok1tok1/shop.hyper", 0, 3000, "c" * 64),),
        ),
    ),
    "2024-01-01T00:00:00+00:00",
)
LEASE = LeaseRecord("lease00000000000000000000000001", "pod-a~12", 60.0, False, 3)
CURSOR_FILES = {"a.csv": (1700000000000000000, 12), "b.csv": (1700000000500000000, 0)}
GOLDEN = Path(__file__).parent / "golden"

#: Each format by its folder, and the value of each of its golden files.
FORMATS: dict[str, tuple[SavedFormat[Any], dict[str, object]]] = {
    "outbox_state": (
        OUTBOX_STATE_FORMAT,
        {"v1": OUTBOX_STATE, "v1-unversioned": OUTBOX_STATE},
    ),
    "change_record": (CHANGE_RECORD, {"v1": APPEND, "v1-unversioned": UPSERT}),
    "plan": (
        PLAN_FORMAT,
        {"v1": PLAN, "v1-unversioned": FULL_PLAN_OF_OLD, "v1-empty-target": FULL_PLAN_OF_OLD},
    ),
    "publish_state": (PUBLISH_STATE, {"v1": STATE, "v1-unversioned": STATE_OF_OLD}),
    "pending_keys": (PENDING_RECORD, {"v1": PENDING}),
    "identity": (IDENTITY_RECORD, {"v1": IDENTITY}),
    "deletions": (
        DELETIONS,
        {"v1": Deletions((2049, 131), 500), "v1-unversioned": Deletions((2049, 131), 500)},
    ),
    "publish_holder": (
        HOLDER,
        {
            "v1": Holder(4242, "pod-a", "2026-03-01T12:30:00+00:00"),
            "v1-unversioned": Holder(4242, "pod-a", "2026-03-01T12:30:00+00:00"),
        },
    ),
    "working_copy_marker": (
        MARKER_FORMAT,
        {"v1": Marker(5, "tok5tok5tok5"), "v1-unversioned": Marker(5, "tok5tok5tok5")},
    ),
    "chunk_digests": (
        DIGESTS,
        {
            "v1": Digests(
                5,
                "tok5tok5tok5",
                (
                    (
                        "shop.hyper",
                        ("0123456789abcdef0123456789abcdef", "fedcba9876543210fedcba9876543210"),
                    ),
                    ("shop.hyper.identity.json", ("00112233445566778899aabbccddeeff",)),
                ),
            )
        },
    ),
    "manifest": (
        MANIFEST,
        {"v3": MANIFEST_VALUE, "v2": MANIFEST_OF_FORMAT_2, "v1": MANIFEST_OF_FORMAT_1},
    ),
    "lease": (LEASE_RECORD, {"v1": LEASE, "v1-format-key": LEASE}),
    "landing_cursor": (CURSOR, {"v1": CURSOR_FILES}),
}
GOLDEN_FILES = [(name, golden) for name, (_, files) in FORMATS.items() for golden in files]


def golden_body(name: str, golden: str) -> dict[str, Any]:
    body = json.loads((GOLDEN / name / f"{golden}.json").read_text())
    assert isinstance(body, dict)
    return body


def test_every_format_has_its_golden_files_and_no_golden_file_is_left_out() -> None:
    on_disk = {(p.parent.name, p.stem) for p in GOLDEN.glob("*/*.json")}
    assert on_disk == set(GOLDEN_FILES)
    for name, (saved, files) in FORMATS.items():
        assert f"v{saved.version}" in files, f"{name}: no golden file of the version written"


@pytest.mark.parametrize(("name", "golden"), GOLDEN_FILES)
def test_a_golden_file_reads_as_its_value(name: str, golden: str) -> None:
    saved, files = FORMATS[name]
    assert saved.from_json(golden_body(name, golden), golden) == files[golden]


@pytest.mark.parametrize("name", FORMATS)
def test_the_value_is_written_as_the_golden_file_of_the_version_written(
    name: str, tmp_path: Path
) -> None:
    saved, files = FORMATS[name]
    golden = f"v{saved.version}"
    written = tmp_path / "written.json"
    saved.write(written, files[golden])
    body = json.loads(written.read_text())
    assert body == golden_body(name, golden)
    assert list(body) == list(golden_body(name, golden))  # the version first, fields in order
    assert saved.read(written) == files[golden]


@pytest.mark.parametrize(("name", "golden"), GOLDEN_FILES)
def test_a_field_the_format_does_not_know_is_refused_naming_it(name: str, golden: str) -> None:
    saved, _ = FORMATS[name]
    body = golden_body(name, golden) | {"comment": "added by hand"}
    with pytest.raises(CorruptFileError, match=r"here\.json cannot be read \(field 'comment'"):
        saved.from_json(body, "here.json")


@pytest.mark.parametrize(("name", "golden"), GOLDEN_FILES)
def test_the_next_version_is_unknown_not_corrupt(name: str, golden: str) -> None:
    saved, _ = FORMATS[name]
    newer = max(saved.reads or (saved.version,)) + 1
    body = golden_body(name, golden)
    spelled = [k for k in (saved.key, *saved.older_keys) if k in body] or [saved.key]
    body[spelled[0]] = newer
    with pytest.raises(UnknownFormatVersionError, match=rf"here\.json has format version {newer}"):
        saved.from_json(body, "here.json")


@pytest.mark.parametrize(
    ("name", "path"),
    [
        ("plan", ["batches", 0, "rows", 1]),
        ("plan", ["changes", 0, "window", 1]),
        ("plan", ["fingerprint", "Extract.sales", "columns", 2]),
        ("manifest", ["files", 0, "chunks", 1]),
        ("pending_keys", ["foreign_keys", 0]),
    ],
)
def test_a_field_not_known_deep_inside_is_refused_naming_where(
    name: str, path: list[str | int]
) -> None:
    saved, _ = FORMATS[name]
    body = golden_body(name, f"v{saved.version}")
    inner: Any = body
    for step in path:
        inner = inner[step]
    inner["comment"] = "added by hand"
    where = "".join(f"[{s}]" if isinstance(s, int) else f".{s}" for s in path).lstrip(".")
    with pytest.raises(CorruptFileError, match=rf"field '{re.escape(where)}\.comment'"):
        saved.from_json(body, "here.json")


def test_a_manifest_and_a_cursor_keep_the_spelling_earlier_releases_read() -> None:
    """A worker of an earlier release sharing the home reads `format` (and a sensor's
    cursor `v`): written as `format_version`, it would call a good manifest corrupt."""
    assert golden_body("manifest", "v3")["format"] == 3
    assert golden_body("landing_cursor", "v1")["v"] == 1
    assert {saved.key for saved, _ in FORMATS.values()} == {VERSION_KEY, "format", "v"}


def test_a_change_of_a_newer_version_inside_a_plan_is_unknown_naming_it() -> None:
    body = golden_body("plan", "v1")
    body["changes"][1][VERSION_KEY] = 2
    with pytest.raises(UnknownFormatVersionError, match=r"version 2 \(in field 'changes\[1\]'\)"):
        PLAN_FORMAT.from_json(body, "plan.json")


@pytest.mark.parametrize("name", ["identity", "manifest", "landing_cursor"])
def test_formats_always_written_with_a_version_refuse_one_without(name: str) -> None:
    saved, _ = FORMATS[name]
    body = {k: v for k, v in golden_body(name, f"v{saved.version}").items() if k != saved.key}
    with pytest.raises(CorruptFileError, match=f"field '{saved.key}' is missing") as refused:
        saved.from_json(body, "here.json")
    assert not isinstance(refused.value, UnknownFormatVersionError)


def test_a_field_of_the_wrong_type_is_refused_naming_it() -> None:
    body = golden_body("plan", "v1")
    body["batches"][0]["attempt"] = "1"
    with pytest.raises(
        CorruptFileError, match=r"field 'batches\[0\]\.attempt' is '1', not a whole"
    ):
        PLAN_FORMAT.from_json(body, "plan.json")
