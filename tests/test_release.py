"""Training-ready releases: a Feistel permutation that is a bijection at every size, shards
read back by the tests' own Megatron reader holding every released document once, shuffled
without locality, a validation split by text that never moves a document, byte-identical
releases, resumed pieces, provenance through the merge, and bad settings named before
anything is written."""

from __future__ import annotations

import json
import re
from collections import Counter
from dataclasses import replace

import numpy as np
import pyarrow.parquet as pq
import pytest

from testkit.demo_pipeline import tokenized_demo_crawls
from testkit.formats import read_indexed_dataset
from tokenmill.crawl.units import registered_units
from tokenmill.release.permutation import Permutation
from tokenmill.release.plan import ReleaseError, ReleaseSettings, plan_release, release_report
from tokenmill.reports.summary import trace_release_token
from tokenmill.runtime.parts import run_stage_work
from tokenmill.stages import stage_named
from tokenmill.storage.layout import MARKER, TOKENIZED_SHARDS
from tokenmill.storage.outputs import read_batches

FIRST, SECOND, COPY = "CC-MAIN-REL-2026-01", "CC-MAIN-REL-2026-02", "CC-MAIN-REL-2026-03"
SMALL = ReleaseSettings(shard_tokens=20_000, validation=0.1, seed=3)


@pytest.mark.parametrize("size", [1, 2, 3, 4, 5, 255, 256, 257, 2**16 - 1, 2**16, 2**16 + 1])
def test_the_permutation_is_a_bijection_at_boundary_sizes(size):
    permutation = Permutation(size, seed=11)
    values = permutation(np.arange(size))
    assert np.array_equal(np.sort(values), np.arange(size))
    # and position_of undoes it: where each element is
    assert np.array_equal(permutation.position_of(values), np.arange(size))
    positions = permutation.position_of(np.arange(size))
    assert np.array_equal(values[positions], np.arange(size))


def test_the_permutation_depends_on_the_seed_and_only_on_it():
    first = Permutation(100_000, seed=1)(np.arange(100_000))
    assert np.array_equal(first, Permutation(100_000, seed=1)(np.arange(100_000)))
    assert not np.array_equal(first, Permutation(100_000, seed=2)(np.arange(100_000)))
    # computed per position: a slice is the same as the whole's slice
    assert np.array_equal(first[777:999], Permutation(100_000, seed=1)(np.arange(777, 999)))
    # no fixed structure: neighbours are far apart, as for a random permutation
    assert np.median(np.abs(np.diff(first))) > 100_000 / 5
    with pytest.raises(IndexError):
        Permutation(10, seed=1)([10])


def test_adjacent_positions_come_from_one_file_as_often_as_chance():
    sizes = np.random.default_rng(5).integers(1, 400, size=300)
    starts = np.concatenate([[0], np.cumsum(sizes)])
    order = Permutation(int(starts[-1]), seed=9)(np.arange(starts[-1]))
    files = np.searchsorted(starts, order, side="right") - 1
    observed = np.mean(files[1:] == files[:-1])
    chance = float(np.sum((sizes / starts[-1]) ** 2))
    assert 0.7 * chance < observed < 1.3 * chance


@pytest.fixture(scope="module")
def lake(tmp_path_factory):
    # COPY has FIRST's pages (the same seed) under another crawl: exact duplicates across crawls
    root = tmp_path_factory.mktemp("release")
    return tokenized_demo_crawls(root, {FIRST: 1, SECOND: 2, COPY: 1}, files=4, pages_per_file=40)


def release(lake, settings: ReleaseSettings):
    return run_stage_work(stage_named("release"), lake, settings)


def shards(lake, version: str) -> dict[str, dict]:
    """Each shard of a release read by the tests' own reader, with its sidecar rows."""
    marker = lake.read_json(f"release/{version}/{MARKER}")
    found = {}
    for name in sorted(k[:-4] for k in marker["outputs"] if k.endswith(".bin")):
        prefix = f"release/{version}/{name}"
        documents = read_indexed_dataset(
            lake.read_bytes(f"{prefix}.idx"), lake.read_bytes(f"{prefix}.bin")
        )
        with lake.open_input(f"{prefix}.provenance.parquet") as f:
            rows = pq.read_table(f).to_pylist()
        found[name] = {"documents": documents, "rows": rows}
    return found


