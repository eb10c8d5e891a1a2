"""Runs of this machine's `tokenmill` commands whose process died (killed, out of memory, a
closed terminal): marked failed and their pool slots freed before a command claims slots, so
that no command waits for a slot that no process will ever give back.

Each run a command executes carries its process: host, pid and the pid's start time (a pid
reused by another process is not taken for the run's). Runs of other machines, and runs the
daemon launched (Dagster's run monitoring watches those), are left alone."""

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
        return False  # another machine's, or not a command's: nothing to tell
    return _started(int(tags[PID_TAG])) != tags.get(STARTED_TAG)


def dead_runs(instance: DagsterInstance) -> list[DagsterRun]:
    """This machine's command runs still unfinished on the instance whose process is gone."""
    from dagster import DagsterRunStatus, RunsFilter

    unfinished = [
        DagsterRunStatus.NOT_STARTED,
        DagsterRunStatus.STARTING,
        DagsterRunStatus.STARTED,
        DagsterRunStatus.CANCELING,
    ]
    runs = instance.get_runs(RunsFilter(statuses=unfinished, tags={HOST_TAG: socket.gethostname()}))
    return [run for run in runs if is_dead(run)]


def reap(instance: DagsterInstance) -> list[DagsterRun]:
    """Mark each dead run failed and free the pool slots it held; the runs reaped."""
    reaped = dead_runs(instance)
    for run in reaped:
        instance.report_run_failed(
            run,
            f"its process ({run.tags[PID_TAG]} on {run.tags[HOST_TAG]}) is gone: "
            "marked failed by a later tokenmill command, its pool slots freed",
        )
        instance.event_log_storage.free_concurrency_slots_for_run(run.run_id)
    return reaped
