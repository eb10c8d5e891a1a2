"""Partitions: a shard of a crawl (crawl × shard), and a whole crawl. Both are dynamic, so new
crawls and shards are added at run time (by the discovery sensor or `tokenmill register`)."""

from __future__ import annotations

from dagster import (
    DagsterInstance,
    DynamicPartitionsDefinition,
    MultiPartitionKey,
    MultiPartitionsDefinition,
    MultiToSingleDimensionPartitionMapping,
)

from tokenmill.lake import Lake
from tokenmill.shards import Shard, registered_crawls, registered_shards

crawl_partitions = DynamicPartitionsDefinition(name="crawls")
shard_index_partitions = DynamicPartitionsDefinition(name="shards")
shard_partitions = MultiPartitionsDefinition(
    {"crawl": crawl_partitions, "shard": shard_index_partitions}
)
# A per-crawl asset depends on every shard of its crawl, and each shard on its crawl.
same_crawl = MultiToSingleDimensionPartitionMapping(partition_dimension_name="crawl")


def shard_from_key(partition_key: str | MultiPartitionKey) -> Shard:
    if not isinstance(partition_key, MultiPartitionKey):
        partition_key = shard_partitions.get_partition_key_from_str(partition_key)
    dims = partition_key.keys_by_dimension
    return Shard(dims["crawl"], dims["shard"])


def shard_key(shard: Shard) -> MultiPartitionKey:
    return MultiPartitionKey({"crawl": shard.crawl, "shard": shard.shard})


def sync_partitions(instance: DagsterInstance, lake: Lake) -> None:
    """Add every registered crawl and shard of the lake that the instance does not know."""
    crawls = registered_crawls(lake)
    shard_names = sorted({s.shard for c in crawls for s in registered_shards(lake, c)})
    for definition, keys in ((crawl_partitions, crawls), (shard_index_partitions, shard_names)):
        known = set(instance.get_dynamic_partitions(definition.name))
        missing = [k for k in keys if k not in known]
        if missing:
            instance.add_dynamic_partitions(definition.name, missing)