def source_documents(lake, crawls) -> dict[str, list[int]]:
    """doc_id -> tokens of every tokenized document of the crawls."""
    found = {}
    for crawl in crawls:
        for unit in registered_units(lake, crawl):
            marker = lake.read_json(f"{unit.prefix(TOKENIZED_SHARDS)}/{MARKER}")
            for part in range(marker["counts"]["files"]):
                prefix = unit.part_prefix(TOKENIZED_SHARDS, part)
                documents = read_indexed_dataset(
                    lake.read_bytes(f"{prefix}/tokens.idx"), lake.read_bytes(f"{prefix}/tokens.bin")
                )
                ids = [
                    doc_id
                    for b in read_batches(lake, f"{prefix}/provenance.parquet", ["doc_id"])
                    for doc_id in b.column("doc_id").to_pylist()
                ]
                found |= dict(zip(ids, documents, strict=True))
    return found


def test_a_release_holds_every_document_once_shuffled_in_fixed_size_shards(lake):
    settings = replace(SMALL, crawls=[FIRST, SECOND])
    report = release(lake, settings)
    version = report.counts["version"]
    found = shards(lake, version)
    sources = source_documents(lake, [FIRST, SECOND])
    released = {}
    for shard in found.values():
        assert len(shard["documents"]) == len(shard["rows"])
        for tokens, row in zip(shard["documents"], shard["rows"], strict=True):
            assert row["doc_id"] not in released
            released[row["doc_id"]] = tokens
    assert released == sources  # every document once, its tokens as tokenized
    train = [n for n in found if n.startswith("train-")]
    valid = [n for n in found if n.startswith("valid-")]
    assert len(train) >= 3 and valid
    sizes = [sum(map(len, found[n]["documents"])) for n in train]
    assert all(0.6 * 20_000 < s < 1.4 * 20_000 for s in sizes[:-1]), sizes
    # shuffled across files and crawls: neighbours from one input file about as often as chance
    sources_in_order = [r["source"] for n in train for r in found[n]["rows"]]
    counts = Counter(sources_in_order)
    chance = sum((c / len(sources_in_order)) ** 2 for c in counts.values())
    neighbours = np.mean(
        [a == b for a, b in zip(sources_in_order, sources_in_order[1:], strict=False)]
    )
    assert neighbours < 2 * chance + 0.02
    assert {r["crawl"] for n in train[:1] for r in found[n]["rows"]} == {FIRST, SECOND}
    manifest = json.loads(lake.read_bytes(f"release/{version}/manifest.json"))
    assert manifest["splits"]["train"]["documents"] + manifest["splits"]["valid"][
        "documents"
    ] == len(sources)
    assert manifest["tokenizer_sha256"] == lake.read_json(f"tokenizer/{MARKER}")["counts"]["sha256"]
    blend = lake.read_bytes(f"release/{version}/blend.txt").decode().split()
    weights, names = [float(w) for w in blend[::2]], blend[1::2]
    assert names == train and abs(sum(weights) - 1) < 1e-9


def test_validation_shards_fill_up_to_shard_tokens_in_runs(lake):
    settings = replace(SMALL, crawls=[FIRST, SECOND], validation=0.5, shard_tokens=4_000)
    version = release(lake, settings).counts["version"]
    found = shards(lake, version)
    valid = [found[n]["documents"] for n in sorted(found) if n.startswith("valid-")]
    assert len(valid) >= 3
    for shard, following in zip(valid, valid[1:], strict=False):
        tokens = sum(map(len, shard))
        assert tokens <= 4_000 or len(shard) == 1  # a longer document: a shard alone
        assert tokens + len(following[0]) > 4_000  # greedy: the next one did not fit
    groups = 0  # a row group per run of documents from one train piece, not per document
    for name in (n for n in found if n.startswith("valid-")):
        with lake.open_input(f"release/{version}/{name}.provenance.parquet") as f:
            groups += pq.ParquetFile(f).num_row_groups
    assert groups < sum(map(len, valid)) / 2


def test_the_same_inputs_and_seed_give_the_same_bytes_and_a_published_release_stays(lake):
    settings = replace(SMALL, crawls=[FIRST])
    version = release(lake, settings).counts["version"]
    before = {k: lake.read_bytes(k) for k in lake.list(f"release/{version}")}
    assert release(lake, settings).counts["version"] == version  # published: left as it is
    lake.delete_prefix(f"release/{version}")
    release(lake, settings)
    assert {k: lake.read_bytes(k) for k in lake.list(f"release/{version}")} == before
    other = release(lake, replace(settings, seed=4)).counts["version"]
    assert other != version


