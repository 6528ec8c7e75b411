"""The component's tables as Spark assets: the YAML's rules, metadata, how each is built.

A table is read from files (`source`) or computed by Spark SQL over other tables of the
component (`sql`), cast to its declared `columns`, and stored by the component's
HyperIOManager, which reads the metadata built here.
"""

import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import dagster as dg
from pyspark.sql import DataFrame, SparkSession

from hyper_assets._component.specs import ColumnSpec, FileSource, TableYaml
from hyper_assets.errors import ComponentSpecError

if TYPE_CHECKING:  # the component builds its tables here; only its type is needed
    from hyper_assets._component.component import HyperExtractComponent

_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
#: Tables a SQL statement reads, when `inputs` does not list them: `FROM t` / `JOIN t`.
_SQL_TABLE = re.compile(r"\b(?:FROM|JOIN)\s+`?([A-Za-z_][A-Za-z0-9_]*)`?", re.IGNORECASE)
_PARTITION_KEY = "{partition_key}"
_TEXT_TYPE = re.compile(r"STRING|(?:VAR)?CHAR\(\d+\)")
_STORAGE_KIND = {"dagster/storage_kind": "hyper"}


def table_asset(
    component: "HyperExtractComponent", index: int, table: TableYaml, names: set[str], root: Path
) -> dg.AssetsDefinition:
    """The Spark asset of the component's `index`th table, stored by its HyperIOManager."""
    where = f"attributes.tables[{index}]"
    inputs = _inputs(table, names, where)
    metadata = _table_metadata(table, where)
    source = table.source
    if source and (table.partitions_def is None) == (_PARTITION_KEY in source.path):
        raise ComponentSpecError(
            f"{where}.source.path",
            f"a partitioned table's path holds {_PARTITION_KEY} (a run reads only its "
            f"partitions' files), an unpartitioned one's does not; table {table.name!r} is "
            f"{'not ' if table.partitions_def is None else ''}partitioned",
        )
    spark_key = component.spark.resource_key
    columns = tuple(table.columns)

    @dg.asset(
        key=table.name,
        ins={name: dg.AssetIn(key=name) for name in inputs},
        description=table.description or _describe(table),
        group_name=component.group_name,
        owners=[*component.owners, *table.owners] or None,
        tags={**component.tags, **table.tags, **_STORAGE_KIND},
        kinds={"spark", "hyper"},
        metadata=metadata,
        partitions_def=table.partitions_def,
        backfill_policy=_backfill_policy(table.partitions_def),
        io_manager_key=component.hyper_io_manager_key,
        required_resource_keys={spark_key},
        automation_condition=table.automation_condition,
    )
    def _build(context: dg.AssetExecutionContext, **upstream: DataFrame) -> DataFrame:
        pyspark = getattr(context.resources, spark_key)
        frame = (
            _read(pyspark.spark_session, source, context, root)
            if source
            else _query(pyspark.spark_session, table.sql or "", upstream, context)
        )
        return _cast(frame, columns, where, table.name)

    return _build


def check_names(tables: Sequence[TableYaml]) -> set[str]:
    """The tables' names: each a valid name, declared once, of a table with one of source, sql."""
    seen: set[str] = set()
    for i, table in enumerate(tables):
        where = f"attributes.tables[{i}]"
        if not _NAME.fullmatch(table.name):
            raise ComponentSpecError(
                f"{where}.name",
                f"{table.name!r} is not a name Dagster keys and Spark views take: use letters, "
                "digits and _ (set `schema_name` for the Hyper schema)",
            )
        if table.name in seen:
            raise ComponentSpecError(f"{where}.name", f"table {table.name!r} is declared twice")
        if (table.source is None) == (table.sql is None):
            raise ComponentSpecError(where, f"table {table.name!r} needs one of source, sql")
        seen.add(table.name)
    return seen


def _inputs(table: TableYaml, names: set[str], where: str) -> tuple[str, ...]:
    """The tables `table`'s SQL reads: `inputs`, else its FROM/JOIN names among `names`."""
    if table.sql is None:
        if table.inputs:
            raise ComponentSpecError(f"{where}.inputs", "only a table built from `sql` has inputs")
        return ()
    if table.inputs is None:
        found = dict.fromkeys(_SQL_TABLE.findall(table.sql))
        return tuple(n for n in found if n in names and n != table.name)
    unknown = [n for n in table.inputs if n not in names or n == table.name]
    if unknown:
        raise ComponentSpecError(
            f"{where}.inputs",
            f"{unknown} are not other tables of this component; it declares {sorted(names)}",
        )
    return tuple(table.inputs)


