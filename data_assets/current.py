"""A step whose asset partition is current keeps the committed output instead of writing it
again.

Current means: the partition's latest materialization was made by the same code version
(recipe section included), with the same run config overrides, from inputs whose data versions
are still the ones it recorded (`input_data_versions` in its metadata, with a digest of what the
stage reads from outside the lake's lineage: `Stage.outside`), and the partition's
marker and every file it lists are still in the lake. Stages are deterministic, so a rewrite
would put the same bytes back; but it first removes the marker, so a run downstream reading the
partition at that moment would find it missing. That happens when two runs plan the same
partition at once (a `tokenmill run` beside the automation): the second waits for the first
(`tokenmill.runs.claims`), then finds the partition current. A run tagged
``tokenmill/recompute: true`` (`tokenmill run --force`) always writes.
"""

from __future__ import annotations

from dagster import AssetExecutionContext, AssetKey, AssetRecordsFilter

from tokenmill.dagster_internals import CODE_VERSION_TAG, extract_data_version_from_entry
from tokenmill.storage.lake import Lake
from tokenmill.storage.layout import MARKER
from tokenmill.storage.outputs import StageReport

RECOMPUTE_TAG = "tokenmill/recompute"
# metadata of a stage's materialization
OVERRIDES = "recipe_overrides"  # what the run config changed from the recipe
INPUTS = "input_data_versions"  # each input asset's data version the output was made from
KEPT = "kept_committed_output"  # this materialization kept the committed output
OUTSIDE = "outside_lineage"  # among the inputs: what the stage reads from outside (Stage.outside)


def input_data_versions(context: AssetExecutionContext) -> dict[str, str | None]:
    """The data version of each input of the step's asset partition, by asset: its same
    partition, or the whole asset when it is not partitioned (None: never made, or partitioned
    otherwise)."""
    layer = context.job_def.asset_layer
    own = layer.get(context.asset_key)
    partition = context.partition_key if context.has_partition_key else None
    versions = {}
    for parent in sorted(own.parent_keys, key=AssetKey.to_user_string):
        partitions_def = layer.get(parent).partitions_def
        if partitions_def is not None and partitions_def != own.partitions_def:
            versions[parent.to_user_string()] = None  # many partitions: not compared
            continue
        record = context.instance.get_latest_data_version_record(
            parent, partition_key=partition if partitions_def is not None else None
        )
        version = extract_data_version_from_entry(record.event_log_entry) if record else None
        versions[parent.to_user_string()] = version.value if version else None
    return versions


def current_output(
    context: AssetExecutionContext,
    lake: Lake,
    prefix: str,
    overrides: dict,
    inputs: dict[str, str | None],
) -> StageReport | None:
    """The committed report of this step's asset partition when it is current, else None."""
    if context.run.tags.get(RECOMPUTE_TAG) == "true":
        return None
    marker = f"{prefix}/{MARKER}"
    listed = set(lake.list(prefix))
    if marker not in listed:
        return None
    key = context.asset_key
    partition = context.partition_key if context.has_partition_key else None
    latest = context.instance.fetch_materializations(
        AssetRecordsFilter(asset_key=key, asset_partitions=[partition] if partition else None),
        limit=1,
    ).records
    if not latest:
        return None
    materialization = latest[0].asset_materialization
    recorded = {name: entry.value for name, entry in materialization.metadata.items()}
    if (
        materialization.tags.get(CODE_VERSION_TAG) != context.assets_def.code_versions_by_key[key]
        or recorded.get(OVERRIDES, {}) != overrides
        or recorded.get(INPUTS) != inputs
        or None in inputs.values()
    ):
        return None
    summary = lake.read_json(marker)
    if any(f"{prefix}/{name}" not in listed for name in summary.get("outputs", {})):
        return None
    return StageReport.from_summary(summary)
