"""What the Dagster UI opens on: no welcome dialog over it, the stages' groups in pipeline order
with the shared ones first, and on an asset's overview the row count of all its partitions."""

from __future__ import annotations

import shutil
from pathlib import Path

import yaml
from dagster import AssetKey, DagsterInstance, materialize
from tokenmill.data_assets.groups import group_name, stage_groups
from tokenmill.resources.lake import LakeResource
from tokenmill.resources.workers import WorkersResource

from testkit.datasets import label
from tokenmill.cli.demo import land_demo_crawl
from tokenmill.cli.runner import register
from tokenmill.definitions import build_definitions
from tokenmill.storage.lake import Lake
from tokenmill.storage.layout import MARKER, RAW_CRAWL
from tokenmill.storage.rollups import Rollup, Totals

PROJECT_DIR = Path(__file__).resolve().parents[1]


def test_the_instance_shows_no_welcome_dialog(tmp_path, monkeypatch):
    assert yaml.safe_load((PROJECT_DIR / "dagster.yaml").read_text())["nux"] == {"enabled": False}
    home = tmp_path / "dagster_home"
    home.mkdir()
    shutil.copy(PROJECT_DIR / "dagster.yaml", home / "dagster.yaml")
    monkeypatch.setenv("DAGSTER_HOME", str(home))
    with DagsterInstance.get() as instance:
        assert not instance.is_ephemeral
        assert instance.nux_enabled is False
    # the setting is what turns it off: the same instance without it shows the dialog
    (home / "dagster.yaml").write_text("telemetry:\n  enabled: false\n")
    with DagsterInstance.get() as instance:
        assert instance.nux_enabled is True


def test_groups_follow_the_pipeline_shared_stages_first():
    defs = build_definitions(LakeResource(url="/nonexistent-lake"))
    groups: dict[str, set[str]] = {}
    for spec in defs.resolve_all_asset_specs():
        groups.setdefault(spec.group_name, set()).add(spec.key.to_user_string())
    assert stage_groups() == ["ingest", "extract", "clean", "dedup", "tokenize", "release"]
    assert groups["1_ingest"] == {"raw_crawl", "crawl_units"}
    assert {"extracted", "scored", "score_distribution"} <= groups["2_extract"]
    assert groups[f"fineweb_en/{group_name('clean')}"] == {label("cleaned")}
    assert group_name("analysis", "lab") == "lab/7_analysis"  # a stage outside the list
    assert {label("dedup_signatures"), label("deduplicated")} <= groups["fineweb_en/4_dedup"]
    assert groups["fineweb_en/6_release"] == {label("release"), label("release_inputs")}
    # The UI sorts groups by name: the shared stages' come first, then each recipe's in order.
    order = sorted(groups)
    assert order[:2] == ["1_ingest", "2_extract"]
    assert order[2:] == [f"fineweb_en/{n}_{g}" for n, g in enumerate(stage_groups()[2:], 3)]


def test_row_count_is_over_every_partition_and_counts_a_rerun_once(tmp_path, monkeypatch):
    """`dagster/row_count`, which the asset's overview shows, is the asset's rows over every
    unit of every crawl; each unit's own is `dagster/partition_row_count`."""
    home = tmp_path / "dagster_home"
    home.mkdir()
    shutil.copy(PROJECT_DIR / "dagster.yaml", home / "dagster.yaml")
    monkeypatch.setenv("DAGSTER_HOME", str(home))
    lake = Lake.from_url(str(tmp_path / "lake"))
    workers = WorkersResource(processes=1, memory_limit_mb=None)  # in this process
    defs = build_definitions(LakeResource(url=lake.url), workers=workers)
    raw_crawl = defs.resolve_assets_def(AssetKey(RAW_CRAWL))
    with DagsterInstance.get() as instance:
        units = []
        for seed, (crawl, files) in enumerate({"CC-MAIN-A": 4, "CC-MAIN-B": 2}.items()):
            land_demo_crawl(lake, crawl, files, pages_per_file=10, seed=seed)
            units += register(instance, lake, crawl, files_per_unit=2).units
        assert [u.crawl for u in units] == ["CC-MAIN-A", "CC-MAIN-A", "CC-MAIN-B"]

        def run(unit) -> dict:
            assert materialize([raw_crawl], partition_key=unit.key, instance=instance).success
            event = instance.get_latest_materialization_event(AssetKey(RAW_CRAWL))
            assert event.dagster_event.partition == unit.key
            metadata = event.asset_materialization.metadata
            return {name: entry.value for name, entry in metadata.items()}

        # two units of a crawl, the first again, then the other crawl's unit
        first, second, again, other = (run(units[i]) for i in (0, 1, 0, 2))

    markers = [lake.read_json(f"{u.prefix(RAW_CRAWL)}/{MARKER}") for u in units]
    rows, sizes = [m["records_out"] for m in markers], [m["bytes_out"] for m in markers]
    assert all(rows) and len(set(rows)) > 1
    assert first["dagster/partition_row_count"] == first["dagster/row_count"] == rows[0]
    assert second["dagster/partition_row_count"] == rows[1]
    crawl_a = {
        "dagster/row_count": rows[0] + rows[1],
        "dagster/size_bytes": sizes[0] + sizes[1],
        "units_counted": 2,
        "crawl_records_out": rows[0] + rows[1],
        "crawl_bytes_out": sizes[0] + sizes[1],
        "crawl_units_counted": 2,
    }
    assert {name: second[name] for name in crawl_a} == crawl_a
    # running a unit again counts it once
    assert again["dagster/partition_row_count"] == rows[0]
    assert {name: again[name] for name in crawl_a} == crawl_a
    assert other["crawl_records_out"] == other["dagster/partition_row_count"] == rows[2]
    assert other["crawl_units_counted"] == 1
    assert other["dagster/row_count"] == sum(rows)
    assert other["dagster/size_bytes"] == sum(sizes)
    assert other["units_counted"] == 3
    assert Rollup(lake, RAW_CRAWL).every_crawl() == Totals(sum(rows), sum(sizes), 0, 3)
