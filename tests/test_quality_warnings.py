"""Failed checks shown in Tableau: the sensor sets and removes a data quality warning on the
published data source of a real emulator, read back with the real tableauserverclient."""

from __future__ import annotations

from pathlib import Path

import dagster as dg
import pyarrow as pa
import pytest
import tableauserverclient as TSC

from hyper_assets import (
    ConfigurationError,
    HyperIOManager,
    TableauServerResource,
    TokenSignIn,
    build_hyper_checks,
    publish_freshness_check,
    quality_warning_sensor,
    tableau_datasource_asset,
)
from hyper_assets._engine.process import SharedHyper
from hyper_assets.emulator import Emulator


@pytest.mark.slow
def test_a_failing_blocking_check_puts_a_warning_on_and_passing_removes_it(
    tmp_path: Path, hyper: SharedHyper
) -> None:
    codes = ["AA", "B6", "UA"]

    @dg.asset(metadata={"primary_key": ["carrier"]})
    def carriers() -> pa.Table:
        return pa.table({"carrier": pa.array(codes, pa.string())})

    published = tableau_datasource_asset(datasource="Airlines", project="Default", deps=[carriers])
    table_checks = build_hyper_checks([carriers])
    fresh = publish_freshness_check(published, max_lag_minutes=0)
    sensor = quality_warning_sensor(published, [*table_checks, fresh])
    database = tmp_path / "star.hyper"
    io_manager = HyperIOManager(database=str(database))
    data_dir = tmp_path / "server"
    data_dir.mkdir()
    with (
        Emulator(data_dir, tokens={"ci": "secret", "tsc": "other"}, hyper=hyper) as emulator,
        dg.DagsterInstance.ephemeral() as instance,
    ):
        tableau = TableauServerResource(
            server_url=emulator.url, sign_in=TokenSignIn(name="ci", secret="secret")
        )
        resources = {"io_manager": io_manager, "tableau": tableau}
        cursor: list[str | None] = [None]

        def run(selection: dg.AssetSelection) -> dg.ExecuteInProcessResult:
            return dg.materialize(
                [carriers, published, *table_checks, fresh],
                selection=selection,
                resources=resources,
                instance=instance,
                raise_on_error=False,
            )

        def tick() -> str | None:
            """One evaluation of the sensor; its skip reason, if it skipped."""
            context = dg.build_sensor_context(
                instance=instance, cursor=cursor[0], resources={"tableau": tableau}
            )
            result = sensor.evaluate_tick(context)  # as the daemon evaluates it
            assert not result.run_requests
            cursor[0] = result.cursor or cursor[0]
            return result.skip_message

        server = TSC.Server(emulator.url, use_server_version=True)  # its own token: a
        # token has one session at a time
        server.auth.sign_in(TSC.PersonalAccessTokenAuth("tsc", "other", site_id=""))

        def warnings() -> list[tuple[str, str, bool, bool]]:
            (item,) = [d for d in TSC.Pager(server.datasources) if d.name == "Airlines"]
            server.datasources.populate_dqw(item)
            return [(w.warning_type, w.message, w.active, w.severe) for w in item.dqws]

        write_and_publish = dg.AssetSelection.assets(carriers, published).without_checks()
        write_and_publish |= dg.AssetSelection.checks(*table_checks)
        assert tick() == "Data source 'Airlines' is not published yet."
        assert run(write_and_publish).success
        passing = "Data quality warning on 'Airlines' absent: every watched check passes"
        assert tick() == passing and warnings() == []

        codes[:] = ["AA", "UA", "UA"]
        failed = run(write_and_publish)
        assert not failed.success  # the blocking check stopped the publish
        message = (
            "1 check(s) failed: carriers primary_key_unique: 1 key value(s) repeat (1 extra row(s))"
        )
        assert tick() == f"Data quality warning on 'Airlines' added: {message}"
        assert warnings() == [("WARNING", f"[hyper-assets] {message}", True, True)]
        assert tick() == "No check changed its result."

        codes[:] = ["AA", "UA"]
        assert run(write_and_publish).success
        assert tick() == passing.replace("absent", "removed") and warnings() == []

        codes[:] = ["AA"]  # written, not published: the published copy lags past 0 minutes
        assert run(dg.AssetSelection.assets(carriers).without_checks()).success
        assert not run(dg.AssetSelection.checks(fresh)).get_asset_check_evaluations()[0].passed
        assert (tick() or "").startswith("Data quality warning on 'Airlines' added: ")
        ((kind, text, active, severe),) = warnings()
        assert (kind, active, severe) == ("STALE", True, False)
        assert text.startswith("[hyper-assets] 1 check(s) failed: airlines published_copy_fresh: ")
        server.auth.sign_out()


def test_the_sensor_needs_a_publish_asset_and_a_check_to_watch() -> None:
    @dg.asset
    def table() -> None: ...

    published = tableau_datasource_asset(datasource="T", project="Default", deps=[table])
    with pytest.raises(ConfigurationError, match="no datasource and project metadata"):
        quality_warning_sensor(table, [])
    with pytest.raises(ConfigurationError, match="none of the checks given is blocking"):
        quality_warning_sensor(published, [])
