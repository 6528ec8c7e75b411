"""`HyperIOManager`: Dagster assets as tables of one star-schema `.hyper` file.

Per frame type only staging and loading differ (Spark: Parquet parts written by the
executors, or rows streamed through Spark Connect, `hyper_assets.transfer`; any frame
exporting an Arrow stream: one Parquet file, `hyper_assets.frames`); the Hyper side is the
ingest engine's.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any, TypeVar

from dagster import (
    AssetsDefinition,
    ConfigurableIOManager,
    DagsterLogManager,
    InitResourceContext,
    InputContext,
    MetadataValue,
    OutputContext,
    TableColumn,
    TableColumnConstraints,
    TableSchema,
)
from pydantic import Field, PrivateAttr, model_validator
from pyspark.sql import DataFrame as SparkDataFrame
from tableauhyperapi import Connection, TableName, escape_string_literal

from hyper_assets._sql import count_rows, transaction
from hyper_assets.compaction import AutoCompact, CompactResult, compact_if_wasteful
from hyper_assets.errors import (
    CompactionError,
    ConfigurationError,
    DatabaseLockedError,
    TableNotFoundError,
)
from hyper_assets.frames import arrow_stream, python_loader
from hyper_assets.geography import as_geography
from hyper_assets.home import HomeSettings, HyperDatabase, parse_home
from hyper_assets.ingest import Write, WriteResult, write_table
from hyper_assets.outbox import Outbox
from hyper_assets.partitions import RANGE_ROW_COUNT, Window, partition_counts, partition_window
from hyper_assets.preflight import check_database_path, check_frame
from hyper_assets.resource import HyperResource
from hyper_assets.spark import active_session, restore_types
from hyper_assets.spec import TableSpec, WriteMode, input_columns
from hyper_assets.staging import (
    S3Staging,
    Staged,
    StagingArea,
    is_arrow_stream,
    parse_root,
    stage_arrow,
)
from hyper_assets.tables import Catalog, table_label
from hyper_assets.transfer import StagingMode, resolve_mode, stage, to_spark
from hyper_assets.types import (
    Column,
    columns_from_arrow,
    columns_from_spark,
    describe,
    export_sql,
    needed_version,
)
from hyper_assets.upgrade import VersionUpgrade, file_for_write

_log = logging.getLogger(__name__)


class HyperIOManager(ConfigurableIOManager):
    """Stores each asset as table `"schema"."table"` of one `.hyper` file.

    Asset metadata steers the write: `partition_expr` (partitioned assets),
    `write_mode` ("append" or "upsert"), `primary_key`, `foreign_keys`,
    `schema_evolution="add_columns"`, `geography_columns`, and `schema` / `table` to
    override the names taken from the asset key.
    """

    database: str = Field(
        description="The .hyper file every asset is a table of: a path, or an object-store "
        "URI (s3://bucket/path/shop.hyper, configured from the AWS environment) for runs "
        "that share no disk."
    )
    hyper: HyperResource = Field(
        default_factory=HyperResource, description="The Hyper process settings."
    )
    default_schema: str = Field(
        default="Extract", description="Schema of assets whose key has one part."
    )
    staging_dir: str | None = Field(
        default=None,
        description="Where Spark writes Parquet for Hyper to load: a directory (a path or "
        "file:// URI) both the Spark executors and this process see (a shared file system "
        "on a cluster), or a store both reach (s3://, gs://, abfss://, hdfs://; files are "
        "copied through pyarrow). Default: a local temp directory.",
    )
    staging_s3: S3Staging | None = Field(
        default=None,
        description="Credentials and endpoint this process uses for an s3:// staging_dir "
        "(default: the AWS chain). Spark uses its own (fs.s3a.* settings).",
    )
    staging_mode: StagingMode = Field(
        default=StagingMode.AUTO,
        description="How Spark rows reach Hyper: 'shared' (Spark writes Parquet into "
        "staging_dir, checked to hold every row), 'stream' (Arrow batches through the "
        "Spark Connect channel; nothing shared with the cluster) or 'auto' (shared when "
        "Spark can read staging_dir, else stream).",
    )
    staging_compression: str = Field(
        default="snappy",
        description="Parquet compression of staged files. 'snappy' (default) halves the "
        "staged bytes and Spark's memory at no measurable cost here; 'none' and 'zstd' "
        "also work.",
    )
    auto_compact: AutoCompact | None = Field(
        default_factory=AutoCompact,
        description="When to compact the file after a write that deleted or replaced rows "
        "(Hyper reuses their space only in part); None: never, call compact() yourself.",
    )

    home_settings: HomeSettings = Field(
        default_factory=HomeSettings,
        description="For an object-store database: where a run keeps its working copy, "
        "and how long a writer's lease lasts.",
    )

    _staging: StagingArea | None = PrivateAttr(default=None)
    _home: HyperDatabase | None = PrivateAttr(default=None)

    @model_validator(mode="after")
    def _known_store(self) -> HyperIOManager:
        # An unknown scheme, or staging_s3 without s3://, fails at definition, not at the
        # first write; nothing connects to the store here.
        parse_home(self.database)
        if self.staging_dir or self.staging_s3:
            parse_root(self.staging_dir or "", self.staging_s3)
        return self

    @property
    def staging(self) -> StagingArea:
        if self._staging is None:
            self._staging = StagingArea(self.staging_dir, self.staging_s3)
        return self._staging

    @property
    def home(self) -> HyperDatabase:
        """Where the file lives, and the file Hyper opens in this run (`local_path`)."""
        if self._home is None:
            self._home = HyperDatabase(
                database=self.database, hyper=self.hyper, settings=self.home_settings
            )
        return self._home

    def setup_for_execution(self, context: InitResourceContext) -> None:
        if isinstance(parse_home(self.database), Path):
            check_database_path(self.database)  # before the step's Spark work, not after

    def teardown_after_execution(self, context: InitResourceContext) -> None:
        self.staging.release()
        self.hyper.close()

    def spec_for(
        self, asset_key_path: Sequence[str], metadata: Mapping[str, Any] | None
    ) -> TableSpec:
        """What an asset's definition metadata says about its table (`TableSpec.parse`)."""
        return TableSpec.parse(asset_key_path, metadata, self.default_schema)

    def handle_output(self, context: OutputContext, obj: object) -> None:
        if obj is None:
            return
        spec = self.spec_for(context.asset_key.path, context.definition_metadata)
        table, label = spec.table, spec.label
        version, cap = self.hyper.default_database_version, self.hyper.max_database_version
        stream = None if isinstance(obj, SparkDataFrame) else arrow_stream(obj)
        if isinstance(obj, SparkDataFrame):
            columns = columns_from_spark(obj.schema, label, version, cap)
        elif stream is not None:
            columns = columns_from_arrow(stream.schema, label, version, cap)
        else:
            raise ConfigurationError(
                f"Asset {label} returned a {type(obj).__name__}; HyperIOManager stores "
                "pyspark.sql.DataFrame and any frame that exports an Arrow stream "
                "(pyarrow, pandas 2.2+, polars, DuckDB results)."
            )
        columns = as_geography(columns, spec.geography, label)
        check_frame(context.asset_key.to_user_string(), spec, columns, context.has_asset_partitions)
        write = Write(
            table,
            columns,
            spec.write_mode(context.has_asset_partitions),
            spec.keys,
            self._window(context, spec, columns),
            add_columns=spec.add_columns,
        )
        started = time.perf_counter()
        with self.staging.directory("write") as directory:
            if isinstance(obj, SparkDataFrame):
                mode = resolve_mode(self.staging_mode, obj.sparkSession, self.staging, label)
                staged = stage(obj, mode, self.staging, directory, self.staging_compression, label)
                transfer = {"staging_mode": mode.value}
                if staged.files:  # an empty frame stages nothing
                    arrows = is_arrow_stream(staged.files[0])
                    transfer["staged_format"] = "arrow stream" if arrows else "parquet"
            else:
                staged = stage_arrow(stream, directory, self.staging_compression)
                transfer = {}
            loading = time.perf_counter()
            written = self._write(
                write, staged, _range_counter(context, spec, columns), context.log
            )
        result = written.result
        for note in result.notes:
            context.log.warning(note)
        context.log.info(
            f"Wrote {label} ({write.mode.value}): {result.rows_loaded} rows in "
            f"{time.perf_counter() - started:.1f} s, into {self.database}"
        )
        counts = {"dagster/row_count": written.table_rows}
        if context.has_asset_partitions:
            counts[_partition_count_key(context)] = written.window_rows
        _report_partition_rows(context, written.partition_rows)
        context.add_output_metadata(
            self._metadata(write, (context.definition_metadata or {}).get("dagster/column_schema"))
            | counts
            | {
                "rows_loaded": result.rows_loaded,
                "stage_seconds": round(loading - started, 3),
                "load_seconds": round(time.perf_counter() - loading, 3),
                "write_mode": write.mode.value,
            }
            | transfer
            | ({"compacted": str(written.compacted)} if written.compacted else {})
            | ({"database_version_upgraded": str(written.upgraded)} if written.upgraded else {})
        )

    def _write(
        self,
        write: Write,
        staged: Staged,
        count_partitions: _PartitionCounter | None,
        log: DagsterLogManager,
    ) -> _Written:
        """Makes `write` in a file of the version its columns need, counts what it left and
        compacts if that pays, in one lock hold (on an object-store home: one lease,
        committed as the next generation)."""
        with self.home.writing() as database:
            needed = needed_version(write.columns)
            make = partial(write_table, write=write, staged=staged)
            with (
                file_for_write(self.hyper, database, needed) as upgraded,
                self._recorded(write, staged, make) as (connection, result),
            ):
                rows = count_rows(connection, write.table)
                window_rows = count_rows(connection, write.table, write.where)
                partition_rows = count_partitions(connection) if count_partitions else {}
            if upgraded:
                log.info(f"Upgraded {self.database} to file format version {upgraded}")
            compacted = self._compact_if_wasteful(result.rows_deleted, log)
        return _Written(result, rows, window_rows, partition_rows, compacted, upgraded)

    @contextmanager
    def _recorded(
        self, write: Write, staged: Staged, make: Callable[[Connection], _T]
    ) -> Iterator[tuple[Connection, _T]]:
        """`make(connection)` makes `write` (of the `staged` rows), recorded for the next
        publish; the block gets the connection, still open, and what `make` returned.

        The caller holds the database's lock. A `make` that raises made no change and leaves
        no record; a crash leaves its record pending, settled by the next writer or
        publisher (`hyper_assets.outbox`).
        """
        outbox = Outbox(self.home.local_path)
        with self.hyper.open(self.home.local_path) as connection:
            outbox.settle(connection)
            with outbox.recording(connection, write, staged) as change:
                made = make(connection)
            yield connection, made
        if change:
            outbox.commit(change)

    def delete_partitions(self, asset: AssetsDefinition, partition_keys: Sequence[str]) -> int:
        """Deletes the rows of `partition_keys` of the partitioned `asset`; the rows deleted.

        For rolling windows: drop the oldest days. The next publish deletes them on the
        server too.
        """
        label = asset.key.to_user_string()
        if asset.partitions_def is None:
            raise ConfigurationError(f"Asset {label} is not partitioned: it has no partitions.")
        spec = self.spec_for(asset.key.path, asset.metadata_by_key.get(asset.key))
        table = spec.table
        with self.home.writing() as database:
            with self.hyper.open(database, create=False) as connection:
                columns = self._stored_columns(connection, table, label)
            window = partition_window(
                asset.partitions_def, partition_keys, spec.partition_expr, columns, spec.label
            )
            write = Write(table, columns, WriteMode.PARTITION, window=window)
            delete = partial(_delete, table=table, window=window)
            nothing = Staged((), 0)  # a delete stages no rows
            with self._recorded(write, nothing, delete) as (_, deleted):
                pass  # the rows are deleted; the connection closes, durably
            self._compact_if_wasteful(deleted, _log)
        return deleted

    def _compact_if_wasteful(
        self, deleted_rows: int, log: logging.Logger | DagsterLogManager
    ) -> CompactResult | None:
        """Compacts the file when `auto_compact` says it pays (the caller holds its lock).

        A failure is a warning: the rows written are durable, and a failed compaction
        leaves the file's rows as they were.
        """
        if self.auto_compact is None:
            return None
        try:
            result = compact_if_wasteful(
                self.hyper, self.home.local_path, deleted_rows, self.auto_compact
            )
        except (DatabaseLockedError, CompactionError) as error:
            log.warning(f"{error} (The write itself is complete.)")
            return None
        if result:
            log.info(f"Compacted {self.database}: {result}")
        return result

    def _stored_columns(self, connection: Connection, table: TableName, asset: str) -> list[Column]:
        catalog = Catalog(connection)
        if not catalog.exists(table):
            raise TableNotFoundError(
                f"Table {table_label(table)} is not in {self.database}: materialise asset "
                f"{asset} first."
            )
        return catalog.columns(table)

    def _window(
        self, context: OutputContext | InputContext, spec: TableSpec, columns: list[Column]
    ) -> Window | None:
        if not context.has_asset_partitions:
            return None
        return partition_window(
            context.asset_partitions_def,
            context.asset_partition_keys,
            spec.partition_expr,
            columns,
            spec.label,
        )

    def _metadata(self, write: Write, declared: object) -> dict[str, Any]:
        """Dagster's table vocabulary: the qualified name, the file's URI, columns and keys.

        Column descriptions come from the asset's own `dagster/column_schema`, if any.
        """
        path = self.home.local_path.absolute()
        return {
            "dagster/table_name": f"{path.stem}.{table_label(write.table)}",
            "dagster/uri": MetadataValue.url(self.home.uri),
            "dagster/column_schema": _column_schema(write, declared),
            "dagster/storage_kind": "hyper",
            "database": MetadataValue.path(str(path)),
            "file_size_bytes": path.stat().st_size,
        }

    def load_input(self, context: InputContext) -> object:
        upstream = context.upstream_output
        spec = self.spec_for(context.asset_key.path, upstream and upstream.definition_metadata)
        table, label = spec.table, spec.label
        wanted = input_columns(context.definition_metadata, label)
        load_python = python_loader(context.dagster_type.typing_type)
        if load_python is None:  # before the export: a session that cannot load it fails first
            session = active_session(label)
            mode = resolve_mode(self.staging_mode, session, self.staging, label)
        path = self.staging.keep("load") / "table.parquet"
        with (
            self.home.reading() as database,
            self.hyper.connect(database, create=False) as connection,
        ):
            stored = self._stored_columns(connection, table, context.asset_key.to_user_string())
            columns = _select(stored, wanted, label)
            window = self._window(context, spec, stored)
            select = ", ".join(export_sql(c) for c in columns)
            query = f"SELECT {select} FROM {table}" + (f" WHERE {window.sql}" if window else "")
            connection.execute_command(
                f"COPY ({query}) TO {escape_string_literal(str(path))} WITH (FORMAT => 'parquet')"
            )
        if load_python is not None:
            return load_python(path)
        return restore_types(to_spark(session, self.staging, path, mode, label), columns)


