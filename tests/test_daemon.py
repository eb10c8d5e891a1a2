"""Hands off: files dropped in the landing zone of a running `dagster dev` become tokenized
shards through the sensors and the automation alone, as in production. Nobody launches a run."""

from __future__ import annotations

import time

import pytest
from dagster import RunsFilter

from testkit.dagster_dev import DagsterDev, start_dagster_dev, stop_dagster_dev
from testkit.datasets import key
from tokenmill.cli.demo import land_demo_crawl
from tokenmill.runtime.parts import RESUME_FIELD
from tokenmill.stages import STAGES
from tokenmill.storage.lake import Lake
from tokenmill.storage.layout import MARKER, Unit

pytestmark = [pytest.mark.integration, pytest.mark.timeout(900)]

CRAWL = "CC-MAIN-HANDSOFF"
UNIT = f"{CRAWL}/00000"
SENSOR_TAG = "dagster/sensor_name"
SCHEDULE_TAG = "dagster/schedule_name"


@pytest.fixture(scope="module")
def dev(tmp_path_factory):
    root = tmp_path_factory.mktemp("daemon")
    lake = Lake.from_url(str(root / "lake"))
    # Landed before the daemon starts, as files already waiting in a bucket would be.
    land_demo_crawl(lake, CRAWL, files=2, pages_per_file=15, seed=3)
    server = start_dagster_dev(root, TOKENMILL_TICK_SECONDS="2")
    try:
        yield server
    finally:
        stop_dagster_dev(server)


def wait_for_materialization(dev: DagsterDev, asset: str, partition: str, timeout: float):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        with dev.instance() as instance:
            if partition in instance.get_materialized_partitions(key(asset)):
                return
            failed = [
                run
                for run in instance.get_runs(RunsFilter(statuses=[]))
                if run.status.value == "FAILURE"
            ]
        assert not failed, [(run.job_name, run.tags) for run in failed]
        time.sleep(2)
    raise TimeoutError(f"{asset} {partition} not materialized in {timeout} s: see {dev.log}")


def test_landed_files_become_tokenized_shards_with_nobody_launching_a_run(dev: DagsterDev):
    wait_for_materialization(dev, "tokenized_shards", UNIT, timeout=600)
    with dev.instance() as instance:
        assert instance.get_dynamic_partitions("units") == [UNIT]
        assert instance.get_dynamic_partitions("crawls") == [CRAWL]
        for stage in STAGES:
            partition = {"unit": UNIT, "crawl": CRAWL}.get(stage.scope.value)
            # a release is made on purpose, never by the automation; eval_index has nothing to
            # make with the project's settings (no evaluation set declared)
            if not stage.automatic or stage.idle_with(stage.settings and stage.settings()):
                assert not instance.get_latest_materialization_event(key(stage.name))
            elif partition is None:
                assert instance.get_latest_materialization_event(key(stage.name))
            else:
                materialized = instance.get_materialized_partitions(key(stage.name))
                assert materialized == {partition}, stage.name
        # the hourly reconciliation's run, when the test spans the hour, is the schedule's
        runs = [r for r in instance.get_runs() if SCHEDULE_TAG not in r.tags]
    # Every run was requested by a sensor (the per-stage automation sensors), none twice.
    assert runs and all(SENSOR_TAG in run.tags for run in runs), [
        (r.asset_selection, r.tags) for r in runs if SENSOR_TAG not in r.tags
    ]
    assert {run.tags[SENSOR_TAG] for run in runs} <= {f"automation_{s.name}" for s in STAGES}
    # the new unit's raw_crawl and extracted in one run: one pass over each file
    firsts = [r for r in runs if {"raw_crawl", "extracted"} & names(r.asset_selection or ())]
    assert [names(r.asset_selection) for r in firsts] == [{"raw_crawl", "extracted"}], firsts
    lake = Lake.from_url(dev.env["TOKENMILL_LAKE_URL"])
    for part in range(2):
        marker = lake.read_json(f"{Unit.from_key(UNIT).part_prefix('extracted', part)}/{MARKER}")
        assert "#fed:" in marker[RESUME_FIELD]  # made in raw_crawl's pass
    twice = [
        (selection, partition, [(r.run_id, r.status.value, r.tags) for r in group])
        for (selection, partition), group in runs_by_target(runs).items()
        if len(group) > 1
    ]
    assert not twice, twice


def names(keys) -> set[str]:
    return {k.to_user_string() for k in keys}


def runs_by_target(runs) -> dict:
    by_target = {}
    for run in runs:
        selection = tuple(sorted(k.to_user_string() for k in run.asset_selection or ()))
        by_target.setdefault((selection, run.tags.get("dagster/partition")), []).append(run)
    return by_target
