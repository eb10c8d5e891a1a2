"""The fault campaign behind the reliability table: every fault of tests/test_faults.py,
many more times, with random timing. Prints one markdown table (fault, trials, runs recovered,
docs lost, docs duplicated, outputs identical) and the numbers behind it.

    uv run python benchmarks/fault_table.py            # ~10 minutes on 2 cores
    uv run python benchmarks/fault_table.py --quick    # a few trials of each, ~4 minutes
    uv run python benchmarks/fault_table.py --hostile-only  # the hostile-input tables, ~4 min

The hostile-input classes (benchmarks/hostile_cases.py) follow in two more tables: each class's
regression tests and the worst real-size cases, with CPU time and peak RSS per process.

Needs PostgreSQL at 127.0.0.1:5432 (trust auth; root to restart it with pg_ctlcluster) and the
SeaweedFS binary (dev dependency); a fault whose server is missing is reported as skipped.
"""

from __future__ import annotations

import argparse
import gzip
import os
import random
import shutil
import tempfile
import time
import uuid
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from benchmarks import hostile_cases
from benchmarks.measure import TABLES, print_table
from benchmarks.results import record
from testkit import faults, servers
from testkit.faults import CRAWL, UNIT, Child
from testkit.shared_data import shared_path
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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--quick", action="store_true", help="a few trials of each fault")
    parser.add_argument(
        "--hostile-only", action="store_true", help="only the hostile-input classes' tables"
    )
    args = parser.parse_args()
    if args.hostile_only:
        record("hostile_cases", hostile_cases.main(), hostile_cases.INPUT)
        return
    started = time.perf_counter()
    work = Path(tempfile.mkdtemp(prefix="tokenmill-faults-"))
    try:
        reference_root = work / "reference"
        reference, seconds = faults.build_demo_lake(reference_root)
        rows = [
            crash_stages(reference, reference_root, seconds, work, 1 if args.quick else 4),
            crash_dagster_runs(reference, work, 1 if args.quick else 4),
            concurrent_runs(reference, reference_root, work),
            s3_outages(
                reference,
                work,
                [(10, False)]
                if args.quick
                else [(10, False), (20, False), (30, False), (20, True)],
            ),
            postgres_restarts(reference, work, [0.3] if args.quick else [0.2, 0.6, 1.0]),
            fuzz(reference, 200 if args.quick else 1000),
            hostile_files(reference, work),
            big_records(work),
            path_like_keys(work),
        ]
    finally:
        shutil.rmtree(work, ignore_errors=True)
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
    print(f"\n{sum(r.trials for r in rows)} faults in {time.perf_counter() - started:.0f} s")
    hostile_cases.main()
    campaign = {
        "data": f"a demo crawl of {faults.DEMO['files']} files of {faults.DEMO['pages_per_file']} "
        "pages through every stage, ../shared/corpora/warc's real and broken WARC files",
        "trials": "a few of each fault (--quick)" if args.quick else "every fault, many times",
    } | {"hostile_cases": hostile_cases.INPUT["data"]}
    record("fault_table", TABLES, campaign)


if __name__ == "__main__":
    main()
