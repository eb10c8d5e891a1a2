"""Crossing from units to their crawl: once every unit of a crawl has signatures, observe
`crawl_signatures` for it, which the crawl's clusters follow (see data_assets/partitions.py)."""

from __future__ import annotations

from dagster import (
    AssetRecordsFilter,
    DefaultSensorStatus,
    SensorEvaluationContext,
    SensorResult,
    SkipReason,
    sensor,
)

from data_assets.partitions import SIGNATURES, crawl_signature_changes
from resources.automation import tick_seconds

EVENTS_PER_TICK = 10_000


@sensor(
    minimum_interval_seconds=tick_seconds(30),
    default_status=DefaultSensorStatus.RUNNING,
    description="Observes crawl_signatures for each crawl whose units all have signatures, "
    "after any of them changed: the crawl's clusters follow.",
)
def crawl_signatures_complete(context: SensorEvaluationContext) -> SensorResult | SkipReason:
    instance = context.instance
    after = int(context.cursor or 0)
    records = instance.fetch_materializations(
        AssetRecordsFilter(asset_key=SIGNATURES, after_storage_id=after),
        limit=EVENTS_PER_TICK,
        ascending=True,
    ).records
    if not records:
        return SkipReason("no new signatures")
    touched = sorted({r.partition_key.split("/", 1)[0] for r in records if r.partition_key})
    events = crawl_signature_changes(instance, touched)
    return SensorResult(asset_events=events, cursor=str(records[-1].storage_id))
