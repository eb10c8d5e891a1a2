"""The whole pipeline on the embedded default: a small demo crawl through every stage, recorded
on a real (temporary) Dagster instance, and checked against the demo's ground truth."""

from __future__ import annotations

import base64
import random
import re
import subprocess
import sys
import unicodedata
from collections import Counter
from pathlib import Path

import polars as pl
import pyarrow.parquet as pq
import pytest
from dagster import AssetKey
from tokenizers import Tokenizer

from testkit.datasets import built_stages, key, label
from testkit.demo_pipeline import Pipeline, demo_pipeline
from testkit.formats import read_indexed_dataset, read_png, warc_headers_at
from tokenmill.cli.runner import materialize_all, materialized_partitions
from tokenmill.reports.summary import trace_token
from tokenmill.runtime.stage import Scope
from tokenmill.stages import STAGES
from tokenmill.storage.lake import Lake
from tokenmill.storage.layout import MARKER, crawl_prefix

pytestmark = pytest.mark.integration

PROJECT_DIR = Path(__file__).resolve().parents[1]
CRAWL = "CC-MAIN-DEMO-2026-02"
DEMO = {"files": 4, "pages_per_file": 60, "seed": 11}


@pytest.fixture(scope="module")
def pipeline(tmp_path_factory) -> Pipeline:
    with demo_pipeline(tmp_path_factory.mktemp("pipeline"), CRAWL, **DEMO) as pipeline:
        yield pipeline


def read_parquet(lake: Lake, key: str) -> pl.DataFrame:
    with lake.open_input(key) as f:
        return pl.from_arrow(pq.read_table(f))


def test_every_stage_is_materialized_for_every_partition(pipeline):
    materialized = materialized_partitions(pipeline.instance)
    unit_keys = {f"{CRAWL}/{u.name}" for u in pipeline.units}
    assert len(unit_keys) == 2
    assert set(materialized) == {label(stage.name) for stage in STAGES}
    for stage in built_stages():
        asset = stage.name
        expected = {CRAWL} if stage.scope is Scope.CRAWL else unit_keys
        if stage.scope is Scope.LAKE:
            assert pipeline.instance.get_latest_materialization_event(key(asset))
        else:
            assert materialized[label(asset)] == expected, asset
    assert all(run.success for run in pipeline.runs)


def test_materialization_metadata_counts_records_and_broken_ones(pipeline):
    broken = Counter(p["kind"] for p in pipeline.truth["pages"] if p["kind"].startswith("broken:"))
    assert broken["broken:corrupt_gzip"] + broken["broken:truncated_record"] > 0
    totals: Counter = Counter()
    for unit in pipeline.units:
        event = pipeline.instance.get_latest_materialization_event(
            AssetKey("raw_crawl")
        )  # any partition: check the shape
        assert event is not None
        marker = pipeline.lake.read_json(f"{unit.prefix('raw_crawl')}/_SUCCESS.json")
        totals.update(marker["dropped"])
        quarantine = pipeline.table("raw_crawl", unit, "quarantine.parquet")
        assert quarantine.height == sum(marker["dropped"].values()) - marker["dropped"].get(
            "empty_file", 0
        )
        assert quarantine["raw"].bin.size().min() > 0 if quarantine.height else True
    # Every corrupt or clipped record was kept aside and counted, and the run still succeeded.
    assert sum(totals.values()) >= broken["broken:corrupt_gzip"]
    metadata = pipeline.instance.get_latest_materialization_event(
        key("cleaned")
    ).asset_materialization.metadata
    for name in ("records_in", "records_out", "bytes_in", "bytes_out", "duration_s", "preview"):
        assert name in metadata, name
    assert any(name.startswith("dropped filter:") for name in metadata)
    # What each partition cost: the CPU of every process that did its work, workers included
    # (the run's own process only coordinates a unit's files).
    for stage in built_stages():
        event = pipeline.instance.get_latest_materialization_event(key(stage.name))
        cpu = event.asset_materialization.metadata["cpu_s"].value
        assert cpu > 0, stage.name


