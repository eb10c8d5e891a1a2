"""The production path on real servers: the Dagster instance of helm/dagster-instance.yaml on
PostgreSQL (127.0.0.1:5432) and the lake on SeaweedFS, running the same demo as a local run."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import psycopg2
import pytest
from dagster import AssetKey, DagsterInstance, DagsterRunStatus
from tokenmill.data_assets.results import OUTAGE_RETRIES
from tokenmill.resources.lake import LakeResource
from tokenmill.resources.workers import WorkersResource

from testkit import faults
from testkit.datasets import built_stages, key, recipe_lake
from testkit.servers import PG_HOST, PG_PORT, PG_USER, free_port, write_production_instance
from tokenmill.cli.demo import land_demo_crawl
from tokenmill.cli.runner import local_instance, materialize_all, register
from tokenmill.runtime.stage import Scope
from tokenmill.stages import STAGES
from tokenmill.storage.lake import Lake
from tokenmill.storage.layout import MARKER, Unit

pytestmark = pytest.mark.integration

PROJECT_DIR = Path(__file__).resolve().parents[1]
CRAWL, FAILING_CRAWL = "CC-MAIN-DEMO-2026-06", "CC-MAIN-DEMO-2026-07"
DEMO = {"files": 2, "pages_per_file": 40, "seed": 6}


@dataclass
class PipelineRun:
    lake: Lake
    instance: DagsterInstance
    run_ids: list[str]


def run_demo(crawl: str) -> PipelineRun:
    """`tokenmill demo` on the lake and instance the environment names."""
    from tokenmill.cli.context import default_lake

    lake = default_lake()
    land_demo_crawl(lake, crawl, **DEMO)
    instance = DagsterInstance.get()
    register(instance, lake, crawl, files_per_unit=2)
    outcomes = materialize_all(instance, lake)
    return PipelineRun(lake, instance, [o.run_id for o in outcomes])


def snapshot(lake: Lake) -> dict[str, str]:
    """Every stage's outputs (markers without the run that wrote them)."""
    outputs = recipe_lake(lake)
    return {
        name: digest
        for stage in STAGES
        for name, digest in faults.snapshot(outputs, stage.name).items()
    }


@pytest.fixture(scope="module")
def production(seaweedfs, postgres_database, tmp_path_factory):
    home = tmp_path_factory.mktemp("dagster_home")
    write_production_instance(home)
    environment = seaweedfs.env(
        DAGSTER_HOME=str(home),
        DAGSTER_PG_HOST=PG_HOST,
        DAGSTER_PG_PORT=str(PG_PORT),
        DAGSTER_PG_USERNAME=PG_USER,
        DAGSTER_PG_PASSWORD="unused-with-trust-auth",
        DAGSTER_PG_DB=postgres_database,
        TOKENMILL_LAKE_URL=f"s3://{seaweedfs.bucket}/lake",
        TOKENMILL_S3_ENDPOINT=seaweedfs.endpoint,
    )
    with pytest.MonkeyPatch.context() as env:
        for name, value in environment.items():
            env.setenv(name, value)
        run = run_demo(CRAWL)
    yield run
    run.instance.dispose()


@pytest.fixture(scope="module")
def local(tmp_path_factory):
    root = tmp_path_factory.mktemp("local")
    with pytest.MonkeyPatch.context() as env:
        env.setenv("TOKENMILL_LAKE_URL", str(root / "lake"))
        env.delenv("TOKENMILL_S3_ENDPOINT", raising=False)
        env.setenv("DAGSTER_HOME", str(root / "dagster_home"))
        local_instance()
        run = run_demo(CRAWL)
    yield run
    run.instance.dispose()


def test_runs_and_materializations_are_in_postgres(production, postgres_database):
    instance = production.instance
    assert type(instance.run_storage).__name__ == "PostgresRunStorage"
    assert type(instance.event_log_storage).__name__ == "PostgresEventLogStorage"
    runs = instance.get_runs()
    assert sorted(r.run_id for r in runs) == sorted(production.run_ids)
    assert {r.status for r in runs} == {DagsterRunStatus.SUCCESS}
    unit = Unit(CRAWL, "00000").key
    for stage in built_stages():
        asset = stage.name
        expected = {CRAWL} if stage.scope is Scope.CRAWL else {unit}
        if stage.scope is Scope.LAKE:
            assert instance.get_latest_materialization_event(key(asset)) is not None
        else:
            assert instance.get_materialized_partitions(key(asset)) == expected, asset
    # The same, read straight from the database the instance was pointed at.
    with psycopg2.connect(host=PG_HOST, port=PG_PORT, user=PG_USER, dbname=postgres_database) as db:
        cursor = db.cursor()
        cursor.execute("SELECT count(*) FROM runs WHERE status = 'SUCCESS'")
        assert cursor.fetchone()[0] == len(production.run_ids)
        cursor.execute(
            "SELECT DISTINCT asset_key FROM event_logs "
            "WHERE dagster_event_type = 'ASSET_MATERIALIZATION'"
        )
        materialized = {AssetKey.from_db_string(row[0]) for row in cursor.fetchall()}
        assert materialized == {key(stage.name) for stage in built_stages()}
        # ... and the unit_duplicates each clustering run reports (observed) for its units.
        cursor.execute(
            "SELECT DISTINCT asset_key FROM event_logs "
            "WHERE dagster_event_type = 'ASSET_OBSERVATION'"
        )
        observed = {AssetKey.from_db_string(row[0]).path[-1] for row in cursor.fetchall()}
        assert "unit_duplicates" in observed


