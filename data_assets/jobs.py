"""Jobs that run the stages in the order their partitions allow: per shard, then per crawl."""

from __future__ import annotations

from dagster import define_asset_job

from data_assets.k8s import run_tags


def stage_job(name: str, stages: list[str], description: str):
    """A job over some stages, its run pod sized for the heaviest of them (see data_assets/k8s)."""
    return define_asset_job(name, selection=stages, tags=run_tags(*stages), description=description)


ingest_shard_job = stage_job(
    "ingest_shard", ["raw_crawl", "cleaned", "dedup_signatures"], "Land, clean and sign one shard."
)
dedup_crawl_job = stage_job(
    "dedup_crawl", ["dedup_clusters"], "Cluster the duplicates of one crawl over all its shards."
)
tokenizer_job = stage_job(
    "build_tokenizer", ["tokenizer"], "Load or train the tokenizer every shard is tokenized with."
)
dedup_shard_job = stage_job(
    "dedup_shard", ["deduplicated"], "Remove the crawl's duplicates from one shard."
)
tokenize_shard_job = stage_job(
    "tokenize_shard",
    ["tokenized_shards"],
    "Tokenize one deduplicated shard into a Megatron indexed dataset.",
)
# In dependency order: the tokenizer trains on deduplicated text, shards need the tokenizer.
ALL_JOBS = [ingest_shard_job, dedup_crawl_job, dedup_shard_job, tokenizer_job, tokenize_shard_job]