def _table_metadata(table: TableYaml, where: str) -> dict[str, Any]:
    """What the IO manager and the checks read, and the column schema when declared."""
    if table.partitions_def is not None and not table.partition_expr:
        raise ComponentSpecError(
            f"{where}.partition_expr",
            f"table {table.name!r} is partitioned: name the column its partitions select by",
        )
    if table.write_mode == "upsert" and not table.primary_key:
        raise ComponentSpecError(
            f"{where}.primary_key", f"table {table.name!r} upserts, which needs a primary key"
        )
    metadata: dict[str, Any] = {}
    if table.schema_name:
        metadata["schema"] = table.schema_name
    if table.primary_key:
        metadata["primary_key"] = list(table.primary_key)
    if table.foreign_keys:
        metadata["foreign_keys"] = dict(table.foreign_keys)
    if table.partition_expr:
        metadata["partition_expr"] = table.partition_expr
    if table.write_mode != "replace":
        metadata["write_mode"] = table.write_mode
    metadata |= _evolution_metadata(table, where)
    metadata |= _geography_metadata(table, where)
    if table.columns:
        declared = [c.name for c in table.columns]
        for label, listed in (("primary_key", table.primary_key), ("not_null", table.not_null)):
            unknown = [c for c in listed if c not in declared]
            if unknown:
                raise ComponentSpecError(
                    f"{where}.{label}", f"names {unknown}, not among its columns {declared}"
                )
        metadata["dagster/column_schema"] = dg.TableSchema(
            columns=[
                dg.TableColumn(
                    c.name,
                    c.type.upper(),
                    description=c.description,
                    constraints=dg.TableColumnConstraints(
                        unique=tuple(table.primary_key) == (c.name,)
                    ),
                )
                for c in table.columns
            ]
        )
    return metadata


def _evolution_metadata(table: TableYaml, where: str) -> dict[str, str]:
    """`schema_evolution` as the IO manager reads it, for the writes that keep rows."""
    if table.schema_evolution is None:
        return {}
    if table.schema_evolution != "add_columns":
        raise ComponentSpecError(
            f"{where}.schema_evolution",
            f"table {table.name!r} gives {table.schema_evolution!r}; use add_columns (new "
            "columns are added, NULL in the stored rows) or leave it out (they are refused)",
        )
    if table.write_mode == "replace" and table.partitions_def is None:
        raise ComponentSpecError(
            f"{where}.schema_evolution",
            f"table {table.name!r} is replaced whole on each run, which takes new columns "
            "anyway; add_columns is for append, upsert or partitioned tables: leave it out",
        )
    return {"schema_evolution": "add_columns"}


def _geography_metadata(table: TableYaml, where: str) -> dict[str, list[str]]:
    """`geography_columns` as the IO manager reads it: declared string columns, if declared."""
    names = list(table.geography_columns)
    if not names:
        return {}
    if not all(n.strip() for n in names) or len(set(names)) < len(names):
        raise ComponentSpecError(
            f"{where}.geography_columns",
            f"table {table.name!r} gives {names}; list each column once, by name",
        )
    declared = {c.name: c.type.strip().upper() for c in table.columns}
    if declared:
        wrong = [n for n in names if not _TEXT_TYPE.fullmatch(declared.get(n, ""))]
        if wrong:
            raise ComponentSpecError(
                f"{where}.geography_columns",
                f"table {table.name!r} names {wrong}, which are not STRING columns among "
                f"{sorted(declared)}: geography arrives as well-known text, e.g. "
                '"POINT(-73.78 40.64)", in a column declared STRING',
            )
    return {"geography_columns": names}


def _describe(table: TableYaml) -> str:
    if table.source:
        return f"Spark reads {table.source.format} {table.source.path}."
    return f"Spark SQL:\n\n```sql\n{table.sql}\n```"


def _backfill_policy(partitions: dg.PartitionsDefinition | None) -> dg.BackfillPolicy | None:
    """Time windows backfill in one run (one wide window); static keys one per run."""
    if isinstance(partitions, dg.TimeWindowPartitionsDefinition):
        return dg.BackfillPolicy.single_run()
    return None


def _read(
    spark: SparkSession, source: FileSource, context: dg.AssetExecutionContext, root: Path
) -> DataFrame:
    """The source's files (of the run's partitions); a URI (s3://...) is read as given."""
    path = source.path if "://" in source.path else str(root / source.path)
    paths = (
        [path.replace(_PARTITION_KEY, key) for key in context.partition_keys]
        if _PARTITION_KEY in path
        else [path]
    )
    return spark.read.format(source.format).options(**source.options).load(paths)


def _query(
    spark: SparkSession,
    sql: str,
    upstream: Mapping[str, DataFrame],
    context: dg.AssetExecutionContext,
) -> DataFrame:
    for name, frame in upstream.items():
        frame.createOrReplaceTempView(name)
    used = {p: v for p, v in _sql_parameters(context).items() if re.search(rf":{p}\b", sql)}
    return spark.sql(sql, args=used or None)


def _sql_parameters(context: dg.AssetExecutionContext) -> dict[str, str]:
    """The run's partition key (one-partition runs) and time window (wall-clock
    'YYYY-MM-DD HH:MM:SS' in the partitions' time zone), for `:name` markers in SQL."""
    partitions = context.assets_def.partitions_def
    if partitions is None:
        return {}
    keys = context.partition_keys
    args = {"partition_key": keys[0]} if len(keys) == 1 else {}
    if isinstance(partitions, dg.TimeWindowPartitionsDefinition):
        start, end = context.partition_time_window
        args["partition_start"] = start.strftime("%Y-%m-%d %H:%M:%S")
        args["partition_end"] = end.strftime("%Y-%m-%d %H:%M:%S")
    return args


def _cast(frame: DataFrame, columns: Sequence[ColumnSpec], where: str, name: str) -> DataFrame:
    """The declared columns, in order, cast to their types; none declared: `frame` as is."""
    if not columns:
        return frame
    missing = [c.name for c in columns if c.name not in frame.columns]
    if missing:
        raise ComponentSpecError(
            f"{where}.columns",
            f"table {name!r} declares {missing}, which its rows lack; they have {frame.columns}",
        )
    return frame.select(*(frame[c.name].cast(c.type).alias(c.name) for c in columns))
