"""The library's checks on real `.hyper` files: good data passes, injected bad data fails.

Assets return Arrow tables (no Spark); the HyperIOManager stores them in a real hyperd and
each check's SQL runs there. Bad data is injected through the assets themselves.
"""

import datetime as dt
import logging
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import dagster as dg
import pyarrow as pa
import pytest
from helpers import query

from hyper_assets import (
    ConfigurationError,
    HyperIOManager,
    TableauServerResource,
    TokenSignIn,
    build_hyper_checks,
    not_null_check,
    publish_freshness_check,
    tableau_datasource_asset,
)
from hyper_assets._checks.row_count_check import passed_description
from hyper_assets._engine.process import SharedHyper
from hyper_assets.emulator import Emulator

DAYS = dg.DailyPartitionsDefinition(start_date="2024-01-01", end_date="2024-02-01")
RANGE = {
    "dagster/asset_partition_range_start": "2024-01-01",
    "dagster/asset_partition_range_end": "2024-01-03",
}


@dataclass
class World:
    """What the assets return next; each test injects its bad data here."""

    carriers: list[str | None] = field(default_factory=lambda: ["AA", "B6", "UA"])
    #: rows per day; a day missing from the dict gets 4 rows
    per_day: dict[str, int] = field(default_factory=dict)
    #: the carrier of every flight; one not in `carriers` makes orphans
    flight_carrier: str = "UA"
    #: flights of these days have no tail number
    no_tailnum_days: set[str] = field(default_factory=set)


def definitions(world: World, database: Path, partitioned: bool = False) -> dg.Definitions:
    """The assets of `world` with the library's checks: unpartitioned checks (the fallback),
    or partitioned ones (one result per partition) for `flights`."""

    @dg.asset(metadata={"primary_key": ["carrier"]})
    def carriers() -> pa.Table:
        codes = world.carriers
        return pa.table(
            {"carrier": pa.array(codes, pa.string()), "name": [f"{c} air" for c in codes]}
        )

    @dg.asset(
        partitions_def=DAYS,
        backfill_policy=dg.BackfillPolicy.single_run(),
        metadata={
            "partition_expr": "flight_date",
            "foreign_keys": {"carrier": "Extract.carriers.carrier"},
        },
    )
    def flights(context: dg.AssetExecutionContext) -> pa.Table:
        dates, tails = [], []
        for key in context.partition_keys:
            count = world.per_day.get(key, 4)
            dates += [dt.date.fromisoformat(key)] * count
            tails += [None if key in world.no_tailnum_days else "N1"] * count
        return pa.table(
            {
                "flight_date": pa.array(dates, pa.date32()),
                "carrier": pa.array([world.flight_carrier] * len(dates), pa.string()),
                "tailnum": pa.array(tails, pa.string()),
            }
        )

    checks = build_hyper_checks(
        [carriers, flights], not_null={"flights": ["tailnum"]}, partitioned=partitioned
    )
    return dg.Definitions(
        assets=[carriers, flights],
        asset_checks=checks,
        resources={
            "io_manager": HyperIOManager(
                database=str(database),
                staging_dir=str(database.parent / "staging"),
            )
        },
    )