def test_outputs_are_objects_in_the_bucket(production, seaweedfs):
    keys = seaweedfs.keys("lake/")
    for zone, name in [
        ("landing", f"{CRAWL}/{CRAWL}-00000.warc.gz"),
        ("raw_crawl", f"{CRAWL}/00000/00001/index.parquet"),
        ("raw_crawl", f"{CRAWL}/00000/{MARKER}"),
        ("extracted", f"{CRAWL}/00000/00001/docs.parquet"),
        ("recipes/fineweb_en/dedup_clusters", f"{CRAWL}/clusters.parquet"),
        ("recipes/fineweb_en/tokenized_shards", f"{CRAWL}/00000/00000/tokens.bin"),
        ("recipes/fineweb_en/tokenized_shards", f"{CRAWL}/00000/00001/tokens.bin"),
        ("recipes/fineweb_en/tokenized_shards", f"{CRAWL}/00000/{MARKER}"),
        ("recipes/fineweb_en/tokenizer", "tokenizer.json"),
    ]:
        assert f"lake/{zone}/{name}" in keys
    assert not [k for k in keys if ".tmp-" in k]
    # The WARC files are read where they landed, not copied
    assert [k for k in keys if k.endswith(".warc.gz")] == [
        f"lake/landing/{CRAWL}/{CRAWL}-0000{i}.warc.gz" for i in range(DEMO["files"])
    ]


def test_outputs_are_identical_to_a_local_run(production, local, seaweedfs, monkeypatch):
    for name, value in seaweedfs.env().items():
        monkeypatch.setenv(name, value)
    on_s3, on_disk = snapshot(production.lake), snapshot(local.lake)
    assert len(on_disk) > 20
    assert on_s3 == on_disk


@pytest.fixture(scope="module")
def failing_partition(production, seaweedfs):
    """A landed, registered shard that has never been materialized."""
    with pytest.MonkeyPatch.context() as env:
        for name, value in seaweedfs.env().items():
            env.setenv(name, value)
        land_demo_crawl(production.lake, FAILING_CRAWL, files=2, pages_per_file=10, seed=7)
        register(production.instance, production.lake, FAILING_CRAWL, files_per_unit=2)
    return Unit(FAILING_CRAWL, "00000").key


def run_raw_crawl(instance, partition: str, endpoint: str, bucket: str):
    from tokenmill.definitions import build_definitions

    lake = LakeResource(url=f"s3://{bucket}/lake", endpoint_url=endpoint, max_attempts=2)
    job = build_definitions(lake, workers=WorkersResource(processes=1)).resolve_job_def(
        "run_raw_crawl"
    )
    return job.execute_in_process(instance=instance, partition_key=partition, raise_on_error=False)


def failure_message(result) -> str:
    failures = [event for event in result.all_events if event.is_step_failure]
    assert failures, "the run failed outside a step"
    return "\n".join(str(event.step_failure_data.error.message) for event in failures)


@pytest.mark.parametrize("fault", ["wrong credentials", "unreachable endpoint"])
def test_s3_faults_fail_the_run_with_a_clear_message(
    fault, production, seaweedfs, failing_partition, monkeypatch
):
    for name, value in seaweedfs.env().items():
        monkeypatch.setenv(name, value)
    endpoint = seaweedfs.endpoint
    if fault == "wrong credentials":
        monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "not-the-secret")
        expected = "refused the credentials"
    else:
        endpoint = f"http://127.0.0.1:{free_port()}"
        expected = "is unreachable"
        # An outage is retried with backoff (see data_assets/results.py); seconds, not minutes.
        monkeypatch.setattr("tokenmill.data_assets.results.OUTAGE_FIRST_WAIT_S", 0.1)
    result = run_raw_crawl(production.instance, failing_partition, endpoint, seaweedfs.bucket)
    assert not result.success
    retries = [event for event in result.all_events if event.is_step_up_for_retry]
    assert len(retries) == (OUTAGE_RETRIES if fault == "unreachable endpoint" else 0)
    assert production.instance.get_run_by_id(result.run_id).status == DagsterRunStatus.FAILURE
    message = failure_message(result)
    assert expected in message and endpoint in message and f"'{seaweedfs.bucket}'" in message
    done = [k for k in seaweedfs.keys("lake/") if FAILING_CRAWL in k and k.endswith(MARKER)]
    assert done == []
