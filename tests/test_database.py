"""`HyperDatabase` as the one resource that knows the file's home, and the extract's identity.

Real parts: a real hyperd, Dagster runs on a real instance, the Tableau emulator over HTTP.
The checks and the publish take the `HyperDatabase` resource (`database_key=`), or, as
before it existed, the `HyperIOManager`. A lost file (its directory emptied between runs)
is noticed: a write refuses to refill it silently, and a load, a check or a publish of the
file made anew fails with `ExtractRecreatedError` until the asset is rebuilt.
"""

import datetime as dt
import shutil
from pathlib import Path

import boto3
import dagster as dg
import pyarrow as pa
import pytest
from helpers import query

from hyper_assets import (
    ConfigurationError,
    HomeSettings,
    HyperDatabase,
    HyperIOManager,
    HyperResource,
    PublishConfig,
    TableauServerResource,
    TokenSignIn,
    build_hyper_checks,
    compact,
    tableau_datasource_asset,
)
from hyper_assets._dagster.identity import IDENTITY_KEY, read_identity
from hyper_assets._engine.process import SharedHyper
from hyper_assets.emulator import Emulator

DAYS = dg.DailyPartitionsDefinition(start_date="2024-01-01", end_date="2024-01-08")
SIX = [f"2024-01-0{d}" for d in range(1, 7)]


def assets(loaded: dict[str, int]) -> list[dg.AssetsDefinition]:
    """`carriers` (unpartitioned), daily `flights` (day d has d rows) and `daily`, which
    counts the rows it loads of each day of `flights` into `loaded`."""

    @dg.asset(metadata={"primary_key": ["carrier"]})
    def carriers() -> pa.Table:
        return pa.table({"carrier": ["AA", "UA"], "name": ["American", "United"]})

    @dg.asset(
        partitions_def=DAYS,
        backfill_policy=dg.BackfillPolicy.single_run(),
        metadata={"partition_expr": "day", "foreign_keys": {"carrier": "Extract.carriers.carrier"}},
    )
    def flights(context: dg.AssetExecutionContext) -> pa.Table:
        days = [dt.date.fromisoformat(k) for k in context.partition_keys for _ in range(int(k[-1]))]
        return pa.table({"day": pa.array(days, pa.date32()), "carrier": ["UA"] * len(days)})

    @dg.asset(partitions_def=DAYS)
    def daily(context: dg.AssetExecutionContext, flights: pa.Table) -> None:
        loaded[context.partition_key] = flights.num_rows

    return [carriers, flights, daily]


def hyper_database(path: Path) -> HyperDatabase:
    return HyperDatabase(database=str(path))


def materialize(
    defs: list, resources: dict, instance: dg.DagsterInstance, select: str | list[str], **kwargs
) -> dg.ExecuteInProcessResult:
    return dg.materialize(
        defs,
        selection=select,
        resources=resources,
        instance=instance,
        raise_on_error=False,
        **kwargs,
    )


def failure(result: dg.ExecuteInProcessResult) -> str:
    """The error of the run's failed step: `module.Class: message`."""
    (failed,) = [e for e in result.all_events if e.is_step_failure]
    error = failed.step_failure_data.error
    return (error.cause or error).message