@dataclass
class Setup:
    world: World
    database: Path
    instance: dg.DagsterInstance
    partitioned: bool = False

    def run(
        self, asset: str, partition: str | None = None, tags: dict[str, str] | None = None
    ) -> dict[str, dg.AssetCheckEvaluation]:
        """Materialises `asset` with its checks; the checks' evaluations by name."""
        defs = definitions(self.world, self.database, self.partitioned)
        result = dg.materialize(
            [*defs.assets, *defs.asset_checks],
            selection=[asset],
            partition_key=partition,
            tags=tags,
            resources=defs.resources,
            instance=self.instance,
            raise_on_error=False,
        )
        assert result.get_asset_materialization_events(), "nothing materialised"
        return {e.check_name: e for e in result.get_asset_check_evaluations()}

    def failures_logged(self) -> list[tuple[int, str]]:
        """The latest run's log lines of failed checks: (level, message)."""
        run = self.instance.get_runs(limit=1)[0]
        return [
            (r.level, r.user_message)
            for r in self.instance.all_logs(run.run_id)
            if r.user_message.startswith("Check ")
        ]

    def run_partitioned(
        self, asset: str, partition: str | None = None, tags: dict[str, str] | None = None
    ) -> dict[str, dict[str | None, dg.AssetCheckEvaluation]]:
        """Like `run` with partitioned checks: each check's evaluations by partition."""
        self.partitioned = True
        defs = definitions(self.world, self.database, partitioned=True)
        result = dg.materialize(
            [*defs.assets, *defs.asset_checks],
            selection=[asset],
            partition_key=partition,
            tags=tags,
            resources=defs.resources,
            instance=self.instance,
            raise_on_error=False,
        )
        assert result.get_asset_materialization_events(), "nothing materialised"
        found: dict[str, dict[str | None, dg.AssetCheckEvaluation]] = {}
        for e in result.get_asset_check_evaluations():
            found.setdefault(e.check_name, {})[e.partition] = e
        return found


@pytest.fixture
def setup(tmp_path: Path) -> Iterator[Setup]:
    with dg.DagsterInstance.ephemeral() as instance:
        yield Setup(World(), tmp_path / "star.hyper", instance)


def test_good_data_passes_every_check(setup):
    carriers = setup.run("carriers")
    assert set(carriers) == {"primary_key_unique", "row_count_vs_previous"}
    assert all(e.passed for e in carriers.values())
    assert carriers["primary_key_unique"].metadata["rows"].value == 3

    flights = setup.run("flights", tags=RANGE)
    assert set(flights) == {"foreign_keys_resolve", "row_count_vs_previous", "columns_not_null"}
    assert all(e.passed for e in flights.values()), {n: e.description for n, e in flights.items()}
    counts = flights["row_count_vs_previous"].metadata
    assert counts["partitions"].value == 3
    assert counts["rows"].value == {"2024-01-01": 4, "2024-01-02": 4, "2024-01-03": 4}
    assert flights["columns_not_null"].metadata["nulls"].value == {"tailnum": 0}

    again = setup.run("flights", "2024-01-04")  # 4 rows against 12 / 3 before
    assert again["row_count_vs_previous"].passed
    assert setup.failures_logged() == []
    assert again["row_count_vs_previous"].metadata["previous_rows_per_partition"].value == 4.0


@pytest.mark.parametrize("partitioned", [False, True])
def test_an_assets_checks_run_in_one_step_and_can_be_picked_one_by_one(setup, partitioned):
    """A step is a process under the default executor: one per asset, not one per check,
    whether the checks are partitioned or not."""
    defs = definitions(setup.world, setup.database, partitioned)
    flights = defs.resolve_assets_def("flights")
    setup.run("carriers")
    result = dg.materialize(
        [*defs.assets, *defs.asset_checks],
        selection=dg.AssetSelection.assets(flights),
        resources=defs.resources,
        instance=setup.instance,
        tags=RANGE,
    )
    steps = {
        e.step_key for e in result.all_events if e.event_type_value == "ASSET_CHECK_EVALUATION"
    }
    assert steps == {"flights_hyper_checks"}
    by_partition = {(e.check_name, e.partition) for e in result.get_asset_check_evaluations()}
    names = {"foreign_keys_resolve", "row_count_vs_previous", "columns_not_null"}
    days = [DAY1, DAY2, DAY3] if partitioned else [None]
    assert by_partition == {(n, d) for n in names for d in days}

    assert [len(c.check_specs) for c in defs.asset_checks] == [2, 3]  # carriers, flights
    picked = dg.AssetCheckKey(flights.key, "columns_not_null")
    again = dg.materialize(
        [*defs.assets, *defs.asset_checks],
        selection=dg.AssetSelection.checks(picked),
        resources=defs.resources,
        instance=setup.instance,
        tags={"dagster/partition": DAY2} if partitioned else None,
    )
    (evaluation,) = again.get_asset_check_evaluations()
    assert evaluation.check_name == "columns_not_null" and evaluation.passed
    assert evaluation.partition == (DAY2 if partitioned else None)
    blocking = {s.name for c in defs.asset_checks for s in c.check_specs if s.blocking}
    assert blocking == {"primary_key_unique"}


