"""Tokenization stage against bare `Tokenizer.encode_batch` on the same texts, and its peak memory
at 1x and 4x the file size.

    uv run python benchmarks/bench_tokenize.py [--mb 40]

Texts: the real Common Crawl documents of ../shared/corpora/text, repeated up to --mb MB into one
deduplicated file (a unit of one file, tokenized in this process); tokenizer:
../shared/tokenizers/gpt-neox-style-50k (both cores, as in production). Without ../shared,
demo-crawl articles and a trained tokenizer stand in.
"""

from __future__ import annotations

import argparse
import functools
import gzip
import json
import os
import tempfile
from pathlib import Path

import pyarrow as pa

from benchmarks.lake_units import write_unit
from benchmarks.measure import TABLES, in_fresh_process, print_table, timed
from benchmarks.results import record
from testkit.shared_data import shared_path
from tokenmill.runtime.parts import run_stage_work
from tokenmill.stages import stage_named
from tokenmill.storage.lake import Lake
from tokenmill.storage.layout import (
    DEDUPLICATED,
    DOC_SCHEMA,
    TOKENIZED_SHARDS,
    TOKENIZER,
    Unit,
)
from tokenmill.storage.outputs import PartitionWriter, read_batches
from tokenmill.tokens.tokenization import TOKENIZER_PATHS_ENV, TokenizerSettings, load_tokenizer

UNIT = Unit("CC-MAIN-BENCH", "00000")
DOCS_KEY = f"{UNIT.part_prefix(DEDUPLICATED, 0)}/docs.parquet"
BATCH = 1024


def source_texts() -> list[str]:
    corpus = shared_path("corpora", "text", "cc-main-2019-30-697docs.jsonl.gz")
    if corpus:
        with gzip.open(corpus, "rt") as f:
            return [json.loads(line)["text"] for line in f]
    from tokenmill.demo.crawl import sample_articles

    return sample_articles("en", 500, seed=1)


def write_file(lake: Lake, texts: list[str], megabytes: float) -> None:
    """A deduplicated unit of one file of about `megabytes` MB of text."""
    write_unit(lake, DEDUPLICATED, UNIT, [lambda out: write_docs(out, texts, megabytes)])


def write_docs(out: PartitionWriter, texts: list[str], megabytes: float) -> None:
    sink = out.parquet("docs.parquet", DOC_SCHEMA)
    total, count, rows = 0, 0, []
    while total < megabytes * 1e6:
        for text in texts:
            rows.append(
                {
                    "doc_id": f"{count:08d}",
                    "crawl": UNIT.crawl,
                    "unit": UNIT.name,
                    "part": 0,
                    "source_file": f"landing/{UNIT.crawl}/x.warc.gz",
                    "record_id": f"<urn:uuid:{count}>",
                    "record_offset": count,
                    "record_length": 1,
                    "url": f"https://example.com/{count}",
                    "warc_date": "2026-01-01T00:00:00Z",
                    "charset": "utf-8",
                    "language": "en",
                    "language_score": 1.0,
                    "text": text,
                }
            )
            total += len(text.encode())
            count += 1
            if len(rows) == BATCH:
                sink.write_table(pa.Table.from_pylist(rows, DOC_SCHEMA))
                rows = []
    if rows:
        sink.write_table(pa.Table.from_pylist(rows, DOC_SCHEMA))
    out.report.records_in = out.report.records_out = count


def prepare(root: Path, megabytes: float, tokenizer_path: str | None) -> Lake:
    lake = Lake.from_url(str(root))
    write_file(lake, source_texts(), megabytes)
    settings = TokenizerSettings(path=tokenizer_path, vocab_size=32000, sample_mb=8)
    run_stage_work(stage_named(TOKENIZER), lake, settings)
    return lake


def bare_encode(lake_root: str) -> int:
    """What the stage must at least do: read the texts and `encode_batch` them."""
    lake = Lake.from_url(lake_root)
    tokenizer, _ = load_tokenizer(lake)
    tokens = 0
    for batch in read_batches(lake, DOCS_KEY, ["text"], BATCH):
        encodings = tokenizer.encode_batch_fast(batch.column("text").to_pylist())
        tokens += sum(len(e.ids) for e in encodings)
    return tokens


def stage(lake_root: str) -> int:
    """The stage on the unit, its one file in this process (as a worker process runs it)."""
    lake = Lake.from_url(lake_root)
    return run_stage_work(stage_named(TOKENIZED_SHARDS), lake, unit=UNIT, workers=1).counts[
        "tokens"
    ]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--mb", type=float, default=40, help="file size (1x) in MB of text")
    args = parser.parse_args()
    neox = shared_path("tokenizers", "gpt-neox-style-50k.tokenizer.json")
    if neox:  # a tokenizer outside the lake is read only from an allowed location
        os.environ[TOKENIZER_PATHS_ENV] = str(Path(neox).parent)
    rows, memory = [], []
    with tempfile.TemporaryDirectory() as scratch:
        for scale in (1, 4):
            lake = prepare(Path(scratch, f"x{scale}"), args.mb * scale, str(neox) if neox else None)
            megabytes = lake.read_json(f"{UNIT.prefix(DEDUPLICATED)}/_SUCCESS.json")
            megabytes = megabytes["outputs"]["00000/docs.parquet"]["bytes"] / 1e6
            if scale == 1:
                # Interleaved, three rounds each, best of three: the machine is shared and noisy.
                bare_s, stage_s = [], []
                for _ in range(3):
                    bare_tokens, seconds = timed(functools.partial(bare_encode, lake.url))
                    bare_s.append(seconds)
                    stage_tokens, seconds = timed(functools.partial(stage, lake.url))
                    stage_s.append(seconds)
                text_mb = args.mb
                rows.append(["bare encode_batch", text_mb / min(bare_s), bare_tokens, min(bare_s)])
                rows.append(
                    ["tokenized_shards", text_mb / min(stage_s), stage_tokens, min(stage_s)]
                )
                ratio = min(bare_s) / min(stage_s)
            _, seconds, peak = in_fresh_process(functools.partial(stage, lake.url))
            memory.append(
                [f"{scale}x", f"{args.mb * scale:.0f}", f"{megabytes:.1f}", seconds, peak / 2**20]
            )
    print_table(
        f"Tokenization throughput ({'gpt-neox-style-50k' if neox else 'trained BPE'}, "
        f"{args.mb:.0f} MB of text, both cores, best of 3)",
        ["run", "MB/s", "tokens", "seconds"],
        rows,
    )
    print(f"\nstage / bare throughput: {ratio:.1%} (target >= 90%)")
    print_table(
        "Peak RSS of the tokenization stage (fresh process each)",
        ["file", "text MB", "parquet MB", "seconds", "peak RSS MiB"],
        memory,
    )
    texts = {
        "data": "../shared's Common Crawl documents, repeated"
        if shared_path("corpora", "text")
        else "demo-crawl articles, repeated",
        "text_mb": args.mb,
        "tokenizer": "gpt-neox-style-50k" if neox else "trained BPE",
    }
    record("bench_tokenize", TABLES | {"stage / bare throughput": ratio}, texts)


if __name__ == "__main__":
    main()
