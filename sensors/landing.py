"""The landing-zone sensor: new WARC files become shards (dynamic partitions) and ingest runs."""

from __future__ import annotations

import json

from dagster import (
    DefaultSensorStatus,
    RunRequest,
    SensorEvaluationContext,
    SensorResult,
    SkipReason,
    sensor,
)

from data_assets.jobs import ingest_shard_job
from data_assets.partitions import (
    crawl_partitions,
    shard_index_partitions,
    shard_key,
    shard_list_changes,
)
from resources.automation import DiscoveryResource
from resources.lake import LakeResource
from tokenmill.shards import discover


@sensor(
    job=ingest_shard_job,
    minimum_interval_seconds=60,
    default_status=DefaultSensorStatus.RUNNING,
    description="Lists the landing zone from where the last tick stopped (bounded per tick), "
    "registers new shards as partitions, observes the crawls' shard lists and launches "
    "their ingest runs.",
)
def landing_zone(
    context: SensorEvaluationContext, lake: LakeResource, discovery: DiscoveryResource
) -> SensorResult | SkipReason:
    positions = json.loads(context.cursor) if context.cursor else {}
    data = lake.get_lake()
    new, positions = discover(
        data, positions, discovery.files_per_shard, discovery.max_keys_per_tick
    )
    cursor = json.dumps(positions, sort_keys=True)
    if not new:
        context.update_cursor(cursor)
        return SkipReason("no new files in the landing zone")
    crawls = sorted({shard.crawl for shard in new})
    return SensorResult(
        run_requests=[
            RunRequest(run_key=f"{shard.crawl}|{shard.shard}", partition_key=shard_key(shard))
            for shard in new
        ],
        dynamic_partitions_requests=[
            crawl_partitions.build_add_request(crawls),
            shard_index_partitions.build_add_request(sorted({shard.shard for shard in new})),
        ],
        # The new shard lists make these crawls' clusters stale.
        asset_events=shard_list_changes(context.instance, data, crawls),
        cursor=cursor,
    )
