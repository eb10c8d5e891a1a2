"""Partitions: a shard of a crawl (crawl × shard), and a whole crawl. Both are dynamic, so new
crawls and shards are added at run time (by the discovery sensor or `tokenmill register`)."""

from __future__ import annotations

import hashlib

from dagster import (
    AssetObservation,
    AssetRecordsFilter,
    AssetSpec,
    DagsterInstance,
    DynamicPartitionsDefinition,
    MultiPartitionKey,
    MultiPartitionsDefinition,
    MultiToSingleDimensionPartitionMapping,
)

# private: an AssetObservation takes tags, not a data version, and only _core names this tag
from dagster._core.definitions.data_version import DATA_VERSION_TAG

from tokenmill.lake import Lake
from tokenmill.shards import Shard, registered_crawls, registered_shards

crawl_partitions = DynamicPartitionsDefinition(name="crawls")
shard_index_partitions = DynamicPartitionsDefinition(name="shards")
shard_partitions = MultiPartitionsDefinition(
    {"crawl": crawl_partitions, "shard": shard_index_partitions}
)
# A per-crawl asset depends on every shard of its crawl, and each shard on its crawl.
same_crawl = MultiToSingleDimensionPartitionMapping(partition_dimension_name="crawl")
# Dagster's stale-status resolver skips a dependency on 100 or more upstream partitions, so a new
# shard of a large crawl would not make the crawl's clusters stale through dedup_signatures. This
# external asset carries the crawl's shard list as one partition per crawl: its data version is a
# hash of the registered shards, observed whenever shards are registered.
crawl_shards = AssetSpec(
    "crawl_shards",
    partitions_def=crawl_partitions,
    group_name="ingest",
    description="The shards registered for a crawl (manifests/<crawl>/); its data version "
    "changes when a shard is added.",
)


def shard_from_key(partition_key: str | MultiPartitionKey) -> Shard:
    if not isinstance(partition_key, MultiPartitionKey):
        partition_key = shard_partitions.get_partition_key_from_str(partition_key)
    dims = partition_key.keys_by_dimension
    return Shard(dims["crawl"], dims["shard"])


def shard_key(shard: Shard) -> MultiPartitionKey:
    return MultiPartitionKey({"crawl": shard.crawl, "shard": shard.shard})


def shard_list_version(shards: list[Shard]) -> str:
    return hashlib.sha256("\n".join(sorted(s.shard for s in shards)).encode()).hexdigest()


def recorded_shard_list_version(instance: DagsterInstance, crawl: str) -> str | None:
    records = instance.fetch_observations(
        AssetRecordsFilter(asset_key=crawl_shards.key, asset_partitions=[crawl]), limit=1
    ).records
    return records[0].asset_observation.data_version if records else None


def shard_list_changes(
    instance: DagsterInstance, lake: Lake, crawls: list[str]
) -> list[AssetObservation]:
    """Observations of `crawl_shards` for the crawls whose registered shards are not the ones
    last observed; recording them makes those crawls' clusters stale."""
    return _observed_changes(instance, {crawl: registered_shards(lake, crawl) for crawl in crawls})


def _observed_changes(
    instance: DagsterInstance, shards_by_crawl: dict[str, list[Shard]]
) -> list[AssetObservation]:
    changes = []
    for crawl, shards in shards_by_crawl.items():
        version = shard_list_version(shards)
        if version != recorded_shard_list_version(instance, crawl):
            changes.append(
                AssetObservation(
                    crawl_shards.key, partition=crawl, tags={DATA_VERSION_TAG: version}
                )
            )
    return changes


def sync_partitions(instance: DagsterInstance, lake: Lake) -> None:
    """Add every registered crawl and shard of the lake that the instance does not know, and
    observe the shard list of every crawl whose shards changed."""
    crawls = registered_crawls(lake)
    shards_by_crawl = {crawl: registered_shards(lake, crawl) for crawl in crawls}
    shard_names = sorted({s.shard for shards in shards_by_crawl.values() for s in shards})
    for definition, keys in ((crawl_partitions, crawls), (shard_index_partitions, shard_names)):
        known = set(instance.get_dynamic_partitions(definition.name))
        missing = [k for k in keys if k not in known]
        if missing:
            instance.add_dynamic_partitions(definition.name, missing)
    for observation in _observed_changes(instance, shards_by_crawl):
        instance.report_runless_asset_event(observation)
