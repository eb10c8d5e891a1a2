"""The pipeline running itself, on a real Dagster instance: landing-zone sensor ticks, automation
conditions carrying a new shard down to tokens, the run-failure sensor and reconciliation."""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, HTTPServer

import pytest
from dagster import (
    AssetKey,
    AssetMaterialization,
    DagsterInstance,
    SensorResult,
    SkipReason,
    build_run_status_sensor_context,
    build_sensor_context,
    evaluate_automation_conditions,
)
from dagster._core.definitions.data_version import CachingStaleStatusResolver, StaleStatus
from dagster._core.loader import LoadingContextForTest

from data_assets.definitions import build_definitions
from data_assets.partitions import crawl_shards, shard_key, shard_list_version
from data_assets.stage import StepJournal
from demo.crawl import generate_demo_crawl
from resources.automation import AlertsResource, DiscoveryResource
from resources.lake import LakeResource
from sensors.failures import FAILURES, record_run_failures
from sensors.landing import landing_zone
from tokenmill.lake import Lake
from tokenmill.outputs import StageReport
from tokenmill.shards import LANDING, Shard, discover, registered_shards, shard_files

CRAWL = "CC-MAIN-AUTO-2026-05"


def land(lake: Lake, names: list[str], crawl: str = CRAWL, data: bytes = b"") -> None:
    for name in names:
        lake.write_bytes(f"{LANDING}/{crawl}/{name}", data)


def tick(lake: Lake, instance: DagsterInstance, cursor: str | None, max_keys: int = 10_000):
    context = build_sensor_context(
        instance=instance,
        cursor=cursor,
        resources={
            "lake": LakeResource(url=lake.url),
            "discovery": DiscoveryResource(files_per_shard=2, max_keys_per_tick=max_keys),
        },
    )
    result = landing_zone(context)
    if isinstance(result, SkipReason):
        return [], [], context.cursor
    assert isinstance(result, SensorResult)
    for event in result.asset_events:  # the daemon stores them before the partitions
        instance.report_runless_asset_event(event)
    return result.run_requests, result.dynamic_partitions_requests, result.cursor


@pytest.fixture
def lake(tmp_path) -> Lake:
    return Lake.from_url(str(tmp_path / "lake"))


def test_new_files_become_partitions_and_runs_once(lake):
    instance = DagsterInstance.ephemeral()
    land(lake, [f"f-{i:03d}.warc.gz" for i in range(5)] + ["README.txt"])
    runs, partitions, cursor = tick(lake, instance, None)
    assert [r.partition_key for r in runs] == [
        shard_key(Shard(CRAWL, s)) for s in ("00000", "00001", "00002")
    ]
    assert len({r.run_key for r in runs}) == 3
    assert [(p.partitions_def_name, list(p.partition_keys)) for p in partitions] == [
        ("crawls", [CRAWL]),
        ("shards", ["00000", "00001", "00002"]),
    ]
    assert shard_files(lake, Shard(CRAWL, "00002")) == [f"{LANDING}/{CRAWL}/f-004.warc.gz"]

    # An unchanged listing reports nothing; new files are reported once, in a new shard.
    assert tick(lake, instance, cursor)[0] == []
    land(lake, ["f-005.warc.gz", "f-006.warc.gz"])
    runs, _, cursor = tick(lake, instance, cursor)
    assert [r.run_key for r in runs] == [f"{CRAWL}|00003"]
    assert tick(lake, instance, cursor)[0] == []


def test_a_tick_lists_a_bounded_number_of_keys_and_the_next_goes_on(lake):
    names = [f"f-{i:05d}.warc.gz" for i in range(3_000)]
    land(lake, names)
    instance = DagsterInstance.ephemeral()
    cursor, shards_per_tick = None, []
    while True:
        runs, _, cursor = tick(lake, instance, cursor, max_keys=1_000)
        if not runs:
            break
        shards_per_tick.append(len(runs))
    assert shards_per_tick == [500, 500, 500]
    registered = [f for s in registered_shards(lake, CRAWL) for f in shard_files(lake, s)]
    assert registered == [f"{LANDING}/{CRAWL}/{n}" for n in names]  # each file exactly once


