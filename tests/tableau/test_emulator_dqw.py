"""The real tableauserverclient's data quality warning calls against the emulator."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import tableauserverclient as TSC
from helpers import tsc_publish
from tableauhyperapi import SqlType, TableDefinition

Column = TableDefinition.Column


@pytest.fixture
def datasource(server: TSC.Server, hyper_files: Any, tmp_path: Path) -> Any:
    cols = [Column("id", SqlType.int())]
    path = hyper_files.create(tmp_path / "dqw.hyper", {("Extract", "a"): (cols, [(1,)])})
    return tsc_publish(server, path, "Watched")


def listed(server: TSC.Server, datasource: Any) -> list[tuple[str, str, bool, bool]]:
    server.datasources.populate_dqw(datasource)
    return [(w.warning_type, w.message, w.active, w.severe) for w in datasource.dqws]


def test_add_list_update_and_delete_through_tsc(server: TSC.Server, datasource: Any) -> None:
    assert listed(server, datasource) == []
    warning = TSC.DQWItem(TSC.DQWItem.WarningType.STALE, "Late by 3 hours", True, False)
    (added,) = server.datasources.add_dqw(datasource, warning)
    assert added.id and added.content_id == datasource.id
    assert added.content_type == "DATASOURCE" and added.owner_id and added.created_at
    assert listed(server, datasource) == [("STALE", "Late by 3 hours", True, False)]

    with pytest.raises(TSC.ServerResponseError) as refused:  # one per content on 2024.2
        server.datasources.add_dqw(datasource, TSC.DQWItem("WARNING", "second"))
    assert refused.value.code == "409000"

    changed = TSC.DQWItem(TSC.DQWItem.WarningType.WARNING, "Row counts dropped", True, True)
    (updated,) = server.datasources.update_dqw(datasource, changed)
    assert (updated.id, updated.severe) == (added.id, True)
    assert listed(server, datasource) == [("WARNING", "Row counts dropped", True, True)]

    server.datasources.delete_dqw(datasource)
    assert listed(server, datasource) == []


def test_one_warning_by_id_and_refusals(server: TSC.Server, datasource: Any) -> None:
    """Query, update and delete by the warning's id (the documented paths), over raw HTTP
    with TSC's session; a bad type and an unknown data source are refused."""
    (added,) = server.datasources.add_dqw(datasource, TSC.DQWItem("MAINTENANCE", "Moving"))
    base = f"{server.baseurl}/sites/{server.site_id}/dataQualityWarnings"
    session = server.session
    headers = {"X-Tableau-Auth": server.auth_token}

    got = session.get(f"{base}/{added.id}", headers=headers)
    assert got.status_code == 200
    (one,) = TSC.DQWItem.from_response(got.content, server.namespace)
    assert (one.id, one.warning_type, one.message) == (added.id, "MAINTENANCE", "Moving")

    body = b'<tsRequest><dataQualityWarning isActive="false"/></tsRequest>'
    put = session.put(f"{base}/{added.id}", data=body, headers=headers)
    assert put.status_code == 200
    assert listed(server, datasource) == [("MAINTENANCE", "Moving", False, False)]

    bad = b'<tsRequest><dataQualityWarning type="ODD" isActive="true"/></tsRequest>'
    refused = session.post(f"{base}/datasource/{datasource.id}", data=bad, headers=headers)
    assert refused.status_code == 400 and b"ODD" in refused.content
    missing = session.get(f"{base}/datasource/no-such-id", headers=headers)
    assert missing.status_code == 404

    assert session.delete(f"{base}/{added.id}", headers=headers).status_code == 204
    assert listed(server, datasource) == []
    assert session.delete(f"{base}/{added.id}", headers=headers).status_code == 404
