"""The pipeline running itself, on a real Dagster instance: landing-zone sensor ticks, the
crawl-signatures sensor, automation conditions carrying a new unit down to tokens, staleness
across the unit/crawl boundary, the run-failure sensor and reconciliation."""

from __future__ import annotations

import functools
import json
import threading
from http.server import BaseHTTPRequestHandler, HTTPServer
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from dagster import (
    AssetKey,
    AssetMaterialization,
    AssetSelection,
    AutomationConditionSensorDefinition,
    DagsterInstance,
    DagsterInvalidConfigError,
    DagsterRunStatus,
    SensorResult,
    SkipReason,
    build_run_status_sensor_context,
    build_sensor_context,
    evaluate_automation_conditions,
)
from dagster._core.definitions.data_version import StaleStatus
from tokenmill.data_assets.datasets import Dataset
from tokenmill.data_assets.jobs import job_name
from tokenmill.data_assets.k8s import K8S_CONFIG, MAX_RUNTIME_TAG, STAGE_TAG, run_tags
from tokenmill.data_assets.partitions import crawl_units, unit_list_version
from tokenmill.resources.automation import AlertsResource, DiscoveryResource
from tokenmill.resources.lake import LakeResource
from tokenmill.resources.workers import WorkersResource
from tokenmill.sensors.failures import FAILURES, record_run_failures
from tokenmill.sensors.landing import landing_zone

from testkit.datasets import built_stages, key, recipe_lake, stale_status, variant
from tokenmill.cli.runner import IMPLICIT_JOB
from tokenmill.crawl.units import discover, register_new_files, registered_units, unit_files
from tokenmill.dedup.settings import CLUSTERS_FILE
from tokenmill.definitions import build_definitions, lake_resource
from tokenmill.demo.crawl import generate_demo_crawl
from tokenmill.recipes.recipe import DEFAULT_RECIPE as RECIPE_FILE
from tokenmill.recipes.recipe import Recipe
from tokenmill.runtime.parts import RESUME_FIELD
from tokenmill.stages import STAGES, stage_named
from tokenmill.storage.lake import Lake
from tokenmill.storage.layout import LANDING, MARKER, Unit

CRAWL = "CC-MAIN-AUTO-2026-05"
OTHER = "CC-MAIN-AUTO-2026-06"
PER_UNIT = [
    "raw_crawl",
    "extracted",
    "cleaned",
    "dedup_signatures",
    "deduplicated",
    "tokenized_shards",
]


def land(lake: Lake, names: list[str], crawl: str = CRAWL, data: bytes = b"") -> None:
    for name in names:
        lake.write_bytes(f"{LANDING}/{crawl}/{name}", data)


def keys(crawl: str, *names: str) -> list[str]:
    return [Unit(crawl, name).key for name in names]


def tick(
    lake: Lake,
    instance: DagsterInstance,
    cursor: str | None,
    max_keys: int = 10_000,
    files_per_unit: int = 2,
):
    context = build_sensor_context(
        instance=instance,
        cursor=cursor,
        resources={
            "lake": LakeResource(url=lake.url),
            "discovery": DiscoveryResource(
                files_per_unit=files_per_unit, max_keys_per_tick=max_keys
            ),
        },
    )
    result = landing_zone(context)
    if isinstance(result, SkipReason):
        return [], [], context.cursor
    assert isinstance(result, SensorResult)
    assert result.run_requests == []  # the first stage's automation launches new units
    for event in result.asset_events:  # the daemon stores them before the partitions
        instance.report_runless_asset_event(event)
    partitions = result.dynamic_partitions_requests
    new_units = [
        key for p in partitions if p.partitions_def_name == "units" for key in p.partition_keys
    ]
    return new_units, partitions, result.cursor


def test_new_files_become_partitions_once(lake):
    instance = DagsterInstance.ephemeral()
    land(lake, [f"f-{i:03d}.warc.gz" for i in range(5)] + ["README.txt"])
    units, partitions, cursor = tick(lake, instance, None)
    assert units == keys(CRAWL, "00000", "00001", "00002")
    assert [(p.partitions_def_name, list(p.partition_keys)) for p in partitions] == [
        ("crawls", [CRAWL]),
        ("units", keys(CRAWL, "00000", "00001", "00002")),
    ]
    assert unit_files(lake, Unit(CRAWL, "00002")) == [f"{LANDING}/{CRAWL}/f-004.warc.gz"]

    # An unchanged listing reports nothing; new files are reported once, in a new unit.
    assert tick(lake, instance, cursor)[0] == []
    land(lake, ["f-005.warc.gz", "f-006.warc.gz"])
    units, _, cursor = tick(lake, instance, cursor)
    assert units == [f"{CRAWL}/00003"]
    assert tick(lake, instance, cursor)[0] == []


def test_a_tick_lists_a_bounded_number_of_keys_and_the_next_goes_on(lake):
    names = [f"f-{i:05d}.warc.gz" for i in range(3_000)]
    land(lake, names)
    instance = DagsterInstance.ephemeral()
    cursor, units_per_tick = None, []
    while True:
        units, _, cursor = tick(lake, instance, cursor, max_keys=1_000)
        if not units:
            break
        units_per_tick.append(len(units))
    assert units_per_tick == [500, 500, 500]
    registered = [f for u in registered_units(lake, CRAWL) for f in unit_files(lake, u)]
    assert registered == [f"{LANDING}/{CRAWL}/{n}" for n in names]  # each file exactly once


def unit_list_observations(instance: DagsterInstance) -> list[tuple[str, str]]:
    records = instance.fetch_observations(crawl_units.key, limit=100).records
    return [(r.partition_key, r.asset_observation.data_version) for r in reversed(records)]


def test_a_tick_observes_the_unit_list_of_each_crawl_with_new_units(lake):
    instance = DagsterInstance.ephemeral()
    land(lake, [f"f-{i}.warc.gz" for i in range(4)])
    land(lake, ["g-0.warc.gz", "g-1.warc.gz"], crawl=OTHER)
    _, _, cursor = tick(lake, instance, None)

    def version(crawl: str) -> str:
        return unit_list_version(registered_units(lake, crawl))

    assert unit_list_observations(instance) == [(CRAWL, version(CRAWL)), (OTHER, version(OTHER))]
    # A tick repeated from the old cursor (the last one died before saving it) observes nothing.
    tick(lake, instance, None)
    assert len(unit_list_observations(instance)) == 2
    land(lake, ["f-4.warc.gz", "f-5.warc.gz"])
    tick(lake, instance, cursor)
    observed = unit_list_observations(instance)
    assert observed[2:] == [(CRAWL, version(CRAWL))] and version(CRAWL) != observed[0][1]


