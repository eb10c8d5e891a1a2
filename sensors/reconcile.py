"""Periodic reconciliation: register every landed file that is in no shard yet (also files
that landed out of order, which the incremental sensor does not revisit)."""

from dagster import DefaultScheduleStatus, OpExecutionContext, ScheduleDefinition, job, op

from data_assets.partitions import sync_partitions
from resources.automation import DiscoveryResource
from resources.lake import LakeResource
from tokenmill.shards import landed_crawls, register_new_files


@op(
    description="Group unregistered landed files into shards and add their partitions; "
    "raw_crawl's on_missing automation condition launches them."
)
def register_landed_files(
    context: OpExecutionContext, lake: LakeResource, discovery: DiscoveryResource
) -> None:
    data = lake.get_lake()
    for crawl in landed_crawls(data):
        new = register_new_files(data, crawl, discovery.files_per_shard)
        if new:
            context.log.info(f"{crawl}: new shards {', '.join(s.shard for s in new)}")
    sync_partitions(context.instance, data)


@job(description="Register landed files that are in no shard yet.")
def reconcile_landing():
    register_landed_files()


reconcile_schedule = ScheduleDefinition(
    job=reconcile_landing,
    cron_schedule="0 * * * *",
    default_status=DefaultScheduleStatus.RUNNING,
    description="Hourly: register stragglers the landing sensor did not see.",
)
