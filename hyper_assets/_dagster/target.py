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

from dagster import (
    AssetKey,
    DagsterInvariantViolationError,
    InputContext,
    OutputContext,
    PartitionsDefinition,
)

from hyper_assets._dagster.compat import op_name, run_partitions, step
from hyper_assets._dagster.partitions import partition_window
from hyper_assets._dagster.spec import TableSpec
from hyper_assets._engine.types import Column
from hyper_assets._rows.window import Window
from hyper_assets.errors import ConfigurationError


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
    who = _output_label(context.name, op_name(context))
    spec = TableSpec.parse([context.name], context.definition_metadata, default_schema, who)
    return Target(spec, None, who, _run_partitions(spec, context))


def input_target(context: InputContext, default_schema: str) -> Target:
    """The table an input loads: its upstream output's, as that output stored it (an
    input context built with no asset key takes its upstream output's)."""
    upstream = context.upstream_output
    metadata = upstream.definition_metadata if upstream else None
    key = _input_asset_key(context, upstream)
    if key is not None:
        spec = TableSpec.parse(key.path, metadata, default_schema)
        partitions = None
        if context.has_asset_partitions:
            keys = tuple(context.asset_partition_keys)
            partitions = Partitions(context.asset_partitions_def, keys)
        return Target(spec, key, f"asset {key.to_user_string()!r}", partitions)
    if upstream is None or not _has_name(upstream):  # a context built by hand, with neither
        raise ConfigurationError(
            "This input context names no table to load: give build_input_context an "
            "asset_key=, or an upstream_output= built with asset_key= or name=."
        )
    who = _output_label(upstream.name, op_name(upstream))
    spec = TableSpec.parse([upstream.name], metadata, default_schema, who)
    return Target(spec, None, who, _run_partitions(spec, context))


def _input_asset_key(context: InputContext, upstream: OutputContext | None) -> AssetKey | None:
    """The input's asset key, or its upstream output's; None for an op's output."""
    if context.has_asset_key:
        return context.asset_key
    return upstream.asset_key if upstream is not None and upstream.has_asset_key else None


def _has_name(output: OutputContext) -> bool:
    """Whether `output` has a name: Dagster's `name` raises on a context built without."""
    try:
        return bool(output.name)
    except DagsterInvariantViolationError:
        return False


def _output_label(output: str, op: str | None) -> str:
    return f"output {output!r} of op {op!r}" if op else f"output {output!r}"


def _run_partitions(spec: TableSpec, context: OutputContext | InputContext) -> Partitions | None:
    """An op output's partitions: its run's, when its metadata has `partition_expr`.

    A context built outside a run has no run to ask: such an output is refused rather
    than written as if unpartitioned (which would replace the whole table).
    """
    if spec.partition_expr is None:
        return None
    if step(context) is None:
        raise ConfigurationError(
            f"{spec.label} has partition_expr, but this context ({type(context).__name__}, "
            "built outside a run) has no run whose partitions it could write. Give the "
            "output an asset (asset_key= and asset_partitions_def= in build_output_context), "
            "or test it in a run (materialize / execute_in_process with partition_key=)."
        )
    run = run_partitions(context)
    return Partitions(run.definition, run.keys) if run else None
