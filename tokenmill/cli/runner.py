"""Running the pipeline on a Dagster instance from the command line: register units as dynamic
partitions and materialize every stage for every partition, as recorded runs."""

from __future__ import annotations

import logging
import os
import re
import sys
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from dagster import (
    AssetCheckSeverity,
    AssetKey,
    DagsterEventType,
    DagsterInstance,
    EventLogEntry,
    ExecuteInProcessResult,
)

from tokenmill import PROJECT_DIR
from tokenmill.cli.progress import progress
from tokenmill.crawl.units import Registration, register_new_files

# private: the staleness the UI shows, which `materialize_all` follows as the automation does
from tokenmill.dagster_internals import (
    StaleCauseCategory,
    StaleStatus,
    follow_run,
    planned_form,
    planned_steps,
    stale_status_resolver,
)
from tokenmill.data_assets.current import RECOMPUTE_TAG
from tokenmill.data_assets.datasets import Catalog
from tokenmill.data_assets.jobs import job_name
from tokenmill.data_assets.partitions import (
    crawl_partitions,
    gathered_changes,
    sync_partitions,
    unit_partitions,
)
from tokenmill.data_assets.release_inputs import release_input_changes
from tokenmill.data_assets.results import WARNING_ITEM
from tokenmill.recipes.catalog import RECIPE_PROBLEM
from tokenmill.runs.claims import WAITS, check_claims, wait_for_runs_on
from tokenmill.runs.processes import process_tags, reap
from tokenmill.runtime.stage import Scope
from tokenmill.stages import STAGES, stage_named
from tokenmill.storage.lake import Lake
from tokenmill.storage.outputs import WARNINGS

if TYPE_CHECKING:
    from tokenmill.dagster_internals import SerializableErrorInfo

# The event log keeps every event; the terminal only gets warnings (the UI shows the rest).
QUIET_CONSOLE = {"loggers": {"console": {"config": {"log_level": "WARNING"}}}}
# `materialize_all` reports a failed run's cause itself; the stack traces stay in the event log.
SILENT_CONSOLE = {"loggers": {"console": {"config": {"log_level": "CRITICAL"}}}}
# How much of each failed step's error a failed run reports (the event log keeps it all).
ERROR_LINES, ERROR_CHARS = 3, 400
# "tokenmill.storage.lake.LakeKeyError: ..." -> "LakeKeyError: ..."
QUALIFIED_CLASS = re.compile(r"^(?:\w+\.)+(?=\w+:)")


class _ToldByTheCommand(logging.Filter):
    """The recipe files left out, which the code location logs as it loads: a command prints
    each once itself."""

    def filter(self, record: logging.LogRecord) -> bool:
        return not getattr(record, RECIPE_PROBLEM, False)


logging.getLogger("tokenmill").addFilter(_ToldByTheCommand())


def _check_claims() -> None:
    """The claim checks on this process's runs, and what their steps wait for (another run on
    their partition, a full pool) on the terminal as they wait."""
    check_claims()
    if not WAITS.handlers:
        shown = logging.StreamHandler(sys.stdout)
        shown.setFormatter(logging.Formatter("  %(message)s"))
        WAITS.addHandler(shown)
        WAITS.propagate = False


def local_instance() -> DagsterInstance:
    """The instance at DAGSTER_HOME, by default .dagster_home/ using the project's dagster.yaml."""
    home = Path(os.environ.setdefault("DAGSTER_HOME", str(PROJECT_DIR / ".dagster_home")))
    home.mkdir(parents=True, exist_ok=True)
    config = home / "dagster.yaml"
    if not config.exists() and not config.is_symlink():
        config.symlink_to(PROJECT_DIR / "dagster.yaml")
    return DagsterInstance.get()


def register(
    instance: DagsterInstance, lake: Lake, crawl: str, files_per_unit: int, verify: bool = True
) -> Registration:
    """Group the crawl's files that are in no unit yet into units and add them as partitions."""
    registration = register_new_files(lake, crawl, files_per_unit, verify=verify)
    sync_partitions(instance, lake, [crawl])
    return registration