def shard_list_observations(instance: DagsterInstance) -> list[tuple[str, str]]:
    records = instance.fetch_observations(crawl_shards.key, limit=100).records
    return [(r.partition_key, r.asset_observation.data_version) for r in reversed(records)]


def test_a_tick_observes_the_shard_list_of_each_crawl_with_new_shards(lake):
    instance = DagsterInstance.ephemeral()
    other = "CC-MAIN-AUTO-2026-06"
    land(lake, [f"f-{i}.warc.gz" for i in range(4)])
    land(lake, ["g-0.warc.gz", "g-1.warc.gz"], crawl=other)
    _, _, cursor = tick(lake, instance, None)

    def version(crawl: str) -> str:
        return shard_list_version(registered_shards(lake, crawl))

    assert shard_list_observations(instance) == [(CRAWL, version(CRAWL)), (other, version(other))]
    # A tick repeated from the old cursor (the last one died before saving it) observes nothing.
    tick(lake, instance, None)
    assert len(shard_list_observations(instance)) == 2
    land(lake, ["f-4.warc.gz", "f-5.warc.gz"])
    tick(lake, instance, cursor)
    observed = shard_list_observations(instance)
    assert observed[2:] == [(CRAWL, version(CRAWL))] and version(CRAWL) != observed[0][1]


def test_a_crashed_tick_repeated_from_its_old_cursor_registers_nothing_twice(lake):
    land(lake, [f"f-{i}.warc.gz" for i in range(4)])
    first, positions = discover(lake, {}, files_per_shard=2, max_keys=100)
    # The sensor died before its cursor was saved: the next tick starts from the old one.
    again, _ = discover(lake, {}, files_per_shard=2, max_keys=100)
    assert again == [] or again == first
    assert len(registered_shards(lake, CRAWL)) == 2
    land(lake, ["f-4.warc.gz", "f-5.warc.gz"])
    new, _ = discover(lake, positions, files_per_shard=2, max_keys=100)
    assert [s.shard for s in new] == ["00002"]


def test_shards_registered_by_the_cli_meanwhile_are_not_overwritten(lake):
    from tokenmill.shards import register_new_files

    land(lake, ["a.warc.gz", "b.warc.gz"])
    _, positions = discover(lake, {}, files_per_shard=2, max_keys=100)
    land(lake, ["c.warc.gz", "d.warc.gz", "e.warc.gz", "f.warc.gz"])
    register_new_files(lake, CRAWL, files_per_shard=4)  # shard 00001 = c..f
    new, positions = discover(lake, positions, files_per_shard=2, max_keys=100)
    assert new == []
    assert len(shard_files(lake, Shard(CRAWL, "00001"))) == 4
    land(lake, ["g.warc.gz", "h.warc.gz"])
    new, _ = discover(lake, positions, files_per_shard=2, max_keys=100)
    assert [(s.shard, shard_files(lake, s)) for s in new] == [
        ("00002", [f"{LANDING}/{CRAWL}/g.warc.gz", f"{LANDING}/{CRAWL}/h.warc.gz"])
    ]


def execute_requested(defs, instance: DagsterInstance, result) -> int:
    """Launch what the automation conditions requested, as the daemon would; returns runs."""
    job = defs.resolve_implicit_global_asset_job_def()
    runs = 0
    for node in defs.resolve_asset_graph().toposorted_asset_keys:
        for partition in sorted(result.get_requested_partitions(node), key=str):
            outcome = job.execute_in_process(
                instance=instance, asset_selection=[node], partition_key=partition
            )
            assert outcome.success
            runs += 1
    return runs