def test_a_crashed_tick_repeated_from_its_old_cursor_registers_nothing_twice(lake):
    land(lake, [f"f-{i}.warc.gz" for i in range(4)])
    first, positions, _ = discover(lake, {}, files_per_unit=2, max_keys=100)
    # The sensor died before its cursor was saved: the next tick starts from the old one.
    again, _, _ = discover(lake, {}, files_per_unit=2, max_keys=100)
    assert again == [] or again == first
    assert len(registered_units(lake, CRAWL)) == 2
    land(lake, ["f-4.warc.gz", "f-5.warc.gz"])
    new, _, _ = discover(lake, positions, files_per_unit=2, max_keys=100)
    assert [u.name for u in new] == ["00002"]


def test_units_registered_by_the_cli_meanwhile_are_not_overwritten(lake):
    land(lake, ["a.warc.gz", "b.warc.gz"])
    _, positions, _ = discover(lake, {}, files_per_unit=2, max_keys=100)
    land(lake, ["c.warc.gz", "d.warc.gz", "e.warc.gz", "f.warc.gz"])
    register_new_files(lake, CRAWL, files_per_unit=4, verify=False)  # unit 00001 = c..f
    new, positions, _ = discover(lake, positions, files_per_unit=2, max_keys=100)
    assert new == []
    assert len(unit_files(lake, Unit(CRAWL, "00001"))) == 4
    land(lake, ["g.warc.gz", "h.warc.gz"])
    new, _, _ = discover(lake, positions, files_per_unit=2, max_keys=100)
    assert [(u.name, unit_files(lake, u)) for u in new] == [
        ("00002", [f"{LANDING}/{CRAWL}/g.warc.gz", f"{LANDING}/{CRAWL}/h.warc.gz"])
    ]


def definitions(lake: Lake, recipe: Recipe | None = None):
    return build_definitions(
        LakeResource(url=lake.url),
        workers=WorkersResource(processes=1),
        recipes=[recipe] if recipe else None,
    )


def execute_requested(defs, instance: DagsterInstance, result) -> dict[str, set[str]]:
    """Launch what the automation conditions requested, as the daemon would: one run per
    automation sensor and partition, of the assets that sensor requested (a stage's job for one;
    Dagster's asset job for a stage with the stage it feeds); returns the partitions run per
    asset."""
    graph = defs.resolve_asset_graph()
    sensor_of = {
        asset: sensor.name
        for sensor in defs.get_repository_def().sensor_defs
        if isinstance(sensor, AutomationConditionSensorDefinition)
        for asset in sensor.asset_selection.resolve(graph)
    }
    order = {asset: index for index, asset in enumerate(graph.toposorted_asset_keys)}
    runs: dict[tuple, list[AssetKey]] = {}
    for node in order:
        for partition in result.get_requested_partitions(node):
            runs.setdefault((sensor_of[node], partition), []).append(node)
    launched: dict[str, set[str]] = {}
    for (_, partition), nodes in sorted(runs.items(), key=lambda r: (order[r[1][0]], str(r[0][1]))):
        job = IMPLICIT_JOB if len(nodes) > 1 else job_name(nodes[0].path[-1])
        outcome = defs.resolve_job_def(job).execute_in_process(
            instance=instance, partition_key=partition, asset_selection=nodes
        )
        assert outcome.success
        for node in nodes:
            # the stage's name; another recipe's asset by its key
            name = (
                node.path[-1]
                if node.path[0] in ("fineweb_en", node.path[-1])
                else node.to_user_string()
            )
            launched.setdefault(name, set()).add(partition)
    return launched


class Automation:
    """The automation sensor's ticks and the crawl-signatures sensor's, evaluated in the test;
    their cursors carry over, as the daemon's do, so each sees what changed since its last
    tick."""

    def __init__(self, defs, instance: DagsterInstance):
        self.defs, self.instance = defs, instance
        self.cursor, self.signatures_cursor = None, None
        self.first = self.evaluate()

    def evaluate(self):
        result = evaluate_automation_conditions(
            defs=self.defs, instance=self.instance, cursor=self.cursor
        )
        self.cursor = result.cursor
        return result

    def signatures_tick(self) -> list[str]:
        """The crawl_signatures_complete sensor's tick; returns the crawls it observed."""
        context = build_sensor_context(instance=self.instance, cursor=self.signatures_cursor)
        result = self.defs.resolve_sensor_def("crawl_signatures_complete")(context)
        if isinstance(result, SkipReason):
            return []
        self.signatures_cursor = result.cursor
        for event in result.asset_events:
            self.instance.report_runless_asset_event(event)
        return [event.partition for event in result.asset_events]

    def settle(self, max_rounds: int = 16, after_round=None) -> dict[str, set[str]]:
        """Ticks until nothing is requested; returns the partitions run per asset."""
        launched: dict[str, set[str]] = {}
        for _ in range(max_rounds):
            observed = self.signatures_tick()
            result = self.evaluate()
            if result.total_requested == 0 and not observed:
                return launched
            ran = execute_requested(self.defs, self.instance, result)
            for name, partitions in ran.items():
                launched.setdefault(name, set()).update(partitions)
            if after_round:
                after_round(ran)
        raise AssertionError("automation did not settle")


def materialized(instance: DagsterInstance, asset: str) -> set[str]:
    return set(instance.get_materialized_partitions(key(asset)))


def observed(instance: DagsterInstance, asset: str) -> set[str]:
    records = instance.fetch_observations(key(asset), limit=1000).records
    return {r.partition_key for r in records}


def demo_files(tmp_path: Path, crawl: str, files: int, seed: int = 0) -> list[Path]:
    warcs = tmp_path / f"warcs-{crawl}"
    generate_demo_crawl(
        warcs, tmp_path / f"truth-{crawl}.json", crawl=crawl, files=files, pages_per_file=20,
        seed=seed,
    )  # fmt: skip
    return sorted(warcs.iterdir())


def land_files(lake: Lake, crawl: str, paths: list[Path], names: list[str] | None = None) -> None:
    for path, name in zip(paths, names or [p.name for p in paths], strict=True):
        lake.put_file(f"{LANDING}/{crawl}/{name}", path)


class Landing:
    """The landing sensor's ticks, with what the daemon does with their results: add the
    partitions (the first stage's automation then launches them)."""

    def __init__(self, defs, lake: Lake, instance: DagsterInstance, files_per_unit: int):
        self.defs, self.lake, self.instance = defs, lake, instance
        self.files_per_unit, self.cursor = files_per_unit, None

    def tick(self) -> list[str]:
        units, partitions, self.cursor = tick(
            self.lake, self.instance, self.cursor, files_per_unit=self.files_per_unit
        )
        for request in partitions:
            self.instance.add_dynamic_partitions(
                request.partitions_def_name, request.partition_keys
            )
        return units


