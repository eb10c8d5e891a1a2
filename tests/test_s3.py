"""The lake on a real S3-compatible store (SeaweedFS on loopback): atomic multipart uploads,
credentials from the environment only, and failures that name the endpoint and bucket."""

from __future__ import annotations

import dataclasses
import gzip
import os
import tempfile
from pathlib import Path

import pytest
from tokenmill.resources.lake import LakeResource

from testkit.datasets import recipe_lake
from testkit.servers import PUBLIC_BUCKET, SOURCE_BUCKET, free_port
from tokenmill.crawl.sources import CrawlSource
from tokenmill.storage.lake import PART_SIZE, Lake, LakeAccessError
from tokenmill.storage.outputs import MARKER, PartitionWriter, StageReport

pytestmark = pytest.mark.integration


@pytest.fixture
def s3_env(seaweedfs, monkeypatch):
    for name, value in seaweedfs.env().items():
        monkeypatch.setenv(name, value)
    return monkeypatch


def s3_lake(seaweedfs, prefix: str, endpoint: str | None = None) -> Lake:
    url = f"s3://{seaweedfs.bucket}/{prefix}"
    return Lake.from_url(url, endpoint_url=endpoint or seaweedfs.endpoint, max_attempts=2)


def test_large_objects_are_uploaded_in_parts_and_read_back(seaweedfs, s3_env, tmp_path):
    lake = s3_lake(seaweedfs, "multipart")
    data = os.urandom(2 * PART_SIZE + 12345)  # above the threshold: three parts
    big = tmp_path / "big.bin"
    big.write_bytes(data)
    lake.put_file("x/big.bin", big)
    head = seaweedfs.client().head_object(Bucket=seaweedfs.bucket, Key="multipart/x/big.bin")
    assert head["ContentLength"] == len(data)
    assert head["ETag"].strip('"').endswith("-3")  # a multipart upload of three parts
    assert lake.read_bytes("x/big.bin") == data
    lake.write_bytes("x/small.json", b"{}")
    small = seaweedfs.client().head_object(Bucket=seaweedfs.bucket, Key="multipart/x/small.json")
    assert "-" not in small["ETag"]
    assert lake.list("x") == ["x/big.bin", "x/small.json"]
    assert seaweedfs.keys("multipart/") == ["multipart/x/big.bin", "multipart/x/small.json"]


def test_a_failed_partition_write_leaves_nothing_behind(seaweedfs, s3_env):
    lake = s3_lake(seaweedfs, "atomic")
    with pytest.raises(RuntimeError), PartitionWriter(lake, "stage/c/0", StageReport()) as out:
        out.open("part.bin").write(os.urandom(3 * PART_SIZE))
        raise RuntimeError("crash before commit")
    assert seaweedfs.keys("atomic/") == []
    with PartitionWriter(lake, "stage/c/0", StageReport()) as out:
        out.open("part.bin").write(b"data")
    assert seaweedfs.keys("atomic/") == ["atomic/stage/c/0/" + MARKER, "atomic/stage/c/0/part.bin"]


def test_credentials_come_only_from_the_environment(seaweedfs, s3_env):
    # Neither the lake's config nor a crawl's stored declaration can hold a key: a source names
    # the environment prefix its keys are read from.
    secrets = {"access_key", "secret_key", "aws_access_key_id", "aws_secret_access_key"}
    assert not secrets & set(LakeResource.model_fields)
    assert not secrets & {f.name for f in dataclasses.fields(CrawlSource)}
    s3_env.setenv("AWS_SECRET_ACCESS_KEY", "not-the-secret")
    lake = s3_lake(seaweedfs, "creds")
    with pytest.raises(LakeAccessError) as refused:
        lake.list("anything")
    message = str(refused.value)
    assert seaweedfs.endpoint in message and f"'{seaweedfs.bucket}'" in message
    assert "AWS_SECRET_ACCESS_KEY" in message
    with pytest.raises(LakeAccessError, match="refused the credentials"):
        lake.write_bytes("k.json", b"{}")
    s3_env.setenv("AWS_SECRET_ACCESS_KEY", seaweedfs.secret_key)
    s3_lake(seaweedfs, "creds").write_bytes("k.json", b"{}")
    assert seaweedfs.keys("creds/") == ["creds/k.json"]


