"""The fault campaign behind the reliability table: every fault of tests/test_faults.py,
many more times, with random timing. Prints one markdown table (fault, trials, runs recovered,
docs lost, docs duplicated, outputs identical) and the numbers behind it.

    uv run python benchmarks/fault_table.py            # every fault, many times
    uv run python benchmarks/fault_table.py --quick    # a few trials of each
    uv run python benchmarks/fault_table.py --commands-only [--quick]  # only whole commands
    uv run python benchmarks/fault_table.py --hostile-only  # the hostile-input tables, ~4 min

Whole commands follow in a table of their own, a line each in the results: `tokenmill demo`,
`run` after a recipe change, `release`, `train-classifier`, `retrain-tokenizer` and `dagster
dev` mid-backfill, their process group killed (SIGKILL) at seeded random moments (6 each, 1
with --quick), then one plain re-run within a bounded time: hangs, failed re-runs, and re-runs
whose outputs (the lake, tokenmill.yaml) are not byte-identical to an undisturbed run's.

The hostile-input classes (benchmarks/hostile_cases.py) follow in two more tables: each class's
regression tests and the worst real-size cases, with CPU time and peak RSS per process.

Needs PostgreSQL at 127.0.0.1:5432 (trust auth; root to restart it with pg_ctlcluster) and the
SeaweedFS binary (dev dependency); a fault whose server is missing is reported as skipped.
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import random
import shlex
import shutil
import subprocess
import sys
import tempfile
import time
import uuid
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import yaml
from dagster._core.execution.backfill import BulkActionStatus
from tokenmill.resources.step_io import STEPS

from benchmarks import hostile_cases
from benchmarks.measure import TABLES, print_table
from benchmarks.results import record
from testkit import datasets, faults, servers
from testkit.dagster_dev import (
    DagsterDev,
    project_instance_env,
    start_dagster_dev,
    stop_dagster_dev,
)
from testkit.faults import CRAWL, PROJECT_DIR, UNIT, Child
from testkit.shared_data import shared_path
from tokenmill.cli.demo import DEMO_CRAWLS
from tokenmill.crawl.units import registered_units
from tokenmill.demo.crawl import sample_articles
from tokenmill.recipes.project import RECIPES_DIR, SETTINGS_ENV, SETTINGS_FILE
from tokenmill.recipes.recipe import DEFAULT_RECIPE
from tokenmill.stages import STAGES
from tokenmill.storage.lake import Lake, LakeKeyError
from tokenmill.storage.layout import MARKER


@dataclass
class Row:
    fault: str
    trials: int = 0
    recovered: int = 0
    lost: int = 0
    duplicated: int = 0
    identical: int = 0
    notes: list[str] = field(default_factory=list)

    def add(self, recovered: bool, identical: bool, lost: int = 0, duplicated: int = 0) -> None:
        self.trials += 1
        self.recovered += recovered
        self.identical += identical
        self.lost += lost
        self.duplicated += duplicated

    def cells(self) -> list:
        return [
            self.fault,
            self.trials,
            f"{self.recovered}/{self.trials}",
            self.lost,
            self.duplicated,
            f"{self.identical}/{self.trials}",
            "; ".join(self.notes),
        ]


def crash_stages(reference: Lake, reference_root: Path, seconds, work: Path, per_stage: int):
    row = Row("kill -9 of a stage process at a random point, retried as the same attempt")
    rng = random.Random(1)
    trial_root = faults.copy_lake(reference_root, work / "crash")
    mid_work = committed_views = kept = redone = 0
    for stage in STAGES:
        for index in range(per_stage):
            targets = faults.targets(reference, CRAWL, stage.name)
            target = targets[index % len(targets)]
            trial = faults.crash_trial(
                reference,
                trial_root,
                stage.name,
                target,
                seconds[stage.name, target],
                rng,
                fresh=index % 2 == 0,
            )
            resumed = trial.parts_resumed == trial.parts_committed_at_kill
            ok = not trial.problems_after_kill and trial.identical_after_rerun and resumed
            row.add(ok, trial.identical_after_rerun, trial.rows_lost, trial.rows_duplicated)
            mid_work += trial.killed_while_running
            committed_views += 1
            if trial.parts_resumed is not None:
                kept += trial.parts_resumed
                redone += len(faults.unit_files(reference, faults.Unit.from_key(target)))
            if trial.problems_after_kill:
                row.notes.append(f"{stage.name}: {trial.problems_after_kill}")
    stray = faults.stray_temp_files(trial_root)
    row.notes.append(
        f"{len(STAGES)} stages; {mid_work} killed mid-work; {committed_views} committed views "
        f"checked; per-unit retries kept {kept} of {redone} files; {len(stray)} temp files left"
    )
    return row


def killed_run(env: dict[str, str]):
    """The run a kill left STARTED on the child's instance (no daemon marks it failed)."""
    from dagster import DagsterInstance, DagsterRunStatus, RunsFilter

    os.environ.update(env)
    with DagsterInstance.get() as instance:
        runs = instance.get_runs(RunsFilter(statuses=[DagsterRunStatus.STARTED]))
    return runs[0] if runs else None


