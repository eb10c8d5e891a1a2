"""dedup_clusters: the duplicate clusters over every file of every unit of a crawl."""

from tokenmill.dedup import DedupSettings, compute_clusters
from tokenmill.layout import DEDUP_CLUSTERS, DEDUP_SIGNATURES
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
    return report


STAGE = Stage(
    name=DEDUP_CLUSTERS,
    scope=Scope.CRAWL,
    run=run,
    settings=DedupSettings,
    upstream=(DEDUP_SIGNATURES,),
    group="dedup",
    kinds=("parquet",),
    # holds the crawl's band keys in memory, one band at a time
    pod=Pod("1", "16Gi", "2", "24Gi"),
    description="Duplicate clusters over all units of a crawl: each removed document with its "
    "cluster, its survivor and whether it is an exact or a near duplicate.",
)
