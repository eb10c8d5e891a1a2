"""A release at corpus scale (issue "Training-ready release"): planning 10^10 documents in
9,000,000 input files in bounded memory, and writing real shards against a plain copy of the
same bytes.

    uv run python benchmarks/bench_release.py [--files 9000000] [--documents 1e10]

Planning: the input files' document counts are simulated (a spread around the mean, summing to
``--documents``), held as a release holds them (`tokenmill.release.plan.InputFiles`: 16 bytes per
file); a group is shaped for 1,000,000,000-token shards at 1,000 tokens per document and split
into route tasks (`tokenmill.release.shards`), and for ``SAMPLED`` route tasks spread over the
release the positions of their documents are found (the permutation's inverse) with the shards
they feed — what a route task computes besides reading and writing. In a process of its own;
its peak RSS is its VmHWM.

Writing: a demo corpus (2 crawls x 8 files x ``--pages-per-file`` pages, 400; or, with
``--synthetic-gb G``, G GB of synthetic tokenized files of 20,000 documents) is tokenized and
released in shards of ``--shard-tokens`` (1,000,000), one process (`release` stage, one
worker), against reading every input `tokens.bin` and writing its bytes to a new file (a plain
copy; the same with each file fsynced, as the release's are; and the same written past the page
cache, as the release writes its shards, and fsynced: a direct copy). Wall seconds, one run
each, interleaved, ``BENCH_ROUNDS`` times (3): medians. The last line is one JSON object.

``--s3`` (with ``--synthetic-gb``): the lake is a bucket of a SeaweedFS server started here on
loopback (`testkit/servers.py`, stopped by PID at the end), and the copy reads each input object
and writes it back to the bucket under another key (an upload is as durable as it gets: the
fsync and direct columns repeat it).
"""

from __future__ import annotations

import argparse
import functools
import json
import math
import os
import shutil
import statistics
import tempfile
import time
from array import array
from pathlib import Path

import numpy as np

from benchmarks.measure import in_fresh_process, print_table
from benchmarks.results import record

SAMPLED = 8  # route tasks whose positions the planning benchmark finds
TOKENS_PER_DOCUMENT = 1000
SHARD_TOKENS = 1_000_000_000


def status_bytes(field: str) -> int:
    """A size from this process's /proc status: VmHWM, its peak RSS (ru_maxrss would count a
    parent's peak, kept across exec), or RssFile, the mapped file pages it holds."""
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith(f"{field}:"):
                return int(line.split()[1]) * 1024
    return 0


def peak_rss_bytes() -> int:
    return status_bytes("VmHWM")