def test_each_assets_row_count_is_over_all_its_partitions(pipeline):
    """What an asset's overview shows, the latest materialization's `dagster/row_count`, is
    the records of every partition, each counted once."""
    for stage in STAGES:
        if stage.scope is Scope.LAKE:
            continue
        prefixes = (
            [crawl_prefix(stage.name, CRAWL)]
            if stage.scope is Scope.CRAWL
            else [unit.prefix(stage.name) for unit in pipeline.units]
        )
        markers = [pipeline.lake.read_json(f"{prefix}/{MARKER}") for prefix in prefixes]
        event = pipeline.instance.get_latest_materialization_event(key(stage.name))
        metadata = event.asset_materialization.metadata
        assert metadata["dagster/row_count"].value == sum(m["records_out"] for m in markers)
        assert metadata["dagster/size_bytes"].value == sum(m["bytes_out"] for m in markers)
        if stage.name == "tokenized_shards":
            tokens = sum(m["counts"]["tokens"] for m in markers)
            assert metadata["total_tokens"].value == tokens > 0


def test_the_crawl_shows_each_rules_distribution_over_its_documents(pipeline):
    """The recipe's crawl-wide materialization draws each rule's histogram over every extracted
    document of the crawl, the recipe's thresholds marked; unit materializations draw none."""
    instance = pipeline.instance
    clusters = instance.get_latest_materialization_event(key("dedup_clusters"))
    text = clusters.asset_materialization.metadata["rule_distributions"].value
    extracted = sum(
        pipeline.lake.read_json(f"{unit.prefix('extracted')}/_SUCCESS.json")["records_out"]
        for unit in pipeline.units
    )
    assert f"**gopher_quality/n_words** ({extracted:,} documents;" in text
    assert "current <50 >100000" in text
    uris = re.findall(r"\]\(data:image/png;base64,([^)]+)\)", text)
    assert len(uris) >= 10
    assert all(read_png(base64.b64decode(uri)).size for uri in uris)
    cleaned = instance.get_latest_materialization_event(key("cleaned"))
    assert "rule_distributions" not in cleaned.asset_materialization.metadata


def test_spam_and_foreign_pages_are_filtered_and_good_pages_kept(pipeline):
    cleaned = pipeline.docs("cleaned")
    kinds = Counter(cleaned["kind"])
    assert all(unicodedata.is_normalized("NFC", text) for text in cleaned["text"])
    assert not [k for k in kinds if k.startswith(("spam:", "foreign:", "broken:", "non_html"))]
    good_pages = sum(1 for p in pipeline.truth["pages"] if p["kind"] == "good")
    assert kinds["good"] >= 0.95 * good_pages
    assert kinds["exact_dup"] + kinds["near_dup"] > 10  # the dedup stage has work to do


def test_known_duplicates_are_gone(pipeline):
    cleaned, deduplicated = pipeline.docs("cleaned"), pipeline.docs("deduplicated")
    group_of = {p["url"]: p["group"] or p["url"] for p in pipeline.truth["pages"]}
    survivors = Counter(group_of[url] for url in deduplicated["url"])
    before = Counter(group_of[url] for url in cleaned["url"])
    groups_with_copies = [g for g, n in before.items() if n > 1]
    assert groups_with_copies
    assert all(survivors[g] == 1 for g in groups_with_copies)
    assert deduplicated["doc_id"].n_unique() == deduplicated.height
    # Nothing else was removed: every distinct page of the cleaned set survives once.
    assert set(survivors) == set(before)
    removed = pl.concat(
        [pipeline.table("deduplicated", u, "removed.parquet") for u in pipeline.units]
    )
    assert removed.height == cleaned.height - deduplicated.height
    assert set(removed["survivor_doc_id"]) <= set(deduplicated["doc_id"])


def test_every_output_document_points_at_its_source_record(pipeline):
    deduplicated = pipeline.docs("deduplicated")
    sources = {}
    for source, offset, record_id, url in deduplicated.select(
        "source_file", "record_offset", "record_id", "url"
    ).iter_rows():
        assert source.startswith(f"landing/{CRAWL}/")  # read in place, not copied
        data = sources.setdefault(source, pipeline.lake.read_bytes(source))
        headers = warc_headers_at(data, offset)
        assert headers["WARC-Type"] == "response"
        assert headers["WARC-Record-ID"] == record_id
        assert headers["WARC-Target-URI"] == url
        assert pipeline.page[(source.rsplit("/", 1)[1], offset)]["record_id"] == record_id