def test_unreachable_endpoint_is_named(seaweedfs, s3_env):
    endpoint = f"http://127.0.0.1:{free_port()}"  # nothing listens there
    lake = s3_lake(seaweedfs, "gone", endpoint=endpoint)
    with pytest.raises(LakeAccessError, match="is unreachable") as unreachable:
        lake.exists("a/b.json")
    assert endpoint in str(unreachable.value) and f"'{seaweedfs.bucket}'" in str(unreachable.value)
    with pytest.raises(LakeAccessError, match="is unreachable"):
        lake.write_bytes("a/b.json", b"{}")


def test_bounded_listing_pages_through_the_bucket(seaweedfs, s3_env):
    lake = s3_lake(seaweedfs, "listing")
    keys = [f"landing/C/{i:03d}.warc.gz" for i in range(7)]
    for key in keys:
        lake.write_bytes(key, b"")
    pages, after = [], ""
    while page := lake.list_after("landing/C", after, 3):
        pages.append(page)
        after = page[-1]
    assert pages == [keys[0:3], keys[3:6], keys[6:7]]
    assert lake.list_dirs("landing") == ["C"]


def test_tokenizer_is_read_from_an_s3_uri_with_the_lakes_settings(
    seaweedfs, s3_env, shared, monkeypatch
):
    from tokenmill.runtime.stage import Work
    from tokenmill.storage.locations import PathNotAllowedError
    from tokenmill.tokens.tokenization import (
        TOKENIZER_KEY,
        TOKENIZER_PATHS_ENV,
        TokenizerSettings,
        build_tokenizer,
    )

    source = shared / "tokenizers" / "llama-style-32k.tokenizer.json"
    seaweedfs.client().upload_file(str(source), seaweedfs.bucket, "models/llama.json")
    lake = s3_lake(seaweedfs, "tok")
    settings = TokenizerSettings(path=f"s3://{seaweedfs.bucket}/models/llama.json")
    # Outside the lake (s3://bucket/tok): only from a prefix the deployment allows.
    with pytest.raises(PathNotAllowedError, match="outside the lake"):
        build_tokenizer(Work(lake, "tokenizer", settings))
    monkeypatch.setenv(TOKENIZER_PATHS_ENV, f"s3://{seaweedfs.bucket}/models")
    report = build_tokenizer(Work(lake, "tokenizer", settings))
    assert lake.read_bytes(TOKENIZER_KEY) == source.read_bytes()
    assert report.counts["vocab_size"] == 32003


def test_evaluation_sets_are_indexed_on_s3_from_an_allowed_uri(seaweedfs, s3_env, monkeypatch):
    """An evaluation set outside the lake, in an allowed S3 prefix, indexed into an S3 lake; a
    document sharing its n-grams is dropped with the set's table read back from the lake."""
    import json

    import polars as pl

    from tokenmill.decontamination.index import declared_versions, set_table
    from tokenmill.decontamination.removal import Decontamination, decontaminate
    from tokenmill.decontamination.sets import EVAL_PATHS_ENV
    from tokenmill.runtime.stage import Work
    from tokenmill.stages.eval_index import EvaluationSettings, run
    from tokenmill.storage.locations import PathNotAllowedError

    question = "Which element has the highest melting point of all metals known in the table?"
    body = json.dumps({"id": "q1", "question": question}).encode()
    seaweedfs.client().put_object(Bucket=seaweedfs.bucket, Key="evals/qa.jsonl", Body=body)
    lake = s3_lake(seaweedfs, "decontaminated")
    uri = f"s3://{seaweedfs.bucket}/evals/qa.jsonl"
    declared = {"name": "qa", "path": uri, "fields": ["question"], "id_field": "id"}
    settings = EvaluationSettings(sets=[declared])
    with pytest.raises(PathNotAllowedError, match="outside the lake"):
        run(Work(lake, "eval_index", settings))
    monkeypatch.setenv(EVAL_PATHS_ENV, f"s3://{seaweedfs.bucket}/evals")
    counts = run(Work(lake, "eval_index", settings)).counts["sets"]["qa"]
    assert counts["items"] == 1 and counts["words"] == 14
    table = set_table(lake, {"qa": declared_versions(lake)["qa"]["sha256"]}, 13)
    docs = pl.DataFrame(
        {"doc_id": ["a", "b"], "url": ["u", "v"], "text": [f"Quiz. {question.upper()}", "tungsten"]}
    )
    outcome = decontaminate(docs, table, Decontamination(("qa",)))
    assert outcome.kept["doc_id"].to_list() == ["b"]
    assert outcome.passages[0]["item"] == "q1"


