"""Backfills and the README's CLI commands, run the way users run them: against `dagster dev`
(webserver + daemon) on a temporary instance and lake, through GraphQL and the `dagster` CLI;
and what one backfill run over a range of shards records, in process."""

from __future__ import annotations

import math
import re

import pytest
from dagster import (
    AssetKey,
    DagsterEventType,
    DagsterInstance,
    DagsterRunStatus,
    MaterializeResult,
    MultiPartitionKey,
    RetryPolicy,
    RunsFilter,
    asset,
    materialize,
)
from dagster._core.execution.backfill import BulkActionStatus
from dagster._core.storage.tags import (
    ASSET_PARTITION_RANGE_END_TAG,
    ASSET_PARTITION_RANGE_START_TAG,
    BACKFILL_ID_TAG,
)

from data_assets import stage
from data_assets.partitions import (
    crawl_partitions,
    shard_index_partitions,
    shard_key,
    shard_partitions,
)
from data_assets.runner import QUIET_CONSOLE, register
from data_assets.stages import MAX_SHARDS_PER_RUN
from resources.lake import LakeResource
from tests.dagster_dev import DagsterDev, start_dagster_dev, stop_dagster_dev
from tokenmill.cli import land_demo_crawl
from tokenmill.ingest import RAW, land_shard
from tokenmill.lake import Lake
from tokenmill.shards import shard_name

pytestmark = pytest.mark.timeout(300)

CRAWL = "CC-MAIN-BACKFILL"
EMPTY_SHARDS = 40  # shard keys no manifest of the crawl lists: they materialize with no docs
INGEST_ASSETS = ["raw_crawl", "cleaned", "dedup_signatures"]  # the `ingest_shard` job


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


def land_crawl(dev: DagsterDev, lake: Lake, crawl: str, seed: int) -> list[str]:
    """A small demo crawl as 2 real shards, plus every registered shard key as empty shards;
    returns the crawl's partition keys."""
    land_demo_crawl(lake, crawl, files=4, pages_per_file=15, seed=seed)
    with dev.instance() as instance:
        real = register(instance, lake, crawl, files_per_shard=2)
        assert len(real) == 2
        known = set(instance.get_dynamic_partitions(shard_index_partitions.name))
        wanted = [shard_name(i) for i in range(len(real) + EMPTY_SHARDS)]
        instance.add_dynamic_partitions(
            shard_index_partitions.name, [s for s in wanted if s not in known]
        )
        assert crawl in instance.get_dynamic_partitions(crawl_partitions.name)
        shards = instance.get_dynamic_partitions(shard_index_partitions.name)
    return [str(MultiPartitionKey({"crawl": crawl, "shard": shard})) for shard in shards]


def materialized(dev: DagsterDev, asset: str) -> set[str]:
    with dev.instance() as instance:
        return set(instance.get_materialized_partitions(AssetKey(asset)))


def test_asset_backfill_launches_one_run_per_range_of_shards(dev: DagsterDev, lake: Lake):
    keys = land_crawl(dev, lake, CRAWL, seed=0)
    assert len(keys) == 2 + EMPTY_SHARDS
    params = {
        "assetSelection": [{"path": [name]} for name in INGEST_ASSETS],
        "partitionNames": keys,
        "title": "ingest every shard",
    }
    backfill_id = dev.launch_backfill(params)
    backfill = dev.wait_for_backfill(backfill_id, timeout=240)
    assert backfill.status == BulkActionStatus.COMPLETED_SUCCESS, backfill

    # The three ingest stages share partitions and backfill policy, so each run takes all of
    # them for a range of up to MAX_SHARDS_PER_RUN shards.
    with dev.instance() as instance:
        runs = instance.get_runs(RunsFilter(tags={BACKFILL_ID_TAG: backfill_id}))
        all_keys = shard_partitions.get_partition_keys(dynamic_partitions_store=instance)
    assert len(runs) == math.ceil(len(keys) / MAX_SHARDS_PER_RUN)
    covered = []
    for run in runs:
        assert run.status == DagsterRunStatus.SUCCESS, run.run_id
        assert sorted(run.asset_selection) == sorted(AssetKey(name) for name in INGEST_ASSETS)
        start, end = (
            run.tags[ASSET_PARTITION_RANGE_START_TAG],
            run.tags[ASSET_PARTITION_RANGE_END_TAG],
        )
        in_run = all_keys[all_keys.index(start) : all_keys.index(end) + 1]
        assert 1 <= len(in_run) <= MAX_SHARDS_PER_RUN
        covered += in_run
    assert sorted(covered) == sorted(keys)
    for name in INGEST_ASSETS:
        assert materialized(dev, name) >= set(keys), name
    # Real shards have documents, the empty ones none, each committed with its marker.
    docs = [lake.read_json(f"cleaned/{CRAWL}/{shard_name(i)}/_SUCCESS.json") for i in range(3)]
    assert [marker["outputs"]["docs.parquet"]["rows"] > 0 for marker in docs] == [
        True,
        True,
        False,
    ]


