"""Internal: the one place where Hyper's `HyperException` becomes an error of our tree.

As httpx maps its transport's errors, code that talks to Hyper runs inside
`hyper_errors(file=..., table=...)`: a `HyperException` leaves it as the
`HyperFileError` that says what happened (the table or file missing, the file locked or
corrupt), naming the file and the table, with Hyper's words quoted. Boundaries nest:
the catalog knows the table, `HyperResource.open` the file, and an error mapped inside
gets the file filled in on its way out. A load into a table (`ingest.write_table`) runs
inside `load_errors`, which tells the data's faults from the file's; and `is_locked`
and `is_unreachable` read the messages others retry on.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from tableauhyperapi import HyperException, TableName

from hyper_assets._engine.sql import table_label, user_names
from hyper_assets.errors import (
    CorruptDatabaseError,
    DatabaseLockedError,
    HyperAssetsError,
    HyperFileError,
    IngestError,
    InvalidGeographyError,
    KeyTypeError,
    NullInNotNullColumnError,
    TableNotFoundError,
    UnsupportedTypeError,
)

_LOCKED = "locked by another process"


def is_locked(error: HyperException) -> bool:
    """Whether Hyper refused the file because another process has it open."""
    return _LOCKED in str(error)


def is_unreachable(error: HyperException) -> bool:
    """Whether nothing accepts a connection at the hyperd's endpoint (it died)."""
    return "Could not connect to the Hyper server" in str(error)


_MISSING = re.compile(r"\b(table|schema)\b[^:]* does not exist|the database does not exist")
_CORRUPT = re.compile(r"could not load database|not a Hyper database|file is truncated")


def _kind(words: str) -> tuple[type[HyperFileError], str]:
    """The class of our tree for Hyper's message, and what to do about it."""
    if _LOCKED in words:
        return DatabaseLockedError, (
            "Another program (Tableau Desktop, another Hyper process) has the file open: "
            "close it there and try again."
        )
    if _MISSING.search(words):
        return TableNotFoundError, (
            "Materialise the asset that writes it first, or fix the name that refers to it."
        )
    if _CORRUPT.search(words):
        return CorruptDatabaseError, (
            "It is not a .hyper file Hyper can read (truncated or damaged): restore it, or "
            "remove it and materialise its assets again."
        )
    return HyperFileError, ""


def as_error(
    error: HyperException,
    *,
    file: str | Path | None = None,
    table: TableName | None = None,
    otherwise: type[HyperFileError] = HyperFileError,
    advice: str = "",
    way_out: str = "",
) -> HyperFileError:
    """`error` as an error of our tree: `otherwise` when Hyper's message says nothing more
    specific than that the statement failed; `advice` (what the failure left) ends it, then
    `way_out` if given, else the general way out of its kind (a locked file, a missing
    table, a damaged file)."""
    first = next(iter((error.main_message or str(error)).strip().splitlines()), "")
    words = user_names(first.strip().rstrip(".:"))
    kind, general = _kind(words)
    said = way_out or general
    if kind is HyperFileError:
        kind = otherwise
    label = table_label(table) if table is not None else None
    where = ", ".join(filter(None, [_text(file), label and f"table {label}"]))
    text = " ".join(filter(None, [f"Hyper said: {words}.", advice, said]))
    return kind(f"{where}: {text}" if where else text, file=_text(file), table=label)


@contextmanager
def hyper_errors(
    *,
    file: str | Path | None = None,
    table: TableName | None = None,
    otherwise: type[HyperFileError] = HyperFileError,
    advice: str = "",
    way_out: str = "",
) -> Iterator[None]:
    """Runs the block; a `HyperException` leaves it as `as_error(...)`, and a
    `HyperFileError` that does not know its file yet learns `file`."""
    try:
        yield
    except HyperException as error:
        raise as_error(
            error, file=file, table=table, otherwise=otherwise, advice=advice, way_out=way_out
        ) from error
    except HyperFileError as error:
        if error.file is None and file is not None:
            error.file = _text(file)
        raise


@contextmanager
def load_errors(table: TableName) -> Iterator[None]:
    """Runs a load into `table`; a `HyperException` leaves it as the error that says
    whose fault it is: `NullInNotNullColumnError` (a NULL for a NOT NULL column) and
    `InvalidGeographyError` (a value that is not well-known text), which the loader names
    the culprits of; `KeyTypeError` (key columns of types Hyper does not compare, which
    `hyper_assets._engine.key_types` refuses before, naming them); `UnsupportedTypeError`
    (the file's format version older than a column's type needs); else `as_error` (an
    `IngestError`, or what Hyper's words say).
    Each says that the table's rows are unchanged."""
    try:
        yield
    except HyperException as error:
        raise _load_error(error, table) from error


def _load_error(error: HyperException, table: TableName) -> HyperAssetsError:
    text = str(error)
    unloaded = as_error(error, table=table, otherwise=IngestError, advice="Its rows are unchanged.")
    if "non-NULL value required" in text:
        return NullInNotNullColumnError(str(unloaded))
    if "invalid geography" in text:
        return InvalidGeographyError(str(unloaded))
    if "type mismatch when referencing primary key" in text:
        return KeyTypeError(
            f"{table_label(table)}: a foreign key's columns and the primary key they "
            "reference are of types Hyper does not compare (numbers, text, and dates and "
            "times compare only among themselves); its rows are unchanged. Cast the key "
            "columns in the asset to the types of the key they reference. Hyper said: "
            f"{user_names(text.strip().splitlines()[0])}",
            column="",
        )
    if "128-bit numerics" in text or "32-bit floating" in text.lower():
        return UnsupportedTypeError(
            f"{table_label(table)}: the existing .hyper file has an older format version than "
            "these columns need, and a file keeps the version it was created with. Upgrade it "
            "with hyper_assets.upgrade_database(path, version=...) (HyperIOManager does so "
            f"itself), or narrow the columns. Hyper said: {text.strip()}"
        )
    return unloaded


def _text(file: str | Path | None) -> str | None:
    return None if file is None else str(file)
