"""Clustering in parts decides exactly as clustering the whole crawl in memory; parts resume
after a kill; bad input fails naming the file and commits nothing."""

from __future__ import annotations

import multiprocessing
import os
import signal
import time
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import polars as pl
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from testkit.in_memory_clusters import UnionFind, choose_survivors
from tests.test_dedup import (
    CRAWL,
    QUALITY_SCHEMA,
    doc,
    near_copy,
    survivor_crawl,
    write_crawl,
)
from tokenmill.crawl.units import registered_units, write_batch
from tokenmill.dedup.clustering import (
    PARTS,
    RANK_COLUMNS,
    cluster_crawl,
    cluster_job,
    plan_clustering,
    prepare,
    ranges_for,
    run_clustering,
)
from tokenmill.dedup.settings import CLUSTERS_FILE, SURVIVOR_RULES, DedupSettings
from tokenmill.dedup.signature_files import SignatureFileError, crawl_signatures
from tokenmill.runtime import phases
from tokenmill.runtime.parts import run_stage_work
from tokenmill.runtime.phases import SLOTS, PlanChangedError
from tokenmill.runtime.stage import Work
from tokenmill.stages import stage_named
from tokenmill.storage.lake import Lake
from tokenmill.storage.layout import (
    DEDUP_CLUSTERS,
    DEDUP_SIGNATURES,
    LANDING,
    MARKER,
    Unit,
    crawl_prefix,
    signature_schema,
    unit_name,
)
from tokenmill.storage.outputs import PartitionWriter, StageReport, combine
from tokenmill.storage.spill import SpillFileError, task_summary

WORK = f"{PARTS}/{CRAWL}"
CLUSTERS_KEY = f"{crawl_prefix(DEDUP_CLUSTERS, CRAWL)}/{CLUSTERS_FILE}"


def in_memory_removals(lake: Lake, rule: str) -> list[dict]:
    """The removed list as clustering the whole crawl in one process decides it (the stage
    before parts): every key column grouped over all documents with polars, a union-find over
    all documents, a rank over all documents."""
    files = crawl_signatures(lake, registered_units(lake, CRAWL))
    table = pa.concat_tables(pq.read_table(lake.path(key)) for key in files.keys)
    frame = pl.from_arrow(table).with_row_index("doc")
    uf = UnionFind(len(frame))
    for column in files.columns:
        first = frame.select("doc", pl.col("doc").min().over(column).alias("first"))
        uf.union_pairs(first["first"].to_numpy(), first["doc"].to_numpy())
    components = uf.roots()
    rank = None
    if rule in RANK_COLUMNS:
        column, descending = RANK_COLUMNS[rule]
        rank = frame[column].rank("dense", descending=descending).fill_null(len(frame) + 1)
    survivors = choose_survivors(components, None if rank is None else rank.to_numpy())
    removed = np.flatnonzero(survivors != np.arange(len(frame)))
    unit = np.repeat(np.array(files.units), files.rows)
    part = np.repeat(np.array(files.parts), files.rows)
    doc_id, exact = frame["doc_id"].to_list(), frame["exact_hash"].to_numpy()
    return [
        {
            "unit": unit[d],
            "part": part[d],
            "doc_id": doc_id[d],
            "cluster_id": doc_id[components[d]],
            "survivor_unit": unit[survivors[d]],
            "survivor_doc_id": doc_id[survivors[d]],
            "reason": "exact_duplicate" if exact[d] == exact[survivors[d]] else "near_duplicate",
        }
        for d in removed.tolist()
    ]


def removed_list(lake: Lake) -> list[dict]:
    return pq.read_table(lake.path(CLUSTERS_KEY)).to_pylist()