def retry_jobs(killed) -> str:
    """The ingest jobs from the killed one on, the killed one as a retry of its root run."""
    names = faults.INGEST_JOBS.split(",")
    if killed is None:
        return faults.INGEST_JOBS
    start = names.index(killed.job_name)
    return ",".join([f"{names[start]}@{killed.run_id}", *names[start + 1 :]])


def crash_dagster_runs(reference: Lake, work: Path, trials: int):
    row = Row("kill -9 of a Dagster run (execute_in_process), then its retry")
    rng = random.Random(2)
    for index in range(trials):
        root = work / f"run-{index}"
        lake = Lake.from_url(str(root / "lake"))
        env = faults.dagster_env(faults.local_home(root / "home"), str(root / "lake"))
        child = faults.start_ingest_run(reference, lake, env)
        time.sleep(rng.uniform(0.5, 3.0))
        child.kill()
        partial = [
            p
            for stage in faults.INGEST_STAGES
            for p in faults.commit_problems(lake, UNIT.prefix(stage))
        ]
        outcome = faults.run_child("jobs", UNIT.key, retry_jobs(killed_run(env)), env=env)
        identical = faults.ingest_outputs_match(reference, lake, UNIT)
        lost, duplicated = zip(
            *(
                faults.rows_lost_and_duplicated(reference, lake, UNIT.prefix(stage))
                for stage in faults.INGEST_STAGES
            ),
            strict=True,
        )
        row.add(outcome["success"] and not partial, identical, sum(lost), sum(duplicated))
    row.notes.append("killed 0.5-3 s into the runs; the killed run stays STARTED without a daemon")
    return row


def concurrent_runs(reference: Lake, reference_root: Path, work: Path):
    row = Row("same partition materialized twice concurrently")
    root = faults.copy_lake(reference_root, work / "concurrent")
    lake = Lake.from_url(str(root))
    for stage in STAGES:
        target = faults.targets(reference, CRAWL, stage.name)[0]
        prefix = faults.output_prefix(stage.name, target)
        lake.delete_prefix(prefix)
        children = [
            Child.start("stage", str(root), stage.name, target, uuid.uuid4().hex) for _ in range(2)
        ]
        for child in children:
            child.wait_for_go()
        succeeded = all(child.outcome()["success"] for child in children)
        identical = faults.snapshot(lake, prefix) == faults.snapshot(reference, prefix)
        lost, duplicated = faults.rows_lost_and_duplicated(reference, lake, prefix)
        row.add(succeeded and not faults.commit_problems(lake, prefix), identical, lost, duplicated)
    row.notes.append("one pair per stage")
    return row


def s3_outages(reference: Lake, work: Path, outages: list[tuple[float, bool]]):
    row = Row("S3 (SeaweedFS) outage mid-run")
    if not servers.WEED.exists():
        row.notes.append("skipped: no SeaweedFS binary")
        return row
    server = servers.start_seaweedfs(work / "seaweedfs")
    os.environ.update(server.env())
    retries, kinds = 0, []
    try:
        for index, (seconds, freeze) in enumerate(outages):
            url = f"s3://{server.bucket}/outage-{index}"
            lake = Lake.from_url(url, endpoint_url=server.endpoint)
            home = faults.local_home(work / f"outage-home-{index}")
            env = faults.dagster_env(home, url, TOKENMILL_S3_ENDPOINT=server.endpoint)
            child = faults.start_ingest_run(reference, lake, env)
            time.sleep(random.Random(index).uniform(0.5, 2.0))
            down = faults.s3_outage(server, seconds, freeze=freeze)
            outcome = child.outcome(timeout=600)
            if not outcome["success"]:  # failed cleanly: the retry must complete
                outcome = faults.run_child("jobs", UNIT.key, faults.INGEST_JOBS, env=env)
            retries += outcome.get("retries", 0)
            identical = faults.ingest_outputs_match(reference, lake, UNIT)
            row.add(outcome["success"], identical)
            kinds.append(f"{'SIGSTOP' if freeze else 'killed+restarted'} {down:.0f} s")
    finally:
        servers.stop(server.process)
    row.notes.append(", ".join(kinds) + f"; {retries} step retries in all")
    return row


