"""The refusal to overwrite a data source not published from this file states the rows at
stake: the server's copy (downloaded from the emulator and counted) against the file's."""

from __future__ import annotations

import zipfile
from pathlib import Path
from typing import Any

import pytest
import tableauserverclient as TSC
from tableauhyperapi import NOT_NULLABLE, SqlType, TableDefinition

from hyper_assets import HyperResource, PublishError
from hyper_assets.emulator import Emulator
from hyper_assets.tableau._dagster.resource import TableauServerResource, TokenSignIn
from hyper_assets.tableau._publish.publish import Publisher
from hyper_assets.tableau._rest.client import TableauClient

SITE, TOKEN = "analytics", ("raw", "raw-secret")  # conftest.py's; TSC signs in as "ci"

Column = TableDefinition.Column
NAME, PROJECT = "Flights", "Default"


def flights_file(files: Any, path: Path, flights: int, carriers: int) -> Path:
    """A star: `flights` rows referencing `carriers`."""
    path.parent.mkdir(exist_ok=True)
    carrier = [Column("id", SqlType.int(), NOT_NULLABLE)]
    flight = [Column("n", SqlType.int()), Column("carrier", SqlType.int())]
    return files.create(
        path,
        {
            ("Extract", "flights"): (flight, [(n, n % carriers) for n in range(flights)]),
            ("Extract", "carriers"): (carrier, [(c,) for c in range(carriers)]),
        },
        references=[("flights", "carrier", "carriers")],
    )


def client(emulator: Emulator) -> TableauClient:
    sign_in = TokenSignIn(name=TOKEN[0], secret=TOKEN[1])
    return TableauServerResource(server_url=emulator.url, site=SITE, sign_in=sign_in).client()


def refusal(emulator: Emulator, hyper_files: Any, tmp_path: Path) -> tuple[str, Path]:
    """Publish a full file from A, then refuse one of B's; the message and the server file."""
    full = flights_file(hyper_files, tmp_path / "a" / "full.hyper", 2184, 6)
    day = flights_file(hyper_files, tmp_path / "b" / "day.hyper", 2, 1)
    hyper = HyperResource()
    with client(emulator) as tableau:
        Publisher(full, hyper, tableau, NAME, PROJECT).publish()
        with pytest.raises(PublishError) as refused:
            Publisher(day, hyper, tableau, NAME, PROJECT).publish()
    return str(refused.value), emulator.datasource_file(NAME, site=SITE)


def test_the_refusal_states_the_rows_of_both_copies(
    emulator: Emulator, hyper_files: Any, tmp_path: Path
) -> None:
    emulator.faults.fail_requests("GET", r"/content$", status=503)  # retried, as any GET
    message, stored = refusal(emulator, hyper_files, tmp_path)
    assert (
        "the server's copy holds 2,190 rows (Extract.carriers 6, Extract.flights 2,184); "
        "this file holds 3 rows (Extract.carriers 1, Extract.flights 2). "
        "Publish with full=True to overwrite it" in message
    )
    server = hyper_files.read(stored)  # unchanged: A's rows
    assert server == hyper_files.read(tmp_path / "a" / "full.hyper")
    assert len(server["Extract.flights"]) == 2184
    assert not list((tmp_path / "b").glob(".server-copy-*"))  # the download is gone


def test_a_failed_download_still_refuses_and_says_why(
    emulator: Emulator, hyper_files: Any, tmp_path: Path
) -> None:
    emulator.faults.fail_requests("GET", r"/content$", status=403)
    message, stored = refusal(emulator, hyper_files, tmp_path)
    assert "the server's copy holds an unknown number of rows (its download failed: " in message
    assert "403 403000 Injected fault" in message
    assert "this file holds 3 rows (Extract.carriers 1, Extract.flights 2)." in message
    assert len(hyper_files.read(stored)["Extract.flights"]) == 2184


def test_tsc_downloads_the_stored_file(
    server: TSC.Server, emulator: Emulator, hyper_files: Any, tmp_path: Path
) -> None:
    published = flights_file(hyper_files, tmp_path / "full.hyper", 5, 2)
    with client(emulator) as tableau:
        Publisher(published, HyperResource(), tableau, NAME, PROJECT).publish()
    (item,) = [d for d in TSC.Pager(server.datasources) if d.name == NAME]
    downloaded = Path(server.datasources.download(item.id, tmp_path))
    assert downloaded.name == f"{NAME}.hyper"
    assert hyper_files.read(downloaded) == hyper_files.read(published)


def test_the_client_takes_the_hyper_out_of_a_tdsx(
    emulator: Emulator, hyper_files: Any, tmp_path: Path
) -> None:
    """A real server may send a .tdsx (a zip holding the .tds and the .hyper)."""
    published = flights_file(hyper_files, tmp_path / "full.hyper", 5, 2)
    with client(emulator) as tableau:
        Publisher(published, HyperResource(), tableau, NAME, PROJECT).publish()
    stored = emulator.datasource_file(NAME, site=SITE)
    tdsx = tmp_path / "Flights.tdsx"
    with zipfile.ZipFile(tdsx, "w") as archive:
        archive.writestr("Flights.tds", "<datasource/>")
        archive.write(stored, "Data/Extracts/Flights.hyper")
    tdsx.replace(stored)  # the emulator now serves the .tdsx as the data source's file
    (tmp_path / "into").mkdir()
    with client(emulator) as tableau:
        source = tableau.find_datasource(NAME, tableau.project(PROJECT).id)
        assert source is not None
        got = tableau.download_datasource(source.id, tmp_path / "into", max_bytes=2**20)
        assert hyper_files.read(got) == hyper_files.read(published)
        with pytest.raises(Exception, match="larger than 100 bytes"):
            tableau.download_datasource(source.id, tmp_path / "into", max_bytes=100)


def test_a_download_whose_session_expired_signs_in_again(
    emulator: Emulator, hyper_files: Any, tmp_path: Path
) -> None:
    published = flights_file(hyper_files, tmp_path / "full.hyper", 5, 2)
    (tmp_path / "into").mkdir()
    with client(emulator) as tableau:
        Publisher(published, HyperResource(), tableau, NAME, PROJECT).publish()
        source = tableau.find_datasource(NAME, tableau.project(PROJECT).id)
        assert source is not None
        emulator.faults.expire_sessions_before("GET", r"/content$")
        got = tableau.download_datasource(source.id, tmp_path / "into", max_bytes=2**20)
        assert hyper_files.read(got) == hyper_files.read(published)
        assert not emulator.faults.take_expiry("GET", f"/datasources/{source.id}/content")