class Automation:
    """The automation sensor's ticks, evaluated in the test; its cursor carries over, as the
    daemon's does, so conditions see what changed since the previous tick."""

    def __init__(self, defs, instance: DagsterInstance):
        self.defs, self.instance, self.cursor = defs, instance, None
        self.first = self.evaluate()

    def evaluate(self):
        result = evaluate_automation_conditions(
            defs=self.defs, instance=self.instance, cursor=self.cursor
        )
        self.cursor = result.cursor
        return result

    def settle(self, max_rounds: int = 12) -> int:
        runs = 0
        for _ in range(max_rounds):
            result = self.evaluate()
            if result.total_requested == 0:
                return runs
            runs += execute_requested(self.defs, self.instance, result)
        raise AssertionError("automation did not settle")


def clusters_status(defs, instance: DagsterInstance) -> StaleStatus:
    resolver = CachingStaleStatusResolver(
        instance, defs.resolve_asset_graph(), LoadingContextForTest(instance)
    )
    return resolver.get_status(AssetKey("dedup_clusters"), CRAWL)


def test_a_shard_dropped_in_the_landing_zone_ends_up_tokenized(tmp_path, lake):
    warcs = tmp_path / "warcs"
    generate_demo_crawl(warcs, tmp_path / "truth.json", crawl=CRAWL, files=4, pages_per_file=20)
    files = sorted(warcs.iterdir())
    for path in files[:2]:
        lake.put_file(f"{LANDING}/{CRAWL}/{path.name}", path)
    defs = build_definitions(LakeResource(url=lake.url))
    instance = DagsterInstance.ephemeral()

    def sensor_tick(cursor):
        runs, partitions, cursor = tick(lake, instance, cursor)
        for request in partitions:
            instance.add_dynamic_partitions(request.partitions_def_name, request.partition_keys)
        for run in runs:  # what the daemon launches for the sensor's run requests
            job = defs.resolve_job_def("ingest_shard")
            assert job.execute_in_process(instance=instance, partition_key=run.partition_key)
        return cursor, len(runs)

    automation = Automation(defs, instance)
    assert automation.first.total_requested == 0  # nothing to do yet, not even a tokenizer
    cursor, launched = sensor_tick(None)
    assert launched == 1
    assert automation.settle() >= 4  # clusters, deduplicated, tokenizer, tokenized
    first = f"{CRAWL}|00000"
    for asset in ("cleaned", "deduplicated", "tokenized_shards"):
        assert instance.get_materialized_partitions(AssetKey(asset)) == {first}, asset
    clusters_before = instance.get_latest_materialization_event(AssetKey("dedup_clusters"))

    # A second shard lands: its crawl's clusters are recomputed and both shards follow.
    for path in files[2:]:
        lake.put_file(f"{LANDING}/{CRAWL}/{path.name}", path)
    cursor, launched = sensor_tick(cursor)
    assert launched == 1
    assert clusters_status(defs, instance) == StaleStatus.STALE
    automation.settle()
    assert clusters_status(defs, instance) == StaleStatus.FRESH
    second = f"{CRAWL}|00001"
    assert instance.get_materialized_partitions(AssetKey("tokenized_shards")) == {first, second}
    clusters_after = instance.get_latest_materialization_event(AssetKey("dedup_clusters"))
    assert clusters_after.run_id != clusters_before.run_id
    deduplicated = instance.get_latest_materialization_event(AssetKey("deduplicated"))
    assert deduplicated.timestamp > clusters_after.timestamp
    assert lake.exists(f"tokenized/{CRAWL}/00001/tokens.bin")


def test_clusters_are_not_held_by_a_crawl_whose_shard_list_was_never_observed(lake):
    # An instance whose crawls were registered before crawl_shards existed: signed shards still
    # get their clusters; the shard list only marks them stale.
    instance = DagsterInstance.ephemeral()
    instance.add_dynamic_partitions("crawls", [CRAWL])
    instance.add_dynamic_partitions("shards", ["00000"])
    automation = Automation(build_definitions(LakeResource(url=lake.url)), instance)
    for asset in ("raw_crawl", "cleaned", "dedup_signatures"):
        instance.report_runless_asset_event(AssetMaterialization(asset, partition=f"{CRAWL}|00000"))
    requested = automation.evaluate().get_requested_partitions(AssetKey("dedup_clusters"))
    assert requested == {CRAWL}