@pytest.mark.parametrize("how", ["database_key", "io_manager"])
def test_checks_and_publish_take_the_database_resource_or_the_io_manager(
    tmp_path: Path, hyper: SharedHyper, how: str
):
    """`HyperIOManager(database=db)` with `db` also under its own key, which the checks and
    the publish take; or the definitions of before: the IO manager's string alone."""
    path = tmp_path / "shop.hyper"
    loaded: dict[str, int] = {}
    carriers, flights, daily = assets(loaded)
    if how == "database_key":
        db = hyper_database(path)
        resources: dict = {"io_manager": HyperIOManager(database=db), "shop": db}
        key = {"database_key": "shop"}
    else:
        resources = {"io_manager": HyperIOManager(database=str(path))}
        key = {}
    # partitioned checks (a result per day) with the resource, unpartitioned with the IO manager
    checks = build_hyper_checks([carriers, flights], partitioned=how == "database_key", **key)
    published = tableau_datasource_asset(
        datasource="Shop", project="Default", deps=[carriers, flights], **key
    )
    everything = [carriers, flights, daily, published, *checks]
    (tmp_path / "server").mkdir()
    with (
        Emulator(tmp_path / "server", tokens={"ci": "secret"}, hyper=hyper) as emulator,
        dg.DagsterInstance.ephemeral() as instance,
    ):
        resources["tableau"] = TableauServerResource(
            server_url=emulator.url, sign_in=TokenSignIn(name="ci", secret="secret")
        )
        first = materialize(everything, resources, instance, "carriers")
        assert first.success, failure(first)
        assert all(e.passed for e in first.get_asset_check_evaluations())
        tags = {
            "dagster/asset_partition_range_start": SIX[0],
            "dagster/asset_partition_range_end": SIX[-1],
        }
        days = materialize(everything, resources, instance, "flights", tags=tags)
        assert days.success, failure(days)
        evaluations = days.get_asset_check_evaluations()
        assert {e.check_name for e in evaluations} == {
            "foreign_keys_resolve",
            "row_count_vs_previous",
        }
        assert all(e.passed for e in evaluations), [e.description for e in evaluations]
        publish = materialize(everything, resources, instance, "shop")
        assert publish.success, failure(publish)
        (event,) = publish.get_asset_materialization_events()
        identity = read_identity(path)
        assert event.materialization.metadata[IDENTITY_KEY].value == identity
        sql = 'SELECT day, COUNT(*) FROM "Extract".flights GROUP BY day ORDER BY day'
        local = query(hyper, path, sql)
        assert [n for _, n in local] == [1, 2, 3, 4, 5, 6]
        assert query(hyper, emulator.data_dir / "Shop.hyper", sql) == local

        home = db if how == "database_key" else hyper_database(path)
        compact(home.hyper, home)  # with the resource's own Hyper and home settings
        assert read_identity(path) == identity, "a compacted file is the same extract"
        assert query(hyper, path, sql) == local
        assert materialize(everything, resources, instance, "daily", partition_key=SIX[2]).success
        assert loaded == {SIX[2]: 3}


def test_a_resource_of_the_wrong_type_or_given_twice_is_named_with_the_fix(tmp_path: Path):
    path = tmp_path / "shop.hyper"
    carriers, _, _ = assets({})
    io_manager = HyperIOManager(database=hyper_database(path))
    checks = build_hyper_checks([carriers], database_key="shop")
    with dg.DagsterInstance.ephemeral() as instance:
        result = materialize(
            [carriers, *checks],
            {"io_manager": io_manager, "shop": io_manager},
            instance,
            "carriers",
        )
    message = failure(result)
    assert "ConfigurationError" in message
    assert "HyperDatabase under resource key 'shop', found a HyperIOManager" in message
    assert "resources={'shop': HyperDatabase(database=...)}" in message

    with pytest.raises(ConfigurationError, match="give the Hyper and home settings to the"):
        HyperIOManager(database=hyper_database(path), hyper=HyperResource())
    with pytest.raises(ConfigurationError, match="needs database="):
        HyperIOManager()