@pytest.mark.parametrize("gather", [False, True])
@pytest.mark.parametrize("killed", ["mid-route", "after-a-shard"])
def test_a_killed_release_resumes_to_the_same_bytes(lake, killed, gather):
    from tokenmill.release.plan import finish_release
    from tokenmill.release.shards import Writing, release_job, write_release

    settings = replace(SMALL, crawls=[SECOND], seed=8)
    plan = plan_release(lake, settings)
    assert len(plan.pieces()) >= 2
    release(lake, settings)
    clean = {k: lake.read_bytes(k) for k in lake.list(plan.prefix)}
    lake.delete_prefix(plan.prefix)
    writing = Writing(lake, settings, plan.version, documents=1, gather=gather)
    route, shards = release_job(writing)
    assert len(route.tasks) >= 4  # a route task per file
    for task in route.tasks[: 1 if killed == "mid-route" else None]:
        route.run(task)
    if killed == "after-a-shard":
        shards.run(shards.tasks[0])
    assert not lake.exists(f"{plan.prefix}/{MARKER}")  # not published: readers see none
    with pytest.raises(FileNotFoundError):
        release_report(lake, plan.version)
    ran = write_release(lake, plan, settings, documents=1, gather=gather)  # the step's retry
    assert ran["tasks_found"] == (1 if killed == "mid-route" else len(route.tasks) + 1)
    meta, tokens = writing.level("route")
    assert bool(lake.list(tokens)) != gather  # gathering shards route no tokens
    spent = lake.list(meta) + lake.list(tokens)  # cleared but for markers
    assert spent and all("/_done/" in key for key in spent)
    finish_release(lake, plan, settings)
    assert {k: lake.read_bytes(k) for k in lake.list(plan.prefix)} == clean


def test_shards_gather_their_tokens_only_from_few_large_files_of_a_local_lake(lake, monkeypatch):
    """Gathering reads each input file a shard's window meets: worth it when a window takes
    ``GATHER_DOCUMENTS`` (4) or more documents from each file and the inputs stay in the page
    cache from window to window (or there are two windows at most), never on an object
    store."""
    import tokenmill.release.shards as shards
    from tokenmill.release.shards import gathers
    from tokenmill.storage.lake import Lake

    def plan(shard_tokens, crawls):
        return plan_release(lake, replace(SMALL, shard_tokens=shard_tokens, crawls=crawls))

    def per_shard_and_files(plan):
        (group,) = plan.groups.values()
        return group.per_shard, len(group.files)

    assert per_shard_and_files(plan(2000, [FIRST])) == (3, 4)
    assert not gathers(lake, plan(2000, [FIRST]))
    assert per_shard_and_files(plan(20_000, [FIRST])) == (35, 4)
    assert gathers(lake, plan(20_000, [FIRST]))
    assert per_shard_and_files(plan(20_000, [FIRST, SECOND, COPY])) == (35, 12)
    assert not gathers(lake, plan(20_000, [FIRST, SECOND, COPY]))
    assert gathers(lake, plan(10**9, [FIRST, SECOND, COPY]))  # one shard of every document
    s3 = Lake.from_url("s3://bucket/lake", endpoint_url="http://127.0.0.1:9")
    assert not gathers(s3, plan(10**9, [FIRST, SECOND, COPY]))
    monkeypatch.setattr(shards, "GATHER_CACHED_BYTES", 1000)  # inputs beyond the page cache
    assert plan(20_000, [FIRST]).groups["all"].shards == 3
    assert not gathers(lake, plan(20_000, [FIRST]))  # read 3 times
    assert gathers(lake, plan(10**9, [FIRST, SECOND, COPY]))  # read once


def test_the_split_goes_by_text_and_never_moves_a_document(lake):
    alone = release(lake, replace(SMALL, crawls=[FIRST])).counts["version"]
    together = release(lake, replace(SMALL, crawls=[FIRST, SECOND, COPY])).counts["version"]

    def valid_ids(version):
        return {
            (r["doc_id"], r["crawl"], r["text_hash"])
            for name, shard in shards(lake, version).items()
            if name.startswith("valid")
            for r in shard["rows"]
        }

    first_alone = {v[0] for v in valid_ids(alone)}
    with_others = valid_ids(together)
    assert first_alone == {v[0] for v in with_others if v[1] == FIRST}
    # COPY repeats FIRST's texts under other ids: each text on one side only
    copies = {v[2] for v in with_others if v[1] == COPY}
    assert copies and copies == {v[2] for v in with_others if v[1] == FIRST}


def test_weights_make_a_group_per_crawl_and_weight_the_blend(lake):
    settings = replace(SMALL, crawls=[FIRST, SECOND], weights={FIRST: 3.0, SECOND: 1.0})
    version = release(lake, settings).counts["version"]
    blend = lake.read_bytes(f"release/{version}/blend.txt").decode().split()
    pairs = list(zip(map(float, blend[::2]), blend[1::2], strict=True))
    by_crawl = Counter()
    for weight, name in pairs:
        by_crawl[FIRST if FIRST in name else SECOND] += weight
    assert abs(by_crawl[FIRST] - 0.75) < 1e-9 and abs(by_crawl[SECOND] - 0.25) < 1e-9
    for name, shard in shards(lake, version).items():
        crawl = FIRST if FIRST in name else SECOND
        assert {r["crawl"] for r in shard["rows"]} == {crawl}