def cluster(
    lake: Lake,
    settings: DedupSettings,
    ranges: int | None = None,
    max_keys: int | None = None,
    node_width: int | None = None,
) -> StageReport:
    """The dedup_clusters stage; with ``ranges`` key ranges per column, at most ``max_keys``
    keys held by a part and ranges of ``node_width`` documents if given (the stage plans them
    from the crawl's size and ``cluster_memory_gb``), its work files then kept."""
    if ranges is None and node_width is None:
        return run_stage_work(stage_named(DEDUP_CLUSTERS), lake, settings, crawl=CRAWL)
    units = registered_units(lake, CRAWL)
    report = StageReport()
    with PartitionWriter(lake, crawl_prefix(DEDUP_CLUSTERS, CRAWL), report) as out:
        cluster_crawl(
            lake, units, settings, out, ranges=ranges, max_keys=max_keys, node_width=node_width
        )
    return report


def phase_summaries(lake: Lake, phase: str) -> list[dict]:
    """The summaries of a phase's committed tasks (their markers outlive the run's files)."""
    (fingerprint,) = lake.list_dirs(WORK)
    prefix = f"{WORK}/{fingerprint}"
    return [
        task_summary(lake, f"{prefix}/{name}", key.rsplit("/", 1)[1].removesuffix(".json"))
        for name in lake.list_dirs(prefix)
        if name.startswith(phase)
        for key in lake.list(f"{prefix}/{name}/_done")
    ]


# Slices of the planted crawl's documents as (unit, files): units of several files, empty files
# (first, last, and a unit of one empty file).
PLANTED_UNITS = ((0, 1), (2, 3, 4), (5,))


def planted_crawl(lake: Lake, n_docs: int = 6000, seed: int = 0, heavy: float = 0.0) -> None:
    """Signature files with many collisions: keys drawn from small ranges (chains across bands,
    files and units), exact copies, ties and nulls in every rank column, empty files; a
    ``heavy`` share of the documents copies of one page (one exact hash, one first band)."""
    rng = np.random.default_rng(seed)
    bands = DedupSettings().banding()[0]
    exact = rng.integers(0, n_docs, n_docs).astype(np.uint64) * np.uint64(0x9E3779B97F4A7C15)
    columns = {"exact_hash": exact}
    for band in range(bands):
        keys = rng.integers(0, 2**64 - 1, n_docs, dtype=np.uint64, endpoint=True)
        linked = rng.random(n_docs) < 0.05
        keys[linked] = rng.integers(0, n_docs // 20, linked.sum()).astype(np.uint64) << np.uint64(
            50
        )
        columns[f"band_{band:02d}"] = keys
    copies = rng.random(n_docs) < heavy
    exact[copies] = columns["band_00"][copies] = np.uint64(12345)
    dates = rng.choice(["2026-01-01", "2026-01-02", "2026-01-03", None], n_docs).tolist()
    quality = rng.choice([0.1, 0.5, 0.9, -np.inf], n_docs)
    doc_ids = [f"d{v}" for v in rng.permutation(n_docs * 3)[:n_docs].tolist()]
    table = pa.table(
        {"doc_id": doc_ids, "warc_date": dates, "exact_hash": exact, "quality_score": quality}
        | columns
        | {
            "text_key": rng.integers(0, 2**64 - 1, n_docs, dtype=np.uint64, endpoint=True),
            "words": rng.integers(0, 2000, n_docs).astype(np.uint32),
        }
    )
    bounds = np.linspace(0, n_docs, 5).astype(int).tolist()
    slices = [
        table.slice(start, end - start)
        for start, end in zip([0, *bounds], [*bounds, n_docs], strict=True)
    ]
    for index, members in enumerate(PLANTED_UNITS):
        write_signatures(lake, Unit(CRAWL, unit_name(index)), [slices[i] for i in members])