def test_a_repeated_key_holds_back_what_is_downstream_in_the_same_run(tmp_path: Path):
    """primary_key_unique blocks, though it shares its step with the asset's other checks."""

    @dg.asset(metadata={"primary_key": ["k"]})
    def dim() -> pa.Table:
        return pa.table({"k": [1, 1, 2]})

    @dg.asset(deps=[dim])
    def downstream() -> None:
        return None

    result = dg.materialize(
        [dim, downstream, *build_hyper_checks([dim])],
        resources={"io_manager": HyperIOManager(database=str(tmp_path / "a.hyper"))},
        raise_on_error=False,
    )
    checks = {e.check_name: e.passed for e in result.get_asset_check_evaluations()}
    assert checks == {"primary_key_unique": False, "row_count_vs_previous": True}
    assert [e.asset_key for e in result.get_asset_materialization_events()] == [dim.key]


def test_a_repeated_or_null_key_fails_with_the_counts(setup):
    setup.world.carriers = ["AA", "UA", "UA", "UA", "B6", "B6", None]
    check = setup.run("carriers")["primary_key_unique"]
    assert not check.passed and check.severity == dg.AssetCheckSeverity.ERROR
    meta = {k: v.value for k, v in check.metadata.items()}
    assert (meta["rows"], meta["duplicate_keys"], meta["duplicate_rows"], meta["null_keys"]) == (
        7,
        2,
        3,
        1,
    )
    assert meta["sample"] == ["UA (3 rows)", "B6 (2 rows)"]
    assert check.description == "2 key value(s) repeat (3 extra row(s)); 1 row(s) have a NULL key"
    assert (logging.ERROR, f"Check primary_key_unique of carriers failed: {check.description}") in (
        setup.failures_logged()
    )


def test_orphans_warn_with_the_count_and_a_sample(setup):
    setup.run("carriers")
    setup.world.flight_carrier = "ZZ"
    setup.world.per_day = {"2024-01-02": 6}
    check = setup.run("flights", tags=RANGE)["foreign_keys_resolve"]
    assert not check.passed and check.severity == dg.AssetCheckSeverity.WARN
    assert check.metadata["orphan_rows"].value == 14
    detail = check.metadata["orphans"].value["carrier -> Extract.carriers.carrier"]
    assert detail == {"rows": 14, "values": 1, "sample": ["ZZ (14 rows)"]}
    assert setup.failures_logged() == [
        (
            logging.WARNING,
            "Check foreign_keys_resolve of flights failed: 14 row(s) reference a missing key",
        )
    ]


def test_a_day_without_rows_fails_and_so_does_a_drop_against_the_previous_run(setup):
    setup.run("carriers")
    setup.world.per_day = {"2024-01-02": 0}
    check = setup.run("flights", tags=RANGE)["row_count_vs_previous"]
    assert not check.passed
    assert check.metadata["empty_partitions"].value == 1
    assert check.metadata["rows"].value == {"2024-01-01": 4, "2024-01-02": 0, "2024-01-03": 4}
    assert check.description == "no rows: 2024-01-02"

    setup.world.per_day = {"2024-01-04": 1}  # the previous run wrote 8 rows over 3 days
    check = setup.run("flights", "2024-01-04")["row_count_vs_previous"]
    assert not check.passed
    assert check.metadata["low_partitions"].value == 1
    assert "2024-01-04 (1 rows)" in check.description

    setup.world.per_day = {"2024-01-05": 1}  # against the 1 row of the run before: fine
    assert setup.run("flights", "2024-01-05")["row_count_vs_previous"].passed


def test_nulls_in_a_listed_column_fail_with_their_count(setup):
    setup.run("carriers")
    setup.world.no_tailnum_days = {"2024-01-03"}
    check = setup.run("flights", tags=RANGE)["columns_not_null"]
    assert not check.passed
    assert check.metadata["nulls"].value == {"tailnum": 4}
    assert check.description == "tailnum: 4 NULL(s)"