@dataclass(frozen=True)
class RunOutcome:
    job: str
    partition: str | None
    run_id: str
    success: bool
    error: str | None = None  # a failed run's cause: each failed step and its error
    assets: tuple[str, ...] = ()  # the assets it materialized, when not all of the job's
    failed_checks: tuple[str, ...] = ()  # "asset check: description" of each failed ERROR check
    # the same of each failed WARN check, and "asset: warning" of each its stages reported
    warnings: tuple[str, ...] = ()

    @property
    def name(self) -> str:
        return f"{self.job}[{self.partition}]" if self.partition else self.job


class RunsFailedError(RuntimeError):
    """Runs of `materialize_all` failed; the message names each one with its cause."""

    def __init__(self, failed: list[RunOutcome]):
        self.failed = failed
        lines = [f"{len(failed)} run{'s' if len(failed) > 1 else ''} failed:"]
        for outcome in failed:
            lines.append(f"  {outcome.name} (run {outcome.run_id})")
            lines += [f"    {line}" for line in (outcome.error or "").splitlines()]
        lines.append("full logs: `tokenmill ui`, or the runs' event logs on the instance")
        super().__init__("\n".join(lines))


def definitions_for(lake: Lake, workers: int | None = None, catalog: Catalog | None = None):
    """The code location's definitions, on `lake` and with `workers` processes per run (one
    per CPU if unset), for `catalog`'s recipes (by default the recipes folder's)."""
    from tokenmill.definitions import alerts_resource, build_definitions
    from tokenmill.resources.lake import LakeResource
    from tokenmill.resources.workers import WorkersResource

    resource = LakeResource(url=lake.url, endpoint_url=lake.endpoint_url, region=lake.region)
    return build_definitions(
        resource, alerts_resource(), workers=WorkersResource(processes=workers), recipes=catalog
    )


def execute(
    name: str,
    partition_key: str | None,
    instance: DagsterInstance,
    defs=None,
    assets: list[AssetKey] | None = None,
    tags: dict[str, str] | None = None,
    on_step: Callable[[int, int], None] | None = None,
) -> RunOutcome:
    """Run job `name` for a partition: all its assets, or those of `assets`; `on_step(finished,
    planned)` is called as its steps finish."""
    if defs is None:
        from tokenmill.definitions import defs

    job = defs.resolve_job_def(name)
    _check_claims()
    for dead in reap(instance):  # their slots would never be given back
        print(f"  marked failed: run {dead.run_id} ({dead.job_name}), its process is gone")
    run_id = None
    if on_step is not None:
        run_id = str(uuid.uuid4())
        follow_run(instance, run_id, StepCount(instance, run_id, on_step))
    result = job.execute_in_process(
        instance=instance,
        partition_key=partition_key,
        run_config=SILENT_CONSOLE,
        raise_on_error=False,
        asset_selection=assets,
        tags=process_tags() | (tags or {}),
        run_id=run_id,
    )
    error = None if result.success else failure_of(result)
    selected = tuple(a.to_user_string() for a in assets or ())
    failed = {severity: [] for severity in AssetCheckSeverity}
    for check in result.get_asset_check_evaluations():
        if not check.passed:
            failed[check.severity].append(
                f"{check.asset_key.to_user_string()} {check.check_name}: {check.description}"
            )
    return RunOutcome(
        name,
        partition_key,
        result.run_id,
        result.success,
        error,
        selected,
        tuple(failed[AssetCheckSeverity.ERROR]),
        tuple(failed[AssetCheckSeverity.WARN]) + stage_warnings(result),
    )


def stage_warnings(result: ExecuteInProcessResult) -> tuple[str, ...]:
    """ "asset: warning" of each warning the run's materializations report (`StageReport.warn`)."""
    return tuple(
        f"{event.asset_key.to_user_string()}: {line.removeprefix(WARNING_ITEM)}"
        for event in result.get_asset_materialization_events()
        if (shown := event.materialization.metadata.get(WARNINGS))
        for line in shown.value.splitlines()
    )


