"""Internal: a frame an asset returns, of whichever kind: its columns as Hyper's, and its
rows staged for Hyper to load.

Per kind only these differ. A Spark DataFrame's rows are Parquet parts written by the
executors, or rows streamed through Spark Connect (`hyper_assets._rows.transfer`,
imported only when a Spark frame is met, as pyspark is); any frame exporting an Arrow
stream becomes one Parquet file (`hyper_assets._rows.frames`, `hyper_assets._rows.staging`).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, cast

import pyarrow as pa

from hyper_assets._engine.types import Column, columns_from_arrow, columns_from_spark
from hyper_assets._rows.frames import arrow_stream, is_spark_frame
from hyper_assets._rows.staging import (
    Staged,
    StagingArea,
    StagingMode,
    is_arrow_stream,
    stage_arrow,
)

if TYPE_CHECKING:
    from pyspark.sql import DataFrame as SparkDataFrame


@dataclass(frozen=True)
class OutputFrame:
    """A Spark DataFrame, or the Arrow stream of any other frame."""

    rows: SparkDataFrame | pa.RecordBatchReader

    @classmethod
    def of(cls, obj: object) -> OutputFrame | None:
        """`obj` as a frame to store; None when it is of no kind stored."""
        if is_spark_frame(obj):
            return cls(cast("SparkDataFrame", obj))
        stream = arrow_stream(obj)
        return None if stream is None else cls(stream)

    def columns(self, label: str, version: int, cap: int) -> list[Column]:
        """The frame's columns as Hyper's, for a file of `version` (at most `cap`)."""
        if isinstance(self.rows, pa.RecordBatchReader):
            return columns_from_arrow(self.rows.schema, label, version, cap)
        return columns_from_spark(self.rows.schema, label, version, cap)

    def stage(
        self,
        mode: StagingMode,
        area: StagingArea,
        directory: Path,
        compression: str,
        label: str,
    ) -> tuple[Staged, dict[str, str]]:
        """The rows staged under `directory` (a Spark frame's the way `mode` resolves), and
        how they were staged, as metadata."""
        if isinstance(self.rows, pa.RecordBatchReader):
            return stage_arrow(self.rows, directory, compression, label), {}
        from hyper_assets._rows.transfer import resolve_mode, stage

        resolved = resolve_mode(mode, self.rows.sparkSession, area, label)
        staged = stage(self.rows, resolved, area, directory, compression, label)
        transfer = {"staging_mode": resolved.value}
        if staged.files:  # an empty frame stages nothing
            arrows = is_arrow_stream(staged.files[0])
            transfer["staged_format"] = "arrow stream" if arrows else "parquet"
        return staged, transfer