class Webhook(BaseHTTPRequestHandler):
    received: list[dict] = []

    def do_POST(self):  # noqa: N802 (http.server's naming)
        length = int(self.headers["Content-Length"])
        Webhook.received.append(json.loads(self.rfile.read(length)))
        self.send_response(204)
        self.end_headers()

    def log_message(self, *args):
        pass


def test_failed_runs_are_recorded_in_the_lake_and_posted(lake):
    server = HTTPServer(("127.0.0.1", 0), Webhook)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    webhook = f"http://127.0.0.1:{server.server_port}/hook"
    instance = DagsterInstance.ephemeral()
    defs = build_definitions(LakeResource(url=lake.url))
    instance.add_dynamic_partitions("crawls", [CRAWL])
    instance.add_dynamic_partitions("shards", ["00000"])
    # Tokenizing a shard that was never deduplicated fails at once with a clear message.
    result = defs.resolve_job_def("tokenize_shard").execute_in_process(
        instance=instance, partition_key=f"{CRAWL}|00000", raise_on_error=False
    )
    assert not result.success
    failure = next(e for e in result.all_events if e.event_type_value == "PIPELINE_FAILURE")
    context = build_run_status_sensor_context(
        sensor_name="record_run_failures",
        dagster_event=failure,
        dagster_instance=instance,
        dagster_run=result.dagster_run,
        resources={
            "lake": LakeResource(url=lake.url),
            "alerts": AlertsResource(webhook_url=webhook),
        },
    ).for_run_failure()
    # What a range step of the failed run (and of another, live run) had journaled.
    report = StageReport(records_in=3)
    for run_id in (result.run_id, "another-run"):
        StepJournal(lake, run_id, "tokenized").record(Shard(CRAWL, "00000"), report)
    record_run_failures(context)
    server.shutdown()
    assert lake.list("_journal") == [f"_journal/tokenized/another-run/{CRAWL}/00000.json"]

    record = lake.read_json(f"{FAILURES}/{result.run_id}.json")
    assert record["job"] == "tokenize_shard" and record["partition"] == f"{CRAWL}|00000"
    assert record["steps"] == ["tokenized_shards"]
    assert any(
        "deduplicated" in error and "not materialized" in error for error in record["errors"]
    )
    assert Webhook.received == [record]


def test_reconciliation_registers_files_the_sensor_skipped(lake):
    instance = DagsterInstance.ephemeral()
    defs = build_definitions(LakeResource(url=lake.url))
    land(lake, ["b.warc.gz", "c.warc.gz"])
    _, positions = discover(lake, {}, files_per_shard=2, max_keys=100)
    land(lake, ["a.warc.gz"])  # landed late, sorts before the sensor's position
    assert discover(lake, positions, files_per_shard=2, max_keys=100)[0] == []
    assert defs.resolve_job_def("reconcile_landing").execute_in_process(instance=instance).success
    assert shard_files(lake, Shard(CRAWL, "00001")) == [f"{LANDING}/{CRAWL}/a.warc.gz"]
    assert set(instance.get_dynamic_partitions("shards")) == {"00000", "00001"}
    version = shard_list_version(registered_shards(lake, CRAWL))
    assert shard_list_observations(instance) == [(CRAWL, version)]


def test_definitions_wire_the_sensors_and_schedule():
    from data_assets.definitions import defs

    repository = defs.get_repository_def()
    assert {s.name for s in repository.sensor_defs} >= {
        "landing_zone",
        "record_run_failures",
        "automation",
    }
    assert [s.name for s in repository.schedule_defs] == ["reconcile_landing_schedule"]
    for name in ("cleaned", "dedup_clusters", "deduplicated", "tokenized_shards"):
        assert defs.resolve_assets_def(name).automation_conditions_by_key[AssetKey(name)]