def postgres_restarts(reference: Lake, work: Path, delays: list[float]):
    row = Row("PostgreSQL (instance DB) restart mid-run")
    if not servers.postgres_available():
        row.notes.append("skipped: no PostgreSQL at 127.0.0.1:5432")
        return row
    from dagster import AssetKey, DagsterInstance, DagsterRunStatus

    database = f"tokenmill_faults_{uuid.uuid4().hex[:8]}"
    servers.create_database(database)
    reruns, first_failures = 0, []
    try:
        for index, delay in enumerate(delays):
            root = work / f"pg-{index}"
            lake = Lake.from_url(str(root / "lake"))
            home, pg_env = faults.postgres_home(root / "home", database)
            env = faults.dagster_env(home, str(root / "lake"), **pg_env)
            child = faults.start_ingest_run(reference, lake, env)
            time.sleep(delay)
            try:
                faults.restart_postgres()
            finally:
                faults.ensure_postgres_running()
            try:
                outcome = child.outcome(timeout=600)
            except RuntimeError as error:  # the run process itself died
                lines = [line for line in str(error).splitlines() if "Error" in line]
                outcome = {"success": False, "error": (lines or ["died"])[-1].strip()}
            if not outcome["success"]:
                reruns += 1
                first_failures.append(outcome.get("error") or _status(env, outcome["run_id"]))
                outcome = faults.run_child("jobs", UNIT.key, faults.INGEST_JOBS, env=env)
            os.environ.update(env)
            with DagsterInstance.get() as instance:
                recorded = all(
                    instance.get_run_by_id(run_id).status == DagsterRunStatus.SUCCESS
                    and instance.get_latest_materialization_event(AssetKey(asset)).run_id == run_id
                    for asset, run_id in zip(faults.INGEST_STAGES, outcome["run_ids"], strict=True)
                )
            row.add(recorded, faults.ingest_outputs_match(reference, lake, UNIT))
        with DagsterInstance.get() as instance:
            statuses = Counter(run.status.value for run in instance.get_runs())
    finally:
        faults.ensure_postgres_running()
        servers.drop_database(database)
    row.notes.append(f"restart {min(delays)}-{max(delays)} s into the run; {reruns} re-runs needed")
    row.notes.append("runs recorded: " + ", ".join(f"{n} {s}" for s, n in sorted(statuses.items())))
    row.notes += [f"first run: {failure[:120]}" for failure in first_failures]
    return row


def _status(env: dict[str, str], run_id: str) -> str:
    from dagster import DagsterInstance

    os.environ.update(env)
    with DagsterInstance.get() as instance:
        return f"run {run_id[:8]} {instance.get_run_by_id(run_id).status.value}"


def fuzz(reference: Lake, mutations: int):
    row = Row("random damage in WARC files (reader fuzzing)")
    samples = [reference.read_bytes(k) for k in reference.list(f"landing/{CRAWL}")[:2]]
    samples.append(gzip.decompress(samples[0]))
    real = shared_path("corpora", "warc")
    if real:
        samples += [(real / n).read_bytes() for n in ("cc-main-2020-34-excerpt.warc.gz",)]
    result = faults.fuzz_reader(samples, mutations, seed=3)
    row.trials = result.files
    row.recovered = result.files - len(result.crashes)
    row.identical = result.files - len(result.crashes)
    row.lost = result.good_records_lost
    row.notes.append(
        f"{len(samples)} source files (gz and plain); {result.bad_records} bad records kept "
        f"aside; {result.unusable} files unusable (named error); crashes: {len(result.crashes)}"
    )
    return row