def test_trace_follows_a_release_token_to_its_warc_record(lake):
    version = release(lake, replace(SMALL, crawls=[FIRST])).counts["version"]
    found = trace_release_token(lake, "train-00001", 500, version)
    assert found["crawl"] == FIRST and found["source_file"].endswith(".warc.gz")
    tokens = source_documents(lake, [FIRST])[found["doc_id"]]
    assert tokens[500 - found["token_start"]] == found["token_id"]
    assert found["source"].startswith(f"{TOKENIZED_SHARDS}/{FIRST}/")


def test_an_empty_split_is_warned_naming_the_share_that_fills_it(lake):
    """Few documents and a small validation share leave valid-* empty; too large a share
    leaves train-* empty: the release says so, with the share that puts one document there."""
    tiny = replace(SMALL, crawls=[FIRST], validation=1e-9)
    (warning,) = release(lake, tiny).counts["warnings"]
    assert warning.startswith("the validation split is empty: at validation 1e-09, none of ")
    assert "set `validation` in the recipe's `release:` section to " in warning
    share = float(re.search(r"section to (\S+) or more", warning)[1])
    filled = release(lake, replace(tiny, validation=share)).counts
    assert filled["valid_documents"] >= 1 and "warnings" not in filled
    # the share is the smallest one to two significant digits: a tenth less leaves it empty
    assert release(lake, replace(tiny, validation=share * 0.9)).counts["valid_documents"] == 0

    nearly_all = replace(tiny, validation=0.9999999)
    emptied = release(lake, nearly_all).counts
    assert emptied["train_tokens"] == 0
    (warning,) = emptied["warnings"]
    assert warning.startswith("the train split is empty: at validation 0.9999999, all ")
    share = float(re.search(r"section to (\S+) or less", warning)[1])
    kept = release(lake, replace(tiny, validation=share)).counts
    assert kept["train_tokens"] > 0 and "warnings" not in kept
    # and no warning for a split asked to be empty
    assert "warnings" not in release(lake, replace(tiny, validation=0.0)).counts


@pytest.mark.parametrize(
    "settings, message",
    [
        (replace(SMALL, crawls=["CC-MAIN-NONE"]), "crawl CC-MAIN-NONE has no tokenized documents"),
        (replace(SMALL, shard_tokens=3), "smaller than one document"),
        (replace(SMALL, crawls=[FIRST], weights={SECOND: 1.0}), "not in the release"),
    ],
)
def test_a_release_that_cannot_be_made_fails_naming_why_before_writing(lake, settings, message):
    before = set(lake.list("release"))
    with pytest.raises(ReleaseError, match=message):
        release(lake, settings)
    assert set(lake.list("release")) == before


def test_bad_settings_are_refused_when_read():
    with pytest.raises(ValueError, match="weights.x: 0 is not a positive number"):
        ReleaseSettings(weights={"x": 0})
    with pytest.raises(ValueError, match="validation 1.5"):
        ReleaseSettings(validation=1.5)


def test_megatron_cores_own_reader_reads_the_release(lake):
    """Megatron-Core's IndexedDataset, where it is installed (it needs torch; not in the
    project's environment): every shard reads back document by document."""
    indexed = pytest.importorskip("megatron.core.datasets.indexed_dataset")
    version = release(lake, replace(SMALL, crawls=[FIRST])).counts["version"]
    for name, shard in shards(lake, version).items():
        dataset = indexed.IndexedDataset(lake.path(f"release/{version}/{name}"), mmap=True)
        assert len(dataset) == len(shard["documents"])
        for index, tokens in enumerate(shard["documents"]):
            assert dataset[index].tolist() == tokens


@pytest.mark.integration
def test_parallel_steps_and_workers_make_the_same_release(lake):
    from tokenmill.runtime.stage import Work

    settings = replace(SMALL, crawls=[FIRST, SECOND], seed=21)
    version = release(lake, settings).counts["version"]
    alone = {k: lake.read_bytes(k) for k in lake.list(f"release/{version}")}
    lake.delete_prefix(f"release/{version}")
    fan_out = stage_named("release").fan_out
    work = Work(lake, "release", settings)
    handed = fan_out.plan(work)
    shares = [fan_out.run(work, handed[step::2], 2) for step in range(2)]  # 2 steps, 2 workers
    assert sum(share["tasks_computed"] for share in shares) >= 3
    assert fan_out.finish(work, shares).counts["version"] == version
    assert {k: lake.read_bytes(k) for k in lake.list(f"release/{version}")} == alone
    assert fan_out.plan(work) == []  # published: nothing left to write


