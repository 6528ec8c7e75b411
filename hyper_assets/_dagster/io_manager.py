"""`HyperIOManager`: Dagster assets as tables of one star-schema `.hyper` file.

It turns Dagster's contexts into writes and loads of tables. An output's frame is mapped
and staged as its kind needs (`hyper_assets._rows.output_frames`), written in one hold of
the file's lock (`hyper_assets._dagster.writer`) and reported to Dagster
(`hyper_assets._dagster.materialization`). An input is exported by Hyper to Parquet and
read as its annotation's type (`hyper_assets._rows.frames`; Spark through
`hyper_assets._rows.transfer`). pyspark is imported only when a Spark frame or a Spark
input is met.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from dagster import (
    AssetsDefinition,
    ConfigurableIOManager,
    InitResourceContext,
    InputContext,
    OutputContext,
)
from pydantic import (
    Field,
    ModelWrapValidatorHandler,
    PrivateAttr,
    field_validator,
    model_validator,
)

from hyper_assets._base.env import changed, from_env
from hyper_assets._base.optional import require
from hyper_assets._dagster.compat import dagster_type, input_name, op_name
from hyper_assets._dagster.identity import loaded_records, read_identity, require_same, write_guard
from hyper_assets._dagster.materialization import (
    output_metadata,
    range_counter,
    report_partition_rows,
)
from hyper_assets._dagster.partitions import partition_window
from hyper_assets._dagster.preflight import check_database_path, check_frame, check_key_types
from hyper_assets._dagster.spec import (
    DEFAULT_SCHEMA,
    TableSpec,
    dtype_backend,
    input_columns,
    input_dtype_backend,
)
from hyper_assets._dagster.target import Target, input_target, output_target
from hyper_assets._dagster.writer import FileWriter
from hyper_assets._engine.compaction import AutoCompact
from hyper_assets._engine.resource import HyperResource
from hyper_assets._engine.tables import Catalog
from hyper_assets._engine.types import Column
from hyper_assets._home.home import HomeSettings, HyperDatabase, check_home
from hyper_assets._rows.frames import DtypeBackend, is_pandas, is_spark_annotation, python_loader
from hyper_assets._rows.geography import as_geography
from hyper_assets._rows.ingest import Write
from hyper_assets._rows.loading import (
    export_no_columns,
    export_parquet,
    select_columns,
    stored_columns,
)
from hyper_assets._rows.modes import WriteMode
from hyper_assets._rows.output_frames import OutputFrame
from hyper_assets._rows.staging import (
    RemoteRoot,
    S3Staging,
    StagingArea,
    StagingMode,
    parse_root,
)
from hyper_assets._rows.window import Window
from hyper_assets.errors import ConfigurationError, OutputError

_log = logging.getLogger(__name__)


class HyperIOManager(ConfigurableIOManager):
    """Stores each asset as table `"schema"."table"` of one `.hyper` file, and each op's
    output as `"schema"."<output name>"` (`hyper_assets._dagster.target`).

    Asset metadata steers the write: `partition_expr` (partitioned assets),
    `write_mode` ("append" or "upsert"), `primary_key`, `foreign_keys`,
    `schema_evolution="add_columns"`, `geography_columns`, and `schema` / `table` to
    override the names taken from the asset key.

    `database` is the file's path or URI, or a `HyperDatabase` resource
    (`HyperIOManager(database=HyperDatabase(...))`) that the checks and the publish can
    take too (`database_key=`); the IO manager alone serves them as well.

    A setting that would be ignored is refused when the IO manager is defined: `hyper` or
    `home_settings` beside a `HyperDatabase` (it has its own), `home_settings` for a
    local path, a store's settings for another store, and a remote `staging_dir` with
    `staging_mode="stream"`.
    """

    database: str = Field(
        default="",
        description="The .hyper file every asset is a table of: a path, or an object-store "
        "URI (s3://bucket/path/shop.hyper, configured from the AWS environment) for runs "
        "that share no disk. Empty when hyper_database is given.",
    )
    hyper_database: HyperDatabase | None = Field(
        default=None,
        description="The file's home as a resource of its own (with its Hyper settings and "
        "home settings), shared with the checks and the publish; "
        "HyperIOManager(database=HyperDatabase(...)) sets it.",
    )
    hyper: HyperResource = Field(
        default_factory=HyperResource,
        description="The Hyper process settings; not with a hyper_database, which has its own.",
    )
    default_schema: str = Field(
        default=DEFAULT_SCHEMA, description="Schema of assets whose key has one part."
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

    dtype_backend: DtypeBackend = Field(
        default="pyarrow",
        description="How pandas inputs hold their columns, as pandas' dtype_backend: "
        "'pyarrow' (pd.ArrowDtype; the default) or 'numpy_nullable' (Int64, Float64, "
        "boolean, string, datetime64; pd.ArrowDtype where NumPy has no type: date, time, "
        "decimal, bytes). Both keep every value; input metadata dtype_backend overrides it "
        "for one input (docs/types.md).",
    )
    home_settings: HomeSettings = Field(
        default_factory=HomeSettings,
        description="For an object-store database: where a run keeps its working copy, "
        "and how long a writer's lease lasts. Not for a local path, nor with a "
        "hyper_database, which has its own.",
    )

    _staging: StagingArea | None = PrivateAttr(default=None)
    _home: HyperDatabase | None = PrivateAttr(default=None)

    @field_validator("dtype_backend", mode="before")
    @classmethod
    def _known_backend(cls, value: object) -> DtypeBackend:
        return dtype_backend(value, "HyperIOManager(dtype_backend=...)")

    @model_validator(mode="before")
    @classmethod
    def _database_resource(cls, data: Any) -> Any:
        """`database=HyperDatabase(...)` is the `hyper_database` resource; the home's
        settings are then its own, not given twice."""
        if not isinstance(data, dict) or not isinstance(data.get("database"), HyperDatabase):
            return data
        if "hyper_database" in data:
            raise ConfigurationError(
                "HyperIOManager got both database= and hyper_database=: give one."
            )
        twice = sorted({"hyper", "home_settings"} & data.keys())
        if twice:
            raise _given_twice("database=HyperDatabase(...)", twice)
        return {k: v for k, v in data.items() if k != "database"} | {
            "hyper_database": data["database"]
        }

    @model_validator(mode="wrap")
    @classmethod
    def _settings_it_uses(
        cls, data: Any, validate: ModelWrapValidatorHandler[HyperIOManager]
    ) -> HyperIOManager:
        """Refuses, at definition and not at the first write, settings that would be
        ignored and stores it cannot serve; nothing connects to a store here. A database
        from an EnvVar is checked when the run reads it, at the resource's setup."""
        manager = validate(data)
        manager._refuse_ignored(check_database=not from_env(data, "database"))
        return manager

    def _refuse_ignored(self, check_database: bool) -> None:
        if self.hyper_database is None:
            if not self.database:
                raise ConfigurationError(
                    "HyperIOManager needs database=: the .hyper file's path or URI, or a "
                    "HyperDatabase resource."
                )
            if check_database:
                check_home(self.database, self.home_settings, "home_settings")
        elif self.database:
            raise ConfigurationError(
                "HyperIOManager got both database= and hyper_database=: give one."
            )
        else:  # Dagster passes the two back at their defaults when it builds the resource
            ignored = [
                name
                for name, settings in (("hyper", self.hyper), ("home_settings", self.home_settings))
                if changed(settings)
            ]
            if ignored:
                raise _given_twice("hyper_database=", ignored)
        if self.staging_dir or self.staging_s3:
            root = parse_root(self.staging_dir or "", self.staging_s3)
            if self.staging_mode is StagingMode.STREAM and isinstance(root, RemoteRoot):
                raise ConfigurationError(
                    f"HyperIOManager got staging_mode='stream' and staging_dir="
                    f"{self.staging_dir!r}: streamed rows come through the Spark Connect "
                    "channel, never through that store, so it would be ignored. Leave "
                    "staging_dir (and staging_s3) out, or use staging_mode='auto' or 'shared'."
                )

    @property
    def staging(self) -> StagingArea:
        if self._staging is None:
            self._staging = StagingArea(self.staging_dir, self.staging_s3)
        return self._staging

    @property
    def home(self) -> HyperDatabase:
        """Where the file lives, the Hyper process that opens it, and the file Hyper opens
        in this run (`local_path`)."""
        if self.hyper_database is not None:
            return self.hyper_database
        if self._home is None:
            self._home = HyperDatabase(
                database=self.database, hyper=self.hyper, settings=self.home_settings
            )
        return self._home

    def setup_for_execution(self, context: InitResourceContext) -> None:
        if isinstance(self.home.home, Path):
            check_database_path(self.home.database)  # before the step's Spark work, not after

    def teardown_after_execution(self, context: InitResourceContext) -> None:
        self.staging.release()
        self.home.hyper.close()

    def spec_for(
        self, asset_key_path: Sequence[str], metadata: Mapping[str, Any] | None
    ) -> TableSpec:
        """What an asset's definition metadata says about its table (`TableSpec.parse`)."""
        return TableSpec.parse(asset_key_path, metadata, self.default_schema)

    def handle_output(self, context: OutputContext, obj: object) -> None:
        target = output_target(context, self.default_schema)
        if obj is None:
            typed = dagster_type(context)
            if typed is not None and typed.is_nothing:  # typed `-> None`: nothing to store
                return
            raise OutputError(
                f"{target.subject} returned None, not a frame: nothing was written. Return "
                "the frame (a missing `return`?), or annotate the function `-> None` when "
                "it stores nothing through the IO manager."
            )
        spec = target.spec
        table, label = spec.table, spec.label
        hyper = self.home.hyper
        version, cap = hyper.default_database_version, hyper.max_database_version
        frame = OutputFrame.of(obj)
        if frame is None:
            raise OutputError(
                f"{target.subject} returned a {type(obj).__name__}; HyperIOManager stores "
                "pyspark.sql.DataFrame and any frame that exports an Arrow stream "
                "(pyarrow, pandas 2.2+, polars, DuckDB results)."
            )
        columns = as_geography(frame.columns(label, version, cap), spec.geography, label)
        partitioned = target.partitions is not None
        check_frame(target, columns)
        write = Write(
            table,
            columns,
            spec.write_mode(partitioned),
            spec.keys,
            target.window(columns),
            add_columns=spec.add_columns,
        )
        replaces = write.mode in (WriteMode.REPLACE, WriteMode.PARTITION)
        guard = write_guard(context, label, replaces=replaces)
        if isinstance(self.home.home, Path):  # refused before Spark runs; again under the lock
            guard.check(self.home.local_path, self.home.uri)
            check_key_types(hyper, self.home.local_path, write)
        started = time.perf_counter()
        with self.staging.directory("write") as directory:
            staged, transfer = frame.stage(
                self.staging_mode, self.staging, directory, self.staging_compression, label
            )
            loading = time.perf_counter()
            writer = FileWriter(self.home, self.auto_compact)
            counter = range_counter(target, columns)
            written = writer.write(write, staged, counter, guard, context.log)
        result = written.result
        for note in result.notes:
            context.log.warning(note)
        context.log.info(
            f"Wrote {label} ({write.mode.value}): {result.rows_loaded} rows in "
            f"{time.perf_counter() - started:.1f} s, into {self.home.database}"
        )
        if target.asset is not None:
            report_partition_rows(context, written.partition_rows)
        declared = (context.definition_metadata or {}).get("dagster/column_schema")
        seconds = (loading - started, time.perf_counter() - loading)
        home = self.home
        context.add_output_metadata(
            output_metadata(
                write, written, target, declared, home.local_path, home.uri, seconds, transfer
            )
        )

    def delete_partitions(self, asset: AssetsDefinition, partition_keys: Sequence[str]) -> int:
        """Deletes the rows of `partition_keys` of the partitioned `asset`; the rows deleted.

        For rolling windows: drop the oldest days. The next publish deletes them on the
        server too.
        """
        label = asset.key.to_user_string()
        if asset.partitions_def is None:
            raise ConfigurationError(f"Asset {label} is not partitioned: it has no partitions.")
        spec = self.spec_for(asset.key.path, asset.metadata_by_key.get(asset.key))
        partitions_def = asset.partitions_def

        def window_of(columns: list[Column]) -> Window:
            return partition_window(
                partitions_def, partition_keys, spec.partition_expr, columns, spec.label
            )

        writer = FileWriter(self.home, self.auto_compact)
        return writer.delete(spec.table, label, window_of, _log)

    def load_input(self, context: InputContext) -> object:
        target = input_target(context, self.default_schema)
        label = target.spec.label
        wanted = input_columns(context.definition_metadata, label)
        typed = dagster_type(context)
        annotation = typed.typing_type if typed else None
        name, op = input_name(context), op_name(context)
        backend = input_dtype_backend(
            context.definition_metadata,
            self.dtype_backend,
            f"input {name!r}{f' of {op!r}' if op else ''} (loading {label})",
            is_pandas(annotation),
        )
        load_python = python_loader(annotation, backend)
        if load_python is None:  # before the export: a session that cannot load it fails first
            why = (
                "its input's type"
                if is_spark_annotation(annotation)
                else "as an input without a frame type does; annotate the input pa.Table, "
                "pd.DataFrame or pl.DataFrame to load a Python frame instead"
            )
            require("pyspark.sql", f"Loading {label} as a Spark DataFrame ({why})")
            from hyper_assets._rows.spark import active_session, restore_types
            from hyper_assets._rows.transfer import resolve_mode, to_spark

            session = active_session(label)
            mode = resolve_mode(self.staging_mode, session, self.staging, label)
        path = self.staging.keep("load") / "table.parquet"
        recorded, defined = loaded_records(context)
        with self.home.reading() as database:
            found = read_identity(database)
            require_same(found, recorded, self.home.uri, f"Loading {label}", defined)
            columns = self._export(database, target, wanted, path, spark=load_python is None)
        if load_python is not None:
            return load_python(path)
        if not columns:
            from pyspark.sql.types import StructType

            return session.createDataFrame([], StructType([]))
        return restore_types(to_spark(session, self.staging, path, mode, label), columns)

    def _export(
        self,
        database: Path,
        target: Target,
        wanted: tuple[str, ...] | None,
        path: Path,
        spark: bool,
    ) -> list[Column]:
        """Writes the `wanted` columns of the rows `target` loads to Parquet `path`, for
        Spark to read or else Arrow; the columns written. A load of no partitions (a
        self-dependent asset's first partition) reads no rows, and of a table not there
        yet, no columns either."""
        spec = target.spec
        if target.reads_nothing and not database.exists():
            return export_no_columns(path)
        with self.home.hyper.connect(database, create=False) as connection:
            if target.reads_nothing and not Catalog(connection).exists(spec.table):
                return export_no_columns(path)
            stored = stored_columns(connection, spec.table, self.home.database, target.who)
            columns = select_columns(stored, wanted, spec.label)
            export_parquet(connection, spec.table, columns, target.where(stored), path, spark)
        return columns


def _given_twice(spelling: str, ignored: Sequence[str]) -> ConfigurationError:
    """The IO manager got its home as a resource and settings the resource has its own of."""
    given = " and ".join(f"{name}=" for name in ignored)
    return ConfigurationError(
        f"HyperIOManager got {spelling} and {given}, which it would ignore (the file is "
        "opened with the HyperDatabase's own settings): give the Hyper and home settings "
        "to the HyperDatabase alone, HyperDatabase(database=..., hyper=HyperResource(...), "
        "settings=HomeSettings(...))."
    )
