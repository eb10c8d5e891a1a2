"""A demo crawl run through every stage on a temporary lake and Dagster instance, as
`tokenmill demo` does it, for the tests that check what the stages produced."""

from __future__ import annotations

import hashlib
import json
from contextlib import contextmanager
from pathlib import Path

import polars as pl
import pyarrow.parquet as pq
import pytest
from dagster import DagsterInstance

from testkit.datasets import recipe_lake
from tokenmill.cli.demo import land_demo_crawl
from tokenmill.cli.runner import local_instance, materialize_all, register
from tokenmill.crawl.units import registered_units
from tokenmill.runtime.parts import RESUME_FIELD
from tokenmill.stages import STAGES
from tokenmill.storage.lake import Lake
from tokenmill.storage.layout import MARKER, Unit

OUTPUT_ZONES = tuple(stage.name for stage in STAGES)


class Pipeline:
    def __init__(self, lake: Lake, instance: DagsterInstance, truth: dict, runs: list):
        self.lake, self.instance, self.truth, self.runs = lake, instance, truth, runs
        self.units = registered_units(lake, truth["crawl"])
        self.kind = {(p["file"], p["offset"]): p["kind"] for p in truth["pages"]}
        self.page = {(p["file"], p["offset"]): p for p in truth["pages"]}

    def parts(self, stage: str, unit: Unit) -> list[str]:
        """The prefixes of the unit's committed parts in `stage`, in file order."""
        marker = self.lake.read_json(f"{unit.prefix(stage)}/{MARKER}")
        return [unit.part_prefix(stage, part) for part in range(marker["counts"]["files"])]

    def table(self, stage: str, unit: Unit, name: str) -> pl.DataFrame:
        """`name` of every part of the unit, in file order."""
        frames = []
        for prefix in self.parts(stage, unit):
            with self.lake.open_input(f"{prefix}/{name}") as f:
                frames.append(pl.from_arrow(pq.read_table(f)))
        return pl.concat(frames)

    def docs(self, stage: str) -> pl.DataFrame:
        frames = [self.table(stage, u, "docs.parquet") for u in self.units]
        docs = pl.concat(frames)
        kinds = [
            self.kind[(source.rsplit("/", 1)[1], offset)]
            for source, offset in docs.select("source_file", "record_offset").iter_rows()
        ]
        return docs.with_columns(kind=pl.Series(kinds, dtype=pl.String))

    def snapshot(self) -> dict[str, str]:
        """sha256 of every committed output object (not the landing zone or the manifests);
        markers without the run that wrote them (a part's resume token)."""
        return {
            key: hashlib.sha256(self._content(key)).hexdigest()
            for zone in OUTPUT_ZONES
            for key in self.lake.list(zone)
        }

    def _content(self, key: str) -> bytes:
        if not key.endswith(MARKER):
            return self.lake.read_bytes(key)
        marker = self.lake.read_json(key)
        marker.pop(RESUME_FIELD, None)
        return json.dumps(marker, sort_keys=True).encode()


@contextmanager
def demo_pipeline(root: Path, crawl: str, files: int, pages_per_file: int, seed: int):
    """Land a demo crawl, register its units (2 files each) and materialize every stage."""
    with pytest.MonkeyPatch.context() as env:
        env.setenv("TOKENMILL_LAKE_URL", str(root / "lake"))
        env.setenv("DAGSTER_HOME", str(root / "dagster_home"))
        lake = Lake.from_url(str(root / "lake"))
        truth = land_demo_crawl(lake, crawl, files, pages_per_file, seed)
        instance = local_instance()
        register(instance, lake, crawl, files_per_unit=2)
        runs = materialize_all(instance, lake, workers=2)
        try:
            # the lake as the project's recipe sees it: its stages' zones are its own
            yield Pipeline(recipe_lake(lake), instance, truth, runs)
        finally:
            instance.dispose()


def extracted_demo_unit(root: Path, crawl: str, files: int, pages_per_file: int, seed: int):
    """A lake under `root` with one unit of a demo crawl read and extracted (no Dagster), and
    the crawl's truth: (lake, unit, truth)."""
    from tokenmill.crawl.units import register_new_files
    from tokenmill.demo.crawl import generate_demo_crawl
    from tokenmill.runtime.parts import run_stage_work
    from tokenmill.stages import stage_named
    from tokenmill.storage.layout import EXTRACTED, LANDING, RAW_CRAWL

    generate_demo_crawl(
        root / "warc",
        root / "truth.json",
        crawl=crawl,
        files=files,
        pages_per_file=pages_per_file,
        seed=seed,
    )
    lake = Lake.from_url(str(root / "lake"))
    for path in sorted((root / "warc").iterdir()):
        lake.put_file(f"{LANDING}/{crawl}/{path.name}", path)
    (unit,) = register_new_files(lake, crawl, files_per_unit=files).units
    run_stage_work(stage_named(RAW_CRAWL), lake, unit=unit, workers=1)
    run_stage_work(stage_named(EXTRACTED), lake, unit=unit, workers=1)
    return lake, unit, json.loads((root / "truth.json").read_text())


def tokenized_demo_crawls(
    root: Path, crawls: dict[str, int], files: int, pages_per_file: int, recipe=None
):
    """A lake under `root` with demo crawls (name -> seed: one seed twice gives the same pages
    under two crawls) run through every stage up to tokenized_shards in this process, with the
    stages' default settings, or a recipe's (`recipe`: a `Dataset`, its stages in its zones)
    (no Dagster)."""
    from tokenmill.crawl.units import register_new_files
    from tokenmill.runtime.parts import run_stage_work
    from tokenmill.stages import stage_named

    lake = Lake.from_url(str(root / "lake"))
    units = {}
    for crawl, seed in crawls.items():
        land_demo_crawl(lake, crawl, files, pages_per_file, seed)
        units[crawl] = register_new_files(lake, crawl, files_per_unit=2).units
    every = [unit for found in units.values() for unit in found]
    data = recipe.lake(lake) if recipe else lake

    def run(name: str, **partition) -> None:
        stage = stage_named(name)
        settings = recipe.recipe.settings(stage.settings) if recipe and stage.settings else None
        run_stage_work(stage, data, settings, workers=1, **partition)

    for name in ("raw_crawl", "extracted", "cleaned", "dedup_signatures"):
        for unit in every:
            run(name, unit=unit)
    for crawl in crawls:
        run("dedup_clusters", crawl=crawl)
    for unit in every:
        run("deduplicated", unit=unit)
    run("tokenizer")
    for unit in every:
        run("tokenized_shards", unit=unit)
    return lake
