"""The landing-zone sensor: newly landed WARC files become units (dynamic partitions).

It requests no runs: the first stage's automation condition launches every new unit however it
was registered (this sensor, the reconciliation job, `tokenmill register`). Submitting runs here
made a tick pay for one run submission per unit, each resolving every unit partition of the
instance (12 s per tick of 20 units at 90,000 units per asset)."""

from __future__ import annotations

import json

from dagster import (
    DefaultSensorStatus,
    SensorEvaluationContext,
    SensorResult,
    SkipReason,
    sensor,
)
from tokenmill.data_assets.partitions import crawl_partitions, unit_list_changes, unit_partitions
from tokenmill.resources.automation import DiscoveryResource, tick_seconds
from tokenmill.resources.lake import LakeResource

from tokenmill.crawl.units import discover, registered_units


@sensor(
    minimum_interval_seconds=tick_seconds(60),
    default_status=DefaultSensorStatus.RUNNING,
    description="Lists the landing zone from where the last tick stopped (bounded per tick), "
    "registers new units as partitions and observes the crawls' unit lists; the first "
    "stage's automation launches the new units.",
)
def landing_zone(
    context: SensorEvaluationContext, lake: LakeResource, discovery: DiscoveryResource
) -> SensorResult | SkipReason:
    positions = json.loads(context.cursor) if context.cursor else {}
    data = lake.get_lake()
    new, positions, problems = discover(
        data, positions, discovery.files_per_unit, discovery.max_keys_per_tick
    )
    for problem in problems:
        context.log.warning(problem)
    cursor = json.dumps(positions, sort_keys=True)
    if not new:
        context.update_cursor(cursor)
        return SkipReason("no new files in the landing zone")
    crawls = sorted({unit.crawl for unit in new})
    return SensorResult(
        dynamic_partitions_requests=[
            crawl_partitions.build_add_request(crawls),
            unit_partitions.build_add_request([unit.key for unit in new]),
        ],
        # The new unit lists make these crawls' clusters stale.
        asset_events=unit_list_changes(
            context.instance, {crawl: registered_units(data, crawl) for crawl in crawls}
        ),
        cursor=cursor,
    )
