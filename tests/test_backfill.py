"""Backfills and the README's CLI commands, run the way users run them: against `dagster dev`
(webserver + daemon) on a temporary instance and lake, through GraphQL and the `dagster` CLI;
and what one run of one unit records, in process, and how its retry resumes."""

from __future__ import annotations

import dataclasses
import re

import pytest
from dagster import (
    DagsterEventType,
    DagsterInstance,
    DagsterRunStatus,
    RunsFilter,
)
from dagster._core.execution.backfill import BulkActionStatus
from dagster._core.storage.tags import (
    ASSET_PARTITION_RANGE_END_TAG,
    ASSET_PARTITION_RANGE_START_TAG,
    BACKFILL_ID_TAG,
    PARTITION_NAME_TAG,
)
from tokenmill.data_assets.jobs import job_name
from tokenmill.resources.lake import LakeResource
from tokenmill.resources.workers import WorkersResource

from testkit.dagster_dev import DagsterDev, start_dagster_dev, stop_dagster_dev
from testkit.datasets import key as asset_key
from testkit.datasets import recipe_lake
from tokenmill.cli.demo import land_demo_crawl
from tokenmill.cli.runner import QUIET_CONSOLE, register
from tokenmill.definitions import build_definitions
from tokenmill.stages import raw_crawl
from tokenmill.storage.lake import Lake
from tokenmill.storage.layout import MARKER, RAW_CRAWL, Unit

pytestmark = [pytest.mark.integration, pytest.mark.timeout(600)]

CRAWL = "CC-MAIN-BACKFILL"
INGEST_ASSETS = ["raw_crawl", "extracted", "cleaned", "dedup_signatures"]


@pytest.fixture(scope="module")
def dev(tmp_path_factory):
    server = start_dagster_dev(tmp_path_factory.mktemp("backfill"))
    try:
        server.stop_automation()
        yield server
    finally:
        stop_dagster_dev(server)


@pytest.fixture(scope="module")
def lake(dev: DagsterDev) -> Lake:
    return Lake.from_url(dev.env["TOKENMILL_LAKE_URL"])


def land_crawl(dev: DagsterDev, lake: Lake, crawl: str, seed: int, files: int = 4) -> list[str]:
    """A small demo crawl as units of one file each; returns the crawl's partition keys."""
    land_demo_crawl(lake, crawl, files=files, pages_per_file=15, seed=seed)
    with dev.instance() as instance:
        units = register(instance, lake, crawl, files_per_unit=1).units
        assert len(units) == files
        assert crawl in instance.get_dynamic_partitions("crawls")
        # No phantom partitions: the instance has exactly the registered units of the crawl.
        known = instance.get_dynamic_partitions("units")
    assert [k for k in known if k.startswith(f"{crawl}/")] == [u.key for u in units]
    return [u.key for u in units]


def materialized(dev: DagsterDev, asset: str) -> set[str]:
    with dev.instance() as instance:
        return set(instance.get_materialized_partitions(asset_key(asset)))


def run_partition(run) -> str:
    """The one partition of a run: a backfill tags it as a range of one."""
    start, end = (
        run.tags.get(ASSET_PARTITION_RANGE_START_TAG),
        run.tags.get(ASSET_PARTITION_RANGE_END_TAG),
    )
    if start is None:
        return run.tags[PARTITION_NAME_TAG]
    assert start == end, run.tags
    return start


