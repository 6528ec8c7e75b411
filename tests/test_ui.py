"""The demo in the Dagster UI, driven by Debian's Chromium: every asset listed, a dimension
materialised with the Materialize button, the run followed to success, the table read back.

Needs /usr/bin/chromium (`apt-get install chromium`); never `playwright install`.
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from pathlib import Path

import httpx
import pytest
from helpers import query
from playwright.sync_api import Page, expect, sync_playwright

from demo.assets import airlines
from demo.checks import build_checks
from demo.data import source
from hyper_assets.process import SharedHyper

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[1]
CHROMIUM = Path("/usr/bin/chromium")
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]
NEVER = "Never materialized"
#: Every asset of the demo: its group, the kinds the catalog tags it with, its status there.
ASSETS = {
    "airlines": ("dimensions", ["hyper", "Spark"], NEVER),
    "airports": ("dimensions", ["hyper", "Spark"], NEVER),
    "planes": ("dimensions", ["hyper", "Spark"], NEVER),
    "flights": ("facts", ["hyper", "Spark"], "365 partitions"),
    "weather": ("facts", ["hyper", "Spark"], "365 partitions"),
    "nycflights13": ("tableau", ["Tableau"], NEVER),
}
RUN_ENDED = re.compile(r"^run_(success|failed|canceled)$")  # the run page's status icon
expect.set_options(timeout=20_000)  # pages load slowly on a busy 2-CPU machine


def _require_chromium() -> None:
    """Skips where Chromium cannot be had; fails where `make browser` could have installed it."""
    if CHROMIUM.is_file():
        return
    if os.geteuid() == 0 and shutil.which("apt-get"):
        pytest.fail(f"{CHROMIUM} is missing: run `make browser` (apt-get install chromium)")
    pytest.skip(f"{CHROMIUM} is missing and only root can install it (apt-get install chromium)")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextmanager
def dagster_dev(tmp_path: Path, landing: Path, database: Path) -> Iterator[str]:
    """`dagster dev` on the demo with a throwaway instance; yields the UI's URL.

    Its processes share one process group, stopped with SIGINT, then SIGKILL.
    """
    home = tmp_path / "dagster_home"
    home.mkdir()
    (home / "dagster.yaml").write_text("telemetry:\n  enabled: false\n")
    port = _free_port()
    env = {
        **os.environ,
        "DAGSTER_HOME": str(home),
        "DEMO_LANDING_DIR": str(landing),
        "DEMO_DATABASE": str(database),
        "SPARK_MASTER": "local[1]",
        "SPARK_LOCAL_IP": "127.0.0.1",
    }
    dagster = str(Path(sys.executable).with_name("dagster"))
    command = [dagster, "dev", "-w", "workspace.yaml", "-h", "127.0.0.1", "-p", str(port)]
    log = tmp_path / "dagster-dev.log"
    with log.open("wb") as out:
        server = subprocess.Popen(
            command, cwd=ROOT, env=env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True
        )
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 90
        while not _answers(f"{url}/server_info"):
            if server.poll() is not None or time.monotonic() > deadline:
                pytest.fail(f"dagster dev did not come up; its log ({log}):\n{log.read_text()}")
            time.sleep(0.5)
        yield url
    finally:
        _stop_group(server)


def _answers(url: str) -> bool:
    try:
        return httpx.get(url, timeout=2).status_code == 200
    except httpx.TransportError:
        return False


def _stop_group(process: subprocess.Popen) -> None:
    """SIGINT to the group, then SIGKILL to whatever is left of it."""
    for sig, grace in ((signal.SIGINT, 5), (signal.SIGKILL, 10)):
        try:
            os.killpg(process.pid, sig)
        except ProcessLookupError:
            return
        with suppress(subprocess.TimeoutExpired):
            process.wait(timeout=grace)


@contextmanager
def screenshot_on_failure(page: Page, path: Path) -> Iterator[None]:
    """Saves what the browser shows when the block fails; the path goes into the error."""
    try:
        yield
    except BaseException as error:
        page.screenshot(path=path, full_page=True)
        error.add_note(f"screenshot of the page: {path}")
        raise


def test_ui_lists_every_asset_and_materialises_a_dimension(tmp_path: Path, hyper: SharedHyper):
    _require_chromium()
    landing, database = tmp_path / "landing", tmp_path / "flights.hyper"
    subprocess.run(
        [sys.executable, "-m", "demo.arrive", "--through", "2013-01-02", "--landing", landing],
        cwd=ROOT,
        check=True,
        capture_output=True,
    )
    with (
        dagster_dev(tmp_path, landing, database) as url,
        sync_playwright() as playwright,
    ):
        browser = playwright.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        page = browser.new_page(viewport={"width": 1400, "height": 900})
        # the "Join the Dagster community" dialog of a fresh instance covers the page
        page.add_locator_handler(
            page.get_by_role("button", name="Skip", exact=True),
            lambda skip: skip.click(),
        )
        with screenshot_on_failure(page, tmp_path / "failure.png"):
            page.goto(f"{url}/assets")
            check_catalog(page)
            materialise_airlines(page)
            check_airlines_checks(page, url)

    carriers = query(hyper, database, 'SELECT carrier FROM "Extract"."airlines" ORDER BY 1')
    assert [c for (c,) in carriers] == sorted(source("airlines")["carrier"].to_pylist())


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
