"""A demo crawl run through every stage on a temporary lake and Dagster instance, as
`tokenmill demo` does it, for the tests that check what the stages produced."""

from __future__ import annotations

import hashlib
from contextlib import contextmanager
from pathlib import Path

import polars as pl
import pyarrow.parquet as pq
import pytest
from dagster import DagsterInstance

from data_assets.runner import local_instance, materialize_all, register
from tokenmill.cli import land_demo_crawl
from tokenmill.lake import Lake
from tokenmill.shards import Shard, registered_shards

OUTPUT_ZONES = (
    "raw",
    "cleaned",
    "signatures",
    "clusters",
    "deduplicated",
    "tokenizer",
    "tokenized",
)


class Pipeline:
    def __init__(self, lake: Lake, instance: DagsterInstance, truth: dict, runs: list):
        self.lake, self.instance, self.truth, self.runs = lake, instance, truth, runs
        self.shards = registered_shards(lake, truth["crawl"])
        self.kind = {(p["file"], p["offset"]): p["kind"] for p in truth["pages"]}
        self.page = {(p["file"], p["offset"]): p for p in truth["pages"]}

    def table(self, stage: str, shard: Shard, name: str) -> pl.DataFrame:
        with self.lake.open_input(f"{shard.prefix(stage)}/{name}") as f:
            return pl.from_arrow(pq.read_table(f))

    def docs(self, stage: str) -> pl.DataFrame:
        frames = [self.table(stage, s, "docs.parquet") for s in self.shards]
        docs = pl.concat(frames)
        kinds = [
            self.kind[(source.rsplit("/", 1)[1], offset)]
            for source, offset in docs.select("source_file", "record_offset").iter_rows()
        ]
        return docs.with_columns(kind=pl.Series(kinds, dtype=pl.String))

    def snapshot(self) -> dict[str, str]:
        """sha256 of every committed output object (not the landing zone or the manifests)."""
        return {
            key: hashlib.sha256(self.lake.read_bytes(key)).hexdigest()
            for zone in OUTPUT_ZONES
            for key in self.lake.list(zone)
        }


@contextmanager
def demo_pipeline(root: Path, crawl: str, files: int, pages_per_file: int, seed: int):
    """Land a demo crawl, register its shards (2 files each) and materialize every stage."""
    with pytest.MonkeyPatch.context() as env:
        env.setenv("TOKENMILL_LAKE_URL", str(root / "lake"))
        env.setenv("DAGSTER_HOME", str(root / "dagster_home"))
        lake = Lake.from_url(str(root / "lake"))
        truth = land_demo_crawl(lake, crawl, files, pages_per_file, seed)
        instance = local_instance()
        register(instance, lake, crawl, files_per_shard=2)
        runs = materialize_all(instance, lake, workers=2)
        try:
            yield Pipeline(lake, instance, truth, runs)
        finally:
            instance.dispose()