def test_a_not_null_list_for_an_unknown_asset_is_refused():
    @dg.asset
    def lonely() -> pa.Table:
        return pa.table({"x": [1]})

    with pytest.raises(ConfigurationError, match=r"\['flights'\]"):
        build_hyper_checks([lonely], not_null={"flights": ["x"]})


def test_published_copy_freshness_reads_the_outbox(tmp_path: Path, hyper: SharedHyper):
    """Never published: fails; just published: passes; a write waiting: fails past the lag."""
    world, database = World(), tmp_path / "star.hyper"
    defs = definitions(world, database)
    carriers = defs.resolve_assets_def("carriers")
    published = tableau_datasource_asset(datasource="Airlines", project="Default", deps=[carriers])
    data_dir = tmp_path / "server"
    data_dir.mkdir()
    with (
        Emulator(data_dir, tokens={"ci": "secret"}, hyper=hyper) as emulator,
        dg.DagsterInstance.ephemeral() as instance,
    ):
        tableau = TableauServerResource(
            server_url=emulator.url, sign_in=TokenSignIn(name="ci", secret="secret")
        )

        def run(selection: dg.AssetSelection, max_lag: float = 0) -> dg.AssetCheckEvaluation:
            """Runs `selection` and the check (after it when it holds the publish asset)."""
            check = publish_freshness_check(published, max_lag_minutes=max_lag)
            result = dg.materialize(
                [carriers, published, check],
                selection=selection | dg.AssetSelection.checks(check),
                resources={**defs.resources, "tableau": tableau},
                instance=instance,
            )
            (evaluation,) = result.get_asset_check_evaluations()
            return evaluation

        def write_carriers() -> None:
            result = dg.materialize([carriers], resources=defs.resources, instance=instance)
            assert result.success

        write_carriers()
        never = run(dg.AssetSelection.assets())
        assert not never.passed and "never been published" in never.description
        fresh = run(dg.AssetSelection.assets(published))  # the check runs after the publish
        assert fresh.passed and fresh.metadata["unpublished_changes"].value == 0

        world.carriers = ["AA"]
        write_carriers()
        waiting = run(dg.AssetSelection.assets())
        assert not waiting.passed
        assert waiting.metadata["unpublished_changes"].value == 1
        assert waiting.metadata["tables"].value == ["Extract.carriers"]
        assert run(dg.AssetSelection.assets(), max_lag=60).passed

        published_again = run(dg.AssetSelection.assets(published))
        assert published_again.passed
        remote = emulator.data_dir / "Airlines.hyper"
        assert query(hyper, remote, 'SELECT carrier FROM "Extract".carriers') == [["AA"]]


def test_a_column_the_table_lacks_or_a_foreign_io_manager_is_named_in_the_error(tmp_path: Path):
    database = tmp_path / "star.hyper"
    defs = definitions(World(), database)
    carriers = defs.resolve_assets_def("carriers")

    def check_error(check: dg.AssetChecksDefinition, resources: dict) -> str:
        with dg.DagsterInstance.ephemeral() as instance:
            dg.materialize([carriers], resources=defs.resources, instance=instance)
            result = dg.materialize(
                [carriers, check],
                selection=dg.AssetSelection.checks(check),
                resources=resources,
                instance=instance,
                raise_on_error=False,
            )
        (failure,) = [e for e in result.all_events if e.is_step_failure]
        cause = failure.step_failure_data.error.cause
        return f"{cause.cls_name}: {cause.message}"

    message = check_error(not_null_check(carriers, ["nmae"]), defs.resources)
    assert (
        "ConfigurationError" in message and "['nmae']" in message and "Extract.carriers" in message
    )
    io = {**defs.resources, "tables": dg.FilesystemIOManager(base_dir=str(tmp_path))}
    message = check_error(not_null_check(carriers, ["name"], io_manager_key="tables"), io)
    assert "under resource key 'tables', found a PickledObjectFilesystemIOManager" in message