def test_steps_load_the_stored_plan_and_refuse_inputs_changed_since(lake, tmp_path):
    import shutil

    from tokenmill.runtime.phases import PlanChangedError
    from tokenmill.runtime.stage import Work
    from tokenmill.storage.lake import Lake

    copy = Lake.from_url(str(shutil.copytree(lake.real_root, tmp_path / "lake")))
    copy.delete_prefix("release")
    work = Work(copy, "release", replace(SMALL, crawls=[FIRST], seed=41))
    fan_out = stage_named("release").fan_out
    handed = fan_out.plan(work)
    version = handed[0].split("/")[0]
    stored = copy.read_bytes(f"release/{version}/_work/plan.npz")
    from tokenmill.release.plan import Plan

    assert Plan.from_bytes(stored) == plan_release(copy, replace(SMALL, crawls=[FIRST], seed=41))
    unit = registered_units(copy, FIRST)[1]
    marker_key = f"{unit.prefix(TOKENIZED_SHARDS)}/{MARKER}"
    marker = copy.read_json(marker_key)
    marker["outputs"]["00000/tokens.bin"]["sha256"] = "0" * 64  # re-tokenized meanwhile
    copy.write_json(marker_key, marker)
    with pytest.raises(PlanChangedError, match=f"tokenized_shards of {unit.key} changed"):
        fan_out.run(work, handed, 1)
    assert not copy.exists(f"release/{version}/{MARKER}")


def test_crawls_tokenized_with_different_tokenizers_are_refused(lake, tmp_path):
    import shutil

    from tokenmill.storage.lake import Lake
    from tokenmill.tokens.tokenization import TokenizerSettings

    copy = Lake.from_url(str(shutil.copytree(lake.real_root, tmp_path / "lake")))
    run_stage_work(stage_named("tokenizer"), copy, TokenizerSettings(vocab_size=300))
    for unit in registered_units(copy, SECOND):
        run_stage_work(stage_named("tokenized_shards"), copy, unit=unit, workers=1)
    with pytest.raises(ReleaseError, match="different tokenizers") as error:
        plan_release(copy, replace(SMALL, crawls=[FIRST, SECOND]))
    assert FIRST in str(error.value) and SECOND in str(error.value)


@pytest.mark.integration
@pytest.mark.parametrize(
    ("workers", "direct", "gather", "buffered"),
    [
        (1, 256, False, False),
        (2, 256, False, False),
        (1, 2, False, False),
        (2, 3, False, False),
        (1, 256, True, False),
        (2, 3, True, False),
        (1, 256, True, True),
        (1, 2, False, True),
    ],
)
def test_any_routing_gives_the_same_release(lake, monkeypatch, workers, direct, gather, buffered):
    """Route tasks of one file or of several, spill chunks of a few documents or of many,
    shards written in one window or in many, in this process or in workers, one level of
    routing or two, tokens routed or gathered from the input files, shards written past the
    page cache or through it (``buffered``: as where the file system has no direct writes):
    the same bytes as the default."""
    import tokenmill.release.shards as shards
    from tokenmill.release.plan import finish_release

    settings = replace(SMALL, crawls=[FIRST, COPY], seed=31)
    version = release(lake, settings).counts["version"]
    default = {k: lake.read_bytes(k) for k in lake.list(f"release/{version}")}
    lake.delete_prefix(f"release/{version}")
    if workers == 1:  # constants do not reach worker processes
        monkeypatch.setattr(shards, "TOKEN_CHUNK_BYTES", 4096)
        monkeypatch.setattr(shards, "WINDOW_BYTES", 2048)  # a shard written in many windows
        monkeypatch.setattr(shards, "GATHER_WINDOW_BYTES", 2048)
        # routed tokens written through a buffer smaller than some documents
        monkeypatch.setattr(shards, "STAGING_BYTES", 1000)
    if buffered:
        monkeypatch.setattr(shards, "open_direct", lambda path: None)
    monkeypatch.setattr(shards, "BYTES_PER_WORKER", 1)  # workers even for a small release
    plan = plan_release(lake, settings)
    ran = shards.write_release(
        lake, plan, settings, workers=workers, documents=50, direct=direct, gather=gather
    )
    writing = shards.Writing(lake, settings, plan.version, 50, direct, gather)
    splits = len(writing.splits())  # second-level tasks: with more shards than `direct`
    assert (writing.per_bucket > 1) == (splits > 0) == (len(plan.pieces()) > direct)
    assert direct == 256 or splits
    routed = len(shards.route_tasks(plan, 50)) + splits
    assert ran["tasks_computed"] == routed + len(plan.pieces())
    assert len(shards.route_tasks(plan, 50)) > 2
    finish_release(lake, plan, settings)
    assert {k: lake.read_bytes(k) for k in lake.list(f"release/{version}")} == default


