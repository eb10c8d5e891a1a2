"""Dedup clustering at crawl scale: synthetic signatures with planted duplicates, clustered by
the stage's own code (``cluster_crawl``), scored against the plant.

    uv run python benchmarks/bench_dedup_scale.py --docs 10000000 --out /tmp/scale [--workers 2]

Document i is planted by its position in its block of 100: 87 originals; 3 exact copies and 8
near copies of an earlier original, a near copy sharing k = 1..13 of the 14 bands with it (LSH
links it); 2 "far" copies sharing no key (J below the threshold: they must survive). With
--copies C, C of every 100 are copies (3:8 exact to near) instead of 11: 22 links ~40 %. Every key
is a hash of (document, column), so the signature files are generated one row group at a time,
in bounded memory: units of --files-per-unit files of --file-docs documents each. Signatures
already generated under --out for the same sizes are reused.
With --steps N the stage runs fanned out as Dagster's parallel steps run it: a plan process, N
processes at once each computing a share of the parts, a finish process.
--memory-gb takes several bounds (``--memory-gb 4 0.25``): each is clustered in turn on the same
signatures, for a ratio measured in one session. Bytes read are every read system call's bytes
of the clustering processes (``rchar``: signature and work files, page cache or disk).
It prints a table, then, last, one JSON object per run: docs, seconds (clustering), peak_rss_mb
(largest process: the clustering process, one of its workers or steps), recall, precision,
bytes read and written, more.
"""

from __future__ import annotations

import argparse
import functools
import json
import resource
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from benchmarks.lake_units import write_unit
from benchmarks.measure import in_fresh_process, print_table, timed
from benchmarks.results import record
from tokenmill.dedup.settings import CLUSTERS_FILE, DedupSettings
from tokenmill.runtime.parts import run_stage_work
from tokenmill.runtime.stage import Work
from tokenmill.stages import stage_named
from tokenmill.storage.lake import Lake
from tokenmill.storage.layout import (
    DEDUP_CLUSTERS,
    DEDUP_SIGNATURES,
    MANIFESTS,
    Unit,
    band_column,
    crawl_prefix,
    signature_schema,
    unit_name,
)

CRAWL = "CC-MAIN-SCALE"
BLOCK, FAR = 100, 2  # per block: originals, exact and near copies, then FAR far copies
FILE_DOCS = 100_000  # a Common Crawl WARC file holds ~30-40k documents
FILES_PER_UNIT = 10
ROW_GROUP = 250_000
SETTINGS = DedupSettings()
BANDS = SETTINGS.banding()[0]
PARAMS = {"params": SETTINGS.signature_params()}
DONE = "bench.json"


