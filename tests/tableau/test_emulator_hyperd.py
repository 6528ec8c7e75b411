"""The emulator outlives its hyperd: a crash fails the job it ran, never the ones after."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from helpers import crash_hyperd
from tableauhyperapi import SqlType, TableDefinition

from hyper_assets._engine.process import HyperSettings, SharedHyper
from hyper_assets.emulator import Emulator
from hyper_assets.tableau._dagster.resource import TableauServerResource, TokenSignIn
from hyper_assets.tableau.actions import Insert

Column = TableDefinition.Column


def test_jobs_after_a_hyperd_crash_run_on_a_new_hyperd(tmp_path: Path, hyper_files: Any) -> None:
    own = SharedHyper(HyperSettings(log_dir=str(tmp_path / "logs")))
    (tmp_path / "server").mkdir()
    cols = [Column("id", SqlType.int())]
    base = hyper_files.create(tmp_path / "base.hyper", {("Extract", "t"): (cols, [(1,)])})
    rows = hyper_files.create(tmp_path / "rows.hyper", {("Extract", "new"): (cols, [(2,)])})
    insert = [Insert(source_table="new", target_table="t")]
    with Emulator(tmp_path / "server", tokens={"ci": "s"}, hyper=own) as emulator:
        tableau = TableauServerResource(
            server_url=emulator.url, sign_in=TokenSignIn(name="ci", secret="s")
        )
        with tableau.client() as client:
            project = client.project("Default").id
            source = client.publish_file(base, "Sales", project, overwrite=True)
            job = client.update_data(source.id, insert, request_id="one", payload=rows)
            client.wait_for_job(job.id)
            crash_hyperd(own, tmp_path / "scratch.hyper")
            job = client.update_data(source.id, insert, request_id="two", payload=rows)
            client.wait_for_job(job.id)
    own.close()
    assert hyper_files.read(tmp_path / "server" / "Sales.hyper") == {
        "Extract.t": [(1,), (2,), (2,)]
    }
