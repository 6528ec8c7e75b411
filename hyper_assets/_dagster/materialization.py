"""What a write through `HyperIOManager` reports to Dagster: the materialisation's metadata
(Dagster's table vocabulary, the rows written, the extract's identity) and each backfilled
partition's own row count."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

from dagster import (
    MetadataValue,
    OutputContext,
    TableColumn,
    TableColumnConstraints,
    TableSchema,
)
from tableauhyperapi import Connection

from hyper_assets._dagster.compat import add_partition_metadata
from hyper_assets._dagster.identity import identity_metadata
from hyper_assets._dagster.partitions import RANGE_ROW_COUNT, partition_counts
from hyper_assets._dagster.target import Partitions, Target
from hyper_assets._engine.compaction import CompactResult
from hyper_assets._engine.tables import table_label
from hyper_assets._engine.types import Column, describe
from hyper_assets._engine.upgrade import VersionUpgrade
from hyper_assets._rows.ingest import Write, WriteResult

PartitionCounter = Callable[[Connection], dict[str, int]]


def _table_metadata(
    write: Write, declared: object, local_path: Path, uri: str, identity: str
) -> dict[str, Any]:
    """Dagster's table vocabulary: the qualified name, the file's URI, columns and keys, and
    the extract's identity (`hyper_assets._dagster.identity`).

    Column descriptions come from the asset's own `dagster/column_schema`, if any.
    """
    path = local_path.absolute()
    return {
        "dagster/table_name": f"{path.stem}.{table_label(write.table)}",
        "dagster/uri": MetadataValue.url(uri),
        "dagster/column_schema": column_schema(write, declared),
        "dagster/storage_kind": "hyper",
        "database": MetadataValue.path(str(path)),
        "file_size_bytes": path.stat().st_size,
    } | identity_metadata(identity, uri)


@dataclass(frozen=True)
class Written:
    """A write's result, the table's rows after it and the rows of the window written (the
    table's, unpartitioned), each backfilled partition's rows, the compaction it was
    followed by, the file's upgrade it needed and the extract's identity."""

    result: WriteResult
    table_rows: int
    window_rows: int
    partition_rows: dict[str, int]
    compacted: CompactResult | None
    upgraded: VersionUpgrade | None
    identity: str


def output_metadata(
    write: Write,
    written: Written,
    target: Target,
    declared: object,
    local_path: Path,
    uri: str,
    seconds: tuple[float, float],
    transfer: dict[str, str],
) -> dict[str, Any]:
    """The metadata of `write`'s materialisation: its table (`_table_metadata`, with the
    asset's `declared` column schema), the rows of the table and of the partitions
    written, the rows loaded in the step's staging and loading `seconds`, its mode and
    `transfer`, and the keys it retyped, the compaction and the upgrade it brought."""
    result = written.result
    counts = {"dagster/row_count": written.table_rows}
    if target.partitions is not None:
        counts[_partition_count_key(target.partitions)] = written.window_rows
    stage_seconds, load_seconds = seconds
    return (
        _table_metadata(write, declared, local_path, uri, written.identity)
        | counts
        | {
            "rows_loaded": result.rows_loaded,
            "stage_seconds": round(stage_seconds, 3),
            "load_seconds": round(load_seconds, 3),
            "write_mode": write.mode.value,
        }
        | transfer
        | ({"retyped_keys": list(result.retyped_keys)} if result.retyped_keys else {})
        | ({"compacted": str(written.compacted)} if written.compacted else {})
        | ({"database_version_upgraded": str(written.upgraded)} if written.upgraded else {})
    )


def _partition_count_key(partitions: Partitions) -> str:
    """Rows of the one partition written, or of a backfilled range of them."""
    if len(partitions.keys) == 1:
        return "dagster/partition_row_count"
    return RANGE_ROW_COUNT


def range_counter(target: Target, columns: list[Column]) -> PartitionCounter | None:
    """Counts each partition of a backfilled range; None for one partition or none."""
    partitions = target.partitions
    if partitions is None or len(partitions.keys) == 1:
        return None
    return partial(
        partition_counts,
        table=target.spec.table,
        definition=partitions.definition,
        keys=partitions.keys,
        partition_expr=target.spec.partition_expr,
        columns=columns,
        asset=target.spec.label,
    )


def report_partition_rows(context: OutputContext, counts: Mapping[str, int]) -> None:
    """Each backfilled partition's own row count, on that partition's materialisation.

    Dagster takes metadata for one partition of a ranged run only through the step's
    `add_asset_metadata(partition_key=...)`, public on the asset's context; an IO manager
    reaches it through its private step (`hyper_assets._dagster.compat`). Where it cannot
    (a context built outside a run), the range's total is all that is reported, and the
    log says so.
    """
    for key, rows in counts.items():
        if not add_partition_metadata(context, key, {"dagster/partition_row_count": rows}):
            context.log.info(
                f"Each partition's own row count is not reported ({len(counts)} partitions): "
                "this context has no step to take it, only the range's total."
            )
            return


def column_schema(write: Write, declared: object = None) -> TableSchema:
    """The columns, NOT NULL, each column's key roles (as constraints) and description."""
    primary = write.keys.primary_key
    described = (
        {c.name: c.description for c in declared.columns}
        if isinstance(declared, TableSchema)
        else {}
    )

    def roles(name: str) -> list[str]:
        found = [f"primary key ({', '.join(primary)})"] if name in primary else []
        return found + [
            f"foreign key -> {table_label(fk.ref_table)}.{fk.ref_columns[fk.columns.index(name)]}"
            for fk in write.keys.foreign_keys
            if name in fk.columns
        ]

    return TableSchema(
        columns=[
            TableColumn(
                c.name,
                describe(c),
                description=described.get(c.name),
                constraints=TableColumnConstraints(
                    nullable=c.nullable, unique=primary == (c.name,), other=roles(c.name)
                ),
            )
            for c in write.columns
        ]
    )