def test_a_lost_extract_is_noticed_not_refilled_silently(tmp_path: Path, hyper: SharedHyper):
    """The issue's scenario: six days written and published, then the file's directory
    emptied (a volume not mounted, a new container). A seventh day's write refuses (the
    file would hold one day while Dagster lists seven), the unpartitioned full refresh
    goes ahead with a warning, and a load, a check and a publish of the file made anew
    fail naming the rebuild; after `dagster asset wipe` and a backfill every row is back."""
    home = tmp_path / "volume"
    home.mkdir()
    path = home / "shop.hyper"
    loaded: dict[str, int] = {}
    carriers, flights, daily = assets(loaded)
    db = hyper_database(path)
    checks = build_hyper_checks(
        [flights], partitioned=False, min_row_ratio=None, database_key="shop"
    )
    published = tableau_datasource_asset(
        datasource="Shop", project="Default", deps=[carriers, flights], database_key="shop"
    )
    everything = [carriers, flights, daily, published, *checks]
    (tmp_path / "server").mkdir()
    with (
        Emulator(tmp_path / "server", tokens={"ci": "secret"}, hyper=hyper) as emulator,
        dg.DagsterInstance.ephemeral() as instance,
    ):
        tableau = TableauServerResource(
            server_url=emulator.url, sign_in=TokenSignIn(name="ci", secret="secret")
        )
        resources = {"io_manager": HyperIOManager(database=db), "shop": db, "tableau": tableau}

        def run(
            select: str | list[str], partition: str | None = None, **kwargs
        ) -> dg.ExecuteInProcessResult:
            return materialize(
                everything, resources, instance, select, partition_key=partition, **kwargs
            )

        assert run("carriers").success
        for day in SIX:
            assert run(["flights", "daily"], day).success
        assert loaded == {day: int(day[-1]) for day in SIX}
        assert run("shop").success
        before = read_identity(path)

        shutil.rmtree(home)  # the volume is not mounted: an empty directory
        home.mkdir()

        seventh = run("flights", "2024-01-07")
        message = failure(seventh)
        assert "ExtractRecreatedError: Writing Extract.flights refused" in message
        assert f"was written to extract {before}" in message
        assert "dagster asset wipe flights" in message
        assert "--partition-range 2024-01-01...2024-01-07" in message
        left = [p.name for p in home.iterdir() if not p.name.endswith(".lock")]
        assert left == [], "a refused write leaves no file, no identity, no outbox"

        refresh = run("carriers")  # rewrites its whole table: goes ahead, loudly
        assert refresh.success
        warnings = [
            r.user_message
            for r in instance.all_logs(refresh.run_id)
            if r.level >= 30 and "goes ahead" in r.user_message
        ]
        assert len(warnings) == 1 and "dagster asset wipe carriers" in warnings[0]
        after = read_identity(path)
        assert after and after != before

        loaded.clear()
        load = run("daily", "2024-01-03")
        assert "ExtractRecreatedError: Loading Extract.flights refused" in failure(load)
        assert f"is extract {after}" in failure(load) and "partition 2024-01-03" in failure(load)
        assert loaded == {}, "nothing was read from the file made anew"

        checked = dg.materialize(
            everything,
            selection=dg.AssetSelection.checks(*checks),
            resources=resources,
            instance=instance,
            raise_on_error=False,
        )
        assert "ExtractRecreatedError: Checking flights refused" in failure(checked)

        publish = run("shop")
        assert "ExtractRecreatedError: Publishing 'Shop' refused" in failure(publish)
        remote = emulator.data_dir / "Shop.hyper"
        sql = 'SELECT COUNT(*) FROM "Extract".flights'
        assert query(hyper, remote, sql) == [[21]], "the server's copy is untouched"

        instance.wipe_assets([flights.key])  # `dagster asset wipe flights`
        backfill = run(
            "flights",
            tags={
                "dagster/asset_partition_range_start": SIX[0],
                "dagster/asset_partition_range_end": SIX[-1],
            },
        )
        assert backfill.success, failure(backfill)
        assert run("daily", "2024-01-03").success
        assert loaded == {"2024-01-03": 3}
        full = run(
            "shop", run_config={"ops": {"shop": {"config": PublishConfig(full=True).model_dump()}}}
        )
        assert full.success, failure(full)
        assert query(hyper, remote, sql) == query(hyper, path, sql) == [[21]]


def test_the_identity_travels_with_a_store_home_and_a_lost_one_is_noticed(
    tmp_path: Path,
    moto_s3: str,
    bucket: str,
):
    """Each run in a new container (an empty working copy) reads the identity from the
    home's current generation; once the home's objects are gone, a write refuses."""
    uri = f"s3://{bucket}/extracts/shop.hyper"
    loaded: dict[str, int] = {}
    _, flights, daily = assets(loaded)

    def container(name: str) -> dict:
        settings = HomeSettings(working_dir=str(tmp_path / name))
        db = HyperDatabase(database=uri, settings=settings)
        return {"io_manager": HyperIOManager(database=db)}

    with dg.DagsterInstance.ephemeral() as instance:
        for n, day in enumerate(SIX[:2]):
            run = materialize(
                [flights], container(f"writer{n}"), instance, "flights", partition_key=day
            )
            assert run.success, failure(run)
        reader = materialize(
            [flights, daily], container("reader"), instance, "daily", partition_key=SIX[1]
        )
        assert reader.success, failure(reader)
        assert loaded == {SIX[1]: 2}

        s3 = boto3.resource("s3", endpoint_url=moto_s3).Bucket(bucket)
        s3.objects.all().delete()  # the home is lost
        lost = materialize(
            [flights], container("writer2"), instance, "flights", partition_key=SIX[2]
        )
        assert "ExtractRecreatedError: Writing Extract.flights refused" in failure(lost)
        assert f"{uri} is missing" in failure(lost)
        left = [o.key for o in s3.objects.all() if not o.key.endswith("/lease.json")]
        assert left == [], "the refused write committed nothing"