def test_cli_materializes_one_partition(dev: DagsterDev, lake: Lake):
    keys = land_crawl(dev, lake, "CC-MAIN-CLI-ONE", seed=1)
    key = keys[0]
    dev.cli(
        "asset",
        "materialize",
        "-m",
        "data_assets.definitions",
        "--select",
        "raw_crawl",
        "--partition",
        key,
    )
    assert materialized(dev, "raw_crawl") & set(keys) == {key}
    assert lake.exists(f"raw/CC-MAIN-CLI-ONE/{shard_name(0)}/_SUCCESS.json")


def test_cli_job_backfills_a_range_and_a_list(dev: DagsterDev, lake: Lake):
    keys = land_crawl(dev, lake, "CC-MAIN-CLI-JOB", seed=2)
    job = ["job", "backfill", "-w", "workspace.yaml", "-j", "ingest_shard", "--noprompt"]
    by_range = dev.cli(*job, "--from", keys[0], "--to", keys[1])
    by_list = dev.cli(*job, "--partitions", keys[2])
    for launched, wanted in ((by_range, keys[0:2]), (by_list, keys[2:3])):
        backfill_id = re.search(r"Launched backfill job `([^`]+)`", launched.stdout).group(1)
        # A job backfill is one queued run per partition, dequeued by the daemon.
        runs = dev.wait_for_runs({BACKFILL_ID_TAG: backfill_id}, len(wanted), timeout=240)
        assert sorted(run.tags["dagster/partition"] for run in runs) == sorted(wanted)
        assert all(run.status == DagsterRunStatus.SUCCESS for run in runs)
    for name in INGEST_ASSETS:
        assert materialized(dev, name) & set(keys) == set(keys[:3]), name


def run_range(instance: DagsterInstance, lake: Lake, keys: list[str]):
    """The `ingest_shard` job over a range of shards, as a multi-run backfill launches it."""
    from data_assets.definitions import defs

    return defs.resolve_job_def("ingest_shard").execute_in_process(
        run_config=QUIET_CONSOLE,
        instance=instance,
        tags={ASSET_PARTITION_RANGE_START_TAG: keys[0], ASSET_PARTITION_RANGE_END_TAG: keys[-1]},
        resources={"lake": LakeResource(url=lake.url)},
    )