def test_a_small_release_is_written_without_worker_processes(lake, monkeypatch):
    """A worker process costs its start-up: a release of few tokens is written in this one."""
    import tokenmill.release.shards as shards

    settings = replace(SMALL, crawls=[FIRST], seed=37)
    plan = plan_release(lake, settings)
    in_process = []
    monkeypatch.setattr(shards, "run_job", lambda *args: in_process.append(args[-1]) or {})
    shards.write_release(lake, plan, settings, workers=2)
    monkeypatch.setattr(shards, "BYTES_PER_WORKER", 1)  # as if it were large
    shards.write_release(lake, plan, settings, workers=2)
    assert in_process == [True, False]


def test_an_input_file_that_disagrees_with_its_marker_fails_naming_it(lake, tmp_path):
    import shutil

    from tokenmill.storage.lake import Lake
    from tokenmill.storage.outputs import MissingInputError

    copy = Lake.from_url(str(shutil.copytree(lake.real_root, tmp_path / "lake")))
    unit = registered_units(copy, FIRST)[0]
    source = f"{unit.prefix(TOKENIZED_SHARDS)}/00001"
    copy.delete_prefix("release")  # the releases earlier tests published
    sidecar = tmp_path / "lake" / source / "provenance.parquet"
    pq.write_table(pq.read_table(sidecar).slice(1), sidecar)  # a row short
    with pytest.raises(MissingInputError, match=f"{source}: .* documents in tokens.idx"):
        release(copy, replace(SMALL, crawls=[FIRST]))
    assert not [key for key in copy.list("release") if "/train-" in key]


@pytest.mark.parametrize("damage", ["truncated", "deleted"])
def test_a_gathered_input_file_damaged_after_the_routing_fails_naming_it(lake, tmp_path, damage):
    import shutil

    from tokenmill.release.shards import Writing, release_job
    from tokenmill.storage.lake import Lake
    from tokenmill.storage.outputs import MissingInputError

    copy = Lake.from_url(str(shutil.copytree(lake.real_root, tmp_path / "lake")))
    copy.delete_prefix("release")
    settings = replace(SMALL, crawls=[FIRST], seed=5)
    plan = plan_release(copy, settings)
    route, shards = release_job(Writing(copy, settings, plan.version, gather=True))
    for task in route.tasks:
        route.run(task)
    source = f"{registered_units(copy, FIRST)[0].prefix(TOKENIZED_SHARDS)}/00001/tokens.bin"
    path = tmp_path / "lake" / source
    if damage == "truncated":
        path.write_bytes(path.read_bytes()[:100])
    else:
        path.unlink()
    with pytest.raises(MissingInputError, match=source):
        for task in shards.tasks:
            shards.run(task)


def test_input_maps_follow_the_file_a_key_names(tmp_path, monkeypatch):
    """A gathering process keeps its maps of the input files from shard to shard: the same file
    gives the same map, a file replaced since (the lake renames new files over old ones) a new
    one, and a map dropped from the cache still reads for the shard holding it."""
    import tokenmill.release.shards as shards
    from tokenmill.storage.lake import Lake

    lake = Lake.from_url(str(tmp_path))
    lake.write_bytes("a/tokens.bin", b"first")
    maps = shards._MappedInputs()
    held = maps.mapped(lake, "a/tokens.bin")
    assert held[:] == b"first"
    assert maps.mapped(lake, "a/tokens.bin") is held
    lake.write_bytes("a/tokens.bin", b"second")
    again = maps.mapped(lake, "a/tokens.bin")
    assert again[:] == b"second" and held[:] == b"first"
    monkeypatch.setattr(shards, "OPEN_INPUTS", 2)
    for name in "bcd":
        lake.write_bytes(f"{name}/tokens.bin", name.encode() * 10)
        maps.mapped(lake, f"{name}/tokens.bin")
    assert list(maps.maps) == ["c/tokens.bin", "d/tokens.bin"] and maps.bytes == 20
    assert again[:] == b"second"
    monkeypatch.setattr(shards, "OPEN_INPUTS", 3)
    monkeypatch.setattr(shards, "GATHER_CACHED_BYTES", 15)  # bytes bound the maps too
    maps.mapped(lake, "a/tokens.bin")
    assert list(maps.maps) == ["a/tokens.bin"] and maps.bytes == 6


