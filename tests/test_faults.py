"""Fault injection: processes killed mid-stage, an object-store outage, an instance-database
restart, hostile input and concurrent runs of one partition. Nothing may be lost, duplicated
or visible half-written. The long campaign is benchmarks/fault_table.py; these are its bounded
CI counterparts."""

from __future__ import annotations

import gzip
import hashlib
import random
import shutil
import time
import uuid
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest
from dagster import DagsterInstance, DagsterRunStatus, RunsFilter
from tokenmill.data_assets.partitions import sync_partitions
from tokenmill.resources.lake import LakeResource
from tokenmill.resources.workers import WorkersResource

from testkit import faults
from testkit.datasets import key, recipe_lake
from testkit.faults import CRAWL, UNIT, Child
from tokenmill.crawl.units import discover, register_new_files
from tokenmill.runtime.parts import run_stage_work
from tokenmill.runtime.stage import Scope
from tokenmill.stages import STAGES, cleaned, extracted, raw_crawl
from tokenmill.storage.lake import Lake, LakeKeyError
from tokenmill.storage.layout import MARKER, Unit

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def reference(tmp_path_factory) -> tuple[Path, Lake, dict]:
    """The demo crawl with every stage run once, undisturbed: what every fault must end in."""
    root = tmp_path_factory.mktemp("reference") / "lake"
    lake, seconds = faults.build_demo_lake(root)
    return root, lake, seconds


def fresh_copy(reference, tmp_path: Path) -> Path:
    return faults.copy_lake(reference[0], tmp_path / "lake")


# Crashes


def test_stage_killed_midway_resumes_per_file_to_identical_outputs(reference, tmp_path):
    root, lake, seconds = reference
    trial_root = fresh_copy(reference, tmp_path)
    rng = random.Random(20261122)
    trials = []
    for index, stage in enumerate(STAGES):
        target = faults.targets(lake, CRAWL, stage.name)[-1]
        # Alternate a first run and a re-run over committed outputs being killed.
        trials.append(
            faults.crash_trial(
                lake,
                trial_root,
                stage.name,
                target,
                seconds[stage.name, target],
                rng,
                fresh=index % 2 == 0,
            )
        )
    for trial in trials:
        assert trial.problems_after_kill == [], trial
        assert trial.identical_after_rerun, trial
        assert (trial.rows_lost, trial.rows_duplicated) == (0, 0), trial
        if stage_scope(trial.stage) is Scope.UNIT:
            # Killed after its first file: the retry keeps exactly the files it committed.
            assert trial.parts_committed_at_kill >= 1, trial
            assert trial.parts_resumed == trial.parts_committed_at_kill, trial
    # The kill points are drawn from the reference run's durations, which a loaded machine
    # stretches: some trials end before their kill. Enough must be killed midway to mean it.
    assert sum(t.killed_while_running for t in trials) >= len(trials) // 3, trials
    assert faults.stray_temp_files(trial_root) == []


def stage_scope(name: str) -> Scope:
    return next(stage.scope for stage in STAGES if stage.name == name)