DAY1, DAY2, DAY3 = "2024-01-01", "2024-01-02", "2024-01-03"


def test_partitioned_checks_give_each_partition_the_run_wrote_its_own_result(setup):
    setup.run_partitioned("carriers")
    first = setup.run_partitioned("flights", tags=RANGE)  # one run, three partitions
    assert set(first) == {"foreign_keys_resolve", "row_count_vs_previous", "columns_not_null"}
    for name, by_partition in first.items():
        assert set(by_partition) == {DAY1, DAY2, DAY3}, name
        assert all(e.passed for e in by_partition.values()), name
    assert first["row_count_vs_previous"][DAY2].metadata["rows"].value == 4
    assert first["row_count_vs_previous"][DAY2].description == "4 rows (no previous run)."

    setup.world.per_day = {DAY2: 0}
    setup.world.no_tailnum_days = {DAY3}
    setup.world.flight_carrier = "ZZ"
    second = setup.run_partitioned("flights", tags=RANGE)
    rows = second["row_count_vs_previous"]
    assert [p for p, e in sorted(rows.items()) if not e.passed] == [DAY2]
    assert rows[DAY2].description == "no rows"
    assert rows[DAY1].description == "4 rows (the previous run's 4 per partition)."
    nulls = second["columns_not_null"]
    assert [p for p, e in sorted(nulls.items()) if not e.passed] == [DAY3]
    assert nulls[DAY3].metadata["nulls"].value == {"tailnum": 4}
    orphans = second["foreign_keys_resolve"]
    assert {p: e.metadata["orphan_rows"].value for p, e in orphans.items()} == {
        DAY1: 4,
        DAY2: 0,
        DAY3: 4,
    }
    assert orphans[DAY1].severity == dg.AssetCheckSeverity.WARN
    assert sorted(setup.failures_logged()) == [  # one line per failed check
        (
            logging.WARNING,
            "Check foreign_keys_resolve of flights failed for 2 partition(s): "
            f"{DAY1}: 4 row(s) reference a missing key; {DAY3}: 4 row(s) reference a missing key",
        ),
        (
            logging.ERROR,
            "Check columns_not_null of flights failed for 1 partition(s): "
            f"{DAY3}: tailnum: 4 NULL(s)",
        ),
        (
            logging.ERROR,
            f"Check row_count_vs_previous of flights failed for 1 partition(s): {DAY2}: no rows",
        ),
    ]

    one = setup.run_partitioned("flights", "2024-01-04")  # one partition, its own run
    assert {n: list(e) for n, e in one.items()} == {n: ["2024-01-04"] for n in first}
    history = setup.instance.event_log_storage.get_asset_check_execution_history(
        dg.AssetCheckKey(dg.AssetKey("flights"), "row_count_vs_previous"), 10
    )
    assert [(r.partition, r.status.value) for r in history][:4] == [
        ("2024-01-04", "SUCCEEDED"),
        (DAY3, "SUCCEEDED"),
        (DAY2, "FAILED"),
        (DAY1, "SUCCEEDED"),
    ]
    # What the UI shows per partition: each result is about the partition's latest write.
    key = dg.AssetCheckKey(dg.AssetKey("flights"), "columns_not_null")
    state = setup.instance.event_log_storage.get_asset_check_state([(key, DAYS)])[key]
    shown = {
        s.value: sorted(subset.subset_value.get_partition_keys())
        for s, subset in state.subsets.items()
    }
    assert shown["SUCCEEDED"] == [DAY1, DAY2, "2024-01-04"]
    assert shown["FAILED"] == [DAY3]


def test_partitioned_checks_that_pass_log_no_warning_nor_a_missing_output(setup):
    """A step whose checks all passed, for one partition and for a range, logs nothing at
    WARNING or above and no "did not yield or return expected outputs"."""
    setup.run_partitioned("carriers")
    for partition, tags in ((None, RANGE), ("2024-01-04", None)):
        found = setup.run_partitioned("flights", partition, tags)
        assert all(e.passed for by_partition in found.values() for e in by_partition.values())
        run = setup.instance.get_runs(limit=1)[0]
        logs = [(r.level, r.step_key, r.user_message) for r in setup.instance.all_logs(run.run_id)]
        loud = [line for line in logs if line[0] >= logging.WARNING]
        missing = [line for line in logs if "did not yield" in line[2]]
        assert (loud, missing) == ([], []), partition
        assert any(step == "flights_hyper_checks" for _, step, _ in logs)