def test_the_manifest_names_its_inputs_data(lake):
    from tokenmill.release.plan import unit_digest

    version = release(lake, replace(SMALL, crawls=[FIRST, SECOND])).counts["version"]
    manifest = json.loads(lake.read_bytes(f"release/{version}/manifest.json"))
    inputs = json.loads(lake.read_bytes(f"release/{version}/inputs.json"))
    units = registered_units(lake, FIRST) + registered_units(lake, SECOND)
    assert inputs == {
        u.key: unit_digest(lake.read_json(f"{u.prefix(TOKENIZED_SHARDS)}/{MARKER}")) for u in units
    }
    assert manifest["inputs"]["units"] == len(units)
    assert set(manifest["inputs"]["crawls"]) == {FIRST, SECOND}
    assert manifest["inputs"]["files"] == sum(
        lake.read_json(f"{u.prefix(TOKENIZED_SHARDS)}/{MARKER}")["counts"]["files"] for u in units
    )


def routed_copy(lake, tmp_path):
    """A copy of the test lake whose release (crawl SECOND) is routed, its shards not written:
    the copy, the plan, the writing, and the shard phase."""
    import shutil

    from tokenmill.release.shards import Writing, release_job
    from tokenmill.storage.lake import Lake

    copy = Lake.from_url(str(shutil.copytree(lake.real_root, tmp_path / "lake")))
    copy.delete_prefix("release")
    settings = replace(SMALL, crawls=[SECOND], seed=8)
    plan = plan_release(copy, settings)
    writing = Writing(copy, settings, plan.version)
    route, shards = release_job(writing)
    for task in route.tasks:
        route.run(task)
    return copy, plan, writing, route, shards


def test_routed_tokens_that_disagree_with_their_rows_fail_the_shard_naming_the_file(lake, tmp_path):
    """A routed tokens piece a token short of what its rows say (its file's footer moved):
    the shard that reads it fails naming the file, and writes nothing."""
    from tokenmill.release.shards import RouteError

    copy, plan, writing, _, shards = routed_copy(lake, tmp_path)
    tokens = writing.level("route")[1]
    chunk = next(key for key in copy.list(tokens) if "/_done/" not in key)
    path = tmp_path / "lake" / chunk
    data = bytearray(path.read_bytes())
    ranges = len(plan.pieces())
    ends = np.frombuffer(data[-8 * (ranges + 1) :], "<i8").copy()
    ends[1] -= 2  # range 0 two bytes shorter, range 1 two longer
    data[-8 * (ranges + 1) :] = ends.tobytes()
    path.write_bytes(bytes(data))
    with pytest.raises(RouteError, match=f"routed tokens {chunk} hold"):
        shards.run(shards.tasks[0])
    assert not [key for key in copy.list(plan.prefix) if "/train-" in key]


def test_routed_rows_out_of_position_order_fail_the_shard_naming_the_file(lake, tmp_path):
    """Two documents of a routed piece whose positions were swapped in their rows (their tokens
    then are not where the rows say): the shard fails naming the piece, and writes nothing."""
    import pyarrow as pa

    from tokenmill.release.shards import UNBOUNDED, RouteError
    from tokenmill.storage.spill import SpillWriter, read_sources, task_summary

    copy, plan, writing, route, shards = routed_copy(lake, tmp_path)
    meta, tokens = writing.level("route")
    task, ranges = route.tasks[0], len(plan.pieces())
    tables = [pa.concat_tables(read_sources(copy, [(meta, (task,))], r)) for r in range(ranges)]
    positions, lengths = (tables[0].column(name).to_pylist() for name in ("position", "length"))
    other = next(i for i, length in enumerate(lengths) if length != lengths[0])  # sizes differ
    positions[0], positions[other] = positions[other], positions[0]
    index = tables[0].schema.get_field_index("position")
    tables[0] = tables[0].set_column(index, "position", pa.array(positions, pa.int64()))
    writer = SpillWriter(copy, meta, task, ranges, UNBOUNDED)  # the same file, rewritten
    writer.add(pa.concat_tables(tables), np.repeat(np.arange(ranges), [len(t) for t in tables]))
    writer.commit(task_summary(copy, meta, task))
    with pytest.raises(RouteError, match=f"routed tokens {tokens}/{task}.0000.arrows are not in"):
        shards.run(shards.tasks[0])
    assert not [key for key in copy.list(plan.prefix) if "/train-" in key]


