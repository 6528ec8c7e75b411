"""Internal: every use of Dagster's private API, in one place, each with a fallback.

Dagster's public API gives an IO manager no way to reach its step (the run's instance,
its partitions, per-partition metadata of a ranged run), nor a check the materialisation
its result is about, nor a sensor a check's execution history. Each is reached here, and
each answer is None when the private name is not there: a context built by
`build_output_context` / `build_input_context` has no step, and a Dagster that moved a
name loses only what the fallback says, never a row (tests/test_unit_contexts.py
fails the day a name moves, so that it is seen).

- `step`: the step of an IO manager's context (`OutputContext.step_context`).
- `op_name`, `input_name`: the op of an output or input, and the input's name, when the
  context has them.
- `dagster_type`: an output's or input's Dagster type, None when the context was built
  without one (an input then loads as an unannotated one does).
- `instance`: the run's instance; None outside a run. Without it the write guard has no
  record to compare with (`hyper_assets._dagster.identity`), as for a first write.
- `add_partition_metadata`: metadata on one partition's materialisation of a ranged
  run; False when it cannot be given (the range's total is still reported).
- `target_materialization`: what a partitioned check's result names; None leaves it out
  (Dagster's UI then may show a result as not current).
- `check_history`: a check's latest executions, for the quality-warning sensor.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

import dagster as dg

try:
    from dagster._core.definitions.asset_checks.asset_check_evaluation import (
        AssetCheckEvaluationTargetMaterializationData as _Target,
    )
except ImportError:  # pragma: no cover - a Dagster that moved it
    _Target = None  # type: ignore[assignment,misc]

#: Private names this module reaches; tests/test_unit_contexts.py asserts each is there.
PRIVATE = (
    "OutputContext.step_context",
    "StepExecutionContext.add_asset_metadata",
    "StepExecutionContext.run_partitions_def",
    "AssetCheckEvaluationTargetMaterializationData",
    "DagsterInstance.event_log_storage.get_asset_check_execution_history",
)

_NOT_GIVEN = (dg.DagsterInvariantViolationError, AttributeError)


def step(context: dg.OutputContext | dg.InputContext) -> Any | None:
    """The step executing `context`, or None (a context built outside a run)."""
    try:
        return context.step_context
    except _NOT_GIVEN:
        return None


def op_name(context: dg.OutputContext | dg.InputContext) -> str | None:
    """The name of the op of `context`, or None when the context was built without one."""
    try:
        return context.op_def.name
    except _NOT_GIVEN:
        return None


def input_name(context: dg.InputContext) -> str | None:
    """The name of the input of `context`, or None when the context was built without one."""
    try:
        return context.name
    except _NOT_GIVEN:
        return None


def dagster_type(context: dg.OutputContext | dg.InputContext) -> dg.DagsterType | None:
    """The type of the output or input of `context`; None when built without one."""
    try:
        return context.dagster_type
    except _NOT_GIVEN:
        return None


def instance(context: dg.OutputContext | dg.InputContext) -> dg.DagsterInstance | None:
    """The run's Dagster instance; None for a context built outside a run without one."""
    if isinstance(context, dg.InputContext):
        try:
            return context.instance
        except _NOT_GIVEN:
            return None
    given = step(context)
    return getattr(given, "instance", None)


@dataclass(frozen=True)
class RunPartitions:
    """The partitions of the run an op's output is written in."""

    definition: dg.PartitionsDefinition
    keys: tuple[str, ...]


def run_partitions(context: dg.OutputContext | dg.InputContext) -> RunPartitions | None:
    """The run's partitions (an op's output has no asset partitions of its own); None for
    an unpartitioned run, or a context without a step."""
    given = step(context)
    definition = getattr(given, "run_partitions_def", None)
    if given is None or definition is None or not given.has_partitions:
        return None
    keys = definition.get_partition_keys_in_range(given.partition_key_range)
    return RunPartitions(definition, tuple(keys))


def add_partition_metadata(
    context: dg.OutputContext, partition_key: str, metadata: Mapping[str, Any]
) -> bool:
    """`metadata` on `partition_key`'s materialisation of the asset of `context`; False
    when the context's step cannot take it."""
    add = getattr(step(context), "add_asset_metadata", None)
    if add is None:
        return False
    add(dict(metadata), asset_key=context.asset_key, partition_key=partition_key)
    return True


def target_materialization(record: dg.EventLogRecord) -> Any | None:
    """What a partition's check result names as the materialisation it is about."""
    if _Target is None:  # pragma: no cover - a Dagster that moved it
        return None
    return _Target(
        run_id=record.event_log_entry.run_id,
        storage_id=record.storage_id,
        timestamp=record.timestamp,
    )


@dataclass(frozen=True)
class CheckExecution:
    """One execution of a check: its partition, whether it ended, failed, and its result."""

    partition: str | None
    status: str  # "SUCCEEDED", "FAILED", "IN_PROGRESS", "SKIPPED", ...
    evaluation: dg.AssetCheckEvaluation | None


def check_history(
    instance: dg.DagsterInstance, key: dg.AssetCheckKey, limit: int
) -> Iterator[CheckExecution]:
    """The latest `limit` executions of check `key`, newest first."""
    storage = instance.event_log_storage
    for record in storage.get_asset_check_execution_history(key, limit):
        event = record.event.dagster_event if record.event else None
        data = event.event_specific_data if event else None
        yield CheckExecution(
            getattr(record, "partition", None),
            record.status.value,
            data if isinstance(data, dg.AssetCheckEvaluation) else None,
        )