_PartitionCounter = Callable[[Connection], dict[str, int]]
_T = TypeVar("_T")


def _delete(connection: Connection, table: TableName, window: Window) -> int:
    """Deletes the rows of `window`, in a transaction of its own; how many."""
    with transaction(connection):
        return connection.execute_command(f"DELETE FROM {table} WHERE {window.sql}")


@dataclass(frozen=True)
class _Written:
    """A write's result, the table's rows after it and the rows of the window written (the
    table's, unpartitioned), each backfilled partition's rows, the compaction it was
    followed by and the file's upgrade it needed."""

    result: WriteResult
    table_rows: int
    window_rows: int
    partition_rows: dict[str, int]
    compacted: CompactResult | None
    upgraded: VersionUpgrade | None


def _range_counter(
    context: OutputContext, spec: TableSpec, columns: list[Column]
) -> _PartitionCounter | None:
    """Counts each partition of a backfilled range; None for one partition or none."""
    if not context.has_asset_partitions or len(context.asset_partition_keys) == 1:
        return None
    return partial(
        partition_counts,
        table=spec.table,
        definition=context.asset_partitions_def,
        keys=context.asset_partition_keys,
        partition_expr=spec.partition_expr,
        columns=columns,
        asset=spec.label,
    )


def _report_partition_rows(context: OutputContext, counts: Mapping[str, int]) -> None:
    """Each backfilled partition's own row count, on that partition's materialisation.

    Dagster takes metadata for one partition of a ranged run only through the step's
    `add_asset_metadata(partition_key=...)`, public on the asset's context; an IO manager
    reaches the same step as `OutputContext.step_context`, which Dagster does not mark
    public. Hence dagster is pinned to 1.13.x, and both ends of that range are tested.
    """
    for key, rows in counts.items():
        context.step_context.add_asset_metadata(
            {"dagster/partition_row_count": rows},
            asset_key=context.asset_key,
            partition_key=key,
        )


def _partition_count_key(context: OutputContext) -> str:
    """Rows of the one partition written, or of a backfilled range of them."""
    if len(context.asset_partition_keys) == 1:
        return "dagster/partition_row_count"
    return RANGE_ROW_COUNT


def _column_schema(write: Write, declared: object = None) -> TableSchema:
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


def _select(columns: list[Column], wanted: tuple[str, ...] | None, label: str) -> list[Column]:
    if not wanted:
        return columns
    by_name = {c.name: c for c in columns}
    missing = [w for w in wanted if w not in by_name]
    if missing:
        raise ConfigurationError(
            f"Input metadata columns asks for {missing} of {label}, which has "
            f"{list(by_name)}. Fix the names in AssetIn(metadata={{'columns': [...]}})."
        )
    return [by_name[w] for w in wanted]