def test_asset_backfill_launches_one_run_per_unit(dev: DagsterDev, lake: Lake):
    keys = land_crawl(dev, lake, CRAWL, seed=0, files=2)
    params = {
        "assetSelection": [{"path": asset_key(name).path} for name in INGEST_ASSETS],
        "partitionNames": keys,
        "title": "ingest every unit",
    }
    backfill_id = dev.launch_backfill(params)
    backfill = dev.wait_for_backfill(backfill_id, timeout=240)
    assert backfill.status == BulkActionStatus.COMPLETED_SUCCESS, backfill

    # One partition per run (BackfillPolicy.multi_run(1)): the ingest stages of a unit run
    # together, each unit in its own run.
    with dev.instance() as instance:
        runs = instance.get_runs(RunsFilter(tags={BACKFILL_ID_TAG: backfill_id}))
        events = {
            name: instance.fetch_materializations(asset_key(name), limit=100).records
            for name in INGEST_ASSETS
        }
    assert len(runs) == len(keys)
    assert sorted(run_partition(run) for run in runs) == sorted(keys)
    for run in runs:
        assert run.status == DagsterRunStatus.SUCCESS, run.run_id
        assert sorted(run.asset_selection) == sorted(asset_key(name) for name in INGEST_ASSETS)
    for name in INGEST_ASSETS:
        assert materialized(dev, name) >= set(keys), name
    # Each partition's metadata is its own: its row count is its unit's, from its marker.
    rows = {}
    for record in events["cleaned"]:
        metadata = record.asset_materialization.metadata
        unit = Unit.from_key(record.partition_key)
        marker = recipe_lake(lake).read_json(f"{unit.prefix('cleaned')}/{MARKER}")
        assert metadata["dagster/partition_row_count"].value == marker["records_out"], unit
        assert metadata["files"].value == 1
        rows[record.partition_key] = metadata["dagster/partition_row_count"].value
    assert sorted(rows) == sorted(keys)
    assert len(set(rows.values())) > 1 and min(rows.values()) > 0, rows


def test_cli_materializes_one_partition(dev: DagsterDev, lake: Lake):
    keys = land_crawl(dev, lake, "CC-MAIN-CLI-ONE", seed=1, files=2)
    key = keys[0]
    dev.cli(
        "asset",
        "materialize",
        "-m",
        "tokenmill.definitions",
        "--select",
        "raw_crawl",
        "--partition",
        key,
    )
    assert materialized(dev, "raw_crawl") & set(keys) == {key}
    assert lake.exists(f"raw_crawl/CC-MAIN-CLI-ONE/00000/{MARKER}")
    assert not lake.exists(f"raw_crawl/CC-MAIN-CLI-ONE/00001/{MARKER}")


def test_cli_job_backfills_a_range_and_a_list(dev: DagsterDev, lake: Lake):
    keys = land_crawl(dev, lake, "CC-MAIN-CLI-JOB", seed=2)
    job = ["job", "backfill", "-w", "workspace.yaml", "-j", job_name(RAW_CRAWL), "--noprompt"]
    by_range = dev.cli(*job, "--from", keys[0], "--to", keys[1])
    by_list = dev.cli(*job, "--partitions", keys[2])
    for launched, wanted in ((by_range, keys[0:2]), (by_list, keys[2:3])):
        backfill_id = re.search(r"Launched backfill job `([^`]+)`", launched.stdout).group(1)
        # A job backfill is one queued run per partition, dequeued by the daemon.
        runs = dev.wait_for_runs({BACKFILL_ID_TAG: backfill_id}, len(wanted), timeout=240)
        assert sorted(run.tags["dagster/partition"] for run in runs) == sorted(wanted)
        assert all(run.status == DagsterRunStatus.SUCCESS for run in runs)
    assert materialized(dev, RAW_CRAWL) & set(keys) == set(keys[:3])


def run_unit(instance: DagsterInstance, lake: Lake, job: str, key: str):
    # No memory cap: the parts run in this process, where a test can patch the stage.
    workers = WorkersResource(processes=1, memory_limit_mb=None)
    defs = build_definitions(LakeResource(url=lake.url), workers=workers)
    return defs.resolve_job_def(job).execute_in_process(
        run_config=QUIET_CONSOLE, instance=instance, partition_key=key, raise_on_error=False
    )


