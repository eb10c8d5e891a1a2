"""Crossing from units to their crawl: once every unit of a crawl has a crawl stage's per-unit
inputs, observe that stage's `gathered` asset for the crawl (for `dedup_clusters`, each
recipe's `crawl_signatures`), which the stage follows (see data_assets/partitions.py)."""

from __future__ import annotations

import json

from dagster import (
    AssetKey,
    AssetRecordsFilter,
    DefaultSensorStatus,
    SensorDefinition,
    SensorEvaluationContext,
    SensorResult,
    SkipReason,
    sensor,
)
from tokenmill.data_assets.datasets import Catalog
from tokenmill.data_assets.partitions import boundaries, gathered_changes, unit_inputs
from tokenmill.resources.automation import tick_seconds

EVENTS_PER_TICK = 10_000


def watched(catalog: Catalog) -> list[str]:
    """The per-unit inputs of every recipe's crawl stages, as asset key strings."""
    return sorted(
        {
            dataset.key(name).to_user_string()
            for stage, dataset in boundaries(catalog)
            for name in unit_inputs(stage)
        }
    )


def cursor_positions(cursor: str | None, names: list[str]) -> dict[str, int]:
    """The last materialization seen of each watched asset (an older cursor, one number, was
    the signatures' alone: event ids are shared by all assets). A recipe added since starts
    from the beginning."""
    value = json.loads(cursor) if cursor else 0
    if isinstance(value, int):
        return dict.fromkeys(names, value)
    return {name: int(value.get(name, 0)) for name in names}


def crawl_signatures_complete(catalog: Catalog) -> SensorDefinition:
    names = watched(catalog)

    @sensor(
        name="crawl_signatures_complete",
        minimum_interval_seconds=tick_seconds(30),
        default_status=DefaultSensorStatus.RUNNING,
        description="Observes each recipe's crawl_signatures (each crawl stage's gathered "
        "asset) for each crawl whose units all have its per-unit inputs, after any of them "
        "changed: the stage follows.",
    )
    def crawl_signatures_complete_sensor(
        context: SensorEvaluationContext,
    ) -> SensorResult | SkipReason:
        instance = context.instance
        positions = cursor_positions(context.cursor, names)
        touched: set[str] = set()
        for name, after in positions.items():
            records = instance.fetch_materializations(
                AssetRecordsFilter(
                    asset_key=AssetKey.from_user_string(name), after_storage_id=after
                ),
                limit=EVENTS_PER_TICK,
                ascending=True,
            ).records
            touched |= {r.partition_key.split("/", 1)[0] for r in records if r.partition_key}
            if records:
                positions[name] = records[-1].storage_id
        if not touched:
            return SkipReason("no new materializations of the crawl stages' per-unit inputs")
        events = gathered_changes(instance, sorted(touched), catalog)
        return SensorResult(asset_events=events, cursor=json.dumps(positions, sort_keys=True))

    return crawl_signatures_complete_sensor