FINISHED_STEP = {
    DagsterEventType.STEP_SUCCESS,
    DagsterEventType.STEP_FAILURE,
    DagsterEventType.STEP_SKIPPED,
}


class StepCount:
    """A run's finished steps against its planned ones, from its events as they are stored:
    `report(finished, planned)` on each change. A mapped step is planned once until its copies
    start (a fanned-out stage's parallel steps), then counts as them."""

    def __init__(self, instance: DagsterInstance, run_id: str, report: Callable[[int, int], None]):
        self._instance, self._run_id, self._report = instance, run_id, report
        self._planned: set[str] | None = None
        self._finished: set[str] = set()

    def __call__(self, entry: EventLogEntry) -> None:
        if self._planned is None:  # the run is stored, with its plan, before its first event
            self._planned = set(planned_steps(self._instance, self._run_id))
            self._report(0, len(self._planned))
        kind, step = entry.dagster_event_type, entry.step_key
        if kind is DagsterEventType.STEP_START and step not in self._planned:
            self._planned.discard(planned_form(step))
            self._planned.add(step)
        elif kind in FINISHED_STEP:
            self._finished.add(step)
        else:
            return
        self._report(len(self._finished), len(self._planned))


def failure_of(result: ExecuteInProcessResult) -> str:
    """Each failed step with its error; the run's own error when no step failed (a resource
    that could not start, say)."""
    steps = [
        f"{event.step_key}: {describe_error(event.step_failure_data.error)}"
        for event in result.all_events
        if event.is_step_failure and event.step_failure_data.error
    ]
    if steps:
        return "\n".join(steps)
    for event in result.all_events:
        if event.is_run_failure:
            error = event.event_specific_data and event.event_specific_data.error
            return describe_error(error) if error else event.message or "the run failed"
    return "the run failed without recording an error"


def describe_error(error: SerializableErrorInfo) -> str:
    """`Class: message` of the error that says what went wrong, not of Dagster's wrappers
    around it ("Error occurred while executing op ...", "Exceeded max_retries of 3"); its
    first lines only."""
    gave_up = ""
    while error.cause is not None and (_is_wrapper(error) or _says_nothing(error)):
        if error.cls_name == "RetryRequestedFromPolicy":
            gave_up = f" ({_headline(error)})"
        error = error.cause
    lines = [line for line in (_headline(error) + gave_up).splitlines() if line.strip()]
    text = "\n".join(lines[:ERROR_LINES])
    return text if len(text) <= ERROR_CHARS else text[: ERROR_CHARS - 1] + "…"


def _is_wrapper(error: SerializableErrorInfo) -> bool:
    return error.cls_name.startswith("Dagster") or error.cls_name == "RetryRequestedFromPolicy"


def _says_nothing(error: SerializableErrorInfo) -> bool:
    """A class name without a message ("RuntimeError:"), or an empty description."""
    return not _headline(error).removeprefix(f"{error.cls_name}:").strip()


def _headline(error: SerializableErrorInfo) -> str:
    """The error's message, led by its class name without the module."""
    text = QUALIFIED_CLASS.sub("", error.message.strip())
    if error.cls_name == "Failure":  # its description is what the step had to say
        text = QUALIFIED_CLASS.sub("", text.removeprefix("Failure:").strip())
    if error.cls_name == "_RemoteTraceback":  # a worker's whole traceback: the last line
        lines = [line for line in text.splitlines() if line.strip(' "')]
        text = QUALIFIED_CLASS.sub("", lines[-1]) if lines else ""
    return text