def mix(x: np.ndarray) -> np.ndarray:
    """splitmix64: a key per (document, column) that no other pair shares."""
    with np.errstate(over="ignore"):
        x = x + np.uint64(0x9E3779B97F4A7C15)
        x = (x ^ (x >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
        x = (x ^ (x >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
        return x ^ (x >> np.uint64(31))


def key(docs: np.ndarray, column: int) -> np.ndarray:
    return mix(docs.astype(np.uint64) * np.uint64(64) + np.uint64(column))


def layout(copies: int) -> tuple[int, int, int]:
    """(originals, exact, near) of a block with ``copies`` copies."""
    exact = round(copies * 3 / 11)
    return BLOCK - FAR - copies, exact, copies - exact


def source(docs: np.ndarray, copies: int) -> np.ndarray:
    """An original document before each document (used by copies only)."""
    originals = layout(copies)[0]
    block = (key(docs, 40) % (docs // BLOCK + 1).astype(np.uint64)).astype(np.int64)
    return block * BLOCK + (key(docs, 41) % np.uint64(originals)).astype(np.int64)


def kind(docs: np.ndarray, copies: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    originals, exact_copies, near_copies = layout(copies)
    position = docs % BLOCK
    exact = (position >= originals) & (position < originals + exact_copies)
    near = (position >= originals + exact_copies) & (
        position < originals + exact_copies + near_copies
    )
    return exact, near, exact | near  # the last: planted duplicates


def shared_bands(docs: np.ndarray) -> np.ndarray:
    """k = 1..BANDS-1 bands a near copy shares with its source."""
    return 1 + (key(docs, 42) % np.uint64(BANDS - 1)).astype(np.int64)


def signatures(docs: np.ndarray, copies: int) -> pa.Table:
    exact, near, _ = kind(docs, copies)
    src = source(docs, copies)
    start = (key(docs, 43) % np.uint64(BANDS)).astype(np.int64)
    k = shared_bands(docs)
    columns = {"exact_hash": np.where(exact, key(src, 0), key(docs, 0))}
    for band in range(BANDS):
        shares = exact | (near & ((band - start) % BANDS < k))
        columns[band_column(band)] = np.where(shares, key(src, band + 1), key(docs, band + 1))
    return pa.table(
        {
            "doc_id": pa.array(docs).cast(pa.string()),
            "warc_date": pa.nulls(len(docs), pa.string()),
            "quality_score": np.zeros(len(docs)),
        }
        | columns
    )


def generate(root: str, sizes: dict) -> None:
    lake = Lake.from_url(root)
    n_docs, file_docs, files_per_unit = sizes["docs"], sizes["file_docs"], sizes["files_per_unit"]
    files = list(range(0, n_docs, file_docs))
    for index, first in enumerate(range(0, len(files), files_per_unit)):
        starts = files[first : first + files_per_unit]
        parts = [
            functools.partial(write_file, s, min(s + file_docs, n_docs), sizes["copies"])
            for s in starts
        ]
        write_unit(lake, DEDUP_SIGNATURES, Unit(CRAWL, unit_name(index)), parts, PARAMS)
    lake.write_json(DONE, sizes)


def write_file(start: int, end: int, copies: int, out) -> None:
    sink = out.parquet("signatures.parquet", signature_schema(BANDS))
    for low in range(start, end, ROW_GROUP):
        sink.write_table(signatures(np.arange(low, min(low + ROW_GROUP, end)), copies))
    out.report.records_in = out.report.records_out = end - start


def cluster(root: str, workers: int, memory_gb: float) -> tuple[dict, int]:
    settings = DedupSettings(cluster_workers=workers, cluster_memory_gb=memory_gb)
    report = run_stage_work(stage_named(DEDUP_CLUSTERS), Lake.from_url(root), settings, crawl=CRAWL)
    return report.summary() | {"counts": report.counts, "read": bytes_read()}, children_peak()


def children_peak() -> int:
    return resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss * 1024


def bytes_read() -> int:
    """Bytes this process read by system calls (its worker processes' are not counted: the
    benchmark runs one worker, in process)."""
    with open("/proc/self/io") as f:
        return int(next(line for line in f if line.startswith("rchar:")).split()[1])


def cluster_in_steps(root: str, workers: int, memory_gb: float, steps: int) -> tuple[dict, int]:
    """The stage fanned out as Dagster runs it with ``parallel_steps``: a plan process, then
    ``steps`` processes at once each computing a share of the parts (the pods), then a finish
    process. (summary, peak RSS of the largest of them)."""
    settings = DedupSettings(cluster_workers=workers, cluster_memory_gb=memory_gb)
    work = Work(Lake.from_url(root), DEDUP_CLUSTERS, settings, crawl=CRAWL)
    keys, _, peak = in_fresh_process(functools.partial(planned, work))
    keys, read = keys
    with ThreadPoolExecutor(steps) as pool:
        shares = list(
            pool.map(
                lambda i: in_fresh_process(functools.partial(share, work, keys[i::steps], workers)),
                range(steps),
            )
        )
    peaks = [peak, *(max(p, children) for (_, children), _, p in shares)]
    read += sum(summary["read"] for (summary, _), _, _ in shares)
    finish = functools.partial(finished, work, [summary for (summary, _), _, _ in shares])
    (report, finish_read), _, peak = in_fresh_process(finish)
    read += finish_read
    return report.summary() | {"counts": report.counts, "read": read}, max(peak, *peaks)


def planned(work: Work) -> tuple[list[str], int]:
    return stage_named(DEDUP_CLUSTERS).fan_out.plan(work), bytes_read()


def share(work: Work, keys: list[str], workers: int) -> tuple[dict, int]:
    summary = stage_named(DEDUP_CLUSTERS).fan_out.run(work, keys, workers)
    return summary | {"read": bytes_read()}, children_peak()


def finished(work: Work, shares: list[dict]):
    return stage_named(DEDUP_CLUSTERS).fan_out.finish(work, shares), bytes_read()


def score(root: str, n_docs: int, copies: int) -> dict:
    """Recall and precision of the removed list against the planted duplicates, streamed."""
    lake = Lake.from_url(root)
    hits = removed = right_survivor = 0
    with lake.open_input(f"{crawl_prefix(DEDUP_CLUSTERS, CRAWL)}/{CLUSTERS_FILE}") as f:
        for batch in pq.ParquetFile(f).iter_batches(columns=["doc_id", "survivor_doc_id"]):
            docs = batch.column(0).cast(pa.int64()).to_numpy()
            planted = kind(docs, copies)[2]
            hits += int(planted.sum())
            removed += len(docs)
            survivor = batch.column(1).cast(pa.int64()).to_numpy()
            right_survivor += int((planted & (survivor == source(docs, copies))).sum())
    truth = sum(
        int(kind(np.arange(low, min(low + ROW_GROUP, n_docs)), copies)[2].sum())
        for low in range(0, n_docs, ROW_GROUP)
    )
    return {
        "recall": hits / max(truth, 1),
        "precision": hits / max(removed, 1),
        "planted": truth,
        "removed": removed,
        "survivor_is_source": right_survivor / max(hits, 1),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--docs", type=int, required=True)
    parser.add_argument("--out", required=True, help="lake folder for the synthetic crawl")
    parser.add_argument("--workers", type=int, default=1)
    parser.add_argument("--file-docs", type=int, default=FILE_DOCS, help="documents per file")
    parser.add_argument("--files-per-unit", type=int, default=FILES_PER_UNIT)
    parser.add_argument(
        "--memory-gb", type=float, nargs="+", default=[DedupSettings().cluster_memory_gb]
    )
    parser.add_argument("--copies", type=int, default=11, help="copies per 100 documents")
    parser.add_argument(
        "--steps",
        type=int,
        nargs="+",
        default=[0],
        help="run the stage fanned out, in this many share processes at once (0: one step); "
        "several: each in turn",
    )
    args = parser.parse_args()
    lake = Lake.from_url(args.out)
    generated = {}
    sizes = {
        "docs": args.docs,
        "file_docs": args.file_docs,
        "files_per_unit": args.files_per_unit,
        "copies": args.copies,
    }
    if not lake.exists(DONE) or lake.read_json(DONE) != sizes:
        lake.delete_prefix(DEDUP_SIGNATURES)
        lake.delete_prefix(MANIFESTS)
        _, seconds, peak = in_fresh_process(functools.partial(generate, args.out, sizes))
        generated = {"generate_seconds": round(seconds, 1), "generate_peak_rss_mb": peak >> 20}
        print(json.dumps(generated), flush=True)
    signature_bytes = sum(lake.size(k) for k in lake.list(DEDUP_SIGNATURES))
    results = []
    for memory_gb in args.memory_gb:
        for steps in args.steps:
            results.append(run(args, lake, memory_gb, steps) | generated)
            results[-1]["signature_bytes"] = signature_bytes
            print(json.dumps(results[-1]), flush=True)
    print_table(
        "dedup_clusters at scale (bench_dedup_scale.py)",
        [
            "docs",
            "linked",
            "memory GiB",
            "parallel steps",
            "seconds",
            "peak RSS MiB",
            "read / signatures",
            "written GB",
            "recall",
            "precision",
        ],
        [
            [
                r["docs"],
                f"{r['linked_docs'] / r['docs']:.0%}",
                r["memory_gb"],
                r["steps"] or "-",
                r["seconds"],
                r["peak_rss_mb"],
                f"{r['bytes_read'] / signature_bytes:.2f}",
                round(r["work_bytes_written"] / 1e9, 2),
                round(r["recall"], 4),
                round(r["precision"], 4),
            ]
            for r in results
        ],
    )
    for result in results:
        print(json.dumps(result))
    planted = {
        "data": "synthetic MinHash signatures with planted exact and near copies",
        "documents": args.docs,
        "copies_per_100": args.copies,
        "signature_bytes": signature_bytes,
    }
    record("bench_dedup_scale", {"runs": results}, planted)


def run(args, lake: Lake, memory_gb: float, steps: int) -> dict:
    lake.delete_prefix(DEDUP_CLUSTERS)
    if steps:
        (summary, children), seconds = timed(
            functools.partial(cluster_in_steps, args.out, args.workers, memory_gb, steps)
        )
        peak = 0
    else:
        (summary, children), seconds, peak = in_fresh_process(
            functools.partial(cluster, args.out, args.workers, memory_gb)
        )
    counts = summary["counts"]
    return {
        "docs": args.docs,
        "seconds": round(seconds, 1),
        "peak_rss_mb": max(peak, children) >> 20,
        **score(args.out, args.docs, args.copies),
        "workers": args.workers,
        "steps": steps,
        "files": counts["files"],
        "units": counts["units"],
        "memory_gb": memory_gb,
        "parts": counts["parts"],
        "key_ranges": counts["key_ranges"],
        "document_ranges": counts["document_ranges"],
        "linked_docs": counts["linked_docs"],
        "bytes_read": summary["read"],
        "work_bytes_written": counts["work_bytes_written"],
        "main_process_rss_mb": peak >> 20,
        "worker_rss_mb": children >> 20,
    }


if __name__ == "__main__":
    main()
