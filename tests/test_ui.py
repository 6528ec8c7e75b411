"""The demo in the Dagster UI after `make demo`, as `make ui` serves it, driven by Debian's
Chromium: every asset listed and materialised, the flights' row count, a partition's own
count, a check's description and result, the publish's table of sent rows and its link;
then a dimension materialised with the Materialize button, the run followed to success,
the table read back; SIGINT then stops demo.ui and all of dagster dev.

Needs /usr/bin/chromium (`apt-get install chromium`); never `playwright install`.
"""

from __future__ import annotations

import datetime as dt
import os
import re
import shutil
import signal
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from dagster_ui import DEMO_DAYS, demo_ui
from helpers import query, source_counts
from playwright.sync_api import Page, expect, sync_playwright

from demo.assets import airlines
from demo.checks import build_checks
from demo.data import source
from hyper_assets._engine.process import SharedHyper

pytestmark = pytest.mark.slow

CHROMIUM = Path("/usr/bin/chromium")
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]
MATERIALIZED = "Materialized"
#: Every asset of the demo: its group, the kinds the catalog tags it with, its status there.
ASSETS = {
    "airlines": ("dimensions", ["hyper", "Spark"], MATERIALIZED),
    "airports": ("dimensions", ["hyper", "Spark"], MATERIALIZED),
    "planes": ("dimensions", ["hyper", "Spark"], MATERIALIZED),
    "flights": ("facts", ["hyper", "Spark"], "365 partitions"),
    "weather": ("facts", ["hyper", "Spark"], "365 partitions"),
    "tableau/flights": ("tableau", ["Tableau"], MATERIALIZED),
    "tableau/weather": ("tableau", ["Tableau"], MATERIALIZED),
}
SENSOR_DAY = "2013-12-30"  # the day the demo's sensors ran: its partition has its own count
BACKFILLED_DAY = "2013-12-15"  # a day of the demo's one-run backfill
RUN_ENDED = re.compile(r"^run_(success|failed|canceled)$")  # the run page's status icon
expect.set_options(timeout=20_000)  # pages load slowly on a busy 2-CPU machine


def _require_chromium() -> None:
    """Skips where Chromium cannot be had; fails where `make browser` could have installed it."""
    if CHROMIUM.is_file():
        return
    if os.geteuid() == 0 and shutil.which("apt-get"):
        pytest.fail(f"{CHROMIUM} is missing: run `make browser` (apt-get install chromium)")
    pytest.skip(f"{CHROMIUM} is missing and only root can install it (apt-get install chromium)")


@contextmanager
def screenshot_on_failure(page: Page, path: Path) -> Iterator[None]:
    """Saves what the browser shows when the block fails; the path goes into the error."""
    try:
        yield
    except BaseException as error:
        page.screenshot(path=path, full_page=True)
        error.add_note(f"screenshot of the page: {path}")
        raise


@pytest.mark.timeout(1200)  # its waits (dagster dev's start among them) on a loaded machine
def test_ui_shows_what_the_demo_did_and_materialises_a_dimension(
    demo_data: Path, tmp_path: Path, hyper: SharedHyper
):
    _require_chromium()
    data = tmp_path / "data"
    shutil.copytree(demo_data, data)
    # Stopped with SIGINT, which demo.ui (started as `&` starts it) came in ignoring: the
    # daemon test stops it with SIGTERM; both fail if dagster dev's group outlives it.
    with demo_ui(data, tmp_path, stop=signal.SIGINT) as ui, sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        page = browser.new_page(viewport={"width": 1400, "height": 900})
        # the demo's instance shows no "Join the Dagster community" dialog over the pages
        assert ui.graphql("{ shouldShowNux }") == {"shouldShowNux": False}
        with screenshot_on_failure(page, tmp_path / "failure.png"):
            page.goto(f"{ui.url}/assets")
            check_catalog(page)
            nodes = ui.graphql("{ assetNodes { assetKey { path } } }")["assetNodes"]
            assert sorted("/".join(n["assetKey"]["path"]) for n in nodes) == sorted(ASSETS)
            check_flights_row_counts(page, ui.url)
            check_a_check(page, ui.url)
            check_each_days_check(page, ui.url)
            check_the_publish(page, ui.url)
            page.goto(f"{ui.url}/assets")
            materialise_airlines(page)
            check_airlines_checks(page, ui.url)

    carriers = query(hyper, data / "flights.hyper", 'SELECT carrier FROM "Extract"."airlines"')
    assert sorted(c for (c,) in carriers) == sorted(source("airlines")["carrier"].to_pylist())


def metadata_row(page: Page, key: str):
    """The row of metadata entry `key` in the metadata table on the page."""
    return page.locator("tr").filter(has=page.get_by_text(key, exact=True)).first


def check_flights_row_counts(page: Page, url: str) -> None:
    """The overview shows the table's rows; the sensors' day and a day of the one-run
    backfill show their own counts."""
    total = sum(source_counts("flights", DEMO_DAYS).values())
    page.goto(f"{url}/assets/flights")
    row_count = page.get_by_text("Row count", exact=True).locator("xpath=..")
    expect(row_count).to_contain_text(f"{total:,}")
    backfilled = total - source_counts("flights", [dt.date.fromisoformat(SENSOR_DAY)])[SENSOR_DAY]
    # Each day's own count; the table's as it stood after that run (the sensors' day last).
    for partition, table_rows in ((SENSOR_DAY, total), (BACKFILLED_DAY, backfilled)):
        page.goto(f"{url}/assets/flights?view=partitions&partition={partition}")
        day = source_counts("flights", [dt.date.fromisoformat(partition)])[partition]
        expect(metadata_row(page, "dagster/partition_row_count")).to_contain_text(str(day))
        expect(metadata_row(page, "dagster/row_count")).to_contain_text(str(table_rows))
    page.goto(f"{url}/assets/flights")
    carrier = page.get_by_role("row", name=re.compile(r"^carrier\b"))
    expect(carrier).to_contain_text("Airline, a key of airlines.")
    expect(carrier).to_contain_text("foreign key -> Extract.airl")