def write_signatures(lake: Lake, unit: Unit, parts: list[pa.Table], **params) -> None:
    """A registered unit whose files' signatures are ``parts``, committed as the stage does."""
    files = [f"{LANDING}/{unit.crawl}/{unit.name}-{p}.warc.gz" for p in range(len(parts))]
    assert write_batch(lake, unit.crawl, int(unit.name), [files]) == [unit]
    settings = DedupSettings(**params)
    schema = signature_schema(settings.banding()[0])
    reports = {}
    for part, table in enumerate(parts):
        report = StageReport(records_in=table.num_rows, records_out=table.num_rows)
        report.counts["params"] = settings.signature_params()
        with PartitionWriter(lake, unit.part_prefix(DEDUP_SIGNATURES, part), report) as out:
            sink = out.parquet("signatures.parquet", schema)
            for batch in table.to_batches(max_chunksize=700):  # several row groups per file
                sink.write_table(pa.Table.from_batches([batch]))
        reports[f"{part:05d}"] = report
    total = combine(reports)
    total.counts["files"] = len(parts)
    lake.write_json(f"{unit.prefix(DEDUP_SIGNATURES)}/{MARKER}", total.summary())


def signatures(lake: Lake):
    return crawl_signatures(lake, registered_units(lake, CRAWL))


