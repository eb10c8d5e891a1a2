"""The web UI after a demo run: headless Debian chromium, driven by Playwright, on `dagster dev`
served on loopback from the demo's instance. Chromium comes from `scripts/setup.sh`."""

from __future__ import annotations

from pathlib import Path

import pytest
from playwright.sync_api import sync_playwright

from testkit.dagster_dev import start_dagster_dev, stop_dagster_dev
from testkit.datasets import recipe_lake
from tokenmill.cli.demo import land_demo_crawl
from tokenmill.cli.runner import local_instance, materialize_all, register
from tokenmill.crawl.units import registered_crawls, registered_units
from tokenmill.storage.lake import Lake
from tokenmill.storage.layout import MARKER

pytestmark = [pytest.mark.integration, pytest.mark.timeout(600)]

CHROMIUM = Path("/usr/bin/chromium")
# Playwright adds --headless itself; the rest keeps a test browser off the network and quiet.
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
STAGES = ["raw_crawl", "cleaned", "deduplicated", "tokenized_shards"]
TIMEOUT_MS = 60_000


def run_demo(root: Path, crawls: dict[str, int]) -> int:
    """Land small demo crawls (files per crawl), register them in units of 2 files and run
    every stage on the instance and lake under `root`, as `tokenmill demo` does; returns the
    number of units."""
    with pytest.MonkeyPatch.context() as env:
        env.setenv("TOKENMILL_LAKE_URL", str(root / "lake"))
        env.setenv("DAGSTER_HOME", str(root / "dagster_home"))
        lake = Lake.from_url(str(root / "lake"))
        instance = local_instance()
        try:
            units = 0
            for seed, (crawl, files) in enumerate(crawls.items()):
                land_demo_crawl(lake, crawl, files, pages_per_file=15, seed=seed)
                units += len(register(instance, lake, crawl, files_per_unit=2).units)
            assert all(run.success for run in materialize_all(instance, lake))
        finally:
            instance.dispose()
    return units


@pytest.fixture(scope="module")
def ui(tmp_path_factory):
    """`dagster dev` on the instance a small demo run just used; yields (url, demo units, the
    lake as the project's recipe sees it)."""
    if not CHROMIUM.exists():
        pytest.skip(f"{CHROMIUM} is absent: `bash scripts/setup.sh` installs chromium")
    root = tmp_path_factory.mktemp("webui")
    # Two crawls of different sizes: the partitions tab counts exactly their units.
    units = run_demo(root, {"CC-MAIN-UI-2026-01": 4, "CC-MAIN-UI-2026-02": 2})
    server = start_dagster_dev(root)
    try:
        server.stop_automation()
        yield server.url, units, recipe_lake(Lake.from_url(str(root / "lake")))
    finally:
        stop_dagster_dev(server)


@pytest.fixture(scope="module")
def page(ui, tmp_path_factory):
    profile = tmp_path_factory.mktemp("chromium-profile")
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch_persistent_context(
            str(profile),
            executable_path=str(CHROMIUM),
            headless=True,
            args=CHROMIUM_ARGS,
            viewport={"width": 1600, "height": 1000},
        )
        browser.set_default_timeout(TIMEOUT_MS)
        try:
            yield browser.new_page()
        finally:
            browser.close()


def screenshot(page, tmp_path: Path, name: str) -> Path:
    path = tmp_path / f"{name}.png"
    page.screenshot(path=str(path), full_page=True)
    print(f"screenshot: {path}")
    return path


def assert_no_welcome_dialog(page, url: str) -> None:
    """The instance turns Dagster's welcome dialog off (`nux` in dagster.yaml): the server tells
    the UI not to show it, and none shows after the second the UI waits before showing it."""
    answer = page.request.post(f"{url}/graphql", data={"query": "{ shouldShowNux }"})
    assert answer.json()["data"]["shouldShowNux"] is False
    page.wait_for_timeout(2_000)
    assert not page.get_by_text("Join the Dagster community").is_visible()


def test_asset_graph_shows_the_stages(ui, page, tmp_path):
    url, *_ = ui
    # The last stage's upstream lineage: every stage, in lineage order, grouped by stage group.
    page.goto(
        f"{url}/assets/fineweb_en/tokenized_shards?view=lineage&lineageScope=upstream&lineageDepth=10"
    )
    for stage in STAGES:
        page.get_by_text(stage, exact=True).first.wait_for(state="visible")
    assert_no_welcome_dialog(page, url)
    assert screenshot(page, tmp_path, "asset-graph").stat().st_size > 10_000


def test_partition_status_is_visible(ui, page, tmp_path):
    url, units, _ = ui
    page.goto(f"{url}/assets/fineweb_en/tokenized_shards?view=partitions")
    # The partitions tab counts partitions by status: every demo unit is materialized, and
    # there is no other partition (no crawl x unit cross product).
    for status in (f"Materialized ({units})", "Missing (0)", "Failed (0)"):
        page.get_by_text(status, exact=True).first.wait_for(state="visible")
    assert screenshot(page, tmp_path, "partitions").stat().st_size > 10_000


def test_a_crawls_rule_distributions_are_pictures(ui, page, tmp_path):
    url, *_ = ui
    page.goto(f"{url}/assets/fineweb_en/dedup_clusters?view=events&partition=CC-MAIN-UI-2026-01")
    page.get_by_text("[Show Markdown]").first.click()
    picture = page.locator("img[alt='gopher_quality/n_words']").first
    picture.wait_for(state="visible")
    # decoded by the browser: the PNG drawn for the metadata is a real picture
    assert picture.evaluate("img => img.complete && img.naturalWidth") > 0
    assert screenshot(page, tmp_path, "rule-distributions").stat().st_size > 10_000


def test_an_assets_overview_shows_the_rows_of_every_partition(ui, page, tmp_path):
    url, units, lake = ui
    every = [unit for crawl in registered_crawls(lake) for unit in registered_units(lake, crawl)]
    assert len(every) == units
    rows = sum(lake.read_json(f"{u.prefix('cleaned')}/{MARKER}")["records_out"] for u in every)
    page.goto(f"{url}/assets/fineweb_en/cleaned?view=overview")
    page.get_by_text("Row count", exact=True).wait_for(state="visible")
    page.get_by_text(f"{rows:,}", exact=True).first.wait_for(state="visible")
    assert screenshot(page, tmp_path, "overview").stat().st_size > 10_000