def test_a_run_records_its_partition_without_an_event_per_file(tmp_path):
    lake = Lake.from_url(str(tmp_path / "lake"))
    land_demo_crawl(lake, "CC-MAIN-ONE", files=3, pages_per_file=10, seed=3)
    instance = DagsterInstance.ephemeral()
    key = register(instance, lake, "CC-MAIN-ONE", 3).units[0].key
    assert run_unit(instance, lake, job_name(RAW_CRAWL), key).success
    assert run_unit(instance, lake, job_name("extracted"), key).success
    result = run_unit(instance, lake, job_name("cleaned"), key)
    assert result.success

    events = instance.all_logs(result.run_id)
    materialized = [
        (e.dagster_event.asset_key.to_user_string(), e.dagster_event.partition)
        for e in events
        if e.dagster_event_type == DagsterEventType.ASSET_MATERIALIZATION
    ]
    assert materialized == [("fineweb_en/cleaned", key)]
    checks = [
        e.dagster_event.event_specific_data
        for e in events
        if e.dagster_event_type == DagsterEventType.ASSET_CHECK_EVALUATION
    ]
    assert [(c.check_name, c.passed) for c in checks] == [("provenance_resolves", True)]
    cleaned = instance.get_latest_materialization_event(asset_key("cleaned"))
    metadata = cleaned.asset_materialization
    assert metadata.metadata["files"].value == 3
    # Every event is a write to the event log: a run writes no log line per file.
    assert [e.user_message for e in events if not e.is_dagster_event] == []


def test_a_retried_step_resumes_after_its_committed_files(tmp_path, monkeypatch):
    """A transient fault at the second of three files of a unit: the third goes on, the step's
    retry (same run) recomputes only the second, and its outputs and metadata equal those of a
    run without it."""
    calls: list[int] = []
    fail_at: list[int] = []

    def land_with_fault(work):
        calls.append(work.part)
        if fail_at and work.part == fail_at[0] and calls.count(work.part) == 1:
            raise OSError("node preempted")  # transient: Dagster retries the step
        return raw_crawl.run(work)

    # A part runs `STAGE.run` of its stage's module (in process with one worker).
    monkeypatch.setattr(
        raw_crawl, "STAGE", dataclasses.replace(raw_crawl.STAGE, run=land_with_fault)
    )

    def outputs(lake: Lake) -> dict[str, bytes]:
        return {
            key: lake.read_bytes(key) for key in lake.list(RAW_CRAWL) if not key.endswith(MARKER)
        }

    def run(lake: Lake, fault: list[int]) -> tuple[list[int], dict]:
        calls.clear()
        fail_at[:] = fault
        instance = DagsterInstance.ephemeral()
        key = register(instance, lake, "CC-MAIN-RETRY", 3).units[0].key
        result = run_unit(instance, lake, job_name(RAW_CRAWL), key)
        assert result.success
        [event] = result.asset_materializations_for_node(RAW_CRAWL)
        metadata = {k: v.value for k, v in event.metadata.items()}
        return list(calls), metadata

    lakes = [Lake.from_url(str(tmp_path / name)) for name in ("clean", "faulty")]
    for lake in lakes:
        land_demo_crawl(lake, "CC-MAIN-RETRY", files=3, pages_per_file=10, seed=4)
    clean_calls, clean_metadata = run(lakes[0], [])
    faulty_calls, faulty_metadata = run(lakes[1], [1])

    assert clean_calls == [0, 1, 2]
    assert faulty_calls == [0, 1, 2, 1]  # parts 0 and 2 not recomputed
    assert clean_metadata.pop("resumed_parts") == 0
    assert faulty_metadata.pop("resumed_parts") == 2
    for name in ("duration_s", "cpu_s", "records_per_s", "location"):
        clean_metadata.pop(name), faulty_metadata.pop(name)
    assert faulty_metadata == clean_metadata
    assert clean_metadata["records_in"] > 0
    assert outputs(lakes[1]) == outputs(lakes[0])
