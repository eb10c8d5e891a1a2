"""Run failures: a record in the lake for every failed run, and a webhook post when set."""

from __future__ import annotations

from dagster import DefaultSensorStatus, RunFailureSensorContext, run_failure_sensor
from tokenmill.resources.automation import AlertsResource
from tokenmill.resources.lake import LakeResource

FAILURES = "ops/failures"


@run_failure_sensor(
    default_status=DefaultSensorStatus.RUNNING,
    description="Writes ops/failures/<run id>.json to the lake and posts it to the webhook.",
)
def record_run_failures(
    context: RunFailureSensorContext, lake: LakeResource, alerts: AlertsResource
) -> None:
    run = context.dagster_run
    record = {
        "run_id": run.run_id,
        "job": run.job_name,
        "partition": run.tags.get("dagster/partition"),
        "backfill": run.tags.get("dagster/backfill"),
        "message": context.failure_event.message,
        "steps": [event.step_key for event in context.get_step_failure_events()],
        "errors": [
            event.event_specific_data.error.message
            for event in context.get_step_failure_events()
            if event.event_specific_data and event.event_specific_data.error
        ],
    }
    lake.get_lake().write_json(f"{FAILURES}/{run.run_id}.json", record)
    try:
        alerts.post(record)
    except Exception as error:  # the record is kept; a dead webhook must not fail the sensor
        context.log.warning(f"could not post the failure of run {run.run_id}: {error}")
