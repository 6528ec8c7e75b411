"""HyperIOManager on contexts built by Dagster's own helpers, as Dagster's docs teach unit
tests of an IO manager (`build_output_context` / `build_input_context`), and as Dagster's
DbIOManager suite runs them (`test_non_asset_out`, `test_output_schema_defaults`, the
None output). No run, no step: the rows are read back from the file each time.

The private names the library reaches (`hyper_assets._dagster.compat.PRIVATE`) are
asserted to be there, so that the day Dagster moves one, this fails and says which."""

from __future__ import annotations

from pathlib import Path

import dagster as dg
import pyarrow as pa
import pytest
from helpers import table_rows

from hyper_assets import ConfigurationError, HyperIOManager, HyperResource, OutputError
from hyper_assets._dagster import compat

ROWS = pa.table({"id": pa.array([1, 2, 3], pa.int64()), "name": ["a", "b", None]})
TABLE = dg.DagsterType(type_check_fn=lambda _, __: True, name="Table", typing_type=pa.Table)


@pytest.fixture
def manager(tmp_path: Path) -> HyperIOManager:
    return HyperIOManager(database=str(tmp_path / "unit.hyper"), hyper=HyperResource())


def stored(hyper, manager: HyperIOManager, table: str) -> list[tuple]:
    return table_rows(hyper, manager.home.local_path, table)


def test_an_asset_output_and_its_input_on_built_contexts(hyper, manager):
    out = dg.build_output_context(
        asset_key=["shop", "items"], definition_metadata={"primary_key": ["id"]}
    )
    manager.handle_output(out, ROWS)
    assert stored(hyper, manager, '"shop"."items"') == [(1, "a"), (2, "b"), (3, None)]

    load = dg.build_input_context(
        asset_key=dg.AssetKey(["shop", "items"]),
        dagster_type=TABLE,
        upstream_output=out,
    )
    assert manager.load_input(load).sort_by("id").to_pylist() == ROWS.to_pylist()


def test_an_input_context_built_without_an_asset_key_takes_its_upstream_outputs(manager):
    out = dg.build_output_context(asset_key=dg.AssetKey("items"))
    manager.handle_output(out, ROWS)
    load = dg.build_input_context(upstream_output=out, dagster_type=TABLE)
    assert manager.load_input(load).sort_by("id").to_pylist() == ROWS.to_pylist()


def test_an_input_context_that_names_no_table_says_what_to_give(manager):
    for load in (
        dg.build_input_context(dagster_type=TABLE),
        dg.build_input_context(upstream_output=dg.build_output_context(), dagster_type=TABLE),
    ):
        with pytest.raises(ConfigurationError, match="give build_input_context an asset_key="):
            manager.load_input(load)


def test_an_op_output_named_by_name_in_the_default_schema(hyper, manager):
    # Dagster's DbIOManager suite: test_non_asset_out and test_output_schema_defaults.
    manager.handle_output(dg.build_output_context(name="result"), ROWS)
    assert stored(hyper, manager, '"Extract"."result"') == [(1, "a"), (2, "b"), (3, None)]
    manager.handle_output(
        dg.build_output_context(name="result", definition_metadata={"schema": "custom"}), ROWS
    )
    assert len(stored(hyper, manager, '"custom"."result"')) == 3


def test_partitions_of_a_built_context_replace_only_their_rows(hyper, manager):
    days = dg.DailyPartitionsDefinition(start_date="2024-01-01", end_date="2024-01-04")
    for day in ("2024-01-01", "2024-01-02"):
        rows = pa.table({"day": pa.array([day, day]).cast(pa.date32()), "n": [1, 2]})
        context = dg.build_output_context(
            asset_key="readings",
            definition_metadata={"partition_expr": "day"},
            asset_partitions_def=days,
            partition_key=day,
        )
        manager.handle_output(context, rows)
    again = pa.table({"day": pa.array(["2024-01-02"]).cast(pa.date32()), "n": [9]})
    manager.handle_output(
        dg.build_output_context(
            asset_key="readings",
            definition_metadata={"partition_expr": "day"},
            asset_partitions_def=days,
            partition_key="2024-01-02",
        ),
        again,
    )
    assert [(str(d), n) for d, n in stored(hyper, manager, '"Extract"."readings"')] == [
        ("2024-01-01", 1),
        ("2024-01-01", 2),
        ("2024-01-02", 9),
    ]


def test_a_none_output_without_a_type_is_refused_and_writes_nothing(manager):
    with pytest.raises(OutputError, match="returned None"):
        manager.handle_output(dg.build_output_context(asset_key="items"), None)
    assert not manager.home.local_path.exists()


def test_an_op_output_with_partition_expr_outside_a_run_is_refused(manager):
    context = dg.build_output_context(name="daily", definition_metadata={"partition_expr": "d"})
    with pytest.raises(ConfigurationError, match="built outside a run"):
        manager.handle_output(context, ROWS)
    assert not manager.home.local_path.exists()


def test_every_private_name_the_library_reaches_is_there():
    from dagster._core.execution.context.system import StepExecutionContext

    assert isinstance(dg.OutputContext.step_context, property)
    for name in (
        "add_asset_metadata",
        "run_partitions_def",
        "has_partitions",
        "partition_key_range",
    ):
        assert hasattr(StepExecutionContext, name), name
    assert compat._Target is not None
    instance = dg.DagsterInstance.ephemeral()
    history = instance.event_log_storage.get_asset_check_execution_history
    assert list(history(dg.AssetCheckKey(dg.AssetKey("a"), "c"), 1)) == []
    assert len(compat.PRIVATE) == 5  # each asserted above
