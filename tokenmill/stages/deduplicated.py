"""deduplicated: a unit's cleaned documents without the duplicates its crawl's clusters list."""

from tokenmill.dedup import CLUSTERS_FILE, filter_part
from tokenmill.layout import CLEANED, DEDUP_CLUSTERS, DEDUPLICATED, DOC_SCHEMA, Unit, crawl_prefix
from tokenmill.minhash import content_hashes
from tokenmill.outputs import MissingInputError, StageReport, read_batches, require_committed
from tokenmill.stage import Check, Pod, Scope, Stage, Verdict, Work


def run(work: Work) -> StageReport:
    clusters = crawl_prefix(DEDUP_CLUSTERS, work.unit.crawl)
    marker = require_committed(work.lake, clusters, f"dedup_clusters of crawl {work.unit.crawl}")
    if work.unit.name not in marker["counts"].get("unit_versions", {}):
        raise MissingInputError(
            f"the dedup_clusters of crawl {work.unit.crawl} do not cover unit {work.unit}: "
            "rematerialize them first"
        )
    return filter_part(work, f"{clusters}/{CLUSTERS_FILE}")


def no_exact_duplicates(lake, unit: Unit) -> Verdict:
    marker = require_committed(lake, unit.prefix(DEDUPLICATED), f"deduplicated {unit}")
    seen, repeated = set(), 0
    for part in range(marker["counts"]["files"]):
        key = f"{unit.part_prefix(DEDUPLICATED, part)}/docs.parquet"
        for batch in read_batches(lake, key, ["text"]):
            for value in content_hashes(batch.column("text").to_pylist()).tolist():
                repeated += value in seen
                seen.add(value)
    return Verdict(
        repeated == 0,
        f"{repeated} documents repeat another's normalized content",
        {"repeated": repeated},
    )


STAGE = Stage(
    name=DEDUPLICATED,
    scope=Scope.UNIT,
    run=run,
    upstream=(CLEANED, DEDUP_CLUSTERS),
    group="dedup",
    kinds=("parquet",),
    pod=Pod("2", "2Gi", "2", "3Gi"),
    checks=(Check("no_exact_duplicates", no_exact_duplicates),),
    schema=DOC_SCHEMA,
    data_files=("docs.parquet",),
    description="The unit's cleaned documents without the crawl's duplicates; removed.parquet "
    "lists each removed document with its cluster and survivor.",
)