def test_each_per_unit_asset_has_exactly_the_registered_units(tmp_path, lake):
    """No phantom partitions: two crawls of 3 and 1 units are 4 partitions of every per-unit
    asset, and the automation requests runs for exactly those."""
    land(lake, [f"f-{i}.warc.gz" for i in range(6)])
    land(lake, ["g-0.warc.gz", "g-1.warc.gz"], crawl=OTHER)
    defs = definitions(lake)
    instance = DagsterInstance.ephemeral()
    automation = Automation(defs, instance)
    _, partitions, _ = tick(lake, instance, None)
    for request in partitions:
        instance.add_dynamic_partitions(request.partitions_def_name, request.partition_keys)

    units = keys(CRAWL, "00000", "00001", "00002") + keys(OTHER, "00000")
    for name in PER_UNIT:
        partitions_def = defs.resolve_assets_def(key(name)).partitions_def
        assert sorted(partitions_def.get_partition_keys(dynamic_partitions_store=instance)) == (
            sorted(units)
        ), name
    crawls = defs.resolve_assets_def(key("dedup_clusters")).partitions_def
    assert sorted(crawls.get_partition_keys(dynamic_partitions_store=instance)) == [CRAWL, OTHER]

    # The first stage's on_missing condition (what launches units registered outside the
    # sensor) requests exactly the registered units, and the eager stages that can run with it
    # the same units; nothing per crawl before the crawl_signatures_complete sensor says so.
    result = automation.evaluate()
    requested = {
        asset.path[-1]: result.get_requested_partitions(asset)
        for asset in defs.resolve_asset_graph().toposorted_asset_keys
        if result.get_requested_partitions(asset)
    }
    assert requested["raw_crawl"] == set(units)
    assert set(requested) <= set(PER_UNIT)
    assert all(partitions == set(units) for partitions in requested.values()), requested


@pytest.mark.integration
def test_landed_files_end_up_tokenized_and_only_what_changed_runs_again(tmp_path, lake):
    """Landing → raw_crawl by the sensor → stages follow → crawl_signatures → clusters →
    unit_duplicates → deduplicated → tokenizer → tokenized_shards. A second landing makes only
    its crawl's clusters stale; re-clustering makes only the units whose removals changed
    stale, and only those are deduplicated again."""
    files = demo_files(tmp_path, CRAWL, files=3)
    other_files = demo_files(tmp_path, OTHER, files=1, seed=1)
    land_files(lake, CRAWL, files)
    land_files(lake, OTHER, other_files)
    # The lowest doc id survives: a copy of a landed file under another name (another doc id)
    # takes over some of its clusters, so the removals of that file's unit change.
    defs = definitions(lake, variant({"dedup": {"survivor": "lowest_doc_id"}}, "test"))
    instance = DagsterInstance.ephemeral()
    landing = Landing(defs, lake, instance, files_per_unit=1)

    automation = Automation(defs, instance)
    assert automation.first.total_requested == 0  # nothing to do yet, not even a tokenizer
    first_units = keys(CRAWL, "00000", "00001", "00002") + keys(OTHER, "00000")
    assert sorted(landing.tick()) == sorted(first_units)
    assert automation.signatures_tick() == []  # no unit signed yet
    launched = automation.settle()
    assert launched == {
        "raw_crawl": set(first_units),
        "extracted": set(first_units),
        "scored": set(first_units),
        "score_distribution": {CRAWL, OTHER},
        "cleaned": set(first_units),
        "dedup_signatures": set(first_units),
        "dedup_clusters": {CRAWL, OTHER},
        "deduplicated": set(first_units),
        "tokenizer": {None},
        "tokenized_shards": set(first_units),
    }
    assert observed(instance, "unit_duplicates") == set(first_units)
    for name in PER_UNIT:
        assert materialized(instance, name) == set(first_units), name
    assert {
        stale_status(defs, instance, name, partition)
        for name in PER_UNIT
        for partition in first_units
    } == {StaleStatus.FRESH}
    clusters_key = f"dedup_clusters/{CRAWL}/{CLUSTERS_FILE}"
    outputs = recipe_lake(lake)
    before = pq.read_table(outputs.open_input(clusters_key)).to_pylist()

    # A copy of the first file lands as a new unit of the first crawl.
    land_files(lake, CRAWL, files[:1], [f"{CRAWL}-copy.warc.gz"])
    new_unit = Unit(CRAWL, "00003").key
    assert landing.tick() == [new_unit]
    assert stale_status(defs, instance, "dedup_clusters", CRAWL) == StaleStatus.STALE
    assert stale_status(defs, instance, "dedup_clusters", OTHER) == StaleStatus.FRESH

    checked = []

    def after_round(ran: dict[str, set[str]]) -> None:
        if "dedup_clusters" not in ran:
            return
        after = pq.read_table(outputs.open_input(clusters_key)).to_pylist()
        changed = {
            Unit(CRAWL, row["unit"]).key
            for row in [r for r in before if r not in after] + [r for r in after if r not in before]
        }
        old_units = keys(CRAWL, "00000", "00001", "00002")
        assert {u for u in old_units if u in changed} and {u for u in old_units if u not in changed}
        for unit in old_units:
            status = stale_status(defs, instance, "deduplicated", unit)
            assert status == (StaleStatus.STALE if unit in changed else StaleStatus.FRESH), unit
        assert stale_status(defs, instance, "deduplicated", new_unit) == StaleStatus.MISSING
        assert stale_status(defs, instance, "deduplicated", Unit(OTHER, "00000").key) == (
            StaleStatus.FRESH
        )
        checked.append(changed | {new_unit})

    launched = automation.settle(after_round=after_round)
    assert checked, "the clusters were not recomputed"
    assert launched["raw_crawl"] == {new_unit}
    assert launched["score_distribution"] == {CRAWL}
    assert launched["dedup_clusters"] == {CRAWL}
    assert launched["deduplicated"] == checked[0]
    assert launched["tokenized_shards"] == checked[0]
    assert "tokenizer" not in launched  # built once; retraining it is a deliberate launch
    assert stale_status(defs, instance, "dedup_clusters", CRAWL) == StaleStatus.FRESH
    assert materialized(instance, "tokenized_shards") == set(first_units) | {new_unit}
    assert outputs.exists(f"tokenized_shards/{CRAWL}/00003/_SUCCESS.json")
    assert lake.exists(f"recipes/fineweb_en/tokenized_shards/{CRAWL}/00003/_SUCCESS.json")


def test_a_new_units_first_two_stages_are_made_in_one_run_and_one_pass(tmp_path, lake):
    """The tick that requests a new unit's raw_crawl requests its extracted with it (one sensor
    evaluates both): one run makes the two, extracted's parts in raw_crawl's pass over each
    file; no later tick requests extracted again for raw_crawl's new data."""
    land_files(lake, CRAWL, demo_files(tmp_path, CRAWL, files=2))
    defs = definitions(lake)
    instance = DagsterInstance.ephemeral()
    landing = Landing(defs, lake, instance, files_per_unit=1)
    automation = Automation(defs, instance)
    units = set(landing.tick())
    result = automation.evaluate()
    assert result.get_requested_partitions(key("raw_crawl")) == units
    assert result.get_requested_partitions(key("extracted")) == units
    assert execute_requested(defs, instance, result) == {"raw_crawl": units, "extracted": units}
    runs = instance.get_runs()
    assert len(runs) == len(units)
    assert {frozenset(run.asset_selection) for run in runs} == {
        frozenset({key("raw_crawl"), key("extracted")})
    }
    for unit in units:
        marker = lake.read_json(f"{Unit.from_key(unit).part_prefix('extracted', 0)}/{MARKER}")
        assert "#fed:" in marker[RESUME_FIELD]  # made in raw_crawl's pass
    launched = automation.settle()
    assert launched["cleaned"] == units
    assert "raw_crawl" not in launched and "extracted" not in launched
    assert len(instance.get_runs()) == len(units) + sum(map(len, launched.values()))