def plan_at_scale(files: int, documents: int) -> dict:
    from tokenmill.release.permutation import Permutation
    from tokenmill.release.plan import Group, InputFiles, ReleaseSettings, shape_group
    from tokenmill.release.shards import (
        ROUTE_DOCUMENTS,
        TOKEN_CHUNK_BYTES,
        group_routes,
        shards_per_range,
    )

    started = time.perf_counter()
    rng = np.random.default_rng(0)
    counts = rng.integers(1, 2 * documents // files, size=files, dtype=np.int64)
    counts[-1] = max(1, counts[-1] + documents - int(counts.sum()))  # the total, about
    units = files // 100
    inputs = InputFiles(
        units=[f"CC-MAIN-SIM-{u // 900:03d}/{u:06d}" for u in range(units)],
        unit_of=array("i", (np.arange(files) // 100).astype(np.int32).tobytes()),
        part=array("i", (np.arange(files) % 100).astype(np.int32).tobytes()),
        documents=array("q", counts.tobytes()),
        tokens=documents * TOKENS_PER_DOCUMENT,
    )
    group = Group(inputs)
    shape_group(group, "all", 0, ReleaseSettings(shard_tokens=SHARD_TOKENS))
    planned = time.perf_counter() - started
    began = time.perf_counter()
    routes = group_routes("all", group, ROUTE_DOCUMENTS)
    routed = time.perf_counter() - began
    starts = inputs.starts()
    shuffle = Permutation(int(starts[-1]), group.seed)
    per_task = []
    for _, first, last in list(routes.values())[:: max(len(routes) // SAMPLED, 1)][:SAMPLED]:
        began = time.perf_counter()
        numbers = np.arange(starts[first], starts[last])
        positions = shuffle.position_of(numbers)
        shards = positions // group.per_shard
        assert shards.max() < group.shards
        per_task.append((time.perf_counter() - began, len(numbers), len(np.unique(shards))))
    token_bytes = documents * TOKENS_PER_DOCUMENT * 2
    per_range = shards_per_range(group.shards)
    ranges = -(-group.shards // per_range)
    return {
        "files": files,
        "documents": int(starts[-1]),
        "shards": group.shards,
        "documents_per_shard": group.per_shard,
        "plan_s": planned,
        "route_tasks": len(routes),
        "route_tasks_s": routed,
        "route_task_documents": int(statistics.median(n for _, n, _ in per_task)),
        "route_task_positions_s": [round(s, 3) for s, _, _ in per_task],
        "shards_a_route_task_feeds": int(statistics.median(k for _, _, k in per_task)),
        "routing_levels": 1 if per_range == 1 else 2,
        "first_level_ranges": ranges,
        # a shard reads a piece of each file its last level wrote for its range's shards
        "pieces_a_shard_reads": math.ceil(token_bytes / ranges / TOKEN_CHUNK_BYTES),
        "pieces_one_level_would_read": math.ceil(token_bytes / TOKEN_CHUNK_BYTES),
        "peak_rss_bytes": peak_rss_bytes(),
    }


def demo_corpus(root: Path, pages_per_file: int):
    from testkit.demo_pipeline import tokenized_demo_crawls

    crawls = {"CC-MAIN-BENCH-2026-01": 1, "CC-MAIN-BENCH-2026-02": 2}
    return tokenized_demo_crawls(root, crawls, files=8, pages_per_file=pages_per_file)


SYNTHETIC_FILE_DOCUMENTS = 20_000  # a tokenized file of a ~1 GB WARC file holds ~30-40k


def synthetic_corpus(root: Path, gigabytes: float, files_per_unit: int = 8, lake=None):
    """Tokenized units written directly (`benchmarks.lake_units`): uint16 tokens, documents of
    200-1,800 tokens, provenance rows as `tokenized_shards` writes them; two crawls."""
    import pyarrow as pa

    from benchmarks.lake_units import write_unit
    from tokenmill.storage.lake import Lake
    from tokenmill.storage.layout import TOKEN_PROVENANCE_SCHEMA, TOKENIZED_SHARDS, Unit
    from tokenmill.tokens.megatron import write_index

    lake = lake or Lake.from_url(str(root / "lake"))
    rng = np.random.default_rng(0)
    files = max(2, round(gigabytes * 1e9 / (SYNTHETIC_FILE_DOCUMENTS * 2_000)))

    def part(crawl: str, number: int):
        def write(out) -> None:
            lengths = rng.integers(200, 1_800, SYNTHETIC_FILE_DOCUMENTS)
            tokens = rng.integers(0, 2**16, int(lengths.sum()), dtype=np.uint16)
            out.open("tokens.bin").write(tokens.tobytes())
            write_index(out.open("tokens.idx"), lengths, np.dtype(np.uint16))
            ends = np.cumsum(lengths)
            n = len(lengths)
            ids = [f"{crawl}-{number}-{i}" for i in range(n)]
            table = pa.table(
                {
                    "doc_index": np.arange(n),
                    "doc_id": ids,
                    "crawl": [crawl] * n,
                    "source_file": [f"landing/{crawl}/{number:05d}.warc.gz"] * n,
                    "record_id": [f"<urn:uuid:{i}>" for i in ids],
                    "record_offset": np.arange(n) * 10_000,
                    "url": [f"https://example.org/{i}" for i in ids],
                    "language": ["en"] * n,
                    "token_start": ends - lengths,
                    "token_end": ends - 1,  # the end-of-document token is not the text's
                    "text_hash": rng.integers(0, 2**63, n, dtype=np.uint64),
                },
                schema=TOKEN_PROVENANCE_SCHEMA,
            )
            out.parquet("provenance.parquet", TOKEN_PROVENANCE_SCHEMA).write_table(table)
            out.report.records_out = n

        return write

    counts = {"tokenizer_sha256": "synthetic", "dtype": "uint16"}
    number = 0
    for crawl in ("CC-MAIN-SYNTH-2026-01", "CC-MAIN-SYNTH-2026-02"):
        for unit in range(max(1, files // 2 // files_per_unit)):
            parts = [part(crawl, number + i) for i in range(files_per_unit)]
            write_unit(lake, TOKENIZED_SHARDS, Unit(crawl, f"{unit:05d}"), parts, counts)
            number += files_per_unit
    return lake


def release_once(lake_url: str, shard_tokens: int, endpoint: str | None) -> tuple[float, int, int]:
    """Seconds of a release from scratch, the process's peak RSS and the mapped file pages it
    holds at the end (the input files a gathering release keeps mapped: page cache, counted in
    its RSS), in a fresh process."""
    from tokenmill.release.plan import ReleaseSettings
    from tokenmill.runtime.parts import run_stage_work
    from tokenmill.stages import stage_named
    from tokenmill.storage.lake import Lake

    lake = Lake.from_url(lake_url, endpoint_url=endpoint)
    lake.delete_prefix("release")
    started = time.perf_counter()
    run_stage_work(stage_named("release"), lake, ReleaseSettings(shard_tokens=shard_tokens, seed=1))
    return time.perf_counter() - started, peak_rss_bytes(), status_bytes("RssFile")


def copy_once(lake_url: str, target: Path, durable: bool, direct: bool = False):
    """Every input `tokens.bin` read and written to a new file; ``durable``: each fsynced, as
    the release's files are; ``direct``: written past the page cache, as the release writes
    its shards (`tokenmill.storage.direct_writes`), and fsynced."""
    from tokenmill.storage.direct_writes import open_direct

    shutil.rmtree(target, ignore_errors=True)
    target.mkdir(parents=True)
    sources = sorted(Path(lake_url).glob("tokenized_shards/*/*/*/tokens.bin"))
    started = time.perf_counter()
    copied = 0
    for number, source in enumerate(sources):
        with open(source, "rb") as f, open(target / f"{number}.bin", "wb") as out:
            data = f.read()
            appender = open_direct(out.name) if direct else None
            (appender or out).write(data)
            copied += len(data)
            if appender is not None:
                appender.close()
            if durable or direct:
                out.flush()
                os.fsync(out.fileno())
    return time.perf_counter() - started, copied


def copy_objects(lake) -> tuple[float, int]:
    """Every input `tokens.bin` object read and written back under another key."""
    sources = [key for key in lake.list("tokenized_shards") if key.endswith("/tokens.bin")]
    lake.delete_prefix("copy")
    started = time.perf_counter()
    copied = 0
    for number, key in enumerate(sources):
        data = lake.read_bytes(key)
        lake.write_bytes(f"copy/{number}.bin", data)
        copied += len(data)
    return time.perf_counter() - started, copied


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--files", type=int, default=9_000_000)
    parser.add_argument("--documents", type=float, default=1e10)
    parser.add_argument("--pages-per-file", type=int, default=400, help="of the demo corpus")
    parser.add_argument("--shard-tokens", type=int, default=1_000_000, help="of the release")
    parser.add_argument(
        "--synthetic-gb",
        type=float,
        help="release a synthetic tokenized corpus of this many GB of tokens instead of the demo's",
    )
    parser.add_argument("--s3", action="store_true", help="the lake in a local SeaweedFS bucket")
    arguments = parser.parse_args()
    if arguments.s3 and not arguments.synthetic_gb:
        parser.error("--s3 needs --synthetic-gb")
    rounds = int(os.environ.get("BENCH_ROUNDS", "3"))
    figures: dict = {"bench": "release"}
    work = functools.partial(plan_at_scale, arguments.files, int(arguments.documents))
    scale, _, _ = in_fresh_process(work)
    figures["planning"] = scale
    print_table(
        f"Planning a release of {scale['documents']:,} documents in {scale['files']:,} files "
        f"({SHARD_TOKENS:,}-token shards), in a process of its own",
        [
            "shards",
            "documents per shard",
            "plan s",
            "route tasks",
            "route tasks s",
            "median s per route task's positions",
            "shards a route task feeds",
            "routing levels",
            "pieces a shard reads (one level)",
            "peak RSS MiB",
        ],
        [
            [
                scale["shards"],
                scale["documents_per_shard"],
                scale["plan_s"],
                scale["route_tasks"],
                scale["route_tasks_s"],
                statistics.median(scale["route_task_positions_s"]),
                scale["shards_a_route_task_feeds"],
                scale["routing_levels"],
                f"{scale['pieces_a_shard_reads']:,} ({scale['pieces_one_level_would_read']:,})",
                scale["peak_rss_bytes"] / 2**20,
            ]
        ],
    )
    with tempfile.TemporaryDirectory() as scratch:
        root = Path(scratch)
        server = endpoint = None
        try:
            if arguments.s3:
                from testkit.servers import start_seaweedfs
                from tokenmill.storage.lake import Lake

                server = start_seaweedfs(root / "seaweedfs")
                os.environ.update(server.env())  # the release's process inherits them
                endpoint = server.endpoint
                lake = Lake.from_url(f"s3://{server.bucket}/bench", endpoint_url=endpoint)
                lake = synthetic_corpus(root, arguments.synthetic_gb, lake=lake)
            elif arguments.synthetic_gb:
                lake = synthetic_corpus(root, arguments.synthetic_gb)
            else:
                lake = demo_corpus(root, arguments.pages_per_file)
            url = lake.url
            releases, copies, durable, direct, copied, peaks, mapped = [], [], [], [], 0, [], []
            for _ in range(rounds):
                work = functools.partial(release_once, url, arguments.shard_tokens, endpoint)
                (took, peak, files), _, _ = in_fresh_process(work)
                releases.append(took)
                peaks.append(peak)
                mapped.append(files)
                if arguments.s3:
                    took, copied = copy_objects(lake)
                    copies.append(took)
                    durable.append(took)
                    direct.append(took)
                    continue
                took, copied = copy_once(url, root / "copy", durable=False)
                copies.append(took)
                durable.append(copy_once(url, root / "copy", durable=True)[0])
                direct.append(copy_once(url, root / "copy", durable=True, direct=True)[0])
            published = next(k for k in lake.list("release") if k.endswith("/_SUCCESS.json"))
            marker = lake.read_json(published)
        finally:
            if server is not None:
                from testkit.servers import stop

                stop(server.process)
    release_s, copy_s = statistics.median(releases), statistics.median(copies)
    durable_s, direct_s = statistics.median(durable), statistics.median(direct)
    figures["writing"] = {
        "lake": "s3 (SeaweedFS, loopback)" if arguments.s3 else "local",
        "input_bytes": copied,
        "release_s": releases,
        "copy_s": copies,
        "durable_copy_s": durable,
        "direct_copy_s": direct,
        "ratio": release_s / copy_s,
        "ratio_durable": release_s / durable_s,
        "ratio_direct": release_s / direct_s,
        "release_peak_rss_bytes": max(peaks),
        "release_mapped_file_bytes": max(mapped),
        "train_shards": marker["counts"]["train_shards"],
        "documents": marker["records_out"],
    }
    print_table(
        f"Writing a release of {marker['records_out']:,} documents ({copied / 1e6:.1f} MB of "
        f"tokens) in {marker['counts']['train_shards']} train shards, median of {rounds}",
        [
            "release s",
            "plain copy s",
            "copy + fsync s",
            "direct copy s",
            "release / copy",
            "release / copy + fsync",
            "release / direct copy",
            "release MB/s",
            "release peak RSS MiB",
            "of which mapped files MiB",
        ],
        [
            [
                release_s,
                copy_s,
                durable_s,
                direct_s,
                release_s / copy_s,
                release_s / durable_s,
                release_s / direct_s,
                copied / 1e6 / release_s,
                max(peaks) / 2**20,
                max(mapped) / 2**20,
            ]
        ],
    )
    limit = scale["peak_rss_bytes"] <= 2 * 2**30
    print(f"planning peak RSS <= 2 GiB: {'met' if limit else 'NOT met'}")
    print(json.dumps(figures))
    if arguments.synthetic_gb:
        data = f"synthetic tokenized files of {SYNTHETIC_FILE_DOCUMENTS:,} documents"
    else:
        data = f"a demo corpus, 2 crawls x 8 files x {arguments.pages_per_file} pages, tokenized"
    planned = f"{scale['documents']:,} simulated documents in {scale['files']:,} files"
    corpus = {
        "data": f"{data} (planning: {planned})",
        "documents": marker["records_out"],
        "token_bytes": copied,
    }
    record("bench_release", figures, corpus)


if __name__ == "__main__":
    main()