@pytest.mark.parametrize("rule", SURVIVOR_RULES)
@pytest.mark.parametrize(("ranges", "node_width"), [(None, None), (8, None), (2, 1000), (8, 700)])
def test_planted_duplicates_same_removals_as_in_memory(lake, rule, ranges, node_width):
    """In memory, in parts read from the signature files (1 or 2 ranges) or from their keys
    scattered to ranges (8), with components by star rounds over one range of documents or
    ranges of 1,000 or 700 documents (6 or 9 ranges)."""
    planted_crawl(lake)
    expected = in_memory_removals(lake, rule)
    assert len(expected) > 1000  # many clusters, many of them chained across bands
    assert {row["reason"] for row in expected} == {"exact_duplicate", "near_duplicate"}
    assert len({(row["unit"], row["part"]) for row in expected}) == 4  # every non-empty file
    report = cluster(lake, DedupSettings(survivor=rule), ranges, node_width=node_width)
    assert removed_list(lake) == expected
    assert report.counts["parts"] == 15 * (ranges or 1)
    assert report.counts["document_ranges"] == -(-6000 // node_width) if node_width else 1
    assert report.records_out == 6000 - len(expected)
    if ranges is None:  # the stage: the work files are gone once the list is committed
        assert lake.list(WORK) == []
    else:
        assert phase_summaries(lake, "scatter" if ranges > 2 else "parts")
        assert phase_summaries(lake, "small")  # star rounds, over one range or several


def test_worker_processes_write_the_same_bytes(lake):
    planted_crawl(lake)
    cluster(lake, DedupSettings(survivor="earliest_date"), ranges=4)
    alone = lake.read_bytes(CLUSTERS_KEY)
    settings = DedupSettings(survivor="earliest_date", cluster_workers=2)
    cluster(lake, settings, ranges=4)
    assert lake.read_bytes(CLUSTERS_KEY) == alone
    cluster(lake, settings)
    assert lake.read_bytes(CLUSTERS_KEY) == alone


def stage_fixture_crawls(lake: Lake, sources) -> list[Lake]:
    """The crawls of test_dedup's lineage and survivor tests, through the signature stage."""
    a, b, c, d = (article.text for article in sources[:4])
    write_crawl(
        lake,
        [
            [doc("a", a), doc("b", b), doc("c", c)],
            [doc("a2", "  " + a.upper()), doc("b2", near_copy(sources[1], 1))],
            [doc("d", d), doc("a3", a), doc("b3", near_copy(sources[1], 2)), doc("e", "")],
        ],
    )
    survivors = Lake.from_url(lake.path("survivors"))
    survivor_crawl(survivors, sources, QUALITY_SCHEMA)
    for each in (lake, survivors):
        for unit in registered_units(each, CRAWL):
            run_stage_work(stage_named(DEDUP_SIGNATURES), each, DedupSettings(), unit=unit)
    return [lake, survivors]


@pytest.mark.parametrize("rule", SURVIVOR_RULES)
def test_stage_fixtures_same_removals_as_in_memory(lake, articles, rule):  # noqa: F811
    for each in stage_fixture_crawls(lake, articles):
        for ranges in (None, 4):
            cluster(each, DedupSettings(survivor=rule), ranges)
            assert removed_list(each) == in_memory_removals(each, rule)
            assert len(removed_list(each)) >= 3


def run_clustering_in_own_group(lake: Lake, plan) -> None:
    os.setpgrp()  # its worker processes too: the machine dies, not one process
    run_clustering(lake, plan, workers=2)


def work_files(lake: Lake) -> dict[str, bytes]:
    """The work's files and markers (not the claims: who computed a task, and when)."""
    return {key: lake.read_bytes(key) for key in lake.list(WORK) if "/_claims/" not in key}


@pytest.mark.integration
def test_killed_run_resumes_from_its_committed_tasks(lake):
    """Killed after some tasks committed (several phases: scattered parts, star rounds), a
    run computes only the others; the work files and the removed list are those of a run
    never killed."""
    planted_crawl(lake, n_docs=4000)
    plan = plan_clustering(signatures(lake), WORK, 4 << 30, ranges=8, node_width=300)
    prepare(lake, plan)
    context = multiprocessing.get_context("spawn")
    child = context.Process(target=run_clustering_in_own_group, args=(lake, plan))
    child.start()
    deadline = time.monotonic() + 120
    while len([k for k in lake.list(WORK) if "/_done/" in k]) < 40:
        assert time.monotonic() < deadline and child.is_alive()
        time.sleep(0.005)
    os.killpg(child.pid, signal.SIGKILL)
    child.join()
    time.sleep(0.5)  # the group's last process gone
    committed = [k for k in lake.list(WORK) if "/_done/" in k]
    resumed = run_clustering(lake, plan)
    assert resumed["tasks_found"] >= len(committed) > 0
    assert resumed["tasks_computed"] > 0
    after_kill = work_files(lake)
    lake.delete_prefix(WORK)
    never_killed = run_clustering(lake, plan)
    assert never_killed["tasks_found"] == 0
    assert work_files(lake) == after_kill
    assert run_clustering(lake, plan) == {
        "tasks_computed": 0,
        "tasks_found": never_killed["tasks_computed"],
    }


def test_work_of_other_inputs_is_not_reused(lake):
    planted_crawl(lake, n_docs=2000)
    first = plan_clustering(signatures(lake), WORK, 4 << 30, ranges=2)
    prepare(lake, first)
    run_clustering(lake, first)
    empty = pa.Table.from_batches([], signature_schema(14))
    write_signatures(lake, Unit(CRAWL, unit_name(len(PLANTED_UNITS))), [empty])
    second = plan_clustering(signatures(lake), WORK, 4 << 30, ranges=2)
    assert second.prefix != first.prefix
    prepare(lake, second)
    assert lake.list(WORK) == []  # the old run's work is deleted
    assert run_clustering(lake, second)["tasks_found"] == 0


@pytest.mark.parametrize("workers", [1, 2])
def test_skewed_keys_stay_within_the_part_memory(lake, workers):
    """A third of the crawl is one page: its key crowds one range of two columns, and the
    many exact copies one range of the exact hash. Parts holding at most 400 keys split those
    ranges into blocks and decide exactly as in memory."""
    planted_crawl(lake, heavy=0.3)
    expected = in_memory_removals(lake, "first_seen")
    settings = DedupSettings(cluster_workers=workers)
    cluster(lake, settings, ranges=8, max_keys=400)
    assert removed_list(lake) == expected
    parts = phase_summaries(lake, "parts")
    assert len(parts) == 15 * 8
    assert max(p["keys"] for p in parts) > 1800  # the heavy ranges: 6000 / 8 + 0.3 * 6000
    assert max(p["peak_keys"] for p in parts) <= 400
    assert max(p["blocks"] for p in parts) > 4
    lake.delete_prefix(WORK)
    cluster(lake, settings, ranges=8, max_keys=10**9)
    unbounded = phase_summaries(lake, "parts")
    assert max(p["peak_keys"] for p in unbounded) > 1800  # what the bound prevented
    assert {p["blocks"] for p in unbounded} == {1}


def test_ranges_grow_with_the_crawl_not_the_part_memory():
    assert ranges_for(1_000_000, 4 << 30) == 1
    assert ranges_for(10**9, 4 << 30) == 32
    assert ranges_for(10**9, 8 << 30) == 16


# --- bad input: the run fails naming the file and commits nothing -----------------------------


def nothing_committed(lake: Lake) -> bool:
    return not lake.exists(f"{crawl_prefix(DEDUP_CLUSTERS, CRAWL)}/{MARKER}")


def test_unit_signed_with_other_parameters(lake):
    planted_crawl(lake, n_docs=500)
    odd = Unit(CRAWL, unit_name(7))
    empty = pa.Table.from_batches([], signature_schema(10))
    write_signatures(lake, odd, [empty], bands=10, rows=10)
    with pytest.raises(ValueError, match=f"different parameters.*{odd.prefix(DEDUP_SIGNATURES)}"):
        cluster(lake, DedupSettings())
    assert nothing_committed(lake)


def test_unit_marker_without_a_file(lake):
    planted_crawl(lake, n_docs=500)
    unit = Unit(CRAWL, unit_name(1))
    key = f"{unit.prefix(DEDUP_SIGNATURES)}/{MARKER}"
    marker = lake.read_json(key)
    del marker["outputs"]["00001/signatures.parquet"]
    lake.write_json(key, marker)
    with pytest.raises(SignatureFileError, match=f"{key[: -len(MARKER) - 1]}.*no 00001/"):
        cluster(lake, DedupSettings())
    assert nothing_committed(lake)


def overwrite_footer(path: str) -> None:
    with open(path, "r+b") as f:
        f.seek(-8, os.SEEK_END)
        f.write(b"garbage!")


@pytest.mark.parametrize(
    ("damage", "message"),
    [
        (lambda path: os.remove(path), "is missing"),
        (lambda path: os.truncate(path, os.path.getsize(path) // 2), "truncated"),
        (overwrite_footer, "unreadable"),
    ],
)
def test_damaged_signature_file(lake, damage, message):
    planted_crawl(lake, n_docs=3000)
    key = f"{Unit(CRAWL, unit_name(1)).part_prefix(DEDUP_SIGNATURES, 1)}/signatures.parquet"
    damage(lake.path(key))
    with pytest.raises(SignatureFileError, match=f"{key}.*{message}|{message}.*{key}"):
        cluster(lake, DedupSettings(), ranges=2)
    assert nothing_committed(lake)


def test_work_file_lost_under_a_run_fails_naming_it(lake):
    planted_crawl(lake, n_docs=2000)
    plan = plan_clustering(signatures(lake), WORK, 4 << 30, ranges=4, node_width=400)
    prepare(lake, plan)
    run_clustering(lake, plan)
    (lost, *_) = [k for k in lake.list(f"{plan.prefix}/removed") if k.endswith(".arrows")]
    lake.delete(lost)
    with pytest.raises(SpillFileError, match=f"{lost} is missing"):
        cluster(lake, DedupSettings(), ranges=4, node_width=400)
    assert nothing_committed(lake)


# --- fanned out (parallel steps): plan, shares, finish ----------------------------------------


def fan_out(lake: Lake, shares: int) -> tuple[list[str], list[dict]]:
    """The stage's plan and its parts in ``shares`` shares, as parallel steps would run them."""
    stage, work = stage_named(DEDUP_CLUSTERS), Work(lake, DEDUP_CLUSTERS, crawl=CRAWL)
    keys = stage.fan_out.plan(work)
    return keys, [stage.fan_out.run(work, keys[i::shares], 1) for i in range(shares)]


def finish(lake: Lake, summaries: list[dict]) -> StageReport:
    work = Work(lake, DEDUP_CLUSTERS, crawl=CRAWL)
    return stage_named(DEDUP_CLUSTERS).fan_out.finish(work, summaries)


def test_shares_in_parallel_steps_write_what_one_step_writes(lake):
    planted_crawl(lake, n_docs=3000)
    cluster(lake, DedupSettings())
    one_step = lake.read_bytes(CLUSTERS_KEY)
    keys, summaries = fan_out(lake, shares=3)  # one after another, as a busy cluster runs them
    assert len(keys) == SLOTS
    assert summaries[0]["tasks_computed"] > 0  # the first computes all: no one holds a claim
    assert [s["tasks_computed"] for s in summaries[1:]] == [0, 0]
    report = finish(lake, summaries)
    assert lake.read_bytes(CLUSTERS_KEY) == one_step
    assert report.counts["parallel_steps"] == 3
    assert lake.list(WORK) == []  # committed: the work is spent


def test_work_file_lost_between_the_steps_fails_the_finish_naming_it(lake):
    planted_crawl(lake, n_docs=2000)
    keys, summaries = fan_out(lake, shares=2)
    (lost, *_) = [k for k in lake.list(WORK) if "/removed/r" in k]
    lake.delete(lost)
    with pytest.raises(SpillFileError, match=f"{lost} is missing"):
        finish(lake, summaries)
    assert nothing_committed(lake)


def test_signatures_changed_after_the_plan_fail_the_share(lake):
    planted_crawl(lake, n_docs=2000)
    stage, work = stage_named(DEDUP_CLUSTERS), Work(lake, DEDUP_CLUSTERS, crawl=CRAWL)
    keys = stage.fan_out.plan(work)
    empty = pa.Table.from_batches([], signature_schema(14))
    write_signatures(lake, Unit(CRAWL, unit_name(len(PLANTED_UNITS))), [empty])
    with pytest.raises(PlanChangedError, match="planned for other signature files"):
        stage.fan_out.run(work, keys[:1], 1)


def test_plan_checks_every_signature_file_before_any_part(lake):
    planted_crawl(lake, n_docs=3000)
    key = f"{Unit(CRAWL, unit_name(2)).part_prefix(DEDUP_SIGNATURES, 0)}/signatures.parquet"
    os.truncate(lake.path(key), 100)
    with pytest.raises(SignatureFileError, match=f"{key} has 100 bytes.*truncated"):
        fan_out(lake, shares=2)
    assert lake.list(WORK) == [] and nothing_committed(lake)


@pytest.mark.integration
def test_steps_running_at_once_share_every_phase(lake):
    """Two steps at once (threads here, pods in production) share the tasks of every phase
    by their claims, and the removed list is the one a single step writes."""
    planted_crawl(lake, n_docs=4000)
    expected = in_memory_removals(lake, "first_seen")
    plan = plan_clustering(signatures(lake), WORK, 4 << 30, ranges=8, node_width=500)
    prepare(lake, plan)
    with ThreadPoolExecutor(2) as pool:
        steps = list(pool.map(lambda step: run_clustering(lake, plan, 1, step, 2), [0, 1]))
    total = len([k for k in lake.list(WORK) if "/_done/" in k])
    assert min(s["tasks_computed"] for s in steps) > 0  # both did a share
    assert total <= sum(s["tasks_computed"] for s in steps) < 1.1 * total  # few twice
    cluster(lake, DedupSettings(), ranges=8, node_width=500)
    assert removed_list(lake) == expected


def test_a_stale_claim_is_taken_over_a_fresh_one_waited_for(lake, monkeypatch):
    planted_crawl(lake, n_docs=1000)
    plan = plan_clustering(signatures(lake), WORK, 4 << 30, ranges=4)
    prepare(lake, plan)
    first = next(iter(cluster_job(lake, plan)))
    for task in first.tasks:  # a step that died holding every task of the first phase
        lake.write_json(first.claims.key(task), {"owner": "gone", "time": time.time() - 3600})
    assert run_clustering(lake, plan)["tasks_computed"] > len(first.tasks)
    lake.delete_prefix(WORK)
    monkeypatch.setattr(phases, "STALE_AFTER_S", 1.5)
    prepare(lake, plan)
    lake.write_json(first.claims.key(first.tasks[0]), {"owner": "alive", "time": time.time()})
    started = time.monotonic()
    run_clustering(lake, plan)  # waits for the live claim until it goes stale, then computes
    assert time.monotonic() - started > 1.0
