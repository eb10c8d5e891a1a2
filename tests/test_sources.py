"""Crawls read in place (tokenmill/crawl/sources.py): declared by a Common Crawl paths file or by a
prefix on the local disk, registered and cleaned where they are, with provenance pointing at the
source; refused paths named; `copy: true` keeps a copy in the lake."""

from __future__ import annotations

import gzip
import json
import shutil
from pathlib import Path

import polars as pl
import pytest

from testkit.formats import warc_headers_at
from tokenmill.crawl.sources import CrawlSource
from tokenmill.crawl.units import register_new_files, unit_files
from tokenmill.demo.crawl import generate_demo_crawl
from tokenmill.runtime.parts import run_stage_work
from tokenmill.stages import stage_named
from tokenmill.stages.shared import provenance_resolves
from tokenmill.storage.lake import Lake
from tokenmill.storage.layout import CLEANED, EXTRACTED, RAW_CRAWL, Unit

CRAWL = "CC-MAIN-SOURCE-2026-01"
SEGMENT = f"crawl-data/{CRAWL}/segments/1700000000000.1/warc"


@pytest.fixture(scope="module")
def source(tmp_path_factory) -> tuple[Path, list[str], dict]:
    """A local folder laid out as Common Crawl's bucket, its WARC paths and their truth."""
    root = tmp_path_factory.mktemp("source")
    base = root / "commoncrawl"
    generate_demo_crawl(
        base / SEGMENT, root / "truth.json", crawl=CRAWL, files=2, pages_per_file=20, seed=9
    )
    paths = [f"{SEGMENT}/{name}" for name in sorted(p.name for p in (base / SEGMENT).iterdir())]
    truth = json.loads((root / "truth.json").read_text())
    return base, paths, {(p["file"], p["offset"]): p for p in truth["pages"]}


def paths_file(path: Path, lines: list[str]) -> str:
    path.write_bytes(gzip.compress("".join(f"{line}\n" for line in lines).encode()))
    return str(path)


def clean(lake: Lake, unit: Unit) -> pl.DataFrame:
    for stage in (RAW_CRAWL, EXTRACTED, CLEANED):
        run_stage_work(stage_named(stage), lake, unit=unit, workers=1)
    docs = [
        pl.read_parquet(lake.path(f"{unit.part_prefix(CLEANED, part)}/docs.parquet"))
        for part in range(len(unit_files(lake, unit)))
    ]
    return pl.concat(docs)


def assert_provenance_is_the_source(lake: Lake, docs: pl.DataFrame, truth: dict, files: set):
    assert docs.height > 0
    assert set(docs["source_file"]) == files
    for source, offset, record_id, url in docs.select(
        "source_file", "record_offset", "record_id", "url"
    ).iter_rows():
        headers = warc_headers_at(Path(source).read_bytes(), offset)
        assert headers["WARC-Record-ID"] == record_id and headers["WARC-Target-URI"] == url
        assert truth[(Path(source).name, offset)]["record_id"] == record_id


def lake_warc_files(lake: Lake) -> list[str]:
    return [k for zone in (RAW_CRAWL, CLEANED) for k in lake.list(zone) if ".warc" in k]


def test_a_crawl_declared_by_a_gzipped_paths_file_is_cleaned_in_place(tmp_path, source):
    base, paths, truth = source
    lake = Lake.from_url(str(tmp_path / "lake"))
    listing = paths_file(tmp_path / "warc.paths.gz", paths)
    CrawlSource(CRAWL, paths=listing, base=str(base)).save(lake)

    registration = register_new_files(lake, CRAWL, files_per_unit=2)
    assert registration.refused == {}
    (unit,) = registration.units
    uris = [f"{base}/{path}" for path in paths]
    assert unit_files(lake, unit) == uris

    docs = clean(lake, unit)
    assert_provenance_is_the_source(lake, docs, truth, set(uris))
    assert provenance_resolves(CLEANED).verify(lake, unit).passed
    assert lake_warc_files(lake) == []  # read where they are, never copied


def test_a_crawl_declared_by_a_local_prefix_is_cleaned_in_place(tmp_path, source):
    base, paths, truth = source
    lake = Lake.from_url(str(tmp_path / "lake"))
    prefix = f"{base}/crawl-data/{CRAWL}"
    CrawlSource(CRAWL, prefix=prefix).save(lake)

    (unit,) = register_new_files(lake, CRAWL, files_per_unit=2).units
    uris = [f"{base}/{path}" for path in paths]
    assert unit_files(lake, unit) == uris

    docs = clean(lake, unit)
    assert_provenance_is_the_source(lake, docs, truth, set(uris))
    assert provenance_resolves(CLEANED).verify(lake, unit).passed
    assert lake_warc_files(lake) == []


def test_refused_paths_are_named_and_the_rest_registered(tmp_path, source):
    base, paths, _ = source
    lake = Lake.from_url(str(tmp_path / "lake"))
    missing = f"{SEGMENT}/CC-MAIN-gone.warc.gz"
    outside = ["../elsewhere/x.warc.gz", f"{SEGMENT}/../../../../../../y.warc.gz"]
    absolute = ["/etc/z.warc.gz", "s3://other-bucket/z.warc.gz"]
    listing = paths_file(
        tmp_path / "warc.paths.gz",
        [paths[0], missing, paths[0], *outside, *absolute, "", paths[1]],
    )
    CrawlSource(CRAWL, paths=listing, base=str(base)).save(lake)

    registration = register_new_files(lake, CRAWL, files_per_unit=1)
    assert registration.refused == {
        "missing objects": [f"{base}/{missing}"],
        "duplicate paths": [paths[0]],
        "paths outside the base": outside + absolute,
    }
    assert [unit_files(lake, unit) for unit in registration.units] == [
        [f"{base}/{paths[0]}"],
        [f"{base}/{paths[1]}"],
    ]
    described = "\n".join(registration.describe_refused())
    assert missing in described and "../elsewhere/x.warc.gz" in described


def test_copy_keeps_the_files_in_the_lake_and_provenance_points_at_the_copy(tmp_path, source):
    base, paths, truth = source
    lake = Lake.from_url(str(tmp_path / "lake"))
    movable = tmp_path / "movable"  # a source that may disappear
    shutil.copytree(base, movable)
    CrawlSource(CRAWL, prefix=f"{movable}/crawl-data", copy=True).save(lake)

    (unit,) = register_new_files(lake, CRAWL, files_per_unit=2).units
    docs = clean(lake, unit)
    copies = lake_warc_files(lake)
    assert copies == [
        f"{unit.part_prefix(RAW_CRAWL, part)}/source{movable}/{path}"
        for part, path in enumerate(paths)
    ]
    for copy, path in zip(copies, paths, strict=True):
        assert lake.read_bytes(copy) == (base / path).read_bytes()
    assert set(docs["source_file"]) == set(copies)

    shutil.rmtree(movable)  # the copies are all the pipeline needs from now on
    assert provenance_resolves(CLEANED).verify(lake, unit).passed
    for source_file, offset, record_id in docs.select(
        "source_file", "record_offset", "record_id"
    ).iter_rows():
        headers = warc_headers_at(lake.read_bytes(source_file), offset)
        assert headers["WARC-Record-ID"] == record_id
        assert truth[(source_file.rsplit("/", 1)[1], offset)]["record_id"] == record_id
    extracted = run_stage_work(stage_named(EXTRACTED), lake, unit=unit, workers=1)
    assert extracted.counts.get("unusable_files") is None  # read from the copies
    rerun = run_stage_work(stage_named(CLEANED), lake, unit=unit, workers=1)
    assert rerun.records_out == docs.height
