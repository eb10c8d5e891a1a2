"""What a step waits for before it claims its pool slot, and what frees a slot held in vain.

One asset partition, one run at a time: a stage rewrites its output from its first step on, so
a second run working on it alongside would read it half-written. Before a step of an asset
claims its slot, it looks at the other live runs on the same partition that plan the same asset,
and waits, until that run is done with the asset (or ends), for one that goes first
(`goes_first`): a run at work on the asset before one that is not, then the one that began
first, then the one created first. Then the step runs as planned; stages are deterministic, so
it writes what the other run wrote. Waiting holds no slot, and the order is total, so no two
runs ever wait on each other.

A claim refused because the pool is full looks at the slot holders: one that ended without
freeing its slots, or whose process is gone (`tokenmill.runs.processes`), gets them freed, and
the claim is tried again at once. Each wait is reported, naming what it waits for, as it starts
and every `REPORT_EVERY_S` seconds: in the run's event log and on the `tokenmill.waits` logger
(which the commands print).
"""

from __future__ import annotations

import logging
import re
import threading
import time
from collections import OrderedDict
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING

from dagster import AssetKey, DagsterRunStatus, RunsFilter

from tokenmill.dagster_internals import install_claim_checks
from tokenmill.runs.processes import is_dead, mark_dead, record_process, who

if TYPE_CHECKING:
    from dagster import DagsterInstance, DagsterRun

PARTITION_TAG = "dagster/partition"
# a backfill's run of one partition tags it as a range from it to itself
RANGE_TAGS = ("dagster/asset_partition_range_start", "dagster/asset_partition_range_end")
LIVE = [DagsterRunStatus.STARTING, DagsterRunStatus.STARTED, DagsterRunStatus.CANCELING]
REPORT_EVERY_S = 10.0
RETRY_S = 2.0  # how soon a waiting step looks again: the longest a dead holder blocks it
WAITS = logging.getLogger("tokenmill.waits")
BY = "a run waiting for its slot"


@dataclass(frozen=True)
class Wait:
    message: str
    on: str  # what it waits on; a new one is reported at once


@dataclass(frozen=True)
class PlannedAssets:
    """A run's plan as assets: per top-level node, the assets its steps materialize and the
    steps that output them."""

    assets: dict[str, frozenset[AssetKey]]
    output_steps: dict[str, frozenset[str]]


def node_of(step_key: str) -> str:
    """The top-level node of a step: "a" for "a", "a.plan", "a.part[3]"."""
    return re.split(r"[.\[]", step_key, maxsplit=1)[0]


_plans: OrderedDict[str, PlannedAssets] = OrderedDict()
_plans_lock = threading.Lock()
PLANS_KEPT = 256


def planned_assets(instance: DagsterInstance, run: DagsterRun) -> PlannedAssets:
    with _plans_lock:
        if run.run_id in _plans:
            return _plans[run.run_id]
    plan = instance.get_execution_plan_snapshot(run.execution_plan_snapshot_id)
    to_execute = set(plan.step_keys_to_execute or [step.key for step in plan.steps])
    assets: dict[str, set[AssetKey]] = {}
    outputs: dict[str, set[str]] = {}
    for step in plan.steps:
        keys = {
            output.properties.asset_key
            for output in step.outputs
            if output.properties and output.properties.asset_key
        }
        if keys and step.key in to_execute:
            assets.setdefault(node_of(step.key), set()).update(keys)
            outputs.setdefault(node_of(step.key), set()).add(step.key)
    planned = PlannedAssets(
        {node: frozenset(keys) for node, keys in assets.items()},
        {node: frozenset(steps) for node, steps in outputs.items()},
    )
    with _plans_lock:
        _plans[run.run_id] = planned
        while len(_plans) > PLANS_KEPT:
            _plans.popitem(last=False)
    return planned


def _clock(timestamp: float | datetime | None) -> str:
    if timestamp is None:
        return "?"
    if isinstance(timestamp, datetime):
        timestamp = timestamp.timestamp()
    return time.strftime("%H:%M:%S", time.localtime(timestamp))


def partition_of(run: DagsterRun) -> str | None:
    """The partition a run works on ("first...last" for a range); None when unpartitioned."""
    if PARTITION_TAG in run.tags:
        return run.tags[PARTITION_TAG]
    start, end = (run.tags.get(tag) for tag in RANGE_TAGS)
    return start if start == end else f"{start}...{end}"


def _at_work(
    instance: DagsterInstance, other: DagsterRun, assets: frozenset[AssetKey]
) -> list[float] | None:
    """When `other` started on the steps of its plan that materialize any of `assets` (empty
    when it has not yet); None when it plans none of them or is done with them."""
    plan = planned_assets(instance, other)
    nodes = [node for node, keys in plan.assets.items() if keys & assets]
    if not nodes:
        return None
    stats = {s.step_key: s for s in instance.get_run_step_stats(other.run_id)}
    ended = [stats.get(step) for node in nodes for step in plan.output_steps[node]]
    if all(s is not None and s.end_time is not None for s in ended):
        return None  # done with them
    return [s.start_time for key, s in stats.items() if node_of(key) in nodes and s.start_time]


def _named(assets: frozenset[AssetKey], partition: str | None) -> str:
    asset = ", ".join(sorted(key.to_user_string() for key in assets))
    return f"{asset}[{partition}]" if partition else asset


def goes_first(
    own_start: list[float],
    own_order: tuple[float, str],
    other_start: list[float],
    other_order: tuple[float, str],
) -> bool:
    """Whether a run goes on before another on an asset partition, given when each began its
    steps on the asset (empty: not yet) and their (creation time, run id): a run at work on
    the asset before one that is not; of two at work, the one that began first; of two that
    have not begun, the one created first. A total order, so no two runs wait on each other
    (a run created first may begin later: it was not yet live when the other looked)."""
    if bool(own_start) != bool(other_start):
        return bool(own_start)
    if own_start:
        return (min(own_start), own_order) < (min(other_start), other_order)
    return own_order < other_order