@pytest.fixture(scope="module")
def multilingual(tmp_path_factory):
    """A lake whose recipe keeps every language of a demo crawl (English, and pages in eight
    others), tokenized, and the recipe's zone of it."""
    from tokenmill.recipes.catalog import Dataset
    from tokenmill.recipes.recipe import Recipe

    root = tmp_path_factory.mktemp("languages")
    every = Dataset(Recipe({"clean": {"keep_languages": []}}, "every"), "every")
    lake = tokenized_demo_crawls(root, {FIRST: 6}, files=4, pages_per_file=60, recipe=every)
    return every.lake(lake)


def languages_released(lake, version: str) -> dict[str, set[str]]:
    """Each language's train and valid shard names, from the sidecar rows."""
    found: dict[str, set[str]] = {}
    for name, shard in shards(lake, version).items():
        for row in shard["rows"]:
            found.setdefault(row["language"], set()).add(name)
    return found


def test_languages_weighted_by_temperature_each_shuffled_into_shards_of_their_own(multilingual):
    lake = multilingual
    plain = release(lake, SMALL).counts["version"]
    everything = {
        row["doc_id"]: (row["language"], tokens)
        for shard in shards(lake, plain).values()
        for tokens, row in zip(shard["documents"], shard["rows"], strict=True)
    }
    counted = Counter(language for language, _ in everything.values())
    assert len(counted) >= 4 and counted.most_common(1)[0][0] == "en", counted
    settings = replace(SMALL, language_temperature=0.3)
    version = release(lake, settings).counts["version"]
    assert version != plain
    found = shards(lake, version)
    released = {}
    for name, shard in found.items():
        languages = {row["language"] for row in shard["rows"]}
        assert len(languages) == 1 and name.split("-")[1] in languages, (name, languages)
        for tokens, row in zip(shard["documents"], shard["rows"], strict=True):
            assert row["doc_id"] not in released
            released[row["doc_id"]] = (row["language"], tokens)
        row = shard["rows"][0]  # lineage: the row a document had in its tokenized file
        with lake.open_input(f"{row['source']}/provenance.parquet") as f:
            assert pq.read_table(f).to_pylist()[row["source_doc_index"]]["doc_id"] == row["doc_id"]
    assert released == everything  # every document once, its language and tokens kept
    # the blend: each language's tokens to the power 0.3, normalized, split by tokens
    manifest = json.loads(lake.read_bytes(f"release/{version}/manifest.json"))
    blend = manifest["blend"]
    assert blend["by"] == "language" and blend["temperature"] == 0.3
    tokens = {k: v["tokens"] for k, v in blend["languages"].items()}
    total = sum(tokens.values())
    expected = {k: (t / total) ** 0.3 for k, t in tokens.items()}
    norm = sum(expected.values())
    pairs = lake.read_bytes(f"release/{version}/blend.txt").decode().split()
    by_language = Counter()
    for weight, name in zip(map(float, pairs[::2]), pairs[1::2], strict=True):
        by_language[name.split("-")[1]] += weight
    for language, weight in by_language.items():
        assert abs(weight - expected[language] / norm) < 1e-6, (language, weight)
        share = blend["languages"][language]
        assert abs(share["repeats"] - share["blend_share"] / share["token_share"]) < 1e-3
    small = min(tokens, key=tokens.get)
    assert blend["languages"][small]["repeats"] > 1 > blend["languages"]["en"]["repeats"]


def test_fixed_language_weights_name_every_language_and_the_plain_release_is_unchanged(
    multilingual,
):
    lake = multilingual
    plain = plan_release(lake, SMALL)
    assert "language_weights" not in plain.settings and "blend" not in plain.settings
    languages = sorted(plan_release(lake, replace(SMALL, language_temperature=1.0)).groups)
    with pytest.raises(ReleaseError, match=r"does not weigh the release's languages \["):
        plan_release(lake, replace(SMALL, language_weights={"en": 1.0}))
    weights = dict.fromkeys(languages, 1.0) | {"en": 3.0}
    version = release(lake, replace(SMALL, language_weights=weights)).counts["version"]
    manifest = json.loads(lake.read_bytes(f"release/{version}/manifest.json"))
    shares = {k: v["blend_share"] for k, v in manifest["blend"]["languages"].items()}
    assert abs(shares["en"] - 3 / (len(languages) + 2)) < 1e-6
    with pytest.raises(ValueError, match="cannot be set together"):
        ReleaseSettings(language_temperature=0.3, weights={FIRST: 1.0})
    with pytest.raises(ValueError, match="language_temperature 2 is not in"):
        ReleaseSettings(language_temperature=2)
