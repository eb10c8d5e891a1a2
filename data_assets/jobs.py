"""Jobs that run the stages in the order their partitions allow: per shard, then per crawl."""

from __future__ import annotations

from dagster import define_asset_job

from data_assets.k8s import run_tags

ingest_shard_job = define_asset_job(
    "ingest_shard",
    selection=["raw_crawl", "cleaned", "dedup_signatures"],
    tags=run_tags("raw_crawl", "cleaned", "dedup_signatures"),
    description="Land, clean and sign one shard.",
)
dedup_crawl_job = define_asset_job(
    "dedup_crawl",
    selection=["dedup_clusters"],
    tags=run_tags("dedup_clusters"),
    description="Cluster the duplicates of one crawl over all its shards.",
)
tokenizer_job = define_asset_job(
    "build_tokenizer", selection=["tokenizer"], tags=run_tags("tokenizer")
)
dedup_shard_job = define_asset_job(
    "dedup_shard",
    selection=["deduplicated"],
    tags=run_tags("deduplicated"),
    description="Remove the crawl's duplicates from one shard.",
)
tokenize_shard_job = define_asset_job(
    "tokenize_shard",
    selection=["tokenized_shards"],
    tags=run_tags("tokenized_shards"),
    description="Tokenize one deduplicated shard into a Megatron indexed dataset.",
)
# In dependency order: the tokenizer trains on deduplicated text, shards need the tokenizer.
ALL_JOBS = [ingest_shard_job, dedup_crawl_job, dedup_shard_job, tokenizer_job, tokenize_shard_job]