def test_clusters_are_not_held_by_a_crawl_whose_unit_list_was_never_observed(lake):
    # An instance whose crawls were registered before crawl_units existed: signed units still
    # get their clusters; the unit list only marks them stale.
    instance = DagsterInstance.ephemeral()
    instance.add_dynamic_partitions("crawls", [CRAWL])
    instance.add_dynamic_partitions("units", keys(CRAWL, "00000"))
    automation = Automation(definitions(lake), instance)
    for asset in ("raw_crawl", "extracted", "cleaned", "dedup_signatures"):
        done = AssetMaterialization(key(asset), partition=f"{CRAWL}/00000")
        instance.report_runless_asset_event(done)
    assert automation.signatures_tick() == [CRAWL]
    requested = automation.evaluate().get_requested_partitions(key("dedup_clusters"))
    assert requested == {CRAWL}


def test_crawl_signatures_are_observed_once_every_unit_of_the_crawl_is_signed(lake):
    instance = DagsterInstance.ephemeral()
    instance.add_dynamic_partitions("crawls", [CRAWL, OTHER])
    instance.add_dynamic_partitions("units", keys(CRAWL, "00000", "00001") + keys(OTHER, "00000"))
    automation = Automation(definitions(lake), instance)

    def sign(unit: str) -> None:
        signed = AssetMaterialization(key("dedup_signatures"), partition=unit)
        instance.report_runless_asset_event(signed)

    sign(f"{CRAWL}/00000")
    assert automation.signatures_tick() == []  # unit 00001 has no signatures yet
    sign(f"{CRAWL}/00001")
    sign(f"{OTHER}/00000")
    assert sorted(automation.signatures_tick()) == [CRAWL, OTHER]
    assert automation.signatures_tick() == []  # nothing new
    sign(f"{CRAWL}/00001")  # a unit signed again: a new version of its crawl only
    assert automation.signatures_tick() == [CRAWL]
    versions = instance.fetch_observations(key("crawl_signatures"), limit=10).records
    assert len({r.asset_observation.data_version for r in versions}) == 3


@pytest.mark.integration
def test_an_idle_instance_requests_nothing_and_a_change_keeping_the_documents_stops_there(
    tmp_path, lake
):
    """`tokenmill run` leaves an instance on which the sensors and the automation, started
    afterwards (as `tokenmill ui` does), find nothing to do; a recipe change that keeps every
    document re-runs its stage and nothing below it."""
    from tokenmill.cli.runner import materialize_all, register

    land_files(lake, CRAWL, demo_files(tmp_path, CRAWL, files=2))
    instance = DagsterInstance.ephemeral()
    units = {u.key for u in register(instance, lake, CRAWL, files_per_unit=1).units}
    materialize_all(instance, lake, workers=1)
    automation = Automation(definitions(lake), instance)
    assert automation.first.total_requested == 0
    assert automation.settle() == {}

    # Every partition of cleaned runs again (its code version changed): the same documents
    # (those Gopher's repetition filter dropped here fail a later filter too), other reasons.
    def cleaned_files(name: str) -> dict[str, bytes]:
        outputs = recipe_lake(lake)
        return {k: outputs.read_bytes(k) for k in outputs.list("cleaned") if k.endswith(name)}

    docs, rejected = cleaned_files("docs.parquet"), cleaned_files("rejected.parquet")
    base = Recipe.load()
    skipping = {
        **base.sections,
        "clean": {**base.sections["clean"], "skip_filters": ["gopher_repetition"]},
    }
    automation.defs = definitions(lake, variant(skipping, "skipping"))
    assert automation.settle() == {"cleaned": units}
    assert cleaned_files("docs.parquet") == docs
    assert cleaned_files("rejected.parquet") != rejected
    assert automation.settle() == {}

    # A second recipe added to the code location: the automation builds its five stages from
    # the extraction there is (its tokenizer is the deployment's, the first recipe's), and
    # nothing of the other recipe or of the extraction.
    lab = Recipe({"clean": {"keep_languages": [], "mask_pii": False}}, "recipes/lab.yaml")
    automation.defs = build_definitions(
        LakeResource(url=lake.url),
        workers=WorkersResource(processes=1),
        recipes=[variant(skipping, "skipping"), lab],
    )
    crawl_wide = {"lab/dedup_clusters": {CRAWL}}
    per_unit = ("cleaned", "dedup_signatures", "deduplicated", "tokenized_shards")
    assert automation.settle() == crawl_wide | {f"lab/{stage}": units for stage in per_unit}
    assert automation.settle() == {}


def cleaned_languages(lake: Lake, unit: Unit) -> set[str]:
    lake = recipe_lake(lake)
    languages = set()
    for name in lake.list(unit.prefix("cleaned")):
        if name.endswith("docs.parquet"):
            table = pq.read_table(lake.open_input(name), columns=["language"])
            languages |= set(table.column("language").to_pylist())
    return languages


