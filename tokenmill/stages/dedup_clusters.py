"""dedup_clusters: the duplicate clusters over every file of every unit of a crawl.

In one step (``run``) or fanned out (``FAN_OUT``): ``plan`` checks the signature files and lists
the clustering's first tasks (``tokenmill.dedup.clustering``); parallel steps each start with their
share of them and go on through every later phase, sharing its tasks through the lake without
waiting for each other (``tokenmill.runtime.phases``); ``finish`` writes the removed list, which is
the same either way."""

from tokenmill.crawl.units import registered_units
from tokenmill.decontamination.removal import CONTAMINATION
from tokenmill.dedup.clustering import (
    PARTS,
    ClusterPlan,
    cluster_crawl,
    plan_clustering,
    prepare,
    run_clustering,
)
from tokenmill.dedup.settings import DedupSettings
from tokenmill.dedup.signature_files import check_files, crawl_signatures
from tokenmill.runtime.phases import slots, step_of
from tokenmill.runtime.stage import CrawlBoundary, FanOut, Pod, Scope, Stage, Work
from tokenmill.storage.layout import (
    CLEANED,
    CLUSTER_SCHEMA,
    DEDUP_CLUSTERS,
    DEDUP_SIGNATURES,
    crawl_prefix,
)
from tokenmill.storage.outputs import StageReport


def _units(work: Work):
    units = registered_units(work.lake, work.crawl)
    if not units:
        raise ValueError(f"crawl {work.crawl} has no registered units")
    return units


def _settings(work: Work) -> DedupSettings:
    return work.settings or DedupSettings()


def _plan(work: Work) -> ClusterPlan:
    settings = _settings(work)
    files = crawl_signatures(work.lake, _units(work))
    memory = int(settings.cluster_memory_gb * 2**30)
    return plan_clustering(files, crawl_prefix(PARTS, work.crawl), memory, settings.survivor)


def _fingerprint(plan: ClusterPlan) -> str:
    return plan.prefix.rsplit("/", 1)[1]


def run(work: Work) -> StageReport:
    return _finish(work, _units(work), prepared=False)


def plan(work: Work) -> list[str]:
    """The first phase's tasks; the work prefix cleared of other inputs' work."""
    clustering = _plan(work)
    check_files(work.lake, clustering.files)
    prepare(work.lake, clustering)
    return slots(_fingerprint(clustering))


def run_share(work: Work, handed: list[str], workers: int) -> dict:
    """This step's share of every phase of the clustering (``tokenmill.runtime.phases``), in at most
    ``cluster_workers`` processes: each may take ``cluster_memory_gb``, which the stage's pod
    is sized for."""
    clustering = _plan(work)
    step, steps = step_of(_fingerprint(clustering), handed, "signature files")
    workers = min(workers, _settings(work).cluster_workers)
    return run_clustering(work.lake, clustering, workers, step, steps)


def finish(work: Work, shares: list[dict]) -> StageReport:
    report = _finish(work, _units(work), prepared=True)
    report.counts["parallel_steps"] = len(shares)
    report.counts["tasks_computed"] += sum(share["tasks_computed"] for share in shares)
    return report


def _finish(work: Work, units, prepared: bool) -> StageReport:
    report = StageReport()
    with work.writer(report) as out:
        cluster_crawl(work.lake, units, _settings(work), out, prepared=prepared)
    work.lake.delete_prefix(crawl_prefix(PARTS, work.crawl))  # committed: the work is spent
    return report


STAGE = Stage(
    name=DEDUP_CLUSTERS,
    scope=Scope.CRAWL,
    run=run,
    settings=DedupSettings,
    upstream=(DEDUP_SIGNATURES,),
    group="dedup",
    # the recipe's one crawl-wide materialization: it shows the crawl's distribution of each
    # rule's value, with the recipe's thresholds
    distributions_of=CLEANED,
    crawl_sums=(CONTAMINATION,),
    kinds=("parquet",),
    # each process holds one task's range: bounded by cluster_memory_gb (4 GiB)
    pod=Pod("2", "6Gi", "2", "8Gi"),
    max_runtime_s=12 * 3600,  # one run clusters a whole crawl
    schema=CLUSTER_SCHEMA,
    fan_out=FanOut(plan=plan, run=run_share, finish=finish),
    work_zones=(PARTS,),
    boundary=CrawlBoundary(gathered="crawl_signatures", reported="unit_duplicates"),
    description="Duplicate clusters over all units of a crawl: each removed document with its "
    "cluster, its survivor and whether it is an exact or a near duplicate.",
)
