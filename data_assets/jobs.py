"""Jobs that run the stages in the order their partitions allow: per shard, then per crawl."""

from __future__ import annotations

from dagster import define_asset_job

from data_assets.partitions import crawl_partitions, shard_partitions

ingest_shard_job = define_asset_job(
    "ingest_shard",
    selection=["raw_crawl", "cleaned", "dedup_signatures"],
    partitions_def=shard_partitions,
    description="Land, clean and sign one shard.",
)
dedup_crawl_job = define_asset_job(
    "dedup_crawl",
    selection=["dedup_clusters"],
    partitions_def=crawl_partitions,
    description="Cluster the duplicates of one crawl over all its shards.",
)
tokenizer_job = define_asset_job("build_tokenizer", selection=["tokenizer"])
finish_shard_job = define_asset_job(
    "finish_shard",
    selection=["deduplicated", "tokenized_shards"],
    partitions_def=shard_partitions,
    description="Remove the crawl's duplicates from one shard and tokenize it.",
)
ALL_JOBS = [ingest_shard_job, dedup_crawl_job, tokenizer_job, finish_shard_job]