@pytest.mark.integration
def test_the_recipe_sets_every_run_and_its_changes_rerun_only_its_stages(tmp_path, lake):
    files = demo_files(tmp_path, CRAWL, files=2, seed=5)
    truth = json.loads((tmp_path / f"truth-{CRAWL}.json").read_text())
    assert {p["language"] for p in truth["pages"]} >= {"es", "it", "en"}
    land_files(lake, CRAWL, files)
    instance = DagsterInstance.ephemeral()
    # Gopher's quality filter knows English stop words only.
    clean = {"min_language_score": 0.5, "skip_filters": ["gopher_quality"]}
    spanish = variant({"clean": clean | {"keep_languages": ["es"]}}, "spanish")
    defs = definitions(lake, spanish)
    Landing(defs, lake, instance, files_per_unit=2).tick()
    unit = Unit(CRAWL, "00000")
    raw = defs.resolve_job_def(job_name("raw_crawl"))
    assert raw.execute_in_process(instance=instance, partition_key=unit.key).success
    extracted = defs.resolve_job_def(job_name("extracted"))
    assert extracted.execute_in_process(instance=instance, partition_key=unit.key).success
    cleaned = defs.resolve_job_def(job_name("cleaned"))

    # A run without config (as every automated one) cleans by the recipe...
    assert cleaned.execute_in_process(instance=instance, partition_key=unit.key).success
    assert cleaned_languages(lake, unit) == {"es"}
    event = instance.get_latest_materialization_event(key("cleaned"))
    metadata = event.asset_materialization.metadata
    assert metadata["recipe"].value == "spanish" and "recipe_overrides" not in metadata

    # ...and a run's own config overrides it for that run, recorded with its materialization.
    override = {"ops": {"fineweb_en__cleaned": {"config": {"keep_languages": ["en"]}}}}
    result = cleaned.execute_in_process(
        instance=instance, partition_key=unit.key, run_config=override
    )
    assert result.success
    assert cleaned_languages(lake, unit) == {"en"}
    event = instance.get_latest_materialization_event(key("cleaned"))
    assert event.asset_materialization.metadata["recipe_overrides"].value == {
        "keep_languages": ["en"]
    }

    # Changing the recipe's clean section changes the code version of cleaned only (not the
    # extraction: a try of other languages never extracts again)...
    italian = variant({"clean": clean | {"keep_languages": ["it"]}}, "italian")
    new_defs = definitions(lake, italian)
    graphs = defs.resolve_asset_graph(), new_defs.resolve_asset_graph()
    changed = {
        asset.to_user_string()
        for asset in graphs[0].materializable_asset_keys
        if graphs[0].get(asset).code_version != graphs[1].get(asset).code_version
    }
    assert changed == {"fineweb_en/cleaned"}
    # ...and the automation, which ticked under the old recipe, cleans again once the code
    # location loads the new one (the cursor holds the code versions it last saw).
    automation = Automation(defs, instance)
    assert automation.evaluate().get_requested_partitions(key("cleaned")) == set()
    automation.defs = new_defs
    assert automation.evaluate().get_requested_partitions(key("cleaned")) == {unit.key}
    new_cleaned = new_defs.resolve_job_def(job_name("cleaned"))
    assert new_cleaned.execute_in_process(instance=instance, partition_key=unit.key).success
    assert cleaned_languages(lake, unit) == {"it"}


