"""The dataset stages as partitioned assets. Each one hands its partition to the processing
core (`tokenmill`) and reports what it did; nothing here touches data itself."""

from dagster import AssetCheckSpec, AssetDep, AssetExecutionContext, MaterializeResult, asset

from data_assets.config import CleanConfig, DedupConfig, TokenizeConfig, TokenizerConfig
from data_assets.k8s import op_tags
from data_assets.partitions import crawl_partitions, same_crawl, shard_from_key, shard_partitions
from data_assets.stage import STAGE_RETRY, check, run_stage, stage_result
from resources.lake import LakeResource
from tokenmill import verify
from tokenmill.clean import CLEANED, clean_shard
from tokenmill.dedup import (
    CLUSTERS,
    DEDUPLICATED,
    SIGNATURES,
    compute_clusters,
    compute_signatures,
    filter_shard,
)
from tokenmill.ingest import RAW, land_shard
from tokenmill.shards import crawl_prefix
from tokenmill.tokenize import TOKENIZED, TOKENIZER_KEY, build_tokenizer, tokenize_shard

SHARD_STAGE = dict(partitions_def=shard_partitions, retry_policy=STAGE_RETRY)
MAX_BAD_RECORD_RATE = 0.05


@asset(
    op_tags=op_tags("raw_crawl"),
    **SHARD_STAGE,
    group_name="ingest",
    kinds={"warc"},
    check_specs=[AssetCheckSpec("bad_record_rate", asset="raw_crawl")],
    description="The shard's WARC files landed in the raw zone, gzip-verified, with a per-record "
    "index (record id, URI, offset) and unreadable records kept aside in quarantine.parquet.",
)
def raw_crawl(context: AssetExecutionContext, lake: LakeResource) -> MaterializeResult:
    data, shard = lake.get_lake(), shard_from_key(context.partition_key)
    report = run_stage(lambda: land_shard(data, shard))
    verdict = verify.bad_record_rate(data, shard, MAX_BAD_RECORD_RATE)
    return stage_result(report, data, shard.prefix(RAW), [check("bad_record_rate", verdict, True)])


@asset(
    op_tags=op_tags("cleaned"),
    **SHARD_STAGE,
    group_name="clean",
    kinds={"parquet"},
    deps=[raw_crawl],
    check_specs=[AssetCheckSpec("provenance_resolves", asset="cleaned")],
    description="Main-content text of HTML responses with language and provenance columns, "
    "after quality filters; every dropped document is in rejected.parquet with its reason.",
)
def cleaned(
    context: AssetExecutionContext, config: CleanConfig, lake: LakeResource
) -> MaterializeResult:
    data, shard = lake.get_lake(), shard_from_key(context.partition_key)
    report = run_stage(lambda: clean_shard(data, shard, config.settings()))
    verdict = verify.provenance_resolves(data, shard)
    return stage_result(
        report, data, shard.prefix(CLEANED), [check("provenance_resolves", verdict)]
    )


@asset(
    op_tags=op_tags("dedup_signatures"),
    **SHARD_STAGE,
    group_name="dedup",
    kinds={"parquet"},
    deps=[cleaned],
    description="Per document: normalized-content hash and MinHash LSH band hashes.",
)
def dedup_signatures(
    context: AssetExecutionContext, config: DedupConfig, lake: LakeResource
) -> MaterializeResult:
    data, shard = lake.get_lake(), shard_from_key(context.partition_key)
    report = run_stage(lambda: compute_signatures(data, shard, config.settings()))
    return stage_result(report, data, shard.prefix(SIGNATURES))


@asset(
    op_tags=op_tags("dedup_clusters"),
    partitions_def=crawl_partitions,
    retry_policy=STAGE_RETRY,
    group_name="dedup",
    kinds={"parquet"},
    deps=[AssetDep(dedup_signatures, partition_mapping=same_crawl)],
    description="Duplicate clusters over all shards of a crawl: each removed document with its "
    "cluster, its survivor and whether it is an exact or a near duplicate.",
)
def dedup_clusters(
    context: AssetExecutionContext, config: DedupConfig, lake: LakeResource
) -> MaterializeResult:
    data, crawl = lake.get_lake(), context.partition_key
    report = run_stage(lambda: compute_clusters(data, crawl, config.settings()))
    return stage_result(report, data, crawl_prefix(CLUSTERS, crawl))


@asset(
    op_tags=op_tags("deduplicated"),
    **SHARD_STAGE,
    group_name="dedup",
    kinds={"parquet"},
    deps=[cleaned, AssetDep(dedup_clusters, partition_mapping=same_crawl)],
    check_specs=[AssetCheckSpec("no_exact_duplicates", asset="deduplicated")],
    description="The shard's cleaned documents without the crawl's duplicates; removed.parquet "
    "lists each removed document with its cluster and survivor.",
)
def deduplicated(context: AssetExecutionContext, lake: LakeResource) -> MaterializeResult:
    data, shard = lake.get_lake(), shard_from_key(context.partition_key)
    report = run_stage(lambda: filter_shard(data, shard))
    verdict = verify.no_exact_duplicates(data, shard)
    return stage_result(
        report, data, shard.prefix(DEDUPLICATED), [check("no_exact_duplicates", verdict)]
    )


@asset(
    op_tags=op_tags("tokenizer"),
    retry_policy=STAGE_RETRY,
    group_name="tokenize",
    kinds={"huggingface"},
    deps=[deduplicated],
    description="The HuggingFace tokenizer every shard is tokenized with: a configured "
    "tokenizer.json, or a byte-level BPE trained on a sample of deduplicated text.",
)
def tokenizer(config: TokenizerConfig, lake: LakeResource) -> MaterializeResult:
    data = lake.get_lake()
    report = run_stage(
        lambda: build_tokenizer(data, config.path, config.vocab_size, config.sample_mb << 20)
    )
    return stage_result(report, data, TOKENIZER_KEY)


@asset(
    op_tags=op_tags("tokenized_shards"),
    **SHARD_STAGE,
    group_name="tokenize",
    kinds={"numpy"},
    deps=[deduplicated, tokenizer],
    check_specs=[AssetCheckSpec("shard_is_consistent", asset="tokenized_shards")],
    description="Megatron indexed dataset (tokens.bin + tokens.idx) and provenance.parquet "
    "mapping every document, by token span, to its WARC file and record.",
)
def tokenized_shards(
    context: AssetExecutionContext, config: TokenizeConfig, lake: LakeResource
) -> MaterializeResult:
    data, shard = lake.get_lake(), shard_from_key(context.partition_key)
    report = run_stage(lambda: tokenize_shard(data, shard, config.append_eod))
    verdict = verify.shard_is_consistent(data, shard)
    return stage_result(
        report, data, shard.prefix(TOKENIZED), [check("shard_is_consistent", verdict)]
    )