def test_killed_dagster_run_is_retried_resuming_per_file(reference, tmp_path):
    _, lake, _ = reference
    run_lake = recipe_lake(Lake.from_url(str(tmp_path / "lake")))  # where Dagster runs write
    env = faults.dagster_env(faults.local_home(tmp_path / "home"), str(tmp_path / "lake"))
    child = faults.start_ingest_run(lake, run_lake, env)
    # Killed as soon as the extraction run committed its first file: midway through the unit.
    extracted_prefix = UNIT.prefix("extracted")
    faults.wait_for(lambda: run_lake.exists(f"{extracted_prefix}/00000/{MARKER}"), timeout=120)
    assert child.kill(), "the run finished before it could be killed"
    assert not run_lake.exists(f"{extracted_prefix}/{MARKER}"), "the unit was done already"
    for stage in faults.INGEST_STAGES:
        assert faults.commit_problems(run_lake, UNIT.prefix(stage)) == []
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("DAGSTER_HOME", env["DAGSTER_HOME"])
        with DagsterInstance.get() as instance:
            (killed,) = instance.get_runs(RunsFilter(job_name="run_extracted"))
    (committed,) = {
        run_lake.read_json(key)["resume"]
        for key in run_lake.list(extracted_prefix)
        if key.endswith(f"/{MARKER}")
    }
    assert committed == killed.run_id
    parts_at_kill = sum(key.endswith(f"/{MARKER}") for key in run_lake.list(extracted_prefix))
    # The run retry the daemon launches: the same root run, so the same attempt.
    jobs = f"run_extracted@{killed.run_id},run_cleaned,run_dedup_signatures"
    outcome = faults.run_child("jobs", UNIT.key, jobs, env=env)
    assert outcome["success"]
    summary = run_lake.read_json(f"{extracted_prefix}/{MARKER}")
    assert summary["counts"]["resumed_parts"] == parts_at_kill >= 1
    assert summary["counts"]["files"] == faults.FILES_PER_UNIT
    assert faults.ingest_outputs_match(lake, run_lake, UNIT)
    for stage in faults.INGEST_STAGES:
        prefix = UNIT.prefix(stage)
        assert faults.rows_lost_and_duplicated(lake, run_lake, prefix) == (0, 0), stage
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("DAGSTER_HOME", env["DAGSTER_HOME"])
        with DagsterInstance.get() as instance:
            statuses = {run.run_id: run.status for run in instance.get_runs()}
            retry = instance.get_run_by_id(outcome["run_ids"][0])
            materialized = instance.get_materialized_partitions(key("dedup_signatures"))
    for run_id in outcome["run_ids"]:
        assert statuses.pop(run_id) == DagsterRunStatus.SUCCESS
    assert retry.tags["dagster/root_run_id"] == killed.run_id
    # Its process gone, the killed run was marked failed by its retry's first step; never SUCCESS.
    assert statuses.pop(killed.run_id) == DagsterRunStatus.FAILURE
    assert set(statuses.values()) == {DagsterRunStatus.SUCCESS}  # raw_crawl's run
    assert UNIT.key in materialized


# Concurrency


def test_same_partition_materialized_twice_concurrently(reference, tmp_path):
    _, lake, _ = reference
    root = fresh_copy(reference, tmp_path)
    copy = Lake.from_url(str(root))
    prefix = faults.output_prefix("cleaned", UNIT.key)
    copy.delete_prefix(prefix)
    children = [
        Child.start("stage", str(root), "cleaned", UNIT.key, uuid.uuid4().hex) for _ in range(2)
    ]
    for child in children:
        child.wait_for_go()
    assert all(child.outcome()["success"] for child in children)
    assert faults.commit_problems(copy, prefix) == []
    assert faults.snapshot(copy, prefix) == faults.snapshot(lake, prefix)
    assert faults.stray_temp_files(root) == []


# Servers going away


@pytest.fixture
def own_seaweedfs(tmp_path):
    """A SeaweedFS of this test only: the test kills it."""
    from testkit.servers import start_seaweedfs, stop

    server = start_seaweedfs(tmp_path / "seaweedfs")
    yield server
    stop(server.process)


def test_object_store_outage_mid_run_is_ridden_out(reference, own_seaweedfs, tmp_path):
    _, lake, _ = reference
    server = own_seaweedfs
    url = f"s3://{server.bucket}/lake"
    s3_lake = recipe_lake(Lake.from_url(url, endpoint_url=server.endpoint))
    with pytest.MonkeyPatch.context() as patch:
        for name, value in server.env().items():
            patch.setenv(name, value)
        env = server.env() | faults.dagster_env(
            faults.local_home(tmp_path / "home"), url, TOKENMILL_S3_ENDPOINT=server.endpoint
        )
        child = faults.start_ingest_run(lake, s3_lake, env)
        time.sleep(1.0)
        down = faults.s3_outage(server, seconds=10)
        outcome = child.outcome(timeout=300)
        # Ridden out by the S3 clients' request retries or by step retries (outcome["retries"]).
        assert down >= 10 and outcome["success"], outcome
        assert outcome["seconds"] > down, "the outage did not hit the run"
        assert faults.ingest_outputs_match(lake, s3_lake, UNIT)
        assert not [key for key in server.keys("lake/") if ".tmp-" in key]