def test_a_stages_output_version_is_in_its_code_version_only():
    """``Stage.version``, bumped when a stage's code changes what it writes, makes that stage's
    partitions stale and no other's (below it, the data versions decide)."""
    import dataclasses

    from tokenmill.data_assets.assets import asset_options

    shared = Dataset(Recipe.load())
    extracted = stage_named("extracted")
    assert extracted.version
    version = asset_options(extracted, shared)["code_version"]
    assert version.endswith(f"-{extracted.version}")
    bumped = dataclasses.replace(extracted, version=f"{extracted.version}.1")
    assert asset_options(bumped, shared)["code_version"] != version
    raw = stage_named("raw_crawl")
    assert not raw.version and not asset_options(raw, shared)["code_version"].endswith("-")


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
    defs = definitions(lake)
    land(lake, ["a.warc.gz"])
    register_new_files(lake, CRAWL, files_per_unit=1, verify=False)
    instance.add_dynamic_partitions("crawls", [CRAWL])
    instance.add_dynamic_partitions("units", keys(CRAWL, "00000"))
    # Deduplicating a unit whose crawl was never clustered fails at once with a clear message.
    job = job_name("deduplicated")
    result = defs.resolve_job_def(job).execute_in_process(
        instance=instance, partition_key=f"{CRAWL}/00000", raise_on_error=False
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
    record_run_failures(context)
    server.shutdown()

    record = lake.read_json(f"{FAILURES}/{result.run_id}.json")
    assert record["job"] == job and record["partition"] == f"{CRAWL}/00000"
    assert record["steps"] == ["fineweb_en__deduplicated"]
    assert any(
        "dedup_clusters" in error and "not materialized" in error for error in record["errors"]
    )
    assert Webhook.received == [record]


def test_reconciliation_registers_files_the_sensor_skipped(lake):
    instance = DagsterInstance.ephemeral()
    defs = build_definitions(
        LakeResource(url=lake.url), discovery=DiscoveryResource(files_per_unit=2)
    )
    land(lake, ["b.warc.gz", "c.warc.gz"])
    _, positions, _ = discover(lake, {}, files_per_unit=2, max_keys=100)
    land(lake, ["a.warc.gz"])  # landed late, sorts before the sensor's position
    assert discover(lake, positions, files_per_unit=2, max_keys=100)[0] == []
    assert defs.resolve_job_def("reconcile_landing").execute_in_process(instance=instance).success
    assert unit_files(lake, Unit(CRAWL, "00001")) == [f"{LANDING}/{CRAWL}/a.warc.gz"]
    assert set(instance.get_dynamic_partitions("units")) == set(keys(CRAWL, "00000", "00001"))
    version = unit_list_version(registered_units(lake, CRAWL))
    assert unit_list_observations(instance) == [(CRAWL, version)]


def test_run_config_cannot_repoint_the_deployments_resources(lake, tmp_path, monkeypatch):
    """Every resource is what the deployment set (here the lake from TOKENMILL_LAKE_URL, read
    when the run starts); a launchpad run config setting any of their fields is rejected before
    the run starts, for op and asset jobs alike."""
    instance = DagsterInstance.ephemeral()
    monkeypatch.setenv("TOKENMILL_LAKE_URL", lake.url)
    defs = build_definitions(lake_resource(), discovery=DiscoveryResource(files_per_unit=2))
    land(lake, ["a.warc.gz"])
    elsewhere = tmp_path / "elsewhere"
    overrides = {
        "lake": {"url": str(elsewhere)},
        "workers": {"memory_limit_mb": None, "processes": 512},
        "discovery": {"files_per_unit": 1},
        "alerts": {"webhook_url": "http://127.0.0.1:9/hook"},
    }
    for name in ("reconcile_landing", "run_raw_crawl", "run_tokenizer"):
        job = defs.resolve_job_def(name)
        for resource, config in overrides.items():
            run_config = {"resources": {resource: {"config": config}}}
            with pytest.raises(DagsterInvalidConfigError, match=f"resources:{resource}:config"):
                job.execute_in_process(run_config=run_config, instance=instance)
    # The lake the fanned-out steps hand each other values through, too.
    clusters = defs.resolve_job_def("run_dedup_clusters")
    assert "step_io" in clusters.resource_defs
    instance.add_dynamic_partitions("crawls", [CRAWL])
    with pytest.raises(DagsterInvalidConfigError, match="resources:step_io:config"):
        clusters.execute_in_process(
            run_config={"resources": {"step_io": {"config": {"lake": {"url": str(elsewhere)}}}}},
            instance=instance,
            partition_key=CRAWL,
        )
    assert not elsewhere.exists()
    job = defs.resolve_job_def("reconcile_landing")
    assert job.execute_in_process(instance=instance).success
    assert unit_files(lake, Unit(CRAWL, "00000")) == [f"{LANDING}/{CRAWL}/a.warc.gz"]


def test_a_sensor_tick_builds_its_resources_with_the_ticks_instance(lake, monkeypatch):
    """Resources initialized without an instance made Dagster build an ephemeral one (an
    in-memory SQLite database and its migrations) for each resource on every tick of the
    landing and failure sensors."""
    instance = DagsterInstance.ephemeral()
    defs = definitions(lake)
    land(lake, ["a.warc.gz"])
    built = []
    ephemeral = DagsterInstance.ephemeral
    monkeypatch.setattr(
        DagsterInstance, "ephemeral", staticmethod(lambda *a, **k: built.append(1) or ephemeral())
    )
    with build_sensor_context(
        instance=instance, resources=defs.get_repository_def().get_top_level_resources()
    ) as context:
        result = defs.resolve_sensor_def("landing_zone")(context)
    assert result.dynamic_partitions_requests  # the tick ran and registered the landed file
    assert built == []
    # the same tick without an instance still runs (Dagster builds one)
    with build_sensor_context(resources=defs.get_repository_def().get_top_level_resources()) as c:
        defs.resolve_sensor_def("landing_zone")(c)
    assert built


def test_every_run_has_a_maximum_runtime(lake):
    """Run monitoring fails a run older than its dagster/max_runtime tag: the stage jobs (and
    the backfills and sensor runs of them), the automation sensors' runs and the hourly
    reconciliation all carry one, from the Stage declaration."""
    instance = DagsterInstance.ephemeral()
    defs = build_definitions(LakeResource(url=lake.url), workers=WorkersResource(processes=1))
    land(lake, ["a.warc.gz"])
    reconcile = defs.resolve_job_def("reconcile_landing").execute_in_process(instance=instance)
    assert reconcile.dagster_run.tags[MAX_RUNTIME_TAG] == "3600"
    (unit,) = instance.get_dynamic_partitions("units")
    raw = defs.resolve_job_def("run_raw_crawl").execute_in_process(
        instance=instance, partition_key=unit
    )
    assert raw.success
    assert raw.dagster_run.tags[MAX_RUNTIME_TAG] == str(stage_named("raw_crawl").max_runtime_s)
    for stage in STAGES:
        tags = defs.resolve_job_def(job_name(stage.name)).tags
        assert tags[MAX_RUNTIME_TAG] == str(stage.max_runtime_s)
    assert run_tags("raw_crawl", "cleaned")[MAX_RUNTIME_TAG] == str(
        stage_named("raw_crawl").max_runtime_s + stage_named("cleaned").max_runtime_s
    )


def test_definitions_wire_the_sensors_and_schedule():
    from tokenmill.definitions import defs

    repository = defs.get_repository_def()
    # the project's settings declare no evaluation set: eval_index has nothing to make
    automatic = [stage for stage in built_stages() if stage.automatic]
    assert {s.name for s in repository.sensor_defs} >= {
        "landing_zone",
        "crawl_signatures_complete",
        "record_run_failures",
        *(f"automation_{stage.name}" for stage in automatic if stage.name != "extracted"),
    }
    names = {s.name for s in repository.sensor_defs}
    assert not names & {"automation_release", "automation_eval_index", "automation_extracted"}
    # Each stage's automation sensor requests its runs with the stage's pod size and queue key;
    # raw_crawl's evaluates extracted too (a new unit's two in one run), with both stages' tags.
    for stage in (s for s in automatic if s.name != "extracted"):
        together = ("raw_crawl", "extracted") if stage.name == "raw_crawl" else (stage.name,)
        sensor = repository.get_sensor_def(f"automation_{stage.name}")
        tags = run_tags(*together)
        assert json.loads(sensor.run_tags[K8S_CONFIG]) == tags[K8S_CONFIG]
        assert sensor.run_tags[STAGE_TAG] == "+".join(together)
        assert sensor.run_tags[MAX_RUNTIME_TAG] == str(
            sum(stage_named(name).max_runtime_s for name in together)
        )
        targets = sensor.asset_selection.resolve(defs.resolve_asset_graph())
        assert {target.path[-1] for target in targets} == set(together)
    assert [s.name for s in repository.schedule_defs] == ["reconcile_landing_schedule"]
    for name in ("cleaned", "dedup_clusters", "deduplicated", "tokenized_shards"):
        assert defs.resolve_assets_def(key(name)).automation_conditions_by_key[key(name)]
    # The bridges across the unit/crawl boundary are external: nothing materializes them.
    graph = defs.resolve_asset_graph()
    assert {asset.to_user_string() for asset in graph.external_asset_keys} >= {
        "crawl_units",
        "fineweb_en/crawl_signatures",
        "fineweb_en/unit_duplicates",
    }


def test_a_crawl_stage_between_unit_stages_needs_only_its_declaration(monkeypatch, lake):
    """A new crawl-scope stage (say, a classifier's score percentiles over a crawl) between
    per-unit stages: its bridges, dependencies and automation follow from its CrawlBoundary."""
    from tokenmill.data_assets.assets import dependencies, stage_asset
    from tokenmill.data_assets.conditions import automation_condition
    from tokenmill.data_assets.datasets import Dataset
    from tokenmill.data_assets.partitions import gathered, reported_by

    import tokenmill.stages
    from tokenmill.runtime.stage import CrawlBoundary, Pod, Scope, Stage

    def declared(name: str, scope: Scope, *upstream: str, **more) -> Stage:
        pod = Pod("1", "1Gi", "1", "1Gi")
        return Stage(name, scope, lambda work: None, name, "quality", pod, upstream, **more)

    boundary = CrawlBoundary(gathered="crawl_quality", reported="unit_percentiles")
    percentiles = declared("quality_percentiles", Scope.CRAWL, "cleaned", boundary=boundary)
    top = declared("top_quality", Scope.UNIT, "cleaned", "quality_percentiles")
    monkeypatch.setattr(tokenmill.stages, "STAGES", (*STAGES, percentiles, top))

    lab = Dataset(variant({}, "lab"), "lab")
    assert dependencies(percentiles, lab) == [AssetKey(["lab", "crawl_quality"]), crawl_units.key]
    assert dependencies(top, lab) == [AssetKey(["lab", n]) for n in ("cleaned", "unit_percentiles")]
    scores, shares = gathered(percentiles, lab), reported_by(percentiles, lab)
    assert scores.partitions_def.name == "crawls" and [d.asset_key for d in scores.deps] == [
        AssetKey(["lab", "cleaned"])
    ]
    assert shares.partitions_def.name == "units" and [d.asset_key for d in shares.deps] == [
        AssetKey(["lab", "quality_percentiles"])
    ]
    assert stage_asset(percentiles, lab).asset_deps[AssetKey(["lab", "quality_percentiles"])] == {
        AssetKey(["lab", "crawl_quality"]),
        crawl_units.key,
    }
    assert stage_asset(top, lab).asset_deps[AssetKey(["lab", "top_quality"])] == {
        AssetKey(["lab", "cleaned"]),
        AssetKey(["lab", "unit_percentiles"]),
    }
    # its output is the recipe's own, as every recipe stage's
    assert lab.lake(lake).stored_key("top_quality/x") == "recipes/lab/top_quality/x"
    # the unit list marks the crawl stage stale; only its gathered inputs trigger it
    ignoring = automation_condition(top).ignore(AssetSelection.assets(crawl_units.key))
    assert automation_condition(percentiles) == ignoring != automation_condition(top)


def test_a_stage_added_to_a_deployment_builds_the_units_already_there(lake):
    # As when `extracted` arrived: a unit's input is materialized before the automation first
    # evaluates the new stage; it is requested once, and not again.
    instance = DagsterInstance.ephemeral()
    instance.add_dynamic_partitions("units", keys(CRAWL, "00000", "00001"))
    instance.add_dynamic_partitions("crawls", [CRAWL])
    done = f"{CRAWL}/00000"
    instance.report_runless_asset_event(AssetMaterialization("raw_crawl", partition=done))
    automation = Automation(definitions(lake), instance)
    # a unit registered before the first evaluation is not newly missing then: launched anyway
    other = f"{CRAWL}/00001"
    assert automation.first.get_requested_partitions(AssetKey("raw_crawl")) == {other}
    # (extracted of that unit too, here, where one evaluation holds every stage and counts
    # raw_crawl's request; deployed, extracted's own sensor waits for raw_crawl's run)
    assert automation.first.get_requested_partitions(AssetKey("extracted")) == {done, other}
    assert automation.evaluate().total_requested == 0


@pytest.mark.integration
def test_tokenmill_run_runs_only_what_is_missing_or_stale(tmp_path, lake, monkeypatch):
    from tokenmill.cli.runner import materialize_all, register

    recipes = tmp_path / "recipes"
    recipes.mkdir()
    (recipes / "fineweb_en.yaml").write_text(RECIPE_FILE.read_text())
    monkeypatch.setenv("TOKENMILL_RECIPES", str(recipes))
    land_files(lake, CRAWL, demo_files(tmp_path, CRAWL, files=2))
    instance = DagsterInstance.ephemeral()
    units = {u.key for u in register(instance, lake, CRAWL, files_per_unit=1).units}
    automation = Automation(definitions(lake), instance)  # a daemon's, beside the command
    first = materialize_all(instance, lake, workers=1)
    # the daemon finds nothing to make: extracted, made in raw_crawl's run, does not follow it
    assert automation.evaluate().total_requested == 0
    # a new unit's files are read once: raw_crawl and extracted in one run, one pass
    together = [run for run in first if run.assets == ("raw_crawl", "extracted")]
    assert {run.partition for run in together} == units
    assert not [run for run in first if run.job in ("run_raw_crawl", "run_extracted")]
    for unit in units:
        marker = lake.read_json(f"{Unit.from_key(unit).part_prefix('extracted', 0)}/{MARKER}")
        assert "#fed:" in marker[RESUME_FIELD]  # made in raw_crawl's pass
    assert materialize_all(instance, lake, workers=1) == []  # nothing changed: nothing runs
    # Forced, the two stages again in one pass each unit: extracted is not made twice.
    forced = materialize_all(
        instance, lake, workers=1, force=True, stages=["raw_crawl", "extracted"]
    )
    assert sorted(run.assets for run in forced) == [("raw_crawl", "extracted")] * len(units)
    # A threshold change that keeps every document: cleaned again, nothing below it.
    (recipes / "fineweb_en.yaml").write_text("clean:\n  skip_filters: [gopher_repetition]\n")
    again = materialize_all(instance, lake, workers=1)
    assert {(run.job, run.partition) for run in again} == {("run_cleaned", u) for u in units}
    assert {run.assets for run in again} == {("fineweb_en/cleaned",)}

    # A second recipe beside it: its own stages run, from the shared extraction, and nothing
    # of the first recipe or of the extraction.
    project = recipe_lake(lake)
    words = sorted(len(text.split()) for text in docs_of(project, "cleaned", units).values())
    (recipes / "strict.yaml").write_text(STRICT.format(min_words=words[len(words) // 2]))
    added = materialize_all(instance, lake, workers=1)
    assert {run.job for run in added} == {
        f"run_{stage}" for stage in ("cleaned", "dedup_signatures", "dedup_clusters")
    } | {f"run_{stage}" for stage in ("deduplicated", "tokenizer", "tokenized_shards", "release")}
    assert {asset for run in added for asset in run.assets} == {
        f"strict/{stage.name}" for stage in STAGES if not stage.shared
    }
    assert materialize_all(instance, lake, workers=1) == []
    strict = Dataset(Recipe.load(recipes / "strict.yaml"), "strict").lake(lake)
    assert set() < cleaned_doc_ids(strict, units) < cleaned_doc_ids(project, units)

    # ...and it keeps exactly what a lake holding only that recipe keeps.
    alone = Lake.from_url(str(tmp_path / "alone"))
    land_files(alone, CRAWL, demo_files(tmp_path, CRAWL, files=2))
    (recipes / "fineweb_en.yaml").unlink()
    fresh = DagsterInstance.ephemeral()
    register(fresh, alone, CRAWL, files_per_unit=1)
    materialize_all(fresh, alone, workers=1)
    only = Dataset(Recipe.load(recipes / "strict.yaml"), "strict").lake(alone)
    for stage in ("cleaned", "deduplicated"):
        assert docs_of(only, stage, units) == docs_of(strict, stage, units), stage


STRICT = """clean:
  keep_languages: [en]
  min_language_score: 0.8
  gopher_quality:
    min_doc_words: {min_words}
dedup:
  ngram: 5
  bands: 14
  rows: 8
tokenizer:
  vocab_size: 4096
"""


def docs_of(lake: Lake, stage: str, units: set[str]) -> dict[str, str]:
    docs = {}
    for unit in sorted(units):
        for name in lake.list(Unit.from_key(unit).prefix(stage)):
            if name.endswith("/docs.parquet"):
                table = pq.read_table(lake.open_input(name), columns=["doc_id", "text"])
                docs |= dict(zip(*table.to_pydict().values(), strict=True))
    return docs


def cleaned_doc_ids(lake: Lake, units: set[str]) -> set[str]:
    return set(docs_of(lake, "cleaned", units))


def test_an_idle_automation_tick_does_not_read_the_unit_list(lake, monkeypatch):
    # Dagster compresses every subset it writes into the cursor by reading all partition keys,
    # empty ones too: at 90,000 units that would be nearly all of an idle tick (see
    # tokenmill/dagster_internals.py), as would reading every unit to find the first stage's
    # new ones. An idle tick reads none.
    instance = DagsterInstance.ephemeral()
    defs = definitions(lake)
    assert defs.resolve_sensor_def("automation_cleaned")._use_user_code_server  # noqa: SLF001
    automation = Automation(defs, instance)
    instance.add_dynamic_partitions("crawls", [CRAWL])
    instance.add_dynamic_partitions("units", keys(CRAWL, "00000", "00001", "00002"))
    reads = []
    listing = instance.get_dynamic_partitions

    def counted(partitions_def_name: str) -> list[str]:
        reads.append(partitions_def_name)
        return listing(partitions_def_name)

    monkeypatch.setattr(instance, "get_dynamic_partitions", counted)
    requested = automation.evaluate().get_requested_partitions(AssetKey("raw_crawl"))
    assert requested == set(keys(CRAWL, "00000", "00001", "00002"))
    assert "units" in reads  # the first tick computes what is missing
    # the next tick forgets what the first requested (extracted's `since_last_handled`)
    assert automation.evaluate().total_requested == 0
    reads.clear()
    assert automation.evaluate().total_requested == 0
    assert "units" not in reads, reads  # 89 reads when every subset written read them


def sensor_tick(defs, instance: DagsterInstance, name: str, cursor: str | None):
    """One tick of an automation sensor as the code server runs it (cursor serialized)."""
    context = build_sensor_context(
        instance=instance, cursor=cursor, repository_def=defs.get_repository_def()
    )
    return defs.resolve_sensor_def(name).evaluate_tick(context)


def requested_units(result) -> set[str]:
    """The partitions a tick requested: runs of one partition, or backfills of several."""
    units = set()
    for run in result.run_requests:
        if run.asset_graph_subset is not None:
            for subset in run.asset_graph_subset.partitions_subsets_by_asset_key.values():
                units.update(subset.get_partition_keys())
        else:
            units.add(run.partition_key)
    return units


def test_an_idle_ticks_cursor_does_not_grow_with_the_corpus(lake):
    # Every node of a condition writes its subsets into the cursor each tick; a node keeping
    # the asset's missing partitions (Dagster's newly_missing) wrote 2 MB per asset and tick
    # at 90,000 units. Idle, the cursor holds no per-unit state.
    defs = definitions(lake)
    instance = DagsterInstance.ephemeral()
    instance.add_dynamic_partitions("crawls", [CRAWL, OTHER])
    names = ["automation_raw_crawl", "automation_scored", "automation_cleaned"]
    sizes = {}
    for units in (10, 3_000):
        crawl = CRAWL if units == 10 else OTHER
        instance.add_dynamic_partitions("units", keys(crawl, *(f"{i:05d}" for i in range(units))))
        for name in names:
            cursor = None
            for _ in range(3):
                result = sensor_tick(defs, instance, name, cursor)
                cursor = result.cursor
            assert not result.run_requests
            sizes[name, units] = len(cursor)
    for name in names:
        assert sizes[name, 3_000] < sizes[name, 10] + 200, sizes


def test_units_registered_between_ticks_are_launched_once(lake):
    defs = definitions(lake)
    instance = DagsterInstance.ephemeral()
    instance.add_dynamic_partitions("crawls", [CRAWL])
    instance.add_dynamic_partitions("units", keys(CRAWL, "00000"))
    first = sensor_tick(defs, instance, "automation_raw_crawl", None)
    assert requested_units(first) == set(keys(CRAWL, "00000"))
    idle = sensor_tick(defs, instance, "automation_raw_crawl", first.cursor)
    assert not idle.run_requests
    instance.add_dynamic_partitions("units", keys(CRAWL, "00001", "00002"))
    new = sensor_tick(defs, instance, "automation_raw_crawl", idle.cursor)
    assert requested_units(new) == set(keys(CRAWL, "00001", "00002"))
    assert not sensor_tick(defs, instance, "automation_raw_crawl", new.cursor).run_requests


def test_a_unit_registered_during_the_first_tick_is_launched_once(lake, monkeypatch):
    # The landing sensor registers a unit while the automation's first tick runs (sensors tick
    # in parallel threads): after that tick read its cursor, before it computed what is missing.
    from tokenmill.data_assets import conditions

    defs = definitions(lake)
    instance = DagsterInstance.ephemeral()
    instance.add_dynamic_partitions("crawls", [CRAWL])
    read_cursor = conditions.added_since

    def registering_meanwhile(store, name, cursor):
        found = read_cursor(store, name, cursor)
        if cursor is None:
            instance.add_dynamic_partitions("units", keys(CRAWL, "00000"))
        return found

    monkeypatch.setattr(conditions, "added_since", registering_meanwhile)
    first = sensor_tick(defs, instance, "automation_raw_crawl", None)
    monkeypatch.setattr(conditions, "added_since", read_cursor)
    assert requested_units(first) == set(keys(CRAWL, "00000"))
    (request,) = first.run_requests
    instance.create_run_for_job(
        defs.resolve_implicit_global_asset_job_def(),
        asset_selection=frozenset(request.asset_selection),
        tags=request.tags,
        status=DagsterRunStatus.STARTED,
    )
    # the next tick sees the unit as added since the cursor, and its run in progress
    assert not sensor_tick(defs, instance, "automation_raw_crawl", first.cursor).run_requests


@pytest.mark.parametrize(
    ("keys_now", "cursor", "first"),
    [
        (["a", "b", "c"], "0:", 0),
        (["a", "b", "c"], "2:b", 2),
        (["a", "b", "c"], "3:c", 3),
        (["b", "c", "d"], "2:c", 2),  # "a" deleted: the new ones follow the last key seen
        (["x", "y"], "2:c", 2),  # the last key seen deleted: none taken for new
    ],
)
def test_a_cursor_of_an_earlier_version_finds_the_new_partitions(keys_now, cursor, first):
    from tokenmill.data_assets.conditions import first_added

    assert first_added(keys_now, cursor) == first


def test_new_partitions_are_read_after_the_last_storage_id_seen(monkeypatch):
    from tokenmill.data_assets import conditions

    monkeypatch.setattr(conditions, "PAGE_KEYS", 2)  # several pages
    instance = DagsterInstance.ephemeral()
    added_since = functools.partial(conditions.added_since, instance, "units")
    instance.add_dynamic_partitions("units", ["a", "b"])
    assert added_since(None)[0] == []  # none new on the first evaluation
    _, first = added_since(None)
    instance.add_dynamic_partitions("units", ["c", "d", "e", "f", "g"])
    added, after = added_since(first)
    assert added == ["c", "d", "e", "f", "g"]
    assert added_since(after) == ([], after)
    instance.delete_dynamic_partition("units", "c")
    instance.add_dynamic_partitions("units", ["h"])
    assert added_since(after)[0] == ["h"]
    # an earlier version's cursor (two keys seen, the last "b"): what followed, then by id
    added, upgraded = added_since("2:b")
    assert added == ["d", "e", "f", "g", "h"]
    assert added_since(upgraded) == ([], upgraded)
    # nothing registered yet: every key added later is new
    empty = DagsterInstance.ephemeral()
    _, start = conditions.added_since(empty, "units", None)
    empty.add_dynamic_partitions("units", ["x"])
    assert conditions.added_since(empty, "units", start)[0] == ["x"]