# Crawls read in place from other buckets


def upload_demo_crawl(client, bucket: str, folder: str, crawl: str, files: int) -> dict[str, bytes]:
    """A small demo crawl's WARC files as objects under `folder`; returns them by URI."""
    from tokenmill.demo.crawl import generate_demo_crawl

    objects = {}
    with tempfile.TemporaryDirectory() as scratch:
        warc_dir = Path(scratch, "warc")
        generate_demo_crawl(
            warc_dir, Path(scratch, "truth.json"), crawl=crawl, files=files, pages_per_file=12
        )
        for path in sorted(warc_dir.iterdir()):
            client.put_object(Bucket=bucket, Key=f"{folder}/{path.name}", Body=path.read_bytes())
            objects[f"s3://{bucket}/{folder}/{path.name}"] = path.read_bytes()
    return objects


def read_parquet(lake: Lake, key: str):
    import pyarrow.parquet as pq

    with lake.open_input(key) as f:
        return pq.read_table(f)


def run_units(instance, lake: Lake, units, stages=("raw_crawl", "extracted", "cleaned")) -> None:
    """Run the stages' jobs for each unit, one run per partition; every check must pass."""
    from tokenmill.resources.workers import WorkersResource

    from tokenmill.definitions import build_definitions

    defs = build_definitions(
        LakeResource(url=lake.url, endpoint_url=lake.endpoint_url, max_attempts=2),
        workers=WorkersResource(processes=1),
    )
    for stage in stages:
        job = defs.resolve_job_def(f"run_{stage}")
        for unit in units:
            result = job.execute_in_process(instance=instance, partition_key=unit.key)
            for evaluation in result.get_asset_check_evaluations():
                assert evaluation.passed, (stage, unit, evaluation)


def unit_tables(lake: Lake, units, stage: str, name: str):
    import pyarrow as pa

    from tokenmill.crawl.units import unit_files

    return pa.concat_tables(
        read_parquet(lake, f"{unit.part_prefix(stage, part)}/{name}")
        for unit in units
        for part in range(len(unit_files(lake, unit)))
    )


@pytest.mark.parametrize("copy", [False, True], ids=["in place", "copy"])
def test_crawl_in_another_bucket_is_read_in_place_with_its_own_credentials(copy, seaweedfs, s3_env):
    from dagster import DagsterInstance

    from tokenmill.cli.runner import register
    from tokenmill.crawl.units import unit_files

    crawl = f"CC-MAIN-ELSEWHERE-{int(copy)}"
    folder = f"crawl-data/{crawl}/segments/1/warc"
    objects = upload_demo_crawl(seaweedfs.admin(), SOURCE_BUCKET, folder, crawl, files=3)
    missing = f"{folder}/{crawl}-gone.warc.gz"
    paths = [uri.split("/", 3)[3] for uri in objects]
    paths.insert(1, missing)
    seaweedfs.admin().put_object(
        Bucket=SOURCE_BUCKET,
        Key=f"crawl-data/{crawl}/warc.paths.gz",
        Body=gzip.compress("\n".join(paths).encode()),
    )
    # The source's keys are only in the environment, under their own prefix; the lake's keys
    # (AWS_*) may not read the source bucket.
    s3_env.setenv("ELSEWHERE_ACCESS_KEY_ID", seaweedfs.source_key[0])
    s3_env.setenv("ELSEWHERE_SECRET_ACCESS_KEY", seaweedfs.source_key[1])
    lake = s3_lake(seaweedfs, f"inplace-{int(copy)}")
    CrawlSource(
        crawl,
        paths=f"s3://{SOURCE_BUCKET}/crawl-data/{crawl}/warc.paths.gz",
        base=f"s3://{SOURCE_BUCKET}/",
        endpoint_url=seaweedfs.endpoint,
        credentials="ELSEWHERE",
        copy=copy,
    ).save(lake)
    assert seaweedfs.source_key[1] not in lake.read_bytes(CrawlSource.key(crawl)).decode()

    with DagsterInstance.ephemeral() as instance:
        registration = register(instance, lake, crawl, files_per_unit=2)
        assert registration.refused == {"missing objects": [f"s3://{SOURCE_BUCKET}/{missing}"]}
        assert any(missing in line for line in registration.describe_refused())
        assert [u.key for u in registration.units] == [f"{crawl}/00000", f"{crawl}/00001"]
        run_units(instance, lake, registration.units)

    units = registration.units
    index = unit_tables(lake, units, "raw_crawl", "index.parquet")
    docs = unit_tables(recipe_lake(lake), units, "cleaned", "docs.parquet")  # Dagster wrote it
    assert docs.num_rows > 10
    lake_keys = seaweedfs.keys(f"inplace-{int(copy)}/")
    if copy:
        copies = {
            uri: f"{unit.part_prefix('raw_crawl', part)}/source/{uri.split('://', 1)[1]}"
            for unit in units
            for part, uri in enumerate(unit_files(lake, unit))
        }
        for uri, key in copies.items():
            assert lake.read_bytes(key) == objects[uri]
        readable = set(copies.values())
    else:
        assert not [k for k in lake_keys if k.endswith(".warc.gz")], lake_keys
        readable = set(objects)
    assert set(index.column("file").to_pylist()) == readable
    assert set(docs.column("source_file").to_pylist()) == readable
    assert set(docs.column("crawl").to_pylist()) == {crawl}


