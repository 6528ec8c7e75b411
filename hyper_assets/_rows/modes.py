"""How a write changes its table: the value the ingest engine, the outbox and the publish
share (`hyper_assets._dagster.spec` reads it from an asset's metadata)."""

from __future__ import annotations

from enum import StrEnum


class WriteMode(StrEnum):
    """How a write changes its table (shared by the ingest engine and the outbox)."""

    REPLACE = "replace"  # full refresh
    PARTITION = "partition"  # the partition's rows replaced
    APPEND = "append"
    UPSERT = "upsert"  # rows whose primary key arrives replaced, the rest inserted


#: The write modes metadata may declare; the others follow from the partitioning.
DECLARED_MODES = (WriteMode.APPEND, WriteMode.UPSERT)