def materialize_all(
    instance: DagsterInstance,
    lake: Lake,
    workers: int | None = None,
    force: bool = False,
    catalog: Catalog | None = None,
    stages: list[str] | None = None,
) -> list[RunOutcome]:
    """Every stage (of `stages`, if given) for every partition of `lake` that is missing or
    stale (all of them with `force`), in lineage order, one run per partition, as the
    automation would: a recipe change re-runs its stage, and below it only the partitions
    whose inputs' data changed. Each run works on its unit's files in `workers` parallel
    processes (one per CPU if unset). Raises RunsFailedError, naming each failed run's cause,
    after the first stage with failed runs."""
    catalog = catalog or Catalog.load()
    defs = definitions_for(lake, workers, catalog)
    partitions = _partitions(instance)
    _check_claims()
    outcomes: list[RunOutcome] = []
    made_with: dict[str, set] = {}  # a fed stage's partitions made in its feeder's runs
    for stage in STAGES:
        if stages is not None and stage.name not in stages or catalog.idle(stage):
            continue
        if stage.scope is Scope.CRAWL:
            # what the crawl_signatures_complete sensor would observe: the instance is then as
            # the sensors and the automation leave it, and they find nothing left to do
            for event in gathered_changes(instance, partitions[Scope.CRAWL], catalog):
                instance.report_runless_asset_event(event)
        if stage.follows:
            # what the release_inputs_changed sensor would observe: the release shows stale
            # when its inputs changed (it is never made again here: that is on purpose)
            for event in release_input_changes(instance, lake, catalog.serving(stage)):
                instance.report_runless_asset_event(event)
        keys = partitions[stage.scope]
        assets = catalog.keys(stage)
        wait_for_runs_on(instance, frozenset(assets))  # another operator's runs: theirs to end
        todo = _out_of_date(instance, defs, stage, assets, keys, force)
        recompute = {RECOMPUTE_TAG: "true"} if force else None
        label = ", ".join(a.to_user_string() for a in assets)
        # made with the stage feeding it, in this call: not again (`--force` would)
        made_before = made_with.get(stage.name, set())
        todo = {k: v for k, v in todo.items() if k not in made_before}
        fed = _fed_assets(stage, catalog, stages)
        made = set() if force else {k for a in fed for k in instance.get_materialized_partitions(a)}
        with_fed = fed and any(key not in made for key in todo)
        bar_label = label + (" + " + ", ".join(a.to_user_string() for a in fed) if with_fed else "")
        results = []
        with progress(len(todo), bar_label, unit="partitions") as bar:
            for key, stale in todo.items():
                together = fed if key not in made else []
                job = IMPLICIT_JOB if together else job_name(stage.name)
                outcome = execute(job, key, instance, defs, stale + together, recompute)
                state = "ok" if outcome.success else "FAILED"
                names = label if stale == assets else ", ".join(a.to_user_string() for a in stale)
                if together:
                    names += " + " + ", ".join(a.to_user_string() for a in together)
                    if outcome.success:
                        made_with.setdefault(stage.feeds, set()).add(key)
                notable = not outcome.success or bool(outcome.failed_checks or outcome.warnings)
                bar.advance(f"  {names:34} {key or '-':40} {state}", notable=notable)
                for failed in outcome.failed_checks:
                    bar.note(f"    check failed: {failed}")
                for warning in outcome.warnings:
                    bar.note(f"    warning: {warning}")
                results.append(outcome)
        if made_before:
            feeder = next(s.name for s in STAGES if s.feeds == stage.name)
            print(f"  {label:34} {len(made_before)} partitions made with {feeder}", flush=True)
        if len(todo) + len(made_before) < len(keys) and assets:
            # a stage made on purpose is only made here when missing: not "up to date"
            kept = "up to date" if stage.automatic else "kept (made on purpose)"
            left = len(keys) - len(todo) - len(made_before)
            print(f"  {label:34} {left} partitions {kept}", flush=True)
        outcomes += results
        failed = [r for r in results if not r.success]
        if failed:
            raise RunsFailedError(failed)
    return outcomes


# Dagster's job of every asset: a run that makes a stage and the one it feeds together
IMPLICIT_JOB = "__ASSET_JOB"


