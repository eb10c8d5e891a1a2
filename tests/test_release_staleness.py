"""A release that no longer matches its recipe's shards says so: in the core (with the reason),
in Dagster's stale status as the UI computes it, and in the CLI's release lines; shards made
again with the same bytes leave it fresh, and a new release makes it fresh again."""

from __future__ import annotations

import pytest
from dagster import DagsterInstance, SensorResult, build_sensor_context
from tokenmill.data_assets.datasets import Catalog, Dataset
from tokenmill.data_assets.jobs import job_name
from tokenmill.data_assets.release_inputs import release_state
from tokenmill.resources.lake import LakeResource
from tokenmill.sensors.release import release_inputs_changed

from testkit.datasets import RECIPE, key, stale_status, variant
from testkit.demo_pipeline import tokenized_demo_crawls
from tokenmill.cli.demo import land_demo_crawl
from tokenmill.cli.reading import release_lines
from tokenmill.cli.runner import definitions_for, execute, local_instance, materialize_all, register
from tokenmill.crawl.units import register_new_files, registered_units
from tokenmill.dagster_internals import StaleStatus
from tokenmill.release.plan import ReleaseSettings, plan_release
from tokenmill.release.staleness import FRESH, NONE, STALE, release_staleness
from tokenmill.runtime.parts import run_stage_work
from tokenmill.stages import stage_named
from tokenmill.storage.lake import Lake
from tokenmill.storage.layout import LANDING, MARKER, TOKENIZED_SHARDS

CRAWL = "CC-MAIN-STALE-2026-01"
SMALL = ReleaseSettings(shard_tokens=20_000, validation=0.1)
# the recipe's filters relaxed: more documents kept, other shards
SKIPPING = {"clean": {"keep_languages": [], "skip_filters": ["gopher_quality"]}}


def release(lake: Lake, settings: ReleaseSettings) -> str:
    return run_stage_work(stage_named("release"), lake, settings).counts["version"]


def test_the_core_names_what_changed_since_the_latest_release(tmp_path):
    lake = tokenized_demo_crawls(tmp_path, {CRAWL: 1}, files=4, pages_per_file=30)
    assert release_staleness(lake, SMALL).state == NONE
    version = release(lake, SMALL)
    state = release_staleness(lake, SMALL)
    assert (state.state, state.latest, state.planned) == (FRESH, version, version)
    # nothing said to have changed: no marker read, the same answer
    assert release_staleness(lake, SMALL, touched=[]) == state

    # a unit tokenized again from other text
    first, second = registered_units(lake, CRAWL)
    marker = lake.read_json(f"{first.prefix(TOKENIZED_SHARDS)}/{MARKER}")
    marker["outputs"]["00000/tokens.bin"]["sha256"] = "0" * 64
    lake.write_json(f"{first.prefix(TOKENIZED_SHARDS)}/{MARKER}", marker)
    state = release_staleness(lake, SMALL)
    assert state.state == STALE
    assert state.reason == f"tokenized shards changed in 1 unit since release {version}"
    assert state.planned != version
    assert release_staleness(lake, SMALL, touched=[first.key]) == state
    assert release_staleness(lake, SMALL, touched=[second.key]).state == FRESH  # as told

    # other settings, and a unit registered but not tokenized yet: no release can be made now
    other = ReleaseSettings(shard_tokens=30_000, validation=0.1, seed=2)
    landed = lake.list(f"{LANDING}/{CRAWL}")[0]
    lake.write_bytes(f"{LANDING}/{CRAWL}/copy.warc.gz", lake.read_bytes(landed))
    assert len(register_new_files(lake, CRAWL, files_per_unit=2).units) == 1
    state = release_staleness(lake, other, touched=[first.key])
    assert (state.state, state.planned) == (STALE, None)
    assert state.reason == (
        "release settings changed (seed, shard_tokens), tokenized shards changed in 1 unit, "
        f"1 unit not tokenized yet since release {version}"
    )


