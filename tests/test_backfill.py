"""Backfills and the README's CLI commands, run the way users run them: against `dagster dev`
(webserver + daemon) on a temporary instance and lake, through GraphQL and the `dagster` CLI."""

from __future__ import annotations

import math
import re

import pytest
from dagster import AssetKey, DagsterRunStatus, MultiPartitionKey, RunsFilter
from dagster._core.execution.backfill import BulkActionStatus
from dagster._core.storage.tags import (
    ASSET_PARTITION_RANGE_END_TAG,
    ASSET_PARTITION_RANGE_START_TAG,
    BACKFILL_ID_TAG,
)

from data_assets.partitions import crawl_partitions, shard_index_partitions, shard_partitions
from data_assets.runner import register
from data_assets.stages import MAX_SHARDS_PER_RUN
from tests.dagster_dev import DagsterDev, start_dagster_dev, stop_dagster_dev
from tokenmill.cli import land_demo_crawl
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


def test_asset_backfill_launches_one_run_per_eight_shards(dev: DagsterDev, lake: Lake):
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
