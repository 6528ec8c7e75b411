"""The files a publish keeps beside the `.hyper` carry a format version.

`plan.json`, `published.json`, the outbox's state and change records: one of a version this
library does not know (written by a newer one) is refused, naming the file, and nothing
changes; one without a version (as versions before this one wrote them) is version 1, so
an existing user's unfinished plan, publish state and outbox survive the upgrade.
"""

import json
import re
from pathlib import Path

import pytest
from sales_world import Setup, datasource_dir, published_base, some_changes

from hyper_assets import UnknownFormatVersionError
from hyper_assets._rows.outbox import Outbox


def unfinished_plan(setup: Setup) -> None:
    """Changes in a saved update plan whose batch the server never took (503 to the end)."""
    published_base(setup)
    some_changes(setup, 1)
    setup.emulator.faults.fail_requests("PATCH", r"/data$", status=503, count=10**6)
    with pytest.raises(Exception, match="503"):
        setup.publish()
    setup.emulator.faults.clear()


def saved_files(setup: Setup) -> dict[str, Path]:
    outbox = Outbox(setup.database).directory
    home = datasource_dir(setup)
    records = sorted(outbox.glob("[0-9]*[0-9].json"))
    assert len(records) == 3
    return {
        "published.json": home / "published.json",
        "plan.json": home / "plan" / "plan.json",
        "outbox record": records[0],
        "outbox state": outbox / "state.json",
    }


def everything(setup: Setup) -> dict[str, bytes]:
    """The file, the outbox with the plan and state, and the emulator's copy, byte for byte."""
    folder = Outbox(setup.database).directory
    paths = [setup.database, setup.remote(), *(p for p in folder.rglob("*") if p.is_file())]
    return {str(p): p.read_bytes() for p in paths}


@pytest.mark.parametrize("saved", ["published.json", "plan.json", "outbox record", "outbox state"])
def test_a_file_of_an_unknown_format_version_is_refused_and_nothing_changes(
    setup: Setup, saved: str
) -> None:
    unfinished_plan(setup)
    path = saved_files(setup)[saved]
    body = json.loads(path.read_text())
    assert body["format_version"] == 1
    path.write_text(json.dumps(body | {"format_version": 2}))
    before = everything(setup)
    named = rf"{re.escape(str(path))} has format version 2.*reads version 1 only"
    with pytest.raises(UnknownFormatVersionError, match=named):
        setup.publish()
    assert everything(setup) == before


def test_files_without_a_format_version_are_version_1_and_the_plan_resumes(
    setup: Setup,
) -> None:
    unfinished_plan(setup)
    for path in saved_files(setup).values():
        body = json.loads(path.read_text())
        del body["format_version"]  # as hyper-assets wrote them before versions
        path.write_text(json.dumps(body))
    resumed = setup.publish()
    assert (resumed["publish"], resumed["changes_sent"]) == ("update", 3)
    setup.assert_equal()
    assert setup.publish()["publish"] == "none"