def partition_wait(instance: DagsterInstance, run: DagsterRun, step_key: str) -> Wait | None:
    """The other run this step must let finish the step's asset partition first, if any."""
    assets = planned_assets(instance, run).assets.get(node_of(step_key))
    if not assets:
        return None
    partition = partition_of(run)
    # every live run: few (the run queue's limits), and a backfill's are tagged with a range
    records = instance.get_run_records(RunsFilter(statuses=LIVE))
    own = next((r for r in records if r.dagster_run.run_id == run.run_id), None)
    own_order = (own.create_timestamp.timestamp(), run.run_id) if own else (float("inf"), "")
    own_start: list[float] | None = None  # when this run began on the asset, looked up once
    for record in records:
        other = record.dagster_run
        if other.run_id == run.run_id or partition_of(other) != partition:
            continue
        if (started := _at_work(instance, other, assets)) is None:
            continue
        if own_start is None:
            own_start = _at_work(instance, run, assets) or []
        other_order = (record.create_timestamp.timestamp(), other.run_id)
        if goes_first(own_start, own_order, started, other_order):
            continue
        if is_dead(other):
            mark_dead(instance, other, BY)
            continue
        since = min(started) if started else record.start_time or record.create_timestamp
        return Wait(
            f"{_named(assets, partition)}: waiting for {who(other)}, on it since {_clock(since)}",
            other.run_id,
        )
    return None


def wait_for_runs_on(instance: DagsterInstance, assets: frozenset[AssetKey]) -> None:
    """Until no live run is at work on `assets` (any partition), saying which are: a command
    then plans only what they left out of date, instead of doing their work again."""
    said: dict[str, float] = {}
    while True:
        at_work = []
        for record in instance.get_run_records(RunsFilter(statuses=LIVE)):
            other = record.dagster_run
            if _at_work(instance, other, assets) is None:
                continue
            if is_dead(other):
                mark_dead(instance, other, "a tokenmill command")
                continue
            at_work.append(other)
        if not at_work:
            return
        now = time.monotonic()
        for other in at_work:
            if now - said.get(other.run_id, -REPORT_EVERY_S) >= REPORT_EVERY_S:
                said[other.run_id] = now
                WAITS.warning(
                    f"{_named(assets, partition_of(other))}: {who(other)} is on it; waiting, "
                    "then running what is still out of date"
                )
        time.sleep(RETRY_S)


def at_work_elsewhere(instance: DagsterInstance, run_id: str, assets: frozenset[AssetKey]) -> bool:
    """Whether a live run other than `run_id` is at work on any of `assets` (any partition):
    a step's input found missing may be one that run is writing again."""
    for record in instance.get_run_records(RunsFilter(statuses=LIVE)):
        other = record.dagster_run
        if other.run_id == run_id or _at_work(instance, other, assets) is None:
            continue
        if not is_dead(other):
            return True
    return False


def pool_wait(instance: DagsterInstance, run: DagsterRun, step_key: str, pool: str) -> Wait | None:
    """After a refused claim: None when slots held in vain were freed (claim again now),
    else what holds the pool."""
    info = instance.event_log_storage.get_concurrency_info(pool)
    holders = {slot.run_id for slot in info.claimed_slots} - {run.run_id}
    records = (
        {
            r.dagster_run.run_id: r
            for r in instance.get_run_records(RunsFilter(run_ids=sorted(holders)))
        }
        if holders
        else {}
    )
    freed = False
    for run_id in holders:
        record = records.get(run_id)
        if record is None or record.dagster_run.is_finished:
            instance.event_log_storage.free_concurrency_slots_for_run(run_id)
            freed = True
        elif is_dead(record.dagster_run):
            mark_dead(instance, record.dagster_run, BY)
            freed = True
    if freed:
        return None
    since = {(p.run_id, p.step_key): p.assigned_timestamp for p in info.pending_steps}
    held = "; ".join(
        f"{who(records[slot.run_id].dagster_run)} {slot.step_key} since "
        f"{_clock(since.get((slot.run_id, slot.step_key)))}"
        for slot in info.claimed_slots
        if slot.run_id in records
    )
    return Wait(
        f"{step_key}: waiting for a slot of pool {pool} "
        f"({len(info.claimed_slots)} of {info.slot_count} held: {held or 'by this run'})",
        f"{pool}:{','.join(sorted(holders))}",
    )


class Reports:
    """Each step's wait, reported when it starts or changes, then every `REPORT_EVERY_S`."""

    def __init__(self) -> None:
        self._last: dict[tuple[str, str], tuple[str, float]] = {}
        self._lock = threading.Lock()

    def __call__(
        self, instance: DagsterInstance, run: DagsterRun, step_key: str, wait: Wait
    ) -> None:
        now = time.monotonic()
        with self._lock:
            on, at = self._last.get((run.run_id, step_key), ("", 0.0))
            if on == wait.on and now - at < REPORT_EVERY_S:
                return
            self._last[(run.run_id, step_key)] = (wait.on, now)
        WAITS.warning(wait.message)
        instance.report_engine_event(wait.message, dagster_run=run, step_key=step_key)

    def done(self, run: DagsterRun, step_key: str) -> None:
        with self._lock:
            self._last.pop((run.run_id, step_key), None)


report_wait = Reports()


def check_claims() -> bool:
    """Install the checks above on every run this process executes or orchestrates."""
    return install_claim_checks(record_process, partition_wait, pool_wait, report_wait, RETRY_S)
