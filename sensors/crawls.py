"""Crossing from units to their crawl: once every unit of a crawl has a crawl stage's per-unit
inputs, observe that stage's `gathered` asset for the crawl (for `dedup_clusters`,
`crawl_signatures`), which the stage follows (see data_assets/partitions.py)."""

from __future__ import annotations

import json

from dagster import (
    AssetKey,
    AssetRecordsFilter,
    DefaultSensorStatus,
    SensorEvaluationContext,
    SensorResult,
    SkipReason,
    sensor,
)

from data_assets.partitions import BOUNDARY_STAGES, gathered_changes, unit_inputs
from resources.automation import tick_seconds

EVENTS_PER_TICK = 10_000
WATCHED = sorted({name for stage in BOUNDARY_STAGES for name in unit_inputs(stage)})


def cursor_positions(cursor: str | None) -> dict[str, int]:
    """The last materialization seen of each watched asset (an older cursor, one number, was
    the signatures' alone: event ids are shared by all assets)."""
    value = json.loads(cursor) if cursor else 0
    if isinstance(value, int):
        return dict.fromkeys(WATCHED, value)
    return {name: int(value.get(name, 0)) for name in WATCHED}


@sensor(
    minimum_interval_seconds=tick_seconds(30),
    default_status=DefaultSensorStatus.RUNNING,
    description="Observes crawl_signatures (each crawl stage's gathered asset) for each crawl "
    "whose units all have its per-unit inputs, after any of them changed: the stage follows.",
)
def crawl_signatures_complete(context: SensorEvaluationContext) -> SensorResult | SkipReason:
    instance = context.instance
    positions = cursor_positions(context.cursor)
    touched: set[str] = set()
    for name, after in positions.items():
        records = instance.fetch_materializations(
            AssetRecordsFilter(asset_key=AssetKey(name), after_storage_id=after),
            limit=EVENTS_PER_TICK,
            ascending=True,
        ).records
        touched |= {r.partition_key.split("/", 1)[0] for r in records if r.partition_key}
        if records:
            positions[name] = records[-1].storage_id
    if not touched:
        return SkipReason("no new materializations of the crawl stages' per-unit inputs")
    events = gathered_changes(instance, sorted(touched))
    return SensorResult(asset_events=events, cursor=json.dumps(positions, sort_keys=True))
