"""Periodic reconciliation: register every source file that is in no unit yet (files that
landed out of order, which the incremental sensor does not revisit, and declared crawls)."""

from dagster import DefaultScheduleStatus, OpExecutionContext, ScheduleDefinition, job, op
from tokenmill.data_assets.k8s import MAX_RUNTIME_TAG
from tokenmill.data_assets.partitions import sync_partitions
from tokenmill.resources.automation import DiscoveryResource
from tokenmill.resources.lake import LakeResource

from tokenmill.crawl.sources import CrawlSource
from tokenmill.crawl.units import landed_crawls, register_new_files


@op(
    description="Group unregistered files into units and add their partitions; the first "
    "stage's on_missing automation condition launches them."
)
def register_landed_files(
    context: OpExecutionContext, lake: LakeResource, discovery: DiscoveryResource
) -> None:
    data = lake.get_lake()
    crawls = sorted(set(landed_crawls(data)) | set(CrawlSource.declared_crawls(data)))
    for crawl in crawls:
        registration = register_new_files(data, crawl, discovery.files_per_unit)
        for line in registration.describe_refused():
            context.log.warning(line)
        if registration.units:
            context.log.info(f"{crawl}: {len(registration.units)} new units")
    sync_partitions(context.instance, data)


@job(
    description="Register source files that are in no unit yet.",
    tags={MAX_RUNTIME_TAG: str(3600)},  # hourly: a hung run must not outlive the next one
)
def reconcile_landing():
    register_landed_files()


reconcile_schedule = ScheduleDefinition(
    job=reconcile_landing,
    cron_schedule="0 * * * *",
    default_status=DefaultScheduleStatus.RUNNING,
    description="Hourly: register stragglers the landing sensor did not see.",
)
