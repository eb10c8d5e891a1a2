"""dedup_clusters: the duplicate clusters over every file of every unit of a crawl.

In one step (``run``) or fanned out (``FAN_OUT``): ``plan`` checks the signature files and lists
the clustering's first tasks (``tokenmill.dedup_parts``); parallel steps each start with their
share of them and go on through every later phase, sharing its tasks through the lake without
waiting for each other (``tokenmill.phases``); ``finish`` writes the removed list, which is the
same either way."""

from tokenmill.dedup import DedupSettings
from tokenmill.dedup_parts import (
    PARTS,
    ClusterPlan,
    cluster_crawl,
    plan_clustering,
    prepare,
    run_clustering,
)
from tokenmill.layout import (
    CLEANED,
    CLUSTER_SCHEMA,
    DEDUP_CLUSTERS,
    DEDUP_SIGNATURES,
    crawl_prefix,
)
from tokenmill.outputs import StageReport
from tokenmill.signature_files import check_files, crawl_signatures
from tokenmill.stage import CrawlBoundary, FanOut, Pod, Scope, Stage, Work
from tokenmill.units import registered_units


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


SLOTS = 256  # at most this many parallel steps share the clustering's tasks


class PlanChangedError(ValueError):
    """The signature files changed between the plan step and a later one."""


def _slots(plan: ClusterPlan) -> list[str]:
    """What ``plan`` hands the steps: SLOTS names, each with the plan's fingerprint; step i
    of n gets slots i, i + n, ... and computes every n-th task of each phase from the i-th."""
    fingerprint = plan.prefix.rsplit("/", 1)[1]
    return [f"{fingerprint}/{slot:03d}" for slot in range(SLOTS)]


def run(work: Work) -> StageReport:
    return _finish(work, _units(work))


def plan(work: Work) -> list[str]:
    """The first phase's tasks; the work prefix cleared of other inputs' work."""
    clustering = _plan(work)
    check_files(work.lake, clustering.files)
    prepare(work.lake, clustering)
    return _slots(clustering)


def run_share(work: Work, slots: list[str], workers: int) -> dict:
    """This step's share of every phase of the clustering (``tokenmill.phases``), in at most
    ``cluster_workers`` processes: each may take ``cluster_memory_gb``, which the stage's pod
    is sized for."""
    clustering = _plan(work)
    every = _slots(clustering)
    if slots and slots[0] not in every:
        raise PlanChangedError(
            f"the clustering was planned for other signature files than the crawl's now "
            f"(plan {slots[0].split('/')[0]}, now {clustering.prefix.rsplit('/', 1)[1]}): "
            "re-run the stage"
        )
    step = every.index(slots[0]) if slots else 0
    steps = every.index(slots[1]) - step if len(slots) > 1 else SLOTS
    workers = min(workers, _settings(work).cluster_workers)
    return run_clustering(work.lake, clustering, workers, step, steps)


def finish(work: Work, shares: list[dict]) -> StageReport:
    report = _finish(work, _units(work))
    report.counts["parallel_steps"] = len(shares)
    report.counts["tasks_computed"] += sum(share["tasks_computed"] for share in shares)
    return report


def _finish(work: Work, units) -> StageReport:
    report = StageReport()
    with work.writer(report) as out:
        cluster_crawl(work.lake, units, _settings(work), out)
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