def test_public_bucket_is_read_unsigned(seaweedfs, s3_env, tmp_path):
    from tokenmill.crawl.units import register_new_files
    from tokenmill.runtime.parts import run_stage_work
    from tokenmill.stages import stage_named

    crawl, folder = "CC-MAIN-PUBLIC", "open/CC-MAIN-PUBLIC"
    objects = upload_demo_crawl(seaweedfs.admin(), PUBLIC_BUCKET, folder, crawl, files=2)
    # The environment's keys (the lake's) may not read the public bucket: only an unsigned
    # request can.
    lake = Lake.from_url(str(tmp_path / "lake"))
    CrawlSource(
        crawl,
        prefix=f"s3://{PUBLIC_BUCKET}/{folder}/",
        endpoint_url=seaweedfs.endpoint,
        unsigned=True,
    ).save(lake)
    (unit,) = register_new_files(lake, crawl, files_per_unit=2).units
    for name in ("raw_crawl", "extracted", "cleaned"):
        report = run_stage_work(stage_named(name), lake, unit=unit, workers=1)
        assert report.counts["files"] == 2
    docs = unit_tables(lake, [unit], "cleaned", "docs.parquet")
    assert set(docs.column("source_file").to_pylist()) == set(objects)
    # Unsigned requests are anonymous indeed: the private source bucket refuses them.
    private = "CC-MAIN-PRIVATE"
    CrawlSource(
        private,
        prefix=f"s3://{SOURCE_BUCKET}/crawl-data/",
        endpoint_url=seaweedfs.endpoint,
        unsigned=True,
    ).save(lake)
    with pytest.raises(LakeAccessError, match="refused"):
        register_new_files(lake, private, files_per_unit=2)


def test_an_object_deleted_after_registration_is_quarantined_and_the_rest_kept(
    seaweedfs, s3_env, tmp_path
):
    from tokenmill.crawl.units import register_new_files
    from tokenmill.demo.crawl import generate_demo_crawl
    from tokenmill.runtime.parts import run_stage_work
    from tokenmill.stages import stage_named

    crawl = "CC-MAIN-S3-GONE"
    generate_demo_crawl(
        tmp_path / "w", tmp_path / "t.json", crawl=crawl, files=2, pages_per_file=10
    )
    lake = s3_lake(seaweedfs, "gone")
    good, doomed = sorted((tmp_path / "w").iterdir())
    for path in (good, doomed):
        lake.put_file(f"landing/{crawl}/{path.name}", path)
    (unit,) = register_new_files(lake, crawl, files_per_unit=2).units
    seaweedfs.client().delete_object(
        Bucket=seaweedfs.bucket, Key=f"gone/landing/{crawl}/{doomed.name}"
    )
    cap = 4 << 30
    gone = f"landing/{crawl}/{doomed.name}"
    raw = run_stage_work(stage_named("raw_crawl"), lake, unit=unit, workers=2, memory_limit=cap)
    extracted = run_stage_work(
        stage_named("extracted"), lake, unit=unit, workers=2, memory_limit=cap
    )
    assert extracted.counts["unusable_files"] == {gone: "missing: no such object"}
    cleaned = run_stage_work(stage_named("cleaned"), lake, unit=unit, workers=2, memory_limit=cap)
    assert raw.counts["unusable_files"] == {gone: "missing: no such object"}
    assert cleaned.counts["unusable_files"] == {gone: "missing: no such object"}
    assert raw.records_out > 0 and cleaned.records_out > 0  # the other file's records


