"""A command killed while its run holds a pool slot leaves a run that no process serves: the
next command marks it failed and frees its slot, then runs, instead of waiting for ever."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from dagster import DagsterInstance, DagsterRunStatus, Definitions, job, op

from tokenmill.cli.runner import execute
from tokenmill.runs import processes as dead_runs

POOL = "held"
HOLD_ENV = "TOKENMILL_TEST_HOLD_S"


@op(pool=POOL)
def holds_a_slot():
    time.sleep(float(os.environ.get(HOLD_ENV, "0")))


@job
def holding():
    holds_a_slot()


DEFS = Definitions(jobs=[holding])
RUN_HOLDING = f"""
import sys
sys.path.insert(0, {str(Path(__file__).parent)!r})
from dagster import DagsterInstance
from test_dead_runs import DEFS
from tokenmill.cli.runner import execute
outcome = execute("holding", None, DagsterInstance.get(), DEFS)
print(outcome.run_id, outcome.success)
"""


@pytest.fixture
def home(tmp_path, monkeypatch) -> Path:
    """An instance whose pools hold one step at a time."""
    home = tmp_path / "home"
    home.mkdir()
    (home / "dagster.yaml").write_text("concurrency:\n  pools:\n    default_limit: 1\n")
    monkeypatch.setenv("DAGSTER_HOME", str(home))
    DagsterInstance.get().dispose()  # its storage made before a command's process uses it
    return home


def holders(instance: DagsterInstance) -> set[str]:
    return instance.event_log_storage.get_concurrency_info(POOL).active_run_ids


@pytest.mark.integration
@pytest.mark.timeout(300)
def test_a_killed_commands_slot_is_freed_and_the_next_command_runs(home):
    held = subprocess.Popen(
        [sys.executable, "-c", RUN_HOLDING],
        env=os.environ | {HOLD_ENV: "600"},
        start_new_session=True,
    )
    with DagsterInstance.get() as instance:
        deadline = time.monotonic() + 120
        while not holders(instance):
            assert held.poll() is None and time.monotonic() < deadline, "no slot claimed"
            time.sleep(0.1)
        (dead,) = holders(instance)
        os.killpg(held.pid, signal.SIGKILL)  # the whole command, as an OOM kill would
        held.wait()
        assert instance.get_run_by_id(dead).status is DagsterRunStatus.STARTED
        assert holders(instance) == {dead}  # nothing gives the slot back by itself

    # the next command, in a process of its own: it would spin for ever on the held slot
    again = subprocess.run(
        [sys.executable, "-c", RUN_HOLDING], capture_output=True, text=True, timeout=120
    )
    assert again.returncode == 0, again.stderr[-3000:]
    assert f"marked failed: run {dead} (holding), its process is gone" in again.stdout
    run_id, success = again.stdout.split()[-2:]
    assert success == "True"
    with DagsterInstance.get() as instance:
        assert instance.get_run_by_id(dead).status is DagsterRunStatus.FAILURE
        assert instance.get_run_by_id(run_id).status is DagsterRunStatus.SUCCESS
        assert holders(instance) == set()


def test_a_live_process_and_a_reused_pid_are_told_apart(home):
    with DagsterInstance.get() as instance:
        alive = execute("holding", None, instance, DEFS)
        run = instance.get_run_by_id(alive.run_id)
        assert run.tags[dead_runs.PID_TAG] == str(os.getpid())
        assert not dead_runs.is_dead(run)  # this very process
        reused = run.with_tags(run.tags | {dead_runs.STARTED_TAG: "1"})  # same pid, other start
        assert dead_runs.is_dead(reused)
        elsewhere = run.with_tags(run.tags | {dead_runs.HOST_TAG: "another-host"})
        assert not dead_runs.is_dead(elsewhere)  # another machine's: nothing to tell
        assert dead_runs.reap(instance) == []  # finished runs are never reaped