def test_a_partitioned_key_check_fails_the_partitions_holding_a_repeated_key(tmp_path: Path):
    """A key repeated across two partitions fails both of them and holds back what is
    downstream; the third partition passes."""
    ids = {DAY1: [1, 2, None], DAY2: [3, 1], DAY3: [5, 6]}

    @dg.asset(
        partitions_def=DAYS,
        backfill_policy=dg.BackfillPolicy.single_run(),
        metadata={"partition_expr": "day", "primary_key": ["id"]},
    )
    def events(context: dg.AssetExecutionContext) -> pa.Table:
        days = [k for k in context.partition_keys for _ in ids[k]]
        values = [i for k in context.partition_keys for i in ids[k]]
        return pa.table(
            {
                "day": pa.array([dt.date.fromisoformat(d) for d in days], pa.date32()),
                "id": pa.array(values, pa.int64()),
            }
        )

    @dg.asset(partitions_def=DAYS, deps=[events], backfill_policy=dg.BackfillPolicy.single_run())
    def downstream() -> None: ...

    checks = build_hyper_checks([events], min_row_ratio=None)
    io = HyperIOManager(
        database=str(tmp_path / "events.hyper"),
    )
    with dg.DagsterInstance.ephemeral() as instance:
        result = dg.materialize(
            [events, downstream, *checks],
            tags=RANGE,
            resources={"io_manager": io},
            instance=instance,
            raise_on_error=False,
        )
    assert not result.success
    (check,) = checks
    assert check.check_specs and next(iter(check.check_specs)).blocking
    by_partition = {e.partition: e for e in result.get_asset_check_evaluations()}
    assert {p: e.passed for p, e in by_partition.items()} == {DAY1: False, DAY2: False, DAY3: True}
    assert by_partition[DAY1].description == (
        "1 row(s) share their key with another row; 1 row(s) have a NULL key"
    )
    assert by_partition[DAY2].metadata["rows_with_repeated_key"].value == 1
    assert by_partition[DAY3].metadata["rows"].value == 2
    materialized = {e.asset_key for e in result.get_asset_materialization_events()}
    assert materialized == {events.key}  # the failed blocking check held downstream back


@pytest.mark.parametrize(
    ("failed", "ends"),
    [
        (1, "failed for 1 partition(s): d0: no rows"),
        (20, "d19: no rows"),
        (21, "d19: no rows; ... and 1 more"),
        (365, "d19: no rows; ... and 345 more"),
    ],
)
def test_a_failed_checks_log_line_names_twenty_partitions_and_counts_the_rest(failed, ends):
    from hyper_assets._checks.partitioned_checks import failed_line

    line = failed_line("rows", "flights", [(f"d{i}", "no rows") for i in range(failed)])
    assert line.startswith(f"Check rows of flights failed for {failed} partition(s): d0: ")
    assert line.endswith(ends) and line.count("no rows") == min(failed, 20)


@pytest.mark.parametrize(
    ("counts", "partitioned", "previous", "said"),
    [
        ({"stores": 2}, False, None, "2 rows (no previous run)."),
        ({"stores": 3}, False, 2.0, "3 rows (the previous run's 2)."),
        (
            {"2024-01-01": 2, "2024-01-02": 5},
            True,
            None,
            "2 partition(s) with 2...5 rows each (no previous run per partition).",
        ),
        (
            {"2024-01-02": 4},
            True,
            3.0,
            "1 partition(s) with 4...4 rows each (the previous run's 3 per partition).",
        ),
    ],
)
def test_a_passed_row_count_says_rows_of_a_table_and_a_range_of_partitions(
    counts, partitioned, previous, said
):
    assert passed_description(counts, partitioned, previous) == said
