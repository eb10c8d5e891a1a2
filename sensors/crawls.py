"""Crossing from units to their crawl: once every unit of a crawl has signatures, observe
`crawl_signatures` for it, which the crawl's clusters follow (see data_assets/partitions.py)."""

from __future__ import annotations

import hashlib

from dagster import (
    AssetKey,
    AssetRecordsFilter,
    DefaultSensorStatus,
    SensorEvaluationContext,
    SensorResult,
    SkipReason,
    sensor,
)

from data_assets.partitions import crawl_signatures, latest_version, unit_partitions, versioned
from resources.automation import tick_seconds
from tokenmill.layout import DEDUP_SIGNATURES

SIGNATURES = AssetKey(DEDUP_SIGNATURES)
EVENTS_PER_TICK = 10_000


def signatures_version(instance, crawl: str, units: list[str]) -> str:
    """A hash of the latest signature materialization of each of the crawl's units."""
    records = instance.fetch_materializations(
        AssetRecordsFilter(asset_key=SIGNATURES, asset_partitions=units), limit=len(units) * 4
    ).records
    latest: dict[str, int] = {}
    for record in records:
        partition = record.partition_key
        latest[partition] = max(latest.get(partition, 0), record.storage_id)
    digest = hashlib.sha256(crawl.encode())
    for unit in units:
        digest.update(f"{unit}={latest.get(unit)}".encode())
    return digest.hexdigest()


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
    all_units = instance.get_dynamic_partitions(unit_partitions.name)
    signed = instance.get_materialized_partitions(SIGNATURES)
    events = []
    for crawl in touched:
        units = [u for u in all_units if u.startswith(f"{crawl}/")]
        if not units or any(u not in signed for u in units):
            continue  # the last units to be signed will touch the crawl again
        version = signatures_version(instance, crawl, units)
        if version != latest_version(instance, crawl_signatures.key, crawl):
            events.append(versioned(crawl_signatures.key, crawl, version))
    return SensorResult(asset_events=events, cursor=str(records[-1].storage_id))
