"""The worked example of a new stage, taken from the architecture page as written: a module with a
`STAGE` declaration becomes a partitioned asset with its own recipe section and pod size, and
materializes a unit through Dagster after the demo pipeline."""

from __future__ import annotations

import importlib
import json
import re
import sys
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from dagster import materialize
from tokenmill.data_assets.assets import stage_asset
from tokenmill.data_assets.datasets import Dataset
from tokenmill.data_assets.k8s import K8S_CONFIG
from tokenmill.resources.lake import LakeResource
from tokenmill.resources.workers import WorkersResource

import tokenmill.stages
from testkit.datasets import key, recipe_lake, variant
from testkit.demo_pipeline import demo_pipeline
from tokenmill.storage.layout import DEDUPLICATED, MARKER

pytestmark = pytest.mark.integration

PAGE = Path(__file__).resolve().parents[1] / "docs" / "concepts" / "architecture.md"
EXAMPLE = re.compile(r"A stage, worked example.*?```python\n(.*?)```", re.DOTALL)


def readme_stage_module(folder: Path, monkeypatch):
    """The page's example module, importable as `tokenmill.stages.<name>` (how a part
    worker finds its stage) without writing into the project."""
    source = EXAMPLE.search(PAGE.read_text())[1]
    name = re.match(r"# tokenmill/stages/(\w+)\.py\n", source)[1]
    (folder / f"{name}.py").write_text(source)
    monkeypatch.setattr(tokenmill.stages, "__path__", [*tokenmill.stages.__path__, str(folder)])
    monkeypatch.delitem(sys.modules, f"tokenmill.stages.{name}", raising=False)
    return importlib.import_module(f"tokenmill.stages.{name}")


def test_the_readme_stage_example_runs_as_an_asset(tmp_path, monkeypatch):
    example = readme_stage_module(tmp_path, monkeypatch)
    stage = example.STAGE
    with demo_pipeline(tmp_path / "run", "CC-MAIN-EXAMPLE", 2, 20, seed=11) as pipeline:
        unit = pipeline.units[0]
        docs = pipeline.table(DEDUPLICATED, unit, "docs.parquet")
        words = {doc: len(text.split()) for doc, text in docs.select("doc_id", "text").iter_rows()}
        threshold = sorted(words.values())[len(words) // 2]  # the recipe keeps about half
        # the line the page adds to tokenmill/stages/__init__.py
        monkeypatch.setattr(tokenmill.stages, "STAGES", (*tokenmill.stages.STAGES, stage))
        pipeline.lake = recipe_lake(pipeline.lake)  # the recipe's zones, word_counts' now too
        recipe = variant({"wordcount": {"min_words": threshold}}, "worked-example")
        asset = stage_asset(stage, Dataset(recipe, recipe.name))
        assert asset.asset_deps[key(stage.name)] == {key(DEDUPLICATED)}
        assert asset.group_names_by_key[key(stage.name)] == "fineweb_en/7_analysis"
        pod = json.loads(asset.op.tags[K8S_CONFIG])
        assert pod == {"container_config": {"resources": stage.pod.resources()}}
        result = materialize(
            [asset],
            partition_key=unit.key,
            instance=pipeline.instance,
            resources={
                "lake": LakeResource(url=pipeline.lake.url),
                "workers": WorkersResource(processes=1, memory_limit_mb=None),  # in this process
            },
        )
        assert result.success
        counts = pipeline.table(stage.name, unit, "counts.parquet")
        event = pipeline.instance.get_latest_materialization_event(key(stage.name))
        marker = pipeline.lake.read_json(f"{unit.prefix(stage.name)}/{MARKER}")
        first_part = f"{unit.part_prefix(stage.name, 0)}/counts.parquet"
        assert pipeline.lake.stored_key(first_part).startswith("recipes/fineweb_en/word_counts/")
        assert pq.read_schema(pipeline.lake.open_input(first_part)) == example.SCHEMA

    kept = {doc: n for doc, n in words.items() if n >= threshold}
    assert 0 < len(kept) < len(words)
    assert dict(counts.select("doc_id", "words").iter_rows()) == kept
    metadata = event.asset_materialization.metadata
    assert metadata["dagster/partition_row_count"].value == len(kept)
    assert metadata["recipe"].value == "worked-example"
    assert marker["counts"]["files"] == 2
