"""The dataset stages as partitioned assets. Each one hands its partition to the processing
core (`tokenmill`) and reports what it did; nothing here touches data itself."""

from dagster import (
    AssetCheckSpec,
    AssetDep,
    AssetExecutionContext,
    AssetSelection,
    AutomationCondition,
    BackfillPolicy,
    MaterializeResult,
    asset,
)

from data_assets.config import CleanConfig, DedupConfig, TokenizeConfig, TokenizerConfig
from data_assets.k8s import op_tags
from data_assets.partitions import crawl_partitions, crawl_shards, same_crawl, shard_partitions
from data_assets.stage import STAGE_RETRY, ShardCheck, materialize_shards, run_stage, stage_result
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

# A backfill over many shards launches one run per MAX_SHARDS_PER_RUN shards, not one per shard.
# Whatever its size, a run costs set-up and 12-22 event-log writes (each ~10-100 ms on
# the local SQLite instance): 25 shards per run make a 200-shard backfill 26 runs instead of 77
# (benchmarks/bench_orchestration.py). A run works through its shards one after another, keeping
# a few KB of counters per shard; a retried step resumes after the shards it committed
# (StepJournal in stage.py).
MAX_SHARDS_PER_RUN = 25
SHARD_STAGE = dict(
    partitions_def=shard_partitions,
    retry_policy=STAGE_RETRY,
    backfill_policy=BackfillPolicy.multi_run(max_partitions_per_run=MAX_SHARDS_PER_RUN),
)
# Each stage follows its inputs on its own: a landed shard is cleaned and signed, a crawl's
# clusters are recomputed once all its shards are signed, and so on down to the tokens.
FOLLOWS_INPUTS = AutomationCondition.eager()
MAX_BAD_RECORD_RATE = 0.05


@asset(
    op_tags=op_tags("raw_crawl"),
    **SHARD_STAGE,
    # New shards are launched by the landing sensor; on_missing catches any it did not launch
    # (shards registered by the reconciliation schedule or `tokenmill register`).
    automation_condition=AutomationCondition.on_missing(),
    group_name="ingest",
    kinds={"warc"},
    check_specs=[AssetCheckSpec("bad_record_rate", asset="raw_crawl")],
    description="The shard's WARC files landed in the raw zone, gzip-verified, with a per-record "
    "index (record id, URI, offset) and unreadable records kept aside in quarantine.parquet.",
)
def raw_crawl(context: AssetExecutionContext, lake: LakeResource) -> MaterializeResult:
    bad_records = ShardCheck(
        "bad_record_rate",
        lambda data, shard: verify.bad_record_rate(data, shard, MAX_BAD_RECORD_RATE),
        warn_only=True,
    )
    return materialize_shards(context, lake.get_lake(), RAW, land_shard, [bad_records])


@asset(
    op_tags=op_tags("cleaned"),
    **SHARD_STAGE,
    automation_condition=FOLLOWS_INPUTS,
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
    settings = config.settings()
    return materialize_shards(
        context,
        lake.get_lake(),
        CLEANED,
        lambda data, shard: clean_shard(data, shard, settings),
        [ShardCheck("provenance_resolves", verify.provenance_resolves)],
    )


@asset(
    op_tags=op_tags("dedup_signatures"),
    **SHARD_STAGE,
    automation_condition=FOLLOWS_INPUTS,
    group_name="dedup",
    kinds={"parquet"},
    deps=[cleaned],
    description="Per document: normalized-content hash and MinHash LSH band hashes.",
)
def dedup_signatures(
    context: AssetExecutionContext, config: DedupConfig, lake: LakeResource
) -> MaterializeResult:
    settings = config.settings()
    return materialize_shards(
        context,
        lake.get_lake(),
        SIGNATURES,
        lambda data, shard: compute_signatures(data, shard, settings),
    )


@asset(
    op_tags=op_tags("dedup_clusters"),
    partitions_def=crawl_partitions,
    # The shard list only tells Dagster when the clusters are stale; the signatures of the new
    # shards trigger the recomputation (and a crawl whose list was never observed is not held).
    automation_condition=FOLLOWS_INPUTS.ignore(AssetSelection.assets(crawl_shards.key)),
    retry_policy=STAGE_RETRY,
    group_name="dedup",
    kinds={"parquet"},
    deps=[AssetDep(dedup_signatures, partition_mapping=same_crawl), crawl_shards],
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
    automation_condition=FOLLOWS_INPUTS,
    group_name="dedup",
    kinds={"parquet"},
    deps=[cleaned, AssetDep(dedup_clusters, partition_mapping=same_crawl)],
    check_specs=[AssetCheckSpec("no_exact_duplicates", asset="deduplicated")],
    description="The shard's cleaned documents without the crawl's duplicates; removed.parquet "
    "lists each removed document with its cluster and survivor.",
)
def deduplicated(context: AssetExecutionContext, lake: LakeResource) -> MaterializeResult:
    return materialize_shards(
        context,
        lake.get_lake(),
        DEDUPLICATED,
        filter_shard,
        [ShardCheck("no_exact_duplicates", verify.no_exact_duplicates)],
    )


@asset(
    op_tags=op_tags("tokenizer"),
    retry_policy=STAGE_RETRY,
    # Built once, when there is deduplicated text to train on; changing it re-tokenizes
    # everything, so that is a deliberate launch.
    automation_condition=(
        AutomationCondition.missing()
        & AutomationCondition.any_deps_match(~AutomationCondition.missing())
        & ~AutomationCondition.any_deps_missing()
        & ~AutomationCondition.any_deps_in_progress()
        & ~AutomationCondition.in_progress()
    ),
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
    automation_condition=FOLLOWS_INPUTS,
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
    return materialize_shards(
        context,
        lake.get_lake(),
        TOKENIZED,
        lambda data, shard: tokenize_shard(data, shard, config.append_eod),
        [ShardCheck("shard_is_consistent", verify.shard_is_consistent)],
    )