def test_decoding_tokenized_documents_reproduces_their_text(pipeline):
    tokenizer = Tokenizer.from_str(pipeline.lake.read_bytes("tokenizer/tokenizer.json").decode())
    eod = tokenizer.token_to_id("<|endoftext|>")
    for unit in pipeline.units:
        parts = pipeline.parts("tokenized_shards", unit)
        assert len(parts) == 2  # one tokenized file per WARC file of the unit
        for part, prefix in enumerate(parts):
            documents = read_indexed_dataset(
                pipeline.lake.read_bytes(f"{prefix}/tokens.idx"),
                pipeline.lake.read_bytes(f"{prefix}/tokens.bin"),
            )
            sidecar = read_parquet(pipeline.lake, f"{prefix}/provenance.parquet")
            texts = read_parquet(
                pipeline.lake, f"{unit.part_prefix('deduplicated', part)}/docs.parquet"
            ).select("doc_id", "text")
            assert len(documents) == sidecar.height == texts.height > 0
            text_of = dict(texts.iter_rows())
            for tokens, row in zip(documents, sidecar.iter_rows(named=True), strict=True):
                assert tokens[-1] == eod
                assert row["token_end"] - row["token_start"] == len(tokens) - 1
                assert (
                    tokenizer.decode(tokens[:-1], skip_special_tokens=False)
                    == text_of[row["doc_id"]]
                )


def test_trace_finds_the_record_of_random_tokens(pipeline):
    rng = random.Random(5)
    unit = pipeline.units[0]
    deduplicated = pipeline.docs("deduplicated")
    for part in (0, 1):
        marker = pipeline.lake.read_json(
            f"{unit.part_prefix('tokenized_shards', part)}/_SUCCESS.json"
        )
        for position in rng.sample(range(marker["counts"]["tokens"]), 10):
            found = trace_token(pipeline.lake, unit, part, position)
            text = deduplicated.filter(pl.col("doc_id") == found["doc_id"])["text"][0]
            assert found["is_end_of_document"] or found["text"] in text
            headers = warc_headers_at(
                pipeline.lake.read_bytes(found["source_file"]), found["record_offset"]
            )
            assert headers["WARC-Target-URI"] == found["url"]


def test_a_second_materialization_produces_identical_output(pipeline):
    before = pipeline.snapshot()
    assert materialize_all(pipeline.instance, pipeline.lake, workers=2) == []  # all up to date
    forced = materialize_all(pipeline.instance, pipeline.lake, workers=2, force=True)
    assert forced and all(run.success for run in forced)
    assert pipeline.snapshot() == before


def test_asset_graph_has_the_stages_in_lineage_order():
    from tokenmill.definitions import defs

    graph = defs.resolve_asset_graph()
    order = [key.to_user_string() for key in graph.toposorted_asset_keys]
    stages = [label(s) for s in ("raw_crawl", "extracted", "cleaned", "deduplicated")]
    stages.append(label("tokenized_shards"))
    assert stages[:3] == ["raw_crawl", "extracted", "fineweb_en/cleaned"]
    assert [name for name in order if name in stages] == stages
    for stage in STAGES:
        if stage.scope is not Scope.LAKE:
            assert graph.get(key(stage.name)).is_partitioned, stage.name
    assert AssetKey("raw_crawl") in graph.get(AssetKey("extracted")).parent_keys
    assert AssetKey("extracted") in graph.get(key("cleaned")).parent_keys


def test_dagster_definitions_validate():
    result = subprocess.run(
        [sys.executable, "-m", "dagster", "definitions", "validate", "-w", "workspace.yaml"],
        cwd=PROJECT_DIR,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "Validation successful" in result.stdout + result.stderr


def test_demo_truth_is_recorded_in_the_lake(pipeline):
    truth = pipeline.lake.read_json(f"demo/{CRAWL}/truth.json")
    assert truth["params"] == DEMO
    assert truth["pages"] == pipeline.truth["pages"]
