"""The web UI after a demo run: headless Debian chromium, driven by Playwright, on `dagster dev`
served on loopback from the demo's instance. Chromium comes from `scripts/setup.sh`."""

from __future__ import annotations

from pathlib import Path

import pytest
from playwright.sync_api import TimeoutError as PlaywrightTimeout
from playwright.sync_api import sync_playwright

from tests.dagster_dev import start_dagster_dev, stop_dagster_dev
from tests.demo_pipeline import demo_pipeline

pytestmark = pytest.mark.timeout(300)

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


@pytest.fixture(scope="module")
def ui(tmp_path_factory):
    """`dagster dev` on the instance a small demo run just used; yields (url, demo shards)."""
    if not CHROMIUM.exists():
        pytest.skip(f"{CHROMIUM} is absent: `bash scripts/setup.sh` installs chromium")
    root = tmp_path_factory.mktemp("webui")
    with demo_pipeline(root, "CC-MAIN-UI", files=4, pages_per_file=15, seed=3) as pipeline:
        assert all(run.success for run in pipeline.runs)
        shards = len(pipeline.shards)
    server = start_dagster_dev(root)
    try:
        server.stop_automation()
        yield server.url, shards
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


def dismiss_welcome_dialog(page) -> None:
    """A fresh browser profile gets the "Join the Dagster community" dialog once."""
    skip = page.get_by_role("button", name="Skip")
    try:
        skip.wait_for(state="visible", timeout=5_000)
    except PlaywrightTimeout:
        return
    skip.click()


def test_asset_graph_shows_the_stages(ui, page, tmp_path):
    url, _ = ui
    # The last stage's upstream lineage: every stage, in lineage order, grouped by stage group.
    page.goto(f"{url}/assets/tokenized_shards?view=lineage&lineageScope=upstream&lineageDepth=10")
    for stage in STAGES:
        page.get_by_text(stage, exact=True).first.wait_for(state="visible")
    dismiss_welcome_dialog(page)
    assert screenshot(page, tmp_path, "asset-graph").stat().st_size > 10_000


def test_partition_status_is_visible(ui, page, tmp_path):
    url, shards = ui
    page.goto(f"{url}/assets/tokenized_shards?view=partitions")
    dismiss_welcome_dialog(page)
    # The partitions tab counts partitions by status; every demo shard is materialized.
    for status in (f"Materialized ({shards})", "Missing (0)", "Failed (0)"):
        page.get_by_text(status, exact=True).first.wait_for(state="visible")
    assert screenshot(page, tmp_path, "partitions").stat().st_size > 10_000