def hostile_files(reference: Lake, work: Path):
    import hashlib

    import pyarrow.parquet as pq

    from tokenmill.crawl.units import register_new_files
    from tokenmill.runtime.parts import run_stage_work
    from tokenmill.stages import cleaned, raw_crawl

    row = Row("hostile files (charsets, binary as HTML, truncated, empty, unusable, ARC)")
    demo = reference.read_bytes(reference.list(f"landing/{CRAWL}")[0])
    lake = Lake.from_url(str(work / "hostile"))
    cases = {
        "charsets + binary + damaged members": faults.hostile_warc(),
        "truncated gzip": demo[: len(demo) // 2],
        "byte flips": faults.mutate(demo, random.Random(3))[0],
    }
    unusable = {"HTML named .warc.gz": b"<html>not a warc</html>", "zero-byte file": b""}
    arc = shared_path("corpora", "warc", "aut-2008-heritrix.arc.gz")
    clipped = shared_path("corpora", "warc", "truncated-record.warc.gz")
    if clipped:
        cases["clipped record (shared)"] = clipped.read_bytes()
    for index, (_, data) in enumerate(cases.items()):
        crawl = f"CC-MAIN-HOSTILE-{index}"
        key = f"landing/{crawl}/f.warc.gz"
        lake.write_bytes(key, data)
        (unit,) = register_new_files(lake, crawl, files_per_unit=1).units
        raw = run_stage_work(raw_crawl.STAGE, lake, unit=unit, workers=1)
        run_stage_work(cleaned.STAGE, lake, unit=unit, workers=1)
        kept_aside = sum(raw.dropped.values())
        ok = not faults.commit_problems(lake, unit.prefix("raw_crawl")) and kept_aside > 0
        # read whole, damage included, where it lies
        read_whole = raw.counts["file_stats"][key]["sha256"] == hashlib.sha256(data).hexdigest()
        row.add(ok, read_whole)
    for index, (_, data) in enumerate(unusable.items()):
        crawl = f"CC-MAIN-UNUSABLE-{index}"
        key = f"landing/{crawl}/f.warc.gz"
        lake.write_bytes(key, data)
        (unit,) = register_new_files(lake, crawl, files_per_unit=1).units
        run_stage_work(raw_crawl.STAGE, lake, unit=unit, workers=1)
        with lake.open_input(f"{unit.part_prefix('raw_crawl', 0)}/quarantine.parquet") as f:
            rows = pq.read_table(f).to_pylist()
        named = [(r["file"], r["reason"]) for r in rows] == [(key, "unusable_file")]
        flagged = not raw_crawl.bad_record_rate(lake, unit).passed
        row.add(named and flagged and lake.exists(f"{unit.prefix('raw_crawl')}/{MARKER}"), True)
    if arc:  # the Internet Archive's legacy format: read as response records, nothing aside
        lake.write_bytes("landing/CC-MAIN-ARC/f.arc.gz", arc.read_bytes())
        (unit,) = register_new_files(lake, "CC-MAIN-ARC", files_per_unit=1).units
        raw = run_stage_work(raw_crawl.STAGE, lake, unit=unit, workers=1)
        row.add(raw.records_out > 0 and not raw.dropped, True)
    row.notes.append(
        f"{len(cases)} damaged files indexed with bad records quarantined; "
        f"{len(unusable)} unusable files (HTML, empty) quarantined by name, their unit flagged"
        + ("; an ARC file read as records" if arc else "")
    )
    return row


def big_records(work: Path):
    row = Row("200 MB single record (.warc and .warc.gz)")
    growth = []
    for compressed in (False, True):
        root = work / f"big-{compressed}"
        try:
            outcome = faults.big_record_trial(root, 200 << 20, compressed)
        finally:
            shutil.rmtree(root, ignore_errors=True)
        ok = outcome["dropped"] == {"oversized_record": 1} and outcome["out"] == 2
        row.add(ok, outcome["copied_identically"])
        growth.append(f"{outcome['growth_mb']:.0f} MB")
    row.notes.append("peak RSS growth " + " / ".join(growth) + " (record kept aside, not held)")
    return row


def path_like_keys(work: Path):
    from dagster import DagsterInstance
    from tokenmill.resources.lake import LakeResource
    from tokenmill.resources.workers import WorkersResource

    from tokenmill.crawl.units import register_new_files
    from tokenmill.definitions import build_definitions

    row = Row("path-like partition keys and crawl names (../../etc)")
    lake = Lake.from_url(str(work / "paths" / "lake"))
    before = set((work / "paths").rglob("*"))
    instance = DagsterInstance.ephemeral()
    keys = ["../../etc/00000", "ok/../x", "ok/.."]
    instance.add_dynamic_partitions("units", keys)
    defs = build_definitions(LakeResource(url=lake.url), workers=WorkersResource(processes=1))
    job = defs.resolve_job_def("run_raw_crawl")
    for key in keys:
        result = job.execute_in_process(instance=instance, partition_key=key, raise_on_error=False)
        retried = any(event.is_step_up_for_retry for event in result.all_events)
        row.add(not result.success and not retried, True)
    try:
        register_new_files(lake, "../../etc", files_per_unit=1)
        row.add(False, True)
    except LakeKeyError:
        row.add(True, True)
    escaped = [p for p in set((work / "paths").rglob("*")) - before if "lake" not in p.parts]
    row.recovered -= bool(escaped)
    row.notes.append(f"each refused at once, no retry; {len(escaped)} paths outside the lake")
    return row


# Kill -9 of whole commands


COMMANDS = "Kill -9 of a whole command at a random moment, then one plain re-run"
TOKENMILL = Path(sys.executable).parent / "tokenmill"
OUTPUTS = ("lake", SETTINGS_FILE)  # what a command writes; its instance's runs are not compared
# the values a killed run's steps handed each other: kept for a retry from failure, so left
HANDOFFS = f"lake/{STEPS}/"
TEMPORARIES = "tmp"  # the commands' TMPDIR, in the project folder: what a kill leaves there
NEVER_S = 3600  # an undisturbed command that takes longer is broken
LIVE = "project"  # the folder of work where every command runs
RECIPE = DEFAULT_RECIPE.stem
CHANGED_CLEAN = {"gopher_quality": {"min_doc_words": 400}}  # as docs/guides/recipe.md
SEED = 4


@dataclass
class CommandRow:
    family: str
    command: str
    undisturbed_s: float
    reproducible: bool = True  # a second undisturbed run gives the same outputs
    trials: int = 0
    hangs: int = 0
    failed: int = 0
    diffs: int = 0
    recovery_s: float = 0.0  # the longest re-run (a hang counts its time-out)
    moments: list[float] = field(default_factory=list)
    exited_before_kill: int = 0
    temporaries: list[str] = field(default_factory=list)  # left after the re-runs
    handoffs: list[str] = field(default_factory=list)  # runs whose steps' values were left
    notes: list[str] = field(default_factory=list)

    def cells(self) -> list:
        identical = self.trials - self.hangs - self.failed - self.diffs
        left = ", ".join(sorted(set(self.temporaries))[:2])
        notes = [
            f"killed {min(self.moments):.1f}-{max(self.moments):.1f} s in",
            f"{self.exited_before_kill} had exited by then",
            f"{len(self.temporaries)} temporary files left (never listed)"
            + (f": {left}..." if left else ""),
        ]
        if self.handoffs:
            notes.append(
                f"{len(self.handoffs)} killed runs' step handoffs left in lake/{STEPS}/ "
                "(kept for a retry from failure)"
            )
        return [
            self.family,
            self.trials,
            self.hangs,
            self.failed,
            self.diffs,
            f"{identical}/{self.trials}",
            "yes" if self.reproducible else "no",
            round(self.undisturbed_s, 1),
            round(self.recovery_s, 1),
            "; ".join(notes + self.notes),
        ]

    def figures(self) -> dict:
        return dict(zip(COMMAND_COLUMNS, self.cells(), strict=True)) | {"moments_s": self.moments}

    def input(self, kills: int) -> dict:
        return {
            "data": "the demo's two crawls (12 WARC files of 500 pages) as `tokenmill demo` makes "
            "them, in a project folder of its own (lake, DAGSTER_HOME, tokenmill.yaml)",
            "command": self.command,
            "kills": f"{kills}, at moments drawn by random.Random({SEED}) within the "
            "undisturbed time; the process group killed (SIGKILL)",
            "re-run": "one, plain, within 3 x the undisturbed time + 60 s (else a hang)",
        }


COMMAND_COLUMNS = [
    "command",
    "trials",
    "hangs",
    "failed re-runs",
    "diffs",
    "outputs identical",
    "undisturbed twice identical",
    "undisturbed s",
    "longest re-run s",
    "notes",
]


def settings_env(project: Path) -> dict[str, str]:
    """The project folder's settings file and temporary folder (its lake and instance:
    `project_instance_env`)."""
    (project / TEMPORARIES).mkdir(parents=True, exist_ok=True)
    return {SETTINGS_ENV: str(project / SETTINGS_FILE), "TMPDIR": str(project / TEMPORARIES)}


@dataclass
class Command:
    """`tokenmill <args>` on a project folder; `prepare` makes the folder it starts from (a
    copy of the demo's, or an empty one) what it needs."""

    name: str
    args: list[str]  # "{project}" stands for the project folder
    prepare: Callable[[Path], None] = lambda project: None

    @property
    def what(self) -> str:
        return shlex.join(["tokenmill", *self.args])

    def start(self, project: Path, again: bool) -> subprocess.Popen:
        env = os.environ | project_instance_env(project) | settings_env(project)
        with (project / "command.log").open("ab") as log:
            return subprocess.Popen(
                [str(TOKENMILL), *(arg.format(project=project) for arg in self.args)],
                cwd=PROJECT_DIR,
                env=env,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )

    def finish(self, project: Path, process: subprocess.Popen, timeout: float) -> str | None:
        """What went wrong (None: the command succeeded within `timeout` s)."""
        status = faults.wait_or_kill(process, timeout)
        if status is None:
            return "hang"
        last = (project / "command.log").read_text(errors="replace").strip().splitlines()
        return f"exit {status}: {last[-1][:160] if last else ''}" if status else None

    def close(self) -> None:
        pass


@dataclass
class Backfill:
    """`dagster dev` on a project folder holding the demo's crawls registered (from the demo's
    lake `demo`), nothing built: a backfill of the unit stages of every unit, launched as the
    UI does. Started again, `dagster dev` is only waited for, until the backfill is done."""

    demo: Path
    name: str = "dagster dev mid-backfill"
    what: str = (
        "dagster dev -w workspace.yaml; a backfill of "
        f"{', '.join(faults.INGEST_STAGES)} over the demo crawls' units (GraphQL)"
    )
    dev: DagsterDev | None = None
    backfill_id: str | None = None

    def prepare(self, project: Path) -> None:
        dev = start_dagster_dev(project, **settings_env(project))
        try:
            dev.stop_automation()  # its sensors stay stopped on the instance: only the backfill
        finally:
            stop_dagster_dev(dev)
        env = dev.env
        lake, demo = Lake.from_url(env["TOKENMILL_LAKE_URL"]), Lake.from_url(str(self.demo))
        for crawl in DEMO_CRAWLS:
            faults.seed_lake(demo, lake, crawl)
        faults.add_partitions(env, lake)

    def start(self, project: Path, again: bool) -> subprocess.Popen:
        self.dev = start_dagster_dev(project, **settings_env(project))
        if not again:
            lake = Lake.from_url(self.dev.env["TOKENMILL_LAKE_URL"])
            units = [unit.key for crawl in DEMO_CRAWLS for unit in registered_units(lake, crawl)]
            stages = [datasets.key(stage) for stage in faults.INGEST_STAGES]
            params = {
                "assetSelection": [{"path": asset.path} for asset in stages],
                "partitionNames": units,
                "title": "the demo crawls' units",
            }
            self.backfill_id = self.dev.launch_backfill(params)
        return self.dev.process

    def finish(self, project: Path, process: subprocess.Popen, timeout: float) -> str | None:
        try:
            backfill = self.dev.wait_for_backfill(self.backfill_id, timeout)
        except TimeoutError:
            return "hang"
        if backfill.status != BulkActionStatus.COMPLETED_SUCCESS:
            return f"backfill {backfill.status.value}"
        return None

    def close(self) -> None:
        stop_dagster_dev(self.dev)


def change_recipe(section: str, settings: dict) -> Callable[[Path], None]:
    """A change of the project's recipe (fineweb_en): its file copied into the project folder's
    recipes/ with `settings` in `section`, the settings file naming that folder instead."""

    def prepare(project: Path) -> None:
        recipe = yaml.safe_load(DEFAULT_RECIPE.read_text())
        recipe.setdefault(section, {}).update(settings)
        (project / "recipes").mkdir()
        (project / "recipes" / DEFAULT_RECIPE.name).write_text(yaml.safe_dump(recipe))
        file = project / SETTINGS_FILE
        given = yaml.safe_load(file.read_text())
        given["recipes"] = [
            "recipes" if Path(entry) == RECIPES_DIR else entry for entry in given["recipes"]
        ]
        file.write_text(yaml.safe_dump(given, sort_keys=False))

    return prepare


def write_positives(project: Path) -> None:
    articles = sample_articles("en", 120, seed=8)
    (project / "good.jsonl").write_text("".join(json.dumps({"text": t}) + "\n" for t in articles))


def reset(source: Path, project: Path) -> None:
    shutil.rmtree(project, ignore_errors=True)
    faults.copy_lake(source, project)
    shutil.rmtree(project / TEMPORARIES, ignore_errors=True)


def outputs(project: Path) -> dict[str, str]:
    """The digests of what a command wrote in `project`, the steps' handoffs left out."""
    return {
        key: digest
        for key, digest in faults.tree_snapshot(project, OUTPUTS).items()
        if not key.startswith(HANDOFFS)
    }


def handoffs(project: Path) -> list[str]:
    return sorted(
        {
            "/".join(key.split("/")[:3])
            for key in faults.tree_snapshot(project, ["lake"])
            if key.startswith(HANDOFFS)
        }
    )


def temporaries(project: Path) -> list[str]:
    """Temporary files left in the lake (never listed) and in the commands' TMPDIR."""
    tmp = [path for path in (project / TEMPORARIES).rglob("*") if path.is_file()]
    left = faults.stray_temp_files(project / "lake") + tmp
    return [str(path.relative_to(project)) for path in left]


def undisturbed(family, prepared: Path, live: Path) -> float:
    """The command from the state before it, undisturbed, in `live`: how long it took."""
    reset(prepared, live)
    process = family.start(live, again=False)
    started = time.perf_counter()
    try:
        problem = family.finish(live, process, NEVER_S)
        seconds = time.perf_counter() - started
    finally:
        family.close()
    if problem:
        raise RuntimeError(f"{family.name}, undisturbed: {problem}")
    return seconds


def command_row(family, start_from: Path, work: Path, trials: int, rng) -> CommandRow:
    """Make the state before the command (`start_from` prepared by the family) and its outputs
    undisturbed (twice: are they reproducible?), then per trial: the state again, the command
    killed (its whole process group) at a random moment of its undisturbed time, one plain
    re-run, its outputs compared. Every run happens in the same folder, so that absolute paths
    are alike. The reference is left in `work` as <name>-reference."""
    live, slug = work / LIVE, family.name.split()[0]
    prepared, reference = work / f"{slug}-before", work / f"{slug}-reference"
    reset(start_from, live)
    family.prepare(live)
    live.rename(prepared)
    row = CommandRow(family.name, family.what, undisturbed(family, prepared, live))
    live.rename(reference)
    expected = outputs(reference)
    if left := temporaries(reference):
        row.notes.append(f"the undisturbed run left {len(left)} temporary files too")
    undisturbed(family, prepared, live)
    if again := faults.differing(expected, outputs(live)):
        row.reproducible = False
        row.notes.append(f"undisturbed twice: {len(again)} differ: {', '.join(again[:3])}")
    seconds = row.undisturbed_s
    for _ in range(trials):
        reset(prepared, live)
        process = family.start(live, again=False)
        row.moments.append(round(rng.uniform(0, seconds), 1))
        time.sleep(row.moments[-1])
        row.exited_before_kill += not faults.kill_group(process)
        started = time.perf_counter()
        try:
            problem = family.finish(live, family.start(live, again=True), 3 * seconds + 60)
        except (RuntimeError, TimeoutError) as error:  # `dagster dev` not up again
            problem = f"{type(error).__name__}: {str(error)[:160]}"
        finally:
            row.recovery_s = max(row.recovery_s, time.perf_counter() - started)
            family.close()
        row.trials += 1
        row.hangs += problem == "hang"
        row.failed += problem not in (None, "hang")
        diffs = [] if problem else faults.differing(expected, outputs(live))
        row.diffs += bool(diffs)
        row.temporaries += temporaries(live)
        row.handoffs += handoffs(live)
        print(f"{family.name}: kill {row.trials} at {row.moments[-1]} s: re-run", end=" ")
        print(problem or f"done, {len(diffs)} outputs differ", flush=True)
        if problem not in (None, "hang"):
            row.notes.append(f"re-run {row.trials}: {problem}")
        if diffs:
            row.notes.append(f"re-run {row.trials}: {len(diffs)} differ: {', '.join(diffs[:3])}")
    shutil.rmtree(prepared)
    return row


def command_campaign(work: Path, trials: int) -> list[CommandRow]:
    """`tokenmill demo` on an empty project, then each command on the demo's project (changed
    as it needs), then `dagster dev` mid-backfill: `trials` kill moments each."""
    rng = random.Random(SEED)
    (work / "empty").mkdir()
    families = [
        Command("demo", ["demo"]),
        Command("run after a recipe change", ["run"], change_recipe("clean", CHANGED_CLEAN)),
        Command("release", ["release", "--recipe", RECIPE], change_recipe("release", {"seed": 1})),
        Command(
            "train-classifier",
            ["train-classifier", "faults_quality", "--positives", "{project}/good.jsonl"],
            write_positives,
        ),
        Command("retrain-tokenizer", ["retrain-tokenizer", "--recipe", RECIPE]),
        Backfill(work / "demo-reference" / "lake"),
    ]
    rows = [command_row(families[0], work / "empty", work, trials, rng)]
    for family in families[1:]:
        start_from = work / "empty" if isinstance(family, Backfill) else work / "demo-reference"
        rows.append(command_row(family, start_from, work, trials, rng))
    return rows


def stage_faults(work: Path, quick: bool) -> list[Row]:
    reference_root = work / "reference"
    reference, seconds = faults.build_demo_lake(reference_root)
    return [
        crash_stages(reference, reference_root, seconds, work, 1 if quick else 4),
        crash_dagster_runs(reference, work, 1 if quick else 4),
        concurrent_runs(reference, reference_root, work),
        s3_outages(
            reference,
            work,
            [(10, False)] if quick else [(10, False), (20, False), (30, False), (20, True)],
        ),
        postgres_restarts(reference, work, [0.3] if quick else [0.2, 0.6, 1.0]),
        fuzz(reference, 200 if quick else 1000),
        hostile_files(reference, work),
        big_records(work),
        path_like_keys(work),
    ]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--quick", action="store_true", help="a few trials of each fault")
    parser.add_argument(
        "--hostile-only", action="store_true", help="only the hostile-input classes' tables"
    )
    parser.add_argument(
        "--commands-only", action="store_true", help="only the kill -9 of whole commands"
    )
    args = parser.parse_args()
    if args.hostile_only:
        record("hostile_cases", hostile_cases.main(), hostile_cases.INPUT)
        return
    started = time.perf_counter()
    work = Path(tempfile.mkdtemp(prefix="tokenmill-faults-"))
    kills = 1 if args.quick else 6
    try:
        rows = [] if args.commands_only else stage_faults(work, args.quick)
        commands = command_campaign(work, kills)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    if rows:
        print_table(
            "Fault injection (benchmarks/fault_table.py)",
            [
                "fault",
                "trials",
                "runs recovered",
                "docs lost",
                "docs duplicated",
                "outputs identical",
                "notes",
            ],
            [row.cells() for row in rows],
        )
    print_table(COMMANDS, COMMAND_COLUMNS, [row.cells() for row in commands])
    faults_done = sum(r.trials for r in rows) + sum(r.trials for r in commands)
    print(f"\n{faults_done} faults in {time.perf_counter() - started:.0f} s")
    for row in commands:
        record(f"fault_table: {row.family}", row.figures(), row.input(kills))
    if args.commands_only:
        return
    hostile_cases.main()
    campaign = {
        "data": f"a demo crawl of {faults.DEMO['files']} files of {faults.DEMO['pages_per_file']} "
        "pages through every stage, ../shared/corpora/warc's real and broken WARC files",
        "trials": "a few of each fault (--quick)" if args.quick else "every fault, many times",
    } | {"hostile_cases": hostile_cases.INPUT["data"]}
    # the kills of whole commands are recorded above, a line each
    record("fault_table", {t: r for t, r in TABLES.items() if t != COMMANDS}, campaign)


if __name__ == "__main__":
    main()