def _fed_assets(stage, catalog: Catalog, stages: list[str] | None) -> list[AssetKey]:
    """The assets of the stage ``stage`` feeds (`Stage.feeds`), for a run to make with it where
    they were never made (or are made again, with `--force`): one pass over each file for both
    stages. None when that stage is not to run."""
    if not stage.feeds or (stages is not None and stage.feeds not in stages):
        return []
    fed = stage_named(stage.feeds)
    return [] if catalog.idle(fed) else catalog.keys(fed)


def _partitions(instance: DagsterInstance) -> dict[Scope, list]:
    return {
        Scope.UNIT: instance.get_dynamic_partitions(unit_partitions.name),
        Scope.CRAWL: instance.get_dynamic_partitions(crawl_partitions.name),
        Scope.LAKE: [None],
    }


def _out_of_date(
    instance: DagsterInstance, defs, stage, assets: list[AssetKey], keys: list, force: bool
) -> dict[str | None, list[AssetKey]]:
    """Per partition, the stage's assets (one per recipe) the UI shows missing or stale: never
    materialized, another code version (recipe section), or inputs whose data changed since
    (every one with `force`). The lake's stages (the tokenizer) only when missing, unless they
    follow their settings: changing one is a deliberate launch, as for the automation."""
    if force:
        return {k: assets for k in keys} if assets else {}
    todo: dict[str | None, list[AssetKey]] = {}
    if stage.scope is Scope.LAKE and not stage.follows_settings:
        missing = [a for a in assets if not instance.get_latest_materialization_event(a)]
        return {None: missing} if missing else {}
    resolver = stale_status_resolver(instance, defs.resolve_asset_graph())
    not_fresh = {}
    for asset in assets:
        state = asset_state(resolver, asset, stage, keys)
        not_fresh[asset] = {*state.missing, *state.stale}
    for k in keys:
        if stale := [a for a in assets if k in not_fresh[a]]:
            todo[k] = stale
    return todo


def materialized_partitions(
    instance: DagsterInstance, catalog: Catalog | None = None
) -> dict[str, set[str]]:
    """The materialized partitions of every stage asset of every recipe."""
    catalog = catalog or Catalog.load()
    return {
        key.to_user_string(): set(instance.get_materialized_partitions(key))
        for stage in STAGES
        for key in catalog.keys(stage)
    }


# (category, what it means for a tokenmill stage)
Cause = tuple[StaleCauseCategory, str]


def cause_of(cause) -> Cause:
    """A Dagster stale cause in the words of a tokenmill stage, naming the input."""
    input_ = f" ({cause.dependency.asset_key.to_user_string()})" if cause.dependency else ""
    if cause.category is StaleCauseCategory.CODE:
        return cause.category, "code version changed (its recipe section or code)"
    if cause.category is StaleCauseCategory.DATA:
        return cause.category, f"input data changed{input_}"
    return cause.category, cause.reason.removeprefix("has ")  # it names the input


@dataclass
class StageState:
    """One asset's partitions: how many are fresh, missing and stale, and why."""

    asset: str
    stage: str
    keys: list[str | None] = field(default_factory=list)
    fresh: int = 0
    missing: list[str | None] = field(default_factory=list)
    stale: dict[str | None, set[Cause]] = field(default_factory=dict)
    note: str = ""

    @property
    def why(self) -> str:
        counts: dict[Cause, int] = {}
        for causes in self.stale.values():
            for cause in causes:
                counts[cause] = counts.get(cause, 0) + 1
        parts = [f"{n} {text}" for (_, text), n in sorted(counts.items())]
        if self.missing:
            parts.insert(0, f"{len(self.missing)} never materialized")
        if not self.keys:
            parts.append("no partitions yet: register a crawl")
        return "; ".join(parts + [self.note] * bool(self.note)) or "up to date"

    @property
    def partitions(self) -> int:
        return len(self.keys)

    def to_launch(self) -> list[str | None]:
        """The partitions a run launches now: missing, or stale for their own code or data
        (those stale only through an input wait for it to run first)."""
        dependencies = StaleCauseCategory.DEPENDENCIES
        own = [k for k, c in self.stale.items() if any(kind is not dependencies for kind, _ in c)]
        return self.missing + own


