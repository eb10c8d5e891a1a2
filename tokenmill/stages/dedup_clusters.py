"""dedup_clusters: the duplicate clusters over every file of every unit of a crawl.

In one step (``run``) or fanned out (``FAN_OUT``): ``plan`` checks the signature files and lists
the clustering's parts (``tokenmill.dedup_parts``), parallel steps each compute a share of them,
and ``finish`` unions their edges and writes the removed list, which is the same either way."""

from tokenmill.dedup import DedupSettings
from tokenmill.dedup_parts import (
    PARTS,
    check_files,
    cluster_crawl,
    crawl_signatures,
    part_key,
    plan_parts,
    prepare_parts,
    run_parts,
)
from tokenmill.layout import (
    CLEANED,
    CLUSTER_SCHEMA,
    DEDUP_CLUSTERS,
    DEDUP_SIGNATURES,
    crawl_prefix,
)
from tokenmill.outputs import StageReport
from tokenmill.stage import CrawlBoundary, FanOut, Pod, Scope, Stage, Work
from tokenmill.units import registered_units


def _units(work: Work):
    units = registered_units(work.lake, work.crawl)
    if not units:
        raise ValueError(f"crawl {work.crawl} has no registered units")
    return units


def _settings(work: Work) -> DedupSettings:
    return work.settings or DedupSettings()


def _memory(work: Work) -> int:
    return int(_settings(work).cluster_memory_gb * 2**30)


def run(work: Work) -> StageReport:
    return _finish(work, _units(work))


def plan(work: Work) -> list[str]:
    """The keys of the parts' files; the work prefix cleared of other inputs' parts."""
    files = crawl_signatures(work.lake, _units(work))
    check_files(work.lake, files)
    return prepare_parts(work.lake, files, crawl_prefix(PARTS, work.crawl), _memory(work))


def run_share(work: Work, keys: list[str], workers: int) -> dict:
    """Computes the planned parts ``keys``, in at most ``cluster_workers`` processes: each may
    take ``cluster_memory_gb``, which the stage's pod is sized for."""
    files = crawl_signatures(work.lake, _units(work))
    workers = min(workers, _settings(work).cluster_workers)
    parts = run_parts(
        work.lake, files, crawl_prefix(PARTS, work.crawl), _memory(work), workers, only=keys
    )
    return {"parts": len(keys), "computed": len(parts.ran), "reused": len(parts.reused)}


def finish(work: Work, shares: list[dict]) -> StageReport:
    units = _units(work)
    files = crawl_signatures(work.lake, units)
    prefix = crawl_prefix(PARTS, work.crawl)
    planned = [part_key(prefix, files, part) for part in plan_parts(files, _memory(work))]
    report = _finish(work, units, planned, files)
    report.counts["parts_computed"] = sum(share["computed"] for share in shares)
    report.counts["parallel_steps"] = len(shares)
    return report


def _finish(work: Work, units, planned: list[str] | None = None, files=None) -> StageReport:
    report = StageReport()
    with work.writer(report) as out:
        cluster_crawl(work.lake, units, _settings(work), out, planned=planned, files=files)
    work.lake.delete_prefix(crawl_prefix(PARTS, work.crawl))  # committed: parts are spent
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
    # each process holds one part of one key column: bounded by cluster_memory_gb (4 GiB)
    pod=Pod("2", "6Gi", "2", "8Gi"),
    max_runtime_s=12 * 3600,  # one run clusters a whole crawl
    schema=CLUSTER_SCHEMA,
    fan_out=FanOut(plan=plan, run=run_share, finish=finish),
    work_zones=(PARTS,),
    boundary=CrawlBoundary(gathered="crawl_signatures", reported="unit_duplicates"),
    description="Duplicate clusters over all units of a crawl: each removed document with its "
    "cluster, its survivor and whether it is an exact or a near duplicate.",
)
