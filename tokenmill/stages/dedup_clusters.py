"""dedup_clusters: the duplicate clusters over every file of every unit of a crawl."""

from tokenmill.dedup import DedupSettings, compute_clusters
from tokenmill.dedup_parts import PARTS
from tokenmill.layout import CLUSTER_SCHEMA, DEDUP_CLUSTERS, DEDUP_SIGNATURES, crawl_prefix
from tokenmill.outputs import StageReport
from tokenmill.stage import Pod, Scope, Stage, Work
from tokenmill.units import registered_units


def run(work: Work) -> StageReport:
    units = registered_units(work.lake, work.crawl)
    if not units:
        raise ValueError(f"crawl {work.crawl} has no registered units")
    report = StageReport()
    with work.writer(report) as out:
        compute_clusters(work.lake, units, work.settings or DedupSettings(), out)
    work.lake.delete_prefix(crawl_prefix(PARTS, work.crawl))  # committed: parts are spent
    return report


STAGE = Stage(
    name=DEDUP_CLUSTERS,
    scope=Scope.CRAWL,
    run=run,
    settings=DedupSettings,
    upstream=(DEDUP_SIGNATURES,),
    group="dedup",
    kinds=("parquet",),
    # each process holds one part of one key column: bounded by cluster_memory_gb (4 GiB)
    pod=Pod("2", "6Gi", "2", "8Gi"),
    max_runtime_s=12 * 3600,  # one run clusters a whole crawl
    schema=CLUSTER_SCHEMA,
    description="Duplicate clusters over all units of a crawl: each removed document with its "
    "cluster, its survivor and whether it is an exact or a near duplicate.",
)
