"""A second operator is never an error: two `tokenmill run`s at once on one lake and instance,
and `tokenmill run` beside a `dagster dev` whose automation is building the same crawl, all
end well, and the lake holds what a single run makes."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from dagster import DagsterRunStatus, RunsFilter

from testkit import commands
from testkit.dagster_dev import start_dagster_dev, stop_dagster_dev
from tokenmill.cli.demo import land_demo_crawl
from tokenmill.storage.lake import Lake

pytestmark = [pytest.mark.integration, pytest.mark.timeout(900)]

CRAWL = "CC-MAIN-TWICE"
DEMO = {"files": 2, "pages_per_file": 15, "seed": 5}


def landed(root: Path) -> Lake:
    lake = Lake.from_url(str(root / "lake"))
    land_demo_crawl(lake, CRAWL, **DEMO)
    return lake


@pytest.fixture(scope="module")
def single_run(tmp_path_factory) -> dict[str, str]:
    """What one undisturbed `tokenmill run` makes of the crawl."""
    root = tmp_path_factory.mktemp("single")
    lake = landed(root)
    commands.run(commands.command_env(root), "run", "--crawl", CRAWL)
    outputs = commands.crawl_outputs(lake, CRAWL)
    assert outputs
    return outputs


def test_two_runs_at_once_both_succeed_and_leave_a_single_runs_outputs(tmp_path, single_run):
    lake = landed(tmp_path)
    env = commands.command_env(tmp_path)
    commands.run(env, "status")  # the instance's storage, made once
    first = commands.start(env, tmp_path / "first.txt", "run", "--crawl", CRAWL)
    time.sleep(3)
    second = commands.start(env, tmp_path / "second.txt", "run", "--crawl", CRAWL)
    for process, output in ((first, "first.txt"), (second, "second.txt")):
        assert process.wait(timeout=600) == 0, (tmp_path / output).read_text()[-3000:]
    printed = (tmp_path / "first.txt").read_text() + (tmp_path / "second.txt").read_text()
    # one took turns with the other (before planning a stage, or at a step), and said so
    assert "is on it; waiting" in printed or "waiting for run " in printed
    assert commands.crawl_outputs(lake, CRAWL) == single_run


def test_a_run_beside_dagster_dev_building_the_same_crawl(tmp_path, single_run):
    lake = landed(tmp_path)
    dev = start_dagster_dev(tmp_path, TOKENMILL_TICK_SECONDS="2")
    try:
        env = commands.command_env(tmp_path, **dev.env)
        deadline = time.monotonic() + 300
        with dev.instance() as instance:  # the automation at work on the crawl
            while not instance.get_runs(RunsFilter(statuses=[DagsterRunStatus.STARTED])):
                assert time.monotonic() < deadline, dev.log.read_text()[-3000:]
                time.sleep(0.5)
        commands.run(env, "run", "--crawl", CRAWL)
        with dev.instance() as instance:
            idle_since = None
            while idle_since is None or time.monotonic() - idle_since < 10:
                unfinished = instance.get_runs(
                    RunsFilter(
                        statuses=[
                            DagsterRunStatus.QUEUED,
                            DagsterRunStatus.STARTING,
                            DagsterRunStatus.STARTED,
                        ]
                    )
                )
                idle_since = None if unfinished else idle_since or time.monotonic()
                assert time.monotonic() < deadline + 300, [r.job_name for r in unfinished]
                time.sleep(1)
            failed = instance.get_runs(RunsFilter(statuses=[DagsterRunStatus.FAILURE]))
        assert not failed, [(run.job_name, run.tags.get("dagster/partition")) for run in failed]
    finally:
        stop_dagster_dev(dev)
    assert commands.crawl_outputs(lake, CRAWL) == single_run
