"""Steps wait for their pool slot without spinning and say what they wait for; a slot held by a
run that died is taken back within the claim's retry interval; two runs on one asset partition
take turns on it, runs on other partitions do not wait for each other."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from dagster import (
    DagsterInstance,
    DagsterRunStatus,
    Definitions,
    StaticPartitionsDefinition,
    asset,
    define_asset_job,
    job,
    op,
)

from tokenmill.runs.claims import RETRY_S

POOL = "held"
SLEEP_ENV, LOG_ENV = "TOKENMILL_TEST_SLEEP_S", "TOKENMILL_TEST_LOG"


def _sleep_and_log(name: str) -> None:
    """Sleep as long as the test says, logging when this step worked (start, end)."""
    started = time.time()
    time.sleep(float(os.environ.get(SLEEP_ENV, "0")))
    if os.environ.get(LOG_ENV):
        with open(os.environ[LOG_ENV], "a") as log:
            log.write(json.dumps([name, started, time.time()]) + "\n")


@op(pool=POOL)
def holds_a_slot():
    _sleep_and_log("held")


@job
def holding():
    holds_a_slot()


@asset(partitions_def=StaticPartitionsDefinition(["a", "b"]), pool="worked")
def worked(context):
    _sleep_and_log(context.partition_key)


DEFS = Definitions(assets=[worked], jobs=[holding, define_asset_job("working", [worked])])
RUN = f"""
import sys
sys.path.insert(0, {str(Path(__file__).parent)!r})
from dagster import DagsterInstance
from test_claims import DEFS
from tokenmill.cli.runner import execute
outcome = execute(sys.argv[1], sys.argv[2] or None, DagsterInstance.get(), DEFS)
print(outcome.run_id, outcome.success)
"""


def instance_home(tmp_path: Path, monkeypatch, limit: int) -> Path:
    """An instance whose pools hold `limit` steps at a time, its storage made before any run
    (two processes making it at once trip over each other's schema migrations)."""
    home = tmp_path / "home"
    home.mkdir()
    (home / "dagster.yaml").write_text(f"concurrency:\n  pools:\n    default_limit: {limit}\n")
    monkeypatch.setenv("DAGSTER_HOME", str(home))
    DagsterInstance.get().dispose()
    return home


class Command:
    """`execute` of a job in a process of its own, its output in a file."""

    def __init__(self, output: Path, job_name: str, partition: str = "", **env: str):
        self.output = output
        with output.open("w") as out:
            self.process = subprocess.Popen(
                [sys.executable, "-c", RUN, job_name, partition],
                env=os.environ | env,
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )

    def printed(self) -> str:
        return self.output.read_text()

    def finish(self, timeout: float = 240) -> str:
        """What it printed; its run's success checked."""
        self.process.wait(timeout=timeout)
        printed = self.printed()
        assert self.process.returncode == 0, printed[-3000:]
        assert printed.split()[-1] == "True", printed[-3000:]
        return printed


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def wait_until(condition, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, what
        time.sleep(0.1)


def slot_holders(instance: DagsterInstance) -> set[str]:
    return instance.event_log_storage.get_concurrency_info(POOL).active_run_ids


@pytest.mark.integration
@pytest.mark.timeout(300)
def test_a_waiting_step_sleeps_names_the_holder_and_claims_soon_after_it_dies(
    tmp_path, monkeypatch
):
    instance_home(tmp_path, monkeypatch, limit=1)
    held = Command(tmp_path / "held.txt", "holding", **{SLEEP_ENV: "600"})
    with DagsterInstance.get() as instance:
        wait_until(lambda: slot_holders(instance), 120, "the first run claimed no slot")
        (dead,) = slot_holders(instance)
        log = tmp_path / "steps.jsonl"
        waiting = Command(tmp_path / "waiting.txt", "holding", **{LOG_ENV: str(log)})
        said = f"waiting for a slot of pool {POOL} (1 of 1 held: run {dead[:8]} (holding, pid"
        wait_until(lambda: said in waiting.printed(), 120, "the second run said nothing")
        before = cpu_seconds(waiting.process.pid)  # a few seconds of waiting: next to no CPU
        time.sleep(4)
        assert cpu_seconds(waiting.process.pid) - before < 0.5, "the waiting run spins"

        os.killpg(held.process.pid, signal.SIGKILL)  # the holder, as an OOM kill would
        killed_at = time.time()
        held.process.wait()
        waiting.finish()
        (line,) = log.read_text().splitlines()
        claimed_after = json.loads(line)[1] - killed_at
        assert claimed_after < RETRY_S + 3, claimed_after
        assert instance.get_run_by_id(dead).status is DagsterRunStatus.FAILURE


def _worked(log: Path) -> dict[str, list[tuple[float, float]]]:
    spans: dict[str, list[tuple[float, float]]] = {}
    for line in log.read_text().splitlines():
        name, started, ended = json.loads(line)
        spans.setdefault(name, []).append((started, ended))
    return spans


@pytest.mark.integration
@pytest.mark.timeout(300)
def test_two_runs_on_one_partition_take_turns_and_other_partitions_go_on(tmp_path, monkeypatch):
    instance_home(tmp_path, monkeypatch, limit=3)
    log = tmp_path / "steps.jsonl"
    env = {LOG_ENV: str(log), SLEEP_ENV: "4"}
    runs = [Command(tmp_path / "first.txt", "working", "a", **env)]
    time.sleep(0.5)
    runs.append(Command(tmp_path / "second.txt", "working", "a", **env))
    runs.append(Command(tmp_path / "other.txt", "working", "b", **env))
    outputs = [run.finish() for run in runs]
    spans = _worked(log)
    (first, second) = sorted(spans["a"])
    assert second[0] >= first[1], "two runs worked on partition a at once"
    (other,) = spans["b"]
    assert other[0] < first[1], "partition b waited for partition a"
    # either run of partition a may claim it first on a loaded machine; the other one waits
    (waited,) = [out for out in outputs[:2] if "worked[a]: waiting for run " in out]
    assert "on it since" in waited
    assert "waiting for run " not in outputs[2]


def test_of_two_runs_on_one_asset_partition_exactly_one_goes_first():
    """A run created first that became live after the other began on the asset waits for it,
    and the other does not wait for it (two such runs waited on each other for ever)."""
    from tokenmill.runs.claims import goes_first

    created_first, created_later = (10.0, "a"), (10.1, "b")
    began = [20.0]
    assert not goes_first([], created_first, began, created_later)
    assert goes_first(began, created_later, [], created_first)
    starts = [[], [20.0], [20.0, 25.0], [21.0]]
    orders = [created_first, created_later, (10.0, "c")]
    for own_start in starts:
        for other_start in starts:
            for own in orders:
                for other in orders:
                    if own != other:
                        first = goes_first(own_start, own, other_start, other)
                        assert first != goes_first(other_start, other, own_start, own)


def test_a_backfills_run_of_one_partition_is_on_that_partition():
    from dagster import DagsterRun

    from tokenmill.runs.claims import partition_of

    def run(**tags: str) -> DagsterRun:
        return DagsterRun(job_name="j", run_id="r", tags=tags)

    start, end = "dagster/asset_partition_range_start", "dagster/asset_partition_range_end"
    assert partition_of(run(**{"dagster/partition": "C/00001"})) == "C/00001"
    assert partition_of(run(**{start: "C/00001", end: "C/00001"})) == "C/00001"
    assert partition_of(run(**{start: "C/00001", end: "C/00004"})) == "C/00001...C/00004"
    assert partition_of(run()) is None