def test_a_range_run_records_every_partition_without_an_event_per_shard(tmp_path, monkeypatch):
    lake = Lake.from_url(str(tmp_path / "lake"))
    land_demo_crawl(lake, "CC-MAIN-RANGE", files=3, pages_per_file=10, seed=3)
    instance = DagsterInstance.ephemeral()
    keys = [str(shard_key(s)) for s in register(instance, lake, "CC-MAIN-RANGE", 1)]
    assert len(keys) == 3

    events = instance.all_logs(run_range(instance, lake, keys).run_id)
    materialized = [
        (e.dagster_event.asset_key.to_user_string(), e.dagster_event.partition)
        for e in events
        if e.dagster_event_type == DagsterEventType.ASSET_MATERIALIZATION
    ]
    assert sorted(materialized) == sorted((a, k) for a in INGEST_ASSETS for k in keys)
    checks = [
        e.dagster_event.event_specific_data
        for e in events
        if e.dagster_event_type == DagsterEventType.ASSET_CHECK_EVALUATION
    ]
    assert sorted(c.check_name for c in checks) == ["bad_record_rate", "provenance_resolves"]
    assert all(c.passed and c.metadata["partitions"].value == 3 for c in checks)
    # Every event is a write to the event log: a short run writes no log line per shard...
    assert [e.user_message for e in events if not e.is_dagster_event] == []

    # ...and a long one a progress line at most every PROGRESS_EVERY_S, none after the last.
    monkeypatch.setattr(stage, "PROGRESS_EVERY_S", 0.0)
    events = instance.all_logs(run_range(instance, lake, keys).run_id)
    lines = [e.user_message for e in events if not e.is_dagster_event]
    assert lines == [
        f"{asset}: {n} of 3 shards done (CC-MAIN-RANGE/{shard_name(n - 1)})"
        for asset in INGEST_ASSETS
        for n in (1, 2)
    ]


def test_a_retried_range_step_resumes_after_its_committed_shards(tmp_path):
    """A transient fault at the second of three shards: the retry (same run) recomputes only
    the second and third, and the run's outputs and metadata equal those of a run without it."""

    def outputs(lake: Lake) -> dict[str, bytes]:
        return {key: lake.read_bytes(key) for key in lake.list(RAW)}

    def run(lake: Lake, fail_at: str | None) -> tuple[list[str], dict]:
        calls = []

        def land_with_fault(lake: Lake, shard) -> object:
            calls.append(shard.shard)
            if shard.shard == fail_at and calls.count(fail_at) == 1:
                raise OSError("node preempted")  # transient: Dagster retries the step
            return land_shard(lake, shard)

        @asset(name="raw_crawl", partitions_def=shard_partitions,
               retry_policy=RetryPolicy(max_retries=1))  # fmt: skip
        def raw(context) -> MaterializeResult:
            return stage.materialize_shards(context, lake, RAW, land_with_fault)

        instance = DagsterInstance.ephemeral()
        keys = [str(shard_key(s)) for s in register(instance, lake, "CC-MAIN-RETRY", 1)]
        result = materialize([raw], instance=instance, raise_on_error=False, tags={
            ASSET_PARTITION_RANGE_START_TAG: keys[0], ASSET_PARTITION_RANGE_END_TAG: keys[-1]
        })  # fmt: skip
        assert result.success
        materializations = result.asset_materializations_for_node("raw_crawl")
        assert sorted(m.partition for m in materializations) == keys
        metadata = {k: v.value for k, v in materializations[0].metadata.items()}
        return calls, {
            k: v
            for k, v in metadata.items()
            if k not in ("duration_s", "records_per_s", "location")
        }

    lakes = [Lake.from_url(str(tmp_path / name)) for name in ("clean", "faulty")]
    for lake in lakes:
        land_demo_crawl(lake, "CC-MAIN-RETRY", files=3, pages_per_file=10, seed=4)
    clean_calls, clean_metadata = run(lakes[0], fail_at=None)
    faulty_calls, faulty_metadata = run(lakes[1], fail_at=shard_name(1))

    assert clean_calls == [shard_name(n) for n in range(3)]
    assert faulty_calls == [shard_name(n) for n in (0, 1, 1, 2)]  # shard 0 not recomputed
    assert faulty_metadata == clean_metadata
    assert clean_metadata["records_in"] > 0
    assert outputs(lakes[1]) == outputs(lakes[0])
    assert lakes[1].list("_journal") == []
    assert [p.name for p in (tmp_path / "faulty" / "_journal").iterdir()] == [RAW]  # no run dir
