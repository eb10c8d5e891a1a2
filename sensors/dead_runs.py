"""Runs of this machine whose process died with it (a stopped or killed `dagster dev`, an out of
memory kill): marked failed, which frees their pool slots and lets run retries relaunch them and
a backfill go on. Run monitoring cannot tell them: the default run launcher reports no health."""

from __future__ import annotations

from dagster import DefaultSensorStatus, SensorEvaluationContext, SkipReason, sensor
from tokenmill.resources.automation import tick_seconds

from tokenmill.runs.processes import reap, who


@sensor(
    name="dead_runs",
    minimum_interval_seconds=tick_seconds(30),
    default_status=DefaultSensorStatus.RUNNING,
    description="Marks failed the runs of this machine whose process is gone; frees their slots.",
)
def dead_runs(context: SensorEvaluationContext) -> SkipReason:
    reaped = reap(context.instance, by="the dead_runs sensor")
    for run in reaped:
        context.log.warning(f"marked failed: {who(run)}, its process is gone")
    return SkipReason(
        f"marked failed: {', '.join(who(run) for run in reaped)}"
        if reaped
        else "no unfinished run of this machine has lost its process"
    )