@pytest.fixture
def own_database():
    """A database of this test only (the session's is shared with tests that list all runs)."""
    from testkit.servers import fresh_database

    with fresh_database("tokenmill_faults") as name:
        try:
            yield name
        finally:
            faults.ensure_postgres_running()  # before the database is dropped


def test_instance_database_restart_mid_run(reference, own_database, tmp_path):
    _, lake, _ = reference
    postgres_database = own_database
    run_lake = recipe_lake(Lake.from_url(str(tmp_path / "lake")))
    home, pg_env = faults.postgres_home(tmp_path / "home", postgres_database)
    env = faults.dagster_env(home, str(tmp_path / "lake"), **pg_env)
    try:
        child = faults.start_ingest_run(lake, run_lake, env)
        started = time.monotonic()
        time.sleep(0.3)
        restarted_after = time.monotonic() - started
        faults.restart_postgres()
        try:
            outcomes = [child.outcome(timeout=300)]
        except RuntimeError:  # the run process died with the connection: run it again
            outcomes = [{"success": False}]
        if not outcomes[-1]["success"]:
            outcomes.append(faults.run_child("jobs", UNIT.key, faults.INGEST_JOBS, env=env))
    finally:
        faults.ensure_postgres_running()
    # The restart began while the first run was still going (or it died of it).
    assert outcomes[0].get("seconds", float("inf")) > restarted_after
    assert outcomes[-1]["success"]
    assert faults.ingest_outputs_match(lake, run_lake, UNIT)
    with pytest.MonkeyPatch.context() as patch:
        for name, value in env.items():
            patch.setenv(name, value)
        with DagsterInstance.get() as instance:
            run_ids = outcomes[-1]["run_ids"]
            for asset, run_id in zip(faults.INGEST_STAGES, run_ids, strict=True):
                run = instance.get_run_by_id(run_id)
                assert run.status == DagsterRunStatus.SUCCESS
                event = instance.get_latest_materialization_event(key(asset))
                assert event is not None and event.run_id == run.run_id, asset
                assert UNIT.key in instance.get_materialized_partitions(key(asset))


# Hostile input


def test_fuzzed_warc_files_never_crash_the_reader(reference):
    _, lake, _ = reference
    gzipped = lake.read_bytes(lake.list(f"landing/{CRAWL}")[0])
    samples = [gzipped, gzip.decompress(gzipped)]  # a .warc.gz and the same as plain .warc
    result = faults.fuzz_reader(samples, mutations=300, seed=8)
    assert result.crashes == []
    assert result.good_records_lost == 0
    assert result.bad_records > 100 and result.unusable < result.files // 4, result


def land(lake: Lake, crawl: str, files: dict[str, bytes]) -> Unit:
    for name, data in files.items():
        lake.write_bytes(f"landing/{crawl}/{name}", data)
    (unit,) = register_new_files(lake, crawl, files_per_unit=len(files)).units
    return unit


def read_table(lake: Lake, key: str):
    with lake.open_input(key) as f:
        return pq.read_table(f)


def unit_table(lake: Lake, unit: Unit, stage: str, name: str, parts: int):
    return pa.concat_tables(
        read_table(lake, f"{unit.part_prefix(stage, part)}/{name}") for part in range(parts)
    )