def stage_states(
    instance: DagsterInstance, lake: Lake, catalog: Catalog, stages: list[str] | None = None
) -> list[StageState]:
    """Every stage asset of `catalog`, as the UI would show its partitions' staleness."""
    defs = definitions_for(lake, 1, catalog)
    resolver = stale_status_resolver(instance, defs.resolve_asset_graph())
    partitions = _partitions(instance)
    return [
        asset_state(resolver, key, stage, partitions[stage.scope])
        for stage in STAGES
        if (stages is None or stage.name in stages) and not catalog.idle(stage)
        for key in catalog.keys(stage)
    ]


def asset_state(resolver, key: AssetKey, stage, partitions: list) -> StageState:
    """One asset's partitions as the UI shows them: fresh, missing, or stale and why."""
    state = StageState(key.to_user_string(), stage.name, list(partitions))
    for partition in partitions:
        status = resolver.get_status(key, partition)
        if status is StaleStatus.MISSING:
            state.missing.append(partition)
        elif status is StaleStatus.STALE:
            causes = resolver.get_stale_causes(key, partition)
            state.stale[partition] = {cause_of(cause) for cause in causes}
        else:
            state.fresh += 1
    if stage.scope is Scope.LAKE and not stage.automatic:
        state.note = "`run` makes the first; later ones on purpose (`run --release`)"
    return state


@dataclass(frozen=True)
class Launch:
    asset: str
    partitions: list[str | None]
    why: str


@dataclass
class RunPlan:
    """What `tokenmill run` would launch now, and what may follow once that has run."""

    launches: list[Launch]
    then: list[tuple[str, str]]  # (asset, why): stale only through an input
    runs: int
    then_runs: int


def out_of_date_plan(
    instance: DagsterInstance,
    lake: Lake,
    catalog: Catalog,
    stages: list[str] | None = None,
    force: bool = False,
) -> RunPlan:
    """`materialize_all`'s work, told before it is done."""
    return plan_of(stage_states(instance, lake, catalog, stages), force)


def plan_of(states: list[StageState], force: bool = False) -> RunPlan:
    """The partitions `materialize_all` launches first, given the assets' states, and those
    below them that it launches afterwards only if their inputs' data changes."""
    by_name = {stage.name: stage for stage in STAGES}
    launches, then, runs, then_runs = [], [], 0, 0
    pending: dict[str, set] = {}  # asset -> partitions that run, or may
    for state in states:
        stage = by_name[state.stage]
        if force:
            todo = list(state.keys)
        elif state.note:  # made on purpose: only when missing
            todo = state.missing
        else:
            todo = state.to_launch()
        if todo:
            launches.append(Launch(state.asset, todo, "--force" if force else state.why))
            runs += len(todo)
        prefix = state.asset.rpartition("/")[0]
        below = set()
        for name in stage.upstream:
            upstream = f"{prefix}/{name}" if prefix and not by_name[name].shared else name
            for key in pending.get(upstream, ()):
                below |= _downstream_of(key, by_name[name].scope, stage.scope, state.keys)
        waiting = below - set(todo)
        if waiting and not state.note:
            then.append((state.asset, f"{len(waiting)} partitions"))
            then_runs += len(waiting)
        pending[state.asset] = set(todo) | waiting
    return RunPlan(launches, then, runs, then_runs)


def _downstream_of(key: str | None, upper: Scope, lower: Scope, keys: list) -> set:
    """The partitions of a stage of scope `lower` that read partition `key` of `upper`."""
    if upper is Scope.LAKE or lower is Scope.LAKE:
        return set(keys)
    if upper is lower:
        return {key} & set(keys)
    if upper is Scope.UNIT:  # a unit's crawl
        return {key.partition("/")[0]} & set(keys)
    return {k for k in keys if k.partition("/")[0] == key}  # a crawl's units