@pytest.mark.integration
def test_a_release_shows_stale_in_dagster_and_the_cli_after_its_shards_change(
    tmp_path, monkeypatch
):
    monkeypatch.setenv("TOKENMILL_LAKE_URL", str(tmp_path / "lake"))
    monkeypatch.setenv("DAGSTER_HOME", str(tmp_path / "dagster_home"))
    lake = Lake.from_url(str(tmp_path / "lake"))
    land_demo_crawl(lake, CRAWL, 4, 40, seed=5)
    instance = local_instance()
    try:
        register(instance, lake, CRAWL, files_per_unit=2)
        materialize_all(instance, lake, workers=2)  # the release is made: it was missing
        check_staleness(instance, lake, monkeypatch)
    finally:
        instance.dispose()


def check_staleness(instance: DagsterInstance, lake: Lake, monkeypatch) -> None:
    catalog = Catalog.of([RECIPE.recipe])
    defs = definitions_for(lake, 2, catalog)
    first = release_state(lake, RECIPE, instance)
    assert first.state == FRESH
    assert stale_status(defs, instance, "release", None) == StaleStatus.FRESH

    # the shards made again, byte for byte: nothing stale, for the sensor either
    unit = registered_units(lake, CRAWL)[0]
    assert execute(job_name(TOKENIZED_SHARDS), unit.key, instance, defs).success
    assert release_state(lake, RECIPE, instance) == first
    assert sensor_tick(instance, lake, catalog) == []
    assert stale_status(defs, instance, "release", None) == StaleStatus.FRESH

    # a clean threshold changes: the shards are made again, the release is kept as it was
    skipping = Dataset(variant(SKIPPING, "skipping"), RECIPE.prefix)
    changed = Catalog.of([skipping.recipe])
    # the sensor, not `tokenmill run`, observes the change here
    monkeypatch.setattr("tokenmill.cli.runner.release_input_changes", lambda *a: [])
    materialize_all(instance, lake, workers=2, catalog=changed)
    assert release_state(lake, skipping, instance).latest == first.latest
    defs = definitions_for(lake, 2, changed)
    assert stale_status(defs, instance, "release", None) == StaleStatus.FRESH  # not told yet
    (observed,) = sensor_tick(instance, lake, changed)
    assert stale_status(defs, instance, "release", None) == StaleStatus.STALE

    state = release_state(lake, skipping, instance)
    units = len(registered_units(lake, CRAWL))
    assert state.state == STALE and state.planned == observed.data_version
    assert state.reason == (
        f"tokenized shards changed in {units} units since release {first.latest}"
    )
    # read from every marker (no instance), the same
    assert release_state(lake, skipping) == state
    (_, stale_line) = release_lines(lake, [skipping], instance)
    assert stale_line == (
        f"  (stale: {state.reason}; rebuild with `tokenmill run --release --recipe "
        f"{RECIPE.prefix}` or `tokenmill release --recipe {RECIPE.prefix}`)"
    )
    assert sensor_tick(instance, lake, changed) == []  # stale already: nothing read again

    # released again: fresh, a new version
    assert execute(job_name("release"), None, instance, defs, [key("release")]).success
    again = release_state(lake, skipping, instance)
    assert again.state == FRESH and again.latest == state.planned != first.latest
    assert stale_status(defs, instance, "release", None) == StaleStatus.FRESH
    assert len(release_lines(lake, [skipping], instance)) == 1
    recipe_lake = skipping.lake(lake)
    assert (
        plan_release(recipe_lake, skipping.recipe.settings(ReleaseSettings)).version == again.latest
    )


def sensor_tick(instance: DagsterInstance, lake: Lake, catalog: Catalog) -> list:
    """A tick of the release_inputs_changed sensor from the start; the events it reported."""
    context = build_sensor_context(
        instance=instance, resources={"lake": LakeResource(url=lake.url)}
    )
    result = release_inputs_changed(catalog)(context)
    if not isinstance(result, SensorResult):
        return []
    for event in result.asset_events:
        instance.report_runless_asset_event(event)
    return list(result.asset_events)
