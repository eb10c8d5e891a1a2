"""Telling a release it no longer matches its inputs: after tokenized shards were materialized,
observe each recipe's `release_inputs` with the version a release made now would have, when
that is another one than the release's (see data_assets/release_inputs.py). It launches
nothing: a release is made on purpose."""

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
from tokenmill.data_assets.release_inputs import FOLLOWING, release_input_changes
from tokenmill.resources.automation import tick_seconds
from tokenmill.resources.lake import LakeResource
from tokenmill.sensors.crawls import cursor_positions


def release_inputs_changed(catalog: Catalog) -> SensorDefinition:
    watched = {
        dataset.key(name).to_user_string(): dataset
        for stage in FOLLOWING
        for dataset in catalog.serving(stage)
        for name in stage.upstream
    }

    @sensor(
        name="release_inputs_changed",
        minimum_interval_seconds=tick_seconds(300),
        default_status=DefaultSensorStatus.RUNNING,
        description="After tokenized shards were materialized, observes each recipe's "
        "release_inputs when a release made now would be another one than its latest: the "
        "release then shows stale. Launches nothing (a release is made on purpose).",
    )
    def release_inputs_changed_sensor(
        context: SensorEvaluationContext, lake: LakeResource
    ) -> SensorResult | SkipReason:
        positions = cursor_positions(context.cursor, sorted(watched))
        touched = []
        for name, after in positions.items():
            records = context.instance.fetch_materializations(
                AssetRecordsFilter(
                    asset_key=AssetKey.from_user_string(name), after_storage_id=after
                ),
                limit=1,
                ascending=False,
            ).records
            if records:
                positions[name] = records[0].storage_id
                touched.append(watched[name])
        if not touched:
            return SkipReason("no tokenized shards materialized since the last tick")
        events = release_input_changes(context.instance, lake.get_lake(), touched, quick=True)
        return SensorResult(asset_events=events, cursor=json.dumps(positions, sort_keys=True))

    return release_inputs_changed_sensor
