"""Every stage of the pipeline, in lineage order: the one list the orchestration, the summary
and the tests are built from. A new stage is a module here and one line below."""

from tokenmill.runtime.stage import Stage
from tokenmill.stages import (
    cleaned,
    dedup_clusters,
    dedup_signatures,
    deduplicated,
    eval_index,
    extracted,
    raw_crawl,
    release,
    score_distribution,
    scored,
    tokenized_shards,
    tokenizer,
)

STAGES: tuple[Stage, ...] = (
    raw_crawl.STAGE,
    extracted.STAGE,
    scored.STAGE,
    score_distribution.STAGE,
    eval_index.STAGE,
    cleaned.STAGE,
    dedup_signatures.STAGE,
    dedup_clusters.STAGE,
    deduplicated.STAGE,
    tokenizer.STAGE,
    tokenized_shards.STAGE,
    release.STAGE,
)


def stage_named(name: str) -> Stage:
    for stage in STAGES:
        if stage.name == name:
            return stage
    raise KeyError(f"no stage named {name!r}; stages: {[s.name for s in STAGES]}")
