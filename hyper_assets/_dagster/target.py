"""Which table a Dagster output or input is, and which of its partitions.

An asset's table comes from its key (`TableSpec.parse`) and its partitions from the
asset's. An op's output (an op job, or the inner ops of a graph-backed asset) is stored
as Dagster's table IO managers store it: table `<schema>.<output name>`, the schema from
the output's metadata `schema`, else the default schema (metadata `table` renames it).
An op's output is partitioned only when its metadata has `partition_expr` and its run
has partitions; otherwise each run replaces the whole table, as with the other Dagster IO
managers.
"""

from __future__ import annotations

from dataclasses import dataclass

from dagster import AssetKey, InputContext, OutputContext, PartitionsDefinition

from hyper_assets._dagster.partitions import partition_window
from hyper_assets._dagster.spec import TableSpec
from hyper_assets._engine.types import Column
from hyper_assets._rows.window import Window


@dataclass(frozen=True)
class Partitions:
    """The partitions a write writes or a load reads; a load may read none (`keys` empty:
    the first partition of a self-dependent asset, or a mapping to no upstream partition)."""

    definition: PartitionsDefinition
    keys: tuple[str, ...]


@dataclass(frozen=True)
class Target:
    """The table of an asset (`asset`) or of an op's output (`asset` None), its partitions
    (None: the whole table), and how messages name it (`who`)."""

    spec: TableSpec
    asset: AssetKey | None
    who: str
    partitions: Partitions | None

    def window(self, columns: list[Column]) -> Window | None:
        """The rows of the partitions in a table of `columns`; None for the whole table.
        Not for a load of no partitions (`reads_nothing`)."""
        if self.partitions is None:
            return None
        partitions = self.partitions
        return partition_window(
            partitions.definition,
            partitions.keys,
            self.spec.partition_expr,
            columns,
            self.spec.label,
        )

    def where(self, columns: list[Column]) -> str | None:
        """SQL selecting the rows a load reads from a table of `columns`: None for all."""
        if self.reads_nothing:
            return "FALSE"
        window = self.window(columns)
        return window.sql if window else None

    @property
    def subject(self) -> str:
        """`who`, starting a sentence."""
        return self.who[:1].upper() + self.who[1:]

    @property
    def reads_nothing(self) -> bool:
        """A load of no partitions: it reads no rows, and needs no table."""
        return self.partitions is not None and not self.partitions.keys


def output_target(context: OutputContext, default_schema: str) -> Target:
    """The table an output is stored as."""
    if context.has_asset_key:
        key = context.asset_key
        spec = TableSpec.parse(key.path, context.definition_metadata, default_schema)
        partitions = None
        if context.has_asset_partitions:
            keys = tuple(context.asset_partition_keys)
            partitions = Partitions(context.asset_partitions_def, keys)
        return Target(spec, key, f"asset {key.to_user_string()!r}", partitions)
    who = f"output {context.name!r} of op {context.op_def.name!r}"
    spec = TableSpec.parse([context.name], context.definition_metadata, default_schema, who)
    return Target(spec, None, who, _run_partitions(context, spec))


def input_target(context: InputContext, default_schema: str) -> Target:
    """The table an input loads: its upstream output's, as that output stored it."""
    upstream = context.upstream_output
    metadata = upstream.definition_metadata if upstream else None
    if context.has_asset_key:
        key = context.asset_key
        spec = TableSpec.parse(key.path, metadata, default_schema)
        partitions = None
        if context.has_asset_partitions:
            keys = tuple(context.asset_partition_keys)
            partitions = Partitions(context.asset_partitions_def, keys)
        return Target(spec, key, f"asset {key.to_user_string()!r}", partitions)
    assert upstream is not None  # an op's input without an asset is another op's output
    who = f"output {upstream.name!r} of op {upstream.op_def.name!r}"
    spec = TableSpec.parse([upstream.name], metadata, default_schema, who)
    return Target(spec, None, who, _run_partitions(context, spec))


def _run_partitions(context: OutputContext | InputContext, spec: TableSpec) -> Partitions | None:
    """An op output's partitions: its run's, when its metadata has `partition_expr`."""
    step = context.step_context
    definition = step.run_partitions_def
    if spec.partition_expr is None or definition is None or not step.has_partitions:
        return None
    return Partitions(
        definition, tuple(definition.get_partition_keys_in_range(step.partition_key_range))
    )