def check_a_check(page: Page, url: str) -> None:
    """A check's page shows what it checks and its latest result: the partitioned check's,
    of the day the last run wrote."""
    page.goto(f"{url}/assets/flights?view=checks&checkDetail=row_count_vs_previous")
    expect(page.get_by_text(re.compile(r"^Each partition the run wrote has rows"))).to_be_visible()
    expect(page.get_by_text("Passed", exact=True).first).to_be_visible()
    expect(page.get_by_text(re.compile(r"^968 rows \(the previous"))).to_be_visible()


def check_each_days_check(page: Page, url: str) -> None:
    """The partitioned check's Partitions tab: each day the demo wrote passed, the day
    that has not landed is missing, and a day of the one-run backfill has its own result."""
    page.goto(f"{url}/assets/flights?view=checks&checkDetail=row_count_vs_previous")
    page.locator("button[role=tab]", has_text="Partitions").click()
    passed, missing = len(DEMO_DAYS), 365 - len(DEMO_DAYS)
    for status in (f"Passed ({passed})", f"Missing ({missing})", "Failed (0)", "Skipped (0)"):
        expect(page.get_by_text(status, exact=True)).to_be_visible()
    page.get_by_placeholder("Filter by partition…").fill(BACKFILLED_DAY)
    page.get_by_text(BACKFILLED_DAY, exact=True).first.click()
    day = dt.date.fromisoformat(BACKFILLED_DAY)
    rows = source_counts("flights", [day])[BACKFILLED_DAY]
    expect(page.get_by_text(f"{rows} rows (no previous run).", exact=True)).to_be_visible()


def check_the_publish(page: Page, url: str) -> None:
    """The publish of "Flights" shows its table of sent rows (its fact's day only), where it
    went, and a link to the data source."""
    page.goto(f"{url}/assets/tableau/flights")
    sent = page.locator("table").filter(has=page.get_by_role("columnheader", name="action"))
    expect(sent.first).to_be_visible()
    counts = {
        t: source_counts(t, [dt.date.fromisoformat(SENSOR_DAY)])[SENSOR_DAY] for t in ("flights",)
    }
    for table, rows in counts.items():
        row = sent.first.get_by_role(
            "row", name=re.compile(rf"^Extract\.{table}\s+window\s+{rows}\b")
        )
        expect(row).to_be_visible()
    expect(metadata_row(page, "project")).to_contain_text("Default")
    link = metadata_row(page, "datasource_url").get_by_role("link").first
    expect(link).to_have_attribute("href", re.compile(r"/#/site/flights/datasources/\d{7}$"))
    expect(metadata_row(page, "tableau_job_ids")).to_contain_text(re.compile(r"[0-9a-f-]{36}"))


def check_catalog(page: Page) -> None:
    """Each asset of the demo is listed with its kinds, its group and its status."""
    for name, (group, kinds, status) in ASSETS.items():
        link = page.locator(f'a[href="/assets/{name}"]')
        expect(link).to_be_visible()
        tags = link.locator("xpath=ancestor::div[.//*[@data-tooltip]][1]").locator("[data-tooltip]")
        shown = tags.evaluate_all("tags => tags.map(t => t.dataset.tooltip)")
        assert sorted(shown) == sorted(kinds), name
        row = link.locator("xpath=ancestor::div[.//a[starts-with(@href, '/locations/')]][1]")
        expect(row.get_by_role("link", name=re.compile(rf"\b{group}$"))).to_be_visible()
        expect(row).to_contain_text(status)


def materialise_airlines(page: Page) -> None:
    """Opens the dimension, clicks Materialize and follows the run until it ends, successfully."""
    page.locator('a[href="/assets/airlines"]').click()
    expect(page.get_by_role("row", name=re.compile(r"^primary_key\b"))).to_be_visible()
    page.get_by_role("button", name=re.compile(r"\bMaterialize$")).click()
    notifications = page.get_by_role("region", name=re.compile("Notifications"))
    notifications.get_by_role("link", name="View").click()
    status = page.get_by_role("img", name=RUN_ENDED)
    expect(status).to_be_visible(timeout=180_000)  # Spark starts in a fresh process
    assert status.get_attribute("aria-label") == "run_success", f"run {page.url} did not succeed"


def check_airlines_checks(page: Page, url: str) -> None:
    """Every check of the dimension ran in that run and passed."""
    checks = [k.name for c in build_checks() for k in c.check_keys if k.asset_key == airlines.key]
    page.goto(f"{url}/assets/airlines?view=checks")
    expect(page.get_by_text(f"Checks ({len(checks)})")).to_be_visible()
    for check in checks:
        expect(page.get_by_title(check, exact=True).first).to_be_visible()
    expect(page.get_by_text("Succeeded", exact=True)).to_have_count(len(checks))