def test_scores_and_a_release_made_on_s3_are_those_made_locally(seaweedfs, s3_env, tmp_path):
    """The classifier model read from the S3 lake (copied once to local disk for fastText) and
    a release written with ranged reads and a local scratch file: the same bytes as on disk."""
    import json as json_module

    from testkit.demo_pipeline import tokenized_demo_crawls
    from tokenmill.classifiers.training import TrainingSettings, train_classifier
    from tokenmill.crawl.units import registered_units
    from tokenmill.demo.crawl import sample_articles
    from tokenmill.release.plan import ReleaseSettings
    from tokenmill.runtime.parts import run_stage_work
    from tokenmill.stages import stage_named
    from tokenmill.stages.scored import ScoreSettings

    crawl = "CC-MAIN-S3REL-2026-01"
    local = tokenized_demo_crawls(tmp_path / "local", {crawl: 4}, files=2, pages_per_file=40)
    positives = tmp_path / "good.jsonl"
    articles = sample_articles("en", 60, seed=3)
    positives.write_text("".join(json_module.dumps({"text": t}) + "\n" for t in articles))
    small = TrainingSettings(dim=16, epoch=25, lr=1.0, bucket=100_000)
    train_classifier(local, "good", positives, settings=small)
    lake = s3_lake(seaweedfs, "scores-and-release")
    root = Path(local.real_root)
    for path in sorted(p for p in root.rglob("*") if p.is_file()):
        lake.put_file(str(path.relative_to(root)), path)
    declared = ScoreSettings(classifiers=[{"name": "good", "model": "classifiers/good/model.bin"}])
    settings = ReleaseSettings(shard_tokens=20_000, validation=0.1, seed=2)
    made = {}
    for where, store in (("local", local), ("s3", lake)):
        (unit,) = registered_units(store, crawl)
        run_stage_work(stage_named("scored"), store, declared, unit=unit, workers=1)
        version = run_stage_work(stage_named("release"), store, settings).counts["version"]
        keys = [f"{unit.part_prefix('scored', p)}/good.parquet" for p in range(2)]
        keys += sorted(k for k in store.list(f"release/{version}") if not k.endswith(MARKER))
        made[where] = {k: store.read_bytes(k) for k in keys}
    assert made["s3"] == made["local"] and len(made["local"]) > 8


def test_range_files_read_ahead_on_s3_give_each_range_its_rows_in_order(seaweedfs, s3_env):
    """On an object store a range's pieces and footers are read several at once, ahead: the
    rows come back as on a local disk, in task and chunk order."""
    import numpy as np
    import pyarrow as pa

    from tokenmill.storage import spill

    lake = s3_lake(seaweedfs, "spill")
    assert not lake.is_local
    rng = np.random.default_rng(3)
    expected: dict[int, list[int]] = {}
    for task in ("a", "b", "c"):
        values = np.arange(3_000) + {"a": 0, "b": 10_000, "c": 20_000}[task]
        ranges = rng.integers(0, 7, len(values))
        writer = spill.SpillWriter(lake, "work/phase", task, 7, 2_048)  # many small chunks
        for start in range(0, len(values), 250):
            piece = slice(start, start + 250)
            writer.add(pa.table({"value": values[piece]}), ranges[piece])
        writer.commit()
        for value, index in zip(values.tolist(), ranges.tolist(), strict=True):
            expected.setdefault(index, []).append(value)
    sources = [("work/phase", ("a", "b", "c"))]
    for index in range(7):
        got = [v for t in spill.read_sources(lake, sources, index) for v in t["value"].to_pylist()]
        assert got == expected[index]
    assert len(spill.range_files(lake, sources, 0)) > spill.READERS  # reads overlapped
