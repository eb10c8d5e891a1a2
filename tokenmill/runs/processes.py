"""Runs whose process died (killed, out of memory, a closed terminal, a stopped `dagster dev`):
marked failed and their pool slots freed, so that no run waits for a slot, or for a partition,
that no process will ever give back.

Each run records the process that executes it, as tags: host, pid and the pid's start time (a
pid reused by another process is not taken for the run's). A command's runs carry them from
their creation; a run the daemon launched gets them as its execution starts
(`tokenmill.dagster_internals.install_claim_checks`). Only this machine's runs can be told
dead here; on Kubernetes, Dagster's run monitoring watches the run pods."""

from __future__ import annotations

import os
import socket
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from dagster import DagsterInstance, DagsterRun

HOST_TAG, PID_TAG, STARTED_TAG = "tokenmill/host", "tokenmill/pid", "tokenmill/pid_started"


def process_tags() -> dict[str, str]:
    """What says which process executes a run."""
    pid = os.getpid()
    return {HOST_TAG: socket.gethostname(), PID_TAG: str(pid), STARTED_TAG: _started(pid) or ""}


def record_process(instance: DagsterInstance, run: DagsterRun) -> None:
    """Tag `run` with this process, unless it names its process already (a command's run, or
    a step process of a run whose orchestrating process recorded itself)."""
    if PID_TAG not in run.tags:
        instance.add_run_tags(run.run_id, process_tags())


def _started(pid: int) -> str | None:
    """The process's start time in clock ticks since boot (/proc), None when it is gone."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return stat.rpartition(")")[2].split()[19]  # field 22; the name may hold spaces


def is_dead(run: DagsterRun) -> bool:
    tags = run.tags
    if tags.get(HOST_TAG) != socket.gethostname() or not tags.get(PID_TAG, "").isdigit():
        return False  # another machine's, or no process recorded: nothing to tell
    return _started(int(tags[PID_TAG])) != tags.get(STARTED_TAG)


def who(run: DagsterRun) -> str:
    """ "run <first 8 characters of its id> (job, pid 4242 on host)": a run as an operator
    finds it again."""
    process = f", pid {run.tags[PID_TAG]} on {run.tags[HOST_TAG]}" if PID_TAG in run.tags else ""
    return f"run {run.run_id[:8]} ({run.job_name}{process})"


def dead_runs(instance: DagsterInstance) -> list[DagsterRun]:
    """This machine's runs still unfinished on the instance whose process is gone."""
    from dagster import DagsterRunStatus, RunsFilter

    unfinished = [
        DagsterRunStatus.NOT_STARTED,
        DagsterRunStatus.STARTING,
        DagsterRunStatus.STARTED,
        DagsterRunStatus.CANCELING,
    ]
    runs = instance.get_runs(RunsFilter(statuses=unfinished, tags={HOST_TAG: socket.gethostname()}))
    return [run for run in runs if is_dead(run)]


def mark_dead(instance: DagsterInstance, run: DagsterRun, by: str) -> None:
    """Mark `run`, whose process is gone, failed and free the pool slots it held."""
    instance.report_run_failed(
        run,
        f"its process ({run.tags[PID_TAG]} on {run.tags[HOST_TAG]}) is gone: "
        f"marked failed by {by}, its pool slots freed",
    )
    instance.event_log_storage.free_concurrency_slots_for_run(run.run_id)


def reap(instance: DagsterInstance, by: str = "a later tokenmill command") -> list[DagsterRun]:
    """Mark each dead run failed and free the pool slots it held; the runs reaped."""
    reaped = dead_runs(instance)
    for run in reaped:
        mark_dead(instance, run, by)
    return reaped