def test_hostile_records_are_counted_kept_aside_and_never_fail_the_run(reference, tmp_path):
    _, reference_lake, _ = reference
    demo = reference_lake.read_bytes(reference_lake.list(f"landing/{CRAWL}")[0])
    lake = Lake.from_url(str(tmp_path / "lake"))
    files = {
        "a-hostile.warc.gz": faults.hostile_warc(),
        "b-truncated.warc.gz": demo[: len(demo) // 2],
        "c-empty.warc.gz": b"",
        "d-flipped.warc.gz": faults.mutate(demo, random.Random(3))[0],
    }
    unit = land(lake, "CC-MAIN-HOSTILE", files)
    raw = run_stage_work(raw_crawl.STAGE, lake, unit=unit, workers=1)
    prefix = unit.prefix("raw_crawl")
    assert faults.commit_problems(lake, prefix) == []
    quarantine = unit_table(lake, unit, "raw_crawl", "quarantine.parquet", len(files))
    index = unit_table(lake, unit, "raw_crawl", "index.parquet", len(files))
    bad = sum(count for reason, count in raw.dropped.items() if reason != "unusable_file")
    assert bad >= 3 and quarantine.num_rows == bad + 1  # and one row for the empty file
    assert raw.records_in == index.num_rows + bad
    assert raw.counts["unusable_files"] == {"landing/CC-MAIN-HOSTILE/c-empty.warc.gz": "empty file"}
    damaged = quarantine.filter(pc.not_equal(quarantine["reason"], "unusable_file"))
    assert damaged.num_rows >= 3 and all(damaged.column("raw").to_pylist()), (
        "bad records keep their bytes"
    )
    # Every landed file was read whole, damage included, where it lies: nothing was copied.
    stats = raw.counts["file_stats"]
    for name, data in files.items():
        key = f"landing/CC-MAIN-HOSTILE/{name}"
        assert stats[key]["bytes"] == len(data), name
        assert stats[key]["sha256"] == hashlib.sha256(data).hexdigest(), name
    assert [k for k in lake.list("raw_crawl") if k.endswith(".warc.gz")] == []

    report = run_stage_work(extracted.STAGE, lake, unit=unit, workers=1)
    run_stage_work(cleaned.STAGE, lake, unit=unit, workers=1)
    docs = unit_table(lake, unit, "cleaned", "docs.parquet", len(files))
    rejected = pa.concat_tables(
        unit_table(lake, unit, zone, "rejected.parquet", len(files))
        for zone in ("extracted", "cleaned")
    )
    responses = index.filter(pc.equal(index["type"], "response"))
    unusable = rejected.filter(pc.equal(rejected["filter"], "unusable_file"))
    assert unusable.column("source_file").to_pylist() == ["landing/CC-MAIN-HOSTILE/c-empty.warc.gz"]
    records = rejected.num_rows - unusable.num_rows
    assert docs.num_rows + records == responses.num_rows == report.records_in
    rows = rejected.select(["url", "filter", "reason"]).to_pylist()
    by_url = {row["url"]: row["filter"] for row in rows}
    why = {row["url"]: row["reason"] for row in rows}
    kept = set(docs.column("url").to_pylist())
    for name in ("binary", "png"):
        assert by_url[f"http://hostile.example/{name}"] == "extract:binary_payload", by_url
    for text in docs.column("text").to_pylist():
        assert "\ufffd" not in text and "\x00" not in text
    # Declared, wrongly declared (cp1251 sent as utf-8) and undeclared charsets all decode to
    # text the language filter recognizes (English-only by default), not to mojibake.
    for name, language in (("cp1251", "ru"), ("mislabeled", "ru"), ("undeclared", "fr")):
        assert why[f"http://hostile.example/{name}"] == f"language={language}", why
    assert "http://hostile.example/utf8" in kept | set(by_url)


@pytest.mark.parametrize(
    ("file_count", "workers"),
    [(2, 2), (1, 1)],  # one file and one worker: still in a worker process, under a memory cap
    ids=["two-files-two-workers", "one-file-one-worker"],
)
def test_a_record_over_its_cpu_budget_is_dropped_and_its_neighbours_kept(
    tmp_path, file_count, workers
):
    """80,000 nested <div>s keep extraction in C code for about two minutes of CPU, out of reach
    of the in-process timer: the parent kills the worker at twice the record's budget and the
    file starts again in a new worker without that record. The pages around it are kept. (A
    unit of one file once ran in the run's own process: no watchdog, no memory cap.)"""
    lake = Lake.from_url(str(tmp_path / "lake"))
    files = {"a.warc.gz": faults.nested_divs_warc(80_000), "b.warc.gz": faults.nested_divs_warc(0)}
    files = dict(list(files.items())[:file_count])
    unit = land(lake, "CC-MAIN-BUDGET", files)
    run_stage_work(raw_crawl.STAGE, lake, unit=unit, workers=1)
    settings = extracted.ExtractSettings(record_cpu_s=1.0)
    started = time.process_time()
    report = run_stage_work(
        extracted.STAGE, lake, settings, unit=unit, workers=workers, memory_limit=4 << 30
    )
    assert time.process_time() - started < 20  # this process only waited
    docs = unit_table(lake, unit, "extracted", "docs.parquet", len(files))
    rejected = unit_table(lake, unit, "extracted", "rejected.parquet", len(files))
    assert report.records_in == 3 * file_count == docs.num_rows + rejected.num_rows
    assert report.dropped["extract:over_budget"] == 1
    reasons = {
        (row["source_file"].rsplit("/", 1)[1], row["url"].rsplit("/", 1)[1]): row["filter"]
        for row in rejected.to_pylist()
    }
    assert reasons.pop(("a.warc.gz", "nested")) == "extract:over_budget"
    # Every other page, the deep page's neighbours included, was extracted.
    assert not [r for r in reasons.values() if r.startswith("extract:")], reasons
    kept = {
        (r["source_file"].rsplit("/", 1)[1], r["url"].rsplit("/", 1)[1]) for r in docs.to_pylist()
    }
    assert len(kept | set(reasons)) == 3 * file_count - 1


def test_a_record_over_its_budget_in_raw_crawls_pass_is_dropped_as_in_extracteds(tmp_path):
    """The same record, extracted in raw_crawl's pass over the file (one pass for both stages):
    the worker is killed, raw_crawl's part starts again without extracting that record, and
    extracted keeps what that pass made."""
    lake = Lake.from_url(str(tmp_path / "lake"))
    files = {"a.warc.gz": faults.nested_divs_warc(80_000), "b.warc.gz": faults.nested_divs_warc(0)}
    unit = land(lake, "CC-MAIN-BUDGET", files)
    settings = extracted.ExtractSettings(record_cpu_s=1.0)
    capped = {"unit": unit, "workers": 2, "memory_limit": 4 << 30, "resume": "run-1"}
    raw = run_stage_work(raw_crawl.STAGE, lake, fed_settings=settings, **capped)
    report = run_stage_work(extracted.STAGE, lake, settings, **capped)
    assert report.fed_parts == 2 and raw.records_out == 6
    assert report.records_in == 6 and report.dropped["extract:over_budget"] == 1
    rejected = unit_table(lake, unit, "extracted", "rejected.parquet", len(files)).to_pylist()
    assert [row["url"].rsplit("/", 1)[1] for row in rejected] == ["nested"]


def test_unusable_file_is_quarantined_by_name_and_flagged_without_retries(reference, tmp_path):
    # A file that is not WARC at all does not fail its unit (the unit's other files are
    # good): it is one quarantine row naming the file and why, and the unit's bad_record_rate
    # check fails, without a retry.
    _, reference_lake, _ = reference
    demo = reference_lake.read_bytes(reference_lake.list(f"landing/{CRAWL}")[0])
    lake = Lake.from_url(str(tmp_path / "lake"))
    crawl = "CC-MAIN-UNUSABLE"
    unit = land(
        lake, crawl, {"a.warc.gz": demo, "b.warc.gz": b"<html>a web page, not a WARC</html>"}
    )
    instance = DagsterInstance.ephemeral()
    sync_partitions(instance, lake)
    result = run_job(instance, lake, "run_raw_crawl", unit.key)
    assert result.success
    assert sum(event.is_step_up_for_retry for event in result.all_events) == 0
    (check,) = result.get_asset_check_evaluations()
    assert not check.passed and check.metadata["unusable_files"].value == 1
    quarantine = read_table(lake, f"{unit.part_prefix('raw_crawl', 1)}/quarantine.parquet")
    (row,) = quarantine.to_pylist()
    assert row["file"] == f"landing/{crawl}/b.warc.gz" and row["reason"] == "unusable_file"
    assert row["detail"].startswith("not a WARC file")
    assert read_table(lake, f"{unit.part_prefix('raw_crawl', 0)}/index.parquet").num_rows > 0
    assert faults.commit_problems(lake, unit.prefix("raw_crawl")) == []
    assert faults.stray_temp_files(tmp_path / "lake") == []


def test_real_damaged_and_legacy_files(shared, tmp_path):
    warc = shared / "corpora" / "warc"
    lake = Lake.from_url(str(tmp_path / "lake"))
    unit = land(
        lake, "CC-MAIN-CLIPPED", {"t.warc.gz": (warc / "truncated-record.warc.gz").read_bytes()}
    )
    report = run_stage_work(raw_crawl.STAGE, lake, unit=unit, workers=1)
    assert dict(report.dropped) == {"truncated_gzip": 1}
    quarantine = read_table(lake, f"{unit.part_prefix('raw_crawl', 0)}/quarantine.parquet")
    assert quarantine.num_rows == 1
    arc = land(
        lake, "CC-MAIN-ARC", {"aut.arc.gz": (warc / "aut-2008-heritrix.arc.gz").read_bytes()}
    )
    # ARC: the Internet Archive's legacy format, read as WARC
    report = run_stage_work(raw_crawl.STAGE, lake, unit=arc, workers=1)
    assert report.records_out == 300 and not sum(report.dropped.values())
    assert report.counts["records_by_type"] == {"warcinfo": 1, "response": 299}


@pytest.mark.parametrize("compressed", [False, True], ids=["warc", "warc.gz"])
def test_200mb_record_streams_in_bounded_memory(compressed, tmp_path):
    lake_root = tmp_path / "lake"
    try:
        outcome = faults.big_record_trial(lake_root, 200 << 20, compressed)
        assert outcome["dropped"] == {"oversized_record": 1} and outcome["out"] == 2
        # 64 MB is the largest record kept (DEFAULT_MAX_RECORD_BYTES); beyond it, streamed past.
        assert outcome["growth_mb"] < 100, outcome
        assert outcome["copied_identically"], outcome
    finally:
        shutil.rmtree(lake_root)


# Path-like names


def run_job(instance: DagsterInstance, lake: Lake, job: str, partition: str):
    from tokenmill.definitions import build_definitions

    defs = build_definitions(LakeResource(url=lake.url), workers=WorkersResource(processes=1))
    return defs.resolve_job_def(job).execute_in_process(
        instance=instance, partition_key=partition, raise_on_error=False
    )


def step_failure_messages(result) -> str:
    failures = [event for event in result.all_events if event.is_step_failure]
    return "\n".join(str(event.step_failure_data.error.message) for event in failures)


def test_path_like_names_never_escape_the_lake(tmp_path):
    lake = Lake.from_url(str(tmp_path / "nested" / "lake"))
    before = sorted(tmp_path.rglob("*"))
    instance = DagsterInstance.ephemeral()
    keys = ["../../etc/00000", f"{CRAWL}/../x", f"{CRAWL}/.."]
    instance.add_dynamic_partitions("units", keys)
    for partition in keys:
        result = run_job(instance, lake, "run_raw_crawl", partition)
        assert not result.success
        message = step_failure_messages(result)
        assert "invalid crawl name" in message or "invalid unit name" in message, message
        assert sum(event.is_step_up_for_retry for event in result.all_events) == 0
    instance.add_dynamic_partitions("crawls", ["../../etc"])
    result = run_job(instance, lake, "run_dedup_clusters", "../../etc")
    assert not result.success and "invalid crawl name" in step_failure_messages(result)
    with pytest.raises(LakeKeyError):
        register_new_files(lake, "../../etc", files_per_unit=2)
    with pytest.raises(LakeKeyError):
        lake.write_bytes("landing/../../../escaped.warc.gz", b"x")
    # A landing folder no crawl can be named after is left out; the others are discovered.
    lake.write_bytes("landing/good/a.warc.gz", b"x")
    lake.write_bytes("landing/bad\\name/b.warc.gz", b"x")
    hidden = f".{uuid.uuid4().hex}"
    lake.write_bytes(f"landing/{hidden}/c.warc.gz", b"x")
    created, _, problems = discover(lake, {}, files_per_unit=1, max_keys=10)
    assert [unit.crawl for unit in created] == ["good"]
    assert len(problems) == 2 and any(hidden in p for p in problems), problems
    after = sorted(tmp_path.rglob("*"))
    lake_root = tmp_path / "nested" / "lake"
    assert [p for p in after if p not in before and lake_root not in p.parents] == []
