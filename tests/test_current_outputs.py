"""A step whose partition is current keeps the committed output: nothing is rewritten, so a run
reading the partition meanwhile never finds it missing. Anything that makes the output differ,
or a missing file, or `--force` (the recompute tag), writes it again."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from dagster import AssetKey, DagsterInstance, materialize
from tokenmill.data_assets.current import KEPT, RECOMPUTE_TAG
from tokenmill.resources.lake import LakeResource
from tokenmill.resources.workers import WorkersResource

from tokenmill.cli.demo import land_demo_crawl
from tokenmill.cli.runner import register
from tokenmill.definitions import build_definitions
from tokenmill.storage.lake import Lake
from tokenmill.storage.layout import MARKER, RAW_CRAWL

pytestmark = pytest.mark.integration

PROJECT_DIR = Path(__file__).resolve().parents[1]
EXTRACTED = "extracted"


@pytest.fixture
def built(tmp_path, monkeypatch):
    home = tmp_path / "dagster_home"
    home.mkdir()
    shutil.copy(PROJECT_DIR / "dagster.yaml", home / "dagster.yaml")
    monkeypatch.setenv("DAGSTER_HOME", str(home))
    lake = Lake.from_url(str(tmp_path / "lake"))
    land_demo_crawl(lake, "CC-MAIN-KEPT", 2, pages_per_file=10, seed=3)
    workers = WorkersResource(processes=1, memory_limit_mb=None)
    defs = build_definitions(LakeResource(url=lake.url), workers=workers)
    assets = [defs.resolve_assets_def(AssetKey(name)) for name in (RAW_CRAWL, EXTRACTED)]
    with DagsterInstance.get() as instance:
        (unit,) = register(instance, lake, "CC-MAIN-KEPT", files_per_unit=2).units
        yield lake, instance, assets, unit


def run(built, *, tags=None, run_config=None, only=None) -> dict[str, dict]:
    """Materialize the unit (both stages, or `only` one of them); each asset's metadata."""
    lake, instance, assets, unit = built
    selection = [a for a in assets if only is None or a.key == AssetKey(only)]
    result = materialize(
        selection,
        partition_key=unit.key,
        instance=instance,
        tags=tags,
        run_config=run_config,
        selection=[a.key for a in selection],
    )
    assert result.success
    return {
        event.asset_key.to_user_string(): {
            name: entry.value for name, entry in event.materialization.metadata.items()
        }
        for event in result.get_asset_materialization_events()
    }


def files(lake: Lake, prefix: str) -> dict[str, tuple[int, int]]:
    """Each committed file under `prefix`: (inode, mtime), which a rewrite changes."""
    return {
        key: (stat.st_ino, stat.st_mtime_ns)
        for key in lake.list(prefix)
        if (stat := Path(lake.path(key)).stat())
    }


def test_a_current_partition_is_kept_as_committed_and_reports_the_same(built):
    lake, _, _, unit = built
    first = run(built)
    written = {name: files(lake, unit.prefix(name)) for name in (RAW_CRAWL, EXTRACTED)}
    assert all(written.values())
    again = run(built)
    for name in (RAW_CRAWL, EXTRACTED):
        assert files(lake, unit.prefix(name)) == written[name], name
        assert again[name][KEPT] is True
        assert KEPT not in first[name]
        timing = ("duration_s", "cpu_s", "records_per_s")
        same = {k: v for k, v in first[name].items() if k not in timing}
        assert {k: again[name][k] for k in same if k != KEPT} == same, name


def test_force_a_missing_file_or_other_settings_write_it_again(built):
    lake, instance, _, unit = built
    run(built)
    marker = f"{unit.prefix(EXTRACTED)}/{MARKER}"
    before = files(lake, unit.prefix(EXTRACTED))

    forced = run(built, tags={RECOMPUTE_TAG: "true"}, only=EXTRACTED)
    assert KEPT not in forced[EXTRACTED]
    after = files(lake, unit.prefix(EXTRACTED))
    assert after.keys() == before.keys() and after[marker] != before[marker]

    listed = lake.read_json(marker)["outputs"]
    lost = f"{unit.prefix(EXTRACTED)}/{sorted(listed)[0]}"
    lake.delete(lost)
    assert KEPT not in run(built, only=EXTRACTED)[EXTRACTED]
    assert lake.exists(lost)

    # raw_crawl under another record-size limit: another output, whatever the lineage says
    config = {"ops": {RAW_CRAWL: {"config": {"max_record_mb": 1}}}}
    changed = run(built, run_config=config, only=RAW_CRAWL)[RAW_CRAWL]
    assert KEPT not in changed and changed["recipe_overrides"] == {"max_record_mb": 1}
    back = run(built, only=RAW_CRAWL)[RAW_CRAWL]  # the recipe's settings again
    assert KEPT not in back
    assert KEPT in run(built, only=RAW_CRAWL)[RAW_CRAWL]


def test_a_partition_whose_input_changed_is_written_again(built):
    lake, _, _, unit = built
    run(built)
    run(built, tags={RECOMPUTE_TAG: "true"}, only=RAW_CRAWL)  # the same data again
    assert run(built, only=EXTRACTED)[EXTRACTED][KEPT] is True
    # the unit's files replaced by others: raw_crawl's data, and so extracted's input, changes
    land_demo_crawl(lake, "CC-MAIN-KEPT", 2, pages_per_file=12, seed=4)
    before = lake.read_json(f"{unit.prefix(EXTRACTED)}/{MARKER}")["records_in"]
    raw = run(built, only=RAW_CRAWL)[RAW_CRAWL]
    assert KEPT not in raw
    extracted = run(built, only=EXTRACTED)[EXTRACTED]
    assert KEPT not in extracted and extracted["records_in"] != before
    assert KEPT in run(built)[EXTRACTED]


def test_what_a_stage_reads_from_outside_the_lineage_is_part_of_its_inputs(tmp_path):
    from tokenmill.stages.cleaned import CleanSettings, plug_in_code
    from tokenmill.stages.scored import ScoreSettings, models

    lake = Lake.from_url(str(tmp_path / "lake"))
    lake.write_bytes("classifiers/q/model.bin", b"one model")
    declared = ScoreSettings(classifiers=[{"name": "q", "model": "classifiers/q/model.bin"}])
    first = models(lake, declared)
    lake.write_bytes("classifiers/q/model.bin", b"another model, same name")
    assert models(lake, declared) not in (first, None)
    pinned = ScoreSettings(classifiers=[{"name": "q", "model": "q.bin", "sha256": "ab" * 32}])
    assert models(lake, pinned) == models(Lake.from_url(str(tmp_path / "other")), pinned)
    lake.delete("classifiers/q/model.bin")
    assert models(lake, declared) is None  # cannot tell: never kept
    assert plug_in_code(lake, CleanSettings()) == ""
    with_plug_in = CleanSettings(plugin_filters=[{"path": "my_filters.Longer"}])
    assert plug_in_code(lake, with_plug_in) is None
